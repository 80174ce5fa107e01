"""Containers for ragged data: `RaggedTensor` (one packed buffer) and `LazyStack` (records kept
separate, read through the library's kernels), plus `RaggedCollate` for ``torch.utils.data.DataLoader``.

A RaggedTensor holds B members of shapes ``(*s_b, *feature)``: ``k`` leading *ragged* dims ``s_b`` whose sizes
differ from member to member (k = 1 for point clouds and token sequences, k = 2 for images of different sizes)
and common ``feature`` dims. They live in one packed buffer ``values (rows, *feature)`` with rows = sum_b
prod(s_b), member b at rows ``first_idx[b]:first_idx[b + 1]``; ``shape_per_tensor (B, k)`` keeps each member's
ragged sizes (Kaolin's layout). ``first_idx`` and ``shape_per_tensor`` are small int64 tensors kept on the CPU
(reading them never synchronises a GPU); ``values`` lives on any device.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence
from typing import NamedTuple

import torch
import torch.utils._pytree as pytree
from torch.utils.data._utils import collate as torch_collate

from ._checks import checked_extremum, int_list, integer_tensor

# The API page lists these in this order: the main class first.
__all__ = ["RaggedTensor", "MemberExtremum", "LazyStack", "collate", "RaggedCollate"]

_ops = torch.ops.torch_ragged
_EVERY_MEMBER = slice(None)  # r[:, ...]


def _error(kind, where: str, message: str):
    return kind(f"torch_ragged.{where}: {message}")


class MemberExtremum(NamedTuple):
    """``RaggedTensor.max()`` / ``min()``: each member's extremum and the row holding it, counted from the
    member's first row (-1 for an empty member). `segment_max` gives packed rows instead (``arg``).

    Args:
        values: ``(B, *feature)`` tensor: each member's extremum per feature column (0 for an empty member).
        row_in_member: ``(B, *feature)`` int64 tensor: the row holding it, counted from the member's first row (-1 for
            an empty member).
    """

    values: torch.Tensor
    row_in_member: torch.Tensor

    def __reduce__(self):  # loaded through a check (torch.load(weights_only=True) allows both names)
        return _load_member_extremum, (self.values, self.row_in_member)


def _load_member_extremum(values, row_in_member) -> MemberExtremum:
    return checked_extremum(MemberExtremum, values, row_in_member)


# ---- elementwise functions: which torch functions act on the packed values ----

_NOT_ELEMENTWISE, _ELEMENTWISE, _ELEMENTWISE_IN_PLACE, _ROW_WISE, _METHOD = 0, 1, 2, 3, 4

# torch functions RaggedTensor has as methods, with torch's arguments: torch.mean(r, 1) is r.mean(1) (per member
# over the ragged dims, or along feature dims), F.softmax(r, dim=1) is r.softmax(1).
_METHOD_FUNCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "softmax", "log_softmax", "cumsum",
                               "cumprod", "cummax", "cummin", "logcumsumexp"})

# Functions that map each packed row to one output row on their own (the feature dims only), with the
# RaggedTensor as their first argument and dense parameters after it: layers apply to the values.
_ROW_WISE_FUNCTIONS = frozenset({
    "linear", "embedding", "layer_norm", "rms_norm", "matmul", "dropout", "alpha_dropout", "hardswish",
    "hardsigmoid", "logsigmoid", "softsign", "tanhshrink", "threshold", "rrelu", "glu"})
# Of those, the ones that act on the feature dims as a block (they need at least one).
_NEEDS_FEATURE_DIMS = frozenset({"linear", "layer_norm", "rms_norm", "matmul", "glu"})


def _constant_result(fn):
    """``torch.compiler.assume_constant_result`` without its import of torch._dynamo (~1.5 s at import time): it sets
    this one attribute, which torch.compile reads when it traces (tests/python/test_container.py checks that torch's
    decorator still sets exactly this)."""
    fn._dynamo_marked_constant = True
    return fn


@_constant_result  # torch.compile calls it eagerly: a fact about torch, not about data
def _function_kind(func) -> int:
    name = getattr(func, "__name__", "")
    if name in _ROW_WISE_FUNCTIONS:
        return _ROW_WISE
    if name in _METHOD_FUNCTIONS:
        return _METHOD
    if not _is_pointwise_op(name):
        return _NOT_ELEMENTWISE
    return _ELEMENTWISE_IN_PLACE if name.endswith("_") and not name.endswith("__") else _ELEMENTWISE


@_constant_result
def _is_elementwise_method(name: str) -> bool:
    return not name.startswith("_") and _is_pointwise_op(name) and hasattr(torch.Tensor, name)


@functools.cache
def _is_pointwise_op(name: str) -> bool:
    """Whether the aten op called `name` is tagged pointwise (then it maps values to values row by row)."""
    candidates = [name]
    if name.startswith("__") and name.endswith("__"):
        bare = name[2:-2]
        # __radd__ -> add, __iadd__ -> add_
        candidates = [bare, bare[1:] if bare.startswith("r") else bare,
                      bare[1:] + "_" if bare.startswith("i") else bare]
    for candidate in candidates:
        packet = getattr(torch.ops.aten, candidate, None)
        if packet is not None and any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads()):
            return True
    return False


def _elementwise(func, args, kwargs, in_place: bool):
    """func over the values of the RaggedTensors among args (one structure), the result rewrapped."""
    template = next(a for a in pytree.tree_leaves((args, kwargs), is_leaf=_is_ragged) if _is_ragged(a))

    def unwrap(a):
        if not isinstance(a, RaggedTensor):
            _check_dense_operand(template, a)
            return a
        if a is not template and not template._same_structure(a):
            raise _error(ValueError, "RaggedTensor", "elementwise math needs RaggedTensors of one structure (the "
                         "same members' shapes)")
        return a.values

    out = func(*pytree.tree_map(unwrap, args, is_leaf=_is_ragged),
               **pytree.tree_map(unwrap, kwargs, is_leaf=_is_ragged))
    if in_place:  # the values changed; the object is the same
        return args[0]
    rows = template.values.shape[0]
    return pytree.tree_map(
        lambda t: template.with_values(t) if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == rows
        else t, out)


def _check_dense_operand(template: RaggedTensor, a) -> None:
    """A dense tensor may broadcast over the feature dims only: one whose dims reach the packed rows would
    line up with rows, not members (``r + r.mean()``), and is refused rather than silently misapplied."""
    if not isinstance(a, torch.Tensor) or a.dim() < template.values.dim():
        return
    if a.dim() == template.values.dim() and a.shape[0] == 1:
        return
    raise _error(ValueError, "RaggedTensor", f"a dense operand of shape {tuple(a.shape)} reaches the packed rows "
                 f"{tuple(template.values.shape)}, so it would not broadcast per member; a per-member tensor "
                 "(B, *feature) broadcasts with r.broadcast_members(t), per-row data goes through "
                 "r.with_values(...)")


def _as_method(func, args, kwargs):
    """torch.<name>(r, ...) as r.<name>(...): a ``dtype`` casts the values first (as torch's does), F.softmax's
    ``_stacklevel`` is dropped."""
    name = func.__name__
    where = f"RaggedTensor ({name})"
    if not args or not isinstance(args[0], RaggedTensor):
        raise _error(TypeError, where, f"{name} applies to a RaggedTensor as its input (first argument) only")
    if name in ("max", "min") and len(args) > 1 and isinstance(args[1], torch.Tensor | RaggedTensor):
        raise _error(TypeError, where, f"torch.{name}(a, b) of two operands is elementwise: use torch.{name}imum "
                     f"(torch.{name}(r, dim) reduces)")
    kwargs = {k: v for k, v in kwargs.items() if k != "_stacklevel"}
    dtype = kwargs.pop("dtype", None)
    ragged = args[0] if dtype is None else args[0].to(dtype)
    return getattr(ragged, name)(*args[1:], **kwargs)


def _row_wise(func, args, kwargs):
    """A layer (linear, embedding, layer_norm, dropout, ...) over the values of its first argument."""
    name = func.__name__
    where = f"RaggedTensor ({name})"
    if not args or not isinstance(args[0], RaggedTensor):
        if name == "matmul" and torch.compiler.is_compiling():
            # torch.compile hands `r @ w` and `w @ r` over alike, as Tensor.matmul(w, r) (dynamo's builtin
            # handler swaps the operands of `@` when the left one is not a tensor): neither can be told apart here.
            raise _error(TypeError, where, "under torch.compile, `r @ w` reaches RaggedTensor as w.matmul(r), "
                         "the same call as `w @ r`; write torch.matmul(r, w) or F.linear(r, w.t()), which compile")
        raise _error(TypeError, where, f"{name} applies to a RaggedTensor as its input (first argument) only")
    ragged = args[0]
    others = [a for a in pytree.tree_leaves((args[1:], kwargs), is_leaf=_is_ragged) if _is_ragged(a)]
    if others:
        raise _error(TypeError, where, f"{name} takes one RaggedTensor, its input; the other operands must be dense")
    if name in _NEEDS_FEATURE_DIMS and ragged.values.dim() < 2:
        raise _error(ValueError, where, f"{name} acts on the feature dims, but the members have none (shape "
                     "(*ragged)); give them a feature dim, e.g. r.unsqueeze(-1)")
    if name == "matmul" and (len(args) < 2 or not isinstance(args[1], torch.Tensor) or args[1].dim() > 2):
        raise _error(ValueError, where, "r @ w needs a dense right operand of 1 or 2 dims (a batch of matrices "
                     "would broadcast against the packed rows)")
    if name in ("layer_norm", "rms_norm"):
        normalized = args[1] if len(args) > 1 else kwargs.get("normalized_shape")
        count = 1 if isinstance(normalized, int) else len(normalized)
        if count > ragged.values.dim() - 1:
            raise _error(ValueError, where, f"normalized_shape {normalized} must cover feature dims only (the "
                         f"members' feature shape is {tuple(ragged.feature_shape)})")
    out = func(ragged.values, *args[1:], **kwargs)
    if kwargs.get("inplace", False):
        return ragged
    return ragged.with_values(out)


def _binary(func, reflected: bool = False):
    if reflected:
        return lambda self, other: _elementwise(func, (other, self), {}, False)
    return lambda self, other: _elementwise(func, (self, other), {}, False)


def _unary(func):
    return lambda self: _elementwise(func, (self,), {}, False)


class RaggedTensor:
    """B tensors of shapes ``(*s_b, *feature)`` in one packed buffer; see the module docstring.

    Build one with `from_list`, `from_padded`, `from_packed` or `from_nested`.
    Read it as `padded`, `values` (packed), `list` (views), `to_nested` (zero copy) or
    `mask`. ``r[i]`` is member i (a view), ``r[a:b]`` a view, ``r[index]`` a copy (one kernel).
    Elementwise torch functions and operators apply to the values; `sum`, `mean`, `amax`,
    `amin` reduce each member to ``(B, *feature)``; `softmax` / `log_softmax` normalise within
    each member. Everything is differentiable through ``values``.

    Args:
        values: ``(rows, *feature)`` tensor: the members' rows, packed.
        first_idx: (B + 1,) int64 tensor on the CPU: member b is rows ``first_idx[b]:first_idx[b + 1]`` of ``values``.
        shape_per_tensor: (B, k) int64 tensor on the CPU: each member's ragged sizes, whose products are the row
            counts (``None``: one ragged dim, the row counts).
        validate: check that the offsets and shapes agree with each other and with ``values``.
    """

    def __init__(self, values: torch.Tensor, first_idx: torch.Tensor, shape_per_tensor: torch.Tensor | None = None,
                 *, validate: bool = True):
        if validate:
            values, first_idx, shape_per_tensor = _checked_parts(values, first_idx, shape_per_tensor)
        elif shape_per_tensor is None:
            shape_per_tensor = first_idx.diff().unsqueeze(1)
        self._values = values
        self._first_idx = first_idx
        self._shape_per_tensor = shape_per_tensor
        self._pending: list[torch.Tensor] = []  # members appended since the last read (packed lazily)
        self._offsets_list: list[int] | None = None

    # ---- constructors ----

    @classmethod
    def from_list(cls, tensors: Sequence[torch.Tensor], ragged_dims: int = 1) -> RaggedTensor:
        """Packs tensors of shapes ``(*s_b, *feature)`` (``ragged_dims`` = len(s_b)) with one copy.

        Args:
            tensors: a list of B tensors of shapes ``(*s_b, *feature)``: one dtype, device and feature shape.
            ragged_dims: how many leading dims differ between members (default 1).
        """
        where = "RaggedTensor.from_list"
        tensors = list(tensors)
        if not tensors:
            raise _error(ValueError, where, "tensors must hold at least one tensor (the dtype and feature shape of "
                         "an empty batch are unknown); build an empty one with from_packed")
        _check_ragged_dims(where, ragged_dims)
        first = tensors[0]
        if isinstance(first, torch.Tensor) and first.dim() == ragged_dims + 1:
            # One feature dim: Kaolin's list_to_packed (a C++ loop, checks included) is the whole job.
            try:
                values, shapes = _ops.list_to_packed(tensors)
            except (RuntimeError, TypeError, ValueError):
                _check_members(where, "tensors", tensors, ragged_dims)  # names the culprit, else:
                raise
            return cls(values, _first_idx_of(shapes), shapes, validate=False)
        _check_members(where, "tensors", tensors, ragged_dims)
        feature = first.shape[ragged_dims:]
        values = torch.cat([t.reshape(-1, *feature) for t in tensors])
        shapes = torch.tensor([t.shape[:ragged_dims] for t in tensors], dtype=torch.long).view(len(tensors),
                                                                                                 ragged_dims)
        return cls(values, _first_idx_of(shapes), shapes, validate=False)

    @classmethod
    def from_padded(cls, padded: torch.Tensor, lengths: torch.Tensor | Sequence, padding_side: str = "right"
                    ) -> RaggedTensor:
        """From ``padded (B, *M, *feature)`` and the members' sizes: ``lengths`` (B,) for one ragged dim, or
        ``(B, k)`` for k ragged dims (Kaolin's shape_per_tensor).

        Args:
            padded: ``(B, *max_shape, *feature)`` tensor: the members padded.
            lengths: (B,) int64 tensor or list: each member's size along the one ragged dim; or (B, k) for k ragged
                dims.
            padding_side: where the members lie in ``padded``: ``"right"`` (from index 0) or ``"left"`` (ending at the
                last index).
        """
        where = "RaggedTensor.from_padded"
        shapes = integer_tensor(where, "lengths", lengths).to("cpu", torch.long)
        if shapes.dim() == 1:
            shapes = shapes.unsqueeze(1)
        if shapes.dim() != 2:
            raise _error(ValueError, where, f"lengths must be (B,) or (B, k), got shape {tuple(shapes.shape)}")
        k = shapes.shape[1]
        if not isinstance(padded, torch.Tensor) or padded.dim() < 1 + k or padded.shape[0] != shapes.shape[0]:
            raise _error(ValueError, where, f"padded must be a tensor (B = {shapes.shape[0]}, *max_shape ({k} dims), "
                         f"*feature), got {_describe(padded)}")
        feature = padded.shape[1 + k:]
        flat = padded.reshape(*padded.shape[:1 + k], math.prod(feature))
        rows = int(shapes.prod(1).sum()) if not _is_symbolic(shapes) else None
        values = _ops.padded_to_packed(flat, shapes, padding_side, rows)
        return cls(values.view(-1, *feature), _first_idx_of(shapes), shapes, validate=False)

    @classmethod
    def from_packed(cls, values: torch.Tensor, first_idx: torch.Tensor | Sequence | None = None, *,
                    lengths: torch.Tensor | Sequence | None = None,
                    shape_per_tensor: torch.Tensor | None = None) -> RaggedTensor:
        """From ``values (rows, *feature)`` and either ``first_idx`` (B + 1 offsets) or ``lengths`` (B rows
        each); ``shape_per_tensor (B, k)`` gives members k ragged dims (default: one, of their row counts).

        Args:
            values: ``(rows, *feature)`` tensor: the members' rows, packed.
            first_idx: (B + 1,) int64 offsets (``None``: from ``shape_per_tensor`` or ``lengths``).
            lengths: (B,) int64 tensor or list: each member's row count (one ragged dim).
            shape_per_tensor: (B, k) int64 tensor on the CPU: each member's ragged sizes (``None``: one ragged dim, from
                ``first_idx``).
        """
        where = "RaggedTensor.from_packed"
        if (first_idx is None) == (lengths is None):
            raise _error(ValueError, where, "give exactly one of first_idx and lengths")
        if lengths is not None:
            counts = integer_tensor(where, "lengths", lengths).to("cpu", torch.long)
            if counts.dim() != 1:
                raise _error(ValueError, where, f"lengths must be a 1-D integer sequence, got {_describe(counts)}")
            first_idx = _ops.get_first_idx(counts, True)
        return cls(values, torch.as_tensor(first_idx), shape_per_tensor)

    @classmethod
    def from_nested(cls, nested: torch.Tensor) -> RaggedTensor:
        """From a ``torch.nested`` jagged tensor (layout ``torch.jagged``, ragged dim 1): shares its values.

        Args:
            nested: a torch.nested tensor of layout torch.jagged whose dim 1 is ragged.
        """
        where = "RaggedTensor.from_nested"
        if not isinstance(nested, torch.Tensor) or not nested.is_nested or nested.layout != torch.jagged:
            raise _error(TypeError, where, f"nested must be a torch.jagged nested tensor, got {_describe(nested)}")
        if nested._ragged_idx != 1:
            raise _error(ValueError, where, f"the ragged dim must be dim 1, got dim {nested._ragged_idx}")
        offsets = nested.offsets().to("cpu", torch.long)
        return cls(nested.values(), offsets, None, validate=False)

    # ---- structure ----

    @property
    def values(self) -> torch.Tensor:
        """The packed buffer ``(rows, *feature)``."""
        self._pack_pending()
        return self._values

    @property
    def first_idx(self) -> torch.Tensor:
        """``(B + 1,)`` int64 on the CPU: member b is ``values[first_idx[b]:first_idx[b + 1]]``."""
        self._pack_pending()
        return self._first_idx

    @property
    def shape_per_tensor(self) -> torch.Tensor:
        """``(B, k)`` int64 on the CPU: each member's ragged sizes."""
        self._pack_pending()
        return self._shape_per_tensor

    @property
    def lengths(self) -> torch.Tensor:
        """Rows per member, ``(B,)`` int64 on the CPU."""
        return self.first_idx.diff()

    @property
    def ragged_dims(self) -> int:
        """k: the number of leading dims of each member whose sizes vary (``shape_per_tensor`` has k columns)."""
        return self._shape_per_tensor.shape[1]

    @property
    def feature_shape(self) -> torch.Size:
        """The trailing dims every member shares: ``values.shape[1:]``."""
        return self._values.shape[1:]

    @property
    def dtype(self) -> torch.dtype:
        """The values' dtype."""
        return self._values.dtype

    @property
    def device(self) -> torch.device:
        """The values' device."""
        return self._values.device

    @property
    def requires_grad(self) -> bool:
        """Whether the values require grad."""
        return self._values.requires_grad

    @property
    def shape(self) -> torch.Size:
        """``(B, *ragged, *feature)`` with -1 for each ragged dim whose size differs between members."""
        spt = self.shape_per_tensor
        ragged = [int(col[0]) if len(col) and bool((col == col[0]).all()) else -1 for col in spt.unbind(1)]
        return torch.Size([len(self), *ragged, *self.feature_shape])

    # Not a torch nested tensor (modules such as nn.MultiheadAttention ask before choosing a path).
    is_nested = False

    def size(self, dim: int | None = None):
        """``shape`` (``(B, *ragged, *feature)``, -1 where members differ), or its entry ``dim``.

        Args:
            dim: the dim whose size to return (``None``: every size, -1 where the members differ).
        """
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        """1 + k + len(feature_shape): the batch dim, the k ragged dims and the feature dims."""
        return 1 + self.ragged_dims + len(self.feature_shape)

    ndim = property(dim)

    def __len__(self) -> int:
        return self._shape_per_tensor.shape[0] + len(self._pending)

    def numel(self) -> int:
        """The number of elements stored (the values'; no padding)."""
        return self.values.numel()

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        lengths = self.lengths.tolist() if len(self) <= 8 else "..."
        return (f"RaggedTensor(shape={tuple(self.shape)}, lengths={lengths}, "
                f"dtype={self.dtype}, device={self.device}{grad})")

    def _offsets(self) -> list[int]:
        self._pack_pending()
        if self._offsets_list is None:
            self._offsets_list = self._first_idx.tolist()
        return self._offsets_list

    def _member_shape(self, b: int) -> list[int]:
        return [*self._shape_per_tensor[b].tolist(), *self.feature_shape]

    def with_values(self, values: torch.Tensor) -> RaggedTensor:
        """The same members' structure over new values ``(rows, *any feature)``.

        Args:
            values: ``(rows, *feature')`` tensor: new values with this layout's row count (the feature shape may
                change).
        """
        if not isinstance(values, torch.Tensor) or values.dim() < 1 or values.shape[0] != self.values.shape[0]:
            raise _error(ValueError, "RaggedTensor.with_values", f"values must have {self.values.shape[0]} rows, "
                         f"got {_describe(values)}")
        return RaggedTensor(values, self._first_idx, self._shape_per_tensor, validate=False)

    # ---- views ----

    def packed(self) -> torch.Tensor:
        """The packed buffer ``(rows, *feature)`` (Kaolin's packed tensor when feature is one dim)."""
        return self.values

    def padded(self, padding_value=0, max_shape=None, padding_side: str = "right") -> torch.Tensor:
        """``(B, *max_shape, *feature)``, members at the start (``"right"``) or the end (``"left"``) of every
        ragged dim; ``max_shape`` entries None / -1 take the largest member's size (never truncates).

        Args:
            padding_value: the value written where no member is.
            max_shape: sizes of the padded ragged dims (a list of ints, one per ragged dim; None / -1 entries take the
                largest member size); ``None``: the largest member sizes. Never smaller than a member.
            padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members
                end at the last index).
        """
        values = self.values
        feature = values.shape[1:]
        flat = values.reshape(values.shape[0], math.prod(feature))
        if max_shape is not None:
            max_shape = int_list("RaggedTensor.padded", "max_shape", max_shape, none_as=-1)
        out = _ops.packed_to_padded(flat, self._shape_per_tensor, self._first_idx, padding_value, max_shape,
                                    padding_side)
        return out.view(*out.shape[:-1], *feature)

    def list(self) -> list[torch.Tensor]:
        """The members, as views of the values."""
        offsets = self._offsets()
        counts = [hi - lo for lo, hi in zip(offsets, offsets[1:], strict=False)]
        parts = self._values.split(counts)
        if self.ragged_dims == 1:
            return list(parts)
        return [part.view(self._member_shape(b)) for b, part in enumerate(parts)]

    def __iter__(self):
        return iter(self.list())

    def to_nested(self) -> torch.Tensor:
        """A ``torch.jagged`` nested tensor sharing the values (one ragged dim only), ``max_seqlen`` set."""
        if self.ragged_dims != 1:
            raise _error(ValueError, "RaggedTensor.to_nested", "torch.nested's jagged layout has one ragged dim; this "
                         f"RaggedTensor has {self.ragged_dims} (read it with padded() or list())")
        lengths = self.lengths
        return torch.nested.nested_tensor_from_jagged(
            self._values, self._first_idx.to(self._values.device),
            min_seqlen=int(lengths.min()) if len(lengths) else 0, max_seqlen=int(lengths.max()) if len(lengths) else 0)

    def mask(self, max_shape=None, padding_side: str = "right") -> torch.Tensor:
        """``(B, *max_shape)`` bool: True where `padded` holds a member's element.

        Args:
            max_shape: sizes of the padded ragged dims (a list of ints, one per ragged dim; None / -1 entries take the
                largest member size); ``None``: the largest member sizes. Never smaller than a member.
            padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members
                end at the last index).
        """
        where = "RaggedTensor.mask"
        if padding_side not in ("right", "left"):
            raise _error(ValueError, where, f'padding_side must be "right" or "left", got "{padding_side}"')
        spt = self.shape_per_tensor
        largest = spt.amax(0).tolist() if len(spt) else [0] * self.ragged_dims
        if max_shape is not None and len(max_shape) != self.ragged_dims:
            raise _error(ValueError, where, f"max_shape must have one entry per ragged dim ({self.ragged_dims}), got "
                         f"{list(max_shape)}")
        sizes = largest if max_shape is None else [
            m if m not in (None, -1) else d for m, d in zip(max_shape, largest, strict=False)]
        if len(sizes) != self.ragged_dims or any(m < d for m, d in zip(sizes, largest, strict=False)):
            raise _error(ValueError, where, f"max_shape must have {self.ragged_dims} entries, each >= the largest "
                         f"member's size {largest}, got {list(max_shape)}")
        spt = spt.to(self.device)
        mask = torch.ones((len(spt),) + (1,) * len(sizes), dtype=torch.bool, device=self.device)
        for d, size in enumerate(sizes):
            positions = torch.arange(size, device=self.device).view([1] * (d + 1) + [size] + [1] * (len(sizes) - d - 1))
            extent = spt[:, d].view([-1] + [1] * len(sizes))
            inside = positions < extent if padding_side == "right" else positions >= size - extent
            mask = mask & inside
        return mask

    def padding_mask(self, max_shape=None, padding_side: str = "right") -> torch.Tensor:
        """``(B, *max_shape)`` bool: True on **padding** — what ``nn.MultiheadAttention``'s ``key_padding_mask`` and
        ``nn.TransformerEncoder``'s ``src_key_padding_mask`` want. `mask` is its complement (True on elements).

        Args:
            max_shape: sizes of the padded ragged dims (a list of ints, one per ragged dim; None / -1 entries take the
                largest member size); ``None``: the largest member sizes. Never smaller than a member.
            padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members
                end at the last index).
        """
        return ~self.mask(max_shape, padding_side)

    # ---- recurrent layers: torch.nn.utils.rnn.PackedSequence ----

    def to_packed_sequence(self) -> torch.nn.utils.rnn.PackedSequence:
        """The members as a ``PackedSequence`` for ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``: equal to
        ``pack_padded_sequence(r.padded(), r.lengths, batch_first=True, enforce_sorted=False)``, built by one
        gather of the values (no padded tensor). One ragged dim (time), no empty member."""
        where = "RaggedTensor.to_packed_sequence"
        if self.ragged_dims != 1:
            raise _error(ValueError, where, f"a PackedSequence has one ragged dim (time), this RaggedTensor has "
                         f"{self.ragged_dims}")
        lengths = self.lengths.to("cpu", torch.long)
        if len(lengths) == 0 or bool((lengths == 0).any()):
            raise _error(ValueError, where, "every member needs at least one row (as pack_padded_sequence); "
                         f"lengths are {lengths.tolist()}")
        sorted_lengths, sorted_indices = torch.sort(lengths, descending=True)  # torch's own call: the same ties
        # batch_sizes[t]: the members longer than t.
        batch_sizes = torch.bincount(sorted_lengths - 1, minlength=int(sorted_lengths[0])).flip(0).cumsum(0).flip(0)
        rows = _packed_sequence_rows(self.first_idx, sorted_indices, batch_sizes).to(self.device)
        sorted_indices = sorted_indices.to(self.device)
        unsorted_indices = torch.empty_like(sorted_indices)
        unsorted_indices[sorted_indices] = torch.arange(len(sorted_indices), device=self.device)
        return torch.nn.utils.rnn.PackedSequence(self.values.index_select(0, rows), batch_sizes, sorted_indices,
                                                 unsorted_indices)

    @classmethod
    def from_packed_sequence(cls, sequence: torch.nn.utils.rnn.PackedSequence) -> RaggedTensor:
        """The members of a ``PackedSequence`` (an RNN's output, say), in their original order (its
        ``sorted_indices``; none: already in order): the inverse of `to_packed_sequence`, one gather of
        ``sequence.data``.

        Args:
            sequence: a torch.nn.utils.rnn.PackedSequence.
        """
        where = "RaggedTensor.from_packed_sequence"
        if not isinstance(sequence, torch.nn.utils.rnn.PackedSequence):
            raise _error(TypeError, where, f"sequence must be a PackedSequence, got {_describe(sequence)}")
        batch_sizes = sequence.batch_sizes.to("cpu", torch.long)
        count = int(batch_sizes[0]) if len(batch_sizes) else 0
        sorted_indices = (torch.arange(count) if sequence.sorted_indices is None
                          else sequence.sorted_indices.to("cpu", torch.long))
        # The member ranked r in the sort is present at the steps whose batch size exceeds r.
        sorted_lengths = (batch_sizes.unsqueeze(0) > torch.arange(count).unsqueeze(1)).sum(1)
        lengths = torch.empty_like(sorted_lengths)
        lengths[sorted_indices] = sorted_lengths
        shapes = lengths.unsqueeze(1)
        first_idx = _first_idx_of(shapes)
        rows = _packed_sequence_rows(first_idx, sorted_indices, batch_sizes)  # data row i -> packed row rows[i]
        positions = torch.empty_like(rows)
        positions[rows] = torch.arange(len(rows))
        data = sequence.data
        return cls(data.index_select(0, positions.to(data.device)), first_idx, shapes, validate=False)

    # ---- indexing ----

    def __getitem__(self, key):
        """``r[i]``: member i, ``(*s_i, *feature)``, a view of the values; ``r[i, ...]`` indexes into it.
        ``r[a:b]``: members a..b-1, a RaggedTensor viewing the values. ``r[index]`` (a list, a 1-D integer or
        bool tensor, a strided slice): those members packed into a new RaggedTensor by one kernel (repeats and
        negative indices allowed). Along the ragged dim (one ragged dim): ``r[:, i]`` is row i of every member,
        ``(B, *feature)`` (negative i counts from each member's end; IndexError naming a member too short);
        ``r[:, a:b]`` (step >= 1) keeps rows a..b-1 of every member, clipped to its length as Python slices are:
        a RaggedTensor. Keys after those index the feature dims.

        Args:
            key: what to take: an int, a slice, a list / 1-D integer or bool tensor of members, or a tuple indexing
                members then rows / features.
        """
        if type(key) is tuple and len(key) == 2 and type(key[1]) is int and type(key[0]) is slice \
                and key[0] == _EVERY_MEMBER \
                and self._shape_per_tensor.shape[1] == 1:  # r[:, i], the common case, without the dispatch below
            values = self.values
            return _ops.segment_row(values, self._first_idx, key[1])
        if isinstance(key, tuple):
            if len(key) >= 2 and isinstance(key[0], slice):  # r[:, i], r[:, a:b], r[a:b, i, ...]
                members = self if key[0] == slice(None) else self[key[0]]
                return members._along_ragged_dim(key[1], key[2:])
            if not key or not isinstance(key[0], numbers.Integral):
                raise _error(TypeError, "RaggedTensor.__getitem__", "a tuple key must start with a member index "
                             f"(an int) or a slice of members, got {key!r}")
            return self[key[0]][key[1:]]
        if isinstance(key, numbers.Integral) or (isinstance(key, torch.Tensor) and key.dim() == 0
                                                   and not key.dtype.is_floating_point and key.dtype != torch.bool):
            return self._member(int(key))
        if isinstance(key, slice) and key.step in (None, 1):
            return self._slice(*key.indices(len(self))[:2])
        return self.index_select(_index_tensor(key, len(self)))

    def _along_ragged_dim(self, key, feature_key: tuple):
        where = "RaggedTensor.__getitem__"
        if self.ragged_dims != 1:
            raise _error(ValueError, where, f"r[:, ...] indexes the one ragged dim; this RaggedTensor has "
                         f"{self.ragged_dims} ragged dims")
        values = self.values
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            picked = _ops.segment_row(values, self._first_idx, key)  # checks every member has the row
            return picked[(slice(None), *feature_key)] if feature_key else picked
        if not isinstance(key, slice):
            raise _error(TypeError, where, f"the ragged dim takes an int or a slice, got {_describe(key)}")
        step = 1 if key.step is None else key.step
        if not isinstance(step, numbers.Integral) or step < 1:
            raise _error(ValueError, where, f"a slice of the ragged dim needs a step >= 1, got {key.step!r}")
        # each member sliced as a Python sequence, the kept rows packed by one op
        kept, first_idx = _ops.segment_slice(values, self._first_idx, key.start, key.stop, step)
        shapes = first_idx.diff().unsqueeze(1).to("cpu")
        first_idx = first_idx.to(self._first_idx.device)
        return RaggedTensor(kept[(slice(None), *feature_key)], first_idx, shapes, validate=False)

    def _member(self, i: int) -> torch.Tensor:
        n = len(self)
        if not -n <= i < n:
            raise _error(IndexError, "RaggedTensor.__getitem__", f"index {i} is out of range for {n} members")
        i %= n
        offsets = self._offsets()
        return self._values[offsets[i]:offsets[i + 1]].view(self._member_shape(i))

    def _slice(self, start: int, stop: int) -> RaggedTensor:
        stop = max(start, stop)
        offsets = self._offsets()
        values = self._values[offsets[start]:offsets[stop]]
        first_idx = self._first_idx[start:stop + 1] - offsets[start]
        return RaggedTensor(values, first_idx, self._shape_per_tensor[start:stop], validate=False)

    def index_select(self, index: torch.Tensor) -> RaggedTensor:
        """Members ``index`` (1-D integer, negatives count from the end, repeats allowed), packed by one kernel.

        Args:
            index: 1-D integer tensor or list of member positions (negative counts from the end; repeats allowed).
        """
        self._pack_pending()
        values, first_idx = _ops.ragged_index_select(self._values, self._first_idx, index)
        picks = index.to("cpu", torch.long)
        if len(self):  # in [-len, len): the op checked; % wraps the negatives (one op, not a compare and a where)
            picks = picks % len(self)
        return RaggedTensor(values, first_idx, self._shape_per_tensor.index_select(0, picks), validate=False)

    # ---- growing ----

    def append(self, member: torch.Tensor) -> None:
        """Adds a member; it is packed (with every other pending one, in one copy) on the next read.

        Args:
            member: a tensor of shape ``(*s, *feature)``: the new member.
        """
        self.extend([member])

    def extend(self, members) -> None:
        """Adds members (tensors, or a RaggedTensor's members); packed in one copy on the next read.

        Args:
            members: an iterable of tensors of shape ``(*s, *feature)``, or a RaggedTensor (its members).
        """
        members = members.list() if isinstance(members, RaggedTensor) else list(members)
        spec = (self.feature_shape, self.dtype, self.device)
        for i, member in enumerate(members):
            _check_member("RaggedTensor.extend", f"members[{i}]", member, self.ragged_dims, spec)
        self._pending.extend(members)

    def _pack_pending(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        feature = self._values.shape[1:]
        k = self._shape_per_tensor.shape[1]
        self._values = torch.cat([self._values, *(m.reshape(-1, *feature) for m in pending)])
        shapes = torch.tensor([m.shape[:k] for m in pending], dtype=torch.long).view(len(pending), k)
        self._first_idx = torch.cat([self._first_idx, self._first_idx[-1] + shapes.prod(1).cumsum(0)])
        self._shape_per_tensor = torch.cat([self._shape_per_tensor, shapes])
        self._offsets_list = None

    @staticmethod
    def cat(ragged: Sequence[RaggedTensor]) -> RaggedTensor:
        """Members of several RaggedTensors, in order (one copy of the values).

        Args:
            ragged: a sequence of RaggedTensors with the same ragged dims, feature shape, dtype and device.
        """
        where = "RaggedTensor.cat"
        ragged = list(ragged)
        if not ragged or not all(isinstance(r, RaggedTensor) for r in ragged):
            raise _error(TypeError, where, "expects a non-empty sequence of RaggedTensors")
        head = ragged[0]
        for i, r in enumerate(ragged[1:], 1):
            if (r.ragged_dims, r.feature_shape, r.dtype, r.device) != (head.ragged_dims, head.feature_shape,
                                                                        head.dtype, head.device):
                raise _error(ValueError, where, f"ragged[{i}] has ragged_dims={r.ragged_dims}, feature shape "
                             f"{tuple(r.feature_shape)}, {r.dtype} on {r.device}; ragged[0] has "
                             f"ragged_dims={head.ragged_dims}, {tuple(head.feature_shape)}, {head.dtype} on "
                             f"{head.device}")
        shapes = torch.cat([r.shape_per_tensor for r in ragged])
        return RaggedTensor(torch.cat([r.values for r in ragged]), _first_idx_of(shapes), shapes, validate=False)

    # ---- devices, dtypes, autograd ----

    def to(self, *args, **kwargs) -> RaggedTensor:
        """The values moved / cast as ``Tensor.to(*args, **kwargs)``; ``first_idx`` and ``shape_per_tensor`` are
        kept (the kernels accept them on the CPU or beside the values).

        Args:
            *args: torch.Tensor.to's positional arguments (device, dtype, ...).
            **kwargs: its keyword arguments.
        """
        return self.with_values(self.values.to(*args, **kwargs))

    def cuda(self, *args, **kwargs) -> RaggedTensor:
        """The values on a CUDA device (see `to`).

        Args:
            *args: torch.Tensor.cuda's positional arguments (device).
            **kwargs: its keyword arguments.
        """
        return self.with_values(self.values.cuda(*args, **kwargs))

    def cpu(self) -> RaggedTensor:
        """The values on the CPU (see `to`)."""
        return self.with_values(self.values.cpu())

    def pin_memory(self) -> RaggedTensor:
        """Pins the values (DataLoader(pin_memory=True) calls this); the CPU metadata is small and stays as is."""
        return self.with_values(self.values.pin_memory())

    def detach(self) -> RaggedTensor:
        """The same structure over the values detached from autograd (shared memory)."""
        return self.with_values(self.values.detach())

    def clone(self) -> RaggedTensor:
        """A copy: values, ``first_idx`` and ``shape_per_tensor`` cloned (gradients flow to the original values)."""
        return RaggedTensor(self.values.clone(), self._first_idx.clone(), self._shape_per_tensor.clone(),
                            validate=False)

    def requires_grad_(self, requires_grad: bool = True) -> RaggedTensor:
        """Sets ``requires_grad`` on the values, in place; returns this RaggedTensor.

        Args:
            requires_grad: whether autograd records operations on ``values``.
        """
        self.values.requires_grad_(requires_grad)
        return self

    @property
    def grad(self) -> RaggedTensor | None:
        """The values' gradient in this structure, or None before a backward pass reached them."""
        grad = self.values.grad
        return None if grad is None else self.with_values(grad)

    # ---- reductions and normalisations: per member (dim None or the ragged dims) or over feature dims ----

    def _feature_dims(self, where: str, dim) -> tuple[int, ...] | None:
        """None when ``dim`` is None or names exactly the ragged dims (each member reduced whole, to
        ``(B, *feature)``); else the values' dims of the feature dims it names (the result stays ragged)."""
        if dim is None:
            return None
        ragged, ndim = self.ragged_dims, self.dim()
        dims = [dim] if isinstance(dim, int) else list(dim)
        for d in dims:
            if not isinstance(d, int) or isinstance(d, bool) or not -ndim <= d < ndim:
                raise _error(IndexError, where, f"dim {dim} is out of range for a RaggedTensor of {ndim} dims "
                             f"(B, {ragged} ragged, {ndim - 1 - ragged} feature)")
        normalized = sorted({d % ndim for d in dims})
        if normalized == list(range(1, 1 + ragged)):
            return None
        if normalized and normalized[0] > ragged:
            return tuple(d - ragged for d in normalized)
        raise _error(ValueError, where, f"dim {dim} must name the ragged dims {tuple(range(1, 1 + ragged))} (each "
                     f"member reduced whole) or feature dims only (dims {ragged + 1}..{ndim - 1}); dim 0 would mix "
                     "members")

    def _reduce(self, name: str, per_member, dim, keepdim: bool):
        """``per_member(values, first_idx)`` for each member whole, or ``Tensor.<name>`` over the feature dims."""
        dims = self._feature_dims(f"RaggedTensor.{name}", dim)
        if dims is None:
            return per_member(self.values, self._first_idx)
        return self.with_values(getattr(self.values, name)(dims, keepdim=keepdim))

    def sum(self, dim=None, keepdim: bool = False):
        """Each member's sum over its ragged dims, ``(B, *feature)`` (0 for an empty member); with ``dim``
        naming feature dims, the sum over those dims of every row: a RaggedTensor.

        Args:
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        return self._reduce("sum", _ops.segment_sum, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False):
        """Each member's mean over its ragged dims, ``(B, *feature)`` (0 for an empty member), or over
        feature dims ``dim`` of every row (see `sum`).

        Args:
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        return self._reduce("mean", _ops.segment_mean, dim, keepdim)

    def amax(self, dim=None, keepdim: bool = False):
        """Each member's max over its ragged dims, ``(B, *feature)`` (0 for an empty member), or over
        feature dims ``dim`` of every row (see `sum`).

        Args:
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        return self._reduce("amax", lambda values, first_idx: _ops.segment_max(values, first_idx)[0], dim, keepdim)

    def amin(self, dim=None, keepdim: bool = False):
        """Each member's min over its ragged dims, ``(B, *feature)`` (0 for an empty member), or over
        feature dims ``dim`` of every row (see `sum`).

        Args:
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        return self._reduce("amin", lambda values, first_idx: _ops.segment_min(values, first_idx)[0], dim, keepdim)

    def max(self, dim=None, keepdim: bool = False):
        """Per member: ``MemberExtremum(values (B, *feature), row_in_member)`` (the row counted from the
        member's first, -1 for an empty member; `segment_max`'s ``arg`` is a packed row instead). With
        ``dim`` one feature dim: ``(values, indices)`` along it, both RaggedTensors.

        Args:
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        return self._extremum("RaggedTensor.max", _ops.segment_max, torch.max, dim, keepdim)

    def min(self, dim=None, keepdim: bool = False):
        """Per member: ``MemberExtremum(values, row_in_member)``; along one feature dim: ``(values,
        indices)`` (see `max`).

        Args:
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        return self._extremum("RaggedTensor.min", _ops.segment_min, torch.min, dim, keepdim)

    def _extremum(self, where: str, segment_op, torch_op, dim, keepdim: bool):
        dims = self._feature_dims(where, dim)
        if dims is None:
            values, packed_row = segment_op(self.values, self._first_idx)
            starts = self._first_idx[:-1].to(packed_row.device).view([-1] + [1] * (packed_row.dim() - 1))
            return MemberExtremum(values, torch.where(packed_row >= 0, packed_row - starts, packed_row))
        values, indices = torch_op(self.values, self._one_dim(where, dim, dims), keepdim=keepdim)
        return self.with_values(values), self.with_values(indices)

    def norm(self, p=2, dim=None, keepdim: bool = False):
        """Each member's p-norm over its ragged dims, ``(B, *feature)`` (0 for an empty member; the gradient
        at a zero norm is 0, as torch.linalg.vector_norm's), or over feature dims ``dim`` of every row.

        Args:
            p: the norm's order (as torch.linalg.vector_norm's ``ord``).
            dim: an int or a tuple of ints: the ragged dims (``1`` for one ragged dim; ``None``, the default, too) to
                reduce each member whole, or feature dims only (``-1``) to reduce every row; dim 0 (the members) is
                refused.
            keepdim: with feature dims, keep them with size 1 (as torch's reductions).
        """
        dims = self._feature_dims("RaggedTensor.norm", dim)
        if dims is not None:
            return self.with_values(torch.linalg.vector_norm(self.values, p, dims, keepdim=keepdim))
        magnitude = self.values.abs()
        if p == math.inf:
            return _ops.segment_max(magnitude, self._first_idx)[0]
        if not isinstance(p, numbers.Real) or isinstance(p, bool) or not p > 0:
            raise _error(ValueError, "RaggedTensor.norm", f"p must be a positive number or inf, got {p!r}")
        powered = _ops.segment_sum(magnitude if p == 1 else magnitude.pow(p), self._first_idx)
        if p == 1:
            return powered
        positive = powered > 0  # the root's gradient is infinite at 0: that branch is cut (gradient 0)
        return torch.where(positive, torch.where(positive, powered, 1).pow(1 / p), 0)

    def softmax(self, dim=None) -> RaggedTensor:
        """Softmax within each member over its ragged dims, per feature column; or along feature dim ``dim``.

        Args:
            dim: the dim to normalise along (1: within each member, the default; a feature dim: per row).
        """
        return self._normalise("softmax", _ops.segment_softmax, torch.softmax, dim)

    def log_softmax(self, dim=None) -> RaggedTensor:
        """Log of `softmax` (computed as such, not as a log of it).

        Args:
            dim: the dim to normalise along (1: within each member, the default; a feature dim: per row).
        """
        return self._normalise("log_softmax", _ops.segment_log_softmax, torch.log_softmax, dim)

    def _normalise(self, name: str, per_member, along, dim) -> RaggedTensor:
        where = f"RaggedTensor.{name}"
        dims = self._feature_dims(where, dim)
        if dims is None:
            return self.with_values(per_member(self.values, self._first_idx))
        return self.with_values(along(self.values, self._one_dim(where, dim, dims)))

    def cumsum(self, dim: int) -> RaggedTensor:
        """Cumulative sum along ``dim``: the ragged dim (within each member, `segment_cumsum`: integers give int64
        as torch.cumsum) or a feature dim (torch.cumsum of every row).

        Args:
            dim: the dim to scan along (1: within each member; a feature dim: per row).
        """
        return self._scan("cumsum", lambda v, f: _ops.segment_cumsum(v, f, False, False), torch.cumsum, dim)

    def cumprod(self, dim: int) -> RaggedTensor:
        """Cumulative product along ``dim``: the ragged dim (within each member) or a feature dim.

        Args:
            dim: the dim to scan along (1: within each member; a feature dim: per row).
        """
        return self._scan("cumprod", lambda v, f: _ops.segment_cumprod(v, f, False, False), torch.cumprod, dim)

    def logcumsumexp(self, dim: int) -> RaggedTensor:
        """``log(cumsum(exp(r)))`` along ``dim``, computed stably: the ragged dim (within each member) or a feature
        dim.

        Args:
            dim: the dim to scan along (1: within each member; a feature dim: per row).
        """
        return self._scan("logcumsumexp", lambda v, f: _ops.segment_logcumsumexp(v, f, False), torch.logcumsumexp,
                          dim)

    def cummax(self, dim: int):
        """``(values, indices)`` of the running max along ``dim``, both RaggedTensors: along the ragged dim the
        index is the row within the member (torch.cummax's rule: the later of equal values, NaN wins); along a
        feature dim, torch.cummax of every row.

        Args:
            dim: the dim to scan along (1: within each member; a feature dim: per row).
        """
        return self._cum_extremum("cummax", _ops.segment_cummax, torch.cummax, dim)

    def cummin(self, dim: int):
        """``(values, indices)`` of the running min along ``dim`` (see `cummax`).

        Args:
            dim: the dim to scan along (1: within each member; a feature dim: per row).
        """
        return self._cum_extremum("cummin", _ops.segment_cummin, torch.cummin, dim)

    def _scan_dims(self, where: str, dim):
        if dim is None:
            raise _error(TypeError, where, "dim is required (the ragged dim 1, or a feature dim), as torch's")
        dims = self._feature_dims(where, dim)
        if dims is None and self.ragged_dims != 1:
            raise _error(ValueError, where, f"a scan runs along one ragged dim; this RaggedTensor has "
                         f"{self.ragged_dims} (flatten them first, or scan a feature dim)")
        return dims

    def _scan(self, name: str, per_member, along, dim) -> RaggedTensor:
        where = f"RaggedTensor.{name}"
        dims = self._scan_dims(where, dim)
        if dims is None:
            return self.with_values(per_member(self.values, self._first_idx))
        return self.with_values(along(self.values, self._one_dim(where, dim, dims)))

    def _cum_extremum(self, name: str, segment_op, torch_op, dim):
        where = f"RaggedTensor.{name}"
        dims = self._scan_dims(where, dim)
        if dims is not None:
            values, indices = torch_op(self.values, self._one_dim(where, dim, dims))
            return self.with_values(values), self.with_values(indices)
        values, packed_row = segment_op(self.values, self._first_idx, False)
        first_idx = self._first_idx.to(packed_row.device)
        member_start = _ops.segment_expand(first_idx[:-1], first_idx, packed_row.shape[0])  # each row's
        row_in_member = packed_row - member_start.view([-1] + [1] * (packed_row.dim() - 1))
        return self.with_values(values), self.with_values(row_in_member)

    @staticmethod
    def _one_dim(where: str, dim, dims: tuple[int, ...]) -> int:
        if len(dims) != 1:
            raise _error(ValueError, where, f"dim {dim}: one feature dim at a time (as torch's dim=)")
        return dims[0]

    def unsqueeze(self, dim: int) -> RaggedTensor:
        """A new feature dim of size 1 at ``dim`` (after the ragged dims: ``r.unsqueeze(-1)`` gives scalar
        members a feature dim for layers).

        Args:
            dim: where the new feature dim of size 1 goes (after the ragged dims).
        """
        ndim, ragged = self.dim(), self.ragged_dims
        if not isinstance(dim, int) or not -(ndim + 1) <= dim <= ndim or dim % (ndim + 1) <= ragged:
            raise _error(IndexError, "RaggedTensor.unsqueeze", f"dim {dim} must insert a feature dim: after the "
                         f"batch and {ragged} ragged dims, in {ragged + 1}..{ndim} (or {ragged - ndim}..-1)")
        return self.with_values(self.values.unsqueeze(dim % (ndim + 1) - ragged))

    def broadcast_members(self, per_member: torch.Tensor) -> RaggedTensor:
        """A RaggedTensor of this structure whose member b repeats ``per_member[b]`` on every row:
        ``r - r.broadcast_members(r.mean())`` centres each member.

        Args:
            per_member: ``(B, *feature)`` tensor: one row per member.
        """
        return self.with_values(_ops.segment_expand(per_member, self._first_idx, self.values.shape[0]))

    # ---- elementwise math: torch functions tagged pointwise act on the values ----

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kind = _function_kind(func)
        if kind == _ROW_WISE:
            return _row_wise(func, args, kwargs or {})
        if kind == _METHOD:
            return _as_method(func, args, kwargs or {})
        if kind == _NOT_ELEMENTWISE:
            raise _error(TypeError, "RaggedTensor", f"{getattr(func, '__name__', func)} is not elementwise, so it "
                         "does not apply to a RaggedTensor; use its methods (sum, mean, amax, softmax, ...), or "
                         ".values / .padded()")
        return _elementwise(func, args, kwargs or {}, kind == _ELEMENTWISE_IN_PLACE)

    def __getattr__(self, name: str):
        # Tensor methods that are elementwise (r.sin(), r.relu(), r.clamp_(0), ...) act on the values.
        if not _is_elementwise_method(name):
            if not name.startswith("_") and hasattr(torch.Tensor, name):  # a layer reaching for a rectangle
                raise AttributeError(
                    f"'RaggedTensor' object has no attribute '{name}': Tensor.{name} does not act row by row on a "
                    "ragged batch. Layers that need a rectangle take r.padded(value) with r.padding_mask() (attention: "
                    "key_padding_mask=r.padding_mask()) or r.to_packed_sequence() (RNNs); r.values is the packed rows")
            raise AttributeError(f"'RaggedTensor' object has no attribute '{name}'")

        def method(*args, **kwargs):
            out = getattr(self.values, name)(*args, **kwargs)
            return self if name.endswith("_") else self.with_values(out)

        return method

    def float(self) -> RaggedTensor:
        """The values cast to torch.float32."""
        return self.to(torch.float32)

    def double(self) -> RaggedTensor:
        """The values cast to torch.float64."""
        return self.to(torch.float64)

    def half(self) -> RaggedTensor:
        """The values cast to torch.float16."""
        return self.to(torch.float16)

    def long(self) -> RaggedTensor:
        """The values cast to torch.int64."""
        return self.to(torch.int64)

    def _same_structure(self, other: RaggedTensor) -> bool:
        if self.first_idx is other.first_idx and self.shape_per_tensor is other.shape_per_tensor:
            return True
        return (self.shape_per_tensor.shape == other.shape_per_tensor.shape
                and torch.equal(self.first_idx, other.first_idx)
                and torch.equal(self.shape_per_tensor, other.shape_per_tensor))

    # Operators go straight to _elementwise (torch.compile traces them without the __torch_function__ hop).
    __add__, __radd__ = _binary(torch.add), _binary(torch.add, reflected=True)
    __sub__, __rsub__ = _binary(torch.sub), _binary(torch.sub, reflected=True)
    __mul__, __rmul__ = _binary(torch.mul), _binary(torch.mul, reflected=True)
    __truediv__, __rtruediv__ = _binary(torch.div), _binary(torch.div, reflected=True)
    __floordiv__, __mod__ = _binary(torch.floor_divide), _binary(torch.remainder)
    __pow__, __rpow__ = _binary(torch.pow), _binary(torch.pow, reflected=True)
    __lt__, __le__, __gt__, __ge__ = _binary(torch.lt), _binary(torch.le), _binary(torch.gt), _binary(torch.ge)
    __and__, __or__, __xor__ = _binary(torch.bitwise_and), _binary(torch.bitwise_or), _binary(torch.bitwise_xor)
    __neg__, __abs__, __invert__ = _unary(torch.neg), _unary(torch.abs), _unary(torch.bitwise_not)
    # Comparisons are elementwise, as for tensors (r != pad_id is a ragged bool mask); hashing stays by
    # identity, as torch.Tensor's does, so RaggedTensors still key dicts and sets.
    __eq__, __ne__ = _binary(torch.eq), _binary(torch.ne)
    __hash__ = object.__hash__

    def __matmul__(self, other):
        return _row_wise(torch.matmul, (self, other), {})

    def __rmatmul__(self, other):
        raise _error(TypeError, "RaggedTensor", "dense @ RaggedTensor would mix the packed rows; the RaggedTensor "
                     "goes on the left (r @ w acts on each row's feature dims)")

    def __bool__(self):
        raise _error(RuntimeError, "RaggedTensor", "the truth value of a RaggedTensor is ambiguous (as for a "
                     "tensor of several values); use (r == x).values.all() / .any(), or len(r) for emptiness")

    # ---- pickling (torch.save / torch.load, DataLoader workers) ----

    def __getstate__(self):
        return {"values": self.values, "first_idx": self._first_idx, "shape_per_tensor": self._shape_per_tensor}

    def __setstate__(self, state):
        # A loaded file is input like any other: check it before use.
        self.__init__(state["values"], state["first_idx"], state["shape_per_tensor"])


torch.serialization.add_safe_globals([RaggedTensor, MemberExtremum, _load_member_extremum])


def _flatten(r: RaggedTensor):
    return [r.values, r.first_idx, r.shape_per_tensor], None


def _unflatten(children, _context) -> RaggedTensor:
    return RaggedTensor(*children, validate=False)


pytree.register_pytree_node(RaggedTensor, _flatten, _unflatten,
                            serialized_type_name="torch_ragged.RaggedTensor")


# ---- argument checks ----

def _is_ragged(x) -> bool:
    return isinstance(x, RaggedTensor)


def _describe(x) -> str:
    if isinstance(x, torch.Tensor) and x.is_nested and x.layout != torch.jagged:  # has no .shape
        return f"a {x.dtype} nested tensor of layout {x.layout} with {x.size(0)} members on {x.device}"
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)} on {x.device}"
    return f"{type(x).__name__}"


