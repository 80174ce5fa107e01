"""Sparse @ sparse (Gustavson by rows) against independent references: dense float64 math, torch.sparse.mm, and a
loop over the products in the order the kernel promises (each entry of C summed from 0 in ascending inner index);
both accumulators (dense over C's columns, and the sorted-products one for very wide C), power-law rows, every
dtype, determinism across thread counts, gradients and their gradients, bad input."""

import math

import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck

ops = torch.ops.torch_ragged


def random_matrix(n, m, nnz, dtype=torch.float64, seed=0, power_law=False):
    g = torch.Generator().manual_seed(seed)
    if power_law:  # row r holds ~ 1 / (r + 1) of the entries: hub rows next to near-empty ones
        rows = torch.multinomial(1.0 / torch.arange(1, n + 1, dtype=torch.float64), nnz, replacement=True,
                                 generator=g)
    else:
        rows = torch.randint(0, n, (nnz,), generator=g)
    indices = torch.stack([rows, torch.randint(0, m, (nnz,), generator=g)])
    values = torch.randn(nnz, generator=g, dtype=torch.float64).to(dtype)
    return torch.sparse_coo_tensor(indices, values, (n, m), check_invariants=True).coalesce()


def product_loop(a, b):
    """C = A @ B entry by entry, in plain Python: for each row i, for each a_il in A's order, for each b_lj in B's
    order, c_ij += a_il * b_lj (each product rounded to the dtype, sums in float64 for exactness checks)."""
    n, m = a.shape[0], b.shape[1]
    b_rows = {}
    for (inner, j), v in zip(b.indices().t().tolist(), b.values().tolist(), strict=True):
        b_rows.setdefault(inner, []).append((j, v))
    out = {}
    for (i, inner), av in zip(a.indices().t().tolist(), a.values().tolist(), strict=True):
        for j, bv in b_rows.get(inner, []):
            out.setdefault((i, j), []).append(av * bv)
    keys = sorted(out)
    indices = torch.tensor(keys, dtype=torch.long).t().reshape(2, len(keys))
    return indices, [out[k] for k in keys], (n, m)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,k,m,nnz_a,nnz_b,power_law", [
    (6, 5, 4, 9, 8, False), (40, 30, 50, 300, 400, False), (1, 1, 1, 1, 1, False), (3, 4, 2, 0, 5, False),
    (3, 4, 2, 5, 0, False), (0, 3, 2, 0, 4, False), (3, 0, 2, 0, 0, False), (200, 150, 180, 3000, 2500, True),
])
def test_matches_the_product_loop_and_torch(device, n, k, m, nnz_a, nnz_b, power_law):
    a = random_matrix(n, k, nnz_a, seed=1, power_law=power_law) if n and k else torch.sparse_coo_tensor(
        torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.float64), (n, k)).coalesce()
    b = random_matrix(k, m, nnz_b, seed=2, power_law=power_law) if k and m else torch.sparse_coo_tensor(
        torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.float64), (k, m)).coalesce()
    c = torch_ragged.sparse.mm(a.to(device), b.to(device))
    indices, products, size = product_loop(a, b)
    assert c.is_coalesced() and tuple(c.shape) == size
    assert torch.equal(c.indices().cpu(), indices)
    torch.testing.assert_close(c.values().cpu(), torch.tensor([math.fsum(p) for p in products], dtype=torch.float64))
    torch.testing.assert_close(c.to_dense().cpu(), a.to_dense() @ b.to_dense())
    if a._nnz() and b._nnz():
        expected = torch.sparse.mm(a, b).coalesce()
        assert torch.equal(c.indices().cpu(), expected.indices())


