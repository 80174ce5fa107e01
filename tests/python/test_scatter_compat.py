"""torch_ragged.scatter_compat as a drop-in for torch_scatter: torch_scatter's own test tables (their expected values,
written by hand in its test_scatter.py / test_segment.py / composite tests) run through our functions, with its
out= / non-contiguous / TorchScript / gradcheck cases; then random inputs against torch's scatter_reduce, loops and
torch.softmax / logsumexp / std per group, large magnitudes, determinism, torch.compile / export and bad input."""

import itertools
import math

import pytest
import torch
import torch_ragged
import torch_ragged.scatter_compat as ts
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck

REDUCTIONS = ["sum", "add", "mul", "mean", "min", "max"]
DTYPES = [torch.half, torch.bfloat16, torch.float, torch.double, torch.int, torch.long]

# torch_scatter's test/test_scatter.py table (expected values as written there)
SCATTER_TESTS = [
    {
        "src": [1, 3, 2, 4, 5, 6], "index": [0, 1, 0, 1, 1, 3], "dim": -1,
        "sum": [3, 12, 0, 6], "add": [3, 12, 0, 6], "mul": [2, 60, 1, 6], "mean": [1.5, 4, 0, 6],
        "min": [1, 3, 0, 6], "arg_min": [0, 1, 6, 5], "max": [2, 5, 0, 6], "arg_max": [2, 4, 6, 5],
    },
    {
        "src": [[1, 2], [5, 6], [3, 4], [7, 8], [9, 10], [11, 12]], "index": [0, 1, 0, 1, 1, 3], "dim": 0,
        "sum": [[4, 6], [21, 24], [0, 0], [11, 12]], "add": [[4, 6], [21, 24], [0, 0], [11, 12]],
        "mul": [[1 * 3, 2 * 4], [5 * 7 * 9, 6 * 8 * 10], [1, 1], [11, 12]],
        "mean": [[2, 3], [7, 8], [0, 0], [11, 12]], "min": [[1, 2], [5, 6], [0, 0], [11, 12]],
        "arg_min": [[0, 0], [1, 1], [6, 6], [5, 5]], "max": [[3, 4], [9, 10], [0, 0], [11, 12]],
        "arg_max": [[2, 2], [4, 4], [6, 6], [5, 5]],
    },
    {
        "src": [[1, 5, 3, 7, 9, 11], [2, 4, 8, 6, 10, 12]], "index": [[0, 1, 0, 1, 1, 3], [0, 0, 1, 0, 1, 2]],
        "dim": 1,
        "sum": [[4, 21, 0, 11], [12, 18, 12, 0]], "add": [[4, 21, 0, 11], [12, 18, 12, 0]],
        "mul": [[1 * 3, 5 * 7 * 9, 1, 11], [2 * 4 * 6, 8 * 10, 12, 1]],
        "mean": [[2, 7, 0, 11], [4, 9, 12, 0]], "min": [[1, 5, 0, 11], [2, 8, 12, 0]],
        "arg_min": [[0, 1, 6, 5], [0, 2, 5, 6]], "max": [[3, 9, 0, 11], [6, 10, 12, 0]],
        "arg_max": [[2, 4, 6, 5], [3, 4, 5, 6]],
    },
    {
        "src": [[[1, 2], [5, 6], [3, 4]], [[10, 11], [7, 9], [12, 13]]], "index": [[0, 1, 0], [2, 0, 2]], "dim": 1,
        "sum": [[[4, 6], [5, 6], [0, 0]], [[7, 9], [0, 0], [22, 24]]],
        "add": [[[4, 6], [5, 6], [0, 0]], [[7, 9], [0, 0], [22, 24]]],
        "mul": [[[3, 8], [5, 6], [1, 1]], [[7, 9], [1, 1], [120, 11 * 13]]],
        "mean": [[[2, 3], [5, 6], [0, 0]], [[7, 9], [0, 0], [11, 12]]],
        "min": [[[1, 2], [5, 6], [0, 0]], [[7, 9], [0, 0], [10, 11]]],
        "arg_min": [[[0, 0], [1, 1], [3, 3]], [[1, 1], [3, 3], [0, 0]]],
        "max": [[[3, 4], [5, 6], [0, 0]], [[7, 9], [0, 0], [12, 13]]],
        "arg_max": [[[2, 2], [1, 1], [3, 3]], [[1, 1], [3, 3], [2, 2]]],
    },
    {
        "src": [[1, 3], [2, 4]], "index": [[0, 0], [0, 0]], "dim": 1,
        "sum": [[4], [6]], "add": [[4], [6]], "mul": [[3], [8]], "mean": [[2], [3]], "min": [[1], [2]],
        "arg_min": [[0], [0]], "max": [[3], [4]], "arg_max": [[1], [1]],
    },
    {
        "src": [[[1, 1], [3, 3]], [[2, 2], [4, 4]]], "index": [[0, 0], [0, 0]], "dim": 1,
        "sum": [[[4, 4]], [[6, 6]]], "add": [[[4, 4]], [[6, 6]]], "mul": [[[3, 3]], [[8, 8]]],
        "mean": [[[2, 2]], [[3, 3]]], "min": [[[1, 1]], [[2, 2]]], "arg_min": [[[0, 0]], [[0, 0]]],
        "max": [[[3, 3]], [[4, 4]]], "arg_max": [[[1, 1]], [[1, 1]]],
    },
]