def _is_symbolic(t: torch.Tensor) -> bool:
    return isinstance(t, torch._subclasses.FakeTensor) or t.device.type == "meta"


def _check_ragged_dims(where: str, ragged_dims) -> None:
    if not isinstance(ragged_dims, numbers.Integral) or ragged_dims < 1:
        raise _error(ValueError, where, f"ragged_dims must be an int >= 1, got {ragged_dims!r}")


def _check_member(where: str, arg: str, t, ragged_dims: int, spec) -> None:
    """A member: a tensor with >= ragged_dims dims and, given spec = (feature, dtype, device), the others'."""
    if not isinstance(t, torch.Tensor):
        raise _error(TypeError, where, f"{arg} must be a tensor, got {type(t).__name__}")
    if t.dim() < ragged_dims:
        raise _error(ValueError, where, f"{arg} must have at least ragged_dims = {ragged_dims} dims, got shape "
                     f"{tuple(t.shape)}")
    if spec is None:
        return
    feature, dtype, device = spec
    if t.shape[ragged_dims:] != feature:
        same_rank_and_element = len(feature) > 1 and t.dim() == ragged_dims + len(feature) and \
            t.shape[-1] == feature[-1]
        hint = f"; if every dim but the last is ragged (Kaolin's layout), pass ragged_dims={t.dim() - 1}" \
            if same_rank_and_element else ""
        raise _error(ValueError, where, f"{arg} has shape {tuple(t.shape)}: after its {ragged_dims} ragged dims "
                     f"its feature shape must be {tuple(feature)}, like the others'{hint}")
    if t.dtype != dtype or t.device != device:
        raise _error(ValueError, where, f"{arg} is {t.dtype} on {t.device}; the others are {dtype} on {device}")