@pytest.mark.parametrize("threads", [1, 2])
def test_rows_read_off_the_column_bitmap_or_sorted_alike(threads):
    """The CPU's dense accumulator emits a row's columns by scanning a two-level bitmap when its top level (a bit
    per 4096 columns, built from the row's list of columns) is short next to the row, and sorts the list
    otherwise; both clear what they used, and each thread reuses one accumulator for all the rows it takes. C here
    is 20011 wide (five top-level words, the last one partial): power-law rows put one- and two-column rows
    (sorted) between long ones (scanned), with columns 0 and m - 1 present. Reference: the product loop."""
    n, k, m = 400, 300, 20_011
    a = random_matrix(n, k, 1500, seed=21, power_law=True)
    b = random_matrix(k, m, 450, seed=22)
    b = torch.sparse_coo_tensor(torch.cat([b.indices(), torch.tensor([[0, 0], [0, m - 1]])], 1),
                                torch.cat([b.values(), torch.tensor([1.5, -2.5], dtype=torch.float64)]),
                                (k, m)).coalesce()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        c = torch_ragged.sparse.mm(a, b)
    finally:
        torch.set_num_threads(before)
    indices, products, _ = product_loop(a, b)
    row_lengths = torch.bincount(indices[0], minlength=n)
    assert (row_lengths[row_lengths > 0] <= 2).any() and (row_lengths >= 3).any()  # both ways are taken
    assert m - 1 in indices[1].tolist()
    assert torch.equal(c.indices(), indices)
    torch.testing.assert_close(c.values(), torch.tensor([math.fsum(p) for p in products], dtype=torch.float64))


def test_the_sum_order_is_ascending_inner_index_from_zero():
    # float32 sums that depend on their order: 1e8 + 1 - 1e8 is 0 left to right, 1 in any other grouping.
    a = torch.sparse_coo_tensor([[0, 0, 0], [0, 1, 2]], torch.tensor([1e8, 1.0, -1e8]), (1, 3)).coalesce()
    b = torch.sparse_coo_tensor([[0, 1, 2], [0, 0, 0]], torch.ones(3), (3, 1)).coalesce()
    c = torch_ragged.sparse.mm(a, b)
    left_to_right = (torch.tensor(0.0) + 1e8 + 1.0) - 1e8
    assert c.values().item() == left_to_right.item() == 0.0
    # -0.0 products: 0 + (-0.0) = +0.0, as a sum from zero gives
    a = torch.sparse_coo_tensor([[0], [0]], torch.tensor([-0.0]), (1, 1)).coalesce()
    b = torch.sparse_coo_tensor([[0], [0]], torch.tensor([1.0]), (1, 1)).coalesce()
    assert math.copysign(1.0, torch_ragged.sparse.mm(a, b).values().item()) == 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                                   torch.complex64])
def test_dtypes(dtype):
    a, b = random_matrix(30, 20, 120, seed=3), random_matrix(20, 25, 100, seed=4)
    if not dtype.is_floating_point and not dtype.is_complex:
        a = torch.sparse_coo_tensor(a.indices(), (a.values() * 4).round(), a.shape).coalesce()
        b = torch.sparse_coo_tensor(b.indices(), (b.values() * 4).round(), b.shape).coalesce()
    a, b = a.to(dtype), b.to(dtype)
    c = torch_ragged.sparse.mm(a, b)
    assert c.dtype == dtype
    reference = (a.to_dense().to(torch.complex128 if dtype.is_complex else torch.float64)
                 @ b.to_dense().to(torch.complex128 if dtype.is_complex else torch.float64))
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-5)
    torch.testing.assert_close(c.to_dense().to(reference.dtype), reference, rtol=tolerance, atol=tolerance)


def test_large_magnitudes_against_torch():
    a, b = random_matrix(60, 50, 600, dtype=torch.float32, seed=5), random_matrix(50, 40, 500, dtype=torch.float32,
                                                                                   seed=6)
    for scale in (1e4, 1e7):
        sa = torch.sparse_coo_tensor(a.indices(), a.values() * scale, a.shape).coalesce()
        c = torch_ragged.sparse.mm(sa, b)
        expected = torch.sparse.mm(sa, b).coalesce()
        torch.testing.assert_close(c.values(), expected.values(), rtol=1e-5, atol=scale * 1e-5)


def test_very_wide_products_use_the_sorted_products_accumulator():
    # 2^40 columns: no dense accumulator fits, each row's products are sorted by column instead.
    n, k, m = 30, 20, 1 << 40
    a = random_matrix(n, k, 80, seed=7)
    g = torch.Generator().manual_seed(8)
    cols = torch.randint(0, 1 << 40, (60,), generator=g)
    cols[1::2] = cols[0::2]  # repeated columns across B's rows: C's entries with several products
    b = torch.sparse_coo_tensor(torch.stack([torch.randint(0, k, (60,), generator=g), cols]),
                                torch.randn(60, generator=g, dtype=torch.float64), (k, m)).coalesce()
    c = torch_ragged.sparse.mm(a, b)
    indices, products, _ = product_loop(a, b)
    assert torch.equal(c.indices(), indices)
    torch.testing.assert_close(c.values(), torch.tensor([math.fsum(p) for p in products], dtype=torch.float64))


