"""The segment core: offsets and per-segment reductions over ``first_idx``.

A packed batch ``data`` of shape ``(rows, ...)`` holds B segments: segment ``b`` is rows
``first_idx[b]:first_idx[b + 1]``. ``first_idx`` has B + 1 non-decreasing entries from 0 to ``rows``
(int64 or int32, on the CPU or on ``data``'s device), as `get_first_idx` builds from counts.
Reductions return ``(B, ...)``, one result per segment and feature column; softmax keeps ``data``'s
shape. Empty segments: sum and mean give 0, max / min give 0 with ``arg = -1``. Every result is
deterministic (bitwise identical run to run and across thread counts).
"""

import functools
from typing import NamedTuple

import torch
from torch.library import register_fake as _torch_register_fake
from torch.utils import _pytree as pytree

from ._checks import checked_extremum, index_tensor, integer_tensor

__all__ = [
    "get_first_idx",
    "ragged_index_select",
    "scatter",
    "scatter_max",
    "scatter_min",
    "segment_arange",
    "segment_cummax",
    "segment_cummin",
    "segment_cumprod",
    "segment_cumsum",
    "segment_expand",
    "segment_ids",
    "segment_log_softmax",
    "segment_logcumsumexp",
    "segment_max",
    "segment_mean",
    "segment_min",
    "segment_softmax",
    "segment_sum",
]

_ops = torch.ops.torch_ragged


class SegmentExtremum(NamedTuple):
    """The result of `segment_max` / `segment_min`: ``arg`` is a row of the packed ``data``
    (RaggedTensor.max() gives the row within the member instead: ``MemberExtremum.row_in_member``).

    Args:
        values: (B, ...) tensor: each segment's extremum per column (0 for an empty segment).
        arg: (B, ...) int64 tensor: the row of ``data`` holding it along the reduced dim (-1 for an empty segment).
    """

    values: torch.Tensor
    arg: torch.Tensor

    def __reduce__(self):  # loaded through a check (torch.load(weights_only=True) allows both names)
        return _load_segment_extremum, (self.values, self.arg)


def _load_segment_extremum(values, arg) -> SegmentExtremum:
    return checked_extremum(SegmentExtremum, values, arg)


torch.serialization.add_safe_globals([SegmentExtremum, _load_segment_extremum])


def _dim_first(op: str, data: torch.Tensor, dim: int) -> tuple[torch.Tensor, int]:
    """``data`` with ``dim`` moved first (the segment ops cut dim 0), and that dim made non-negative (0: no move).
    Another dim than 0 costs the op a contiguous copy. Written for TorchScript too (no f-strings)."""
    if dim == 0 or not isinstance(data, torch.Tensor):  # not a tensor: the op names what it got
        return data, 0
    ndim = data.dim()
    if dim < -ndim or dim >= ndim:
        raise IndexError("torch_ragged." + op + ": dim " + str(dim) + " is out of range for data of " + str(ndim)
                         + " dim(s)")
    if dim < 0:
        dim += ndim
    return data.movedim(dim, 0), dim


def _dim_back(out: torch.Tensor, dim: int) -> torch.Tensor:
    """An op's result with its first dim moved back to ``dim`` (see `_dim_first`)."""
    return out if dim == 0 else out.movedim(0, dim)