def _check_members(where: str, arg: str, tensors: list, ragged_dims: int) -> None:
    first = tensors[0]
    _check_member(where, f"{arg}[0]", first, ragged_dims, None)
    spec = (first.shape[ragged_dims:], first.dtype, first.device)
    for i, t in enumerate(tensors[1:], 1):
        _check_member(where, f"{arg}[{i}]", t, ragged_dims, spec)


def _packed_sequence_rows(first_idx: torch.Tensor, sorted_indices: torch.Tensor, batch_sizes: torch.Tensor):
    """The packed row behind each data row of a PackedSequence (CPU int64): data is time-major, and at step t the
    members ranked 0 .. batch_sizes[t] - 1 in ``sorted_indices`` appear in that order, so data row
    ``step_start[t] + r`` is row t of member ``sorted_indices[r]``."""
    steps = torch.arange(len(batch_sizes)).repeat_interleave(batch_sizes)
    step_starts = batch_sizes.cumsum(0) - batch_sizes
    rank = torch.arange(len(steps)) - step_starts.repeat_interleave(batch_sizes)
    return first_idx.to("cpu", torch.long)[:-1][sorted_indices][rank] + steps


def _first_idx_of(shapes: torch.Tensor) -> torch.Tensor:
    return _ops.get_first_idx(shapes.prod(1), True)