def test_bitwise_identical_across_thread_counts():
    """Rows are cut into tasks of equal products (about 16 per thread here), handed out one at a time to threads
    that each reuse one accumulator: whichever thread takes a task, and in whatever order, C comes out the same."""
    a = random_matrix(3000, 2000, 40000, dtype=torch.float32, seed=9, power_law=True)
    b = random_matrix(2000, 2500, 30000, dtype=torch.float32, seed=10)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2, 3, 5):
            torch.set_num_threads(count)
            results.append(torch_ragged.sparse.mm(a, b))
    finally:
        torch.set_num_threads(threads)
    expected = torch.sparse.mm(a, b).coalesce()
    assert torch.equal(results[0].indices(), expected.indices())
    torch.testing.assert_close(results[0].values(), expected.values(), rtol=1e-5, atol=1e-5)
    for other in results[1:]:
        assert torch.equal(results[0].indices(), other.indices())
        assert torch.equal(results[0].values(), other.values())


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_and_their_gradients(device):
    a, b = random_matrix(7, 6, 20, seed=11), random_matrix(6, 5, 18, seed=12)
    a_values = a.values().clone().to(device).requires_grad_(True)
    b_values = b.values().clone().to(device).requires_grad_(True)
    ai, bi = a.indices().to(device), b.indices().to(device)

    def product(av, bv):
        return ops.sparse_spgemm(ai, av, bi, bv, [7, 6], [6, 5])[1]

    assert gradcheck(product, (a_values, b_values))
    assert gradgradcheck(product, (a_values, b_values))
    # Against dense autograd: d(sum(w * C))/dA on A's pattern
    w = torch.randn(7, 5, dtype=torch.float64, device=device)
    c_indices, c_values = ops.sparse_spgemm(ai, a_values, bi, b_values, [7, 6], [6, 5])
    (c_values * w[c_indices[0], c_indices[1]]).sum().backward()
    dense_a = a.to_dense().to(device).requires_grad_(True)
    dense_b = b.to_dense().to(device).requires_grad_(True)
    ((dense_a @ dense_b) * w).sum().backward()
    torch.testing.assert_close(a_values.grad, dense_a.grad[ai[0], ai[1]])
    torch.testing.assert_close(b_values.grad, dense_b.grad[bi[0], bi[1]])


@pytest.mark.parametrize("device", DEVICES)
def test_complex_gradients_are_conjugated_as_torchs(device):
    """dL/dA = G Bᴴ and dL/dB = Aᴴ G (the real part's sign was wrong: a missing conjugation), against gradcheck and
    dense complex autograd."""
    a, b = random_matrix(6, 5, 14, seed=31), random_matrix(5, 4, 12, seed=32)
    g = torch.Generator().manual_seed(33)
    a_values = torch.complex(a.values(), torch.randn(a.values().shape, generator=g, dtype=torch.float64))
    b_values = torch.complex(b.values(), torch.randn(b.values().shape, generator=g, dtype=torch.float64))
    ai, bi = a.indices().to(device), b.indices().to(device)
    a_values, b_values = a_values.to(device), b_values.to(device)

    def product(av, bv):
        return ops.sparse_spgemm(ai, av, bi, bv, [6, 5], [5, 4])[1]

    assert gradcheck(product, (a_values.clone().requires_grad_(), b_values.clone().requires_grad_()))
    leaf_a, leaf_b = a_values.clone().requires_grad_(), b_values.clone().requires_grad_()
    c_indices, c_values = ops.sparse_spgemm(ai, leaf_a, bi, leaf_b, [6, 5], [5, 4])
    w = torch.complex(torch.randn(6, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)).to(device)
    (c_values * w[c_indices[0], c_indices[1]]).sum().abs().backward()
    dense_a = torch.zeros(6, 5, dtype=torch.complex128, device=device).index_put((ai[0], ai[1]), a_values)
    dense_b = torch.zeros(5, 4, dtype=torch.complex128, device=device).index_put((bi[0], bi[1]), b_values)
    dense_a.requires_grad_(), dense_b.requires_grad_()
    ((dense_a @ dense_b) * w).sum().abs().backward()
    torch.testing.assert_close(leaf_a.grad, dense_a.grad[ai[0], ai[1]])
    torch.testing.assert_close(leaf_b.grad, dense_b.grad[bi[0], bi[1]])