# torch_scatter's test/test_segment.py table
SEGMENT_TESTS = [
    {
        "src": [1, 2, 3, 4, 5, 6], "index": [0, 0, 1, 1, 1, 3], "indptr": [0, 2, 5, 5, 6],
        "add": [3, 12, 0, 6], "mean": [1.5, 4, 0, 6], "min": [1, 3, 0, 6], "arg_min": [0, 2, 6, 5],
        "max": [2, 5, 0, 6], "arg_max": [1, 4, 6, 5],
    },
    {
        "src": [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]], "index": [0, 0, 1, 1, 1, 3],
        "indptr": [0, 2, 5, 5, 6],
        "add": [[4, 6], [21, 24], [0, 0], [11, 12]], "mean": [[2, 3], [7, 8], [0, 0], [11, 12]],
        "min": [[1, 2], [5, 6], [0, 0], [11, 12]], "arg_min": [[0, 0], [2, 2], [6, 6], [5, 5]],
        "max": [[3, 4], [9, 10], [0, 0], [11, 12]], "arg_max": [[1, 1], [4, 4], [6, 6], [5, 5]],
    },
    {
        "src": [[1, 3, 5, 7, 9, 11], [2, 4, 6, 8, 10, 12]], "index": [[0, 0, 1, 1, 1, 3], [0, 0, 0, 1, 1, 2]],
        "indptr": [[0, 2, 5, 5, 6], [0, 3, 5, 6, 6]],
        "add": [[4, 21, 0, 11], [12, 18, 12, 0]], "mean": [[2, 7, 0, 11], [4, 9, 12, 0]],
        "min": [[1, 5, 0, 11], [2, 8, 12, 0]], "arg_min": [[0, 2, 6, 5], [0, 3, 5, 6]],
        "max": [[3, 9, 0, 11], [6, 10, 12, 0]], "arg_max": [[1, 4, 6, 5], [2, 4, 5, 6]],
    },
    {
        "src": [[[1, 2], [3, 4], [5, 6]], [[7, 9], [10, 11], [12, 13]]], "index": [[0, 0, 1], [0, 2, 2]],
        "indptr": [[0, 2, 3, 3], [0, 1, 1, 3]],
        "add": [[[4, 6], [5, 6], [0, 0]], [[7, 9], [0, 0], [22, 24]]],
        "mean": [[[2, 3], [5, 6], [0, 0]], [[7, 9], [0, 0], [11, 12]]],
        "min": [[[1, 2], [5, 6], [0, 0]], [[7, 9], [0, 0], [10, 11]]],
        "arg_min": [[[0, 0], [2, 2], [3, 3]], [[0, 0], [3, 3], [1, 1]]],
        "max": [[[3, 4], [5, 6], [0, 0]], [[7, 9], [0, 0], [12, 13]]],
        "arg_max": [[[1, 1], [2, 2], [3, 3]], [[0, 0], [3, 3], [2, 2]]],
    },
    {
        "src": [[1, 3], [2, 4]], "index": [[0, 0], [0, 0]], "indptr": [[0, 2], [0, 2]],
        "add": [[4], [6]], "mean": [[2], [3]], "min": [[1], [2]], "arg_min": [[0], [0]], "max": [[3], [4]],
        "arg_max": [[1], [1]],
    },
    {
        "src": [[[1, 1], [3, 3]], [[2, 2], [4, 4]]], "index": [[0, 0], [0, 0]], "indptr": [[0, 2], [0, 2]],
        "add": [[[4, 4]], [[6, 6]]], "mean": [[[2, 2]], [[3, 3]]], "min": [[[1, 1]], [[2, 2]]],
        "arg_min": [[[0, 0]], [[0, 0]]], "max": [[[3, 3]], [[4, 4]]], "arg_max": [[[1, 1]], [[1, 1]]],
    },
]


