"""scatter / scatter_max / scatter_min (torch_scatter's API) against a loop over the rows (the obvious reference:
each output position reduced over the rows whose index names it, in src's order) and against torch's own
Tensor.scatter_reduce; gradients, determinism, integer means, torch_scatter's conventions, bad input."""

import math

import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck


def loop_scatter(src, index, dim, dim_size, reduce):
    """out and arg by a Python loop over positions and rows (float64 math, first extremum on ties)."""
    moved = src.movedim(dim, 0).double()
    out = torch.zeros((dim_size, *moved.shape[1:]), dtype=torch.float64)
    arg = torch.full((dim_size, *moved.shape[1:]), src.shape[dim], dtype=torch.long)
    flat_out, flat_arg = out.reshape(dim_size, -1), arg.reshape(dim_size, -1)
    rows = moved.reshape(moved.shape[0], -1)
    for p in range(dim_size):
        members = [r for r in range(rows.shape[0]) if int(index[r]) == p]
        for c in range(rows.shape[1]):
            column = [rows[r, c].item() for r in members]
            if not column:
                continue
            if reduce in ("sum", "mean"):
                total = math.fsum(column)
                flat_out[p, c] = total / len(column) if reduce == "mean" else total
            else:
                best = max(column) if reduce == "max" else min(column)
                flat_out[p, c] = best
                flat_arg[p, c] = members[column.index(best)]
    return out.movedim(0, dim), arg.movedim(0, dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_matches_the_loop_and_torch_scatter_reduce(device, dim, reduce):
    g = torch.Generator().manual_seed(dim + 10)
    src = torch.randn(6, 7, 5, generator=g, dtype=torch.float64)
    rows = src.shape[dim]
    dim_size = rows + 2  # some positions receive nothing
    index = torch.randint(0, dim_size, (rows,), generator=g)
    out = torch_ragged.scatter(src.to(device), index.to(device), dim=dim, dim_size=dim_size, reduce=reduce).cpu()
    expected, expected_arg = loop_scatter(src, index, dim % 3, dim_size, reduce)
    torch.testing.assert_close(out, expected)
    # torch's scatter_reduce onto zeros, excluding the zeros: the same values, positions no row reaches stay 0
    shape = [1, 1, 1]
    shape[dim] = rows
    full_index = index.view(shape).expand_as(src)
    out_shape = list(src.shape)
    out_shape[dim] = dim_size
    torch_reduce = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
    theirs = torch.zeros(out_shape, dtype=src.dtype).scatter_reduce(dim, full_index, src, torch_reduce,
                                                                    include_self=False)
    torch.testing.assert_close(out, theirs)
    if reduce in ("max", "min"):
        values, arg = (torch_ragged.scatter_max if reduce == "max" else torch_ragged.scatter_min)(
            src.to(device), full_index.to(device), dim=dim, dim_size=dim_size)
        torch.testing.assert_close(values.cpu(), expected)
        assert torch.equal(arg.cpu(), expected_arg)


def test_ties_give_the_first_row_and_empty_positions_give_the_size():
    src = torch.tensor([2.0, 5.0, 5.0, 1.0])
    values, arg = torch_ragged.scatter_max(src, torch.tensor([0, 0, 0, 2]), dim_size=4)
    assert values.tolist() == [5.0, 0.0, 1.0, 0.0] and arg.tolist() == [1, 4, 3, 4]


@pytest.mark.parametrize("device", DEVICES)
def test_the_first_nan_wins_as_torch_propagates_it(device):
    src = torch.tensor([[1.0, 2.0], [math.nan, 7.0], [9.0, math.nan], [math.nan, math.nan], [3.0, 4.0]])
    index = torch.tensor([0, 0, 0, 0, 1])
    for extremum, torch_reduce in ((torch_ragged.scatter_max, "amax"), (torch_ragged.scatter_min, "amin")):
        values, arg = extremum(src.to(device), index.to(device), dim=0, dim_size=3)
        theirs = torch.zeros(3, 2).scatter_reduce(0, index.view(-1, 1).expand(5, 2), src, torch_reduce,
                                                  include_self=False)
        torch.testing.assert_close(values.cpu(), theirs, equal_nan=True)
        assert arg.cpu().tolist() == [[1, 2], [4, 4], [5, 5]]


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_extrema_of_many_rows_on_every_thread_count_match_a_sorted_reference(reduce):
    """Past the size where the CPU splits positions between threads: against an independent reference (a
    stable sort by position, then each position's first extremum), with repeated values so that ties occur."""
    g = torch.Generator().manual_seed(8)
    src = torch.randint(0, 50, (60_000, 3), generator=g).float()
    index = torch.randint(0, 700, (60_000,), generator=g)
    order = torch.sort(index, stable=True).indices
    expected_values = torch.zeros(703, 3)
    expected_arg = torch.full((703, 3), 60_000)
    starts = torch.cumsum(torch.unique_consecutive(index[order], return_counts=True)[1], 0)
    runs = torch.tensor_split(order, starts[:-1])
    for rows in runs:
        position = int(index[rows[0]])
        block = src[rows]
        best = block.amax(0) if reduce == "max" else block.amin(0)
        expected_values[position] = best
        expected_arg[position] = rows[(block == best).int().argmax(0)]  # the earliest row holding it
    extremum = torch_ragged.scatter_max if reduce == "max" else torch_ragged.scatter_min
    threads = torch.get_num_threads()
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            values, arg = extremum(src, index, dim=0, dim_size=703)
            assert torch.equal(values, expected_values) and torch.equal(arg, expected_arg), count
    finally:
        torch.set_num_threads(threads)


def test_sums_at_large_magnitudes_against_torch():
    g = torch.Generator().manual_seed(3)
    for scale in (1e4, 1e7):
        src = torch.randn(20000, 8, generator=g) * scale
        index = torch.randint(0, 300, (20000,), generator=g)
        ours = torch_ragged.scatter(src, index, dim=0, dim_size=300)
        theirs = torch.zeros(300, 8).index_add(0, index, src)
        exact = torch.zeros(300, 8, dtype=torch.float64).index_add(0, index, src.double())
        torch.testing.assert_close(ours.double(), exact, rtol=1e-5, atol=scale * 1e-3)
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=scale * 1e-3)


