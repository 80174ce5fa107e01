"""The segment core's kernels against slow loops (reference.py), on every device."""

import pytest
import reference as ref
import torch
import torch_ragged
from devices import DEVICES

FLOATING = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
SUMMABLE = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.uint32, *FLOATING, torch.complex64]
ORDERED = [torch.bool, torch.int8, torch.int16, torch.int64, torch.uint16, torch.uint64, *FLOATING]
# (first_idx, feature shape): empty segments, an empty batch, zero rows, multi-dim features.
LAYOUTS = [
    ([0, 2, 2, 5], (3,)),
    ([0, 0, 4, 4, 7, 8], ()),
    ([0], (2,)),
    ([0, 0, 0], (4,)),
    ([0, 1, 3, 6, 10], (2, 3)),
    ([0, 5], (0,)),
]


def tolerance(dtype):
    return {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(dtype, 1e-6)


def random_data(rows, feature, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand((rows, *feature), generator=generator) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn((rows, *feature), generator=generator).to(dtype)
    low = 0 if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -20
    return torch.randint(low, 20, (rows, *feature), generator=generator).to(dtype)


def assert_close(actual, expected, dtype):
    assert actual.dtype == dtype and actual.shape == expected.shape, (actual.dtype, actual.shape, expected.shape)
    if dtype.is_floating_point or dtype.is_complex:
        tol = tolerance(dtype)
        torch.testing.assert_close(actual.cpu().to(expected.dtype), expected, rtol=tol, atol=tol)
    else:
        assert torch.equal(actual.cpu(), expected.to(dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first_idx,feature", LAYOUTS)
@pytest.mark.parametrize("dtype", SUMMABLE)
def test_segment_sum(device, first_idx, feature, dtype):
    data = random_data(first_idx[-1], feature, dtype)
    expected = ref.segment_reduce(data, first_idx, "sum")
    assert_close(torch_ragged.segment_sum(data.to(device), torch.tensor(first_idx)), expected, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first_idx,feature", LAYOUTS)
@pytest.mark.parametrize("dtype", [*FLOATING, torch.complex128])
def test_segment_mean(device, first_idx, feature, dtype):
    data = random_data(first_idx[-1], feature, dtype)
    expected = ref.segment_reduce(data, first_idx, "mean")
    assert_close(torch_ragged.segment_mean(data.to(device), torch.tensor(first_idx)), expected, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first_idx,feature", LAYOUTS)
@pytest.mark.parametrize("dtype", ORDERED)
@pytest.mark.parametrize("largest", [True, False], ids=["max", "min"])
def test_segment_max_min(device, first_idx, feature, dtype, largest):
    data = random_data(first_idx[-1], feature, dtype)
    op = torch_ragged.segment_max if largest else torch_ragged.segment_min
    values, arg = op(data.to(device), torch.tensor(first_idx))
    expected_values, expected_arg = ref.segment_extremum(data, first_idx, largest)
    assert torch.equal(values.cpu(), expected_values) and values.dtype == dtype
    assert torch.equal(arg.cpu(), expected_arg) and arg.dtype == torch.long


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first_idx,feature", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_segment_softmax(device, first_idx, feature, dtype, log):
    data = random_data(first_idx[-1], feature, dtype) * 3
    op = torch_ragged.segment_log_softmax if log else torch_ragged.segment_softmax
    assert_close(op(data.to(device), torch.tensor(first_idx)), ref.segment_softmax(data, first_idx, log), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first_idx,feature", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bool, torch.int16, torch.float32, torch.complex128])
def test_segment_expand_and_ids(device, first_idx, feature, dtype):
    values = random_data(len(first_idx) - 1, feature, dtype)
    offsets = torch.tensor(first_idx, device=device)
    expanded = torch_ragged.segment_expand(values.to(device), offsets)
    assert expanded.dtype == dtype and torch.equal(expanded.cpu(), ref.segment_expand(values, first_idx))
    assert torch.equal(torch_ragged.segment_expand(values.to(device), offsets, num_rows=first_idx[-1]).cpu(),
                       ref.segment_expand(values, first_idx))
    ids = torch_ragged.segment_ids(offsets)
    assert ids.device == offsets.device and torch.equal(ids.cpu(), ref.segment_ids(first_idx))
    assert torch.equal(torch_ragged.segment_ids(offsets, first_idx[-1]).cpu(), ref.segment_ids(first_idx))


@pytest.mark.parametrize("device", DEVICES)
def test_int32_first_idx_and_list_first_idx(device):
    data = random_data(7, (3,), torch.float64).to(device)
    first_idx = [0, 3, 3, 7]
    expected = torch_ragged.segment_sum(data, torch.tensor(first_idx))
    assert torch.equal(torch_ragged.segment_sum(data, torch.tensor(first_idx, dtype=torch.int32)), expected)
    assert torch.equal(torch_ragged.segment_sum(data, first_idx), expected)
    if device == "cuda":  # first_idx may also live on the data's device
        assert torch.equal(torch_ragged.segment_sum(data, torch.tensor(first_idx, device=device)), expected)


# ---- segments spanning many row blocks (a huge segment split over threads), merged in order ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("feature", [(), (64,)])
def test_huge_segments_across_blocks(device, feature):
    generator = torch.Generator().manual_seed(3)
    rows = 150_000 if not feature else 9_000
    # one segment over most rows, a few small ones, empty ones in between
    first_idx = [0, 5, 5, rows - 40, rows - 40, rows - 1, rows]
    data = torch.randn((rows, *feature), generator=generator, dtype=torch.float64)
    data[rows // 2] = 50.0  # the max sits in a middle block
    data[rows // 2 + 7] = 50.0  # a tie in a later block: the first wins
    offsets = torch.tensor(first_idx)
    d = data.to(device)
    torch.testing.assert_close(torch_ragged.segment_sum(d, offsets).cpu(), ref_sum(data, first_idx))
    values, arg = torch_ragged.segment_max(d, offsets)
    assert torch.all(arg.cpu()[2] == rows // 2) and torch.all(values.cpu()[2] == 50.0)
    expected_softmax = torch.cat([torch.softmax(data[a:b], 0) for a, b in ref.segments_of(first_idx)])
    torch.testing.assert_close(torch_ragged.segment_softmax(d, offsets).cpu(), expected_softmax)


def ref_sum(data, first_idx):
    return torch.stack([data[a:b].sum(0) for a, b in ref.segments_of(first_idx)])


# ---- NaN, ties, infinities ----

@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates_and_first_nan_is_the_arg(device):
    nan, inf = float("nan"), float("inf")
    data = torch.tensor([[1.0, -inf], [nan, -inf], [nan, 2.0], [3.0, 2.0], [inf, -inf]], device=device)
    first_idx = torch.tensor([0, 4, 5])
    values, arg = torch_ragged.segment_max(data, first_idx)
    assert torch.isnan(values[0, 0]) and arg[0, 0] == 1  # the first NaN
    assert values[0, 1] == 2.0 and arg[0, 1] == 2  # the first of two equal maxima
    assert values[1, 0] == inf and values[1, 1] == -inf
    values, arg = torch_ragged.segment_min(data, first_idx)
    assert torch.isnan(values[0, 0]) and arg[0, 0] == 1 and values[0, 1] == -inf and arg[0, 1] == 0
    # sums: NaN propagates per column only
    sums = torch_ragged.segment_sum(data, first_idx).cpu()
    assert torch.isnan(sums[0, 0]) and sums[0, 1] == -inf


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_edge_cases_behave_like_torch_softmax(device):
    inf = float("inf")
    data = torch.tensor([-inf, -inf, 5.0, -inf, 3.0, inf, 1.0, 1e30], device=device)
    first_idx = [0, 2, 3, 5, 8]  # all -inf, a single element, one -inf, +inf and a huge value
    for log in (False, True):
        op = torch_ragged.segment_log_softmax if log else torch_ragged.segment_softmax
        expected = torch.cat([(torch.log_softmax if log else torch.softmax)(data[a:b].cpu(), 0)
                              for a, b in ref.segments_of(first_idx)])
        torch.testing.assert_close(op(data, torch.tensor(first_idx)).cpu(), expected, equal_nan=True)


# ---- determinism: bitwise identical across runs and thread counts ----

def test_bitwise_identical_across_thread_counts():
    generator = torch.Generator().manual_seed(7)
    first_idx = ref.random_first_idx(generator, 300, 2_000)
    data = torch.randn(int(first_idx[-1]), 16, generator=generator)
    ops = [torch_ragged.segment_sum, torch_ragged.segment_mean, torch_ragged.segment_softmax,
           torch_ragged.segment_log_softmax, lambda d, f: torch_ragged.segment_max(d, f).values]
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append([op(data, first_idx) for op in ops])
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b)
    data.requires_grad_(True)
    grads = [torch.autograd.grad(torch_ragged.segment_softmax(data, first_idx).square().sum(), data)[0]
             for _ in range(2)]
    assert torch.equal(grads[0], grads[1])


def test_sums_accumulate_half_in_float():
    data = torch.full((4096, 1), 1.0, dtype=torch.float16)  # 4096 exceeds float16's integer range
    data[0] = 2048.0  # in float16, 2048 + 1 rounds back to 2048
    sums = torch_ragged.segment_sum(data, torch.tensor([0, 4096]))
    # 2048 + 4095 = 6143 exactly in float, rounded once to float16 (6144); a float16 accumulator stays at 2048
    assert sums.item() == torch.tensor(6143.0).half().item() == 6144.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("magnitude", [1e4, 1e5, 1e7])
@pytest.mark.parametrize("layout", ["short scalar", "wide", "spanning blocks"])
def test_softmax_and_log_softmax_at_large_magnitudes_match_torch(device, dtype, magnitude, layout):
    """log_softmax is (x - max) - log(sum): x - (max + log(sum)) rounded log(sum) away at -1e7 in float32 (gave
    [-2, -1, 0] for [-1e7, -1e7 + 1, -1e7 + 2]). Each segment against torch's own (log_)softmax."""
    counts = {"short scalar": [3, 1, 5, 2] * 4, "wide": [4, 7, 1], "spanning blocks": [70000, 3, 40000]}[layout]
    width = {"short scalar": (), "wide": (5,), "spanning blocks": ()}[layout]
    generator = torch.Generator().manual_seed(int(magnitude))
    data = (-magnitude + torch.randn((sum(counts), *width), generator=generator, dtype=torch.float64) * 3).to(dtype)
    first_idx = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()])
    parts = data.split(counts)
    # float32 sums of 70,000 terms round differently in every implementation (torch's vectorised sum included):
    # both are held to the float64 result within the same tolerance; the bug was off by 0.4 absolute.
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for log in (False, True):
        op = torch_ragged.segment_log_softmax if log else torch_ragged.segment_softmax
        torch_op = torch.log_softmax if log else torch.softmax
        exact = torch.cat([torch_op(part.double(), 0) for part in parts]).to(dtype)
        torch_own = torch.cat([torch_op(part, 0) for part in parts])
        actual = op(data.to(device), first_idx).cpu()
        torch.testing.assert_close(actual, exact, **tolerance)
        torch.testing.assert_close(torch_own, exact, **tolerance)
    row = torch.tensor([[-1e7], [-1e7 + 1], [-1e7 + 2]], dtype=dtype)
    torch.testing.assert_close(torch_ragged.segment_log_softmax(row.to(device), [0, 3]).cpu(),
                               torch.log_softmax(row, 0))


@pytest.mark.parametrize("device", DEVICES)
def test_log_softmax_gradient_at_large_magnitudes_matches_torch(device):
    data = (-1e6 + torch.randn(40, 3, dtype=torch.float64)).to(device)
    counts = [5, 20, 15]
    first_idx = torch.tensor([0, 5, 25, 40])
    grad = torch.randn(40, 3, dtype=torch.float64).to(device)
    ours = data.clone().requires_grad_()
    torch_ragged.segment_log_softmax(ours, first_idx).backward(grad)
    theirs = data.clone().requires_grad_()
    torch.cat([torch.log_softmax(part, 0) for part in theirs.split(counts)]).backward(grad)
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_integer_mean_truncates_toward_zero_as_torch_scatter():
    data = torch.tensor([1, 2, 4, -3, -4, 7], dtype=torch.int32)
    first_idx = [0, 3, 5, 5, 6]
    expected = [int((1 + 2 + 4) / 3), int((-3 - 4) / 2), 0, 7]  # C's integer division: toward zero
    assert torch_ragged.segment_mean(data, first_idx).tolist() == expected
    assert torch_ragged.segment_mean(data, first_idx).dtype == torch.int32
    assert torch_ragged.segment_mean(data.abs().to(torch.uint8), first_idx).tolist() == [2, 3, 0, 7]


INTEGERS = [torch.uint8, torch.int8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64, torch.uint64]


def truncated_mean(total: int, count: int) -> int:
    """total / count rounded toward zero, in Python's unbounded integers."""
    quotient = abs(total) // count
    return quotient if total >= 0 else -quotient


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_means_over_counts_past_the_dtypes_range(device, dtype):
    """A row count cast to a narrow data type wrapped to 0 (SIGFPE at 256 int8 rows, 65,536 int16 rows) or to a
    negative count; a sum in the data type wrapped. Means are the 64-bit sum over the count, truncated toward zero,
    against Python's integers."""
    bits = torch.iinfo(dtype).bits
    rows = (1 << min(bits, 16)) + 3  # past the range of 8- and 16-bit counts
    signed = torch.iinfo(dtype).min < 0
    g = torch.Generator().manual_seed(bits)
    top = min(torch.iinfo(dtype).max, 100)
    data = torch.randint(-top if signed else 0, top + 1, (rows, 2), generator=g).to(dtype)
    data[:, 1] = top  # a column whose sum passes the data type's range (a constant mean)
    first_idx = [0, 200, rows - 1, rows]
    expected = [[truncated_mean(sum(int(v) for v in data[lo:hi, c].tolist()), hi - lo) for c in range(2)]
                for lo, hi in zip(first_idx[:-1], first_idx[1:], strict=True)]
    got = torch_ragged.segment_mean(data.to(device), torch.tensor(first_idx, device=device))
    assert got.dtype == dtype and got.cpu().tolist() == expected
    one = torch.zeros(200, 1, dtype=dtype)
    one[7] = 100
    assert torch_ragged.segment_mean(one.to(device), [0, 200]).item() == 0  # 100 / 200, not 100 / (int8) 200 = -1


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_ragged_tensor_mean_of_narrow_integer_members(dtype):
    r = torch_ragged.RaggedTensor.from_list([torch.ones(256, 2, dtype=dtype), torch.full((70_000, 2), 3, dtype=dtype)])
    assert r.mean().tolist() == [[1, 1], [3, 3]]


def _call_with_first_idx(op, first_idx):
    if op == "segment_ids":
        return torch_ragged.segment_ids(first_idx)
    if op == "segment_expand":
        return torch_ragged.segment_expand(torch.ones(2), first_idx)
    if op == "ragged_index_select":
        return torch_ragged.ragged_index_select(torch.ones(5), first_idx, [0])
    return getattr(torch_ragged, op)(torch.ones(5), first_idx)


@pytest.mark.parametrize("op", ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_softmax",
                                "segment_log_softmax", "segment_expand", "segment_ids", "ragged_index_select"])
def test_list_offsets_with_non_integers_are_refused_not_truncated(op):
    """torch.tensor([0, 2.5, 5], dtype=torch.long) reads [0, 2, 5]: the wrappers refuse it (and bools) instead."""
    for bad in ([0, 2.5, 5], [0, 2.0, 5], [False, True, True]):
        with pytest.raises(TypeError, match=f"torch_ragged.{op}: first_idx must hold integers"):
            _call_with_first_idx(op, bad)
    _call_with_first_idx(op, [0, 2, 5])  # ints are fine


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [1, 2, -1, -3])
def test_reductions_along_another_dim_match_per_slice_loops(device, dim):
    """dim= cuts another dim of data: the result equals a loop over the segments with torch's own reductions."""
    first_idx = [0, 2, 2, 5, 6]
    shape = [3, 4, 6]
    shape[dim] = first_idx[-1]
    data = random_data(shape[0], tuple(shape[1:]), torch.float64, seed=3).to(device)
    offsets = torch.tensor(first_idx, device=device)
    slices = [data.narrow(dim, a, b - a) for a, b in zip(first_idx[:-1], first_idx[1:], strict=True)]

    def stacked(values):
        return torch.stack(values, dim % data.dim())

    torch.testing.assert_close(torch_ragged.segment_sum(data, offsets, dim=dim), stacked([x.sum(dim) for x in slices]))
    mean = torch_ragged.segment_mean(data, offsets, dim=dim)
    torch.testing.assert_close(mean, stacked([x.mean(dim) if x.shape[dim] else x.sum(dim) for x in slices]))
    values, arg = torch_ragged.segment_max(data, offsets, dim=dim)
    for k, x in enumerate(slices):
        if x.shape[dim]:
            expected = x.max(dim)
            torch.testing.assert_close(values.select(dim, k), expected.values)
            assert torch.equal(arg.select(dim, k), expected.indices + first_idx[k])
        else:
            assert (arg.select(dim, k) == -1).all()
    values, _ = torch_ragged.segment_min(data, offsets, dim=dim)
    torch.testing.assert_close(values.select(dim, 0), slices[0].min(dim).values)
    softmax = torch_ragged.segment_softmax(data, offsets, dim=dim)
    torch.testing.assert_close(softmax, torch.cat([x.softmax(dim) for x in slices], dim))
    log_softmax = torch_ragged.segment_log_softmax(data, offsets, dim=dim)
    torch.testing.assert_close(log_softmax, torch.cat([x.log_softmax(dim) for x in slices], dim))
    grad, = torch.autograd.grad(torch_ragged.segment_sum(data.requires_grad_(), offsets, dim=dim).sum(), data)
    torch.testing.assert_close(grad, torch.ones_like(data))
    with pytest.raises(IndexError, match="torch_ragged.segment_sum: dim 3 is out of range for data of 3 dim"):
        torch_ragged.segment_sum(data, offsets, dim=3)
