"""Ragged collectives on torch.distributed: gather, route and rebalance ragged batches across ranks.

A ragged batch here is ``(packed, first_idx)``: members ``packed[first_idx[i]:first_idx[i + 1]]`` (rows of any
feature shape), as everywhere in torch_ragged, or a `torch_ragged.RaggedTensor` (its ``shape_per_tensor``
travels too, so members keep several ragged dims). Every collective is built on torch.distributed's own
collectives (gloo on CPU, NCCL on GPU) and exchanges raw tensors, never pickles:

- `ragged_all_gather`: every rank's members, in rank order, on every rank;
- `ragged_all_to_all`: member i goes to rank ``dest[i]``; received members are grouped by source rank, in
  their original order, with the mapping back (source rank and index);
- `rebalance`: contiguous runs of members move so that every rank holds about the same number of rows.

Each call first exchanges sizes in one equal-size collective and reads them on the host (**one host
synchronisation per call**; two for ``rebalance``, which also needs the global row offsets), then moves the data in
collectives whose split sizes are known. Every rank of the group must call the same collective in the same order,
as with any torch.distributed collective; so must every rank's backward pass. Gradients flow: the backward of a
gather sends each rank the sum of every rank's gradient for its own rows, the backward of an all-to-all is the
reverse exchange.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch._prims_common import make_contiguous_strides_for

__all__ = ["RaggedAllToAll", "RaggedWork", "ragged_all_gather", "ragged_all_to_all", "rebalance"]

# torch >= 2.13 names it all_gather_single (all_gather_into_tensor warns); older torch (2.11 on the GPU machine)
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

# dtype codes in the size headers (every rank must send the same dtype and feature shape)
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
           torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)
_MAX_FEATURE_DIMS = 8
_HEADER_META = 3 + _MAX_FEATURE_DIMS  # dtype code, ragged dims k, feature ndim, feature sizes


class RaggedAllToAll(NamedTuple):
    """What `ragged_all_to_all` returns: the received batch and, per received member, where it came from.

    Args:
        packed: ``(rows, *feature)`` tensor (a RaggedTensor when one was sent): the received members' rows, grouped by
            source rank in their original order.
        first_idx: (B_received + 1,) int64 offsets of the received members.
        source_rank: (B_received,) int64: the rank that sent each member.
        source_index: (B_received,) int64: its member index on that rank.
    """

    packed: torch.Tensor
    first_idx: torch.Tensor
    source_rank: torch.Tensor
    source_index: torch.Tensor


class RaggedWork:
    """The handle ``async_op=True`` returns: `wait` blocks until the data has arrived and returns the result
    (the size exchange before it has already completed; only the data collectives run in the background).

    Args:
        works: the torch.distributed work handles of the data collectives.
        finish: called after they complete: builds the result.
    """

    def __init__(self, works, finish):
        self._works, self._finish, self._result, self._done = works, finish, None, False

    def wait(self):
        """Waits for the collective's transfers, then returns its result (computed once; later calls return it)."""
        if not self._done:
            for work in self._works:
                work.wait()
            self._result, self._done = self._finish(), True
        return self._result

    def is_completed(self) -> bool:
        """Whether every transfer has completed (``wait`` then returns without blocking)."""
        return self._done or all(work.is_completed() for work in self._works)


# ---- argument handling ----

def _error(kind, op: str, message: str):
    return kind(f"torch_ragged.distributed.{op}: {message}")


def _unpack(op: str, packed, first_idx):
    """(values, first_idx (int64, CPU), shape_per_tensor (B, k) int64 on the CPU, is_ragged_tensor), checked as
    RaggedTensor checks its parts."""
    from .container import RaggedTensor, _checked_parts

    if isinstance(packed, RaggedTensor):
        if first_idx is not None:
            raise _error(TypeError, op, "pass a RaggedTensor alone (it carries its own first_idx)")
        return packed.values, packed.first_idx, packed.shape_per_tensor, True
    return (*_checked_parts(packed, first_idx, None, where=f"distributed.{op}", values_name="packed"), False)


