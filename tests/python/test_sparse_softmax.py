"""Sparse softmax / log_softmax against torch.sparse.softmax (and a float64 loop where torch has no kernel)."""

import numpy as np
import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged


def random_sparse(sparse_sizes, dense_sizes, nnz, dtype=torch.float64, seed=0, coalesced=True):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, s, (nnz,), generator=g) for s in sparse_sizes])
    values = (torch.randn((nnz, *dense_sizes), generator=g, dtype=torch.float64) * 3).to(dtype)
    s = torch.sparse_coo_tensor(indices, values, (*sparse_sizes, *dense_sizes), check_invariants=True)
    return s.coalesce() if coalesced else s


def pool_reference(s, dim, log):
    """A loop over the pools of a coalesced tensor: softmax of each pool's values in float64."""
    s = s.coalesce()
    indices, values = s.indices(), s.values().double()
    sparse_dim = s.sparse_dim()
    out = torch.empty_like(values)
    if dim >= sparse_dim:
        return (torch.log_softmax if log else torch.softmax)(values, dim - sparse_dim + 1)
    pools = {}
    for entry, key in enumerate(indices.t().tolist()):
        pools.setdefault(tuple(k for d, k in enumerate(key) if d != dim), []).append(entry)
    for members in pools.values():
        out[members] = (torch.log_softmax if log else torch.softmax)(values[members], 0)
    return out


CASES = [((6, 7), (), 30), ((5, 4, 6), (), 60), ((6, 5), (3,), 25), ((4, 3, 2), (2, 2), 20), ((9,), (), 5)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sparse_sizes,dense_sizes,nnz", CASES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_matches_torch_sparse_softmax_along_every_dim(device, sparse_sizes, dense_sizes, nnz, log):
    s = random_sparse(sparse_sizes, dense_sizes, nnz)
    ndim = len(sparse_sizes) + len(dense_sizes)
    ours_fn = torch_ragged.sparse.log_softmax if log else torch_ragged.sparse.softmax
    torch_fn = torch.sparse.log_softmax if log else torch.sparse.softmax
    for dim in [*range(ndim), -1]:
        expected = torch_fn(s, dim)
        actual = ours_fn(s.to(device), dim)
        assert actual.is_coalesced()
        assert torch.equal(actual._indices().cpu(), expected._indices())
        torch.testing.assert_close(actual._values().cpu(), expected._values())


@pytest.mark.parametrize("device", DEVICES)
def test_uncoalesced_input_sums_duplicates_first(device):
    s = random_sparse((4, 5), (), 40, coalesced=False)
    for dim in (0, 1):
        expected = torch.sparse.softmax(s, dim)
        actual = torch_ragged.sparse.softmax(s.to(device), dim)
        assert torch.equal(actual._indices().cpu(), expected._indices())
        torch.testing.assert_close(actual._values().cpu(), expected._values())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_half_precision_accumulates_in_float(device, dtype):
    s = random_sparse((30, 40), (), 400, dtype=dtype)
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-6}[dtype]
    for dim in (0, 1):
        for log in (False, True):
            op = torch_ragged.sparse.log_softmax if log else torch_ragged.sparse.softmax
            actual = op(s.to(device), dim)
            assert actual.dtype == dtype
            torch.testing.assert_close(actual._values().cpu().double(), pool_reference(s, dim, log),
                                       rtol=tol, atol=tol)


def test_dtype_casts_before_computing():
    s = random_sparse((5, 5), (), 12).to(torch.float32)
    out = torch_ragged.sparse.softmax(s, 1, dtype=torch.float64)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out._values(), torch.sparse.softmax(s, 1, dtype=torch.float64)._values())
    integer = torch.sparse_coo_tensor([[0, 1]], [1, 2], (3,), check_invariants=True)
    assert torch_ragged.sparse.softmax(integer, 0, dtype=torch.float32)._values().dtype == torch.float32