def tensor(values, dtype, device):
    return torch.tensor(values, dtype=dtype, device=device)


def scripted(name):
    return torch.jit.script(getattr(ts, name))


# ---- torch_scatter's test_scatter.py ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("case", range(len(SCATTER_TESTS)))
def test_scatter_table(case, reduce, dtype, device):
    test = SCATTER_TESTS[case]
    src, index, dim = tensor(test["src"], dtype, device), tensor(test["index"], torch.long, device), test["dim"]
    expected = tensor(test[reduce], dtype, device)
    fn = getattr(ts, "scatter_" + reduce)
    out1, out2 = fn(src, index, dim), scripted("scatter_" + reduce)(src, index, dim)
    if reduce in ("min", "max"):
        arg_expected = tensor(test["arg_" + reduce], torch.long, device)
        assert torch.equal(out1[1], arg_expected) and torch.equal(out2[1], arg_expected)
        out1, out2 = out1[0], out2[0]
    assert torch.equal(out1, expected) and torch.equal(out2, expected)
    assert torch.equal(ts.scatter(src, index, dim, reduce=reduce), expected)
    # torch_scatter's test_non_contiguous
    if src.dim() > 1:
        src = src.transpose(0, 1).contiguous().transpose(0, 1)
    if index.dim() > 1:
        index = index.transpose(0, 1).contiguous().transpose(0, 1)
    got = fn(src, index, dim)
    assert torch.equal(got[0] if isinstance(got, tuple) else got, expected)
    # an int32 index gives the same
    got = fn(src, index.int(), dim)
    assert torch.equal(got[0] if isinstance(got, tuple) else got, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float, torch.long], ids=str)
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("case", range(len(SCATTER_TESTS)))
def test_scatter_into_out(case, reduce, dtype, device):
    """torch_scatter's test_out: out = -2 everywhere; sums add to it, min keeps -2 (below every element), max keeps
    -2 where nothing reaches; mul and mean (which torch_scatter's test leaves unchecked) against the formula."""
    test = SCATTER_TESTS[case]
    src, index, dim = tensor(test["src"], dtype, device), tensor(test["index"], torch.long, device), test["dim"]
    expected = tensor(test[reduce], dtype, device)
    out = torch.full_like(expected, -2)
    returned = getattr(ts, "scatter_" + reduce)(src, index, dim, out)
    if reduce in ("sum", "add"):
        expected = expected - 2
    elif reduce == "mul":
        expected = expected * -2
    elif reduce == "mean":
        counts = ts.scatter_sum(torch.ones_like(src, dtype=torch.long), index, dim, dim_size=expected.shape[dim])
        sums = tensor(test["sum"], dtype, device) - 2
        expected = sums / counts.clamp(min=1) if dtype.is_floating_point else sums.div(counts.clamp(min=1),
                                                                                          rounding_mode="floor")
    elif reduce == "min":
        expected = expected.fill_(-2)
    else:
        expected[expected == 0] = -2
    assert torch.equal(out, expected.to(dtype))
    assert (returned[0] if isinstance(returned, tuple) else returned) is out
    if reduce in ("min", "max"):  # out's value kept: arg = src.size(dim)
        assert bool((returned[1] == src.shape[dim]).eq(out == -2).all())


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("case", range(len(SCATTER_TESTS)))
def test_scatter_gradcheck(case, reduce):
    test = SCATTER_TESTS[case]
    src = tensor(test["src"], torch.double, "cpu").requires_grad_()
    index = tensor(test["index"], torch.long, "cpu")
    assert gradcheck(ts.scatter, (src, index, test["dim"], None, None, reduce))