def _checked_parts(values, first_idx, shape_per_tensor, where: str = "RaggedTensor", values_name: str = "values"):
    """values, first_idx (int64 on the CPU) and shape_per_tensor (B, k), checked; `where` / `values_name` name the
    caller and its argument in errors (torch_ragged.distributed shares these checks)."""
    if not isinstance(values, torch.Tensor) or values.dim() < 1:
        raise _error(ValueError, where, f"{values_name} must be a tensor (rows, *feature), got {_describe(values)}")
    if not isinstance(first_idx, torch.Tensor) or first_idx.dim() != 1 or first_idx.numel() < 1 \
            or first_idx.is_floating_point() or first_idx.dtype == torch.bool:
        raise _error(ValueError, where, f"first_idx must be a 1-D integer tensor of B + 1 offsets, got "
                     f"{_describe(first_idx)}")
    first_idx = first_idx.to("cpu", torch.long)
    counts = first_idx.diff()
    rises = (first_idx[0] == 0) & (counts >= 0).all() & (first_idx[-1] == values.shape[0])
    traced = _is_symbolic(first_idx) or torch.compiler.is_compiling()
    if traced:  # torch.export / torch.compile: a check in the graph, run with it (no Python bool on data)
        torch._assert_async(rises, f"torch_ragged.{where}: first_idx must rise from 0 to {values_name}.shape[0]")
    elif not bool(rises):
        raise _error(ValueError, where, f"first_idx must rise from 0 to {values_name}.shape[0] = {values.shape[0]}, "
                     f"got {first_idx.tolist() if first_idx.numel() <= 16 else _describe(first_idx)}")
    if shape_per_tensor is None:
        return values, first_idx, counts.unsqueeze(1)
    spt = torch.as_tensor(shape_per_tensor).to("cpu", torch.long)
    rule = (f"shape_per_tensor must be (B = {counts.numel()}, k >= 1) non-negative sizes whose products are the "
            "members' row counts (first_idx.diff())")
    if spt.dim() != 2 or spt.shape[0] != counts.numel() or spt.shape[1] < 1:
        raise _error(ValueError, where, rule)
    agrees = (spt >= 0).all() & (spt.prod(1) == counts).all()
    if traced:
        torch._assert_async(agrees, f"torch_ragged.{where}: {rule}")
    elif not bool(agrees):
        raise _error(ValueError, where, rule)
    return values, first_idx, spt