@pytest.mark.parametrize("device", DEVICES)
def test_minus_infinity_pools_and_single_entries_behave_like_torch(device):
    inf = float("inf")
    indices = torch.tensor([[0, 0, 1, 2, 2, 3], [0, 1, 2, 0, 3, 3]])
    values = torch.tensor([-inf, -inf, 4.0, -inf, 1.0, -inf], dtype=torch.float64)
    s = torch.sparse_coo_tensor(indices, values, (4, 4), check_invariants=True).coalesce()
    for dim in (0, 1):
        for log in (False, True):
            expected = (torch.sparse.log_softmax if log else torch.sparse.softmax)(s, dim)._values()
            actual = (torch_ragged.sparse.log_softmax if log else torch_ragged.sparse.softmax)(s.to(device), dim)
            torch.testing.assert_close(actual._values().cpu(), expected, equal_nan=True)


def test_large_sizes_use_memory_proportional_to_nnz():
    # torch sizes its pool table by the product of the other dims; here (4000, 4000, 8) with 1000 entries
    s = random_sparse((4000, 4000, 8), (), 1000, dtype=torch.float32, seed=3)
    out = torch_ragged.sparse.softmax(s, 2)
    torch.testing.assert_close(out._values().double(), pool_reference(s, 2, False))


# ---- autograd, registration, compile ----

INDICES = torch.tensor([[0, 0, 1, 1, 2], [0, 2, 1, 2, 2]])  # coalesced
SIZE = (3, 3, 2)


def leaf(*shape, device="cpu"):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(9), dtype=torch.float64).to(
        device).requires_grad_(True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_gradcheck_and_gradgradcheck(device, dim, log):
    indices = INDICES.to(device)
    values = leaf(5, 2, device=device)
    assert gradcheck(lambda v: ops.sparse_softmax(indices, v, SIZE, dim, log), (values,))
    assert gradgradcheck(lambda v: ops.sparse_softmax(indices, v, SIZE, dim, log), (values,))
    assert gradcheck(lambda v: ops.sparse_pool_sum(indices, v, SIZE, dim), (values,))


def test_gradients_through_torch_sparse_tensors_match_torch():
    values = leaf(5, 2)
    expected_values = values.detach().clone().requires_grad_(True)
    weight = torch.randn(5, 2, dtype=torch.float64)
    ours = torch_ragged.sparse.softmax(torch.sparse_coo_tensor(INDICES, values, SIZE), 0)
    (ours.values() * weight).sum().backward()
    theirs = torch.sparse.softmax(torch.sparse_coo_tensor(INDICES, expected_values, SIZE).coalesce(), 0)
    (theirs.values() * weight).sum().backward()
    torch.testing.assert_close(values.grad, expected_values.grad)


@pytest.mark.parametrize("dim,log", [(0, False), (1, True), (2, False)])
def test_opcheck(dim, log):
    values = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    opcheck(ops.sparse_softmax.default, (INDICES, values, SIZE, dim, log))  # the triplet overload
    opcheck(ops.sparse_pool_sum, (INDICES, values, SIZE, dim))


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_graph_attention(dynamic):
    def attention(indices, scores, features):
        # softmax over each node's incoming edges (column j of an adjacency matrix), then aggregate
        weights = torch.ops.torch_ragged.sparse_softmax(indices, scores, [4, 4], 0)
        return torch.ops.torch_ragged.segment_sum(features[indices[0]] * weights.unsqueeze(1),
                                                  torch.tensor([0, 2, 3, 5, 6]))

    edges = torch.tensor([[0, 1, 2, 0, 3, 1], [0, 0, 1, 2, 2, 3]])  # (source, target)
    indices = edges[:, (edges[0] * 4 + edges[1]).argsort()]  # coalesced: sorted by (source, target)
    scores = torch.randn(6, dtype=torch.float64, requires_grad=True)
    features = torch.randn(4, 3, dtype=torch.float64)
    compiled = torch.compile(attention, fullgraph=True, dynamic=dynamic)
    actual, expected = compiled(indices, scores, features), attention(indices, scores, features)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(torch.autograd.grad(actual.sum(), scores)[0],
                               torch.autograd.grad(expected.sum(), scores)[0])


def test_bad_input():
    with pytest.raises(IndexError, match="torch_ragged.sparse_softmax: dim 3 is out of range for a 3-D tensor"):
        ops.sparse_softmax(INDICES, torch.ones(5, 2), SIZE, 3)
    with pytest.raises(TypeError, match="torch_ragged.sparse_softmax: values must be floating"):
        ops.sparse_softmax(INDICES, torch.ones(5, 2, dtype=torch.long), SIZE, 0)
    with pytest.raises(TypeError, match="torch_ragged.sparse.softmax: expected a sparse COO, CSR or CSC tensor, "
                                        "got torch.strided"):
        torch_ragged.sparse.softmax(torch.ones(3), 0)
    with pytest.raises(IndexError, match="out of range"):
        torch_ragged.sparse.softmax(torch.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,), check_invariants=False), 0)


