"""Segmented scans (segment_cumsum / cumprod / cummax / cummin / logcumsumexp) and segment_arange: against a loop of
torch's own scans per segment (reference.py), at every level of the scan's plan (segments inside one chunk, across
chunks, across chunks of chunks), every dtype, both directions, exclusive; large magnitudes against torch; the same
bits whatever the thread count; autograd (gradcheck / gradgradcheck, zeros in cumprod), torch.compile, export and
TorchScript; bad input. The ops' opcheck samples are test_segment_autograd.py's segment_samples (shared with the
pt2 and export sweeps)."""

import pytest
import reference as ref
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged


def offsets(lengths):
    return torch.tensor([0, *torch.tensor(lengths, dtype=torch.long).cumsum(0).tolist()])


# Narrow rows use 32-row chunks: 5000 rows in one segment span three levels (32 x 32 = 1024 rows per level-1
# chunk); empty segments sit at the start, between and at the end; short segments straddle chunk edges.
LAYOUTS = {
    "short": [0, 3, 1, 0, 5, 2, 7, 0, 4, 1, 30, 33, 2, 0],
    "long": [0, 5000, 0, 3, 2100, 1, 0],
    "one": [70],
    "empty": [0, 0],
}


def random_data(rows, feature, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn((rows, *feature), generator=g, dtype=torch.float64).to(dtype) if not dtype.is_complex \
            else torch.randn((rows, *feature), generator=g, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (rows, *feature), generator=g).bool()
    return torch.randint(-5, 6, (rows, *feature), generator=g).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("feature", [(), (3,), (2, 40)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_cumsum_matches_torch_per_segment(device, layout, feature, reverse, exclusive):
    first_idx = offsets(LAYOUTS[layout])
    data = random_data(int(first_idx[-1]), feature, torch.float64)
    out = torch_ragged.segment_cumsum(data.to(device), first_idx.to(device), reverse=reverse, exclusive=exclusive)
    torch.testing.assert_close(out.cpu(), ref.segment_scan(data, first_idx, "cumsum", reverse, exclusive))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["short", "long"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_cumprod_matches_torch_per_segment(device, layout, reverse, exclusive):
    first_idx = offsets(LAYOUTS[layout])
    # factors near 1 keep 5000-row products finite; some exact zeros
    data = 1 + 0.01 * random_data(int(first_idx[-1]), (2,), torch.float64)
    data[::97] = 0
    out = torch_ragged.segment_cumprod(data.to(device), first_idx.to(device), reverse=reverse, exclusive=exclusive)
    torch.testing.assert_close(out.cpu(), ref.segment_scan(data, first_idx, "cumprod", reverse, exclusive))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["short", "long", "one"])
@pytest.mark.parametrize("reverse", [False, True])
def test_logcumsumexp_matches_torch_per_segment(device, layout, reverse):
    first_idx = offsets(LAYOUTS[layout])
    data = 3 * random_data(int(first_idx[-1]), (3,), torch.float64)
    data[5::13, 1] = -torch.inf
    out = torch_ragged.segment_logcumsumexp(data.to(device), first_idx.to(device), reverse=reverse)
    torch.testing.assert_close(out.cpu(), ref.segment_scan(data, first_idx, "logcumsumexp", reverse))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool, torch.float16])
def test_cummax_cummin_match_torch_per_segment(device, layout, largest, reverse, dtype):
    first_idx = offsets(LAYOUTS[layout])
    data = random_data(int(first_idx[-1]), (2,), dtype).to(dtype)
    if dtype.is_floating_point:
        data = data.round()  # ties: the later row wins, as torch.cummax
        data[7::50, 0] = torch.nan
    op = torch_ragged.segment_cummax if largest else torch_ragged.segment_cummin
    values, arg = op(data.to(device), first_idx.to(device), reverse=reverse)
    expected_values, expected_arg = ref.segment_cum_extremum(data, first_idx, largest, reverse)
    torch.testing.assert_close(values.cpu(), expected_values, equal_nan=True)
    assert torch.equal(arg.cpu(), expected_arg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.bool, torch.uint8, torch.int64])