def get_first_idx(numel_per_tensor: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """First row of each sub-tensor in the packed tensor, and the total: (B,) -> (B + 1,) int64.

    ``numel_per_tensor`` is an integer tensor or a list of ints.

    On a GPU, ``validate`` (no negative count, no overflow) reads one flag on the host;
    ``validate=False`` skips that synchronisation.

    Args:
        numel_per_tensor: (B,) integer tensor (int64 or int32) or list of ints: each segment's row count, none negative.
        validate: check for negative counts and int64 overflow (on a GPU one flag read on the host); ``False`` skips the
            check.

    >>> get_first_idx(torch.LongTensor([2, 3, 5]))
    tensor([ 0,  2,  5, 10])
    """
    numel_per_tensor = index_tensor("get_first_idx", "numel_per_tensor", numel_per_tensor)
    return _ops.get_first_idx(numel_per_tensor, validate)


def segment_sum(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Sum of each segment's rows: (rows, ...) -> (B, ...); empty segments give 0. ``dim`` picks the dim of
    ``data`` the segments cut (the result has B entries there).

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).

    >>> segment_sum(torch.arange(5.0), torch.tensor([0, 2, 2, 5]))
    tensor([1., 0., 9.])
    >>> segment_sum(torch.ones(2, 5), torch.tensor([0, 2, 5]), dim=1)
    tensor([[2., 3.],
            [2., 3.]])
    """
    data, dim = _dim_first("segment_sum", data, dim)
    first_idx = index_tensor("segment_sum", "first_idx", first_idx)
    return _dim_back(_ops.segment_sum(data, first_idx), dim)


def segment_mean(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Mean of each segment's rows (along ``dim``); empty segments give 0. Integer data gives the integer sum divided
    by the row count, truncating toward zero (as torch_scatter's ``segment_csr(..., reduce="mean")``).

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).

    >>> segment_mean(torch.arange(5.0), torch.tensor([0, 2, 2, 5]))
    tensor([0.5000, 0.0000, 3.0000])
    """
    data, dim = _dim_first("segment_mean", data, dim)
    first_idx = index_tensor("segment_mean", "first_idx", first_idx)
    return _dim_back(_ops.segment_mean(data, first_idx), dim)


def segment_max(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0) -> SegmentExtremum:
    """Max of each segment per column and the row of ``data`` holding it (first on ties, NaN wins); along ``dim``,
    ``arg`` is a position along that dim.

    Empty segments give value 0 and arg -1. The gradient flows to the ``arg`` rows.

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).

    >>> segment_max(torch.tensor([1.0, 3.0, 3.0, 2.0]), torch.tensor([0, 3, 3, 4]))
    SegmentExtremum(values=tensor([3., 0., 2.]), arg=tensor([ 1, -1,  3]))
    """
    data, dim = _dim_first("segment_max", data, dim)
    first_idx = index_tensor("segment_max", "first_idx", first_idx)
    values, arg = _ops.segment_max(data, first_idx)
    return SegmentExtremum(_dim_back(values, dim), _dim_back(arg, dim))


def segment_min(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0) -> SegmentExtremum:
    """Min of each segment per column and the row of ``data`` holding it (see `segment_max`).

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).

    >>> segment_min(torch.tensor([1.0, 3.0, 0.5]), torch.tensor([0, 2, 3]))
    SegmentExtremum(values=tensor([1.0000, 0.5000]), arg=tensor([0, 2]))
    """
    data, dim = _dim_first("segment_min", data, dim)
    first_idx = index_tensor("segment_min", "first_idx", first_idx)
    values, arg = _ops.segment_min(data, first_idx)
    return SegmentExtremum(_dim_back(values, dim), _dim_back(arg, dim))


def segment_softmax(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Softmax within each segment (of ``dim``), per column: same shape as ``data`` (floating dtypes).

    Args:
        data: floating tensor (half, bfloat16, float, double): its size along ``dim`` is the row count
            ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).

    >>> segment_softmax(torch.tensor([0.0, 0.0, 5.0]), torch.tensor([0, 2, 3]))
    tensor([0.5000, 0.5000, 1.0000])
    """
    data, dim = _dim_first("segment_softmax", data, dim)
    first_idx = index_tensor("segment_softmax", "first_idx", first_idx)
    return _dim_back(_ops.segment_softmax(data, first_idx), dim)


def segment_log_softmax(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Log-softmax within each segment (of ``dim``), per column: same shape as ``data`` (floating dtypes).

    Args:
        data: floating tensor (half, bfloat16, float, double): its size along ``dim`` is the row count
            ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).

    >>> segment_log_softmax(torch.tensor([0.0, 0.0, 5.0]), torch.tensor([0, 2, 3]))
    tensor([-0.6931, -0.6931,  0.0000])
    """
    data, dim = _dim_first("segment_log_softmax", data, dim)
    first_idx = index_tensor("segment_log_softmax", "first_idx", first_idx)
    return _dim_back(_ops.segment_log_softmax(data, first_idx), dim)


def segment_cumsum(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0, reverse: bool = False,
                   exclusive: bool = False) -> torch.Tensor:
    """Cumulative sum within each segment (of ``dim``), per column: same shape as ``data``. ``reverse`` sums from
    each segment's last row to its first; ``exclusive`` gives each row the sum of the rows before it (0 on a
    segment's first row). Integer and bool data give int64, as torch.cumsum; floats add in one fixed order
    (deterministic across runs, thread counts and devices). Twice differentiable.

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).
        reverse: scan from each segment's last row to its first.
        exclusive: each row gets the result of the rows before it (the identity on a segment's first row).

    >>> segment_cumsum(torch.tensor([1, 2, 3, 4, 5]), torch.tensor([0, 2, 5]))
    tensor([ 1,  3,  3,  7, 12])
    >>> segment_cumsum(torch.tensor([1, 2, 3, 4, 5]), torch.tensor([0, 2, 5]), exclusive=True)
    tensor([0, 1, 0, 3, 7])
    """
    data, dim = _dim_first("segment_cumsum", data, dim)
    first_idx = index_tensor("segment_cumsum", "first_idx", first_idx)
    return _dim_back(_ops.segment_cumsum(data, first_idx, reverse, exclusive), dim)


def segment_cumprod(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0, reverse: bool = False,
                    exclusive: bool = False) -> torch.Tensor:
    """Cumulative product within each segment (of ``dim``), per column (``exclusive``: 1 on a segment's first
    row); see `segment_cumsum`. Twice differentiable, zeros included.

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).
        reverse: scan from each segment's last row to its first.
        exclusive: each row gets the result of the rows before it (the identity on a segment's first row).

    >>> segment_cumprod(torch.tensor([2.0, 3.0, 4.0, 5.0]), torch.tensor([0, 2, 4]), reverse=True)
    tensor([ 6.,  3., 20.,  5.])
    """
    data, dim = _dim_first("segment_cumprod", data, dim)
    first_idx = index_tensor("segment_cumprod", "first_idx", first_idx)
    return _dim_back(_ops.segment_cumprod(data, first_idx, reverse, exclusive), dim)


def segment_cummax(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0, reverse: bool = False) -> SegmentExtremum:
    """Running max within each segment (of ``dim``), per column, and the row of ``data`` holding it: torch.cummax's
    rule (the later of equal values, NaN wins), in scan order (``reverse``: from each segment's last row). ``arg``
    is a packed row, as `segment_max`'s. The gradient flows to the ``arg`` rows.

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).
        reverse: scan from each segment's last row to its first.

    >>> segment_cummax(torch.tensor([1.0, 3.0, 2.0, 0.0, 5.0]), torch.tensor([0, 3, 5]))
    SegmentExtremum(values=tensor([1., 3., 3., 0., 5.]), arg=tensor([0, 1, 1, 3, 4]))
    """
    data, dim = _dim_first("segment_cummax", data, dim)
    first_idx = index_tensor("segment_cummax", "first_idx", first_idx)
    values, arg = _ops.segment_cummax(data, first_idx, reverse)
    return SegmentExtremum(_dim_back(values, dim), _dim_back(arg, dim))


def segment_cummin(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0, reverse: bool = False) -> SegmentExtremum:
    """Running min within each segment and the row holding it; see `segment_cummax`.

    Args:
        data: tensor (floating, integer or bool): its size along ``dim`` is the row count ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).
        reverse: scan from each segment's last row to its first.

    >>> segment_cummin(torch.tensor([1.0, 3.0, 0.5]), torch.tensor([0, 3]))
    SegmentExtremum(values=tensor([1.0000, 1.0000, 0.5000]), arg=tensor([0, 0, 2]))
    """
    data, dim = _dim_first("segment_cummin", data, dim)
    first_idx = index_tensor("segment_cummin", "first_idx", first_idx)
    values, arg = _ops.segment_cummin(data, first_idx, reverse)
    return SegmentExtremum(_dim_back(values, dim), _dim_back(arg, dim))


def segment_logcumsumexp(data: torch.Tensor, first_idx: torch.Tensor, dim: int = 0,
                         reverse: bool = False) -> torch.Tensor:
    """``log(cumsum(exp(data)))`` within each segment (of ``dim``), per column, computed stably (as
    torch.logcumsumexp; floating dtypes, half and bfloat16 accumulate in float). Twice differentiable.

    Args:
        data: floating tensor (half, bfloat16, float, double): its size along ``dim`` is the row count
            ``first_idx[-1]``.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        dim: the dim of ``data`` that the segments cut (default 0; negative counts from the end).
        reverse: scan from each segment's last row to its first.

    >>> segment_logcumsumexp(torch.tensor([0.0, 0.0, 1e4, 1e4]), torch.tensor([0, 2, 4]))
    tensor([0.0000e+00, 6.9315e-01, 1.0000e+04, 1.0001e+04])
    """
    data, dim = _dim_first("segment_logcumsumexp", data, dim)
    first_idx = index_tensor("segment_logcumsumexp", "first_idx", first_idx)
    return _dim_back(_ops.segment_logcumsumexp(data, first_idx, reverse), dim)


def segment_arange(first_idx: torch.Tensor, num_rows: int | None = None) -> torch.Tensor:
    """Each row's position within its segment: (rows,) int64, on ``first_idx``'s device (what `segment_ids` is to
    the segment index). Pass ``num_rows`` (= ``first_idx[-1]``) to keep torch.compile graphs static.

    Args:
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        num_rows: the row count ``first_idx[-1]`` when known (an int): keeps torch.compile graphs static and, on a GPU,
            skips reading it on the host.

    >>> segment_arange(torch.tensor([0, 2, 2, 5]))
    tensor([0, 1, 0, 1, 2])
    """
    return _ops.segment_arange(index_tensor("segment_arange", "first_idx", first_idx), num_rows)


def segment_expand(values: torch.Tensor, first_idx: torch.Tensor, num_rows: int | None = None) -> torch.Tensor:
    """Row r of the result is ``values[b]`` for the segment b holding r: (B, ...) -> (rows, ...).

    Pass ``num_rows`` (= ``first_idx[-1]``) to keep torch.compile graphs static and, on a GPU, to
    skip reading ``first_idx[-1]`` on the host.

    Args:
        values: ``(B, *D)`` tensor: one value (or row) per segment.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        num_rows: the row count ``first_idx[-1]`` when known (an int): keeps torch.compile graphs static and, on a GPU,
            skips reading it on the host.

    >>> segment_expand(torch.tensor([10, 20, 30]), torch.tensor([0, 2, 2, 3]))
    tensor([10, 10, 30])
    """
    return _ops.segment_expand(values, index_tensor("segment_expand", "first_idx", first_idx), num_rows)


def segment_ids(first_idx: torch.Tensor, num_rows: int | None = None) -> torch.Tensor:
    """The segment of every row: (rows,) int64, on ``first_idx``'s device.

    Args:
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        num_rows: the row count ``first_idx[-1]`` when known (an int): keeps torch.compile graphs static and, on a GPU,
            skips reading it on the host.

    >>> segment_ids(torch.tensor([0, 2, 2, 3]))
    tensor([0, 0, 2])
    """
    return _ops.segment_ids(index_tensor("segment_ids", "first_idx", first_idx), num_rows)


def ragged_index_select(values: torch.Tensor, first_idx: torch.Tensor, index: torch.Tensor,
                        num_rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The segments ``index`` picks, in that order, packed: ``(values, first_idx)`` of the selection.

    ``index`` is a 1-D integer tensor (or list); negative entries count from the end; repeats are allowed.
    Differentiable in ``values`` (backward: index_add of the gradient onto the rows it came from).

    Args:
        values: ``(rows, *feature)`` tensor: the packed rows of every segment.
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        index: 1-D integer tensor or list: the positions to pick (negative counts from the end; repeats allowed).
        num_rows: the row count ``first_idx[-1]`` when known (an int): keeps torch.compile graphs static and, on a GPU,
            skips reading it on the host.

    >>> ragged_index_select(torch.arange(5.0), torch.tensor([0, 2, 2, 5]), torch.tensor([2, 0]))
    (tensor([2., 3., 4., 0., 1.]), tensor([0, 3, 5]))
    """
    first_idx = index_tensor("ragged_index_select", "first_idx", first_idx)
    index = index_tensor("ragged_index_select", "index", index)
    selected, selected_first_idx = _ops.ragged_index_select(values, first_idx, index, num_rows)
    return selected, selected_first_idx


# ---- scatter by an unsorted index (torch_scatter's API) on the segment core ----

def scatter(src: torch.Tensor, index: torch.Tensor, dim: int = -1, dim_size: int | None = None,
            reduce: str = "sum") -> torch.Tensor:
    """torch_scatter's ``scatter``: ``out[index[i]] (+)= src[i]`` along ``dim``, by an unsorted index.

    ``index`` gives each element of ``src`` its position along ``dim``: 1-D with one entry per row along ``dim``,
    or broadcast to ``src`` as torch_scatter broadcasts it (a 1-D index lines up with ``dim``, one of more dims
    with ``src``'s leading dims, then it is expanded over the dims it lacks), where it may differ from element to
    element (each line along ``dim`` is then scattered on its own); int64 or int32 (a sequence of ints is taken
    too). The output has ``dim_size`` rows along ``dim`` (default ``index.max() + 1``). ``reduce``: ``"sum"``
    (or ``"add"``), ``"mean"``, ``"mul"``, ``"max"``, ``"min"``; positions nothing reaches are 0 (1 for
    ``"mul"``). The elements are grouped by a stable sort of the index (none where it is already sorted, on the
    CPU) and each group is reduced in src's order by the segment core: deterministic on every device,
    differentiable (max / min: the gradient goes to the element holding the extremum, the first on ties; mul:
    correct with zeros, as torch's prod). Integer means are the 64-bit sum over the count, rounded toward minus
    infinity as torch_scatter's. torch_scatter's own signatures (``out=``, ``scatter_mul``, ``segment_csr``, ...):
    `torch_ragged.scatter_compat`.

    The op ``torch.ops.torch_ragged.scatter`` (the same arguments) is what this calls: TorchScript, torch.compile
    (``fullgraph=True``) and torch.export take either; without ``dim_size`` the output size comes from the data.

    Args:
        src: tensor of the values to reduce (any shape; floating, integer or bool for sums).
        index: integer tensor: each element's position along ``dim``, 1-D with one entry per row of ``src`` along
            ``dim``, or broadcastable to ``src`` as torch_scatter broadcasts it; entries in ``[0, dim_size)``.
        dim: the dim of ``src`` to reduce along (default -1).
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, one host read on a GPU, a data-
            dependent size under torch.compile).
        reduce: ``"sum"`` (``"add"``), ``"mean"``, ``"mul"``, ``"max"`` or ``"min"``.

    >>> scatter(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([2, 0, 2, 0]))
    tensor([6., 0., 4.])
    >>> scatter(torch.tensor([[1.0, 5.0], [3.0, 1.0]]), torch.tensor([1, 1]), dim=0, reduce="max")
    tensor([[0., 0.],
            [3., 5.]])
    """
    if not isinstance(index, torch.Tensor):  # TorchScript compiles only the tensor path
        index = integer_tensor("scatter", "index", index)
    return torch.ops.torch_ragged.scatter(src, index, dim, dim_size, reduce)


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim: int = -1,
                dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``scatter_max``: ``(out, argmax)``, argmax the row of ``src`` along ``dim`` holding each
    maximum (the first on ties, NaN wins); positions no row reaches give 0 and ``src.size(dim)``, as torch_scatter.
    The op: ``torch.ops.torch_ragged.scatter_max``.

    Args:
        src: tensor of the values to reduce (any shape; floating, integer or bool for sums).
        index: integer tensor: each element's position along ``dim`` (see `scatter`).
        dim: the dim of ``src`` to reduce along (default -1).
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, one host read on a GPU, a data-
            dependent size under torch.compile).

    >>> scatter_max(torch.tensor([1.0, 7.0, 3.0]), torch.tensor([1, 1, 0]), dim_size=3)
    (tensor([3., 7., 0.]), tensor([2, 1, 3]))
    """
    if not isinstance(index, torch.Tensor):
        index = integer_tensor("scatter_max", "index", index)
    return torch.ops.torch_ragged.scatter_max(src, index, dim, dim_size)


def scatter_min(src: torch.Tensor, index: torch.Tensor, dim: int = -1,
                dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``scatter_min``: ``(out, argmin)``; see `scatter_max`. The op:
    ``torch.ops.torch_ragged.scatter_min``.

    Args:
        src: tensor of the values to reduce (any shape; floating, integer or bool for sums).
        index: integer tensor: each element's position along ``dim`` (see `scatter`).
        dim: the dim of ``src`` to reduce along (default -1).
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, one host read on a GPU, a data-
            dependent size under torch.compile).

    >>> scatter_min(torch.tensor([1.0, 7.0, 3.0]), torch.tensor([1, 1, 0]))
    (tensor([3., 1.]), tensor([2, 0]))
    """
    if not isinstance(index, torch.Tensor):
        index = integer_tensor("scatter_min", "index", index)
    return torch.ops.torch_ragged.scatter_min(src, index, dim, dim_size)


# ---- fake kernels (torch.compile / torch.export) ----

def register_fake(qualname: str):
    """torch.library.register_fake for torch_ragged's ops, refusing a call that mixes meta and real tensors.

    A fake kernel also serves eager calls with meta tensors (shape propagation). When a meta tensor comes with real
    ones, the dispatcher still picks the fake kernel, which would return *real* tensors of uninitialised memory
    (issue 16 item 14): all-meta calls (and meta data with CPU index tensors, which give meta outputs) keep working;
    real outputs from a mix of meta and real inputs raise here."""
    op = qualname.split("::")[1]

    def decorate(fake):
        @functools.wraps(fake)
        def checked(*args, **kwargs):
            result = fake(*args, **kwargs)
            _refuse_real_outputs_from_meta(op, args, result)
            return result

        return _torch_register_fake(qualname)(checked)

    return decorate


def _refuse_real_outputs_from_meta(op: str, args, result) -> None:
    def is_meta(t):  # a plain meta tensor (FakeTensors under torch.compile / export report their fake device)
        return isinstance(t, torch.Tensor) and t.device.type == "meta" and not isinstance(
            t, torch._subclasses.FakeTensor)

    tensors = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
    # all-meta calls may still return CPU metadata computed from shapes (a list's shape_per_tensor)
    if not any(is_meta(t) for t in tensors) or all(is_meta(t) for t in tensors):
        return
    real = sorted({str(t.device) for t in pytree.tree_leaves(result)
                   if isinstance(t, torch.Tensor) and t.device.type != "meta"})
    if real:
        names = [a.name for a in getattr(torch.ops.torch_ragged, op).default._schema.arguments]
        on_meta = [name for name, value in zip(names, args, strict=False)
                   if any(is_meta(t) for t in pytree.tree_leaves(value))]
        raise ValueError(f"torch_ragged.{op}: {', '.join(on_meta)} on the meta device mixed with tensors on "
                         f"{', '.join(real)}: pass all tensors on one device (meta tensors give shapes only)")


def _check_index_devices(op: str, data: torch.Tensor, **index_tensors) -> None:
    """Index tensors live on the CPU or on the data's device. A meta index tensor with real data (or the reverse)
    would otherwise reach a fake kernel eagerly and return uninitialised memory."""
    for name, t in index_tensors.items():
        if t.device != data.device and t.device.type != "cpu":
            raise ValueError(f"torch_ragged.{op}: {name} must be on the CPU or on the data's device {data.device}, "
                             f"got {t.device}")


def _is_real_cpu(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "cpu" and not isinstance(t, torch._subclasses.FakeTensor)


def _check_offsets_like_the_kernel(op: str, data, first_idx, *rest):
    """Meta data with a real CPU first_idx (an eager shape query): the index tensors hold values, so they are checked
    as the real call would check them -- by the CPU kernel itself on zero-width data (O(segments), no data read), the
    same errors under the same name. Returns the kernel's outputs (None when there is nothing real to check)."""
    if not (_is_real_cpu(first_idx) and isinstance(data.shape[0], int)):
        return None
    return getattr(_ops, op)(torch.empty((data.shape[0], 0)), first_idx, *rest)


def _per_segment(op, data, first_idx, dtype=None):
    _check_index_devices(op, data, first_idx=first_idx)
    torch._check(data.dim() >= 1, lambda: f"torch_ragged.{op}: data must have at least 1 dim")
    _check_offsets_like_the_kernel(op, data, first_idx)
    return data.new_empty((first_idx.shape[0] - 1, *data.shape[1:]), dtype=dtype)


@register_fake("torch_ragged::get_first_idx")
def _get_first_idx_fake(numel_per_tensor, validate=True):
    return numel_per_tensor.new_empty((numel_per_tensor.shape[0] + 1,), dtype=torch.long)


@register_fake("torch_ragged::segment_sum")
def _segment_sum_fake(data, first_idx):
    return _per_segment("segment_sum", data, first_idx)


@register_fake("torch_ragged::segment_mean")
def _segment_mean_fake(data, first_idx):
    return _per_segment("segment_mean", data, first_idx)


@register_fake("torch_ragged::segment_max")
def _segment_max_fake(data, first_idx):
    return _per_segment("segment_max", data, first_idx), _per_segment("segment_max", data, first_idx, torch.long)


@register_fake("torch_ragged::segment_min")
def _segment_min_fake(data, first_idx):
    return _per_segment("segment_min", data, first_idx), _per_segment("segment_min", data, first_idx, torch.long)


@register_fake("torch_ragged::segment_softmax")
def _segment_softmax_fake(data, first_idx):
    _check_index_devices("segment_softmax", data, first_idx=first_idx)
    _check_offsets_like_the_kernel("segment_softmax", data, first_idx)
    return torch.empty_like(data, memory_format=torch.contiguous_format)


@register_fake("torch_ragged::segment_log_softmax")
def _segment_log_softmax_fake(data, first_idx):
    _check_index_devices("segment_log_softmax", data, first_idx=first_idx)
    _check_offsets_like_the_kernel("segment_log_softmax", data, first_idx)
    return torch.empty_like(data, memory_format=torch.contiguous_format)


def _scanned(op: str, data, first_idx, reverse, dtype=None):
    """A scan's output: data's shape (integers and bool promoted to int64 by cumsum / cumprod: ``dtype``)."""
    _check_index_devices(op, data, first_idx=first_idx)
    torch._check(data.dim() >= 1, lambda: f"torch_ragged.{op}: data must have at least 1 dim")
    _check_offsets_like_the_kernel(op, data, first_idx, reverse)
    return torch.empty_like(data, dtype=dtype, memory_format=torch.contiguous_format)


def _promoted(data):
    return torch.long if not data.dtype.is_floating_point and not data.dtype.is_complex else None


@register_fake("torch_ragged::segment_cumsum")
def _segment_cumsum_fake(data, first_idx, reverse=False, exclusive=False):
    return _scanned("segment_cumsum", data, first_idx, reverse, _promoted(data))


@register_fake("torch_ragged::segment_cumprod")
def _segment_cumprod_fake(data, first_idx, reverse=False, exclusive=False):
    return _scanned("segment_cumprod", data, first_idx, reverse, _promoted(data))


@register_fake("torch_ragged::segment_cummax")
def _segment_cummax_fake(data, first_idx, reverse=False):
    return _scanned("segment_cummax", data, first_idx, reverse), _scanned("segment_cummax", data, first_idx,
                                                                          reverse, torch.long)


@register_fake("torch_ragged::segment_cummin")
def _segment_cummin_fake(data, first_idx, reverse=False):
    return _scanned("segment_cummin", data, first_idx, reverse), _scanned("segment_cummin", data, first_idx,
                                                                          reverse, torch.long)


@register_fake("torch_ragged::segment_logcumsumexp")
def _segment_logcumsumexp_fake(data, first_idx, reverse=False):
    return _scanned("segment_logcumsumexp", data, first_idx, reverse)


@register_fake("torch_ragged::segment_softmax_backward")
def _segment_softmax_backward_fake(grad_output, output, first_idx, log):
    _check_index_devices("segment_softmax_backward", output, first_idx=first_idx)
    return torch.empty_like(output, memory_format=torch.contiguous_format)


def _rows(num_rows, first_idx=None):
    """The row count of an expansion: given, read from real CPU offsets (an eager call with meta data), or an
    unbacked size under tracing."""
    if num_rows is not None:
        return num_rows
    if first_idx is not None and first_idx.device.type == "cpu" and not isinstance(first_idx,
                                                                                    torch._subclasses.FakeTensor):
        return int(first_idx[-1]) if first_idx.numel() else 0
    return torch.library.get_ctx().new_dynamic_size()


@register_fake("torch_ragged::segment_expand")
def _segment_expand_fake(values, first_idx, num_rows=None):
    _check_index_devices("segment_expand", values, first_idx=first_idx)
    _check_offsets_like_the_kernel("segment_expand", values, first_idx, num_rows)
    return values.new_empty((_rows(num_rows, first_idx), *values.shape[1:]))


@register_fake("torch_ragged::segment_ids")
def _segment_ids_fake(first_idx, num_rows=None):
    return first_idx.new_empty((_rows(num_rows, first_idx),), dtype=torch.long)


@register_fake("torch_ragged::segment_arange")
def _segment_arange_fake(first_idx, num_rows=None):
    return first_idx.new_empty((_rows(num_rows, first_idx),), dtype=torch.long)


@register_fake("torch_ragged::segment_gather_sum")
def _segment_gather_sum_fake(data, index, weight, first_idx):
    _check_index_devices("segment_gather_sum", data, first_idx=first_idx)
    return data.new_empty((first_idx.shape[0] - 1, *data.shape[1:]))


@register_fake("torch_ragged::segment_gather_dot")
def _segment_gather_dot_fake(a, b, index, first_idx):
    return a.new_empty((index.shape[0],))


@register_fake("torch_ragged::segment_gather_sum_dot")
def _segment_gather_sum_dot_fake(data, index, weight, first_idx, other):
    _check_index_devices("segment_gather_sum_dot", data, first_idx=first_idx)
    return data.new_empty((first_idx.shape[0] - 1, *data.shape[1:])), data.new_empty((index.shape[0],))


@register_fake("torch_ragged::ragged_index_select")
def _ragged_index_select_fake(values, first_idx, index, num_rows=None):
    _check_index_devices("ragged_index_select", values, first_idx=first_idx, index=index)
    torch._check(values.dim() >= 1, lambda: "torch_ragged.ragged_index_select: values must have at least 1 dim")
    if _is_real_cpu(index):  # with a real first_idx too: checked, and the selection's true size
        checked = _check_offsets_like_the_kernel("ragged_index_select", values, first_idx, index, num_rows)
        if checked is not None:
            return values.new_empty(checked[0].shape[:1] + values.shape[1:]), checked[1].to(values.device)
    selected = values.new_empty((_rows(num_rows), *values.shape[1:]))
    return selected, first_idx.new_empty((index.shape[0] + 1,), dtype=torch.long)


def _scattered(op: str, src, index, dim: int, dim_size):
    """scatter's output along dim: dim_size rows, or as many as the index's largest entry asks for (a size that
    comes from the data). The kernel checks the index's values."""
    if index.device != src.device:
        raise ValueError(f"torch_ragged.{op}: index must be on src's device {src.device}, got {index.device}")
    torch._check(src.dim() >= 1, lambda: f"torch_ragged.{op}: src must have at least one dim, got a 0-d tensor")
    if not -src.dim() <= dim < src.dim():
        raise IndexError(f"torch_ragged.{op}: dim {dim} is out of range for a {src.dim()}-D src")
    shape = list(src.shape)
    shape[dim] = dim_size if dim_size is not None else torch.library.get_ctx().new_dynamic_size()
    return src.new_empty(shape)


@register_fake("torch_ragged::scatter")
def _scatter_fake(src, index, dim=-1, dim_size=None, reduce="sum"):
    if reduce not in ("sum", "add", "mean", "mul", "max", "min"):
        raise ValueError(f"torch_ragged.scatter: reduce must be one of sum, add, mean, mul, max, min, got {reduce!r}")
    return _scattered("scatter", src, index, dim, dim_size)


@register_fake("torch_ragged::scatter_max")
def _scatter_max_fake(src, index, dim=-1, dim_size=None):
    out = _scattered("scatter_max", src, index, dim, dim_size)
    return out, torch.empty_like(out, dtype=torch.long)


@register_fake("torch_ragged::scatter_min")
def _scatter_min_fake(src, index, dim=-1, dim_size=None):
    out = _scattered("scatter_min", src, index, dim, dim_size)
    return out, torch.empty_like(out, dtype=torch.long)