@pytest.mark.parametrize("magnitude", [1e4, 1e5, 1e7])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_large_magnitudes_match_torch(magnitude, log):
    """Values near -magnitude (float32): (x - max) - log(sum), never x - (max + log(sum)), which rounds the
    log-sum away; forward and backward against torch.sparse in float64, then rounded."""
    generator = torch.Generator().manual_seed(int(magnitude))
    indices = torch.randint(0, 30, (2, 300), generator=generator)
    values = -magnitude + torch.randint(0, 4, (300,), generator=generator).float()
    s = torch.sparse_coo_tensor(indices, values, (30, 30)).coalesce()
    ours_fn = torch_ragged.sparse.log_softmax if log else torch_ragged.sparse.softmax
    torch_fn = torch.sparse.log_softmax if log else torch.sparse.softmax
    for dim in (0, 1):
        leaf = s.clone().requires_grad_(True)
        actual = ours_fn(leaf, dim)
        expected = torch_fn(s.double(), dim)
        torch.testing.assert_close(actual._values(), expected._values().float(), rtol=1e-6, atol=1e-6)
        grad = torch.randn(actual._values().shape, generator=generator)
        actual.values().backward(grad)
        leaf64 = s.double().requires_grad_(True)
        torch_fn(leaf64, dim).values().backward(grad.double())
        torch.testing.assert_close(leaf.grad.coalesce()._values(), leaf64.grad.coalesce()._values().float(),
                                   rtol=1e-5, atol=1e-5)


def test_a_matrix_whose_rows_are_out_of_order_along_dim_1_is_still_pooled_by_row():
    """The raw op along dim 1 of a matrix takes the row offsets directly when the rows come sorted; entries in
    another order (unique, not coalesced) must give the same values, entry by entry."""
    g = torch.Generator().manual_seed(5)
    dense = torch.randn(30, 20, generator=g, dtype=torch.float64) * (torch.rand(30, 20, generator=g) < 0.3)
    coalesced = dense.to_sparse()
    order = torch.randperm(coalesced._nnz(), generator=g)
    shuffled_indices, shuffled_values = coalesced.indices()[:, order], coalesced.values()[order]
    for log in (False, True):
        expected = ops.sparse_softmax(coalesced.indices(), coalesced.values(), list(dense.shape), 1, log)
        got = ops.sparse_softmax(shuffled_indices, shuffled_values, list(dense.shape), 1, log)
        torch.testing.assert_close(got, expected[order])


@pytest.mark.parametrize("log", [False, True])
def test_row_offsets_skip_runs_of_one_row_by_blocks_and_still_see_every_bad_row(log):
    """The row offsets pass skips ids equal to the previous one a block of 8 at a time and jumps to the first that
    differs. Rows of 1 to 40 entries (runs shorter and longer than a block, starting at every offset within one);
    then, one at a time, an entry at each of 17 consecutive positions inside a 40-entry run moved to an earlier
    row (a drop the block must not hide) or to the next (which makes the entry after it a drop): the general path
    then sorts. Each value against a dense float64 (log_)softmax over its row."""
    g = torch.Generator().manual_seed(21)
    lengths = torch.cat([torch.arange(1, 41), torch.tensor([0, 40, 0, 13])])  # empty rows too
    n_rows, n_cols = lengths.numel(), 64
    rows = torch.repeat_interleave(torch.arange(n_rows), lengths)
    cols = torch.cat([torch.randperm(n_cols, generator=g)[:k].sort().values for k in lengths.tolist()])
    values = torch.randn(rows.numel(), generator=g, dtype=torch.float64) * 30
    run_start = int(lengths[:41].sum())  # the second 40-entry run (row 41), after an empty row
    # rows 40 and 42 are empty: an entry of row 41 moved there shares no position with another entry
    cases = [None] + [(run_start + p, moved) for p in range(3, 20) for moved in (-1, +1)]
    for case in cases:
        r = rows.clone()
        if case is not None:
            position, moved = case
            r[position] += moved
            assert (r.diff() < 0).any()
        dense = torch.full((n_rows, n_cols), float("-inf"), dtype=torch.float64)
        dense[r, cols] = values
        reference = (torch.log_softmax if log else torch.softmax)(dense, 1)[r, cols]
        got = ops.sparse_softmax(torch.stack([r, cols]), values, [n_rows, n_cols], 1, log)
        torch.testing.assert_close(got, reference, msg=f"case {case}")


