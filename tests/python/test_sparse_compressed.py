"""CSR and CSC tensors as segments: every op that takes them against torch's own CSR / CSC results, dense float64
math and torch.sparse on the equivalent COO tensor; int32 compressed indices kept; gradients to the values; the
conversions against torch's; bad input named by layout."""

import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck

sparse = torch_ragged.sparse
COMPRESSED = [torch.sparse_csr, torch.sparse_csc]


def random_dense(n, m, density=0.4, seed=0, dtype=torch.float64, dense_dims=()):
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(n, m, generator=g) < density
    values = torch.randn(n, m, *dense_dims, generator=g, dtype=torch.float64).to(dtype)
    return values * keep.reshape(n, m, *([1] * len(dense_dims)))


def compressed(dense, layout, index_dtype=torch.long, dense_dim=None):
    """torch's own conversion (with its invariants checked), indices cast to index_dtype."""
    x = dense.to_sparse(layout=layout, dense_dim=dense_dim)
    if layout == torch.sparse_csr:
        parts = x.crow_indices(), x.col_indices()
    else:
        parts = x.ccol_indices(), x.row_indices()
    return torch.sparse_compressed_tensor(*(p.to(index_dtype) for p in parts), x.values(), x.shape, layout=layout,
                                          check_invariants=True)


def compressed_parts(x):
    if x.layout == torch.sparse_csr:
        return x.crow_indices(), x.col_indices(), x.values()
    return x.ccol_indices(), x.row_indices(), x.values()