def test_integer_means_round_toward_minus_infinity():
    src = torch.tensor([-3, -4, 7, 1, 2])
    assert torch_ragged.scatter(src, torch.tensor([0, 0, 1, 1, 3]), reduce="mean").tolist() == [-4, 4, 0, 2]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_integer_means_keep_the_dtype_past_its_range(dtype):
    """int8 / int16 / int32 means raised (index_copy_ of the promoted int64 quotient), and a sum in the data type
    wrapped first: the mean is the 64-bit sum over the count, floored, in src's dtype (against Python's integers)."""
    signed = torch.iinfo(dtype).min < 0
    top = min(torch.iinfo(dtype).max, 100)
    g = torch.Generator().manual_seed(3)
    src = torch.randint(-top if signed else 0, top + 1, (700, 2), generator=g).to(dtype)
    src[:, 1] = top  # its sums pass 8-bit range
    index = torch.randint(0, 3, (700,), generator=g)
    got = torch_ragged.scatter(src, index, dim=0, reduce="mean")
    expected = [[sum(int(v) for v in src[index == p, c].tolist()) // int((index == p).sum()) for c in range(2)]
                for p in range(3)]
    assert got.dtype == dtype and got.tolist() == expected


def test_an_index_with_fewer_dims_than_src_broadcasts_as_torch_scatter():
    """torch_scatter's broadcast: a 1-D index lines up with dim; an index of more dims with src's leading dims, then
    it is expanded over the trailing dims it lacks (torch_scatter's test_scatter.py passes such indices)."""
    src = torch.arange(24.0).view(2, 4, 3)
    per_row = torch.tensor([1, 0, 1, 2])
    expected = torch_ragged.scatter(src, per_row, dim=1)
    assert torch.equal(torch_ragged.scatter(src, per_row.expand(2, 4), dim=1), expected)  # (2, 4) -> (2, 4, 1)
    assert torch.equal(torch_ragged.scatter(src, per_row.view(1, 4), dim=1), expected)
    loop = torch.zeros(2, 3, 3)
    for row, p in enumerate(per_row.tolist()):
        loop[:, p] += src[:, row]
    assert torch.equal(expected, loop)
    # an index that differs across dim 0: each line along dim 1 scattered on its own
    per_line = torch.tensor([[1, 0, 1, 2], [0, 0, 1, 2]])
    loop = torch.zeros(2, 3, 3)
    for line in range(2):
        for row, p in enumerate(per_line[line].tolist()):
            loop[line, p] += src[line, row]
    assert torch.equal(torch_ragged.scatter(src, per_line, dim=1), loop)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_an_int32_index_gives_the_int64_results(device, reduce):
    """An int32 index leaked an internal error (index_copy_() expected a long index): the same results as int64."""
    g = torch.Generator().manual_seed(9)
    src = torch.randn(50, 3, generator=g).to(device)
    index = torch.randint(0, 7, (50,), generator=g).to(device)
    expected = torch_ragged.scatter(src, index, dim=0, dim_size=8, reduce=reduce)
    assert torch.equal(torch_ragged.scatter(src, index.int(), dim=0, dim_size=8, reduce=reduce), expected)
    if reduce in ("max", "min"):
        fn = torch_ragged.scatter_max if reduce == "max" else torch_ragged.scatter_min
        for a, b in zip(fn(src, index.int(), dim=0), fn(src, index, dim=0), strict=True):
            assert torch.equal(a, b)


def test_deterministic_across_runs_and_thread_counts():
    g = torch.Generator().manual_seed(4)
    src = torch.randn(200_000, 4, generator=g)
    index = torch.randint(0, 1000, (200_000,), generator=g)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(torch_ragged.scatter(src, index, dim=0))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_gradients(reduce):
    g = torch.Generator().manual_seed(5)
    src = torch.randn(9, 3, generator=g, dtype=torch.float64, requires_grad=True)  # distinct values: no ties
    index = torch.tensor([3, 0, 3, 1, 0, 3, 1, 1, 0])
    assert gradcheck(lambda s: torch_ragged.scatter(s, index, dim=0, dim_size=5, reduce=reduce), (src,))


def test_a_broadcast_index_is_one_index_per_row():
    src = torch.arange(12.0).view(4, 3)
    index = torch.tensor([1, 0, 1, 0])
    expanded = index.view(-1, 1).expand_as(src)
    assert torch.equal(torch_ragged.scatter(src, expanded, dim=0), torch_ragged.scatter(src, index, dim=0))


def test_bad_input_is_named():
    src = torch.randn(4, 3)
    with pytest.raises(ValueError, match="torch_ragged.scatter: index must be non-negative, got -1"):
        torch_ragged.scatter(src, torch.tensor([0, -1, 0, 1]), dim=0)
    with pytest.raises(ValueError, match="torch_ragged.scatter: index holds 5, out of range for dim_size 3"):
        torch_ragged.scatter(src, torch.tensor([0, 5, 0, 1]), dim=0, dim_size=3)
    with pytest.raises(ValueError, match="torch_ragged.scatter: reduce must be one of"):
        torch_ragged.scatter(src, torch.tensor([0, 1, 0, 1]), dim=0, reduce="prod")
    with pytest.raises(ValueError, match=r"torch_ragged.scatter: index must be 1-D with src.size\(0\) = 4 entries"):
        torch_ragged.scatter(src, torch.tensor([0, 1, 0]), dim=0)
    with pytest.raises(ValueError, match="torch_ragged.scatter: index must be non-negative, got -1"):
        torch_ragged.scatter(src, torch.tensor([[0, 1, 0], [1, -1, 1], [0, 0, 0], [1, 1, 1]]), dim=0)  # per element
    with pytest.raises(ValueError, match="torch_ragged.scatter_max: index holds 7, out of range for dim_size 2"):
        torch_ragged.scatter_max(src, torch.tensor([[0, 1, 0], [1, 7, 1], [0, 0, 0], [1, 1, 1]]), dim=0, dim_size=2)
    with pytest.raises(TypeError, match="torch_ragged.scatter: index must hold integers"):
        torch_ragged.scatter(src, torch.tensor([0.0, 1.0, 0.0, 1.0]), dim=0)
    with pytest.raises(IndexError, match="torch_ragged.scatter_max: dim 2 is out of range for a 2-D src"):
        torch_ragged.scatter_max(src, torch.tensor([0, 1, 0]), dim=2)
    with pytest.raises(ValueError, match="torch_ragged.scatter: dim_size must be a non-negative int"):
        torch_ragged.scatter(src, torch.tensor([0, 1, 0, 1]), dim=0, dim_size=-1)
    with pytest.raises(TypeError, match='torch_ragged.scatter: reduce="mean" needs numbers'):  # as segment_mean
        torch_ragged.scatter(torch.tensor([True, False]), torch.tensor([0, 0]), reduce="mean")
    # a bool sum or-s, as torch's sparse coalesce does
    assert torch_ragged.scatter(torch.tensor([True, False, False]), torch.tensor([0, 0, 1])).tolist() == [True, False]


def test_empty_inputs():
    out = torch_ragged.scatter(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long), dim=0, dim_size=2)
    assert out.shape == (2, 3) and not out.any()
    values, arg = torch_ragged.scatter_min(torch.zeros(0), torch.zeros(0, dtype=torch.long))
    assert values.shape == (0,) and arg.shape == (0,)


