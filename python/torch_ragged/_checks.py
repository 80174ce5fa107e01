"""Argument normalisation shared by the wrappers: integer lists and tensors, checked instead of truncated."""

import operator
from collections.abc import Sequence

import torch


def integer_tensor(where: str, arg: str, values) -> torch.Tensor:
    """``values`` as a tensor of integers: an integer tensor as given, a (nested) sequence of ints as int64.

    ``torch.tensor([0, 2.5, 5], dtype=torch.long)`` would silently truncate 2.5 to 2, and a bool tensor would read as
    0 / 1: both are refused with a TypeError naming ``where`` and ``arg``. A tensor keeps its device."""
    if isinstance(values, torch.Tensor):
        tensor = values
    else:
        try:
            tensor = torch.as_tensor(values)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"torch_ragged.{where}: {arg} must be an integer tensor or a sequence of ints, got "
                            f"{values!r} ({error})") from None
    if not isinstance(values, torch.Tensor) and tensor.numel() == 0:
        return tensor.long()  # [] reads as float32
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        shown = values if not isinstance(values, torch.Tensor) else f"a {tensor.dtype} tensor"
        raise TypeError(f"torch_ragged.{where}: {arg} must hold integers, got {shown}")
    return tensor if isinstance(values, torch.Tensor) else tensor.long()


def index_tensor(where: str, arg: str, value: torch.Tensor) -> torch.Tensor:
    """An index argument of a public function: a tensor as given (its op checks it), a sequence of ints through
    `integer_tensor` in eager calls. TorchScript compiles only the tensor path (``is_scripting`` is static there), so
    the public functions that call this stay scriptable."""
    if not torch.jit.is_scripting():
        if isinstance(value, Sequence):
            return integer_tensor(where, arg, value)
    return value


def int_list(where: str, arg: str, values, *, none_as=None) -> list[int]:
    """``values`` (an int, a sequence of ints, or an integer tensor) as a list of Python ints. Entries that are not
    integers (2.5, True, "3") raise a TypeError naming ``where`` and ``arg``; None entries become ``none_as`` where
    that is given."""
    if isinstance(values, torch.Tensor):
        return integer_tensor(where, arg, values).reshape(-1).tolist()
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    out = []
    for item in items:
        if item is None and none_as is not None:
            out.append(none_as)
            continue
        if isinstance(item, torch.Tensor) and item.dim() == 0:
            item = integer_tensor(where, arg, item).item()
        if isinstance(item, bool) or not isinstance(item, (int, torch.SymInt)) and not hasattr(item, "__index__"):
            raise TypeError(f"torch_ragged.{where}: {arg} must hold integers, got {values!r}")
        out.append(item if isinstance(item, (int, torch.SymInt)) else operator.index(item))  # numpy ints
    return out


def checked_extremum(cls, values, index):
    """``cls(values, index)`` (a NamedTuple of an extremum and the int64 row holding it) as a loaded file gives it
    back: checked as the op would have made it, so torch.load(weights_only=True) builds nothing else."""
    name, index_name = cls.__name__, cls._fields[1]
    if not isinstance(values, torch.Tensor) or not isinstance(index, torch.Tensor):
        raise TypeError(f"torch_ragged.{name}: values and {index_name} must be tensors, got "
                        f"{type(values).__name__} and {type(index).__name__}")
    if index.dtype != torch.int64 or index.shape != values.shape:
        raise ValueError(f"torch_ragged.{name}: {index_name} must be int64 of values' shape {tuple(values.shape)}, "
                         f"got {index.dtype} of shape {tuple(index.shape)}")
    return cls(values, index)