def _index_tensor(key, n: int) -> torch.Tensor:
    where = "RaggedTensor.__getitem__"
    if isinstance(key, slice):
        return torch.arange(*key.indices(n))
    if key is None or key is Ellipsis or isinstance(key, (str, bytes, float)):
        raise _error(TypeError, where, f"index must be an int, a slice, a 1-D integer / boolean tensor or a list of "
                     f"ints (None and ... do not apply: the member dim is not a tensor dim), got {key!r}")
    try:
        index = torch.as_tensor(key) if not isinstance(key, torch.Tensor) else key
    except (TypeError, ValueError, RuntimeError):
        raise _error(TypeError, where, f"index must be an int, a slice, a 1-D integer / boolean tensor or a list of "
                     f"ints, got {key!r}") from None
    if index.numel() == 0 and not isinstance(key, torch.Tensor):
        index = index.long()  # [] is a float tensor
    if index.dtype == torch.bool:
        if index.shape != (n,):
            raise _error(IndexError, where, f"a boolean mask must have shape ({n},), got {tuple(index.shape)}")
        return index.nonzero().view(-1)
    if index.dim() != 1 or index.is_floating_point() or index.is_complex():
        raise _error(IndexError, where, f"index must be an int, a slice, a 1-D integer / boolean tensor or a list of "
                     f"ints, got {_describe(index) if isinstance(key, torch.Tensor) else repr(key)}")
    if index.numel() == 0:
        return index.long()
    return index