# ---- torch_scatter's test_segment.py ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float, torch.double, torch.long], ids=str)
@pytest.mark.parametrize("reduce", ["add", "mean", "min", "max"])
@pytest.mark.parametrize("case", range(len(SEGMENT_TESTS)))
def test_segment_table(case, reduce, dtype, device):
    test = SEGMENT_TESTS[case]
    src = tensor(test["src"], dtype, device)
    index, indptr = tensor(test["index"], torch.long, device), tensor(test["indptr"], torch.long, device)
    expected = tensor(test[reduce], dtype, device)
    for contiguous in (True, False):
        if not contiguous:  # torch_scatter's test_non_contiguous_segment
            src = src.transpose(0, 1).contiguous().transpose(0, 1) if src.dim() > 1 else src
            index = index.transpose(0, 1).contiguous().transpose(0, 1) if index.dim() > 1 else index
            indptr = indptr.transpose(0, 1).contiguous().transpose(0, 1) if indptr.dim() > 1 else indptr
        assert torch.equal(ts.segment_coo(src, index, reduce=reduce), expected)
        assert torch.equal(ts.segment_csr(src, indptr, reduce=reduce), expected)
        if reduce in ("min", "max"):
            arg_expected = tensor(test["arg_" + reduce], torch.long, device)
            pairs = ((getattr(ts, f"segment_{reduce}_coo"), index), (getattr(ts, f"segment_{reduce}_csr"), indptr))
            for fn, by in pairs:
                values, arg = fn(src, by)
                assert torch.equal(values, expected) and torch.equal(arg, arg_expected)
    # torch_scatter's test_segment_out: segment_csr overwrites out, segment_coo combines with it
    size = list(src.shape)
    size[indptr.dim() - 1] = indptr.shape[-1] - 1
    out = src.new_full(size, -2)
    ts.segment_csr(src, indptr, out, reduce=reduce)
    assert torch.equal(out, expected)
    out.fill_(-2)
    ts.segment_coo(src, index, out, reduce=reduce)
    if reduce == "add":
        assert torch.equal(out, expected - 2)
    elif reduce == "min":
        assert bool((out == -2).all())
    elif reduce == "max":
        assert torch.equal(out, torch.where(expected == 0, torch.full_like(expected, -2), expected))


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
@pytest.mark.parametrize("case", range(len(SEGMENT_TESTS)))
def test_segment_gradcheck(case, reduce):
    test = SEGMENT_TESTS[case]
    src = tensor(test["src"], torch.double, "cpu").requires_grad_()
    src = (src + torch.arange(src.numel(), dtype=torch.double).view(src.shape) * 1e-3).detach().requires_grad_()
    index, indptr = tensor(test["index"], torch.long, "cpu"), tensor(test["indptr"], torch.long, "cpu")
    assert gradcheck(ts.segment_coo, (src, index, None, None, reduce))
    assert gradcheck(ts.segment_csr, (src, indptr, None, reduce))


@pytest.mark.parametrize("device", DEVICES)
def test_gather_csr_and_coo_against_index_select(device):
    """torch_scatter's test_gather: both give src.index_select(0, index) for the index the indptr describes."""
    src = tensor([[1, 2], [3, 4], [5, 6], [7, 8]], torch.float, device)
    indptr, index = tensor([0, 2, 5, 5, 6], torch.long, device), tensor([0, 0, 1, 1, 1, 3], torch.long, device)
    expected = src.index_select(0, index)
    assert torch.equal(ts.gather_csr(src, indptr), expected)
    assert torch.equal(ts.gather_coo(src, index), expected)
    assert torch.equal(scripted("gather_csr")(src, indptr), expected)
    out = torch.full_like(expected, -1.0)
    assert ts.gather_csr(src, indptr, out) is out and torch.equal(out, expected)


