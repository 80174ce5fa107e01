"""Speed census: every public op against its closest torch (or peer) equivalent, at three sizes.

    python benchmarks/run.py --family census [--device cuda] [--quick] [--json FILE [--plot]] [--only SUBSTRING]

One row per (op, size, pass): sizes are tiny (<= 16 rows or entries: the per-call cost), medium (~1e5 elements)
and large (~1e7 elements, dense outputs <= 1 GB); passes are the forward and, where the op is differentiable, the
forward + backward (gradients of a sum of the output). Each row names its baseline: torch's own op where one exists,
else the route a user writes today (pad_sequence and a mask, repeat_interleave, numpy.pad on the host, a dense
detour). Results (and gradients) are checked equal to the baseline's before anything is timed; timing alternates
the two sides (`paired_medians`). The table is sorted by ratio (baseline time / ours: < 1 is a loss) and flags losses.

`CASES` maps each row's op name to its builder; `COVERED_ELSEWHERE` names the public names without a row here and
why. tests/python/test_census.py checks that every public name is one or the other and runs every builder once.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import bench_batch
import numpy as np
import torch
import torch.nn.functional as F
import torch_ragged
import torch_ragged.sparse as rs
from bench_batch import median_seconds, paired_medians, synchronized
from torch.nn.utils.rnn import pad_sequence
from torch_ragged import tiles

SIZES = {"tiny": 16, "medium": 100_000, "large": 10_000_000}  # elements of the op's main input


@dataclass
class Pair:
    """One row's two sides: `theirs` and `ours` take no arguments (inputs bound by the builder). `leaves` are the
    inputs both sides differentiate in the forward + backward pass (empty: forward only)."""

    baseline: str
    theirs: Callable[[], Any]
    ours: Callable[[], Any]
    leaves: tuple = ()
    comparable: bool = True  # False: the two results are different forms of the same data (said in `baseline`)
    tolerance: dict = field(default_factory=dict)
    switch: Callable[[bool], Any] | None = None  # called with True before `ours` runs, False before `theirs`


CASES: dict[str, Callable[..., Pair]] = {}

# Float sums of hundreds of terms (sparse products, sums over rows) in another order than torch's: equal within
# rounding, not bit for bit (at the large size torch's float32 row sums are off the float64 sum by up to 8e-5,
# ours by 2e-5).
REORDERED_SUMS = dict(rtol=1e-4, atol=1e-4)


def case(name: str, differentiable: bool = False):
    def register(builder):
        builder.differentiable = differentiable
        CASES[name] = builder
        return builder

    return register


# Public names (in any module's __all__) without a census row, and why.
COVERED_ELSEWHERE = {
    "RaggedAllToAll": "the result type of ragged_all_to_all",
    "RaggedWork": "the handle of an async collective",
    "ragged_all_gather": "needs a process group: `--family distributed` times it against pad-to-max all_gather",
    "ragged_all_to_all": "needs a process group: `--family distributed`",
    "rebalance": "needs a process group: `--family distributed`",
    "MemberExtremum": "the result type of RaggedTensor.max / min",
    "RaggedCollate": "the collate_fn class: its call is the `collate` row",
    "SparsePlan": "the plan object: `sparse.plan` row, and `sparse.mm` with a plan",
    "accelerate": "the switch: the `accelerated aten::*` rows time every op it takes over",
    "is_accelerated": "reads a flag",
    "built_with_cuda": "build information",
    "cuda_version": "build information",
    "cmake_prefix_path": "build information",
    "scatter_add": "scatter_compat's alias of scatter_sum (the same op call): the `scatter_compat.scatter_sum` rows",
    "segment_add_csr": "scatter_compat's alias of segment_sum_csr: the `scatter_compat.segment_sum_csr` rows",
    "segment_add_coo": "scatter_compat's alias of segment_sum_coo: the `scatter_compat.segment_sum_coo` rows",
}


def census_rows_for(public_name: str, module: str) -> list:
    """The CASES rows timing a public name: ``name``, ``name <variant>`` (``pad reflect``) or ``Class.method``; the
    sparse and scatter_compat modules' names carry their module's prefix (``sparse.mm``)."""
    key = f"{module}.{public_name}" if module in ("sparse", "scatter_compat") else public_name
    return [row for row in CASES if row == key or row.startswith((key + " ", key + ".", key + "[", key + " @"))]


# ---------------------------------------------------------------------------------------------------------------
# Inputs


def _generator(seed=0):
    return torch.Generator().manual_seed(seed)


@dataclass
class Packed:
    values: torch.Tensor
    lengths: torch.Tensor
    first_idx: torch.Tensor
    members: list

    @property
    def shape_per_tensor(self):
        return self.lengths.view(-1, 1)

    def mask(self):
        return torch.arange(int(self.lengths.max()), device=self.values.device)[None] < self.lengths[:, None]


LIST_MEMBERS = 2000  # list inputs: at most this many members (autograd over a list of 38k leaves takes minutes)


def packed(n, device, width=16, max_len=32, grad=False, dtype=torch.float32, max_members=None):
    """About n elements as members of U[1, max_len] rows x width columns (tiny: 3 members, <= 16 rows); with
    `max_members`, longer members so that there are at most that many."""
    g = _generator()
    if max_members is not None:
        max_len = max(max_len, 2 * n // (width * max_members))
    if n <= SIZES["tiny"]:
        lengths = torch.tensor([3, 1, 4])
        width = min(width, 4)
    else:
        count = max(1, n // (width * (max_len + 1) // 2))
        lengths = torch.randint(1, max_len + 1, (count,), generator=g)
    values = torch.randn(int(lengths.sum()), width, generator=g).to(device=device, dtype=dtype)
    values.requires_grad_(grad)
    lengths = lengths.to(device)
    first_idx = torch_ragged.get_first_idx(lengths)
    return Packed(values, lengths, first_idx, list(values.split(lengths.tolist())))


def sparse_matrix(n, device, grad=False, coalesced=True, square=None):
    """A 2-D COO tensor of about n entries (tiny: 3 x 3 with 4 entries)."""
    g = _generator()
    nnz = max(4, n // 4) if n <= SIZES["tiny"] else n
    side = square or (3 if n <= SIZES["tiny"] else max(64, int(math.sqrt(nnz * 40))))
    indices = torch.stack([torch.randint(0, side, (nnz,), generator=g), torch.randint(0, side, (nnz,), generator=g)])
    s = torch.sparse_coo_tensor(indices, torch.randn(nnz, generator=g), (side, side), check_invariants=False)
    s = (s.coalesce() if coalesced else s).to(device)
    return s.requires_grad_(grad) if grad else s


def dense_columns(rows, device, columns=None, n=None, grad=False):
    columns = columns or (8 if n is None or n <= SIZES["tiny"] else 64)
    return torch.randn(rows, columns, generator=_generator(1)).to(device).requires_grad_(grad)


# ---------------------------------------------------------------------------------------------------------------
# segment family


def masked_padded(p, fill=0.0, mask=None):
    """The padded batch by one masked assignment: torch's fastest route (pad_sequence of the split members is as
    fast forward, but its backward makes one gradient per member: minutes at 600k members)."""
    mask = p.mask() if mask is None else mask
    out = p.values.new_full((len(p.lengths), mask.shape[1]) + tuple(p.values.shape[1:]), fill)
    return out.masked_scatter(mask.view(mask.shape + (1,) * (p.values.dim() - 1)), p.values)


def _segment_reduce(name, torch_reduce):
    @case(name, differentiable=True)
    def build(n, device, grad):
        p = packed(n, device, grad=grad)
        ours = getattr(torch_ragged, name)
        return Pair(f"torch.segment_reduce({torch_reduce})",
                    lambda: torch.segment_reduce(p.values, torch_reduce, lengths=p.lengths),
                    lambda: ours(p.values, p.first_idx), (p.values,))


for _name, _reduce in [("segment_sum", "sum"), ("segment_mean", "mean"), ("segment_max", "max"),
                       ("segment_min", "min")]:
    _segment_reduce(_name, _reduce)


def _segment_softmax(name, torch_fn):
    @case(name, differentiable=True)
    def build(n, device, grad):
        p = packed(n, device, grad=grad)
        mask = p.mask()
        ours = getattr(torch_ragged, name)
        return Pair(f"{torch_fn.__name__} of the -inf padded batch (masked_scatter, mask back)",
                    lambda: torch_fn(masked_padded(p, -math.inf, mask), 1)[mask],
                    lambda: ours(p.values, p.first_idx), (p.values,))


_segment_softmax("segment_softmax", torch.softmax)
_segment_softmax("segment_log_softmax", torch.log_softmax)


def _segment_scan(name, torch_scan, fill, values_only=False):
    @case(name, differentiable=True)
    def build(n, device, grad):
        p = packed(n, device, grad=grad)
        mask = p.mask()
        ours = getattr(torch_ragged, name)
        label = torch_scan.__name__
        if values_only:  # cummax / cummin: the values (the args are packed rows here, member rows there)
            return Pair(f"{label} of the padded batch (masked_scatter, mask back)",
                        lambda: torch_scan(masked_padded(p, fill, mask), 1).values[mask],
                        lambda: ours(p.values, p.first_idx).values, (p.values,))
        return Pair(f"{label} of the padded batch (masked_scatter, mask back)",
                    lambda: torch_scan(masked_padded(p, fill, mask), 1)[mask],
                    lambda: ours(p.values, p.first_idx), (p.values,), tolerance=REORDERED_SUMS)


_segment_scan("segment_cumsum", torch.cumsum, 0.0)
_segment_scan("segment_cumprod", torch.cumprod, 1.0)
_segment_scan("segment_logcumsumexp", torch.logcumsumexp, -math.inf)
_segment_scan("segment_cummax", torch.cummax, -math.inf, values_only=True)
_segment_scan("segment_cummin", torch.cummin, math.inf, values_only=True)


@case("segment_arange")
def _segment_arange(n, device, grad):
    p = packed(n, device, width=1)
    rows = int(p.first_idx[-1])
    starts = p.first_idx[:-1]
    return Pair("arange - repeat_interleave(first_idx[:-1])",
                lambda: torch.arange(rows, device=device) - starts.repeat_interleave(p.lengths),
                lambda: torch_ragged.segment_arange(p.first_idx, rows))


def _repeat_per_member(n, device, grad, ours):
    """A row per member repeated over the member's rows: ours(per_member, p, rows) against repeat_interleave."""
    p = packed(n, device)
    per_member = torch.randn(len(p.lengths), 16, generator=_generator(2)).to(device).requires_grad_(grad)
    rows = int(p.first_idx[-1])
    return Pair("torch.repeat_interleave", lambda: per_member.repeat_interleave(p.lengths, 0),
                lambda: ours(per_member, p, rows), (per_member,))


