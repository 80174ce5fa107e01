"""Sparse matrix products against dense float64 math: mm, D @ S, addmm, bmm, sparse @ sparse; autograd that never
densifies; plans; registration and torch.compile; bad input."""

import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged


def random_matrix(n, m, nnz, dtype=torch.float64, seed=0, coalesced=True):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, n, (nnz,), generator=g), torch.randint(0, m, (nnz,), generator=g)])
    values = torch.randn(nnz, generator=g, dtype=torch.float64).to(dtype)
    s = torch.sparse_coo_tensor(indices, values, (n, m), check_invariants=True)
    return s.coalesce() if coalesced else s


SHAPES = [(5, 7, 12, 3), (40, 30, 200, 8), (6, 6, 0, 2), (1, 9, 4, 1), (50, 3, 40, 5)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,m,nnz,k", SHAPES)
@pytest.mark.parametrize("coalesced", [True, False])
def test_sparse_times_dense_and_dense_times_sparse(device, n, m, nnz, k, coalesced):
    s = random_matrix(n, m, nnz, coalesced=coalesced)
    d = torch.randn(m, k, dtype=torch.float64)
    left = torch.randn(k, n, dtype=torch.float64)
    dense_s = s.to_dense()
    torch.testing.assert_close(torch_ragged.sparse.mm(s.to(device), d.to(device)).cpu(), dense_s @ d)
    torch.testing.assert_close(torch_ragged.sparse.mm(left.to(device), s.to(device)).cpu(), left @ dense_s)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_reduced_precision_accumulates_in_float(device, dtype):
    s = random_matrix(30, 400, 3000, dtype=dtype, seed=1)
    d = torch.randn(400, 16, dtype=torch.float64).to(dtype)
    expected = s.to_dense().double() @ d.double()
    tol = {torch.float32: 1e-5, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    actual = torch_ragged.sparse.mm(s.to(device), d.to(device))
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.cpu().double(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_addmm_bmm_and_sparse_times_sparse(device):
    s = random_matrix(8, 6, 20, seed=2)
    d, m = torch.randn(6, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    torch.testing.assert_close(torch_ragged.sparse.addmm(m.to(device), s.to(device), d.to(device), beta=0.5,
                                                         alpha=-2).cpu(), 0.5 * m - 2 * (s.to_dense() @ d))
    batch = torch.stack([random_matrix(8, 6, 15, seed=i).to_dense() for i in range(3)])
    dense = torch.randn(3, 6, 5, dtype=torch.float64)
    torch.testing.assert_close(torch_ragged.sparse.bmm(batch.to_sparse().to(device), dense.to(device)).cpu(),
                               torch.bmm(batch, dense))
    a, b = random_matrix(7, 9, 25, seed=3, coalesced=False), random_matrix(9, 5, 30, seed=4)
    product = torch_ragged.sparse.mm(a.to(device), b.to(device))
    assert product.is_coalesced()
    torch.testing.assert_close(product.to_dense().cpu(), a.to_dense() @ b.to_dense())
    expected = (a.to_dense() @ b.to_dense()).to_sparse()  # no explicit zeros unless products cancel exactly
    assert product._nnz() >= expected._nnz()


@pytest.mark.parametrize("device", DEVICES)
def test_a_plan_is_reused_and_checked(device):
    s = random_matrix(20, 10, 60, seed=5).to(device)
    plan = torch_ragged.sparse.plan(s)
    d = torch.randn(10, 3, dtype=torch.float64, device=device)
    torch.testing.assert_close(torch_ragged.sparse.mm(s, d, plan=plan), torch_ragged.sparse.mm(s, d))
    new_values = torch.sparse_coo_tensor(s.indices(), s.values() * 2, s.shape, is_coalesced=True)
    torch.testing.assert_close(torch_ragged.sparse.mm(new_values, d, plan=plan), 2 * torch_ragged.sparse.mm(s, d))
    other = random_matrix(20, 10, 60, seed=6).to(device)
    with pytest.raises(ValueError, match="torch_ragged.sparse.mm: the plan was built for another sparse matrix"):
        torch_ragged.sparse.mm(other, d, plan=plan)


# ---- autograd ----

INDICES = torch.tensor([[0, 0, 1, 3, 3], [1, 2, 0, 0, 2]])  # coalesced, row 2 empty, column 3 empty


def plan_of(indices, size):
    return ops.sparse_mm_plan(indices, size)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("transpose", [False, True])
def test_gradcheck_and_gradgradcheck(device, transpose):
    indices = INDICES.to(device)
    plan = plan_of(indices, [4, 4])
    g = torch.Generator().manual_seed(7)
    values = torch.randn(5, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    dense = torch.randn(4, 3, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    other = torch.randn(4, 3, generator=g, dtype=torch.float64).to(device).requires_grad_(True)

    def mm(v, d):
        return ops.sparse_mm(v, d, indices, *plan, transpose)

    def sddmm(a, b):
        return ops.sparse_sddmm(a, b, indices, *plan, transpose)

    assert gradcheck(mm, (values, dense))
    assert gradgradcheck(mm, (values, dense))
    assert gradcheck(sddmm, (dense, other))
    assert gradgradcheck(sddmm, (dense, other))


def test_spgemm_gradients():
    a, b = random_matrix(4, 5, 9, seed=8), random_matrix(5, 3, 8, seed=9)
    a_values = a.values().clone().requires_grad_(True)
    b_values = b.values().clone().requires_grad_(True)

    def product(av, bv):
        return ops.sparse_spgemm(a.indices(), av, b.indices(), bv, [4, 5], [5, 3])[1]

    assert gradcheck(product, (a_values, b_values))


def test_the_gradient_to_s_never_builds_a_dense_matrix():
    # 200k x 200k: a dense gradient would be 160 GB; ours needs O(nnz + n * k)
    n, nnz, k = 200_000, 2_000_000, 64
    g = torch.Generator().manual_seed(10)
    s = torch.sparse_coo_tensor(torch.randint(0, n, (2, nnz), generator=g), torch.randn(nnz, generator=g),
                                (n, n), check_invariants=False).coalesce().requires_grad_(True)
    dense = torch.randn(n, k, generator=g)
    plan = torch_ragged.sparse.plan(s)

    def status_kb(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS
    before = status_kb("VmRSS:")
    out = torch_ragged.sparse.mm(s, dense, plan=plan)
    grad = torch.autograd.grad(out.square().sum(), s)[0]
    extra_mb = (status_kb("VmHWM:") - before) / 1024
    assert grad.layout == torch.sparse_coo and grad._nnz() == s._nnz()
    assert extra_mb < 1024, f"the backward to S took {extra_mb:.0f} MB"


def test_registration_and_compile_of_a_two_layer_gcn():
    indices = INDICES
    plan = plan_of(indices, [4, 4])
    values = torch.rand(5, dtype=torch.float64, requires_grad=True)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    opcheck(ops.sparse_mm.default, (values, x, indices, *plan, False))
    opcheck(ops.sparse_mm.default, (values, x, indices, *plan, True))
    opcheck(ops.sparse_sddmm, (x, x.detach().clone(), indices, *plan, False))
    # the segment core's gathered sum / dot do not differentiate by themselves (sparse_mm's autograd does)
    plain = x.detach()
    opcheck(ops.segment_gather_sum, (plain, torch.tensor([1, 1, 0]), None, torch.tensor([0, 2, 3])))
    opcheck(ops.segment_gather_sum, (plain, torch.tensor([3, 0]), values.detach()[:2], torch.tensor([0, 0, 2])))
    opcheck(ops.segment_gather_dot, (plain[:2], plain, torch.tensor([3, 0, 1]), torch.tensor([0, 1, 3])))
    opcheck(ops.segment_gather_sum_dot, (plain, torch.tensor([3, 0, 1]), values.detach()[:3], torch.tensor([0, 1, 3]),
                                         plain[:2]))
    opcheck(ops.segment_gather_sum_dot, (plain, torch.tensor([3, 0]), None, torch.tensor([0, 0, 2]), plain[:2]))
    w1 = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(8, 2, dtype=torch.float64, requires_grad=True)

    def gcn(values, x, w1, w2):
        hidden = torch.relu(ops.sparse_mm(values, x @ w1, indices, *plan))
        return ops.sparse_mm(values, hidden @ w2, indices, *plan)

    compiled = torch.compile(gcn, fullgraph=True)
    actual, expected = compiled(values, x, w1, w2), gcn(values, x, w1, w2)
    torch.testing.assert_close(actual, expected)
    inputs = (values, x, w1, w2)
    for a, b in zip(torch.autograd.grad(actual.sum(), inputs), torch.autograd.grad(expected.sum(), inputs),
                    strict=True):
        torch.testing.assert_close(a, b)


def test_bad_input():
    s = random_matrix(4, 5, 6)
    with pytest.raises(ValueError, match="torch_ragged.sparse_mm: the inner dimensions differ: S has 5 columns"):
        torch_ragged.sparse.mm(s, torch.zeros(4, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch_ragged.sparse_mm: S and D must share a dtype"):
        torch_ragged.sparse.mm(s, torch.zeros(5, 2))
    with pytest.raises(ValueError, match="torch_ragged.sparse.mm: expected 2-D operands"):
        torch_ragged.sparse.mm(s, torch.zeros(5, dtype=torch.float64))
    with pytest.raises(ValueError, match="torch_ragged.sparse_spgemm: the inner dimensions differ"):
        torch_ragged.sparse.mm(s, s)
    with pytest.raises(IndexError, match="torch_ragged.segment_gather_sum: index\\[1\\] = 9 is out of range"):
        ops.segment_gather_sum(torch.zeros(3, 2), torch.tensor([0, 9]), None, torch.tensor([0, 2]))
    with pytest.raises(IndexError, match="out of range"):
        ops.sparse_mm_plan(torch.tensor([[0, 5]]).expand(2, 2), [4, 4])
    with pytest.raises(RuntimeError, match="segment_gather_sum"):
        ops.segment_gather_sum(torch.zeros(3, 2, requires_grad=True), torch.tensor([0]), None,
                               torch.tensor([0, 1])).sum().backward()


def test_raw_products_refuse_a_plan_built_for_other_indices():
    """sparse_mm / sparse_sddmm took a plan of another matrix without complaint and gave a wrong product."""
    def twelve_entries(seed):  # coalesced, distinct positions: every such matrix has nnz 12
        positions = torch.randperm(30, generator=torch.Generator().manual_seed(seed))[:12].sort().values
        return torch.sparse_coo_tensor(torch.stack([positions // 5, positions % 5]),
                                       torch.randn(12, dtype=torch.float64), (6, 5)).coalesce()

    s, other = twelve_entries(1), twelve_entries(2)
    indices, values, dense = s.indices(), s.values(), torch.randn(5, 3, dtype=torch.float64)
    right, wrong = ops.sparse_mm_plan(indices, [6, 5]), ops.sparse_mm_plan(other.indices(), [6, 5])
    torch.testing.assert_close(ops.sparse_mm(values, dense, indices, *right), s.to_dense() @ dense)
    for transpose in (False, True):
        with pytest.raises(ValueError, match="torch_ragged.sparse_mm: the plan .* does not fit these indices"):
            ops.sparse_mm(values, dense if not transpose else torch.randn(6, 3, dtype=torch.float64), indices, *wrong,
                          transpose)
        a, b = (torch.randn(6, 2, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64))
        with pytest.raises(ValueError, match="torch_ragged.sparse_sddmm: the plan .* does not fit these indices"):
            ops.sparse_sddmm(*((a, b) if not transpose else (b, a)), indices, *wrong, transpose)
    # each part of the plan is checked: a permuted column order, a row order that is not its inverse
    row_first, col_first, col_order, row_order = right
    for broken in ((row_first, col_first, col_order.flip(0), row_order), (row_first, col_first, col_order,
                                                                          row_order.roll(1)),
                   (row_first.flip(0), col_first, col_order, row_order), (row_first, col_first + 1, col_order,
                                                                          row_order)):
        with pytest.raises(ValueError, match="does not fit these indices"):
            ops.sparse_mm(values, dense, indices, *broken)
    # validate=False is the caller's promise (the wrappers pass it for the plans they build)
    ops.sparse_mm(values, dense, indices, *wrong, False, False)
    # yet an order index out of range is still an error, never a write outside the reordered entries
    out_of_range = row_order.clone()
    out_of_range[3] = values.numel()
    with pytest.raises(IndexError, match="out of (range|bounds)"):
        ops.sparse_mm(values, torch.randn(6, 3, dtype=torch.float64), indices, row_first, col_first, col_order,
                      out_of_range, True, False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc])
def test_complex_products_match_torch_with_conjugate_gradients(device, layout):
    """S @ D and D @ S for complex values, against torch's dense complex product; gradients by torch's convention
    (dL/dS = G Dᴴ on S's pattern, dL/dD = Sᴴ G), checked by gradcheck and against dense autograd."""
    g = torch.Generator().manual_seed(21)
    indices = torch.stack([torch.randint(0, 6, (14,), generator=g), torch.randint(0, 5, (14,), generator=g)])
    values = torch.complex(torch.randn(14, generator=g, dtype=torch.float64),
                           torch.randn(14, generator=g, dtype=torch.float64))
    s = torch.sparse_coo_tensor(indices, values, (6, 5)).coalesce().to(device)
    indices, values = s.indices(), s.values()
    dense = torch.complex(torch.randn(5, 3, generator=g, dtype=torch.float64),
                          torch.randn(5, 3, generator=g, dtype=torch.float64)).to(device)

    def product(v, d, left=False):
        x = torch.sparse_coo_tensor(indices, v, (6, 5)).coalesce()
        x = x if layout == torch.sparse_coo else x.to_sparse(layout=layout)
        return torch_ragged.sparse.mm(d.t(), x.t()) if left else torch_ragged.sparse.mm(x, d)

    torch.testing.assert_close(product(values, dense), s.to_dense() @ dense)
    torch.testing.assert_close(product(values, dense, left=True), dense.t() @ s.to_dense().t())
    if layout != torch.sparse_coo:
        return  # torch builds no complex CSR / CSC tensor under autograd: the gradients are COO's
    leaf_v, leaf_d = values.clone().requires_grad_(), dense.clone().requires_grad_()
    weight = torch.complex(torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)).to(device)
    (product(leaf_v, leaf_d) * weight).sum().abs().backward()
    dense_s, dense_d = s.to_dense().requires_grad_(), dense.clone().requires_grad_()
    ((dense_s @ dense_d) * weight).sum().abs().backward()
    torch.testing.assert_close(leaf_v.grad, dense_s.grad[indices[0], indices[1]])
    torch.testing.assert_close(leaf_d.grad, dense_d.grad)
    assert gradcheck(product, (values.clone().requires_grad_(), dense.clone().requires_grad_()))


def test_addmm_with_beta_zero_ignores_input_and_gives_it_a_zero_gradient():
    s = random_matrix(3, 4, 5)
    dense = torch.randn(4, 2, dtype=torch.float64)
    for m in (torch.full((3, 2), float("nan"), dtype=torch.float64), torch.randn(2, dtype=torch.float64)):
        m = m.clone().requires_grad_()
        out = torch_ragged.sparse.addmm(m, s, dense, beta=0, alpha=2)
        expected = torch.sparse.addmm(m.detach().expand(3, 2).contiguous(), s, dense, beta=0, alpha=2)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        assert m.grad is not None and torch.equal(m.grad, torch.zeros_like(m))
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.addmm: input must broadcast to the product's shape "
                                         r"\(3, 2\), got \(4, 2\)"):
        torch_ragged.sparse.addmm(torch.zeros(4, 2, dtype=torch.float64), s, dense)


def test_bmm_with_an_empty_inner_dimension_gives_zeros_as_torch():
    s = torch.sparse_coo_tensor(torch.zeros(3, 0, dtype=torch.long), torch.zeros(0), (2, 3, 0))
    dense = torch.ones(2, 0, 4)
    out = torch_ragged.sparse.bmm(s, dense)
    assert torch.equal(out, torch.bmm(s, dense)) and out.shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.bmm: expected a 3-D sparse COO or CSR \(batch, n, m\) "
                                         r"without dense dims and a dense \(batch, m, k\), got \(2, 3, 0\) "
                                         r"\(torch.sparse_coo, dense_dim=0\) and dense \(2, 5, 4\)"):
        torch_ragged.sparse.bmm(s, torch.ones(2, 5, 4))


def test_products_of_hybrid_tensors_are_refused_by_name():
    hybrid = torch.sparse_coo_tensor([[0], [1]], torch.ones(1, 3), (2, 2, 3))
    square = torch.sparse_coo_tensor([[0], [1]], torch.ones(1, 2), (2, 2, 2))
    for call in (lambda: torch_ragged.sparse.mm(hybrid, torch.ones(2, 2)),
                 lambda: torch_ragged.sparse.mm(torch.ones(2, 2), hybrid),
                 lambda: torch_ragged.sparse.mm(square, square),
                 lambda: torch_ragged.sparse.plan(hybrid)):
        with pytest.raises(ValueError, match="S must have only sparse dims, got a hybrid tensor"):
            call()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [True, False])
def test_hspmm_smm_sspaddmm_match_torch(device, coalesced):
    s = random_matrix(9, 7, 14, coalesced=coalesced).to(device)
    d = torch.randn(7, 4, dtype=torch.float64, device=device)
    bias = random_matrix(9, 4, 6, seed=3, coalesced=coalesced).to(device)
    for ours, theirs in ((torch_ragged.sparse.hspmm(s, d), torch.hspmm(s, d)),
                         (torch_ragged.sparse.smm(s, d), torch.smm(s, d)),
                         (torch_ragged.sparse.sspaddmm(bias, s, d, beta=0.5, alpha=-2.0),
                          torch.sspaddmm(bias, s, d, beta=0.5, alpha=-2.0))):
        theirs = theirs.coalesce()
        assert ours.is_coalesced() and ours.sparse_dim() == theirs.sparse_dim() and ours.shape == theirs.shape
        assert torch.equal(ours.indices(), theirs.indices())
        torch.testing.assert_close(ours.values(), theirs.values())
    values = s.coalesce().values().clone().requires_grad_()
    assert gradcheck(lambda v, d: torch_ragged.sparse.smm(torch.sparse_coo_tensor(s.coalesce().indices(), v, s.shape),
                                                         d).values(), (values, d.clone().requires_grad_()))


def lane_order_dot(a_row, b_row):
    """dot_row's documented order, written out: column c's product into lane c % 8 (each lane in column order,
    in the dtype's op-math), then lane j + 4 into j, j + 2 into j, lane 1 into 0."""
    lanes = [torch.zeros((), dtype=torch.float64 if a_row.dtype == torch.float64 else torch.float32)] * 8
    for c in range(a_row.shape[0]):
        lanes[c % 8] = lanes[c % 8] + a_row[c].to(lanes[0].dtype) * b_row[c].to(lanes[0].dtype)
    for half in (4, 2, 1):
        lanes = [lanes[j] + lanes[j + half] for j in range(half)] + lanes[half:]
    return lanes[0].to(a_row.dtype)


def gather_sum_dot_case(width, dtype, seed, segments=60, long_segment=0):
    """(data, index, weight, first_idx, other): random segment lengths (empty ones included), one segment of
    long_segment rows (across the CPU's tasks and chunks) when asked."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 6, (segments,), generator=g)
    if long_segment:
        lengths[segments // 2] = long_segment
    first_idx = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    rows = int(first_idx[-1])
    data = torch.randn(40, width, generator=g, dtype=torch.float64).to(dtype)
    index = torch.randint(0, 40, (rows,), generator=g)
    weight = torch.randn(rows, generator=g, dtype=torch.float64).to(dtype)
    other = torch.randn(segments, width, generator=g, dtype=torch.float64).to(dtype)
    return data, index, weight, first_idx, other


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("width,long_segment", [(1, 0), (7, 0), (8, 0), (64, 0), (70, 0), (16, 20_000)])
def test_gather_sum_dot_is_the_gathered_sum_and_dot_bit_for_bit(device, dtype, width, long_segment):
    data, index, weight, first_idx, other = (t.to(device) for t in gather_sum_dot_case(width, dtype, 3, 60,
                                                                                         long_segment))
    for w in (weight, None):
        sums, dots = ops.segment_gather_sum_dot(data, index, w, first_idx, other)
        assert torch.equal(sums, ops.segment_gather_sum(data, index, w, first_idx))
        assert torch.equal(dots, ops.segment_gather_dot(other, data, index, first_idx))
    # and against float64 math: the rows summed (empty segments give 0) and each row dotted with its segment's
    ids = torch.repeat_interleave(torch.arange(first_idx.numel() - 1), first_idx.diff().cpu())
    gathered = data.cpu().double()[index.cpu()]
    expected_sums = torch.zeros(first_idx.numel() - 1, width, dtype=torch.float64).index_add_(
        0, ids, weight.cpu().double()[:, None] * gathered)
    expected_dots = (gathered * other.cpu().double()[ids]).sum(1)
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1}.get(dtype, 1e-4)
    sums, dots = ops.segment_gather_sum_dot(data, index, weight, first_idx, other)
    torch.testing.assert_close(sums.cpu().double(), expected_sums, rtol=tol, atol=tol * max(1, width) ** 0.5 * 3)
    torch.testing.assert_close(dots.cpu().double(), expected_dots, rtol=tol, atol=tol * max(1, width) ** 0.5 * 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 5, 8, 13, 64, 67])
def test_dots_are_summed_in_the_documented_lane_order(dtype, width):
    # magnitudes ~1 with one large column per row: a different order of the sums would change the last bits
    g = torch.Generator().manual_seed(width)
    a = torch.randn(30, width, generator=g, dtype=torch.float64).to(dtype)
    b = torch.randn(30, width, generator=g, dtype=torch.float64).to(dtype)
    a[:, 0] *= 1e7
    index = torch.randperm(30, generator=g)
    first_idx = torch.tensor([0, 30])
    expected = torch.stack([lane_order_dot(a[0], b[i]) for i in index.tolist()])
    assert torch.equal(ops.segment_gather_dot(a[:1], b, index, first_idx), expected)
    assert torch.equal(ops.segment_gather_sum_dot(b, index, None, first_idx, a[:1])[1], expected)


def test_gather_sum_dot_is_the_same_for_any_thread_count():
    data, index, weight, first_idx, other = gather_sum_dot_case(64, torch.float32, 4, 3000, long_segment=50_000)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.segment_gather_sum_dot(data, index, weight, first_idx, other)
    finally:
        torch.set_num_threads(threads)
    many = ops.segment_gather_sum_dot(data, index, weight, first_idx, other)
    assert torch.equal(one[0], many[0]) and torch.equal(one[1], many[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("transpose", [False, True])
def test_both_gradients_in_one_pass_equal_the_two_ops(device, transpose):
    # without create_graph both gradients come from one segment_gather_sum_dot; with it, from the two
    # differentiable ops: the same bits either way, and dense float64 math's values
    s = random_matrix(300, 200, 3000, dtype=torch.float32, seed=11)
    n_dense = s.shape[0] if transpose else s.shape[1]
    g = torch.Generator().manual_seed(12)
    dense = torch.randn(n_dense, 24, generator=g).to(device)
    weight = torch.randn(s.shape[1] if transpose else s.shape[0], 24, generator=g).to(device)
    indices = s.indices().to(device)
    plan = plan_of(indices, list(s.shape))

    def grads(create_graph):
        values = s.values().to(device).requires_grad_(True)
        d = dense.clone().requires_grad_(True)
        out = ops.sparse_mm(values, d, indices, *plan, transpose)
        return torch.autograd.grad((out * weight).sum(), (values, d), create_graph=create_graph)

    fused, separate = grads(False), grads(True)
    assert torch.equal(fused[0], separate[0].detach()) and torch.equal(fused[1], separate[1].detach())
    dense_s = s.to_dense().double().requires_grad_(True)
    d64 = dense.cpu().double().requires_grad_(True)
    product = (dense_s.t() if transpose else dense_s) @ d64
    grad_s, grad_d = torch.autograd.grad((product * weight.cpu().double()).sum(), (dense_s, d64))
    idx = s.indices()
    torch.testing.assert_close(fused[0].cpu().double(), grad_s[idx[0], idx[1]], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fused[1].cpu().double(), grad_d, rtol=1e-4, atol=1e-4)


def test_gather_sum_dot_bad_input():
    data, index, weight, first_idx, other = gather_sum_dot_case(4, torch.float32, 5, 6)
    with pytest.raises(ValueError, match="torch_ragged.segment_gather_sum_dot: other .* and data .* must share dtype"):
        ops.segment_gather_sum_dot(data, index, weight, first_idx, other[:, :3])
    with pytest.raises(ValueError, match="torch_ragged.segment_gather_sum_dot: first_idx must have other.size\\(0\\)"):
        ops.segment_gather_sum_dot(data, index, weight, first_idx, other[:5])
    with pytest.raises(IndexError, match="torch_ragged.segment_gather_sum_dot: index\\[0\\] = 40 is out of range"):
        ops.segment_gather_sum_dot(data, torch.full_like(index, 40), weight, first_idx, other)
    with pytest.raises(TypeError, match="segment_gather_sum_dot"):
        ops.segment_gather_sum_dot(data.long(), index, None, first_idx, other.long())
    with pytest.raises(RuntimeError, match="segment_gather_sum_dot"):
        ops.segment_gather_sum_dot(data.requires_grad_(True), index, weight, first_idx, other)[0].sum().backward()