# ---- one surface: the op, TorchScript, torch.compile, torch.export ----

def test_the_public_functions_call_the_registered_ops():
    src, index = torch.randn(6, 3), torch.tensor([2, 0, 2, 1, 0, 2])
    ops = torch.ops.torch_ragged
    assert torch.equal(torch_ragged.scatter(src, index, 0, reduce="mean"), ops.scatter(src, index, 0, None, "mean"))
    for name in ("scatter_max", "scatter_min"):
        got, expected = getattr(torch_ragged, name)(src, index, 0, 4), getattr(ops, name)(src, index, 0, 4)
        assert all(torch.equal(g, e) for g, e in zip(got, expected, strict=True))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_compile_fullgraph_with_dynamic_sizes_matches_eager_and_the_loop(reduce):
    torch._dynamo.reset()
    compiled = torch.compile(lambda s, i: torch_ragged.scatter(s, i, 0, None, reduce), fullgraph=True,
                             dynamic=True)
    for rows, seed in ((6, 0), (11, 1)):  # one compiled graph, two sizes; the output size comes from the data
        g = torch.Generator().manual_seed(seed)
        src = torch.randn(rows, 3, generator=g, dtype=torch.float64)
        index = torch.randint(0, 5, (rows,), generator=g)
        expected, _ = loop_scatter(src, index, 0, int(index.max()) + 1, reduce)
        torch.testing.assert_close(compiled(src, index), expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_compiled_gradients_are_the_eager_gradients(reduce):
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(3)
    src = torch.randn(9, 4, generator=g, dtype=torch.float64)
    index = torch.tensor([3, 0, 3, 1, 0, 3, 1, 1, 0])
    weight = torch.randn(5, 4, generator=g, dtype=torch.float64)

    def loss(s):
        return (torch_ragged.scatter(s, index, 0, 5, reduce) * weight).sum()

    eager, compiled = src.clone().requires_grad_(), src.clone().requires_grad_()
    loss(eager).backward()
    torch.compile(loss, fullgraph=True)(compiled).backward()
    torch.testing.assert_close(compiled.grad, eager.grad)


def test_export_with_dynamic_rows_runs_other_sizes_like_the_loop():
    class Scatter(torch.nn.Module):
        def forward(self, src, index):
            out = torch_ragged.scatter(src, index, dim=0, dim_size=4, reduce="mean")
            values, arg = torch_ragged.scatter_max(src, index, 0)
            return out, values, arg

    rows = torch.export.Dim("rows")
    example = (torch.randn(6, 2), torch.tensor([0, 1, 3, 3, 1, 0]))
    program = torch.export.export(Scatter(), example, dynamic_shapes=({0: rows}, {0: rows}))
    g = torch.Generator().manual_seed(4)
    src, index = torch.randn(13, 2, generator=g, dtype=torch.float64), torch.randint(0, 4, (13,), generator=g)
    out, values, arg = program.module()(src, index)
    size = int(index.max()) + 1
    torch.testing.assert_close(out, loop_scatter(src, index, 0, 4, "mean")[0])
    expected_values, expected_arg = loop_scatter(src, index, 0, size, "max")
    torch.testing.assert_close(values, expected_values)
    assert torch.equal(arg, expected_arg)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_torchscript_compiles_a_function_calling_the_public_functions():
    def pool(src: torch.Tensor, index: torch.Tensor):
        mean = torch_ragged.scatter(src, index, 0, reduce="mean")
        values, arg = torch_ragged.scatter_min(src, index, dim=0, dim_size=4)
        return mean, values, arg

    scripted = torch.jit.script(pool)
    src, index = torch.randn(7, 3, dtype=torch.float64), torch.tensor([1, 0, 1, 3, 0, 1, 3])
    mean, values, arg = scripted(src, index)
    torch.testing.assert_close(mean, loop_scatter(src, index, 0, 4, "mean")[0])
    expected_values, expected_arg = loop_scatter(src, index, 0, 4, "min")
    torch.testing.assert_close(values, expected_values)
    assert torch.equal(arg, expected_arg)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_second_derivatives(reduce):
    from torch.autograd import gradgradcheck

    g = torch.Generator().manual_seed(6)
    src = torch.randn(8, 2, generator=g, dtype=torch.float64, requires_grad=True)  # distinct values: no ties
    index = torch.tensor([[2], [0], [2], [1], [0], [2], [1], [4]]).expand(8, 2)  # a broadcast index
    assert gradgradcheck(lambda s: torch_ragged.scatter(s, index, dim=0, dim_size=5, reduce=reduce), (src,))



@pytest.mark.parametrize("rows", [2, 17, 64, 65, 130])  # the insertion sort (<= 64 keys) and the radix sort
def test_sums_group_the_rows_stably_before_the_segment_core_sums_them(rows):
    """Bit for bit the rows grouped by torch's stable sort, then summed per group by segment_sum (whose order, the
    reduction tree's, is tested against loops in test_segment.py): an unstable grouping would sum each position's
    rows in another order, and rows of magnitudes 1e-3..1e4 tell orders apart."""
    g = torch.Generator().manual_seed(rows)
    src = torch.randn(rows, generator=g) * torch.logspace(-3, 4, rows)[torch.randperm(rows, generator=g)]
    index = torch.randint(0, 3, (rows,), generator=g)
    order = torch.sort(index, stable=True).indices
    first_idx = torch_ragged.get_first_idx(torch.bincount(index, minlength=3))
    assert torch.equal(torch_ragged.scatter(src, index, dim_size=3), torch_ragged.segment_sum(src[order], first_idx))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_sums_are_segment_sums_of_the_stably_grouped_rows_bit_for_bit(dtype):
    """Whatever route a scatter sum takes (few rows summed in order without grouping, a counting pass, a radix
    sort, an index per element), its bits are segment_sum's over the rows grouped by a stable sort of the index --
    the fixed order the GPU computes too."""
    g = torch.Generator().manual_seed(8)
    # (12000, 3, 7): 36k flat positions, groups of ~1700 crossing edges of every level, split over threads
    for rows, width, positions in [(5, 3, 4), (31, 1, 3), (32, 7, 9), (33, 2, 2), (300, 16, 40), (2000, 3, 5000),
                                   (12000, 3, 7), (9000, 5, 1500)]:
        src = (torch.randn(rows, width, generator=g) * 1000).to(dtype)
        index = torch.randint(0, positions, (rows,), generator=g)
        order = torch.sort(index, stable=True).indices
        first_idx = torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(index, minlength=positions).cumsum(0)])
        expected = torch_ragged.segment_sum(src[order], first_idx)
        assert torch.equal(torch_ragged.scatter(src, index, 0, positions), expected)
        # an index per element: every line along dim one run of the flat order, keyed line * positions + index
        per_element = index.view(1, -1).expand(width, rows).clone()
        per_element[0] = per_element[0].flip(0)  # lines differ
        keys = (per_element + torch.arange(width).view(-1, 1) * positions).reshape(-1)
        order = torch.sort(keys, stable=True).indices
        first_idx = torch.cat([torch.zeros(1, dtype=torch.long),
                               torch.bincount(keys, minlength=width * positions).cumsum(0)])
        flat = torch_ragged.segment_sum(src.t().reshape(-1)[order], first_idx).view(width, positions)
        assert torch.equal(torch_ragged.scatter(src.t(), per_element, 1, positions), flat)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64], ids=str)
