"""numpy.pad for tensors: every numpy mode, any rank, CPU and CUDA, differentiable.

``torch_ragged.pad(input, pad_width, mode="constant", **kwargs)`` takes numpy.pad's arguments and
returns numpy >= 2.1's result (the pad guide of the docs site lists the rules it matches). The op underneath,
``torch.ops.torch_ragged.pad(input, pad_width, mode, constant_values, end_values, stat_length,
reflect_type)``, takes the already broadcast forms (flat ``(before, after)`` per axis) and is what
TorchScript and C++ callers use.
"""

import itertools
import math
import numbers
import struct
import warnings

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
    except (TypeError, ValueError, RuntimeError):  # e.g. a Python int beyond int64 (2**64), a float to numpy
        tensor = _as_float64(value, name)
    if tensor.is_floating_point():  # keep Python floats exact (torch would make them float32)
        tensor = torch.as_tensor(value, dtype=torch.float64)
    return tensor


def _as_float64(value, name: str) -> torch.Tensor:
    try:
        return torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"torch_ragged.pad: {name} must be numbers or (before, after) pairs, got {value!r}") from error


def _pairs_form(shape, ndim: int, name: str) -> str:
    """How numpy's ``_as_pairs`` reads an argument of this shape: "scalar" (every side of every axis),
    "pair" ((before, after) for every axis) or "broadcast" (to (ndim, 2)); raises if it does not fit."""
    shape = tuple(shape)
    if len(shape) > 2:  # numpy's broadcast_to message for this case
        raise ValueError(f"torch_ragged.pad: input operand has more dimensions than allowed by the axis remapping: "
                         f"{name} must broadcast to one (before, after) pair per axis, shape ({ndim}, 2); got shape "
                         f"{shape}")
    size = 1
    for extent in shape:
        size *= extent
    if len(shape) < 3 and size == 1:
        return "scalar"
    if len(shape) < 3 and size == 2 and shape != (2, 1):
        return "pair"
    trailing = zip(reversed(shape), (2, ndim), strict=False)  # numpy broadcasting from the last dim
    if len(shape) <= 2 and all(extent in (1, target) for extent, target in trailing):
        return "broadcast"
    raise ValueError(
        f"torch_ragged.pad: operands could not be broadcast together: {name} must broadcast to one "
        f"(before, after) pair per axis, shape ({ndim}, 2); "
        f"got shape {shape}"
    )


def _nested_shape(value, name: str) -> tuple:
    """The shape numpy gives ``value`` (a tensor or array, a nested sequence, or a scalar of any type), without
    reading its entries as numbers."""
    if hasattr(value, "shape") and not isinstance(value, (list, tuple)):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        shapes = {_nested_shape(item, name) for item in value}
        if len(shapes) > 1:
            raise ValueError(f"torch_ragged.pad: {name} is ragged (an inhomogeneous shape): {value!r}")
        return (len(value), *(shapes.pop() if shapes else ()))
    return ()


def _as_pairs(value, ndim: int, name: str) -> torch.Tensor:
    """``value`` (number, pair, pairs or tensor) as an (ndim, 2) tensor, still differentiable."""
    tensor = _as_tensor(value, name)
    form = _pairs_form(tensor.shape, ndim, name)
    if form == "scalar":
        tensor = tensor.reshape(1).expand(2)
    elif form == "pair":
        tensor = tensor.reshape(2)
    return tensor.broadcast_to((ndim, 2))


