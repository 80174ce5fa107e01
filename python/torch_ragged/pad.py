"""numpy.pad for tensors: every numpy mode, any rank, CPU and CUDA, differentiable.

``torch_ragged.pad(input, pad_width, mode="constant", **kwargs)`` takes numpy.pad's arguments and
returns numpy >= 2.1's result (docs/pad.md lists the rules it matches). The op underneath,
``torch.ops.torch_ragged.pad(input, pad_width, mode, constant_values, end_values, stat_length,
reflect_type)``, takes the already broadcast forms (flat ``(before, after)`` per axis) and is what
TorchScript and C++ callers use.
"""

import torch

__all__ = ["pad"]

# numpy.pad's table of the keywords each mode takes, plus F.pad's names for edge and wrap.
_MODE_KEYWORDS = {
    "constant": ("constant_values",),
    "empty": (),
    "edge": (),
    "wrap": (),
    "replicate": (),
    "circular": (),
    "linear_ramp": ("end_values",),
    "maximum": ("stat_length",),
    "mean": ("stat_length",),
    "median": ("stat_length",),
    "minimum": ("stat_length",),
    "reflect": ("reflect_type",),
    "symmetric": ("reflect_type",),
}
_INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def _as_tensor(value, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"torch_ragged.pad: {name} must be a number or (before, after) pairs, got {value!r}") from error
    if tensor.is_floating_point():  # keep Python floats exact (torch would make them float32)
        tensor = torch.as_tensor(value, dtype=torch.float64)
    return tensor


def _as_pairs(value, ndim: int, name: str, as_index: bool = False) -> torch.Tensor:
    """numpy's ``_as_pairs``: ``value`` broadcast to one (before, after) pair per axis, shape (ndim, 2)."""
    tensor = _as_tensor(value, name)
    if as_index:
        tensor = tensor.round().long() if tensor.is_floating_point() else tensor.long()
    if tensor.dim() < 3:
        if tensor.numel() == 1:  # one value for every side of every axis
            tensor = tensor.reshape(1).expand(2)
        elif tensor.numel() == 2 and tuple(tensor.shape) != (2, 1):  # (before, after) for every axis
            tensor = tensor.reshape(2)
    if as_index and tensor.numel() > 0 and bool((tensor < 0).any()):
        raise ValueError(f"torch_ragged.pad: {name} can't contain negative values, got {value!r}")
    try:
        return tensor.broadcast_to((ndim, 2))
    except RuntimeError as error:
        raise ValueError(
            f"torch_ragged.pad: {name} must broadcast to one (before, after) pair per axis, shape ({ndim}, 2); "
            f"got shape {tuple(tensor.shape)}"
        ) from error


def pad(input, pad_width, mode: str = "constant", **kwargs) -> torch.Tensor:
    """Pads ``input`` as ``numpy.pad(input, pad_width, mode, **kwargs)`` does, on the input's device.

    Modes: ``constant`` (``constant_values``), ``edge``, ``linear_ramp`` (``end_values``), ``maximum``,
    ``mean``, ``median``, ``minimum`` (``stat_length``), ``reflect``, ``symmetric`` (``reflect_type``
    "even" / "odd"), ``wrap``, ``empty``; ``replicate`` and ``circular`` are F.pad's names for edge and
    wrap. ``pad_width``, ``constant_values``, ``end_values`` and ``stat_length`` take numpy's forms: a
    scalar, ``(before, after)``, ``((before, after),)`` or one pair per axis. Differentiable w.r.t.
    ``input`` and tensor ``constant_values`` / ``end_values``.

    >>> import torch, torch_ragged
    >>> torch_ragged.pad(torch.tensor([1, 2, 4]), 2, "reflect", reflect_type="odd")
    tensor([-2,  0,  1,  2,  4,  6,  7])
    """
    if callable(mode):
        raise TypeError("torch_ragged.pad: mode must be a string; numpy's callable modes are not supported")
    if not isinstance(mode, str) or mode not in _MODE_KEYWORDS:
        raise ValueError(f"torch_ragged.pad: mode '{mode}' is not supported")
    unsupported = sorted(set(kwargs) - set(_MODE_KEYWORDS[mode]))
    if unsupported:
        raise ValueError(f"torch_ragged.pad: unsupported keyword arguments for mode '{mode}': {unsupported}")
    if not isinstance(input, torch.Tensor):
        input = torch.as_tensor(input)
    widths = _as_tensor(pad_width, "pad_width")
    if widths.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"torch_ragged.pad: pad_width must be of integral type, got {widths.dtype}")
    ndim = input.dim()
    flat_widths = _as_pairs(widths, ndim, "pad_width", as_index=True).reshape(-1).tolist()

    def pairs(name):
        value = kwargs.get(name)
        return None if value is None else _as_pairs(value, ndim, name)

    stat_length = kwargs.get("stat_length")
    if stat_length is not None:
        stat_length = _as_pairs(stat_length, ndim, "stat_length", as_index=True).reshape(-1).tolist()
    return torch.ops.torch_ragged.pad(
        input,
        flat_widths,
        mode,
        pairs("constant_values"),
        pairs("end_values"),
        stat_length,
        kwargs.get("reflect_type"),
    )