def test_means_by_an_index_per_element_are_the_grouped_sums_over_the_counts(dtype):
    """reduce="mean" with an index per element: each (position, column) its grouped sum over its own count (floor
    division for integers, as torch_scatter's), 0 where nothing lands."""
    g = torch.Generator().manual_seed(9)
    rows, width, positions = 11000, 3, 9
    src = (torch.randn(rows, width, generator=g) * 1000).to(dtype)
    index = torch.randint(0, positions - 1, (rows, width), generator=g)  # the last position stays empty
    keys = (index.t() + torch.arange(width).view(-1, 1) * positions).reshape(-1)
    counts = torch.bincount(keys, minlength=width * positions)
    grouped = src.t().reshape(-1)[torch.sort(keys, stable=True).indices]
    wide = grouped if dtype.is_floating_point else grouped.long()
    sums = torch_ragged.segment_sum(wide, torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)]))
    if dtype.is_floating_point:
        expected = sums / counts.clamp(min=1).to(dtype)
    else:
        expected = torch.div(sums, counts.clamp(min=1), rounding_mode="floor").to(dtype)
    got = torch_ragged.scatter(src, index, 0, positions, reduce="mean")
    assert torch.equal(got, expected.view(width, positions).t())
    assert torch.equal(got[-1], torch.zeros(width, dtype=dtype))