def test_integer_scans_give_int64_as_torch(device, dtype):
    first_idx = offsets(LAYOUTS["long"])
    data = random_data(int(first_idx[-1]), (2,), dtype)
    for name, op in [("cumsum", torch_ragged.segment_cumsum), ("cumprod", torch_ragged.segment_cumprod)]:
        out = op(data.to(device), first_idx.to(device))
        assert out.dtype == torch.cumsum(data, 0).dtype == torch.long
        assert torch.equal(out.cpu(), ref.segment_scan(data, first_idx, name))  # integers: exact, wrapping as torch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.complex64])
def test_reduced_precision_and_complex_accumulate_wider(device, dtype):
    first_idx = offsets(LAYOUTS["short"])
    data = random_data(int(first_idx[-1]), (3,), dtype)
    out = torch_ragged.segment_cumsum(data.to(device), first_idx.to(device))
    assert out.dtype == dtype
    expected = ref.segment_scan(data, first_idx, "cumsum").to(dtype)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-2 if dtype.itemsize <= 2 else 1e-5, rtol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("magnitude", [1e4, 1e5, 1e6, 1e7])
def test_large_magnitudes_against_torch(device, magnitude):
    first_idx = offsets([0, 3000, 17, 1, 900])
    data = magnitude * random_data(int(first_idx[-1]), (2,), torch.float32, seed=3)
    members = [data[a:b] for a, b in zip(first_idx[:-1].tolist(), first_idx[1:].tolist(), strict=True)]
    cumsum = torch_ragged.segment_cumsum(data.to(device), first_idx.to(device)).cpu()
    torch.testing.assert_close(cumsum, torch.cat([m.double().cumsum(0) for m in members]).float(),
                               rtol=1e-4, atol=magnitude * 1e-4)
    lcse = torch_ragged.segment_logcumsumexp(data.to(device), first_idx.to(device)).cpu()
    assert torch.isfinite(lcse).all()  # exp(1e7) overflows; the stable form does not
    torch.testing.assert_close(lcse, torch.cat([torch.logcumsumexp(m, 0) for m in members]))


def test_the_same_bits_whatever_the_thread_count():
    first_idx = offsets([0, 200_000, 3, 70_001, *([5] * 2000)])
    data = random_data(int(first_idx[-1]), (), torch.float32, seed=4)
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            results.append([torch_ragged.segment_cumsum(data, first_idx, reverse=r).view(torch.int32)
                            for r in (False, True)] + [torch_ragged.segment_logcumsumexp(data, first_idx)
                                                        .view(torch.int32)])
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other, strict=True))