# ---- LazyStack: records kept separate, fields read in one kernel launch ----

def _read_field(record, key):
    if isinstance(key, tuple) and not _is_tensordict(record):
        for part in key:
            record = record[part]
        return record
    return record[key]


def _is_tensordict(x) -> bool:
    return type(x).__module__.startswith("tensordict")


def _record_batch_size(record) -> tuple:
    return tuple(record.batch_size) if _is_tensordict(record) else ()


def _shape_with_holes(shapes: Sequence[tuple]) -> list[int]:
    """Per dim: the common size, or -1 where the shapes differ (all of one rank)."""
    return [dims[0] if all(d == dims[0] for d in dims) else -1 for dims in zip(*shapes, strict=False)]


class LazyStack:
    """A stack of records (dicts of tensors, or ``tensordict.TensorDict``\\ s) kept separate, as tensordict's
    ``LazyStackedTensorDict``: ``stack[i] is records[i]``; ``stack["a"]`` stacks the members' entries when their
    shapes agree; `get` reads them padded, nested, as a list or as a `RaggedTensor` with one kernel
    launch per field; writes through the stack reach the members. ``stack_dim`` is 0.

    Args:
        *records: the records: dicts of tensors or tensordict.TensorDicts.
        stack_dim: the stacking dim: 0 only.
    """

    def __init__(self, *records, stack_dim: int = 0):
        if stack_dim != 0:
            raise _error(ValueError, "LazyStack", f"stack_dim must be 0 (records stack along a new first dim), "
                         f"got {stack_dim}")
        self._records: list = []
        self.extend(records)

    @classmethod
    def from_list(cls, records: Sequence) -> LazyStack:
        """A LazyStack of these records (``LazyStack(*records)``).

        Args:
            records: the records: dicts of tensors or tensordict.TensorDicts.
        """
        return cls(*records)

    @classmethod
    def from_tensordict(cls, lazy) -> LazyStack:
        """From a ``tensordict.LazyStackedTensorDict`` stacked along dim 0 (shares its members).

        Args:
            lazy: a tensordict.LazyStackedTensorDict (stack_dim 0).
        """
        if getattr(lazy, "stack_dim", 0) != 0:
            raise _error(ValueError, "LazyStack.from_tensordict", f"the lazy stack must stack along dim 0, got "
                         f"stack_dim={lazy.stack_dim}")
        return cls(*lazy.tensordicts)

    def to_tensordict(self):
        """A ``tensordict.LazyStackedTensorDict`` of the members (dict records become TensorDicts)."""
        from tensordict import LazyStackedTensorDict, TensorDict
        members = [r if _is_tensordict(r) else TensorDict(r, batch_size=[]) for r in self._records]
        return LazyStackedTensorDict(*members, stack_dim=0)

    # ---- the members ----

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self):
        return iter(self._records)

    @property
    def records(self) -> list:
        """The records, in order (a new list; the records themselves are not copied)."""
        return list(self._records)

    def _check_record(self, where: str, arg: str, record) -> None:
        if not isinstance(record, Mapping) and not _is_tensordict(record):
            raise _error(TypeError, where, f"{arg} must be a dict of tensors or a TensorDict, got "
                         f"{type(record).__name__}")
        if self._records:
            ndim, first = len(_record_batch_size(record)), len(_record_batch_size(self._records[0]))
            if ndim != first:
                raise _error(ValueError, where, f"{arg} has {ndim} batch dims; the stack's members have {first}")

    def insert(self, index: int, record) -> None:
        """Inserts a record before position ``index`` (checked as the constructor checks).

        Args:
            index: the position to insert at (as list.insert).
            record: a dict of tensors or a TensorDict.
        """
        self._check_record("LazyStack.insert", "record", record)
        self._records.insert(index, record)

    def append(self, record) -> None:
        """Adds a record at the end (checked as the constructor checks).

        Args:
            record: a dict of tensors or a TensorDict.
        """
        self._check_record("LazyStack.append", "record", record)
        self._records.append(record)

    def extend(self, records) -> None:
        """Adds records at the end, each checked (``records[i]`` named in an error).

        Args:
            records: the records: dicts of tensors or tensordict.TensorDicts.
        """
        for i, record in enumerate(records):
            self._check_record("LazyStack.extend", f"records[{i}]", record)
            self._records.append(record)

    # ---- keys and shapes ----

    def keys(self) -> list:
        """The keys every member holds (in the first member's order)."""
        if not self._records:
            return []
        common = set(self._records[0].keys())
        for record in self._records[1:]:
            common &= set(record.keys())
        return [key for key in self._records[0].keys() if key in common]

    @property
    def exclusive_keys(self) -> list[list]:
        """For each member, the keys it holds that not every member does."""
        common = set(self.keys())
        return [[key for key in record.keys() if key not in common] for record in self._records]

    @property
    def batch_size(self) -> torch.Size:
        """``(N, *member batch dims)`` with -1 where the members' batch sizes differ."""
        return torch.Size([len(self), *_shape_with_holes([_record_batch_size(r) for r in self._records])])

    def get_item_shape(self, key) -> torch.Size:
        """The entry's stacked shape, with -1 in each dim whose size differs between members.

        Args:
            key: a field name.
        """
        entries = self._entries("LazyStack.get_item_shape", key)
        self._check_ranks("LazyStack.get_item_shape", key, entries)
        return torch.Size([len(entries), *_shape_with_holes([tuple(t.shape) for t in entries])])

    # ---- reads ----

    def _entries(self, where: str, key, default=None, has_default=False) -> list:
        entries = []
        for i, record in enumerate(self._records):
            try:
                entries.append(_read_field(record, key))
            except KeyError:
                if not has_default:
                    raise KeyError(f"torch_ragged.{where}: member {i} has no key {key!r} (keys() lists the keys "
                                   "every member holds)") from None
                entries.append(default)
        return entries

    @staticmethod
    def _check_ranks(where: str, key, entries: list) -> None:
        for i, t in enumerate(entries):
            if not isinstance(t, torch.Tensor):
                raise _error(TypeError, where, f"entry {key!r} of member {i} is a {type(t).__name__}, not a tensor")
            if t.dim() != entries[0].dim() or t.dtype != entries[0].dtype or t.device != entries[0].device:
                raise _error(ValueError, where, f"entry {key!r} of member {i} is {_describe(t)}; member 0's is "
                             f"{_describe(entries[0])} (the members' entries need one rank, dtype and device)")

    def __getitem__(self, key):
        """``stack[i]``: record i itself. ``stack[a:b]`` / ``stack[index]`` (a list or integer tensor): a LazyStack
        of those records. ``stack["a"]`` / ``stack[("a", "b")]``: the field stacked as `get` reads it, ``(B,
        *shape)`` when the members' shapes agree (else ValueError: read it with `get`'s options).

        Args:
            key: a field name (the field stacked), an int (that record), a slice or a list (a LazyStack of those
                records).
        """
        if isinstance(key, numbers.Integral):
            return self._records[key]
        if isinstance(key, slice):
            return LazyStack(*self._records[key])
        if isinstance(key, (str, tuple)):
            return self.get(key)
        if isinstance(key, (list, torch.Tensor)):
            index = _index_tensor(key, len(self)).tolist()
            return LazyStack(*(self._records[i] for i in index))
        raise _error(TypeError, "LazyStack.__getitem__", f"key must be an int, a slice, an index list / tensor or "
                     f"a field name, got {type(key).__name__}")

    def get(self, key, default=..., *, as_padded_tensor: bool = False, as_nested_tensor: bool = False,
            as_list: bool = False, as_ragged: bool = False, padding_side: str = "right", padding_value=0.0,
            layout=torch.jagged):
        """The members' entries for ``key``: stacked (shapes must agree), or with one of the flags a padded tensor
        (every dim padded to its largest size), a nested tensor (``layout``), a list or a RaggedTensor. A
        ``default`` stands in for members lacking the key.

        Args:
            key: a field name.
            default: stands in for a record lacking ``key`` (without it: KeyError naming the record).
            as_padded_tensor: every dim padded to its largest size (tensordict's rule), one kernel.
            as_nested_tensor: a torch.nested tensor of ``layout``.
            as_list: the records' own tensors.
            as_ragged: a RaggedTensor (one packed buffer).
            padding_side: where members lie in the padded tensor: ``"right"`` or ``"left"``.
            padding_value: the value written where no member is.
            layout: the nested tensor's layout: torch.jagged (entries differing in their first dim only) or
                torch.strided.
        """
        where = "LazyStack.get"
        if sum(map(bool, (as_padded_tensor, as_nested_tensor, as_list, as_ragged))) > 1:
            raise _error(ValueError, where, "as_padded_tensor, as_nested_tensor, as_list and as_ragged are exclusive")
        entries = self._entries(where, key, default, default is not ...)
        if as_list:
            return entries
        if not entries:
            raise _error(ValueError, where, f"the stack is empty: no entry {key!r} to read")
        if as_padded_tensor:
            return self._padded(where, key, entries, padding_value, padding_side)
        self._check_ranks(where, key, entries)
        shape = _shape_with_holes([tuple(t.shape) for t in entries])
        ragged = max((d + 1 for d, size in enumerate(shape) if size == -1), default=0)
        if as_nested_tensor:
            return self._nested(where, key, entries, ragged, layout)
        if as_ragged:
            return RaggedTensor.from_list(entries, ragged_dims=max(ragged, 1))
        if ragged:
            raise _error(ValueError, where, f"the entries {key!r} have different shapes (stacked shape "
                         f"{[len(entries), *shape]}, -1 where they differ); read them with as_padded_tensor=True, "
                         "as_nested_tensor=True, as_list=True or as_ragged=True")
        return torch.stack(entries)

    def _padded(self, where, key, entries, padding_value, padding_side):
        """Every dim padded to its largest size in one list_to_padded launch: that kernel pads all dims but the
        last, so entries whose last dim agrees go in as they are (a common dim pads to itself)."""
        if all(isinstance(t, torch.Tensor) for t in entries[:1]) and entries[0].dim() >= 2:
            try:
                return _ops.list_to_padded(entries, padding_value, None, padding_side)[0]
            except (RuntimeError, TypeError, ValueError):
                self._check_ranks(where, key, entries)  # names the member, else the last dims differ:
                if all(t.shape[-1] == entries[0].shape[-1] for t in entries):
                    raise
        else:
            self._check_ranks(where, key, entries)
        columns = [t.unsqueeze(-1) for t in entries]  # every dim may differ: the element is one scalar
        return _ops.list_to_padded(columns, padding_value, None, padding_side)[0].squeeze(-1)

    @staticmethod
    def _nested(where, key, entries, ragged, layout):
        if layout == torch.strided:
            return torch.nested.nested_tensor(entries, layout=torch.strided)
        if ragged > 1:
            raise _error(ValueError, where, f"the entries {key!r} differ in dims after the first, which torch.jagged "
                         "cannot hold; pass layout=torch.strided or read them with as_padded_tensor / as_ragged")
        if entries[0].dim() == 0:
            raise _error(ValueError, where, f"the entries {key!r} are 0-D: a nested tensor needs a ragged dim")
        return RaggedTensor.from_list(entries, ragged_dims=1).to_nested()

    def __setitem__(self, key, value) -> None:
        """Writes member i's entry ``key`` from ``value[i]`` (a list / tuple of tensors, a RaggedTensor or a tensor
        whose first dim is the stack's length)."""
        where = "LazyStack.__setitem__"
        if not isinstance(key, (str, tuple)):
            raise _error(TypeError, where, f"key must be a field name, got {type(key).__name__} (members are "
                         "replaced through .records)")
        if isinstance(value, RaggedTensor):
            parts = value.list() if value.ragged_dims == 1 else [value[i] for i in range(len(value))]
        elif isinstance(value, torch.Tensor):
            parts = value.unbind(0) if value.dim() >= 1 else None
        elif isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            parts = None
        if parts is None or len(parts) != len(self):
            raise _error(ValueError, where, f"value must hold one entry per member ({len(self)}), got "
                         f"{_describe(value) if isinstance(value, torch.Tensor) else type(value).__name__}"
                         f"{'' if parts is None else f' with {len(parts)} entries'}")
        for record, part in zip(self._records, parts, strict=False):
            if isinstance(key, tuple) and not _is_tensordict(record):
                for k in key[:-1]:
                    record = record[k]
                record[key[-1]] = part
            else:
                record[key] = part

    def __repr__(self) -> str:
        return f"LazyStack(len={len(self)}, keys={self.keys()}, batch_size={tuple(self.batch_size)})"

    # ---- pickling: a loaded file is checked as the constructor checks its records ----

    def __getstate__(self):
        return {"records": list(self._records)}

    def __setstate__(self, state):
        if not isinstance(state, dict) or not isinstance(state.get("records"), list):
            raise _error(TypeError, "LazyStack", "a pickled LazyStack holds {'records': [...]}")
        self.__init__(*state["records"])