def test_batched_gather_csr_and_coo_against_a_loop():
    src = torch.arange(2 * 3 * 2, dtype=torch.float).view(2, 3, 2)
    indptr = torch.tensor([[0, 2, 3, 3], [1, 1, 2, 3]])  # batch 1 starts at row 1: row 0 has no segment
    got = ts.gather_csr(src, indptr)
    loop = torch.zeros(2, 3, 2)
    for b in range(2):
        for k in range(3):
            for r in range(int(indptr[b, k]), int(indptr[b, k + 1])):
                loop[b, r] = src[b, k]
    assert torch.equal(got, loop)
    index = torch.tensor([[0, 0, 2], [1, 2, 2]])
    expected = torch.stack([src[b].index_select(0, index[b]) for b in range(2)])
    assert torch.equal(ts.gather_coo(src, index), expected)
    gradcheck(lambda s: ts.gather_csr(s, indptr), (src.double().requires_grad_(),))


def test_segment_csr_with_indptr_not_covering_src_and_batches():
    """torch_scatter reads only the rows indptr names: leading and trailing rows are left out."""
    src = torch.arange(8.0)
    assert ts.segment_csr(src, torch.tensor([2, 4, 5])).tolist() == [2 + 3, 4]
    batched = torch.arange(10.0).view(2, 5)
    indptr = torch.tensor([[1, 3], [0, 5]])
    assert ts.segment_csr(batched, indptr).tolist() == [[1 + 2], [5 + 6 + 7 + 8 + 9]]
    values, arg = ts.segment_max_csr(batched, indptr)
    assert values.tolist() == [[2.0], [9.0]] and arg.tolist() == [[2], [4]]


# ---- composites (torch_scatter's composite tests, then torch per group at large magnitudes) ----

def test_softmax_and_log_softmax_as_torch_scatters_test():
    src = torch.tensor([0.2, 0, 0.2, -2.1, 3.2, 7, -1, float("-inf")])
    index = torch.tensor([0, 1, 0, 1, 1, 2, 4, 4])
    groups = [[0, 2], [1, 3, 4], [5], [6, 7]]
    expected = torch.empty(8)
    expected_log = torch.empty(8)
    for members in groups:
        expected[members] = torch.softmax(src[members], dim=-1)
        expected_log[members] = torch.log_softmax(src[members], dim=-1)
    torch.testing.assert_close(ts.scatter_softmax(src, index), expected)
    torch.testing.assert_close(ts.scatter_log_softmax(src, index), expected_log)
    torch.testing.assert_close(scripted("scatter_softmax")(src, index), expected)


def test_std_as_torch_scatters_test():
    src = torch.tensor([[2, 0, 1, 4, 3], [0, 2, 1, 3, 4]], dtype=torch.float)
    index = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.long)
    std = src.std(dim=-1, unbiased=True)[0]
    torch.testing.assert_close(ts.scatter_std(src, index, dim=-1, unbiased=True), torch.tensor([[std, 0], [0, std]]))


EDGE_VALUES = [0.0, 1.0, -1e33, 1e33, float("nan"), float("-inf"), float("inf")]


@pytest.mark.parametrize("values", [[0.5, -2.1, 3.2], *map(list, itertools.product(EDGE_VALUES, EDGE_VALUES))])
def test_logsumexp_against_torch_at_edge_values(values):
    """torch_scatter's test_logsumexp: one group, against torch.logsumexp (inf, -inf, nan, 1e33 included); with out,
    out's value joins the group."""
    src = torch.tensor(values, dtype=torch.float64)
    index = torch.zeros_like(src, dtype=torch.long)
    got = ts.scatter_logsumexp(src, index, dim_size=1, eps=0.0)
    torch.testing.assert_close(got, torch.logsumexp(src, dim=0, keepdim=True), equal_nan=True)
    for out_value in EDGE_VALUES:
        out = torch.tensor([out_value], dtype=torch.float64)
        expected = torch.logsumexp(torch.cat([out, src]), dim=0, keepdim=True)
        torch.testing.assert_close(ts.scatter_logsumexp(src, index, out=out, eps=0.0), expected, equal_nan=True)


