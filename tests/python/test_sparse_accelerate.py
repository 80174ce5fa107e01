"""torch_ragged.sparse.accelerate(): torch's own sparse ops on this library's kernels. Every result is compared
with torch's own, computed in the same test with the acceleration off (layout, coalesced flag, dtype, values,
gradients); the kernels are shown to be this library's (the dispatcher's registration, and errors that only they
raise); inputs they do not take keep torch's behaviour and exception types."""

import functools
import subprocess
import sys
import threading

import pytest
import torch
import torch_ragged
from concurrency import run_for
from devices import DEVICES
from torch.autograd import gradcheck

sparse = torch_ragged.sparse


@pytest.fixture(autouse=True)
def off_after_each_test():
    # These tests use small tensors, which the accelerated CPU kernels hand to torch's own by default (faster
    # below 128 entries): 0 sends every call to this library's kernels, the ones under test here.
    default = torch.ops.torch_ragged.accelerate_torch_sparse_from(0)
    yield
    sparse.accelerate(False)
    torch.ops.torch_ragged.accelerate_torch_sparse_from(default)


def test_small_cpu_inputs_keep_torchs_kernels_unless_their_indices_cannot_be_trusted():
    """By default a CPU call with fewer than 128 entries runs torch's own kernel (bit for bit torch's result), one
    with more runs this library's; a small tensor flagged coalesced whose indices are not is still refused by name
    (torch's kernel would read out of bounds), and a negative dim reaches torch's softmax backward wrapped."""
    assert torch.ops.torch_ragged.accelerate_torch_sparse_from(128) == 0  # the fixture's setting
    small = random_sparse((6, 5), 2, 12, seed=3, coalesced=True)
    dense = torch.randn(5, 4, dtype=torch.float64)
    torch_results = [torch.mm(small, dense), torch.addmm(torch.ones(6, 4, dtype=torch.float64), small, dense),
                     torch.sparse.softmax(small, 1).values(), torch.sparse.sum(small, 1).values(), small.to_dense()]
    with sparse.accelerate():
        assert not sparse_kernels_ran_for(small, dense)
        ours = [torch.mm(small, dense), torch.addmm(torch.ones(6, 4, dtype=torch.float64), small, dense),
                torch.sparse.softmax(small, 1).values(), torch.sparse.sum(small, 1).values(), small.to_dense()]
        for theirs, got in zip(torch_results, ours, strict=True):
            assert torch.equal(theirs, got)
        large = random_sparse((40, 30), 2, 300, seed=4, coalesced=True)
        assert sparse_kernels_ran_for(large, torch.randn(30, 4, dtype=torch.float64))
        lying = torch.sparse_coo_tensor([[0, 7], [0, 1]], [1.0, 2.0], (3, 3), is_coalesced=True, check_invariants=False)
        with pytest.raises(ValueError, match=r"aten::mm\): the sparse operand is flagged coalesced"):
            torch.mm(lying, torch.ones(3, 2))

        def gradient(dim):
            values = small.values().clone().requires_grad_()
            out = torch.sparse.log_softmax(torch.sparse_coo_tensor(small.indices(), values, small.shape), dim)
            (out.values() * torch.arange(out._nnz(), dtype=values.dtype).sin()).sum().backward()
            return values.grad

        torch.testing.assert_close(gradient(-2), gradient(0))  # torch's own backward alone does not wrap -2
    with pytest.raises(ValueError, match="accelerate_torch_sparse_from: entries must be >= 0"):
        torch.ops.torch_ragged.accelerate_torch_sparse_from(-1)