@pytest.mark.parametrize("bad", [-1, 6])
def test_an_index_per_element_out_of_range_is_named_with_dim_size_given(bad):
    """With dim_size given, the per-element sum checks the index as it copies it: a key outside [0, dim_size) is
    refused by name, wherever it sits (here in the last column of a row that many threads would split)."""
    src, index = torch.randn(20000, 4), torch.zeros(20000, 4, dtype=torch.long)
    index[12345, 3] = bad
    with pytest.raises(ValueError, match="torch_ragged.scatter: index"):
        torch_ragged.scatter(src, index, 0, 6)
    with pytest.raises(ValueError, match="torch_ragged.scatter: index"):
        torch_ragged.scatter(src, index, 0, 6, reduce="mean")


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4), (2, 3, 0)])
@pytest.mark.parametrize("reduce", ["sum", "mean", "mul", "max", "min"])
def test_an_index_per_element_with_an_empty_dim(shape, reduce):
    """No rows along dim (or none beside it): every position is unreached -- 0, or 1 for mul."""
    src, index = torch.randn(*shape), torch.zeros(*shape, dtype=torch.long)
    out = torch_ragged.scatter(src, index, 1, 2, reduce=reduce)
    expected = (torch.ones if reduce == "mul" else torch.zeros)(shape[0], 2, shape[2])
    assert torch.equal(out, expected)