@case("segment_expand", differentiable=True)
def _segment_expand(n, device, grad):
    return _repeat_per_member(n, device, grad, lambda v, p, rows: torch_ragged.segment_expand(v, p.first_idx, rows))


@case("segment_ids")
def _segment_ids(n, device, grad):
    p = packed(n, device, width=1)
    ids = torch.arange(len(p.lengths), device=device)
    rows = int(p.first_idx[-1])
    return Pair("torch.repeat_interleave(arange)", lambda: ids.repeat_interleave(p.lengths),
                lambda: torch_ragged.segment_ids(p.first_idx, rows))


@case("get_first_idx")
def _get_first_idx(n, device, grad):
    lengths = packed(n, device, width=1).lengths
    zero = torch.zeros(1, dtype=lengths.dtype, device=device)
    return Pair("torch.cat([0], cumsum)", lambda: torch.cat([zero, lengths.cumsum(0)]),
                lambda: torch_ragged.get_first_idx(lengths))


@case("ragged_index_select", differentiable=True)
def _ragged_index_select(n, device, grad):
    p = packed(n, device, grad=grad)
    index = torch.randperm(len(p.lengths), generator=_generator(3))[: max(1, len(p.lengths) // 2)].to(device)

    def torch_route():  # row ids of the picked members, vectorised
        counts = p.lengths[index]
        starts = p.first_idx[:-1][index]
        within = torch.arange(int(counts.sum()), device=device) - (counts.cumsum(0) - counts).repeat_interleave(counts)
        return p.values.index_select(0, starts.repeat_interleave(counts) + within)

    return Pair("index_select of repeat_interleave'd row ids", torch_route,
                lambda: torch_ragged.ragged_index_select(p.values, p.first_idx, index)[0], (p.values,))


def _scatter_inputs(n, device, grad):
    g = _generator(4)
    rows = 10 if n <= SIZES["tiny"] else n // 16
    width = 8 if n <= SIZES["tiny"] else 16
    src = torch.randn(rows, width, generator=g).to(device).requires_grad_(grad)
    groups = 5 if n <= SIZES["tiny"] else max(1, rows // 8)
    index = torch.randint(0, groups, (rows,), generator=g).to(device)
    return src, index, groups


def _scatter(row, name, reduce, torch_reduce):
    @case(row, differentiable=True)
    def build(n, device, grad):
        src, index, groups = _scatter_inputs(n, device, grad)
        full = index.view(-1, 1).expand_as(src)
        zeros = torch.zeros(groups, src.shape[1], device=device)
        if name == "scatter":
            ours = lambda: torch_ragged.scatter(src, index, 0, groups, reduce=reduce)  # noqa: E731
        else:  # scatter_max / scatter_min: the values (torch has no arg)
            ours = lambda: getattr(torch_ragged, name)(src, index, 0, groups)[0]  # noqa: E731
        return Pair(f"Tensor.scatter_reduce({torch_reduce}, include_self=False)",
                    lambda: zeros.scatter_reduce(0, full, src, torch_reduce, include_self=False), ours, (src,))


_scatter("scatter", "scatter", "sum", "sum")
_scatter("scatter mean", "scatter", "mean", "mean")
_scatter("scatter max", "scatter", "max", "amax")
_scatter("scatter_max", "scatter_max", "max", "amax")
_scatter("scatter_min", "scatter_min", "min", "amin")


# ---- torch_ragged.scatter_compat (torch_scatter's API): torch's own ops, as torch_scatter calls them or as a
# user without torch_scatter writes them ----


def _compat(row, call, baseline, differentiable=True, sorted_index=False, per_element=False, tolerance=None):
    """A scatter_compat row: `call(ts, src, index, groups)` against `baseline(src, full_index, groups)` (index
    broadcast to src), on _scatter_inputs (sorted for the segment_*_coo rows; one index per element when asked)."""
    @case(f"scatter_compat.{row}", differentiable=differentiable)
    def build(n, device, grad):
        import torch_ragged.scatter_compat as ts

        src, index, groups = _scatter_inputs(n, device, grad)
        if sorted_index:
            index = index.sort().values
        full = index.view(-1, 1).expand_as(src)
        if per_element:  # every column its own index: torch_scatter's general case
            full = torch.randint(0, groups, src.shape, generator=_generator(5)).to(device)
            index = full
        return Pair(baseline.__doc__, lambda: baseline(src, full, groups), lambda: call(ts, src, index, groups),
                    (src,), tolerance=tolerance or {})


def _reduce_onto(start, torch_reduce):
    def baseline(src, full, groups):
        return start((groups, src.shape[1]), device=src.device).scatter_reduce(0, full, src, torch_reduce,
                                                                               include_self=False)

    baseline.__doc__ = f"Tensor.scatter_reduce({torch_reduce}, include_self=False)"
    return baseline


def _scatter_add_baseline(src, full, groups):
    """zeros().scatter_add_ (torch_scatter's own scatter_sum)"""
    return torch.zeros(groups, src.shape[1], device=src.device).scatter_add_(0, full, src)


_compat("scatter_sum", lambda ts, s, i, g: ts.scatter_sum(s, i, 0, dim_size=g), _scatter_add_baseline)
_compat("scatter_sum [per element]", lambda ts, s, i, g: ts.scatter_sum(s, i, 0, dim_size=g), _scatter_add_baseline,
        per_element=True)
_compat("scatter", lambda ts, s, i, g: ts.scatter(s, i, 0, dim_size=g, reduce="mean"),
        _reduce_onto(torch.zeros, "mean"))
_compat("scatter_mean", lambda ts, s, i, g: ts.scatter_mean(s, i, 0, dim_size=g), _reduce_onto(torch.zeros, "mean"))
_compat("scatter_mul", lambda ts, s, i, g: ts.scatter_mul(s, i, 0, dim_size=g), _reduce_onto(torch.ones, "prod"),
        tolerance=REORDERED_SUMS)
_compat("scatter_mul [per element]", lambda ts, s, i, g: ts.scatter_mul(s, i, 0, dim_size=g),
        _reduce_onto(torch.ones, "prod"), per_element=True, tolerance=REORDERED_SUMS)
_compat("scatter_max", lambda ts, s, i, g: ts.scatter_max(s, i, 0, dim_size=g)[0], _reduce_onto(torch.zeros, "amax"))
_compat("scatter_max [per element]", lambda ts, s, i, g: ts.scatter_max(s, i, 0, dim_size=g)[0],
        _reduce_onto(torch.zeros, "amax"), per_element=True)
_compat("scatter_min", lambda ts, s, i, g: ts.scatter_min(s, i, 0, dim_size=g)[0], _reduce_onto(torch.zeros, "amin"))
_compat("segment_coo", lambda ts, s, i, g: ts.segment_coo(s, i, dim_size=g, reduce="max"),
        _reduce_onto(torch.zeros, "amax"), sorted_index=True)
_compat("segment_sum_coo", lambda ts, s, i, g: ts.segment_sum_coo(s, i, dim_size=g), _scatter_add_baseline,
        sorted_index=True)
_compat("segment_mean_coo", lambda ts, s, i, g: ts.segment_mean_coo(s, i, dim_size=g),
        _reduce_onto(torch.zeros, "mean"), sorted_index=True)
_compat("segment_max_coo", lambda ts, s, i, g: ts.segment_max_coo(s, i, dim_size=g)[0],
        _reduce_onto(torch.zeros, "amax"), sorted_index=True)
_compat("segment_min_coo", lambda ts, s, i, g: ts.segment_min_coo(s, i, dim_size=g)[0],
        _reduce_onto(torch.zeros, "amin"), sorted_index=True)


def _softmax_baseline(log):
    def baseline(src, full, groups):
        maxima = torch.zeros(groups, src.shape[1], device=src.device).scatter_reduce(
            0, full, src.detach(), "amax", include_self=False)
        shifted = src - maxima.gather(0, full)
        sums = torch.zeros_like(maxima).scatter_add_(0, full, shifted.exp())
        return shifted - sums.log().gather(0, full) if log else shifted.exp() / sums.gather(0, full)

    baseline.__doc__ = "scatter_reduce(amax) + gather + scatter_add_ (torch_scatter's composite in torch ops)"
    return baseline


def _logsumexp_baseline(src, full, groups):
    """scatter_reduce(amax) + gather + scatter_add_ + log (torch_scatter's composite in torch ops)"""
    maxima = torch.zeros(groups, src.shape[1], device=src.device).scatter_reduce(
        0, full, src.detach(), "amax", include_self=False)
    sums = torch.zeros_like(maxima).scatter_add_(0, full, (src - maxima.gather(0, full)).exp())
    return (sums.log() + maxima).nan_to_num(neginf=0.0)  # positions nothing reaches: 0


def _std_baseline(src, full, groups):
    """scatter_add_ x3 + gather (torch_scatter's composite in torch ops)"""
    zeros = torch.zeros(groups, src.shape[1], device=src.device)
    counts = zeros.scatter_add(0, full, torch.ones_like(src))
    mean = zeros.scatter_add(0, full, src) / counts.clamp(min=1)
    deviation = src - mean.gather(0, full)
    variance = zeros.scatter_add(0, full, deviation * deviation) / (counts - 1).clamp(min=1)
    positive = variance > 0  # sqrt at 0 would send NaN gradients back (torch_scatter's do)
    return torch.where(positive, torch.where(positive, variance, 1).sqrt(), 0)


_compat("scatter_softmax", lambda ts, s, i, g: ts.scatter_softmax(s, i, 0, dim_size=g), _softmax_baseline(False),
        tolerance=REORDERED_SUMS)
_compat("scatter_log_softmax", lambda ts, s, i, g: ts.scatter_log_softmax(s, i, 0, dim_size=g),
        _softmax_baseline(True), tolerance=REORDERED_SUMS)
_compat("scatter_logsumexp", lambda ts, s, i, g: ts.scatter_logsumexp(s, i, 0, dim_size=g, eps=0.0),
        _logsumexp_baseline, tolerance=REORDERED_SUMS)
_compat("scatter_std", lambda ts, s, i, g: ts.scatter_std(s, i, 0, dim_size=g), _std_baseline,
        tolerance=REORDERED_SUMS)


def _csr(row, call, torch_reduce, arg=False):
    """A segment_csr row against torch.segment_reduce(offsets=indptr): torch's own CSR reduction."""
    @case(f"scatter_compat.{row}", differentiable=True)
    def build(n, device, grad):
        import torch_ragged.scatter_compat as ts

        p = packed(n, device, grad=grad)
        # (packed members are never empty: no `initial` needed, which torch would fold into every segment)
        return Pair(f"torch.segment_reduce({torch_reduce}, offsets=indptr)",
                    lambda: torch.segment_reduce(p.values, torch_reduce, offsets=p.first_idx),
                    lambda: call(ts, p.values, p.first_idx), (p.values,), tolerance=REORDERED_SUMS)


_csr("segment_csr", lambda ts, v, f: ts.segment_csr(v, f), "sum")
_csr("segment_sum_csr", lambda ts, v, f: ts.segment_sum_csr(v, f), "sum")
_csr("segment_mean_csr", lambda ts, v, f: ts.segment_mean_csr(v, f), "mean")
_csr("segment_max_csr", lambda ts, v, f: ts.segment_max_csr(v, f)[0], "max")
_csr("segment_min_csr", lambda ts, v, f: ts.segment_min_csr(v, f)[0], "min")


@case("scatter_compat.gather_csr", differentiable=True)
def _compat_gather_csr(n, device, grad):
    import torch_ragged.scatter_compat as ts

    p = packed(n, device)
    values = torch.randn(len(p.lengths), *p.values.shape[1:], generator=_generator(6)).to(device).requires_grad_(grad)
    total = int(p.first_idx[-1])
    return Pair("repeat_interleave(src, indptr.diff())",
                lambda: values.repeat_interleave(p.lengths, dim=0, output_size=total),
                lambda: ts.gather_csr(values, p.first_idx), (values,))


@case("scatter_compat.gather_coo", differentiable=True)
def _compat_gather_coo(n, device, grad):
    import torch_ragged.scatter_compat as ts

    src, index, groups = _scatter_inputs(n, device, grad)
    index = index.sort().values % src.shape[0]
    return Pair("index_select", lambda: src.index_select(0, index), lambda: ts.gather_coo(src, index), (src,))


@case("scatter_compat.softmax", differentiable=True)
def _compat_pyg_softmax(n, device, grad):
    import torch_ragged.scatter_compat as ts

    p = packed(n, device, grad=grad)
    ids = torch.repeat_interleave(torch.arange(len(p.lengths), device=device), p.lengths)
    full = ids.view(-1, *([1] * (p.values.dim() - 1))).expand_as(p.values)
    groups = len(p.lengths)

    def pyg_route():  # PyG's softmax by ptr / index in torch ops: amax, gather, exp, scatter_add_, divide
        maxima = torch.zeros(groups, *p.values.shape[1:], device=device).scatter_reduce(
            0, full, p.values.detach(), "amax", include_self=False)
        exps = (p.values - maxima.gather(0, full)).exp()
        return exps / torch.zeros_like(maxima).scatter_add_(0, full, exps).gather(0, full)

    return Pair("PyG's softmax in torch ops (scatter_reduce amax, gather, scatter_add_)", pyg_route,
                lambda: ts.softmax(p.values, ptr=p.first_idx), (p.values,), tolerance=REORDERED_SUMS)

# ---------------------------------------------------------------------------------------------------------------
# batch family (Kaolin's API)


@case("list_to_packed", differentiable=True)
def _list_to_packed(n, device, grad):
    p = packed(n, device, max_members=LIST_MEMBERS)
    members = [m.detach().clone().requires_grad_(grad) for m in p.members]
    return Pair("torch.cat", lambda: torch.cat(members), lambda: torch_ragged.list_to_packed(members)[0],
                tuple(members))


@case("list_to_padded", differentiable=True)
def _list_to_padded(n, device, grad):
    p = packed(n, device, max_members=LIST_MEMBERS)
    members = [m.detach().clone().requires_grad_(grad) for m in p.members]
    return Pair("pad_sequence", lambda: pad_sequence(members, batch_first=True),
                lambda: torch_ragged.list_to_padded(members, 0.0)[0], tuple(members))


@case("packed_to_padded", differentiable=True)
def _packed_to_padded(n, device, grad):
    p = packed(n, device, grad=grad)
    mask = p.mask()
    return Pair("masked_scatter into a full tensor (pad_sequence's backward is one tensor per member)",
                lambda: masked_padded(p, 0.0, mask),
                lambda: torch_ragged.packed_to_padded(p.values, p.shape_per_tensor, p.first_idx, 0.0), (p.values,))


@case("padded_to_packed", differentiable=True)
def _padded_to_packed(n, device, grad):
    p = packed(n, device)
    padded = pad_sequence(p.members, batch_first=True).requires_grad_(grad)
    mask = p.mask()
    rows = int(p.first_idx[-1])
    return Pair("boolean-mask indexing", lambda: padded[mask],
                lambda: torch_ragged.padded_to_packed(padded, p.shape_per_tensor, num_rows=rows), (padded,))


@case("packed_to_list")
def _packed_to_list(n, device, grad):
    p = packed(n, device, max_members=LIST_MEMBERS)
    return Pair("Tensor.split (views)", lambda: torch.cat(p.values.split(p.lengths.tolist())),
                lambda: torch.cat(torch_ragged.packed_to_list(p.values, p.shape_per_tensor, p.first_idx)))


@case("padded_to_list")
def _padded_to_list(n, device, grad):
    p = packed(n, device, max_members=LIST_MEMBERS)
    padded = pad_sequence(p.members, batch_first=True)
    lengths = p.lengths.tolist()
    return Pair("a slice per member", lambda: torch.cat([padded[i, :k] for i, k in enumerate(lengths)]),
                lambda: torch.cat(torch_ragged.padded_to_list(padded, p.shape_per_tensor)))


@case("tile_to_packed", differentiable=True)
def _tile_to_packed(n, device, grad):
    return _repeat_per_member(n, device, grad, lambda v, p, rows: torch_ragged.tile_to_packed(v, p.lengths, rows))


@case("fill_max_shape")
def _fill_max_shape(n, device, grad):
    shapes = torch.randint(1, 64, (max(3, n // 64), 3), generator=_generator(5))
    return Pair("Tensor.amax(0)", lambda: shapes.amax(0), lambda: torch_ragged.fill_max_shape(shapes))


@case("get_shape_per_tensor")
def _get_shape_per_tensor(n, device, grad):
    members = packed(n, device, max_members=LIST_MEMBERS).members
    return Pair("torch.tensor of the shapes", lambda: torch.tensor([list(m.shape[:-1]) for m in members]),
                lambda: torch_ragged.get_shape_per_tensor(members))


# ---------------------------------------------------------------------------------------------------------------
# pad (numpy.pad's modes)


def _image(n, device, grad):
    side = 4 if n <= SIZES["tiny"] else int(math.sqrt(n / 4))
    return torch.randn(4, side, side, generator=_generator(6)).to(device).requires_grad_(grad)


def _pad_vs_torch(numpy_mode, torch_mode):
    @case(f"pad {numpy_mode}", differentiable=True)
    def build(n, device, grad):
        x = _image(n, device, grad)
        kwargs = {} if torch_mode == "constant" else {"mode": torch_mode}
        return Pair(f"F.pad({torch_mode})", lambda: F.pad(x, (2, 2, 2, 2), **kwargs),
                    lambda: torch_ragged.pad(x, ((0, 0), (2, 2), (2, 2)), mode=numpy_mode), (x,))


for _numpy_mode, _torch_mode in [("constant", "constant"), ("reflect", "reflect"), ("edge", "replicate"),
                                 ("wrap", "circular")]:
    _pad_vs_torch(_numpy_mode, _torch_mode)


def _pad_vs_numpy(mode):
    @case(f"pad {mode}")
    def build(n, device, grad):
        x = _image(n, device, False)
        width = ((0, 0), (2, 2), (2, 2))
        return Pair(f"numpy.pad({mode}) on the host",
                    lambda: torch.from_numpy(np.pad(x.cpu().numpy(), width, mode=mode)).to(device),
                    lambda: torch_ragged.pad(x, width, mode=mode))


for _mode in ["symmetric", "linear_ramp", "maximum", "mean", "median"]:
    _pad_vs_numpy(_mode)

# ---------------------------------------------------------------------------------------------------------------
# tiles


def _tiles_inputs(n, device, grad=False):
    import bench_tiles

    tile = 2 if n <= SIZES["tiny"] else 8
    count = 2 if n <= SIZES["tiny"] else max(1, n // (tile * tile * bench_tiles.CHANNELS))
    bound = max(4 * tile, tile * int(math.ceil(math.sqrt(count * 2))))
    pages, origins = bench_tiles.make_tiles(2, bound, tile, count, aligned=True)
    return bench_tiles, pages.to(device).requires_grad_(grad), origins.to(device), bound, tile


@case("tiles_to_dense", differentiable=True)
def _tiles_to_dense(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device, grad)
    lo, hi = [0, 0], [bound, bound]
    return Pair("index_put_ of every tile pixel", lambda: bt.torch_to_dense(pages, origins, bound, tile, 2, False),
                lambda: tiles.tiles_to_dense(pages, origins, lo, hi), (pages,))


@case("dense_to_tiles", differentiable=True)
def _dense_to_tiles(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device)
    dense = tiles.tiles_to_dense(pages, origins, [0, 0], [bound, bound]).requires_grad_(grad)
    return Pair("advanced indexing of every tile pixel", lambda: bt.torch_to_tiles(dense, origins, tile, 2),
                lambda: tiles.dense_to_tiles(dense, origins, [tile, tile], [0, 0]), (dense,))


@case("tiles_from_dense")
def _tiles_from_dense(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device)
    dense = tiles.tiles_to_dense(pages, origins, [0, 0], [bound, bound])
    cells = bound // tile

    def torch_route():  # view as tiles, keep the ones holding a non-zero value
        blocks = dense.view(cells, tile, cells, tile, -1).transpose(1, 2).reshape(cells * cells, tile, tile, -1)
        keep = blocks.flatten(1).ne(0).any(1)
        return blocks[keep]

    return Pair("tile view + any() + boolean-mask indexing", torch_route,
                lambda: tiles.tiles_from_dense(dense, [tile, tile])[0])


@case("tiles_index")
def _tiles_index(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device)
    cells = bound // tile

    def torch_route():  # a dense cell -> tile table
        table = torch.full((cells * cells,), -1, dtype=torch.long, device=device)
        cell = origins[:, 0] // tile * cells + origins[:, 1] // tile
        return table.index_put_((cell,), torch.arange(len(origins), device=device))

    return Pair("a dense cell -> tile table (index_put_)", torch_route,
                lambda: tiles.tiles_index(origins, [tile, tile], [0, 0], [bound, bound]), comparable=False)


@case("tiles_lookup")
def _tiles_lookup(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device)
    cells = bound // tile
    table = torch.full((cells * cells,), -1, dtype=torch.long, device=device)
    table[origins[:, 0] // tile * cells + origins[:, 1] // tile] = torch.arange(len(origins), device=device)
    coords = torch.randint(0, bound, (max(4, n // 4), 2), generator=_generator(7)).to(device)
    index = tiles.tiles_index(origins, [tile, tile], [0, 0], [bound, bound])
    return Pair("gather from a dense cell -> tile table",
                lambda: table[coords[:, 0] // tile * cells + coords[:, 1] // tile],
                lambda: tiles.tiles_lookup(origins, [tile, tile], coords, [0, 0], [bound, bound], index=index)[0])


@case("tiles_box_filter", differentiable=True)
def _tiles_box_filter(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device, grad)
    index = tiles.tiles_index(origins, [tile, tile], [0, 0], [bound, bound])
    return Pair("dense route: index_put_, depthwise conv2d, gather",
                lambda: bt.dense_route_box(pages, origins, bound, tile, 2, False, "tiles"),
                lambda: tiles.tiles_box_filter(pages, origins, [0, 0], [bound, bound], index=index), (pages,),
                tolerance=dict(rtol=1e-4, atol=1e-5))


@case("tiles_correlate", differentiable=True)
def _tiles_correlate(n, device, grad):
    bt, pages, origins, bound, tile = _tiles_inputs(n, device, grad)
    index = tiles.tiles_index(origins, [tile, tile], [0, 0], [bound, bound])
    weight = torch.full((3, 3, bt.CHANNELS), 1.0 / 9, device=device)
    return Pair("dense route: index_put_, depthwise conv2d, gather",
                lambda: bt.dense_route_box(pages, origins, bound, tile, 2, False, "tiles"),
                lambda: tiles.tiles_correlate(pages, origins, weight, [0, 0], [bound, bound], index=index), (pages,),
                tolerance=dict(rtol=1e-4, atol=1e-5))


# ---------------------------------------------------------------------------------------------------------------
# container


def _ragged(n, device, grad=False, max_members=None):
    p = packed(n, device, grad=grad, max_members=max_members)
    return p, torch_ragged.RaggedTensor(p.values, p.first_idx)


@case("RaggedTensor.padded", differentiable=True)
def _ragged_padded(n, device, grad):
    p, r = _ragged(n, device, grad)
    mask = p.mask()
    return Pair("masked_scatter into a full tensor", lambda: masked_padded(p, 0.0, mask), lambda: r.padded(0.0),
                (p.values,))


@case("RaggedTensor.sum(1)")  # NJT's sum has no backward
def _ragged_sum(n, device, grad):
    p, r = _ragged(n, device, grad)
    nested = torch.nested.nested_tensor_from_jagged(p.values, p.first_idx)
    return Pair("NJT sum(1)", lambda: nested.sum(1), lambda: r.sum(1), (p.values,))


@case("RaggedTensor @ W", differentiable=True)
def _ragged_matmul(n, device, grad):
    p, r = _ragged(n, device, grad)
    weight = torch.randn(p.values.shape[1], 16, generator=_generator(8)).to(device)
    nested = torch.nested.nested_tensor_from_jagged(p.values, p.first_idx)
    return Pair("NJT @ W (values)", lambda: (nested @ weight).values(), lambda: (r @ weight).values, (p.values,))


@case("RaggedTensor[index]")
def _ragged_index(n, device, grad):
    p, r = _ragged(n, device, max_members=LIST_MEMBERS)
    index = torch.randperm(len(p.lengths), generator=_generator(3))[: max(1, len(p.lengths) // 2)]
    views = p.members
    positions = index.tolist()
    return Pair("list comprehension + torch.cat", lambda: torch.cat([views[i] for i in positions]),
                lambda: r[index.to(device)].values)


@case("RaggedTensor[:, -1]", differentiable=True)
def _ragged_last_rows(n, device, grad):
    p, r = _ragged(n, device, grad=grad)
    return Pair("values.index_select(first_idx[1:] - 1)", lambda: p.values.index_select(0, p.first_idx[1:] - 1),
                lambda: r[:, -1], (p.values,))


def _all_but_first_rows(p):
    keep = torch.ones(p.values.shape[0], dtype=torch.bool, device=p.values.device)
    keep[p.first_idx[:-1]] = False  # members have >= 1 row here
    return p.values[keep]


@case("RaggedTensor[:, 1:]", differentiable=True)
def _ragged_drop_first_rows(n, device, grad):
    p, r = _ragged(n, device, grad=grad)
    return Pair("values[a mask of all but each member's first row]", lambda: _all_but_first_rows(p),
                lambda: r[:, 1:].values, (p.values,))


@case("collate")
def _collate(n, device, grad):
    members = packed(n, device, max_members=LIST_MEMBERS).members
    samples = [{"points": m, "label": i % 2} for i, m in enumerate(members)]

    def pad_sequence_collate():
        return pad_sequence([s["points"] for s in samples], batch_first=True)

    return Pair("pad_sequence collate (values packed vs padded)", pad_sequence_collate,
                lambda: torch_ragged.collate(samples)["points"].values, comparable=False)


@case("LazyStack")
def _lazy_stack(n, device, grad):
    members = packed(n, device, max_members=LIST_MEMBERS).members
    records = [{"a": m} for m in members]
    return Pair("pad_sequence of each record's field", lambda: pad_sequence([r["a"] for r in records], True),
                lambda: torch_ragged.LazyStack(*records).get("a", as_padded_tensor=True))


# ---------------------------------------------------------------------------------------------------------------
# sparse: torch.sparse's own ops are the baselines


_UNARY = ["abs", "asin", "asinh", "atan", "atanh", "ceil", "deg2rad", "erf", "erfinv", "expm1", "floor", "frac",
          "log1p", "neg", "rad2deg", "relu", "round", "sgn", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan",
          "tanh", "trunc"]


def _sparse_unary(name):
    @case(f"sparse.{name}")
    def build(n, device, grad):
        s = sparse_matrix(n, device)
        if name in ("asin", "atanh", "erfinv"):
            s = torch.sparse_coo_tensor(s.indices(), s.values().clamp(-0.9, 0.9), s.shape).coalesce()
        elif name in ("sqrt", "log1p", "pow"):
            s = torch.sparse_coo_tensor(s.indices(), s.values().abs(), s.shape).coalesce()
        return Pair(f"torch.{name} (sparse)", lambda: getattr(torch, name)(s), lambda: getattr(rs, name)(s))


for _name in _UNARY:
    _sparse_unary(_name)


def _sparse_binary(name, torch_fn, ours_fn, other="sparse"):
    @case(f"sparse.{name}")
    def build(n, device, grad):
        a = sparse_matrix(n, device)
        if name == "pow":  # a real power of negative values is nan on both sides
            a = torch.sparse_coo_tensor(a.indices(), a.values().abs(), a.shape).coalesce()
        b = sparse_matrix(n, device, square=a.shape[0]) if other == "sparse" else 2.5
        if name == "mul" and other == "sparse":  # same pattern: torch's sparse * sparse intersects
            b = torch.sparse_coo_tensor(a.indices(), torch.randn(a._nnz(), generator=_generator(9)), a.shape)
            b = b.coalesce()
        return Pair(f"torch.{name} (sparse)", lambda: torch_fn(a, b), lambda: ours_fn(a, b))


_sparse_binary("add", torch.add, rs.add)
_sparse_binary("sub", torch.sub, rs.sub)
_sparse_binary("mul", torch.mul, rs.mul)
_sparse_binary("div", torch.div, rs.div, other="scalar")
_sparse_binary("pow", torch.pow, rs.pow, other="scalar")


def _sparse_dense_product(name, baseline, torch_fn, ours_fn):
    @case(f"sparse.{name}", differentiable=True)
    def build(n, device, grad):
        s = sparse_matrix(n, device, grad=grad)
        d = dense_columns(s.shape[1], device, n=n, grad=grad)
        return Pair(baseline, lambda: torch_fn(s, d), lambda: ours_fn(s, d), (s, d) if grad else (),
                    tolerance=REORDERED_SUMS)


_sparse_dense_product("mm", "torch.sparse.mm", torch.sparse.mm, rs.mm)
# torch.matmul / torch.addmm give a sparse input a dense gradient (every position); the library's, like
# torch.sparse.mm / torch.sparse.addmm, is on the input's pattern: those are the baselines.
_sparse_dense_product("matmul", "torch.sparse.mm (same gradient layout)", torch.sparse.mm, rs.matmul)


def _sparse_product_forward(name, torch_fn, ours_fn):
    @case(f"sparse.{name}")  # torch has no derivative for these
    def build(n, device, grad):
        s = sparse_matrix(n, device)
        d = dense_columns(s.shape[1], device, n=n)
        return Pair(f"torch.{name}", lambda: torch_fn(s, d), lambda: ours_fn(s, d), tolerance=REORDERED_SUMS)


_sparse_product_forward("smm", torch.smm, rs.smm)
_sparse_product_forward("hspmm", torch.hspmm, rs.hspmm)


@case("sparse.addmm", differentiable=True)
def _sparse_addmm(n, device, grad):
    s = sparse_matrix(n, device, grad=grad)
    d = dense_columns(s.shape[1], device, n=n, grad=grad)
    m = dense_columns(s.shape[0], device, n=n)
    return Pair("torch.sparse.addmm (same gradient layout)", lambda: torch.sparse.addmm(m, s, d),
                lambda: rs.addmm(m, s, d), (s, d) if grad else (), tolerance=REORDERED_SUMS)


@case("sparse.sspaddmm")
def _sparse_sspaddmm(n, device, grad):
    s = sparse_matrix(n, device)
    d = dense_columns(s.shape[1], device, n=n)
    m = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (s.shape[0], d.shape[1]))
    return Pair("torch.sspaddmm", lambda: torch.sspaddmm(m, s, d), lambda: rs.sspaddmm(m, s, d),
                tolerance=REORDERED_SUMS)


@case("sparse.mv")
def _sparse_mv(n, device, grad):
    s = sparse_matrix(n, device)
    v = torch.randn(s.shape[1], generator=_generator(10)).to(device)
    return Pair("torch.mv", lambda: torch.mv(s, v), lambda: rs.mv(s, v), tolerance=REORDERED_SUMS)


@case("sparse.bmm")
def _sparse_bmm(n, device, grad):
    s = torch.stack([sparse_matrix(n // 2, device), sparse_matrix(n // 2, device)]).coalesce()
    d = torch.randn(2, s.shape[2], 8 if n <= SIZES["tiny"] else 64, generator=_generator(11)).to(device)
    return Pair("torch.bmm", lambda: torch.bmm(s, d), lambda: rs.bmm(s, d), tolerance=REORDERED_SUMS)


@case("sparse.mm sparse @ sparse")
def _sparse_spgemm(n, device, grad):
    a = sparse_matrix(n // 10 if n > SIZES["tiny"] else n, device)
    b = sparse_matrix(n // 10 if n > SIZES["tiny"] else n, device, square=a.shape[0])
    return Pair("torch.sparse.mm (sparse @ sparse)", lambda: torch.sparse.mm(a, b), lambda: rs.mm(a, b))


@case("sparse.coalesce")
def _sparse_coalesce(n, device, grad):
    s = sparse_matrix(n, device, coalesced=False)
    return Pair("Tensor.coalesce", lambda: s.coalesce(), lambda: rs.coalesce(s))


@case("sparse.to_dense", differentiable=True)
def _sparse_to_dense(n, device, grad):
    s = sparse_matrix(min(n, 2_000_000), device, grad=grad, square=None if n <= SIZES["medium"] else 8000)
    return Pair("Tensor.to_dense", lambda: s.to_dense(), lambda: rs.to_dense(s), (s,))


@case("sparse.to_dense uncoalesced")
def _sparse_to_dense_uncoalesced(n, device, grad):
    s = sparse_matrix(min(n, 2_000_000), device, coalesced=False, square=None if n <= SIZES["medium"] else 8000)
    return Pair("Tensor.to_dense", lambda: s.to_dense(), lambda: rs.to_dense(s))


@case("sparse.sum", differentiable=True)
def _sparse_sum(n, device, grad):
    s = sparse_matrix(n, device, grad=grad)
    return Pair("torch.sparse.sum(dim=1)", lambda: torch.sparse.sum(s, 1), lambda: rs.sum(s, 1), (s,),
                tolerance=REORDERED_SUMS)


def _sparse_softmax(name, torch_fn, ours_fn):
    @case(f"sparse.{name}", differentiable=True)
    def build(n, device, grad):
        s = sparse_matrix(n, device, grad=grad)
        return Pair(f"torch.sparse.{name}", lambda: torch_fn(s, 1), lambda: ours_fn(s, 1), (s,))


_sparse_softmax("softmax", torch.sparse.softmax, rs.softmax)
_sparse_softmax("log_softmax", torch.sparse.log_softmax, rs.log_softmax)


def _sparse_reshape(name, torch_fn, ours_fn, baseline=None):
    @case(f"sparse.{name}")
    def build(n, device, grad):
        s = sparse_matrix(n, device)
        return Pair(baseline or f"torch {name} (sparse)", lambda: torch_fn(s), lambda: ours_fn(s),
                    comparable=baseline is None)


_sparse_reshape("t", torch.t, rs.t)
_sparse_reshape("transpose", lambda s: s.transpose(0, 1), lambda s: rs.transpose(s, 0, 1))
_sparse_reshape("permute", lambda s: s.permute(1, 0), lambda s: rs.permute(s, (1, 0)))
_sparse_reshape("unsqueeze", lambda s: s.unsqueeze(0), lambda s: rs.unsqueeze(s, 0))
_sparse_reshape("select", lambda s: s.select(0, 1), lambda s: rs.select(s, 0, 1))
_sparse_reshape("narrow_copy", lambda s: s.narrow_copy(0, 1, 2), lambda s: rs.narrow_copy(s, 0, 1, 2))
_sparse_reshape("cat", lambda s: torch.cat([s, s]), lambda s: rs.cat([s, s]))
_sparse_reshape("stack", lambda s: torch.stack([s, s]), lambda s: rs.stack([s, s]))
_sparse_reshape("to_sparse_csr", lambda s: s.to_sparse_csr(), rs.to_sparse_csr)
_sparse_reshape("to_sparse_csc", lambda s: s.to_sparse_csc(), rs.to_sparse_csc)
_sparse_reshape("to_sparse_coo", lambda s: s.to_sparse_csr().to_sparse_coo(),
                lambda s: rs.to_sparse_coo(s.to_sparse_csr()))
_sparse_reshape("plan", lambda s: (s.to_sparse_csr(), s.to_sparse_csc()), rs.plan,
                "Tensor.to_sparse_csr + to_sparse_csc (the two orders a plan holds)")


@case("sparse.index_select")
def _sparse_index_select(n, device, grad):
    s = sparse_matrix(n, device)
    index = torch.randint(0, s.shape[0], (max(2, s.shape[0] // 2),), generator=_generator(12)).to(device)
    return Pair("torch.index_select (sparse)", lambda: s.index_select(0, index), lambda: rs.index_select(s, 0, index))


@case("sparse.to_sparse")
def _sparse_to_sparse(n, device, grad):
    dense = sparse_matrix(min(n, 2_000_000), device, square=None if n <= SIZES["medium"] else 8000).to_dense()
    return Pair("Tensor.to_sparse", lambda: dense.to_sparse(), lambda: rs.to_sparse(dense))


@case("sparse.sparse_mask")
def _sparse_mask(n, device, grad):
    mask = sparse_matrix(min(n, 2_000_000), device, square=None if n <= SIZES["medium"] else 8000)
    dense = torch.randn(mask.shape, generator=_generator(13)).to(device)
    return Pair("Tensor.sparse_mask", lambda: dense.sparse_mask(mask), lambda: rs.sparse_mask(dense, mask))


# accelerate(): each torch op it takes over, called through torch, accelerated vs not.
def _accelerated(name, call, make_inputs, tolerance=None):
    """The same torch call on both sides, with accelerate() on for ours (switched once per timing block, so that
    the switch's own cost is not timed)."""
    @case(f"accelerated {name}")
    def build(n, device, grad):
        inputs = make_inputs(n, device)
        return Pair(f"{name} with accelerate() off", lambda: call(*inputs), lambda: call(*inputs),
                    tolerance=tolerance or {}, switch=rs.accelerate)


def _s_and_d(n, device):
    s = sparse_matrix(n, device)
    return s, dense_columns(s.shape[1], device, n=n)


_accelerated("aten::_coalesce", lambda s: s.coalesce(), lambda n, d: (sparse_matrix(n, d, coalesced=False),))
_accelerated("aten::_to_dense", lambda s: s.to_dense(),
             lambda n, d: (sparse_matrix(min(n, 2_000_000), d, square=None if n <= SIZES["medium"] else 8000),))
_accelerated("aten::_sparse_softmax", lambda s: torch.sparse.softmax(s, 1), lambda n, d: (sparse_matrix(n, d),))
_accelerated("aten::_sparse_log_softmax", lambda s: torch.sparse.log_softmax(s, 1), lambda n, d: (sparse_matrix(n, d),))
_accelerated("aten::_sparse_sum", lambda s: torch.sparse.sum(s, 1), lambda n, d: (sparse_matrix(n, d),), REORDERED_SUMS)
_accelerated("aten::mm", torch.mm, _s_and_d, REORDERED_SUMS)
_accelerated("aten::addmm", lambda s, d: torch.addmm(d, s, d), lambda n, dev: (lambda s: (
    s, dense_columns(s.shape[0], dev, columns=s.shape[0] if n <= SIZES["tiny"] else 64)))(sparse_matrix(n, dev)),
             REORDERED_SUMS)
_accelerated("aten::index_select", lambda s, i: s.index_select(0, i), lambda n, d: (lambda s: (
    s, torch.randint(0, s.shape[0], (max(2, s.shape[0] // 2),), generator=_generator(12)).to(d)))(sparse_matrix(n, d)))
_accelerated("aten::sparse_mask", lambda d, m: d.sparse_mask(m), lambda n, dev: (lambda m: (
    torch.randn(m.shape, generator=_generator(13)).to(dev), m))(sparse_matrix(min(n, 2_000_000), dev)))


def _softmax_backward_inputs(n, device):
    s = sparse_matrix(n, device).requires_grad_()
    return (s,)


def _softmax_fwd_bwd(fn):
    def call(s):
        out = fn(s, 1)
        return torch.autograd.grad(torch.sparse.sum(out), s)[0]

    return call


_accelerated("aten::_sparse_softmax_backward_data", _softmax_fwd_bwd(torch.sparse.softmax), _softmax_backward_inputs)
_accelerated("aten::_sparse_log_softmax_backward_data", _softmax_fwd_bwd(torch.sparse.log_softmax),
             _softmax_backward_inputs)
_accelerated("aten::bmm", torch.bmm, lambda n, d: (
    torch.stack([sparse_matrix(n // 2, d), sparse_matrix(n // 2, d)]).coalesce(),
    torch.randn(2, 3 if n <= SIZES["tiny"] else max(64, int(math.sqrt(n // 2 * 40))), 8, generator=_generator(11))),
    REORDERED_SUMS)


# ---------------------------------------------------------------------------------------------------------------
# Running


def _primary(result):
    """The tensor a result is compared and differentiated by."""
    if isinstance(result, torch_ragged.RaggedTensor):
        return result.values
    if isinstance(result, (tuple, list)):
        return _primary(result[0])
    if hasattr(result, "values") and not isinstance(result, torch.Tensor):  # SegmentExtremum and friends
        return result.values
    return result


def _as_dense(t):
    t = _primary(t)
    return t.to_dense() if t.layout != torch.strided else t


def _loss(out):
    out = _primary(out)
    return torch.sparse.sum(out) if out.layout == torch.sparse_coo else out.to_dense().sum()


def with_backward(fn, leaves):
    def run():
        out = fn()
        return out, torch.autograd.grad(_loss(out), leaves, allow_unused=True)

    return run


class BaselineFailed(Exception):
    """The baseline itself raised (torch refusing or running out of memory at that size): the row is reported as not
    timed. A failure of ours, or results that differ, stop the census instead."""


def check_equal(name, pair: Pair, backward: bool):
    """Runs both sides once and asserts the same result (and gradients): the row is timed only if this passes."""
    theirs, ours = pair.theirs, pair.ours
    if backward:
        theirs, ours = with_backward(theirs, pair.leaves), with_backward(ours, pair.leaves)
    try:
        a = _run_switched(pair, False, theirs)
    except Exception as error:  # any exception torch raises: said in the table, never counted as timed
        raise BaselineFailed(f"the baseline ({pair.baseline}) raised: {str(error).splitlines()[0]}") from error
    b = _run_switched(pair, True, ours)
    if backward:
        for ga, gb in zip(a[1], b[1], strict=True):
            if ga is None or gb is None:
                assert ga is None and gb is None, f"{name}: one side has no gradient"
                continue
            torch.testing.assert_close(_as_dense(gb), _as_dense(ga), **pair.tolerance, msg=f"{name}: gradients differ")
        a, b = a[0], b[0]
    if pair.comparable:
        expected, actual = _as_dense(a), _as_dense(b)
        if expected.dtype != actual.dtype and expected.dtype == torch.bool:
            actual = actual.bool()
        torch.testing.assert_close(actual, expected, **pair.tolerance, msg=f"{name}: results differ")
    return theirs, ours


def _run_switched(pair: Pair, on: bool, fn):
    if pair.switch is None:
        return fn()
    pair.switch(on)
    try:
        return fn()
    finally:
        pair.switch(False)


def switched_medians(pair: Pair, theirs, ours, min_run_time, rounds):
    """paired_medians' alternating rounds, with the pair's switch set for each side's block."""
    base, mine = [], []
    try:
        for _ in range(rounds):
            pair.switch(False)
            base.append(median_seconds(theirs, min_run_time / rounds))
            pair.switch(True)
            mine.append(median_seconds(ours, min_run_time / rounds))
    finally:
        pair.switch(False)
    return sorted(base)[rounds // 2], sorted(mine)[rounds // 2]


def run_row(name, size, backward, device, min_run_time):
    build = CASES[name]
    pair = build(SIZES[size], device, backward)
    theirs, ours = check_equal(name, pair, backward)
    rounds = 1 if size == "large" else 3
    theirs, ours = synchronized(theirs, device), synchronized(ours, device)
    if pair.switch is None:
        base_s, ours_s = paired_medians(theirs, ours, min_run_time, rounds)
    else:
        base_s, ours_s = switched_medians(pair, theirs, ours, min_run_time, rounds)
    return {"case": size, "op": name + (" fwd+bwd" if backward else ""), "baseline": pair.baseline,
            "baseline_s": base_s, "ours_s": ours_s, "device": device}


def run_all(device, min_run_time, only=None, sizes=tuple(SIZES)):
    bench_batch.report_progress = False  # each row prints its own line below
    rows = []
    names = [n for n in CASES if only is None or only in n]
    start = time.perf_counter()
    for i, name in enumerate(names):
        for size in sizes:
            for backward in (False, True) if CASES[name].differentiable else (False,):
                try:
                    row = run_row(name, size, backward, device, min_run_time)
                except BaselineFailed as error:
                    print(f"  [{i + 1}/{len(names)}] {name} {size}: not timed: {str(error).splitlines()[0]}",
                          flush=True)
                    rows.append({"case": size, "op": name + (" fwd+bwd" if backward else ""), "baseline": "",
                                 "baseline_s": float("nan"), "ours_s": float("nan"), "device": device,
                                 "error": str(error).splitlines()[0]})
                    continue
                rows.append(row)
                print(f"  [{i + 1}/{len(names)} {time.perf_counter() - start:.0f}s] {row['op']} {size}: "
                      f"{row['baseline_s'] / row['ours_s']:.2f}x", flush=True)
    return rows


def summary_lines(rows) -> list:
    """One line per op and pass: its baseline and the ratio at each size (losses in bold), worst first."""
    table = {}
    for r in rows:
        entry = table.setdefault(r["op"], {"baseline": r["baseline"]})
        entry["baseline"] = entry["baseline"] or r["baseline"]
        entry[r["case"]] = "not timed" if "error" in r else r["baseline_s"] / r["ours_s"]

    def cell(value):
        if value is None or isinstance(value, str):
            return value or ""
        return f"**{value:.2f}x**" if value < 1.0 else f"{value:.2f}x"

    def worst(entry):
        ratios = [entry[size] for size in SIZES if isinstance(entry.get(size), float)]
        return min(ratios) if ratios else float("inf")

    lines = ["| op | baseline | " + " | ".join(SIZES) + " |", "|---|---|" + "---|" * len(SIZES)]
    for op, entry in sorted(table.items(), key=lambda item: worst(item[1])):
        lines.append(f"| {op} | {entry['baseline']} | " + " | ".join(cell(entry.get(size)) for size in SIZES) + " |")
    return lines


def print_table(rows):
    print("\n".join(summary_lines(rows)))
    timed = [r for r in rows if "error" not in r]
    losses = sum(r["baseline_s"] < r["ours_s"] for r in timed)
    print(f"\n{len(timed)} rows timed, {losses} below 1.0x (bold); {len(rows) - len(timed)} not timed:")
    for r in rows:
        if "error" in r:
            print(f"  {r['op']} {r['case']}: {r['error']}")