def test_a_gradient_to_one_operand_only_leaves_the_other_none():
    a, b = random_matrix(5, 4, 8, seed=13), random_matrix(4, 3, 7, seed=14)
    a_values = a.values().clone().requires_grad_(True)
    c_values = ops.sparse_spgemm(a.indices(), a_values, b.indices(), b.values(), [5, 4], [4, 3])[1]
    (grad_a,) = torch.autograd.grad(c_values.sum(), (a_values,))
    torch.testing.assert_close(grad_a, (torch.ones(5, 3, dtype=torch.float64) @ b.to_dense().t())[
        a.indices()[0], a.indices()[1]])


def test_bad_input_is_named():
    a, b = random_matrix(4, 5, 6), random_matrix(5, 3, 6)
    unsorted = a.indices().flip(1)
    with pytest.raises(ValueError, match="torch_ragged.sparse_spgemm: A's entries must come in row order"):
        ops.sparse_spgemm(unsorted, a.values(), b.indices(), b.values(), [4, 5], [5, 3])
    with pytest.raises(IndexError, match="torch_ragged.sparse_spgemm.*out of range"):
        ops.sparse_spgemm(a.indices(), a.values(), b.indices() + 9, b.values(), [4, 5], [5, 3])
    with pytest.raises(TypeError, match="torch_ragged.sparse_spgemm: A and B must share a dtype"):
        ops.sparse_spgemm(a.indices(), a.values(), b.indices(), b.values().float(), [4, 5], [5, 3])
    with pytest.raises(TypeError, match="torch_ragged.sparse_spgemm: bool values have no product"):
        ops.sparse_spgemm(a.indices(), a.values() > 0, b.indices(), b.values() > 0, [4, 5], [5, 3])
    with pytest.raises(ValueError, match="torch_ragged.sparse_spgemm: C = A @ B of size"):
        ops.sparse_spgemm(a.indices(), a.values(), b.indices(), b.values(), [1 << 40, 5], [5, 1 << 40])
    with pytest.raises(ValueError, match="torch_ragged.sparse_spgemm: A and B must be 2-D sparse matrices"):
        ops.sparse_spgemm(a.indices(), a.values(), b.indices(), b.values(), [4, 5, 1], [5, 3])


# ---- the CSR form: sparse_spgemm_csr (what mm returns when an operand is compressed) ----

def csr_parts(s, index_dtype=torch.long):
    """(crow_indices, col_indices, values) of a coalesced COO matrix, built by a loop over its rows."""
    rows = s.indices()[0].tolist()
    crow = [0] * (s.shape[0] + 1)
    for r in rows:
        crow[r + 1] += 1
    for r in range(s.shape[0]):
        crow[r + 1] += crow[r]
    return (torch.tensor(crow, dtype=index_dtype), s.indices()[1].to(index_dtype), s.values())


def csr_product(a, b, index_dtype=torch.long, device="cpu"):
    parts = [p.to(device) for p in (*csr_parts(a, index_dtype), *csr_parts(b, index_dtype))]
    return ops.sparse_spgemm_csr(*parts, list(a.shape), list(b.shape))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("n,k,m,nnz_a,nnz_b,power_law", [
    (6, 5, 4, 9, 8, False), (40, 30, 50, 300, 400, False), (3, 4, 2, 0, 5, False), (0, 3, 2, 0, 4, False),
    (3, 0, 2, 0, 0, False), (200, 150, 180, 3000, 2500, True),
])
def test_csr_product_matches_the_product_loop_in_the_index_dtype(device, index_dtype, n, k, m, nnz_a, nnz_b,
                                                                  power_law):
    def matrix(rows, cols, nnz, seed):
        if rows and cols:
            return random_matrix(rows, cols, nnz, seed=seed, power_law=power_law)
        return torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.float64),
                                       (rows, cols)).coalesce()

    a, b = matrix(n, k, nnz_a, 1), matrix(k, m, nnz_b, 2)
    crow, col, values = csr_product(a, b, index_dtype, device)
    indices, products, _ = product_loop(a, b)
    expected_crow, expected_col, _ = csr_parts(torch.sparse_coo_tensor(indices, torch.ones(indices.shape[1]),
                                                                       (n, m)).coalesce(), index_dtype)
    assert crow.dtype == col.dtype == index_dtype and crow.device.type == col.device.type == device
    assert torch.equal(crow.cpu(), expected_crow) and torch.equal(col.cpu(), expected_col)
    torch.testing.assert_close(values.cpu(), torch.tensor([math.fsum(p) for p in products], dtype=torch.float64))