@pytest.mark.parametrize("device", DEVICES)
def test_dim_moves_the_segmented_dim(device):
    first_idx = torch.tensor([0, 2, 5])
    data = torch.arange(10.0, device=device).view(2, 5)
    out = torch_ragged.segment_cumsum(data, first_idx, dim=1)
    expected = torch.cat([data[:, :2].cumsum(1), data[:, 2:].cumsum(1)], 1)
    assert torch.equal(out, expected)
    values, arg = torch_ragged.segment_cummax(data.flip(1), first_idx, dim=-1)
    assert torch.equal(values, torch.tensor([[4.0, 4, 2, 2, 2], [9, 9, 7, 7, 7]], device=device))
    assert torch.equal(arg, torch.tensor([[0, 0, 2, 2, 2]] * 2, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_segment_arange(device):
    for lengths in ([0, 3, 0, 1, 40, 0], [], [5]):
        first_idx = offsets(lengths).to(device)
        assert torch.equal(torch_ragged.segment_arange(first_idx).cpu(), ref.segment_arange(first_idx.cpu()))
        rows = int(first_idx[-1])
        assert torch.equal(torch_ragged.segment_arange(first_idx, rows).cpu(), ref.segment_arange(first_idx.cpu()))
    assert torch.equal(torch_ragged.segment_arange([0, 2, 3]), torch.tensor([0, 1, 0]))


# ---- autograd ----

def _first_idx(device):
    return torch.tensor([0, 3, 3, 7, 8], device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_cumsum_and_cumprod_are_twice_differentiable(device, reverse, exclusive):
    first_idx = _first_idx(device)
    data = torch.randn(8, 2, dtype=torch.float64, device=device, requires_grad=True)
    for op in (ops.segment_cumsum, ops.segment_cumprod):
        assert gradcheck(lambda d, op=op: op(d, first_idx, reverse, exclusive), (data,))
        assert gradgradcheck(lambda d, op=op: op(d, first_idx, reverse, exclusive), (data,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("zeros", [(0,), (1, 5), (4, 5, 6), (0, 1, 2)])
def test_cumprod_gradients_with_zeros_match_torch(device, reverse, exclusive, zeros):
    first_idx = _first_idx(device)
    data = torch.randn(8, 2, dtype=torch.float64, device=device)
    data[list(zeros), 0] = 0
    data.requires_grad_(True)

    def ours(d):
        return ops.segment_cumprod(d, first_idx, reverse, exclusive)

    def torch_per_segment(d):
        return ref.segment_scan_differentiable(d, first_idx.cpu(), "cumprod", reverse, exclusive)

    assert gradcheck(ours, (data,))
    assert gradgradcheck(ours, (data,))
    grad_out = torch.randn(8, 2, dtype=torch.float64, device=device)
    (ours_grad,) = torch.autograd.grad(ours(data), data, grad_out, create_graph=True)
    (torch_grad,) = torch.autograd.grad(torch_per_segment(data), data, grad_out, create_graph=True)
    torch.testing.assert_close(ours_grad, torch_grad)
    second = torch.randn_like(data)
    torch.testing.assert_close(torch.autograd.grad(ours_grad, data, second)[0],
                               torch.autograd.grad(torch_grad, data, second)[0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reverse", [False, True])
def test_logcumsumexp_and_cummax_gradients(device, reverse):
    first_idx = _first_idx(device)
    data = torch.randn(8, 2, dtype=torch.float64, device=device, requires_grad=True)
    assert gradcheck(lambda d: ops.segment_logcumsumexp(d, first_idx, reverse), (data,))
    assert gradgradcheck(lambda d: ops.segment_logcumsumexp(d, first_idx, reverse), (data,))
    for op in (ops.segment_cummax, ops.segment_cummin):
        assert gradcheck(lambda d, op=op: op(d, first_idx, reverse)[0], (data,))
        assert gradgradcheck(lambda d, op=op: op(d, first_idx, reverse)[0], (data,))
    grad_out = torch.randn(8, 2, dtype=torch.float64, device=device)
    for largest in (True, False):
        op = ops.segment_cummax if largest else ops.segment_cummin
        (ours,) = torch.autograd.grad(op(data, first_idx, reverse)[0], data, grad_out)
        (theirs,) = torch.autograd.grad(
            ref.segment_cum_extremum_differentiable(data, first_idx.cpu(), largest, reverse), data, grad_out)
        torch.testing.assert_close(ours, theirs)


def test_undefined_gradients_stay_undefined():
    data = torch.randn(5, requires_grad=True)
    values, arg = ops.segment_cummax(data, torch.tensor([0, 2, 5]), False)
    assert arg.grad_fn is None and not arg.requires_grad
    assert torch.autograd.grad(values.sum(), data)[0].shape == data.shape


def test_opcheck_of_integer_data_promoted_to_int64():
    # the other samples are segment_samples'; integer data stays out of those (the bad-input fuzz takes an integer
    # tensor there for an index and expects a float one to be refused)
    first_idx = torch.tensor([0, 2, 2, 5])
    for op in (ops.segment_cumsum, ops.segment_cumprod):
        opcheck(op, (torch.arange(5, dtype=torch.int32), first_idx, False, True))


def test_compile_fullgraph_and_export():
    def model(data, first_idx):
        positions = torch_ragged.segment_arange(first_idx, data.shape[0])
        running = torch_ragged.segment_cumsum(data, first_idx, exclusive=True)
        return running + positions.unsqueeze(1), torch_ragged.segment_cummax(data, first_idx).values

    data, first_idx = torch.randn(9, 2), torch.tensor([0, 4, 9])
    expected = model(data, first_idx)
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for got, want in zip(compiled(data, first_idx), expected, strict=True):
        torch.testing.assert_close(got, want)
    class Model(torch.nn.Module):
        def forward(self, data, first_idx):
            return model(data, first_idx)

    exported = torch.export.export(Model(), (data, first_idx))
    for got, want in zip(exported.module()(data, first_idx), expected, strict=True):
        torch.testing.assert_close(got, want)


def test_torchscript_calls_the_ops():
    @torch.jit.script
    def scripted(data: torch.Tensor, first_idx: torch.Tensor):
        return torch.ops.torch_ragged.segment_cumsum(data, first_idx, True, False)

    data, first_idx = torch.randn(6), torch.tensor([0, 1, 6])
    assert torch.equal(scripted(data, first_idx), torch_ragged.segment_cumsum(data, first_idx, reverse=True))


# ---- bad input ----

@pytest.mark.parametrize("call, error, message", [
    (lambda: torch_ragged.segment_cumsum(torch.ones(4), torch.tensor([0, 2, 3])), ValueError,
     "torch_ragged.segment_cumsum: first_idx must run from 0 to data.size(0) = 4"),
    (lambda: torch_ragged.segment_cumprod(torch.ones(4), torch.tensor([0, 3, 2, 4])), ValueError,
     "torch_ragged.segment_cumprod: first_idx must be non-decreasing"),
    (lambda: torch_ragged.segment_logcumsumexp(torch.ones(4, dtype=torch.long), torch.tensor([0, 4])), TypeError,
     "torch_ragged.segment_logcumsumexp: data must have a floating dtype"),
    (lambda: torch_ragged.segment_cummax(torch.ones(4, dtype=torch.complex64), torch.tensor([0, 4])), TypeError,
     "torch_ragged.segment_cummax: data must have a real dtype"),
    (lambda: torch_ragged.segment_cumsum(torch.tensor(1.0), torch.tensor([0, 1])), ValueError,
     "torch_ragged.segment_cumsum: data must have at least 1 dim"),
    (lambda: torch_ragged.segment_cumsum(torch.ones(4), torch.tensor([0.0, 4.0])), TypeError,
     "torch_ragged.segment_cumsum: first_idx"),
    (lambda: torch_ragged.segment_arange(torch.tensor([0, 2, 5]), 4), ValueError, "torch_ragged.segment_arange"),
    (lambda: torch_ragged.segment_arange(torch.tensor([], dtype=torch.long)), ValueError,
     "torch_ragged.segment_arange: first_idx needs at least 1 entry"),
])
def test_bad_input_raises_naming_the_op(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call()


# ---- RaggedTensor ----

@pytest.mark.parametrize("device", DEVICES)
def test_ragged_tensor_scans_along_the_ragged_dim_and_feature_dims(device):
    members = [torch.randn(n, 3, device=device) for n in (4, 0, 1, 6)]
    r = torch_ragged.RaggedTensor.from_list(members)
    for name in ("cumsum", "cumprod", "logcumsumexp"):
        along = getattr(r, name)(1)
        for got, member in zip(along.list(), members, strict=True):
            torch.testing.assert_close(got, getattr(torch, name)(member, 0))
        feature = getattr(r, name)(-1)
        for got, member in zip(feature.list(), members, strict=True):
            torch.testing.assert_close(got, getattr(torch, name)(member, 1))
    for name in ("cummax", "cummin"):
        values, indices = getattr(r, name)(1)
        for got_values, got_indices, member in zip(values.list(), indices.list(), members, strict=True):
            expected = getattr(torch, name)(member, 0)
            assert torch.equal(got_values, expected.values) and torch.equal(got_indices, expected.indices)
    # torch functions dispatch to the methods (dtype= casts first, as torch's)
    torch.testing.assert_close(torch.cumsum(r, 1).values, r.cumsum(1).values)
    assert torch.cumsum(r, dim=1, dtype=torch.float64).values.dtype == torch.float64
    ints = torch_ragged.RaggedTensor.from_list([torch.tensor([1, 2], dtype=torch.int32, device=device)])
    assert ints.cumsum(1).values.dtype == torch.long  # as torch.cumsum


def test_ragged_tensor_scan_errors_name_the_method():
    r = torch_ragged.RaggedTensor.from_list([torch.randn(2, 3), torch.randn(5, 3)])
    with pytest.raises(TypeError, match=r"RaggedTensor.cumsum: dim is required"):
        r.cumsum(None)
    with pytest.raises(ValueError, match=r"RaggedTensor.cummax: dim 0"):
        r.cummax(0)
    images = torch_ragged.RaggedTensor.from_list([torch.randn(2, 3, 4), torch.randn(5, 3, 4)], ragged_dims=2)
    with pytest.raises(ValueError, match=r"RaggedTensor.cumsum: a scan runs along one ragged dim"):
        images.cumsum((1, 2))