def _shape_and_leaves(value, name: str):
    """Shape, flat values and whether they are integers, of a number / nested sequence / tensor / array,
    read without creating tensors for Python input (torch.compile then sees constants)."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:  # numpy scalars: exact (uint64 too)
        item = value.item()
        return (), [item], isinstance(item, int) and not isinstance(item, bool)
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):  # tensors, numpy arrays
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        return tuple(tensor.shape), tensor.reshape(-1).tolist(), tensor.dtype in _INTEGER_DTYPES

    def number(item):
        """A Python number from a number, a numpy scalar or a 0-d tensor / array (numpy accepts all)."""
        if isinstance(item, numbers.Real):
            return item.item() if hasattr(item, "item") else item
        if hasattr(item, "item") and getattr(item, "ndim", None) == 0:
            return item.item()
        raise TypeError(f"torch_ragged.pad: {name} must hold numbers, got {item!r}")

    def shape_of(item):
        if isinstance(item, (list, tuple)):
            shapes = {shape_of(child) for child in item}
            if len(shapes) > 1:
                raise ValueError(f"torch_ragged.pad: {name} is ragged: {value!r}")
            return (len(item), *(shapes.pop() if shapes else ()))
        number(item)
        return ()

    def flatten(item):
        return [leaf for child in item for leaf in flatten(child)] if isinstance(item, (list, tuple)) else [
            number(item)]

    leaves = flatten(value)
    integral = bool(leaves) and all(isinstance(v, int) and not isinstance(v, bool) for v in leaves)
    return shape_of(value), leaves, integral


def _numpy_integer_constant(value, dtype: torch.dtype, numpy_scalar: bool):
    """numpy.pad's conversion of one constant into an integer or bool array (numpy 2.4's setitem rules, measured;
    issue 16 item 3). bool takes truthiness (NaN is True); floats truncate toward zero. numpy stores a scalar or
    (before, after) constant as a numpy scalar (`numpy_scalar`), any other form as Python numbers (`tolist`):
    Python numbers and numpy scalars into signed dtypes raise OverflowError out of range (NaN: ValueError; inf:
    OverflowError); numpy scalars into unsigned dtypes wrap modulo 2**bits (-1 on uint8 is 255, 300 is 44), NaN /
    inf give 0 (2**63 on uint64: the C conversion), and only ints outside [-2**63, 2**64) overflow."""
    if dtype == torch.bool:
        return bool(value)
    info = torch.iinfo(dtype)
    name = str(dtype).removeprefix("torch.")
    signed = info.min < 0 or not numpy_scalar  # Python numbers: checked like signed ones
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            if signed:
                kind, what = (ValueError, "NaN") if math.isnan(value) else (OverflowError, "infinity")
                raise kind(f"torch_ragged.pad: cannot convert float {what} to integer (constant_values, {name})")
            return 2**63 if info.bits == 64 else 0
        value = int(value)
    if signed and not info.min <= value <= info.max or not signed and not -2**63 <= value < 2**64:
        raise OverflowError(f"torch_ragged.pad: Python integer {value} out of bounds for {name} (constant_values)")
    return value if signed else value % 2**info.bits


def _strings_parsed(value, dtype: torch.dtype):
    """constant_values with its string entries read as numpy reads a string it writes into an array of ``dtype``:
    a bool is whether the string is non-empty, a number is parsed (int(), float(), complex(): ' 7 ' is 7, 'nan' NaN);
    a string that does not parse raises ValueError, as numpy's, even where no side is padded."""
    if isinstance(value, (list, tuple)):
        return type(value)(_strings_parsed(item, dtype) for item in value)
    if not isinstance(value, str):
        return value
    if dtype == torch.bool:
        return len(value) > 0
    parse = complex if dtype.is_complex else float if dtype.is_floating_point else int
    try:
        number = parse(value)
    except ValueError as error:
        raise ValueError(f"torch_ragged.pad: constant_values holds {value!r}, which does not parse as a {dtype} "
                         f"value ({error})") from None
    # a parsed integer is a Python number: out of the dtype's range it overflows, in every form
    return number if parse is not int else _numpy_integer_constant(number, dtype, numpy_scalar=False)