def test_csr_product_is_the_coo_product_bit_for_bit_on_both_accumulators():
    """The CSR result is written by the same rows as the COO one (only the row index per entry is left out): the
    dense accumulator with its bitmap and sorted rows (20011 columns), and the sorted-products one (2^40 columns)."""
    a = random_matrix(400, 300, 1500, dtype=torch.float32, seed=21, power_law=True)
    for m, b_entries in ((20_011, 450), (1 << 40, 60)):
        g = torch.Generator().manual_seed(m % 97)
        cols = torch.randint(0, m, (b_entries,), generator=g)
        cols[1::2] = cols[0::2]  # columns shared across B's rows: entries of C with several products
        b = torch.sparse_coo_tensor(torch.stack([torch.randint(0, 300, (b_entries,), generator=g), cols]),
                                    torch.randn(b_entries, generator=g), (300, m)).coalesce()
        coo = torch_ragged.sparse.mm(a, b)
        crow, col, values = csr_product(a, b)
        assert torch.equal(torch.repeat_interleave(torch.arange(400), crow.diff()), coo.indices()[0])
        assert torch.equal(col, coo.indices()[1]) and torch.equal(values, coo.values())


@pytest.mark.parametrize("device", DEVICES)
def test_csr_product_gradients_and_their_gradients(device):
    a, b = random_matrix(7, 6, 20, seed=11), random_matrix(6, 5, 18, seed=12)
    a_crow, a_col, _ = (p.to(device) for p in csr_parts(a, torch.int32))
    b_crow, b_col, _ = (p.to(device) for p in csr_parts(b, torch.int32))
    a_values = a.values().clone().to(device).requires_grad_(True)
    b_values = b.values().clone().to(device).requires_grad_(True)

    def product(av, bv):
        return ops.sparse_spgemm_csr(a_crow, a_col, av, b_crow, b_col, bv, [7, 6], [6, 5])[2]

    assert gradcheck(product, (a_values, b_values))
    assert gradgradcheck(product, (a_values, b_values))
    # through mm of torch CSR tensors, against dense autograd: d(sum(w * C))/dA on A's pattern
    w = torch.randn(7, 5, dtype=torch.float64, device=device)
    c = torch_ragged.sparse.mm(torch.sparse_csr_tensor(a_crow, a_col, a_values, (7, 6)),
                               torch.sparse_csr_tensor(b_crow, b_col, b_values, (6, 5)))
    assert c.layout == torch.sparse_csr and c.crow_indices().dtype == torch.int32
    (c.to_dense() * w).sum().backward()
    dense_a = a.to_dense().to(device).requires_grad_(True)
    dense_b = b.to_dense().to(device).requires_grad_(True)
    ((dense_a @ dense_b) * w).sum().backward()
    ai, bi = a.indices().to(device), b.indices().to(device)
    torch.testing.assert_close(a_values.grad, dense_a.grad[ai[0], ai[1]])
    torch.testing.assert_close(b_values.grad, dense_b.grad[bi[0], bi[1]])
    # one operand asking: the other's gradient stays None
    a_only = a.values().clone().to(device).requires_grad_(True)
    c_values = ops.sparse_spgemm_csr(a_crow, a_col, a_only, b_crow, b_col, b.values().to(device), [7, 6],
                                     [6, 5])[2]
    (grad_a,) = torch.autograd.grad(c_values.sum(), (a_only,))
    torch.testing.assert_close(grad_a, (torch.ones(7, 5, dtype=torch.float64, device=device) @ dense_b.detach().t())[
        ai[0], ai[1]])


def test_csr_product_sums_rows_whose_columns_are_not_sorted():
    """torch's invariant (columns rising within a row) is not needed for the product: a row stored in any column
    order is summed in that order and C still comes out with sorted columns (mm(validate=False) passes such rows)."""
    a, b = random_matrix(30, 20, 150, seed=31), random_matrix(20, 25, 120, seed=32)
    crow, col, values = csr_parts(a)
    order = torch.cat([torch.arange(crow[r], crow[r + 1]).flip(0) for r in range(30)])
    c_crow, c_col, c_values = ops.sparse_spgemm_csr(crow, col[order], values[order], *csr_parts(b), [30, 20],
                                                    [20, 25])
    c = torch.sparse_csr_tensor(c_crow, c_col, c_values, (30, 25))
    torch.testing.assert_close(c.to_dense(), a.to_dense() @ b.to_dense())
    assert all(bool((c_col[c_crow[r]:c_crow[r + 1]].diff() > 0).all()) for r in range(30))