# ---- DataLoader collate ----

class RaggedCollate:
    """A ``collate_fn`` for ``torch.utils.data.DataLoader`` over variable-size samples: ``default_collate``, except
    that tensors of >= 1 dim become `RaggedTensor` s.

    The structure is collated as ``default_collate`` collates it: dicts per key, tuples / lists / namedtuples per
    position, recursively; numbers, numpy arrays and strings go through torch's own collate functions
    (``torch.utils.data._utils.collate.default_collate_fn_map``). A field of tensors (or numpy arrays) of >= 1
    dim: by default (``ragged_dims=None``) stacked as default_collate stacks it when every sample's has the same
    shape (fixed-size images, say), else a RaggedTensor with one ragged dim (one copy). An int forces it:
    ``ragged_dims=k >= 1`` makes every such field a RaggedTensor with k leading ragged dims, 0 stacks every one;
    a dict by key (the dict key the field sits under, at any depth) forces the fields it names and leaves the
    others to the default (the fields ``rebase`` names are always ragged). Name the fields that are ragged in your
    data (``{"points": 1}``): a batch whose samples happen to share a size would otherwise come out stacked. 0-d
    tensors are stacked.
    ``rebase={"faces": "vertices"}`` adds, to each member of top-level field ``faces``, the first packed row of its
    sample's ``vertices``, so face indices address the packed vertices (meshes). Picklable, so worker processes
    can use it; ``pin_memory=True`` pins the values.

    Args:
        ragged_dims: ``None`` (a field becomes ragged when its shape differs between samples), an int (every field that
            many ragged dims), or ``{field: k}`` (k ragged dims for that field, 0: stacked).
        rebase: ``{field: reference_field}``: indices in ``field`` (faces) are offset by the rows of ``reference_field``
            (vertices) before it, so they index the packed reference rows.
    """

    def __init__(self, ragged_dims: int | Mapping | None = None, rebase: Mapping | None = None):
        where = "RaggedCollate"
        counts = ragged_dims.values() if isinstance(ragged_dims, Mapping) else [ragged_dims]
        if not all(k is None or (isinstance(k, int) and not isinstance(k, bool) and k >= 0) for k in counts):
            raise _error(ValueError, where, f"ragged_dims must be None (stack equal shapes, else ragged), an int "
                         f">= 0 or a dict of those by key, got {ragged_dims!r}")
        if rebase is not None and (not isinstance(rebase, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in rebase.items())):
            raise _error(TypeError, where, f"rebase must map field names to field names, got {rebase!r}")
        self.ragged_dims = dict(ragged_dims) if isinstance(ragged_dims, Mapping) else ragged_dims
        self.rebase = dict(rebase or {})

    def __getstate__(self):
        return {"ragged_dims": self.ragged_dims, "rebase": self.rebase}

    def __setstate__(self, state):  # a loaded file is checked as the constructor checks its arguments
        if not isinstance(state, dict) or set(state) != {"ragged_dims", "rebase"}:
            raise _error(TypeError, "RaggedCollate", "a pickled RaggedCollate holds {'ragged_dims', 'rebase'}")
        self.__init__(state["ragged_dims"], state["rebase"])

    def __call__(self, batch: Sequence):
        """The batch of these samples, as the class describes.

        Args:
            batch: the samples (a non-empty sequence, as a DataLoader passes them): dicts, tuples / lists /
                namedtuples, tensors, numpy arrays, numbers, strings, RaggedTensors or LazyStacks, nested alike.
        """
        where = "RaggedCollate"
        batch = list(batch)
        if not batch:
            raise _error(ValueError, where, "the batch is empty")
        if self.rebase and not isinstance(batch[0], Mapping):
            raise _error(ValueError, where, "rebase needs dict samples (it names fields)")
        out = self._collate(batch, None)
        for field, target in self.rebase.items():
            out[field] = _rebased(where, field, target, out)
        return out

    def _collate(self, batch: Sequence, key):
        """default_collate's recursion (keys tracked for ragged_dims), container types as default_collate keeps
        them (a tuple becomes a list, a namedtuple stays one, other sequences and mappings keep their type where
        they can be built from the collated fields); leaves go to torch's collate functions."""
        where = "RaggedCollate"
        first = batch[0]
        if isinstance(first, RaggedTensor | LazyStack):
            return _collated_containers(where, batch)
        if isinstance(first, Mapping):
            keys = list(first.keys())
            for i, sample in enumerate(batch):
                if not isinstance(sample, Mapping) or set(sample.keys()) != set(keys):
                    found = sorted(map(str, sample.keys())) if isinstance(sample, Mapping) else type(sample).__name__
                    raise _error(KeyError, where, f"sample {i} has keys {found}; sample 0 has {sorted(map(str, keys))}")
            fields = {k: self._collate([sample[k] for sample in batch], k) for k in keys}
            return _like_default_collate(first, fields)
        if isinstance(first, Sequence) and not isinstance(first, (str, bytes)):
            if any(not isinstance(sample, Sequence) or len(sample) != len(first) for sample in batch):
                raise _error(ValueError, where, "the samples have different numbers of fields")
            fields = [self._collate(column, key) for column in zip(*batch, strict=True)]  # tuples, as default_collate
            if isinstance(first, tuple):
                return type(first)(*fields) if hasattr(first, "_fields") else fields  # default_collate: a list
            return _like_default_collate(first, fields)
        return torch_collate.collate(batch, collate_fn_map=self._leaf_functions(key))

    def _leaf_functions(self, key) -> dict:
        k = self.ragged_dims.get(key) if isinstance(self.ragged_dims, Mapping) else self.ragged_dims
        if k is None and key in {*self.rebase, *self.rebase.values()}:
            k = 1  # rebased fields are packed rows (faces into vertices) whatever the batch's sizes
        functions = dict(torch_collate.default_collate_fn_map)  # numbers, numpy (-> tensors), strings

        def tensors(batch, *, collate_fn_map=None):
            first = batch[0].shape
            same_shape = k is None and all(t.shape == first for t in batch)
            if k == 0 or batch[0].dim() == 0 or same_shape:
                return torch_collate.collate_tensor_fn(batch, collate_fn_map=collate_fn_map)
            return RaggedTensor.from_list(batch, ragged_dims=1 if k is None else k)

        functions[torch.Tensor] = tensors
        return functions