SHAPES = [(5, 4, 0.5), (40, 30, 0.1), (6, 6, 0.0), (1, 9, 0.7), (30, 1, 0.5), (0, 3, 0.5)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", COMPRESSED)
@pytest.mark.parametrize("n,m,density", SHAPES)
@pytest.mark.parametrize("index_dtype", [torch.long, torch.int32])
def test_to_dense_and_products_against_dense_math(device, layout, n, m, density, index_dtype):
    d = random_dense(n, m, density).to(device)
    x = compressed(d, layout, index_dtype)
    assert torch.equal(sparse.to_dense(x), d)
    right = torch.randn(m, 3, dtype=torch.float64, device=device)
    left = torch.randn(2, n, dtype=torch.float64, device=device)
    torch.testing.assert_close(sparse.mm(x, right), d @ right)
    torch.testing.assert_close(sparse.mm(left, x), left @ d)
    torch.testing.assert_close(sparse.mm(x, right, plan=sparse.plan(x)), d @ right)
    bias = torch.randn(n, 1, dtype=torch.float64, device=device)
    torch.testing.assert_close(sparse.addmm(bias, x, right, beta=0.5, alpha=2.0), 0.5 * bias + 2.0 * (d @ right))
    if n and m:  # torch's CSR product refuses empty operands; the dense math is the reference
        torch.testing.assert_close(sparse.mm(x, right), torch.mm(x, right))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", COMPRESSED)
@pytest.mark.parametrize("n,m,density", SHAPES)
def test_sum_and_sparse_mask_against_torch(device, layout, n, m, density):
    d = random_dense(n, m, density, seed=1).to(device)
    x = compressed(d, layout)
    torch.testing.assert_close(sparse.sum(x), d.sum())
    for dim in (0, 1, -1):
        expected = torch.sparse.sum(d.to_sparse(), dim) if d.count_nonzero() else None
        got = sparse.sum(x, dim)
        assert got.layout == torch.sparse_coo and got.is_coalesced()
        if expected is not None:
            assert torch.equal(got.indices(), expected.coalesce().indices())
            torch.testing.assert_close(got.values(), expected.coalesce().values())
        else:
            assert got._nnz() == 0
    source = torch.randn(n, m, dtype=torch.float64, device=device)
    masked = sparse.sparse_mask(source, x)
    expected = source.sparse_mask(x)  # torch keeps the mask's layout and structure
    assert masked.layout == layout == expected.layout
    for got_part, expected_part in zip(compressed_parts(masked), compressed_parts(expected), strict=True):
        assert torch.equal(got_part, expected_part)


def coo_softmax_reference(d, dim, log):
    """torch.sparse's softmax of the COO tensor with the same entries, as a dense tensor (zeros off the pattern)."""
    op = torch.sparse.log_softmax if log else torch.sparse.softmax
    return op(d.to_sparse(), dim).to_dense()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", COMPRESSED)
@pytest.mark.parametrize("n,m,density", SHAPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_along_either_dim_against_torch_on_coo(device, layout, n, m, density, log):
    d = random_dense(n, m, density, seed=2).to(device)
    x = compressed(d, layout)
    op = sparse.log_softmax if log else sparse.softmax
    for dim in (0, 1, -2):
        out = op(x, dim)
        assert out.layout == layout
        for got_part, kept in zip(compressed_parts(out)[:2], compressed_parts(x)[:2], strict=True):
            assert torch.equal(got_part, kept)  # the pattern is kept
        mask = d != 0
        torch.testing.assert_close(out.to_dense()[mask], coo_softmax_reference(d.cpu(), dim, log).to(device)[mask])


@pytest.mark.parametrize("layout", COMPRESSED)
def test_softmax_at_large_magnitudes_and_with_dtype(layout):
    d = random_dense(20, 30, 0.5, seed=3) * 1e6
    x = compressed(d.float(), layout)
    mask = d != 0
    for dim in (0, 1):
        out = sparse.softmax(x, dim, dtype=torch.float64)
        assert out.dtype == torch.float64 and torch.isfinite(out.values()).all()
        expected = torch.sparse.softmax(d.float().to_sparse(), dim, dtype=torch.float64).to_dense()
        torch.testing.assert_close(out.to_dense()[mask], expected[mask])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("source", ["dense", "coo", "uncoalesced_coo", "csr", "csc"])
@pytest.mark.parametrize("target", ["csr", "csc", "coo"])
def test_conversions_match_torch(device, source, target):
    d = random_dense(12, 9, 0.3, seed=4).to(device)
    if source == "dense":
        x = d
    elif source == "coo":
        x = d.to_sparse()
    elif source == "uncoalesced_coo":  # every entry split in two halves, shuffled
        c = d.to_sparse()
        order = torch.randperm(2 * c._nnz(), generator=torch.Generator().manual_seed(0)).to(device)
        x = torch.sparse_coo_tensor(torch.cat([c.indices()] * 2, 1)[:, order],
                                    torch.cat([c.values() / 2] * 2)[order], c.shape)
    else:
        x = compressed(d, getattr(torch, f"sparse_{source}"))
    got = getattr(sparse, f"to_sparse_{target}")(x)
    expected = d.to_sparse() if target == "coo" else d.to_sparse(layout=getattr(torch, f"sparse_{target}"))
    assert got.layout == expected.layout
    if target == "coo":
        assert got.is_coalesced()
        assert torch.equal(got.indices(), expected.indices())
        torch.testing.assert_close(got.values(), expected.values())
    else:
        got_parts, expected_parts = compressed_parts(got), compressed_parts(expected)
        assert torch.equal(got_parts[0], expected_parts[0]) and torch.equal(got_parts[1], expected_parts[1])
        torch.testing.assert_close(got_parts[2], expected_parts[2])


def test_int32_indices_are_kept_end_to_end():
    d = random_dense(10, 8, 0.4, seed=5)
    for layout in COMPRESSED:
        x = compressed(d, layout, torch.int32)
        for out in (sparse.softmax(x, 0), sparse.sparse_mask(d, x), sparse.to_sparse_csr(x), sparse.to_sparse_csc(x),
                    sparse.mm(x, compressed(d.t().contiguous(), torch.sparse_csr, torch.int32))):
            assert all(part.dtype == torch.int32 for part in compressed_parts(out)[:2]), out.layout


def test_sparse_times_sparse_in_every_layout_pair():
    a_dense, b_dense = random_dense(9, 7, 0.4, seed=6), random_dense(7, 5, 0.4, seed=7)
    layouts = [torch.sparse_coo, *COMPRESSED]
    for a_layout in layouts:
        for b_layout in layouts:
            a, b = a_dense.to_sparse(layout=a_layout), b_dense.to_sparse(layout=b_layout)
            c = sparse.mm(a, b)
            compressed_operand = a_layout != torch.sparse_coo or b_layout != torch.sparse_coo
            both_csc = a_layout == b_layout == torch.sparse_csc  # torch.sparse.mm's CSC (torch.mm gives CSR)
            assert c.layout == (torch.sparse_csc if both_csc else torch.sparse_csr if compressed_operand
                                else torch.sparse_coo)
            torch.testing.assert_close(c.to_dense(), a_dense @ b_dense)
            if a_layout in COMPRESSED and b_layout in COMPRESSED:  # torch's own product, pattern included
                # torch's columns are not sorted within a row (its COO conversion then even claims coalesced
                # indices that are not); ours are: the patterns are compared as sets of flat keys
                expected = torch.mm(a, b)
                c = c.to_sparse_csr() if both_csc else c
                assert torch.equal(c.crow_indices(), expected.crow_indices())
                keys = [x.to_sparse_coo()._indices() for x in (c, expected)]
                flat = [(k[0] * 5 + k[1]).sort().values for k in keys]
                assert torch.equal(flat[0], flat[1]) and torch.equal(flat[0], keys[0][0] * 5 + keys[0][1])


@pytest.mark.parametrize("layout", COMPRESSED)
def test_gradients_reach_the_values(layout):
    d = random_dense(6, 5, 0.5, seed=8)
    base = compressed(d, layout)
    compressed_indices, plain_indices, values = compressed_parts(base)

    def build(v):
        return torch.sparse_compressed_tensor(compressed_indices, plain_indices, v, d.shape, layout=layout)

    dense = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    v = values.clone().requires_grad_()
    assert gradcheck(lambda v, dense: sparse.mm(build(v), dense), (v, dense))
    assert gradcheck(lambda v: sparse.softmax(build(v), 0).values(), (v,))
    assert gradcheck(lambda v: sparse.log_softmax(build(v), 1).values(), (v,))
    assert gradcheck(lambda v: sparse.to_dense(build(v)), (v,))
    assert gradcheck(lambda v: sparse.sum(build(v), 1).values(), (v,))
    # dense @ S's gradient to the dense operand only: S's values never asked for one
    left = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    grad_left, = torch.autograd.grad(sparse.mm(left, base).sum(), left)
    torch.testing.assert_close(grad_left, torch.ones(2, 5, dtype=torch.float64) @ d.t())


def test_batched_csr_bmm_matches_dense_math():
    g = torch.Generator().manual_seed(9)
    batch, n, m, k, per_matrix = 3, 4, 6, 2, 7
    dense = torch.zeros(batch, n, m, dtype=torch.float64)
    for b in range(batch):  # the same number of entries in each matrix, as a batched CSR tensor requires
        flat = torch.randperm(n * m, generator=g)[:per_matrix]
        dense[b].view(-1)[flat] = torch.randn(per_matrix, generator=g, dtype=torch.float64)
    x = dense.to_sparse_csr()
    right = torch.randn(batch, m, k, dtype=torch.float64)
    torch.testing.assert_close(sparse.bmm(x, right), dense @ right)


def test_csr_to_coo_checks_every_invariant_in_its_one_pass_and_names_the_break():
    """to_sparse_coo of a CSR matrix checks torch's invariants while it writes the indices (one pass): each break
    is named as the separate check names it; a valid matrix gives torch's indices (empty rows included)."""
    csr = lambda crow, col: torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col),  # noqa: E731
                                                    torch.ones(len(col)), (3, 4), check_invariants=False)
    good = csr([0, 2, 2, 5], [0, 3, 0, 1, 2])
    assert torch.equal(sparse.to_sparse_coo(good).indices(), good.to_sparse_coo().indices())
    cases = [([0, 2, 2, 5], [0, 3, 0, 2, 2], ValueError, r"col_indices\[4\] = 2 is not above the entry before it"),
             ([0, 2, 2, 5], [0, 3, 0, 4, 1], IndexError, r"col_indices\[3\] = 4 is out of range for the 4 columns"),
             ([0, 2, 2, 5], [0, -1, 0, 1, 2], IndexError, r"col_indices\[1\] = -1 is out of range"),
             ([1, 2, 2, 5], [0, 3, 0, 1, 2], ValueError, r"crow_indices of a torch.sparse_csr tensor of shape "
                                                          r"\(3, 4\) must start at 0, got 1"),
             ([0, 3, 2, 5], [0, 1, 3, 1, 2], ValueError, r"must not decrease"),
             ([0, 2, 2, 4], [0, 3, 0, 1, 2], ValueError, r"must end at nnz = 5, got 4")]
    for crow, col, error, message in cases:
        with pytest.raises(error, match=r"torch_ragged.sparse.to_sparse_coo: .*" + message):
            sparse.to_sparse_coo(csr(crow, col))