def sparse_kernels_ran_for(s: torch.Tensor, dense: torch.Tensor) -> bool:
    """Whether torch.mm(s, dense) ran this library's kernel: its profile names the segment core's gather-sum."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        torch.mm(s, dense)
    return any("segment_gather_sum" in event.name for event in profile.events())


def registered_from_here(op: str) -> bool:
    return "accelerate.cpp" in torch._C._dispatch_dump(op)


def random_sparse(shape, sparse_dim, nnz, dtype=torch.float64, seed=0, coalesced=False, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g) for d in range(sparse_dim)])
    values = torch.randn(nnz, *shape[sparse_dim:], generator=g, dtype=torch.float64)
    if dtype == torch.bool:
        values = values > 0
    else:
        values = (values * 4).to(dtype) if not dtype.is_floating_point and not dtype.is_complex else values.to(dtype)
    s = torch.sparse_coo_tensor(indices, values, shape, check_invariants=True).to(device)
    return s.coalesce() if coalesced else s


def both_ways(fn):
    """fn() with torch alone and with the acceleration on."""
    sparse.accelerate(False)
    alone = fn()
    with sparse.accelerate():
        accelerated = fn()
    return alone, accelerated


def assert_same(alone, accelerated, exact=False):
    assert type(alone) is type(accelerated)
    if isinstance(alone, tuple | list):
        for a, b in zip(alone, accelerated, strict=True):
            assert_same(a, b, exact)
        return
    if alone is None:
        assert accelerated is None
        return
    assert accelerated.layout == alone.layout and accelerated.dtype == alone.dtype
    assert accelerated.shape == alone.shape and accelerated.device == alone.device
    if alone.layout == torch.sparse_coo:
        assert accelerated.is_coalesced() == alone.is_coalesced()
        assert accelerated.sparse_dim() == alone.sparse_dim()
        if alone.is_coalesced():
            assert torch.equal(accelerated._indices(), alone._indices())
            alone, accelerated = alone._values(), accelerated._values()
        else:
            alone, accelerated = alone.to_dense(), accelerated.to_dense()
    if exact or not (alone.dtype.is_floating_point or alone.dtype.is_complex):
        assert torch.equal(accelerated, alone)
    elif alone.dtype in (torch.float16, torch.bfloat16):
        # duplicates are summed in float and rounded once here; torch rounds after every addition
        torch.testing.assert_close(accelerated.double(), alone.double(), rtol=2e-2, atol=1e-2)
    else:
        torch.testing.assert_close(accelerated, alone)


def assert_same_behaviour(fn):
    """fn's result (or exception type) with the acceleration on is torch's alone."""
    try:
        expected = (fn(), None)
    except Exception as error:  # noqa: BLE001 (the exception type is what is compared)
        expected = (None, type(error))
    with sparse.accelerate():
        if expected[1] is None:
            assert_same(expected[0], fn())
        else:
            with pytest.raises(expected[1]):
                fn()


def out_of_range_coalesce_raises() -> bool:
    """Whether x.coalesce() runs this library's kernel: only it refuses an index out of range (torch's returns
    the index as it is)."""
    out_of_range = torch.sparse_coo_tensor([[0, 7]], [1.0, 2.0], (3,), check_invariants=False)
    try:
        out_of_range.coalesce()
    except IndexError:
        return True
    return False


ACCELERATED_OPS = ("aten::_coalesce", "aten::_to_dense", "aten::_sparse_softmax", "aten::_sparse_log_softmax",
                   "aten::_sparse_softmax_backward_data", "aten::_sparse_log_softmax_backward_data",
                   "aten::_sparse_sum.dim", "aten::mm", "aten::addmm", "aten::bmm", "aten::index_select",
                   "aten::sparse_mask")


def test_on_off_and_as_a_context_manager_switch_the_kernels_that_run():
    assert not sparse.is_accelerated() and not out_of_range_coalesce_raises()
    sparse.accelerate()
    assert sparse.is_accelerated() and out_of_range_coalesce_raises()
    with sparse.accelerate(False):
        assert not sparse.is_accelerated() and not out_of_range_coalesce_raises()
        with sparse.accelerate():
            assert sparse.is_accelerated() and out_of_range_coalesce_raises()
        assert not out_of_range_coalesce_raises()
    assert sparse.is_accelerated()
    sparse.accelerate(False)
    assert not sparse.is_accelerated() and not out_of_range_coalesce_raises()


OFF_CALLS = """
import torch
g = torch.Generator().manual_seed(11)
indices = torch.stack([torch.randint(0, n, (30,), generator=g) for n in (7, 6)])
s = torch.sparse_coo_tensor(indices, torch.randn(30, generator=g, dtype=torch.float64), (7, 6))
d = torch.randn(6, 3, generator=g, dtype=torch.float64)
results = [s.coalesce(), s.to_dense(), torch.sparse.softmax(s, 1), torch.sparse.log_softmax(s, 0),
           torch.sparse.sum(s, 1), s @ d, torch.addmm(torch.ones(7, 3, dtype=torch.float64), s, d),
           s.index_select(0, torch.tensor([2, 2, 0])), torch.ones(7, 6, dtype=torch.float64).sparse_mask(s.coalesce()),
           torch.bmm(torch.stack([s, s]).coalesce(), torch.stack([d, d]))]