def _header_meta(op: str, values: torch.Tensor, ragged_dims: int) -> list:
    if values.dtype not in _DTYPES:
        raise _error(TypeError, op, f"dtype {values.dtype} is not supported")
    feature = list(values.shape[1:])
    if len(feature) > _MAX_FEATURE_DIMS:
        raise _error(ValueError, op, f"at most {_MAX_FEATURE_DIMS} feature dims, got shape {tuple(values.shape)}")
    return [_DTYPES.index(values.dtype), ragged_dims, len(feature), *feature,
            *[0] * (_MAX_FEATURE_DIMS - len(feature))]


def _check_same_meta(op: str, metas: list) -> None:
    """Every rank got every rank's header, so every rank raises the same error (none is left waiting)."""
    for rank, meta in enumerate(metas[1:], 1):
        if meta != metas[0]:
            def describe(m):
                return f"{_DTYPES[m[0]]} rows of shape {tuple(m[3:3 + m[2]])}, {m[1]} ragged dim(s)"

            raise _error(ValueError, op, f"every rank must send the same dtype, feature shape and ragged dims; "
                         f"rank 0 sends {describe(metas[0])}, rank {rank} sends {describe(meta)}")


def _all_gather_rows(header: list, device, group) -> list:
    """One equal-size all_gather of this rank's int64 header; returns every rank's header (the host sync)."""
    mine = torch.tensor(header, dtype=torch.long, device=device)
    everyone = torch.empty(dist.get_world_size(group) * len(header), dtype=torch.long, device=device)
    _all_gather_single(everyone, mine, group=group)
    return everyone.view(-1, len(header)).tolist()


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(-1).view(torch.uint8)


