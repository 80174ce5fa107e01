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