def test_logsumexp_of_nothing_is_zero_and_of_minus_infinity_is_minus_infinity():
    got = ts.scatter_logsumexp(torch.tensor([float("-inf"), 1.0]), torch.tensor([0, 2]), dim_size=4)
    assert got.tolist() == [float("-inf"), 0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="disagrees with out.size"):
        ts.scatter_logsumexp(torch.zeros(3), torch.zeros(3, dtype=torch.long), 0, torch.zeros(1), dim_size=2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1e4, 1e5, 1e7])
def test_composites_match_torch_per_group_at_large_magnitudes(device, scale):
    g = torch.Generator().manual_seed(int(math.log10(scale)))
    src = (torch.randn(300, 4, generator=g, dtype=torch.float64) * scale).to(device)
    index = torch.randint(0, 20, (300,), generator=g).to(device)
    softmax = ts.scatter_softmax(src, index, dim=0)
    log_softmax = ts.scatter_log_softmax(src, index, dim=0)
    logsumexp = ts.scatter_logsumexp(src, index, dim=0, eps=0.0)
    std = ts.scatter_std(src, index, dim=0)
    for p in range(20):
        members = (index == p).nonzero().view(-1)
        group = src[members]
        torch.testing.assert_close(softmax[members], torch.softmax(group, dim=0))
        torch.testing.assert_close(log_softmax[members], torch.log_softmax(group, dim=0))
        torch.testing.assert_close(logsumexp[p], torch.logsumexp(group, dim=0))
        torch.testing.assert_close(std[p], group.std(dim=0) if len(members) > 1 else torch.zeros(4, dtype=src.dtype,
                                                                                                    device=device))
    # the same in float32: no overflow at these magnitudes
    torch.testing.assert_close(ts.scatter_softmax(src.float(), index, dim=0), softmax.float(), atol=1e-5, rtol=1e-4)


def test_composite_gradients():
    g = torch.Generator().manual_seed(3)
    src = torch.randn(12, 3, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 2, 2, 0, 1, 1, 1, 3, 0, 2, 1, 3])
    for fn in (ts.scatter_softmax, ts.scatter_log_softmax, ts.scatter_std, ts.scatter_logsumexp):
        assert gradcheck(lambda s, fn=fn: fn(s, index, 0), (src,))
        assert gradgradcheck(lambda s, fn=fn: fn(s, index, 0), (src,))
    # a position of one element: its std is 0 and sends a zero gradient (not sqrt's inf * 0 = NaN)
    single = torch.tensor([1.0, 2.0, 5.0], dtype=torch.float64, requires_grad=True)
    ts.scatter_std(single, torch.tensor([0, 0, 1])).sum().backward()
    assert torch.isfinite(single.grad).all() and single.grad[2] == 0


def test_pyg_softmax_by_ptr_and_by_index():
    src = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 5.0], [0.5, 0.5]])
    ptr, index = torch.tensor([0, 3, 4]), torch.tensor([0, 0, 0, 1])
    expected = torch.cat([torch.softmax(src[:3], dim=0), torch.softmax(src[3:], dim=0)])
    torch.testing.assert_close(ts.softmax(src, ptr=ptr), expected)
    torch.testing.assert_close(ts.softmax(src, index, num_nodes=2), expected)
    torch.testing.assert_close(ts.softmax(src.t(), ptr=ptr, dim=1), expected.t())
    with pytest.raises(ValueError, match="give index or ptr"):
        ts.softmax(src)


# ---- random inputs against torch's scatter_reduce (independent) ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce,theirs", [("sum", "sum"), ("mul", "prod"), ("mean", "mean"), ("max", "amax"),
                                           ("min", "amin")])