def _like_default_collate(first, fields):
    """The collated fields in the sample's container type, as default_collate builds it: a mutable mapping or
    sequence is a copy of the first sample with the fields written in; another type is built from the fields, or
    falls back to a plain dict / list when its constructor does not take them."""
    if isinstance(first, MutableMapping):
        clone = copy.copy(first)
        clone.update(fields)
        return clone
    if isinstance(first, MutableSequence):
        clone = copy.copy(first)
        for i, field in enumerate(fields):
            clone[i] = field
        return clone
    try:
        return type(first)(fields)
    except TypeError:
        return dict(fields) if isinstance(first, Mapping) else list(fields)


def _collated_containers(where: str, batch: list):
    """Samples that are RaggedTensors become one RaggedTensor of all their members, in order (as graph batching
    concatenates graphs); LazyStack samples become one LazyStack of all their records."""
    kind = type(batch[0])
    for i, sample in enumerate(batch):
        if type(sample) is not kind:
            raise _error(TypeError, where, f"sample {i} is a {type(sample).__name__}; sample 0 is a {kind.__name__}")
    if kind is RaggedTensor:
        return RaggedTensor.cat(batch)
    return LazyStack(*[record for stack in batch for record in stack])


def _rebased(where: str, field: str, target: str, out: dict) -> RaggedTensor:
    faces, vertices = out.get(field), out.get(target)
    if not isinstance(faces, RaggedTensor) or not isinstance(vertices, RaggedTensor):
        raise _error(KeyError, where, f"rebase {field!r} -> {target!r} needs both fields to be tensors of >= 1 dim")
    if faces.dtype.is_floating_point or faces.dtype == torch.bool:
        raise _error(TypeError, where, f"rebase: {field!r} must hold integer indices, got {faces.dtype}")
    starts = vertices.first_idx[:-1].to(faces.device, faces.dtype)
    shift = _ops.segment_expand(starts, faces.first_idx, faces.values.shape[0])
    return faces.with_values(faces.values + shift.view(-1, *[1] * len(faces.feature_shape)))


torch.serialization.add_safe_globals([LazyStack, RaggedCollate])

collate = RaggedCollate()
"""The default `RaggedCollate`: ``DataLoader(dataset, collate_fn=torch_ragged.collate)``; every tensor of >= 1 dim is
batched as a `RaggedTensor` with one ragged dim (make a `RaggedCollate` to choose ``ragged_dims`` per field or
``rebase``)."""