def test_csr_product_refuses_bad_input_by_name():
    a = torch.sparse_coo_tensor([[0, 0, 1, 2, 2, 3], [0, 3, 1, 0, 4, 2]], torch.arange(6.0, dtype=torch.float64),
                                (4, 5)).coalesce()
    b = random_matrix(5, 3, 6)
    a_crow, a_col, a_values = csr_parts(a)
    b_parts = csr_parts(b)

    def call(crow=a_crow, col=a_col, values=a_values, a_size=(4, 5), b_size=(5, 3)):
        return ops.sparse_spgemm_csr(crow, col, values, *b_parts, list(a_size), list(b_size))

    op = "torch_ragged.sparse_spgemm_csr"
    for broken, where in ((a_crow + 1, 0), (torch.tensor([0, 3, 2, 5, 6]), 2), (torch.tensor([0, 1, 2, 3, 5]), 4)):
        with pytest.raises(ValueError, match=rf"{op}: a_crow_indices must rise from 0 to nnz = 6, got "
                                             rf"a_crow_indices\[{where}\]"):
            call(crow=broken)
    with pytest.raises(ValueError, match=rf"{op}: a_crow_indices of 4 rows must hold 5 offsets, got 4"):
        call(crow=a_crow[:4])
    with pytest.raises(IndexError, match=rf"{op}: a_col_indices\[3\] = 5 is out of range for the 5 columns of A"):
        call(col=a_col.index_fill(0, torch.tensor([3, 5]), 5))
    with pytest.raises(IndexError, match=rf"{op}: a_col_indices\[0\] = -1 is out of range"):
        call(col=a_col.index_fill(0, torch.tensor([0]), -1))
    with pytest.raises(ValueError, match=rf"{op}: a_values must be 1-D with one value per entry \(6\)"):
        call(values=a_values[:5])
    with pytest.raises(TypeError, match=rf"{op}: a_crow_indices must be an integer tensor"):
        call(crow=a_crow.double())
    with pytest.raises(ValueError, match=rf"{op}: the inner dimensions differ"):
        call(a_size=(4, 6))
    with pytest.raises(TypeError, match=rf"{op}: A and B must share a dtype"):
        call(values=a_values.float())
    with pytest.raises(ValueError, match=rf"{op}: C's indices take a_crow_indices' dtype, which must be int64, or "
                                         "int32 for a C of at most"):
        ops.sparse_spgemm_csr(a_crow.int(), a_col.int(), a_values, b_parts[0], b_parts[1], b_parts[2], [4, 5],
                              [5, 1 << 31])
    with pytest.raises(ValueError, match=rf"{op}: a_size must be non-negative, got \[-1, 5\]"):
        call(a_size=(-1, 5))


LAYOUTS = {"coo": lambda t: t, "csr": lambda t: t.to_sparse_csr(), "csc": lambda t: t.to_sparse_csc()}


@pytest.mark.parametrize("left", LAYOUTS)
@pytest.mark.parametrize("right", LAYOUTS)
def test_every_layout_pair_gives_torchs_result_layout(left, right):
    """torch.sparse.mm's result layout where torch multiplies the pair (COO @ COO: COO, CSR @ CSR: CSR, CSC @ CSC:
    CSC, CSC @ CSR: CSR), CSR for the pairs torch refuses; values against the dense product."""
    a, b = random_matrix(30, 20, 120, seed=41), random_matrix(20, 25, 110, seed=42)
    x, y = LAYOUTS[left](a), LAYOUTS[right](b)
    got = torch_ragged.sparse.mm(x, y)
    try:
        expected_layout = torch.sparse.mm(x, y).layout
    except RuntimeError:  # a pair torch refuses ("not implemented for ...")
        expected_layout = torch.sparse_csr
    assert got.layout == expected_layout
    torch.testing.assert_close(got.to_dense(), a.to_dense() @ b.to_dense())
    if got.layout != torch.sparse_coo:
        crow = got.ccol_indices() if got.layout == torch.sparse_csc else got.crow_indices()
        plain = got.row_indices() if got.layout == torch.sparse_csc else got.col_indices()
        torch._validate_sparse_compressed_tensor_args(crow, plain, got.values(), got.shape, got.layout)