def test_per_element_index_against_scatter_reduce(device, reduce, theirs):
    """An index that differs along the other dims (each line scattered on its own) against torch's scatter_reduce
    (include_self=False, onto the identity: 1 for prod, 0 else)."""
    g = torch.Generator().manual_seed(7)
    src = torch.randn(4, 30, 3, generator=g, dtype=torch.float64)
    index = torch.randint(0, 9, (4, 30, 3), generator=g)
    start = torch.ones if reduce == "mul" else torch.zeros
    expected = start(4, 10, 3, dtype=torch.float64).scatter_reduce(1, index, src, theirs, include_self=False)
    got = ts.scatter(src.to(device), index.to(device), 1, dim_size=10, reduce=reduce).cpu()
    torch.testing.assert_close(got, expected)
    if reduce in ("max", "min"):
        values, arg = getattr(ts, "scatter_" + reduce)(src.to(device), index.to(device), 1, dim_size=10)
        reached = arg.cpu() < 30
        assert torch.equal(src.gather(1, arg.cpu().clamp(max=29))[reached], values.cpu()[reached])


def test_mul_matches_scatter_reduce_prod_and_its_gradient_with_zeros():
    g = torch.Generator().manual_seed(2)
    src = torch.randn(40, 2, generator=g, dtype=torch.float64)
    src[3, 0] = src[17, 1] = src[18, 1] = 0.0
    index = torch.randint(0, 6, (40,), generator=g)
    full = index.view(-1, 1).expand(-1, 2)
    ours = src.clone().requires_grad_()
    theirs = src.clone().requires_grad_()
    got = ts.scatter_mul(ours, index, 0, dim_size=7)
    expected = torch.ones(7, 2, dtype=torch.float64).scatter_reduce(0, full, theirs, "prod", include_self=False)
    torch.testing.assert_close(got, expected)
    weight = torch.randn(7, 2, generator=g, dtype=torch.float64)
    (got * weight).sum().backward()
    (expected * weight).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_deterministic_across_thread_counts():
    g = torch.Generator().manual_seed(4)
    src = torch.randn(64, 3000, generator=g)
    index = torch.randint(0, 50, (64, 3000), generator=g)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append([ts.scatter(src, index, 1, reduce=r) for r in ("sum", "mean", "mul")])
    finally:
        torch.set_num_threads(threads)
    for later in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], later, strict=True))


# ---- the op surface ----

def test_compile_fullgraph_and_export():
    src, index = torch.randn(10, 4), torch.tensor([0, 1, 0, 3, 3, 1, 0, 2, 2, 1])
    indptr = torch.tensor([0, 3, 3, 7, 10])

    def model(src, index, indptr):
        pooled = ts.scatter_mean(src, index, 0, dim_size=4)
        weights = ts.scatter_softmax(src, index, 0, dim_size=4)
        return pooled, weights, ts.segment_csr(src, indptr, reduce="max"), ts.scatter_mul(src, index, 0, dim_size=4)

    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for got, expected in zip(compiled(src, index, indptr), model(src, index, indptr), strict=True):
        torch.testing.assert_close(got, expected)

    class Pool(torch.nn.Module):
        def forward(self, src, index):
            return ts.scatter_max(src, index, 0, dim_size=4)[0]

    program = torch.export.export(Pool(), (src, index))
    torch.testing.assert_close(program.module()(src, index), Pool()(src, index))


def test_the_library_keeps_its_own_conventions():
    """segment_max keeps arg = -1 for an empty segment; the compat layer gives src.size(dim)."""
    src, indptr = torch.tensor([1.0, 2.0]), torch.tensor([0, 2, 2])
    assert torch_ragged.segment_max(src, indptr).arg.tolist() == [1, -1]
    assert ts.segment_max_csr(src, indptr)[1].tolist() == [1, 2]