def _numpy_integer_constants(value, dtype: torch.dtype, ndim: int) -> torch.Tensor:
    """constant_values (numbers, pairs, numpy values) converted for an integer / bool input as numpy does."""
    shape, leaves, _ = _shape_and_leaves(value, "constant_values")
    numpy_scalar = _pairs_form(shape, ndim, "constant_values") in ("scalar", "pair")
    converted = [_numpy_integer_constant(v, dtype, numpy_scalar) for v in leaves]
    return torch.tensor(converted, dtype=dtype).reshape(shape)


def _as_weak_float(value: float, dtype: torch.dtype) -> float:
    """A Python float rounded once to ``dtype``, as numpy converts a weak Python scalar (torch's own cast to float16
    goes through float32, which rounds twice); out of range gives inf, as numpy."""
    if dtype in (torch.float16, torch.complex32):
        try:
            return struct.unpack("e", struct.pack("e", value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    return value


def _numpy_end_values(value, dtype: torch.dtype, ndim: int):
    """end_values in the type numpy ramps with. numpy reads a scalar or (before, after) end value as a numpy scalar
    (float64 / int64: the ramp computes in float64, as the op does with them) but one pair per axis as Python numbers
    (``tolist``), which take a float input's own type (NEP 50 weak scalars): those come back cast to it, so the op
    ramps in float32 / float16 there, as numpy does (issue 16 item 6)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return value  # integer inputs ramp in float64 in every form
    if isinstance(value, torch.Tensor):
        shape = tuple(value.shape)
        return value.to(dtype) if _pairs_form(shape, ndim, "end_values") == "broadcast" else value
    shape, leaves, _ = _shape_and_leaves(value, "end_values")
    if _pairs_form(shape, ndim, "end_values") != "broadcast":
        return value
    return torch.tensor([_as_weak_float(float(v), dtype) for v in leaves], dtype=dtype).reshape(shape)


def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _numeric_end_values(value, input: torch.Tensor):
    """numpy computes the ramp in the input's dtype even when nothing is padded: a string end value fails its dtype
    promotion (numpy.exceptions.DTypePromotionError, a TypeError) whatever the widths."""
    if any(isinstance(leaf, (str, bytes)) for leaf in _leaves(value)):
        raise TypeError(f"torch_ragged.pad: end_values must be numbers: the DType of {value!r} could not be promoted "
                        f"by {input.dtype} (numpy raises DTypePromotionError)")
    return value


def _without_imaginary_part(value, input: torch.Tensor, name: str):
    """A complex constant / end value for a real input: numpy warns (ComplexWarning) and keeps the real part, also
    when nothing is padded."""
    if input.is_complex() or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, torch.Tensor):
        complex_value = value.is_complex()
    else:
        complex_value = any(isinstance(leaf, complex) or getattr(getattr(leaf, "dtype", None), "kind", "") == "c"
                            for leaf in _leaves(value))
    if not complex_value:
        return value
    warnings.warn(f"torch_ragged.pad: Casting complex values to real discards the imaginary part ({name})",
                  stacklevel=3)
    return value.real if isinstance(value, torch.Tensor) else torch.as_tensor(value, dtype=torch.complex128).real


def _dict_pad_width(pad_width: dict, ndim: int) -> list:
    """numpy >= 2.3's ``{axis: width}`` form (negative axes too; unnamed axes are not padded) as one pair per axis."""
    pairs = [(0, 0)] * ndim
    for axis, width in pad_width.items():
        if not isinstance(axis, numbers.Integral) or not -ndim <= axis < ndim:
            raise ValueError(f"torch_ragged.pad: pad_width's axis {axis!r} is out of bounds for a {ndim}-d input")
        shape, leaves, _ = _shape_and_leaves(width, "pad_width")
        if len(leaves) not in (1, 2) or len(shape) > 1:
            raise ValueError(f"torch_ragged.pad: pad_width[{axis}] must be a width or a (before, after) pair, "
                             f"got {width!r}")
        pairs[axis % ndim] = tuple(leaves * 2 if len(leaves) == 1 else leaves)
    return pairs


def _index_pairs(value, ndim: int, name: str, integral_only: bool) -> list:
    """numpy's ``_as_pairs(..., as_index=True)``: a flat [before_0, after_0, before_1, ...] list of ints >= 0."""
    integral_type_error = TypeError(f"torch_ragged.pad: `{name}` must be of integral type. Got {value!r}")
    try:
        shape, leaves, integral = _shape_and_leaves(value, name)
    except (TypeError, ValueError, RuntimeError):  # strings, None, objects, object / str arrays
        if integral_only:
            raise integral_type_error from None
        raise
    if integral_only and not integral:  # numpy's message, backticks and all (numpy's tests match it)
        raise integral_type_error
    # round() is half to even, as numpy's; NaN / inf become numpy's negative intp (INT_MIN), refused below
    leaves = [int(round(v)) if math.isfinite(v) else -1 for v in leaves]
    form = _pairs_form(shape, ndim, name)
    if any(v < 0 for v in leaves):
        raise ValueError(f"torch_ragged.pad: index can't contain negative values: {name} can't contain negative "
                         f"values, got {value!r}")
    if form == "scalar":
        return leaves * (2 * ndim)
    if form == "pair":
        return leaves * ndim
    rows = [leaves[i:i + shape[-1]] for i in range(0, len(leaves), shape[-1])] if len(shape) == 2 else [leaves]
    rows = [row * 2 if len(row) == 1 else row for row in rows]
    return [v for row in (rows * ndim if len(rows) == 1 else rows) for v in row]


def _plain_flat_widths(pad_width, ndim: int) -> list | None:
    """The flat widths of pad_width's plain forms -- an int, a (before, after) pair of ints, or one such pair per
    axis, every width a non-negative Python int -- as `_flat_pad_width` gives them; None for any other form (numpy
    scalars, tensors, dicts, negative widths, ...: the general parsing takes those, and raises where numpy does)."""
    # Written out (no generator expressions, no all()): this runs on every call, and each generator costs ~0.3 us.
    kind = type(pad_width)
    if kind is int:
        return [pad_width] * (2 * ndim) if pad_width >= 0 else None
    if kind is not tuple and kind is not list:
        return None
    if len(pad_width) == 2:
        before, after = pad_width
        if type(before) is int and type(after) is int and before >= 0 and after >= 0:
            return [before, after] * ndim
    if len(pad_width) != ndim:
        return None
    flat = []
    for pair in pad_width:
        kind = type(pair)
        if (kind is not tuple and kind is not list) or len(pair) != 2:
            return None
        before, after = pair
        if type(before) is not int or type(after) is not int or before < 0 or after < 0:
            return None
        flat.append(before)
        flat.append(after)
    return flat


def _flat_pad_width(pad_width, ndim: int) -> list:
    if isinstance(pad_width, dict):
        pad_width = _dict_pad_width(pad_width, ndim)
    return _index_pairs(pad_width, ndim, "pad_width", integral_only=True)


def _pad_with_function(input, pad_width, function, kwargs) -> torch.Tensor:
    """numpy's legacy mode: a function ``function(vector, (before, after), axis, kwargs)``. The input is padded with
    zeros, then the function is called on every 1-D line of the result along each axis in turn (axis 0 first), with
    the line as a view it fills in place (numpy passes the same arguments, the line as an ndarray view)."""
    if not isinstance(input, torch.Tensor):
        input = torch.as_tensor(input)
    widths = _flat_pad_width(pad_width, input.dim())
    padded = torch.ops.torch_ragged.pad(input, widths, "constant", None, None, None, None)
    for axis in range(padded.dim()):
        lines = padded.movedim(axis, -1)
        for position in itertools.product(*(range(extent) for extent in lines.shape[:-1])):
            function(lines[position], (widths[2 * axis], widths[2 * axis + 1]), axis, kwargs)
    return padded


class _Unset:
    """The default of pad's mode keywords: numpy tells a keyword left out from one given (a mode that does not
    take it refuses it even at its default value)."""

    def __repr__(self) -> str:
        return "<not given>"


_UNSET = _Unset()


def pad(input, pad_width, mode: str = "constant", *, constant_values=_UNSET, end_values=_UNSET,
        stat_length=_UNSET, reflect_type=_UNSET, **vector_function_kwargs) -> torch.Tensor:
    """Pads ``input`` as ``numpy.pad(input, pad_width, mode, **kwargs)`` does, on the input's device.

    Modes: ``constant`` (``constant_values``), ``edge``, ``linear_ramp`` (``end_values``), ``maximum``,
    ``mean``, ``median``, ``minimum`` (``stat_length``), ``reflect``, ``symmetric`` (``reflect_type``
    "even" / "odd"), ``wrap``, ``empty``; ``replicate`` and ``circular`` are F.pad's names for edge and
    wrap. ``pad_width``, ``constant_values``, ``end_values`` and ``stat_length`` take numpy's forms: a
    scalar, ``(before, after)``, ``((before, after),)`` or one pair per axis (numbers, numpy scalars or 0-d
    tensors); ``pad_width`` also takes numpy 2.3's ``{axis: width or (before, after)}``. Differentiable w.r.t.
    ``input`` and tensor ``constant_values`` / ``end_values``.

    ``mode`` may also be numpy's legacy vector function ``f(vector, (before, after), axis, kwargs)``: the input
    is zero-padded, then ``f`` fills every 1-D line of the result in place, axis by axis (a Python loop over
    the lines: for small inputs and numpy compatibility).

    The keywords, each refused by the modes that do not take it (as numpy refuses it): ``constant_values``
    (constant; default 0), ``end_values`` (linear_ramp; default 0), ``stat_length`` (maximum, mean, median,
    minimum; default the whole axis), ``reflect_type`` (reflect, symmetric; default "even").
    ``vector_function_kwargs`` go to a vector function ``mode`` (with any of the keywords above that were given).

    Args:
        input: the tensor to pad (any rank, dtype and device; a DTensor is padded shard by shard).
        pad_width: numpy's forms: an int (every side of every axis), ``(before, after)`` (every axis), ``((before,
            after),)``, one pair per axis, or ``((w0,), (w1,), ...)``; ints >= 0 (SymInts under torch.compile / export).
        mode: ``"constant"`` (default), ``"edge"`` / ``"replicate"``, ``"wrap"`` / ``"circular"``, ``"reflect"``,
            ``"symmetric"``, ``"linear_ramp"``, ``"maximum"``, ``"minimum"``, ``"mean"``, ``"median"``, ``"empty"``, or
            a numpy vector function ``f(vector, (before, after), axis, kwargs)``.
        constant_values: ``constant`` mode's values in numpy's forms (scalar, pair, pair per axis) or a tensor broadcast
            to ``(ndim, 2)`` (then differentiable); default 0.
        end_values: ``linear_ramp``'s end values, in the same forms as ``constant_values``; default 0.
        stat_length: the number of edge elements ``maximum`` / ``minimum`` / ``mean`` / ``median`` use, in
            ``pad_width``'s forms (``None``: the whole axis).
        reflect_type: ``"even"`` (default) or ``"odd"`` for ``reflect`` / ``symmetric`` (odd: ``2 * edge -
            reflection``).
        **vector_function_kwargs: the keyword arguments passed to a vector-function ``mode`` (numpy passes
            ``**kwargs``).

    >>> import torch, torch_ragged
    >>> torch_ragged.pad(torch.tensor([1, 2, 4]), 2, "reflect", reflect_type="odd")
    tensor([-2,  0,  1,  2,  4,  6,  7])
    """
    if (type(input) is torch.Tensor and constant_values is _UNSET and end_values is _UNSET and stat_length is _UNSET
            and reflect_type is _UNSET and not vector_function_kwargs and type(mode) is str and mode in _MODE_KEYWORDS
            and input.dim() > 0):
        widths = _plain_flat_widths(pad_width, input.dim())
        if widths is not None:  # the common call, without the general parsing below (per-call cost)
            return torch.ops.torch_ragged.pad(input, widths, mode)
    given = {"constant_values": constant_values, "end_values": end_values, "stat_length": stat_length,
             "reflect_type": reflect_type}
    kwargs = {name: value for name, value in given.items() if value is not _UNSET} | vector_function_kwargs
    if callable(mode):
        return _pad_with_function(input, pad_width, mode, kwargs)
    if not isinstance(mode, str) or mode not in _MODE_KEYWORDS:
        raise ValueError(f"torch_ragged.pad: mode '{mode}' is not supported")
    unsupported = sorted(set(kwargs) - set(_MODE_KEYWORDS[mode]))
    if unsupported:
        raise ValueError(f"torch_ragged.pad: unsupported keyword arguments for mode '{mode}': {unsupported}")
    if not isinstance(input, torch.Tensor):
        input = torch.as_tensor(input)
    ndim = input.dim()
    flat_widths = _flat_pad_width(pad_width, ndim)
    if input.numel() == 0 and mode not in ("constant", "empty"):
        # numpy returns an empty array's padding (zero-size) without reading the mode's keywords; padding an empty
        # axis is still an error, raised by the op.
        kwargs = {}
    if ndim == 0:  # numpy pads no axis of a 0-d array and uses none of the values: only their shapes are checked
        for name in ("constant_values", "end_values"):
            if kwargs.get(name) is not None:
                _pairs_form(_nested_shape(kwargs[name], name), 0, name)
        kwargs = {name: value for name, value in kwargs.items() if name == "stat_length"}

    if mode == "constant" and kwargs.get("constant_values") is not None:
        kwargs = {**kwargs, "constant_values": _strings_parsed(kwargs["constant_values"], input.dtype)}
    if mode == "constant" and kwargs.get("constant_values") is not None and not torch.is_floating_point(input) \
            and not torch.is_complex(input) and not isinstance(kwargs["constant_values"], torch.Tensor):
        kwargs = {**kwargs, "constant_values": _numpy_integer_constants(kwargs["constant_values"], input.dtype,
                                                                               ndim)}

    if mode == "linear_ramp" and kwargs.get("end_values") is not None:
        end_values = _without_imaginary_part(_numeric_end_values(kwargs["end_values"], input), input, "end_values")
        kwargs = {**kwargs, "end_values": _numpy_end_values(end_values, input.dtype, ndim)}
    if mode == "constant" and kwargs.get("constant_values") is not None:
        kwargs = {**kwargs, "constant_values": _without_imaginary_part(kwargs["constant_values"], input,
                                                                       "constant_values")}

    if "reflect_type" in kwargs:  # numpy reads any value other than "odd" (a string or not) as "even"
        kwargs = {**kwargs, "reflect_type": "odd" if isinstance(kwargs["reflect_type"], str)
                  and kwargs["reflect_type"] == "odd" else "even"}

    def pairs(name):
        value = kwargs.get(name)
        return None if value is None else _as_pairs(value, ndim, name)

    stat_length = kwargs.get("stat_length")
    if stat_length is not None:
        stat_length = _index_pairs(stat_length, ndim, "stat_length", integral_only=False)

    def pad_tensor(tensor, widths):
        return torch.ops.torch_ragged.pad(tensor, widths, mode, pairs("constant_values"), pairs("end_values"),
                                          stat_length, kwargs.get("reflect_type"))

    if _is_dtensor(input):  # sharded: see torch_ragged.distributed.pad_dtensor
        from .distributed import pad_dtensor

        return pad_dtensor(input, flat_widths, mode, kwargs.get("reflect_type") == "odd", pad_tensor)
    return pad_tensor(input, flat_widths)


def _is_dtensor(value) -> bool:
    if type(value) is torch.Tensor or not torch.distributed.is_available():
        return False
    from torch.distributed.tensor import DTensor

    return isinstance(value, DTensor)