"""


def test_the_kernels_stay_registered_and_off_is_torchs_own_kernel(tmp_path):
    """Registered once for the process (no dispatcher change while other threads call); off, each kernel calls the
    torch kernel it replaced: the results are those of a process that never imported this library, bit for bit."""
    sparse.accelerate()
    sparse.accelerate(False)
    for op in ACCELERATED_OPS:
        assert registered_from_here(op), op
    saved = tmp_path / "alone.pt"
    subprocess.run([sys.executable, "-c", OFF_CALLS + f"torch.save(results, {str(saved)!r})"], check=True)
    alone = torch.load(saved)
    scope = {}
    exec(OFF_CALLS, scope)  # noqa: S102 (the same calls, here: the kernels registered, switched off)
    for a, b in zip(alone, scope["results"], strict=True):
        assert_same(a, b, exact=True)


def test_the_kernels_are_this_librarys():
    out_of_range = torch.sparse_coo_tensor([[0, 7]], [1.0, 2.0], (3,), check_invariants=False)
    with sparse.accelerate(), pytest.raises(IndexError, match=r"torch_ragged.sparse_coalesce: indices\[0\]\[1\] = 7"):
        out_of_range.coalesce()


COALESCE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.int64,
                   torch.int32, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", COALESCE_DTYPES)
@pytest.mark.parametrize("shape,sparse_dim,nnz", [((6, 5), 2, 40), ((4, 3, 2), 2, 20), ((7,), 1, 30),
                                                  ((3, 4), 2, 0), ((5, 2, 3), 1, 12)])
def test_coalesce_and_to_dense_match_torch(device, dtype, shape, sparse_dim, nnz):
    s = random_sparse(shape, sparse_dim, nnz, dtype, device=device)
    assert_same(*both_ways(lambda: s.coalesce()))  # sums of floats: torch adds duplicates in another order
    assert_same(*both_ways(lambda: s.to_dense()))
    assert_same(*both_ways(lambda: s.coalesce().to_dense()))


def test_to_dense_keeps_torchs_refusal_of_a_dtype():
    s = random_sparse((3, 3), 2, 4)
    with sparse.accelerate(), pytest.raises(RuntimeError, match="dtype argument is not supported"):
        torch.ops.aten._to_dense(s, torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,sparse_dim", [((6, 5), 2), ((4, 3, 5), 2), ((5, 4, 3), 3), ((8,), 1)])
@pytest.mark.parametrize("coalesced", [True, False])
def test_softmax_log_softmax_and_their_gradients_match_torch(device, shape, sparse_dim, coalesced):
    s = random_sparse(shape, sparse_dim, 25, seed=1, coalesced=coalesced, device=device) * 100
    for op in (torch.sparse.softmax, torch.sparse.log_softmax):
        for dim in range(-len(shape), len(shape)):
            assert_same(*both_ways(lambda op=op, dim=dim: op(s, dim)))

            positive_dim = dim % len(shape)

            def forward_backward(op=op, dim=positive_dim):
                # torch's own log_softmax backward does not wrap a negative dim (its gradient for dim=-2 is not
                # dim=0's), so the gradients are compared at the positive dim; test_negative_dims_... below
                values = s.coalesce().values().clone().requires_grad_()
                x = torch.sparse_coo_tensor(s.coalesce().indices(), values, s.shape)
                out = op(x, dim)
                weight = torch.sin(torch.arange(out.values().numel(), dtype=values.dtype, device=device))
                (out.values().flatten() * weight).sum().backward()
                return out, values.grad

            assert_same(*both_ways(forward_backward))


def test_softmax_at_large_magnitudes_and_gradcheck_while_accelerated():
    s = random_sparse((20, 30), 2, 200, seed=2, coalesced=True) * 1e6
    for op in (torch.sparse.softmax, torch.sparse.log_softmax):
        for dim in (0, 1):
            alone, accelerated = both_ways(lambda op=op, dim=dim: op(s, dim))
            assert torch.isfinite(accelerated.values()).all()
            assert_same(alone, accelerated)
    indices = s.indices()
    with sparse.accelerate():
        assert gradcheck(lambda v: torch.sparse.softmax(torch.sparse_coo_tensor(indices, v, s.shape), 1).to_dense(),
                         (s.values()[:].clone().div(1e6).requires_grad_(),))


def test_softmax_backward_with_a_gradient_on_another_pattern():
    s = random_sparse((6, 5), 2, 12, seed=3, coalesced=True)
    out = torch.sparse.softmax(s, 1)
    grad = random_sparse((6, 5), 2, 9, seed=4, coalesced=True)  # some entries on out's pattern, some not
    for backward in (torch.ops.aten._sparse_softmax_backward_data, torch.ops.aten._sparse_log_softmax_backward_data):
        assert_same(*both_ways(lambda backward=backward: backward(grad, out, 1, s)))


def test_softmax_keeps_torchs_refusals_on_the_cpu():
    half = random_sparse((4, 4), 2, 6, torch.float16, coalesced=True)
    for fn, error in ((lambda: torch.sparse.softmax(half, 0), NotImplementedError),
                      (lambda: torch.ops.aten._sparse_softmax(half.double(), 0, True), RuntimeError)):
        with pytest.raises(error) as alone:
            fn()
        with sparse.accelerate(), pytest.raises(error) as accelerated:
            fn()
        assert type(alone.value) is type(accelerated.value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64])
def test_sparse_sum_over_dims_matches_torch(device, dtype):
    s = random_sparse((5, 4, 3, 2), 3, 30, dtype, seed=5, device=device)
    for dim in ([0], [1], [2], [3], [0, 2], [1, 3], [0, 1, 2], [0, 1, 2, 3], [-1], [2, 1]):
        assert_same(*both_ways(lambda dim=dim: torch.sparse.sum(s, dim)))
    assert_same(*both_ways(lambda: torch.sparse.sum(s)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("coalesced", [True, False])
def test_mm_of_sparse_with_dense_and_sparse_matches_torch_with_gradients(device, dtype, coalesced):
    a = random_sparse((9, 7), 2, 30, dtype, seed=6, coalesced=coalesced, device=device)
    b = random_sparse((7, 5), 2, 20, dtype, seed=7, coalesced=coalesced, device=device)
    d = torch.randn(7, 4, dtype=dtype, device=device)
    for fn in (lambda: torch.mm(a, d), lambda: a @ d, lambda: torch.sparse.mm(a, d), lambda: torch.mm(a, b)):
        assert_same(*both_ways(fn))

    def forward_backward():
        values = a.coalesce().values().clone().requires_grad_()
        dense = d.clone().requires_grad_()
        out = torch.sparse.mm(torch.sparse_coo_tensor(a.coalesce().indices(), values, a.shape), dense)
        out.pow(2).sum().backward()
        return out, values.grad, dense.grad

    assert_same(*both_ways(forward_backward))


def test_mm_arguments_the_kernels_do_not_take_keep_torchs_behaviour():
    hybrid = random_sparse((4, 3, 2), 2, 5, seed=8)
    complex_matrix = random_sparse((4, 3), 2, 5, torch.complex128, seed=9)
    integer = random_sparse((4, 3), 2, 5, torch.int64, seed=10)
    d = torch.randn(3, 2, dtype=torch.float64)
    assert_same(*both_ways(lambda: torch.mm(complex_matrix, d.to(torch.complex128))))
    for fn in (lambda: torch.mm(hybrid, d), lambda: torch.mm(integer, d), lambda: torch.mm(complex_matrix, d),
               lambda: torch.mm(random_sparse((4, 3), 2, 5), torch.randn(4, 2, dtype=torch.float64))):
        assert_same_behaviour(fn)


def test_negative_dims_give_the_gradient_of_the_positive_dim():
    """torch's own _sparse_log_softmax_backward_data takes dim=-2 of a matrix for something else than dim 0 (its
    gradient differs from dim 0's); the accelerated kernel wraps the dim as the forward does."""
    s = random_sparse((6, 5), 2, 25, seed=1, coalesced=True) * 100

    def gradient(dim):
        values = s.values().clone().requires_grad_()
        out = torch.sparse.log_softmax(torch.sparse_coo_tensor(s.indices(), values, s.shape), dim)
        (out.values() * torch.sin(torch.arange(out._nnz(), dtype=values.dtype))).sum().backward()
        return values.grad

    with sparse.accelerate():
        torch.testing.assert_close(gradient(-2), gradient(0))
        torch.testing.assert_close(gradient(-1), gradient(1))
    dense_values = s.to_dense().requires_grad_()
    masked = dense_values.masked_fill(s.to_dense() == 0, float("-inf"))
    weight = torch.sparse_coo_tensor(s.indices(), torch.sin(torch.arange(s._nnz(), dtype=torch.float64)), s.shape)
    expected = torch.autograd.grad((torch.log_softmax(masked, 0).nan_to_num(0, 0, 0) * weight.to_dense()).sum(),
                                   dense_values)[0]
    with sparse.accelerate():
        torch.testing.assert_close(gradient(-2), expected[tuple(s.indices())])