def _aligned(nbytes: int) -> int:
    return -(-nbytes // 16) * 16


def _row_numel(values: torch.Tensor) -> int:
    return math.prod(values.shape[1:])


def _from_bytes(raw: torch.Tensor, dtype, shape) -> torch.Tensor:
    return raw.view(dtype).view(shape)


def _backend(group) -> str:
    return str(dist.get_backend(group)).lower()


def _repack(values, shape_per_tensor, first_idx_device, ragged_tensor: bool):
    """The result as (packed, first_idx) or a RaggedTensor."""
    from .container import RaggedTensor, _first_idx_of

    first_idx = _first_idx_of(shape_per_tensor)
    if ragged_tensor:
        return RaggedTensor(values, first_idx, shape_per_tensor, validate=False)
    return values, first_idx.to(first_idx_device)


# ---- ragged_all_gather ----

class _GatheredRows(torch.autograd.Function):
    """Forward: the gathered rows (already received). Backward: each rank's rows of the gradient go back to that
    rank (all_to_all_single, uneven splits) and the world's contributions are summed (a reduce-scatter)."""

    @staticmethod
    def forward(ctx, values, gathered, rows_per_rank, group):
        ctx.rows_per_rank, ctx.group, ctx.rank = rows_per_rank, group, dist.get_rank(group)
        return gathered

    @staticmethod
    def backward(ctx, grad):
        world, own = len(ctx.rows_per_rank), ctx.rows_per_rank[ctx.rank]
        grad = grad.contiguous()
        received = grad.new_empty((world * own, *grad.shape[1:]))
        dist.all_to_all_single(received, grad, [own] * world, ctx.rows_per_rank, group=ctx.group)
        return received.view(world, own, *grad.shape[1:]).sum(0), None, None, None


def ragged_all_gather(packed, first_idx: torch.Tensor | None = None, group=None, async_op: bool = False):
    """Every rank's members, in rank order, on every rank: ``(packed, first_idx)``, or a RaggedTensor for a
    RaggedTensor. Members may be empty, and so may a rank. Differentiable in ``packed``: each rank receives
    the sum over ranks of the gradient of its own rows.

    One host synchronisation (the size exchange). The data moves without padding or pickling: on NCCL, one
    all_gather with each rank's exact size; on gloo (no uneven all_gather), one broadcast per rank straight into
    that rank's slice of the result (rows, and shape_per_tensor records).

    Args:
        packed: ``(rows, *feature)`` tensor or a `RaggedTensor`: this rank's members' rows (feature shape and dtype the
            same on every rank).
        first_idx: (B + 1,) int64 offsets of this rank's members (``None`` with a RaggedTensor).
        group: the process group (``None``: the default group); every rank of it must make the same call.
        async_op: return a `RaggedWork` handle whose ``wait()`` gives the result; the size exchange has completed when
            the call returns.
    """
    op = "ragged_all_gather"
    values, first_idx, spt, ragged_tensor = _unpack(op, packed, first_idx)
    rank = dist.get_rank(group)
    headers = _all_gather_rows([spt.shape[0], values.shape[0], *_header_meta(op, values, spt.shape[1])],
                               values.device, group)
    _check_same_meta(op, [h[2:] for h in headers])
    members = [h[0] for h in headers]
    rows = [h[1] for h in headers]
    if _backend(group) == "nccl":
        works, finish_parts = _gather_exact(values, spt, members, rows, group)
    else:
        works, finish_parts = _gather_by_broadcasts(values, spt, members, rows, rank, group)

    def finish():
        gathered, shapes = finish_parts()
        if values.requires_grad and torch.is_grad_enabled():
            gathered = _GatheredRows.apply(values, gathered, rows, group)
        return _repack(gathered, shapes.cpu(), values.device, ragged_tensor)

    handle = RaggedWork(works, finish)
    return handle if async_op else handle.wait()


def _gather_by_broadcasts(values, spt, members: list, rows: list, rank: int, group):
    """Every rank's rows and shape records broadcast by their owner into their place in the result (no padding,
    no compaction). A broadcast nobody needs (zero rows) is skipped on every rank alike."""
    gathered = values.new_empty((sum(rows), *values.shape[1:]))
    shapes = torch.empty((sum(members), spt.shape[1]), dtype=torch.long, device=values.device)
    row_start, member_start = _prefix(rows), _prefix(members)
    own_rows = gathered[row_start[rank]:row_start[rank + 1]]
    own_rows.copy_(values.detach())
    shapes[member_start[rank]:member_start[rank + 1]].copy_(spt)
    works = []
    for r in range(len(rows)):
        source = r if group is None else dist.get_global_rank(group, r)
        if rows[r] and _row_numel(values):
            block = gathered[row_start[r]:row_start[r + 1]]
            works.append(dist.broadcast(_as_bytes(block), source, group=group, async_op=True))
        if members[r] and shapes.shape[1]:
            block = shapes[member_start[r]:member_start[r + 1]]
            works.append(dist.broadcast(block, source, group=group, async_op=True))
    return works, lambda: (gathered, shapes)


def _gather_exact(values, spt, members: list, rows: list, group):
    """NCCL: all_gather with uneven sizes (each rank's bytes: 16-byte aligned shape records, then its rows)."""
    k, row_bytes = spt.shape[1], values.element_size() * _row_numel(values)
    heads = [_aligned(m * k * 8) for m in members]
    sizes = [head + r * row_bytes for head, r in zip(heads, rows, strict=True)]
    own_head = _as_bytes(spt.to(values.device))
    payload = torch.cat([own_head, own_head.new_zeros(heads[dist.get_rank(group)] - own_head.numel()),
                         _as_bytes(values.detach())])
    parts = [payload.new_empty(size) for size in sizes]
    works = [dist.all_gather(parts, payload, group=group, async_op=True)] if max(sizes) else []

    def finish():
        shapes = [_from_bytes(part[:m * k * 8], torch.long, (m, k)) for part, m in zip(parts, members, strict=True)]
        pieces = [_from_bytes(part[head:], values.dtype, (r, *values.shape[1:]))
                  for part, head, r in zip(parts, heads, rows, strict=True)]
        return torch.cat(pieces), torch.cat(shapes)

    return works, finish


def _prefix(counts: list) -> list:
    return list(itertools.accumulate(counts, initial=0))


# ---- ragged_all_to_all and rebalance ----

class _ExchangedRows(torch.autograd.Function):
    """Forward: the rows already received. Backward: the reverse exchange (each gradient row goes back to the
    rank that sent the row)."""

    @staticmethod
    def forward(ctx, sent, received, send_rows, receive_rows, any_moved, group):
        ctx.send_rows, ctx.receive_rows, ctx.any_moved, ctx.group = send_rows, receive_rows, any_moved, group
        return received

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        back = grad.new_zeros((sum(ctx.send_rows), *grad.shape[1:]))
        if ctx.any_moved:  # the same decision on every rank: all of them call the collective, or none
            dist.all_to_all_single(back, grad, ctx.send_rows, ctx.receive_rows, group=ctx.group)
        return back, None, None, None, None, None


def _start_row_exchange(sent: torch.Tensor, send_rows: list, receive_rows: list, any_moved: bool, group):
    """Starts an all_to_all_single of `sent`'s rows (dim 0; send_rows[q] rows to rank q, receive_rows[p] from
    rank p), moved as raw bytes so every dtype travels. `any_moved` must be the same on every rank (the
    collective is skipped everywhere or nowhere). Returns (works, finish): finish() gives the received rows,
    differentiable in `sent` (backward: the reverse exchange)."""
    received = sent.new_empty((sum(receive_rows), *sent.shape[1:]))
    works = []
    row_bytes = sent.element_size() * _row_numel(sent)
    if any_moved and row_bytes:
        works.append(dist.all_to_all_single(_as_bytes(received).view(-1, row_bytes),
                                            _as_bytes(sent.detach()).view(-1, row_bytes),
                                            receive_rows, send_rows, group=group, async_op=True))

    def finish():
        if sent.requires_grad and torch.is_grad_enabled():
            return _ExchangedRows.apply(sent, received, send_rows, receive_rows, any_moved and row_bytes > 0, group)
        return received

    return works, finish


def _checked_dest(op: str, dest, members: int, world: int) -> torch.Tensor:
    if dest is None:
        raise _error(TypeError, op, "dest (the destination rank of each member) is required")
    dest = torch.as_tensor(dest).cpu()
    if dest.shape != (members,) or dest.is_floating_point() or dest.dtype == torch.bool:
        raise _error(ValueError, op, f"dest must be a 1-D integer tensor with one rank per member ({members}), got "
                     f"{dest.dtype} of shape {tuple(dest.shape)}")
    dest = dest.long()
    if members and (int(dest.min()) < 0 or int(dest.max()) >= world):
        raise _error(ValueError, op, f"dest must hold ranks in [0, {world}), got values in "
                     f"[{int(dest.min())}, {int(dest.max())}]")
    return dest


def ragged_all_to_all(packed, first_idx: torch.Tensor | None = None, dest=None, group=None,
                      async_op: bool = False) -> RaggedAllToAll | RaggedWork:
    """Sends member i to rank ``dest[i]``. Returns `RaggedAllToAll`: the members received, grouped by
    source rank (rank 0's first) and in their order on that rank, with each one's ``source_rank`` and
    ``source_index`` (its member index there). The mapping back: ``ragged_all_to_all(result.packed,
    result.first_idx, result.source_rank)`` returns every member to its rank, grouped by the rank it had gone
    to, so returned member j is original member ``torch.argsort(dest, stable=True)[j]``. For a RaggedTensor
    ``r``, call ``ragged_all_to_all(r, dest=dest)``; ``packed`` is then a RaggedTensor. Differentiable in
    ``packed`` (backward: the reverse exchange).

    One host synchronisation (the size exchange); the data moves in two all_to_all_single collectives (rows,
    and per-member records: shape and index).

    Args:
        packed: ``(rows, *feature)`` tensor or a `RaggedTensor`: this rank's members' rows (feature shape and dtype the
            same on every rank).
        first_idx: (B + 1,) int64 offsets of this rank's members (``None`` with a RaggedTensor).
        dest: (B,) int64 tensor or list: the rank each member goes to.
        group: the process group (``None``: the default group); every rank of it must make the same call.
        async_op: return a `RaggedWork` handle whose ``wait()`` gives the result; the size exchange has completed when
            the call returns.
    """
    op = "ragged_all_to_all"
    values, first_idx, spt, ragged_tensor = _unpack(op, packed, first_idx)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    dest = _checked_dest(op, dest, spt.shape[0], world)
    k = spt.shape[1]
    order = torch.argsort(dest, stable=True)
    members_to = torch.bincount(dest, minlength=world).tolist()
    rows_to = torch.zeros(world, dtype=torch.long).index_add_(0, dest, spt.prod(1)).tolist()
    headers = _all_gather_rows([*members_to, *rows_to, *_header_meta(op, values, k)], values.device, group)
    _check_same_meta(op, [h[2 * world:] for h in headers])
    members_from = [h[rank] for h in headers]
    rows_from = [h[world + rank] for h in headers]

    from .segment import ragged_index_select

    sent, _ = ragged_index_select(values, first_idx, order.to(values.device), sum(rows_to))
    records = torch.cat([spt[order], order.unsqueeze(1)], 1).to(values.device)  # shape, then index on this rank
    received_records = records.new_empty((sum(members_from), k + 1))
    # Skipping a collective must be decided alike on every rank (from the headers all of them hold), or the
    # ranks that call it wait forever.
    any_rows = any(sum(h[world:2 * world]) for h in headers)
    any_members = any(sum(h[:world]) for h in headers)
    works, received_rows = _start_row_exchange(sent, rows_to, rows_from, any_rows, group)
    if any_members:
        works.append(dist.all_to_all_single(received_records, records, members_from, members_to, group=group,
                                            async_op=True))

    def finish():
        rows = received_rows()
        shapes = received_records[:, :k].cpu()
        batch = _repack(rows, shapes, values.device, ragged_tensor)
        source_rank = torch.repeat_interleave(torch.arange(world), torch.tensor(members_from, dtype=torch.long))
        source_index = received_records[:, k]
        if ragged_tensor:
            return RaggedAllToAll(batch, batch.first_idx, source_rank, source_index)
        return RaggedAllToAll(*batch, source_rank.to(values.device), source_index)

    handle = RaggedWork(works, finish)
    return handle if async_op else handle.wait()


def rebalance(packed, first_idx: torch.Tensor | None = None, group=None):
    """Moves contiguous runs of members between ranks so that every rank holds about the same number of rows
    (within half the longest member of ``total rows / world``), never splitting a member. The members keep
    their global order (rank 0's first, then rank 1's, ...). Returns ``(packed, first_idx)`` or a RaggedTensor.

    Two host synchronisations: the ranks' row counts (for the global offsets), then the exchange's sizes.

    Args:
        packed: ``(rows, *feature)`` tensor or a `RaggedTensor`: this rank's members' rows (feature shape and dtype the
            same on every rank).
        first_idx: (B + 1,) int64 offsets of this rank's members (``None`` with a RaggedTensor).
        group: the process group (``None``: the default group); every rank of it must make the same call.
    """
    op = "rebalance"
    values, first_idx, spt, ragged_tensor = _unpack(op, packed, first_idx)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    rows = [h[0] for h in _all_gather_rows([values.shape[0]], values.device, group)]
    total = sum(rows)
    starts = first_idx[:-1].cpu() + sum(rows[:rank])
    lengths = spt.prod(1)
    # A member goes to the rank whose equal share of the global rows holds its middle row.
    dest = ((2 * starts + lengths) * world).div(2 * max(total, 1), rounding_mode="floor").clamp(0, world - 1)
    result = ragged_all_to_all(packed if ragged_tensor else values, None if ragged_tensor else first_idx, dest,
                               group=group)
    return result.packed if ragged_tensor else (result.packed, result.first_idx)


# ---- torch_ragged.pad on a DTensor ----

# Modes whose padded rows copy input rows (or a constant): on a sharded axis, each shard fetches only the input
# rows its output needs. The others (odd reflections, linear_ramp, statistics) gather the padded axes first.
_ROW_COPY_MODES = ("constant", "empty", "edge", "replicate", "reflect", "symmetric", "wrap", "circular")


def _chunk_ranges(n: int, world: int) -> list:
    """torch.chunk's split of n rows over `world` shards (what DTensor's Shard expects): (start, stop) each."""
    size = -(-n // world) if n else 0
    return [(min(n, r * size), min(n, (r + 1) * size)) for r in range(world)]


def pad_dtensor(input, widths: list, mode: str, reflect_odd: bool, local_pad):
    """torch_ragged.pad of a DTensor (called by torch_ragged.pad): `widths` flat (before, after) per axis,
    `local_pad(tensor, widths)` the same pad on a plain tensor. Axes that are sharded but not padded stay sharded
    (every shard pads its own slab, exact for every mode: padding never mixes positions along an unpadded axis);
    a sharded padded axis exchanges only the rows its new shards need (row-copy modes on a 1-D mesh), else it
    is gathered, padded and re-sharded. Partial placements are reduced first. The result follows torch.chunk's
    layout, as DTensor expects."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = input.device_mesh
    padded_axes = {k for k in range(input.dim()) if widths[2 * k] or widths[2 * k + 1]}
    # Shard and Replicate keep their meaning; Partial (pad is not linear) and other placements become Replicate.
    placements = [p if type(p) in (Shard, Replicate) else Replicate() for p in input.placements]
    if placements != list(input.placements):
        input = input.redistribute(mesh, placements)
    out_shape = [input.shape[k] + widths[2 * k] + widths[2 * k + 1] for k in range(input.dim())]

    def wrap(local, local_placements):
        return DTensor.from_local(local, mesh, local_placements, shape=torch.Size(out_shape),
                                  stride=make_contiguous_strides_for(out_shape))

    sharded_padded = [p.dim for p in placements if isinstance(p, Shard) and p.dim in padded_axes]
    if not sharded_padded:
        return wrap(local_pad(input.to_local(), widths), placements)
    if mesh.ndim == 1 and mode in _ROW_COPY_MODES and not reflect_odd:
        return wrap(_pad_sharded_axis(input, sharded_padded[0], widths, mode, local_pad), placements)
    gathered = [Replicate() if isinstance(p, Shard) and p.dim in padded_axes else p for p in placements]
    local = local_pad(input.redistribute(mesh, gathered).to_local(), widths)
    return wrap(local, gathered).redistribute(mesh, placements)


def _pad_sharded_axis(input, axis: int, widths: list, mode: str, local_pad) -> torch.Tensor:
    """This rank's output slab when a 1-D mesh shards the padded `axis` (row-copy modes): every rank knows every
    shard's input and output rows, so each computes what it owes each other rank (no size exchange, no host
    sync), one all_to_all moves those rows, and the slab is padded locally."""
    mesh = input.device_mesh
    world, rank, group = mesh.size(), mesh.get_local_rank(), mesh.get_group()
    n, before, after = input.shape[axis], widths[2 * axis], widths[2 * axis + 1]
    in_ranges = _chunk_ranges(n, world)
    out_ranges = _chunk_ranges(n + before + after, world)
    copies_rows = mode not in ("constant", "empty")
    if copies_rows:  # output row i is input row source[i] (numpy's index rule, from the 1-D op itself)
        source = torch.ops.torch_ragged.pad(torch.arange(n), [before, after], mode).tolist()

    def needed(out_start, out_stop):  # the input rows [lo, hi) that output rows [out_start, out_stop) read
        if copies_rows:
            rows = source[out_start:out_stop]
            return (min(rows), max(rows) + 1) if rows else (0, 0)
        lo = min(max(out_start - before, 0), n)
        return lo, min(max(out_stop - before, lo), n)

    wanted = [needed(*r) for r in out_ranges]
    local = input.to_local().movedim(axis, 0)
    own_start = in_ranges[rank][0]
    overlaps = [[max(0, min(hi, b) - max(lo, a)) for lo, hi in wanted] for a, b in in_ranges]  # [owner][reader]

    def own_rows_for(q):  # this rank's input rows that rank q's output reads
        return local[max(wanted[q][0], own_start) - own_start:][:overlaps[rank][q]]

    # Only rows crossing shard boundaries travel; a rank's own rows are used in place.
    moves = [[0 if owner == reader else count for reader, count in enumerate(row)] for owner, row in
             enumerate(overlaps)]
    sent = torch.cat([own_rows_for(q) for q in range(world) if q != rank]) if world > 1 else local[:0]
    works, received = _start_row_exchange(sent.contiguous(), moves[rank], [row[rank] for row in moves],
                                          any(any(row) for row in moves), group)
    for work in works:
        work.wait()
    halo = received()  # grouped by owner: ranks below this one own the rows before its own, ranks above after
    from_below = sum(moves[owner][rank] for owner in range(rank))
    slab = torch.cat([halo[:from_below], own_rows_for(rank), halo[from_below:]])  # input rows [lo, hi)
    (out_start, out_stop), (lo, hi) = out_ranges[rank], wanted[rank]
    other_widths = list(widths)
    other_widths[2 * axis] = other_widths[2 * axis + 1] = 0
    if copies_rows:
        rows = torch.tensor(source[out_start:out_stop], dtype=torch.long, device=slab.device) - lo
        return local_pad(slab.index_select(0, rows).movedim(0, axis), other_widths)
    # constant / empty: pad the slab (global output rows [lo + before, hi + before)) and cut [out_start, out_stop)
    pad_before, pad_after = lo + before - out_start, out_stop - (hi + before)
    slab_widths = list(widths)
    slab_widths[2 * axis], slab_widths[2 * axis + 1] = max(pad_before, 0), max(pad_after, 0)
    padded = local_pad(slab.movedim(0, axis), slab_widths)
    return padded.narrow(axis, max(-pad_before, 0), out_stop - out_start)