def test_bad_input_is_named():
    """Errors name the op the function calls (torch.ops.torch_ragged.compat_*), and the inner op they come from."""
    src = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"torch_ragged.compat_scatter: reduce must be one of .* got 'prod'"):
        ts.scatter(src, torch.tensor([0, 1, 0, 1]), 0, reduce="prod")
    with pytest.raises(ValueError, match=r"torch_ragged.compat_scatter: out must have src's sizes"):
        ts.scatter_sum(src, torch.tensor([0, 1, 0, 1]), 0, out=torch.zeros(2, 4))
    with pytest.raises(TypeError, match="torch_ragged.compat_scatter_arg: out must have src's dtype"):
        ts.scatter_max(src, torch.tensor([0, 1, 0, 1]), 0, out=torch.zeros(2, 3, dtype=torch.double))
    with pytest.raises(ValueError, match=r"torch_ragged.compat_scatter: index holds 5, out of range for dim_size 2 "
                                         r"\(from torch_ragged.scatter\)"):
        ts.scatter_sum(src, torch.tensor([0, 5, 0, 1]), 0, out=torch.zeros(2, 3))
    with pytest.raises(TypeError, match="torch_ragged.compat_scatter_softmax needs a floating-point src"):
        ts.scatter_softmax(torch.tensor([1, 2]), torch.tensor([0, 0]))
    with pytest.raises(TypeError, match="torch_ragged.compat_segment_csr: indptr must hold integers"):
        ts.segment_csr(src, torch.tensor([0.0, 4.0]))
    with pytest.raises(ValueError, match=r"compat_segment_csr: .*first_idx.*\(from torch_ragged.segment_sum"):
        ts.segment_csr(src, torch.tensor([0, 3, 2]))
    with pytest.raises(RuntimeError, match=r"compat_segment_csr: indptr's entries must lie in \[0, src.size"):
        ts.segment_csr(torch.randn(2, 4), torch.tensor([[0, 5], [0, 1]]))
    with pytest.raises(ValueError, match=r"compat_gather_csr: src.size\(0\) must be indptr.size\(-1\) - 1"):
        ts.gather_csr(src, torch.tensor([0, 2, 4]))
    with pytest.raises(ValueError, match=r"torch_ragged.compat_gather_coo: index must have 1 to src.dim\(\) dims"):
        ts.gather_coo(torch.randn(3), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(IndexError, match="torch_ragged.compat_scatter_std: dim 3 is out of range for a 2-D src"):
        ts.scatter_std(src, torch.tensor([0, 1, 0, 1]), 3)


def test_torch_scatters_documented_examples():
    """The examples of torch_scatter's docstrings (scatter, segment_coo, segment_csr: src (10, 6, 64) and an index
    broadcast in the first and last dims), their shapes as documented and their values against loops."""
    g = torch.Generator().manual_seed(11)
    src = torch.randn(10, 6, 64, generator=g, dtype=torch.float64)
    index = torch.tensor([0, 1, 0, 1, 2, 1])
    out = ts.scatter(src, index, dim=1, reduce="sum")
    assert out.shape == (10, 3, 64)
    loop = torch.zeros(10, 3, 64, dtype=torch.float64)
    for j, p in enumerate(index.tolist()):
        loop[:, p] += src[:, j]
    torch.testing.assert_close(out, loop)

    sorted_index = torch.tensor([0, 0, 1, 1, 1, 2]).view(1, -1)  # broadcasting in the first and last dim
    out = ts.segment_coo(src, sorted_index, reduce="sum")
    assert out.shape == (10, 3, 64)
    expected = torch.stack([src[:, 0:2].sum(1), src[:, 2:5].sum(1), src[:, 5:6].sum(1)], dim=1)
    torch.testing.assert_close(out, expected)
    indptr = torch.tensor([0, 2, 5, 6]).view(1, -1)
    out = ts.segment_csr(src, indptr, reduce="sum")
    assert out.shape == (10, 3, 64)
    torch.testing.assert_close(out, expected)
    # gather_* undo the segment layouts: each segment's value back at its rows
    torch.testing.assert_close(ts.gather_csr(out, indptr), out.index_select(1, sorted_index.view(-1)))
    torch.testing.assert_close(ts.gather_coo(out, sorted_index), out.index_select(1, sorted_index.view(-1)))