def test_sparse_sum_keeps_torchs_exception_types_for_bad_dims():
    s = random_sparse((4, 3, 2), 2, 6, seed=11)
    for dim, error in (([0, 0], RuntimeError), ([1, -2], RuntimeError), (5, IndexError), ([-4], IndexError)):
        with pytest.raises(error):
            torch.sparse.sum(s, dim)
        with sparse.accelerate(), pytest.raises(error):
            torch.sparse.sum(s, dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [True, False])
def test_addmm_matches_torch_with_gradients(device, coalesced):
    a = random_sparse((9, 7), 2, 30, seed=12, coalesced=coalesced, device=device)
    d = torch.randn(7, 4, dtype=torch.float64, device=device)
    for bias in (torch.randn(9, 4, dtype=torch.float64, device=device), torch.randn(4, dtype=torch.float64,
                                                                                   device=device)):
        for beta, alpha in ((1, 1), (0.5, -2.0), (0, 3)):
            assert_same(*both_ways(lambda bias=bias, beta=beta, alpha=alpha: torch.addmm(bias, a, d, beta=beta,
                                                                                        alpha=alpha)))
            assert_same(*both_ways(lambda bias=bias, beta=beta, alpha=alpha: torch.sparse.addmm(
                bias, a, d, beta=beta, alpha=alpha)))
    nan_bias = torch.full((9, 4), float("nan"), dtype=torch.float64, device=device)
    assert_same(*both_ways(lambda: torch.addmm(nan_bias, a, d, beta=0)))  # beta = 0 ignores NaN

    def forward_backward():
        values = a.coalesce().values().clone().requires_grad_()
        dense = d.clone().requires_grad_()
        bias = torch.linspace(-1, 1, 36, dtype=torch.float64, device=device).view(9, 4).requires_grad_()
        out = torch.addmm(bias, torch.sparse_coo_tensor(a.coalesce().indices(), values, a.shape), dense, beta=0.5)
        out.pow(2).sum().backward()
        return values.grad, dense.grad, bias.grad

    assert_same(*both_ways(forward_backward))