@pytest.mark.parametrize("case", ["sorted", "drop at a chunk edge", "drop inside a chunk"])
@pytest.mark.parametrize("log", [False, True])
def test_rows_over_several_parallel_chunks_along_dim_1(case, log):
    """A CPU matrix's row offsets come from one parallel pass over chunks of 2^16 entries, each checking its rows
    (order and range) against the previous chunk's last. 200k entries (rows empty here and there), as given or with
    one row out of order at a chunk edge or inside a chunk (the general path then sorts): each entry's value against
    a dense float64 (log_)softmax over its row."""
    g = torch.Generator().manual_seed(9)
    n_rows, n_cols, nnz = 50_000, 40, 200_000
    keys = torch.randperm(n_rows * n_cols, generator=g)[:nnz].sort().values
    indices = torch.stack([keys // n_cols, keys % n_cols])
    values = torch.randn(nnz, generator=g, dtype=torch.float64) * 30
    if case != "sorted":
        i = 65_536 if case == "drop at a chunk edge" else 100_000
        j = i - 200  # an entry of an earlier row: position i now drops below position i - 1
        assert indices[0, j] < indices[0, i - 1]
        swap = torch.tensor([i, j])
        indices[:, swap.flip(0)], values[swap.flip(0)] = indices[:, swap].clone(), values[swap].clone()
    dense = torch.full((n_rows, n_cols), float("-inf"), dtype=torch.float64)
    dense[indices[0], indices[1]] = values
    reference = (torch.log_softmax if log else torch.softmax)(dense, 1)[indices[0], indices[1]]
    got = ops.sparse_softmax(indices, values, [n_rows, n_cols], 1, log)
    torch.testing.assert_close(got, reference)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("log", [False, True])
def test_pools_along_dim_0_keep_a_stable_sorts_order_bit_for_bit(log, index_dtype):
    """Along dim 0 of a CPU matrix with few columns for its entries, the pools come from one counting pass over the
    columns (no sort), and scalar values are normalised in place. A pool's entries must count in input order, as a
    stable sort by column leaves them: the values are then bitwise segment_softmax's over the entries sorted stably
    by column (torch.sort), put back in place.
    150k entries in random row order (several parallel chunks), ~300 per pool of comparable terms (another order of
    their sums changes the last bits), the last 20 columns empty."""
    g = torch.Generator().manual_seed(12)
    n_rows, n_cols, nnz = 3000, 500, 150_000
    keys = torch.randperm(n_rows * (n_cols - 20), generator=g)[:nnz]
    rows, cols = keys // (n_cols - 20), keys % (n_cols - 20)
    values = torch.randn(nnz, generator=g)
    order = torch.sort(cols, stable=True).indices
    offsets = torch.zeros(n_cols + 1, dtype=torch.long)
    offsets[1:] = torch.bincount(cols, minlength=n_cols).cumsum(0)
    segment_op = ops.segment_log_softmax if log else ops.segment_softmax
    expected = torch.empty_like(values)
    expected[order] = segment_op(values[order].unsqueeze(1), offsets).squeeze(1)
    # int64 columns are the counting pass's keys as they are; int32 ones go through the flattened keys
    got = ops.sparse_softmax(torch.stack([rows, cols]).to(index_dtype), values, [n_rows, n_cols], 0, log)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_an_index_out_of_range_in_any_dim_is_refused_by_name(index_dtype):
    """Pools are read off some dims only (along dim 0 of a matrix: its columns), so an index out of range in another
    (a tensor flagged coalesced that is not) joined a real pool; the op, the wrapper and torch's own call under
    accelerate() refuse it, naming the entry."""
    g = torch.Generator().manual_seed(13)
    rows, cols = torch.randint(0, 300, (20_000,), generator=g), torch.randint(0, 50, (20_000,), generator=g)
    values = torch.randn(20_000, generator=g)
    for dim in (0, 1):
        for bad_dim, bad in ((0, 300), (0, -1), (1, 50), (1, 10**9)):
            indices = torch.stack([rows, cols]).to(index_dtype)
            if bad <= torch.iinfo(index_dtype).max:
                indices[bad_dim, 9000] = bad
            else:
                continue
            with pytest.raises(IndexError, match=rf"torch_ragged.sparse_softmax: indices\[{bad_dim}\]\[9000\] = {bad} "
                                                  "is out of range"):
                ops.sparse_softmax(indices, values, [300, 50], dim)
    lying = torch.sparse_coo_tensor([[0, 7], [1, 1]], [1.0, 2.0], (3, 3), is_coalesced=True, check_invariants=False)
    for dim in (0, 1):
        with pytest.raises(IndexError, match=r"indices\[0\]\[1\] = 7 is out of range for size\[0\] = 3"):
            torch_ragged.sparse.softmax(lying, dim)
        with torch_ragged.sparse.accelerate(), pytest.raises(IndexError, match=r"indices\[0\]\[1\] = 7"):
            torch.sparse.log_softmax(lying, dim)


def sorted_route(indices, values, sizes, dim, log):
    """segment_(log_)softmax over the entries sorted stably by their key without `dim`, put back in place: the
    pools in order, as the general path forms them."""
    other = [d for d in range(len(sizes)) if d != dim]
    keys = torch.zeros(indices.shape[1], dtype=torch.long)
    for d in other:
        keys = keys * sizes[d] + indices[d]
    order = torch.sort(keys, stable=True).indices
    positions = 1
    for d in other:
        positions *= sizes[d]
    offsets = torch.zeros(positions + 1, dtype=torch.long)
    offsets[1:] = torch.bincount(keys, minlength=positions).cumsum(0)
    segment_op = ops.segment_log_softmax if log else ops.segment_softmax
    expected = torch.empty_like(values)
    expected[order] = segment_op(values[order].unsqueeze(1), offsets).squeeze(1)
    return expected


def pools_of_every_size(seed, dtype):
    """A 100k x 2000 matrix, 300k distinct entries in random order: columns 0-2 hold 50k each (pools crossing
    level-1 and level-2 nodes of the reduction tree, and the tasks of its CPU walk), the others about 75 each, some
    none. Values at magnitudes up to 1e7 and offsets to 1e5, with a NaN pool, an infinite entry, a pool of only
    -inf, and zeros of both signs as the maxima of a pool."""
    g = torch.Generator().manual_seed(seed)
    n_rows = 100_000
    big_rows = torch.cat([torch.randperm(n_rows, generator=g)[:50_000] for _ in range(3)])
    big_cols = torch.arange(3).repeat_interleave(50_000)
    small = torch.randint(0, n_rows * 1987, (155_000,), generator=g).unique()[:150_000]  # distinct
    rows = torch.cat([big_rows, small // 1987])
    cols = torch.cat([big_cols, 3 + small % 1987])
    shuffle = torch.randperm(cols.numel(), generator=g)
    rows, cols = rows[shuffle], cols[shuffle]
    # comparable terms in the big pools (else every sum is its largest term and the order of adds leaves no
    # trace), at offsets 0, 1e4 and -1e5; magnitudes 1 to 1e7 in the small ones
    scale = torch.where(cols < 3, 1.0, 10.0 ** torch.randint(0, 8, (cols.numel(),), generator=g))
    offset = torch.tensor([0.0, 1e4, -1e5])[cols.clamp(max=2)] * (cols < 3)
    values = torch.randn(cols.numel(), generator=g, dtype=torch.float64) * scale + offset
    values[(cols == 5).nonzero()[:1]] = float("nan")
    values[(cols == 6).nonzero()[:1]] = float("inf")
    values[cols == 7] = float("-inf")
    at_8 = (cols == 8).nonzero().squeeze(1)
    values[at_8] = -1.0
    values[at_8[0]], values[at_8[-1]] = 0.0, -0.0
    return torch.stack([rows, cols]), values.to(dtype), [n_rows, 2000]


def column_pools_reference(indices, values, n_cols, log):
    """(log_)softmax of each column's entries in float64, by torch's scatter reductions."""
    values, cols = values.double(), indices[1]
    top = torch.full((n_cols,), float("-inf"), dtype=torch.float64).scatter_reduce(0, cols, values, "amax")
    shifted = values - top[cols]
    sums = torch.zeros(n_cols, dtype=torch.float64).scatter_add(0, cols, shifted.exp())
    return shifted - sums.log()[cols] if log else shifted.exp() / sums[cols]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("log", [False, True])
def test_pools_along_dim_0_replay_the_reduction_tree_bit_for_bit_at_every_level(dtype, log):
    """Along dim 0 of a CPU matrix the scalar values are normalised where they lie: each column's sums replay the
    reduction tree over the positions its entries would have in column order. Against the sorted route (stable sort
    by column, segment_softmax, put back), bit for bit, for pools of every size (chunk-, level-1- and level-2-edges
    crossed, across the CPU walk's tasks), NaN, inf, -inf-only pools, +-0 maxima and magnitudes to 1e7, with 1, 2, 3,
    5 and 9 threads (one key range per thread; the partition by range has paths for 2, 4, 8 and more ranges)."""
    indices, values, sizes = pools_of_every_size(21, dtype)
    expected = sorted_route(indices, values, sizes, 0, log)
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3, 5, 9):
            torch.set_num_threads(n)
            got = ops.sparse_softmax(indices, values, sizes, 0, log)
            assert torch.equal(got.isnan(), expected.isnan()), f"{n} threads"
            assert torch.equal(got.nan_to_num(), expected.nan_to_num()), f"{n} threads"
            signs = torch.signbit(got[got == 0]), torch.signbit(expected[expected == 0])
            assert torch.equal(*signs), f"{n} threads"
    finally:
        torch.set_num_threads(threads)
    # and the result is a softmax: against a float64 loop per pool where the pool holds no NaN or -inf-only
    reference = column_pools_reference(indices, values, sizes[1], log)
    finite = reference.isfinite() if log else ~reference.isnan()
    tolerance = {torch.float32: 1e-4, torch.float64: 1e-10, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(got.double()[finite], reference[finite], atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("log", [False, True])
def test_pools_of_a_3d_tensor_along_each_dim_replay_the_tree_bit_for_bit(log):
    """The flattened keys of a 3-D tensor (other dims' positions fewer than 4 per entry) take the same in-place route,
    one key range per thread: against the sorted route, bit for bit, along dims 0, 1 and 2."""
    g = torch.Generator().manual_seed(22)
    sizes = [30, 40, 50]
    keys = torch.randperm(30 * 40 * 50, generator=g)[:50_000]
    indices = torch.stack([keys // 2000, keys // 50 % 40, keys % 50])
    values = torch.randn(keys.numel(), generator=g) * 100
    for dim in range(3):
        got = ops.sparse_softmax(indices, values, sizes, dim, log)
        assert torch.equal(got, sorted_route(indices, values, sizes, dim, log)), f"dim {dim}"


# ---- precision at large magnitudes, through every route that forms the pools ----

def exact_pools(indices, values, dim, log, weight):
    """Each pool's (log_)softmax and the gradient of sum(weight * out) in numpy's extended precision (80-bit long
    double, 64-bit mantissa), from the values as given: the reference the float64 results are held to."""
    x = values.numpy().astype(np.longdouble)
    w = weight.numpy().astype(np.longdouble)
    out, grad = np.zeros_like(x), np.zeros_like(x)
    pools = {}
    for entry, key in enumerate(indices.t().tolist()):
        pools.setdefault(tuple(k for d, k in enumerate(key) if d != dim), []).append(entry)
    for members in pools.values():
        shifted = x[members] - x[members].max(axis=0)
        log_sum = np.log(np.exp(shifted).sum(axis=0))
        y = shifted - log_sum
        if log:
            out[members] = y
            grad[members] = w[members] - np.exp(y) * w[members].sum(axis=0)
        else:
            p = np.exp(y)
            out[members] = p
            grad[members] = p * (w[members] - (w[members] * p).sum(axis=0))
    return out, grad


def unique_entries(sparse_sizes, nnz, g):
    """nnz distinct positions (no duplicates: coalescing would round their sums first)."""
    flat = torch.randperm(int(np.prod(sparse_sizes)), generator=g)[:nnz]
    indices = []
    for size in reversed(sparse_sizes):
        indices.append(flat % size)
        flat = flat // size
    return torch.stack(indices[::-1])


# (sparse sizes, dense sizes, nnz, dim, the route it takes)
ROUTES = [
    ((40, 30), (), 500, 1, "row offsets of a matrix"),
    ((40, 30), (), 500, 0, "small keys, normalised in place"),
    ((40, 30), (3,), 500, 0, "small keys, counting pass (hybrid values)"),
    ((6, 5, 40), (), 500, 2, "small keys of a 3-D tensor"),
    ((3, 200_000), (), 2000, 0, "general sort of keys (positions >> nnz)"),
    ((200_000, 2, 3), (), 2000, 2, "general sort, keys of a coalesced tensor already sorted"),
    ((2**40, 2**40, 4), (), 300, 2, "lexicographic sort (flat keys past int64)"),
    ((2000,), (2,), 800, 0, "one pool (1-D sparse), hybrid"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("magnitude", [1e4, 3e6, 1e7])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("route", ROUTES, ids=[r[4] for r in ROUTES])
def test_float64_at_large_magnitudes_through_every_pool_route_is_exact_to_a_few_ulps(route, log, magnitude, device):
    """Values near +-magnitude: forward and gradient within a few float64 ulps of the long-double result, on every
    route (torch's own float64 sparse log_softmax computes x - (max + log sum) and errs by ~ulp(magnitude): 2.3e-10
    at 3e6, so it is not the reference here)."""
    sparse_sizes, dense_sizes, nnz, dim, _ = route
    g = torch.Generator().manual_seed(int(magnitude) % 1000 + nnz)
    indices = unique_entries(sparse_sizes, nnz, g) if len(sparse_sizes) < 3 or sparse_sizes[0] < 2**31 else \
        torch.stack([torch.randint(0, 2**40, (nnz,), generator=g), torch.randint(0, 2**40, (nnz,), generator=g),
                     torch.randint(0, 4, (nnz,), generator=g)])
    sign = -1 if log else 1
    values = sign * magnitude + torch.randn(nnz, *dense_sizes, generator=g, dtype=torch.float64) * 3
    size = (*sparse_sizes, *dense_sizes)
    indices, values, _, _ = ops.sparse_coalesce(indices, values, size, True, return_order=False)  # past int64 too
    weight = torch.randn(values.shape, generator=g, dtype=torch.float64)
    exact_out, exact_grad = exact_pools(indices, values, dim, log, weight)
    leaf = values.to(device).requires_grad_()
    out = ops.sparse_softmax(indices.to(device), leaf, size, dim, log)  # the GPU sorts on every route
    (out * weight.to(device)).sum().backward()
    eps = torch.finfo(torch.float64).eps
    for got, exact in ((out.detach(), exact_out), (leaf.grad, exact_grad)):
        error = np.abs(got.cpu().numpy().astype(np.longdouble) - exact)
        assert float((error / np.maximum(1.0, np.abs(exact))).max()) <= 16 * eps


@pytest.mark.parametrize("magnitude", [1e4, 3e6, 1e7])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("route", ROUTES[:3], ids=[r[4] for r in ROUTES[:3]])
def test_float32_at_large_magnitudes_matches_torchs_dense_softmax(route, log, magnitude):
    """The same routes in float32, against torch's dense (log_)softmax of the padded matrix (-inf where no entry),
    which shifts before adding as this library does."""
    sparse_sizes, dense_sizes, nnz, dim, _ = route
    g = torch.Generator().manual_seed(int(magnitude) % 997)
    sign = -1 if log else 1
    values = (sign * magnitude + torch.randn(nnz, *dense_sizes, generator=g) * 3).float()
    s = torch.sparse_coo_tensor(unique_entries(sparse_sizes, nnz, g), values, (*sparse_sizes, *dense_sizes)).coalesce()
    dense = torch.full(s.shape, -torch.inf).index_put_(tuple(s.indices()), s.values())
    expected = (torch.log_softmax if log else torch.softmax)(dense, dim)[tuple(s.indices())]
    got = (torch_ragged.sparse.log_softmax if log else torch_ragged.sparse.softmax)(s, dim).values()
    torch.testing.assert_close(got, expected, rtol=2e-6, atol=2e-6)