def test_bad_input_names_the_layout_and_the_argument():
    d = random_dense(4, 4, 0.5, seed=10)
    bsr = d.to_sparse_bsr((2, 2))
    with pytest.raises(TypeError, match=r"torch_ragged.sparse.softmax: .*got torch.sparse_bsr"):
        sparse.softmax(bsr, 0)
    with pytest.raises(TypeError, match=r"torch_ragged.sparse.coalesce: expected a sparse COO tensor, "
                                        r"got torch.sparse_csr"):
        sparse.coalesce(d.to_sparse_csr())
    with pytest.raises(TypeError, match=r"to_sparse_csr: expected a dense, sparse COO, CSR or CSC tensor, got "
                                        r"torch.sparse_bsr"):
        sparse.to_sparse_csr(bsr)
    unsorted = torch.sparse_csr_tensor(torch.tensor([0, 2, 2]), torch.tensor([1, 0]), torch.ones(2), (2, 2),
                                       check_invariants=False)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.to_dense: the col_indices of a torch.sparse_csr "
                                         r"tensor of shape \(2, 2\) must be strictly increasing within each "
                                         r"compressed slice \(torch's invariant\): col_indices\[1\] = 0 is not "
                                         r"above the entry before it"):
        sparse.to_dense(unsorted)
    out_of_range = torch.sparse_csc_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 5]), torch.ones(2), (2, 2),
                                           check_invariants=False)
    with pytest.raises(IndexError, match=r"torch_ragged.sparse.mm: row_indices\[1\] = 5 is out of range for the 2 "
                                         r"rows of a torch.sparse_csc tensor of shape \(2, 2\)"):
        sparse.mm(out_of_range, torch.ones(2, 1))
    bad_offsets = torch.sparse_csr_tensor(torch.tensor([0, 2, 1]), torch.tensor([0, 1]), torch.ones(2), (2, 2),
                                          check_invariants=False)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.softmax: the crow_indices of a torch.sparse_csr "
                                         r"tensor of shape \(2, 2\) must not decrease: crow_indices\[2\] = 1"):
        sparse.softmax(bad_offsets, 1)
    # validate=False skips the check; the kernels still refuse offsets they cannot walk
    with pytest.raises(ValueError, match=r"torch_ragged.segment_ids"):
        sparse.to_dense(bad_offsets, validate=False)
    batched = torch.stack([d, d]).to_sparse_csr()
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.softmax: expected a 2-D torch.sparse_csr matrix "
                                         r"\(plus dense dims\), got shape \(2, 4, 4\) with 1 batch dim"):
        sparse.softmax(batched, 1)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.mm: expected 2-D operands"):
        sparse.mm(batched, torch.ones(4, 1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", [torch.sparse_bsr, torch.sparse_bsc])
@pytest.mark.parametrize("blocksize", [(1, 1), (2, 3), (3, 2)])
def test_blocked_layouts_to_dense_and_products(device, layout, blocksize):
    bh, bw = blocksize
    g = torch.Generator().manual_seed(11)
    keep = (torch.rand(4, 3, generator=g) < 0.5).repeat_interleave(bh, 0).repeat_interleave(bw, 1)
    d = (torch.randn(4 * bh, 3 * bw, generator=g, dtype=torch.float64) * keep).to(device)
    x = d.to_sparse(layout=layout, blocksize=blocksize)
    assert torch.equal(sparse.to_dense(x), d)
    right = torch.randn(3 * bw, 5, dtype=torch.float64, device=device)
    left = torch.randn(2, 4 * bh, dtype=torch.float64, device=device)
    torch.testing.assert_close(sparse.mm(x, right), d @ right)
    torch.testing.assert_close(sparse.mm(left, x), left @ d)
    blocks = x.values().clone().requires_grad_()
    parts = (x.crow_indices(), x.col_indices()) if layout == torch.sparse_bsr else (x.ccol_indices(),
                                                                                    x.row_indices())
    if device == "cpu":
        assert gradcheck(lambda v, r: sparse.mm(torch.sparse_compressed_tensor(*parts, v, x.shape, layout=layout), r),
                         (blocks, right.clone().requires_grad_()))


def test_a_coo_tensor_flagged_coalesced_that_is_not_is_refused_not_read_out_of_bounds():
    """torch lets is_coalesced=True through unchecked; the row offsets built from such rows would be wrong (out of
    order) or written out of bounds (out of range)."""
    for rows in ([1, 0], [0, 7]):
        lying = torch.sparse_coo_tensor([rows, [0, 1]], [1.0, 2.0], (3, 3), is_coalesced=True, check_invariants=False)
        with pytest.raises(ValueError, match="torch_ragged.sparse.mm: the sparse operand's row indices are out of "
                                             "order or out of range for 3 rows"):
            sparse.mm(lying, torch.ones(3, 2))
        with pytest.raises(ValueError, match="torch_ragged.sparse.to_sparse_csr: the sparse operand's row indices"):
            sparse.to_sparse_csr(lying)


@pytest.mark.parametrize("device", DEVICES)
def test_row_offsets_match_torchs_conversion_and_refuse_rows_out_of_order_or_range(device):
    """sparse_row_offsets (the offsets and the check in one pass) against torch's own conversion for sorted rows (empty
    rows, leading and trailing ones, int32 rows, enough rows to split over threads), and refusing any row out of order
    or out of range, wherever it lies."""
    g = torch.Generator().manual_seed(29)
    ops = torch.ops.torch_ragged
    for num_rows, nnz in [(0, 0), (5, 0), (1, 7), (9, 30), (50_000, 300_000)]:
        rows = torch.randint(0, max(num_rows, 1), (nnz,), generator=g).sort().values
        for dtype in (torch.long, torch.int32):
            got = ops.sparse_row_offsets(rows.to(dtype).to(device), num_rows)
            assert got.dtype == torch.long and got.device.type == device
            assert torch.equal(got.cpu(), torch._convert_indices_from_coo_to_csr(rows, num_rows)), (num_rows, nnz)
        for bad_at in ({0, nnz // 2, nnz - 1} if nnz > 1 else set()):
            for bad in (-1, num_rows, int(rows[bad_at]) - 1 if bad_at else -1):
                broken = rows.clone()
                broken[bad_at] = bad
                if bool((broken[1:] >= broken[:-1]).all()) and 0 <= bad < num_rows:
                    continue  # still sorted and in range: not broken
                with pytest.raises(ValueError, match=r"torch_ragged.sparse_row_offsets: the row indices must be "
                                                     rf"sorted and in \[0, {num_rows}\)"):
                    ops.sparse_row_offsets(broken.to(device), num_rows)
    with pytest.raises((ValueError, MemoryError), match=r"torch_ragged.sparse_row_offsets: .*offsets"):
        ops.sparse_row_offsets(torch.zeros(0, dtype=torch.long, device=device), 2**62)
    with pytest.raises((ValueError, MemoryError), match=r"torch_ragged.sparse_row_offsets: .*offsets"):
        ops.sparse_row_offsets(torch.zeros(0, dtype=torch.long, device=device), 2**50)


def first_violation_by_loop(compressed_indices, plain_indices, plain_size):
    """torch's invariants of a compressed tensor's indices, checked one by one in Python, in the op's order: the
    offsets (start at 0, never fall, end at nnz), then the first entry out of range or not above the entry before it
    in its slice. (kind, position, value), kind 0 when none."""
    c, q = compressed_indices.tolist(), plain_indices.tolist()
    if c[0] != 0:
        return [1, 0, c[0]]
    for s in range(1, len(c)):
        if c[s] < c[s - 1]:
            return [2, s, c[s]]
    if c[-1] != len(q):
        return [3, len(c) - 1, c[-1]]
    for s in range(len(c) - 1):
        for p in range(c[s], c[s + 1]):
            if not 0 <= q[p] < plain_size:
                return [4, p, q[p]]
            if p > c[s] and q[p] <= q[p - 1]:
                return [5, p, q[p]]
    return [0, 0, 0]


def broken_compressed_indices(g, slices, plain_size, how):
    """A valid compressed layout (some slices empty, one long where the sizes allow), then broken as ``how`` says."""
    counts = torch.randint(0, min(plain_size, 6) + 1, (slices,), generator=g)
    if slices:
        counts[torch.randint(0, slices, (1,), generator=g)] = plain_size  # one full slice
    plain = torch.cat([torch.randperm(plain_size, generator=g)[:int(k)].sort().values for k in counts]
                      + [torch.zeros(0, dtype=torch.long)])
    compressed = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    nnz = plain.numel()
    pick = int(torch.randint(0, max(nnz, 1), (1,), generator=g))
    if how == "start":
        compressed[0] = 1
    elif how == "fall" and slices >= 2:
        s = int(torch.randint(1, slices, (1,), generator=g))
        compressed[s] = compressed[s - 1] - 1
    elif how == "end":
        compressed[-1] += 1
    elif how == "out of range" and nnz:
        plain[pick] = plain_size if pick % 2 else -1
    elif how == "not rising" and nnz > 1:
        plain[max(pick, 1)] = plain[max(pick, 1) - 1]  # a repeat; a fall where the slice starts again is fine
    elif how == "two breaks" and nnz > 1:
        plain[nnz - 1] = -5
        plain[max(pick // 2, 1)] = plain_size + 3
    return compressed, plain


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.long, torch.int32])
@pytest.mark.parametrize("how", ["none", "start", "fall", "end", "out of range", "not rising", "two breaks"])
def test_compressed_violation_finds_the_first_break_as_a_loop_does_and_as_torch_refuses(how, index_dtype, device):
    """sparse_compressed_violation against a Python loop over torch's invariants (the same first break, position and
    value), and against torch's own validation (kind 0 exactly when torch accepts the indices), for small layouts and
    ones long enough to split over threads (the first break found across chunks). The answer is on the CPU on every
    device."""
    g = torch.Generator().manual_seed(23)
    ops = torch.ops.torch_ragged
    found_breaks = 0
    for slices, plain_size in [(0, 3), (1, 1), (5, 4), (30, 20), (3000, 60), (20, 40_000)]:
        for _ in range(3):
            compressed, plain = broken_compressed_indices(g, slices, plain_size, how)
            compressed, plain = compressed.to(index_dtype), plain.to(index_dtype)
            expected = first_violation_by_loop(compressed, plain, plain_size)
            got = ops.sparse_compressed_violation(compressed.to(device), plain.to(device), plain_size)
            assert got.device.type == "cpu" and got.dtype == torch.long, got
            assert got.tolist() == expected, (slices, plain_size)
            try:
                torch._validate_sparse_compressed_tensor_args(compressed, plain, torch.zeros(plain.numel()),
                                                              (slices, plain_size), torch.sparse_csr)
                torch_accepts = True
            except RuntimeError:
                torch_accepts = False
            # (torch reads no offset of a matrix with no rows: it accepts [1] there, which we refuse)
            assert torch_accepts == (expected[0] == 0) or slices == 0, (slices, plain_size, expected)
            found_breaks += expected[0] != 0
    assert (found_breaks == 0) == (how == "none")


def test_compressed_violation_checks_its_arguments():
    ops = torch.ops.torch_ragged
    with pytest.raises(ValueError, match=r"sparse_compressed_violation: compressed_indices needs at least 1 offset"):
        ops.sparse_compressed_violation(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 3)
    with pytest.raises(TypeError, match=r"sparse_compressed_violation: plain_indices must be an integer tensor"):
        ops.sparse_compressed_violation(torch.zeros(1, dtype=torch.long), torch.zeros(0), 3)
    with pytest.raises(ValueError, match=r"sparse_compressed_violation: plain_size must be >= 0, got -1"):
        ops.sparse_compressed_violation(torch.zeros(1, dtype=torch.long), torch.zeros(0, dtype=torch.long), -1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", COMPRESSED)
def test_ops_on_a_compressed_tensor_refuse_broken_indices_by_name(layout, device):
    """Every op that reads a CSR / CSC tensor's indices checks them first (validate=True) and names itself, the index
    tensor and the entry; a softmax along the compressed dim and a product without gradient, which never build the
    COO indices, too."""
    crow, col = torch.tensor([0, 2, 4]), torch.tensor([1, 2, 0, 0])  # row 1 repeats column 0
    x = torch.sparse_compressed_tensor(crow.to(device), col.to(device), torch.ones(4, device=device),
                                       (2, 3) if layout == torch.sparse_csr else (3, 2), layout=layout,
                                       check_invariants=False)
    plain = "col_indices" if layout == torch.sparse_csr else "row_indices"
    compressed_dim = 1 if layout == torch.sparse_csr else 0
    calls = {"softmax": lambda: sparse.softmax(x, compressed_dim),
             "mm": lambda: sparse.mm(x, torch.ones(x.shape[1], 2, device=device)),
             "to_dense": lambda: sparse.to_dense(x), "to_sparse_coo": lambda: sparse.to_sparse_coo(x)}
    for op, call in calls.items():
        with pytest.raises(ValueError, match=rf"torch_ragged.sparse.{op}: the {plain} of a {layout} tensor .* "
                                             rf"{plain}\[3\] = 0 is not above the entry before it"):
            call()