def test_addmm_arguments_the_kernel_does_not_take_keep_torchs_behaviour():
    a = random_sparse((4, 3), 2, 5, seed=13)
    d = torch.randn(3, 2, dtype=torch.float64)
    for fn in (lambda: torch.addmm(torch.zeros(4, 2), a, d),  # dtypes differ
               lambda: torch.addmm(torch.zeros(5, 2, dtype=torch.float64), a, d),  # bias does not broadcast
               lambda: torch.addmm(torch.zeros(4, 2, dtype=torch.int64), a.long(), d.long())):
        assert_same_behaviour(fn)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [True, False])
@pytest.mark.parametrize("shape,sparse_dim", [((6, 5), 2), ((4, 3, 2), 2), ((7,), 1)])
def test_sparse_mask_matches_torch(device, coalesced, shape, sparse_dim):
    mask = random_sparse(shape, sparse_dim, 12, seed=14, coalesced=coalesced, device=device)
    dense = torch.randn(shape, dtype=torch.float64, device=device)
    assert_same(*both_ways(lambda: dense.sparse_mask(mask)), exact=True)
    assert_same(*both_ways(lambda: dense.long().sparse_mask(mask)), exact=True)
    for other_coalesced in (True, False):  # a sparse self: its values read at the mask's entries, zero elsewhere
        other = random_sparse(shape, sparse_dim, 9, seed=15, coalesced=other_coalesced, device=device)
        assert_same(*both_ways(lambda other=other: other.sparse_mask(mask)))
        assert_same(*both_ways(lambda other=other: other.sparse_mask(mask.coalesce())))
    hybrid_self = random_sparse((*shape, 3), sparse_dim, 9, seed=16, coalesced=True, device=device)
    hybrid_mask = random_sparse((*shape, 3), sparse_dim, 5, seed=17, coalesced=coalesced, device=device)
    assert_same(*both_ways(lambda: hybrid_self.sparse_mask(hybrid_mask)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [True, False])
def test_bmm_matches_torch_with_gradients(device, coalesced):
    s = random_sparse((3, 5, 4), 3, 25, seed=18, coalesced=coalesced, device=device)
    d = torch.randn(3, 4, 2, dtype=torch.float64, device=device)
    assert_same(*both_ways(lambda: torch.bmm(s, d)))

    def forward_backward():
        values = s.coalesce().values().clone().requires_grad_()
        dense = d.clone().requires_grad_()
        torch.bmm(torch.sparse_coo_tensor(s.coalesce().indices(), values, s.shape), dense).pow(2).sum().backward()
        return values.grad, dense.grad

    assert_same(*both_ways(forward_backward))
    for fn in (lambda: torch.bmm(s, d.float()), lambda: torch.bmm(s, torch.randn(2, 4, 2, dtype=torch.float64)),
               lambda: torch.bmm(s.long(), d.long())):
        assert_same_behaviour(fn)


def test_torch_compile_of_torchs_own_calls_while_accelerated():
    s = random_sparse((6, 5), 2, 12, seed=19)
    d = torch.randn(5, 3, dtype=torch.float64)

    def model(s, d):
        return torch.sparse.mm(s, d).relu() + torch.sparse.softmax(s, 1).to_dense().sum(1, keepdim=True)

    expected = model(s, d)
    torch._dynamo.reset()
    with sparse.accelerate():
        torch.testing.assert_close(torch.compile(model)(s, d), expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [True, False])
def test_index_select_matches_torch(device, coalesced):
    s = random_sparse((5, 6, 3), 2, 20, seed=20, coalesced=coalesced, device=device)
    for dim, index in ((0, [3, 0, 3]), (1, [5, -1, 0]), (-1, [2, 0]), (2, [1, 1, 1, 0]), (0, [])):
        position = torch.tensor(index, dtype=torch.long, device=device)
        assert_same(*both_ways(lambda dim=dim, position=position: s.index_select(dim, position)))

    # (torch has no backward of index_select for a sparse self: its formula calls index_add_ on one)
    for index in (torch.tensor([9]), torch.tensor([[0]]), torch.tensor([0.0]), torch.tensor(1)):
        with pytest.raises(IndexError):
            s.cpu().index_select(0, index)
        with sparse.accelerate(), pytest.raises(IndexError):
            s.cpu().index_select(0, index)


def test_index_select_errors_on_the_kernel_path_keep_torch_message_and_name_bad_self_indices():
    # 300 entries: past the size where torch's own kernel keeps the call
    s = random_sparse((40, 30), 2, 300, seed=21, coalesced=True)
    for index, bad in ((torch.tensor([0, 40]), 40), (torch.tensor([-41, 3, 50]), -41)):
        message = (rf"^index_select\(\): index contains {bad} that is out of range for tensor of size \[40, 30\] "
                   r"at dimension 0$")
        with pytest.raises(IndexError, match=message):
            s.index_select(0, index)
        with sparse.accelerate(), pytest.raises(IndexError, match=message):
            s.index_select(0, index)
    # an index in range on a tensor whose own indices are not: the op names self's bad entry
    rows = torch.arange(300) % 40
    rows[7] = 45
    broken = torch.sparse_coo_tensor(torch.stack([rows, torch.arange(300) % 30]), torch.ones(300), (40, 30),
                                     check_invariants=False)
    with sparse.accelerate(), pytest.raises(IndexError, match=r"torch_ragged.sparse_index_select: indices\[0\]\[7\] "
                                                              r"= 45 is out of range"):
        broken.index_select(0, torch.tensor([1, 2]))


def test_a_tensor_flagged_coalesced_that_is_not_is_refused_by_name():
    for rows in ([1, 0], [0, 7]):
        lying = torch.sparse_coo_tensor([rows, [0, 1]], [1.0, 2.0], (3, 3), is_coalesced=True, check_invariants=False)
        for fn, op in ((lambda lying=lying: torch.mm(lying, torch.ones(3, 2)), "mm"),
                       (lambda lying=lying: torch.addmm(torch.zeros(3, 2), lying, torch.ones(3, 2)), "addmm")):
            with sparse.accelerate(), pytest.raises(ValueError, match=rf"aten::{op}\): the sparse operand is flagged "
                                                                      "coalesced but its indices are out of order"):
                fn()


# ---- threads and fork: the switch is a flag, the kernels never leave the dispatcher ----

def training_step(s_indices, s_values, dense, op):
    """A forward and backward through torch's own sparse ops: (output, gradient of the values, of dense)."""
    values = s_values.clone().requires_grad_()
    d = dense.clone().requires_grad_()
    s = torch.sparse_coo_tensor(s_indices, values, (40, 30))
    if op == "mm":
        out = torch.sparse.mm(s, d)
        (out * torch.cos(out)).sum().backward()
        return out.detach(), values.grad, d.grad
    out = torch.sparse.softmax(s, 1) if op == "softmax" else torch.sparse.log_softmax(s, 0)
    weight = torch.sin(torch.arange(out.coalesce().values().numel(), dtype=torch.float64))
    (out.coalesce().values() * weight).sum().backward()
    return out.coalesce().values().detach(), values.grad, None


def step_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    flat = torch.randperm(40 * 30, generator=g)[:300]
    indices = torch.stack([flat // 30, flat % 30])
    return indices, torch.randn(300, generator=g, dtype=torch.float64), torch.randn(30, 5, generator=g,
                                                                                   dtype=torch.float64)


def assert_steps_close(got, want):
    for a, b in zip(got, want, strict=True):
        if b is None:
            assert a is None
        else:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_threads_training_through_torchs_ops_while_another_toggles_get_torchs_results():
    """8 threads run forward + backward through torch.sparse.mm / softmax / log_softmax while one thread toggles
    accelerate() on and off as fast as it can (for ~2 s): every result equals the serial one (torch's, off), and
    nothing crashes. Before, kernels were registered and removed on each toggle, and calls in flight jumped into
    removed kernels (wrong gradients, core dumps)."""
    cases = [(op, seed) for op in ("mm", "softmax", "log_softmax") for seed in range(4)]
    inputs = {seed: step_inputs(seed) for seed in range(4)}
    serial = {(op, seed): training_step(*inputs[seed], op) for op, seed in cases}
    stop = threading.Event()
    failures, counts = [], [0]

    def toggle():
        while not stop.is_set():
            sparse.accelerate(True)
            sparse.accelerate(False)

    def train(worker):
        k = worker
        while not stop.is_set():
            op, seed = cases[k % len(cases)]
            try:
                assert_steps_close(training_step(*inputs[seed], op), serial[(op, seed)])
            except Exception as error:  # noqa: BLE001 (collected, raised in the main thread)
                failures.append(f"{op} seed {seed}: {error}")
                stop.set()
            counts[0] += 1
            k += 1

    run_for(2.0, stop, toggle, *(functools.partial(train, w) for w in range(8)))
    assert not failures, failures[:3]
    assert counts[0] > 50  # the threads did run steps while the switch flipped


@pytest.mark.parametrize("op", ["mm", "softmax", "log_softmax"])
def test_a_forward_and_its_backward_on_different_sides_of_a_toggle_give_the_gradient(op):
    """torch's derivative formulas run whichever kernels evaluate them: a forward accelerated and its backward not
    (and the reverse) give torch's gradients."""
    indices, values, dense = step_inputs(5)
    want = training_step(indices, values, dense, op)
    for forward_on in (True, False):
        v = values.clone().requires_grad_()
        d = dense.clone().requires_grad_()
        with sparse.accelerate(forward_on):
            s = torch.sparse_coo_tensor(indices, v, (40, 30))
            if op == "mm":
                out = torch.sparse.mm(s, d)
                loss = (out * torch.cos(out)).sum()
            else:
                out = (torch.sparse.softmax(s, 1) if op == "softmax" else torch.sparse.log_softmax(s, 0)).coalesce()
                loss = (out.values() * torch.sin(torch.arange(out.values().numel(), dtype=torch.float64))).sum()
        with sparse.accelerate(not forward_on):
            loss.backward()
        torch.testing.assert_close(v.grad, want[1], rtol=1e-10, atol=1e-12)
        if op == "mm":
            torch.testing.assert_close(d.grad, want[2], rtol=1e-10, atol=1e-12)


FORK_WHILE_TOGGLING = """
import os, sys, threading, time
import torch
import torch_ragged
from torch_ragged import sparse

stop = threading.Event()

def toggle():
    while not stop.is_set():
        sparse.accelerate(True)
        sparse.accelerate(False)

s = torch.sparse_coo_tensor([[0, 1, 1]], [1.0, 2.0, 3.0], (3,))
toggler = threading.Thread(target=toggle)
toggler.start()  # the first accelerate() registers the kernels: forks below may land while it does
for k in range(12):
    pid = os.fork()
    if pid == 0:
        sparse.accelerate(True)  # a lock inherited locked would hang here
        ok = s.coalesce().values().tolist() == [1.0, 5.0] and sparse.is_accelerated()
        sparse.accelerate(False)
        os._exit(0 if ok else 3)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            print(f"child {k} hung", flush=True)
            os._exit(2)
        time.sleep(0.005)
    if os.waitstatus_to_exitcode(status) != 0:
        print(f"child {k} exited {os.waitstatus_to_exitcode(status)}", flush=True)
        os._exit(1)
stop.set()
toggler.join()
print("forks ok", flush=True)
"""


def test_fork_while_another_thread_toggles_leaves_a_working_child():
    """A fork taken while another thread switches (or first registers) the kernels gives a child that can call
    accelerate() and run the ops: 12 forks, each child checked, none hangs."""
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_TOGGLING], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "forks ok" in done.stdout, done.stdout + done.stderr


def test_a_dtype_without_kernels_here_runs_torchs_kernel():
    """complex32 (ComplexHalf): torch's to_dense / coalesce take it, these kernels have no sum for it."""
    def widened(fn):  # torch.equal has no complex32 kernel: compared as complex64
        def call():
            out = fn()
            return out.to(torch.complex64) if out.layout == torch.strided else out.coalesce().to(torch.complex64)
        return call

    coalesced = torch.sparse_coo_tensor([[0, 2]], torch.tensor([1 + 2j, 3 - 1j]), (3,)).coalesce().to(torch.complex32)
    assert_same(*both_ways(widened(lambda: coalesced.to_dense())), exact=True)
    unique = torch.sparse_coo_tensor([[2, 0]], torch.tensor([1 + 2j, 3 - 1j]), (3,)).to(torch.complex32)
    duplicates = torch.sparse_coo_tensor([[0, 2, 0]], torch.tensor([1 + 2j, 3 - 1j, 0.5j]), (3,)).to(torch.complex32)
    for s in (unique, duplicates):
        for fn in (lambda s=s: s.to_dense(), lambda s=s: s.coalesce()):
            assert_same_behaviour(widened(fn))  # torch's results, or torch's own refusal
