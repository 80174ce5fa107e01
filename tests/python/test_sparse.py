"""The sparse family against torch.sparse and dense math, over dtypes, shapes, index dtypes and devices."""

import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch_ragged
from devices import DEVICES

ops = torch.ops.torch_ragged
VALUE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                torch.int8, torch.complex64]
# (sparse sizes, dense sizes): sparse_dim 1..4, dense dims 0..2, zero-size dims
SHAPES = [((7,), ()), ((5, 6), ()), ((4, 3), (2,)), ((3, 4, 5), (2, 3)), ((2, 3, 2, 4), ()), ((0, 4), (2,)),
          ((5, 6), (0,)), ((1,), ())]


def random_triplet(sparse_sizes, dense_sizes, nnz, dtype, seed=0, index_dtype=torch.long):
    """Entries drawn from a small range so duplicates are common; values small integers (exact in fp16)."""
    g = torch.Generator().manual_seed(seed)
    if 0 in sparse_sizes:
        indices = torch.zeros((len(sparse_sizes), 0), dtype=index_dtype)
    else:
        indices = torch.stack([torch.randint(0, s, (nnz,), generator=g) for s in sparse_sizes]).to(index_dtype)
    count = indices.shape[1]
    if dtype == torch.bool:
        values = torch.rand((count, *dense_sizes), generator=g) > 0.5
    else:
        values = torch.randint(-8, 9, (count, *dense_sizes), generator=g).to(dtype)
    return indices, values, (*sparse_sizes, *dense_sizes)


def torch_sparse(indices, values, size):
    return torch.sparse_coo_tensor(indices.long(), values, size, check_invariants=True)


def assert_same_sparse(actual, expected):
    """Same coalesced structure and values (expected: torch's coalesce)."""
    assert actual.is_coalesced()
    expected = expected.coalesce()
    assert torch.equal(actual._indices().cpu(), expected._indices().cpu())
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual._values().cpu(), expected._values().cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sparse_sizes,dense_sizes", SHAPES)
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_coalesce_matches_torch(device, sparse_sizes, dense_sizes, dtype):
    indices, values, size = random_triplet(sparse_sizes, dense_sizes, 40, dtype)
    s = torch_sparse(indices, values, size)
    assert_same_sparse(torch_ragged.sparse.coalesce(s.to(device)), s)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_raw_coalesce_keeps_the_index_dtype_and_returns_its_order(device, index_dtype):
    indices, values, size = random_triplet((6, 5), (3,), 60, torch.float64, seed=1, index_dtype=index_dtype)
    out_indices, out_values, permutation, first_idx = ops.sparse_coalesce(indices.to(device), values.to(device),
                                                                          size)
    assert out_indices.dtype == index_dtype
    expected = torch_sparse(indices, values, size).coalesce()
    assert torch.equal(out_indices.cpu().long(), expected.indices())
    # the order: each output value is the in-order sum of the permuted inputs of its run
    permutation, first_idx = permutation.cpu(), first_idx.cpu()
    assert sorted(permutation.tolist()) == list(range(indices.shape[1]))
    for run in range(out_values.shape[0]):
        members = permutation[first_idx[run]:first_idx[run + 1]]
        assert members.tolist() == sorted(members.tolist())  # duplicates in input order
        assert torch.equal(out_values[run].cpu(), values[members].sum(0))


@pytest.mark.parametrize("device", DEVICES)
def test_sorted_and_coalesced_inputs_take_the_fast_paths_with_the_same_result(device):
    indices, values, size = random_triplet((50, 40), (), 500, torch.float64, seed=2)
    coalesced = torch_sparse(indices, values, size).coalesce()
    # already coalesced (not flagged): identity order, copies
    i, v, permutation, first_idx = ops.sparse_coalesce(coalesced.indices().to(device), coalesced.values().to(device),
                                                       size)
    assert torch.equal(i.cpu(), coalesced.indices()) and torch.equal(v.cpu(), coalesced.values())
    assert torch.equal(permutation.cpu(), torch.arange(i.shape[1]))
    assert torch.equal(first_idx.cpu(), torch.arange(i.shape[1] + 1))
    # sorted with duplicates: repeat every entry, keep the order
    doubled_i = coalesced.indices().repeat_interleave(2, dim=1)
    doubled_v = coalesced.values().repeat_interleave(2)
    i, v, permutation, _ = ops.sparse_coalesce(doubled_i.to(device), doubled_v.to(device), size)
    assert torch.equal(i.cpu(), coalesced.indices()) and torch.equal(v.cpu(), 2 * coalesced.values())
    assert torch.equal(permutation.cpu(), torch.arange(doubled_i.shape[1]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["contiguous", "rows of a wider buffer", "entries strided"])
@pytest.mark.parametrize("case", ["random", "sorted with duplicates", "coalesced", "keys over 63 bits", "bool"])
def test_coalesce_without_the_order_returns_it_empty_and_the_same_result(device, case, layout):
    """return_order=False: permutation and first_idx come back empty on every path (the same shapes the fake
    kernel promises), indices and values as with the order, and the values' gradient is still the per-run one.
    Indices as torch's coalesce leaves them (rows of a wider buffer) are read in place; any layout is accepted."""
    sizes = (2**40, 2**40) if case == "keys over 63 bits" else (50, 40)
    indices, values, size = random_triplet(sizes, (), 300, torch.float64, seed=7)
    coalesced = torch_sparse(indices, values, size).coalesce() if sizes[0] < 2**20 else None
    if case == "sorted with duplicates":
        indices, values = coalesced.indices().repeat_interleave(2, 1), coalesced.values().repeat_interleave(2)
    elif case == "coalesced":
        indices, values = coalesced.indices(), coalesced.values()
    elif case == "bool":
        values = values > 0
    sums = {}  # the definition: each distinct index tuple's values summed (small integers: exact)
    for col, value in zip(indices.t().tolist(), values.double().tolist(), strict=True):
        sums[tuple(col)] = sums.get(tuple(col), 0.0) + value
    keys = sorted(sums)
    expected_indices = torch.tensor(keys).t().reshape(2, -1)
    expected_values = torch.tensor([sums[k] for k in keys], dtype=torch.float64)
    leaf = values.to(device).requires_grad_(values.is_floating_point())
    indices = indices.to(device)
    if layout == "rows of a wider buffer":
        indices = torch.cat([indices, indices.flip(1)], 1)[:, :indices.shape[1]]
        assert indices.stride() == (2 * indices.shape[1], 1)
    elif layout == "entries strided":
        indices = indices.t().contiguous().t()
    i, v, permutation, first_idx = ops.sparse_coalesce(indices, leaf, size, True, False)
    assert permutation.shape == (0,) and first_idx.shape == (0,) and permutation.dtype == torch.long
    assert torch.equal(i.cpu(), expected_indices)
    if case == "bool":
        assert torch.equal(v.cpu(), expected_values != 0)
        return
    assert torch.equal(v.cpu(), expected_values)
    weights = torch.randn(v.shape, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    (grad,) = torch.autograd.grad((v * weights.to(device)).sum(), leaf)
    # each input's gradient is the weight of the run it joined
    run_of = {k: r for r, k in enumerate(keys)}
    expected_grad = torch.stack([weights[run_of[tuple(col)]] for col in indices.cpu().t().tolist()])
    assert torch.equal(grad.cpu(), expected_grad)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("sparse_sizes", [(300, 200), (40, 30, 60)])
def test_the_already_coalesced_check_stops_at_any_entry_that_is_not(sparse_sizes, index_dtype):
    """The CPU looks for input that is coalesced already (in range, strictly increasing) in blocks of entries over
    several chunks; one duplicate, one entry out of order or one index out of range anywhere (the first entry, a
    block's edge, the last entry) must send it to the sort: the result is then torch's coalesce, and an index out of
    range is refused by name."""
    indices, values, size = random_triplet(sparse_sizes, (), 60_000, torch.float64, seed=4, index_dtype=index_dtype)
    coalesced = torch_sparse(indices.long(), values, size).coalesce()
    good_i, good_v = coalesced.indices().to(index_dtype), coalesced.values()
    nnz = good_i.shape[1]
    i, v, permutation, first_idx = ops.sparse_coalesce(good_i, good_v, size)
    assert torch.equal(i, good_i) and torch.equal(v, good_v) and i.data_ptr() != good_i.data_ptr()
    assert torch.equal(permutation, torch.arange(nnz)) and torch.equal(first_idx, torch.arange(nnz + 1))
    i, v, permutation, first_idx = ops.sparse_coalesce(good_i, good_v, size, True, False)
    assert torch.equal(i, good_i) and torch.equal(v, good_v) and i.data_ptr() != good_i.data_ptr()
    assert permutation.numel() == 0 and first_idx.numel() == 0
    assert nnz > 32768  # more than one parallel chunk
    for entry in (0, 1, 1023, 1024, 32768, nnz - 1):
        duplicated = good_i.clone()
        duplicated[:, entry] = good_i[:, entry - 1 if entry > 0 else 1]  # a duplicate (out of order at entry 0)
        expected = torch_sparse(duplicated.long(), good_v, size).coalesce()
        i, v, _, _ = ops.sparse_coalesce(duplicated, good_v, size)
        assert torch.equal(i.long(), expected.indices()), entry
        torch.testing.assert_close(v, expected.values())
        out_of_range = good_i.clone()
        out_of_range[-1, entry] = size[len(sparse_sizes) - 1]
        with pytest.raises(IndexError, match="out of range"):
            ops.sparse_coalesce(out_of_range, good_v, size)


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_run_offsets_hold_at_every_chunk_edge(threads):
    """The CPU finds the runs of equal sorted keys in parallel chunks without a branch per key (each position stored
    at the next free slot, only heads advance it): a run across chunk edges, runs ending at an edge, all-duplicate
    chunks. Reference: torch.unique's counts."""
    g = torch.Generator().manual_seed(12)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for trial in range(12):
            nnz = int(torch.randint(70_000, 250_000, (1,), generator=g))
            span = [2, 1000, nnz, 4 * nnz][trial % 4]
            index = torch.randint(0, span, (1, nnz), generator=g)
            if trial % 3 == 0:
                index[0, : nnz // 2] = span // 2  # one run over the first chunks
            _, _, _, first_idx = ops.sparse_coalesce(index, torch.ones(nnz), [span])
            _, counts = torch.unique(index[0], return_counts=True)
            assert torch.equal(first_idx, torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])), trial
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("device", DEVICES)
def test_coalesce_of_many_entries_uses_every_radix_pass(device):
    # 1M x 1M: keys of 40 bits (5 byte digits), 200k entries with 30% duplicates, many threads' chunks
    g = torch.Generator().manual_seed(3)
    n = 200_000
    base = torch.randint(0, 10**6, (2, int(n * 0.7)), generator=g)
    indices = torch.cat([base, base[:, torch.randint(0, base.shape[1], (n - base.shape[1],), generator=g)]], 1)
    values = torch.randn(n, generator=g, dtype=torch.float64)
    size = (10**6, 10**6)
    expected = torch_sparse(indices, values, size).coalesce()
    actual = torch_ragged.sparse.coalesce(torch_sparse(indices, values, size).to(device))
    assert torch.equal(actual._indices().cpu(), expected.indices())
    torch.testing.assert_close(actual._values().cpu(), expected.values())


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("pattern", ["uniform with a busy row", "power-law rows", "one row only",
                                     "columns wider than 32 bits"])
def test_the_top_bits_sort_keeps_the_stable_order(pattern, threads):
    # 150k entries: the CPU sorts the row-major keys by their top bits, then each bucket. 1M x 1M (40-bit keys) packs
    # each key's bits below 2^10 first-level buckets with its position into one word, then sorts each bucket's words
    # by a digit below (insertion sort for short digits, a full sort for the busy row's). One bucket holding more
    # keys than the threads can share (power-law rows or one row, on 5 threads) takes the one-level sort, which falls
    # back to LSD radix passes when one row holds everything; columns of 2^40 leave too many bits below the buckets
    # for a word, and keys and positions are moved as they are.
    # Reference: torch's stable sort of the row-major keys.
    g = torch.Generator().manual_seed(11)
    n = 150_000
    num_cols = 2**40 if pattern.startswith("columns") else 10**6
    if pattern == "power-law rows":  # row r holds ~ 1 / (r + 1) of the entries
        rows = torch.multinomial(1.0 / torch.arange(1, 10**6 + 1, dtype=torch.float64), n, replacement=True,
                                 generator=g)
    else:
        rows = torch.full((n,), 7) if pattern == "one row only" else torch.randint(0, 10**6, (n,), generator=g)
    rows[:5000] = 123_456  # a row with thousands of entries (duplicates among them)
    cols = torch.randint(0, 3000 if pattern == "one row only" else num_cols, (n,), generator=g)
    cols[5000:5100] = cols[100:200]  # duplicates in other rows too
    rows[5000:5100] = rows[100:200]
    indices = torch.stack([rows, cols])
    values = torch.randn(n, generator=g, dtype=torch.float64)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out_indices, out_values, permutation, first_idx = ops.sparse_coalesce(indices, values, (10**6, num_cols))
    finally:
        torch.set_num_threads(before)
    keys = rows * num_cols + cols
    assert torch.equal(permutation, torch.sort(keys, stable=True).indices)
    expected = python_coalesce_by_sorting(keys, indices, values)
    assert torch.equal(out_indices, expected[0])
    torch.testing.assert_close(out_values, expected[1])  # long runs are summed in the reduction tree's order


def python_coalesce_by_sorting(keys, indices, values):
    """Entries in stable key order, each run's float64 values added one by one in that order (Python floats are
    IEEE doubles): coalesce by its definition."""
    assert values.dtype == torch.float64
    order = torch.sort(keys, stable=True).indices
    sorted_keys, entries, numbers = keys[order].tolist(), order.tolist(), values.tolist()
    heads = [i for i in range(len(entries)) if i == 0 or sorted_keys[i] != sorted_keys[i - 1]]
    sums = []
    for head, stop in zip(heads, [*heads[1:], len(entries)], strict=True):
        total = 0.0
        for i in entries[head:stop]:
            total += numbers[i]
        sums.append(total)
    return indices[:, order[heads]], torch.tensor(sums, dtype=torch.float64)


def python_coalesce(indices, values):
    """A dict of index tuple -> running sum, in input order, then the keys sorted: obviously coalesce."""
    sums = {}
    for entry, key in enumerate(map(tuple, indices.t().tolist())):
        sums[key] = sums[key] + values[entry] if key in sums else values[entry].clone()
    keys = sorted(sums)
    return torch.tensor(keys, dtype=torch.long).t().reshape(indices.shape[0], len(keys)), torch.stack(
        [sums[k] for k in keys])


@pytest.mark.parametrize("device", DEVICES)
def test_sizes_whose_flattened_index_overflows_int64_fall_back_to_a_lexicographic_sort(device):
    # torch itself cannot build such a tensor (numel overflows); the triplet op can coalesce it.
    size = (2**40, 2**40, 3)
    indices = torch.tensor([[2**39, 5, 2**39, 5, 0], [7, 2**38, 7, 1, 0], [2, 0, 2, 1, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    out_indices, out_values, _, _ = ops.sparse_coalesce(indices.to(device), values.to(device), size)
    expected_indices, expected_values = python_coalesce(indices, values)
    assert torch.equal(out_indices.cpu(), expected_indices) and torch.equal(out_values.cpu(), expected_values)


@pytest.mark.parametrize("device", DEVICES)
def test_bool_values_are_or_ed(device):
    indices = torch.tensor([[0, 0, 1, 1, 2]])
    values = torch.tensor([True, False, False, False, True])
    out = torch_ragged.sparse.coalesce(torch.sparse_coo_tensor(indices, values, (3,), check_invariants=True).to(device))
    assert out._values().dtype == torch.bool and out._values().cpu().tolist() == [True, False, True]


# ---- sum ----

def sum_cases():
    yield (5, 6), (), [None, 0, 1, -1, (0, 1)]
    yield (4, 3, 5), (2,), [None, 0, 1, 2, 3, (0, 2), (1, 2), (2, 3), (0, 1, 2), (-1,), (0, 3)]
    yield (3, 4), (2, 3), [2, 3, (2, 3), (0, 3), (1, 2)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sparse_sizes,dense_sizes,dims", list(sum_cases()))
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.float32])
def test_sum_matches_torch_sparse_sum(device, sparse_sizes, dense_sizes, dims, dtype):
    indices, values, size = random_triplet(sparse_sizes, dense_sizes, 50, dtype, seed=4)
    s = torch_sparse(indices, values, size)
    for dim in dims:
        expected = torch.sparse.sum(s) if dim is None else torch.sparse.sum(s, dim)
        actual = torch_ragged.sparse.sum(s.to(device), dim)
        if expected.layout == torch.sparse_coo:
            assert_same_sparse(actual, expected)
        else:
            assert actual.layout == torch.strided and actual.shape == expected.shape
            torch.testing.assert_close(actual.cpu(), expected, check_dtype=False)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_of_an_empty_tensor(device):
    s = torch.sparse_coo_tensor(torch.zeros((2, 0), dtype=torch.long), torch.zeros(0, 3), (4, 5, 3),
                                check_invariants=True).to(device)
    assert torch.equal(torch_ragged.sparse.sum(s, (0, 1)).cpu(), torch.zeros(3))
    assert torch_ragged.sparse.sum(s, 1)._nnz() == 0 and torch_ragged.sparse.sum(s, 1).shape == (4, 3)


# ---- sparse_mask, to_dense, to_sparse, index_select ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sparse_sizes,dense_sizes", SHAPES)
def test_to_dense_sparse_mask_and_to_sparse(device, sparse_sizes, dense_sizes):
    indices, values, size = random_triplet(sparse_sizes, dense_sizes, 30, torch.float64, seed=5)
    s = torch_sparse(indices, values, size)
    dense = torch_ragged.sparse.to_dense(s.to(device))
    assert torch.equal(dense.cpu(), s.to_dense())
    full = torch.randn(size, dtype=torch.float64)
    masked = torch_ragged.sparse.sparse_mask(full.to(device), s.to(device))
    assert torch.equal(masked._indices().cpu(), s._indices())
    assert torch.equal(masked._values().cpu(), full[tuple(s._indices())])
    for sparse_dim in range(1, len(size) + 1):
        back = torch_ragged.sparse.to_sparse(dense, sparse_dim)
        assert_same_sparse(back, dense.cpu().to_sparse(sparse_dim))


def test_to_sparse_drops_exact_zeros_only():
    dense = torch.tensor([0.0, -0.0, 1e-300, float("nan"), 0.0], dtype=torch.float64)
    s = torch_ragged.sparse.to_sparse(dense)
    assert s._indices().tolist() == [[2, 3]]


def _same_values(actual, expected):
    """Equal values, NaN where NaN (complex compared as real pairs)."""
    if actual.dtype.is_complex:
        actual, expected = torch.view_as_real(actual.to(torch.cdouble)), torch.view_as_real(expected.to(torch.cdouble))
    if actual.dtype.is_floating_point:
        return torch.equal(actual.isnan(), expected.isnan()) and torch.equal(actual.nan_to_num(), expected.nan_to_num())
    return torch.equal(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
                                   torch.complex128, torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32,
                                   torch.int64])
@pytest.mark.parametrize("shape", [(7, 5, 3), (3, 70), (100,), (2, 3, 41), (1, 33), (65, 1), (4, 0, 2)])
def test_to_sparse_matches_torch_for_every_dtype(dtype, shape):
    # The CPU kernel tests blocks of 32 values at once and walks lines of the last sparse dim: shapes
    # straddle both; -0.0 is zero, NaN and a subnormal are not (Tensor.ne(0)); complex values are set
    # when either part is.
    g = torch.Generator().manual_seed(11)
    x = torch.randn(shape, generator=g) * (torch.rand(shape, generator=g) < 0.3)
    if x.numel() >= 3:
        x.view(-1)[0], x.view(-1)[1], x.view(-1)[-1] = float("nan"), 1e-40, -0.0
    if dtype.is_complex:
        x = x * 1j + (torch.rand(shape, generator=g) < 0.1)
    x = x.to(dtype)
    for sparse_dim in (None, *range(1, len(shape) + 1)):
        expected = x.to_sparse() if sparse_dim is None else x.to_sparse(sparse_dim)
        actual = torch_ragged.sparse.to_sparse(x, sparse_dim)
        assert actual.is_coalesced() and actual.shape == expected.shape
        assert torch.equal(actual._indices(), expected._indices()), sparse_dim
        assert _same_values(actual._values(), expected._values()), sparse_dim


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.complex128, torch.bool,
                                   torch.int8, torch.int64])
def test_sparse_mask_reads_dense_at_the_indices_for_any_dtype_and_layout(dtype):
    # the CPU reads each entry's block of dense values in place at dense's strides (a transposed matrix, a
    # hybrid whose dense dims are one block) or, when those dims are not one block, through the key route
    indices, _, _ = random_triplet((6, 5), (), 20, torch.float64, seed=21)
    full = (torch.randn(6, 5, 3, 2) * 10).to(dtype)
    cases = [(full[..., 0, 0], indices), (full[..., 0, 0].t().contiguous().t(), indices), (full, indices),
             (full, indices[:1]), (full.transpose(2, 3), indices), (full[:, :, 1], indices)]
    for dense, idx in cases:
        expected = dense[tuple(idx)]
        assert torch.equal(torch.ops.torch_ragged.sparse_mask(dense, idx, True), expected)
        mask = torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1]), dense.shape[:idx.shape[0]]).coalesce()
        masked = torch_ragged.sparse.sparse_mask(dense, torch.sparse_coo_tensor(
            mask._indices(), torch.zeros(mask._nnz(), *dense.shape[idx.shape[0]:]), dense.shape))
        assert torch.equal(masked._values(), dense[tuple(mask._indices())])


def test_sparse_mask_refuses_an_index_out_of_range_even_with_empty_dense_dims():
    # the in-place read checks every index first (a huge one wraps in unsigned arithmetic, it is never read)
    for dense in (torch.randn(5, 3), torch.randn(5, 0)):
        with pytest.raises(IndexError, match=r"sparse_mask: indices\[0\]\[1\] = 4611686018427387904 is out of range"):
            torch.ops.torch_ragged.sparse_mask(dense, torch.tensor([[0, 2**62]]), True)
    assert torch.ops.torch_ragged.sparse_mask(torch.randn(5, 0), torch.tensor([[4, 1]]), True).shape == (2, 0)


def test_to_sparse_of_a_large_strided_tensor_matches_torch():
    # several parallel chunks (the kernel counts, then writes, chunk by chunk), a non-contiguous input
    g = torch.Generator().manual_seed(12)
    x = (torch.randn(700, 900, generator=g) * (torch.rand(700, 900, generator=g) < 0.05)).t()
    expected = x.to_sparse()
    actual = torch_ragged.sparse.to_sparse(x)
    assert torch.equal(actual._indices(), expected._indices()) and torch.equal(actual._values(), expected._values())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select_matches_dense(device, dim):
    indices, values, size = random_triplet((5, 4), (3,), 25, torch.float64, seed=6)
    s = torch_sparse(indices, values, size)
    for index in ([2, 2, 0, 1], [], [size[dim] - 1], list(range(size[dim]))[::-1]):
        index_t = torch.tensor(index, dtype=torch.long)
        out = torch_ragged.sparse.index_select(s.to(device), dim, index_t.to(device))
        assert torch.equal(out.to_dense().cpu(), s.to_dense().index_select(dim, index_t))


def test_index_select_of_many_entries_matches_dense_and_keeps_the_entry_order():
    # more entries than one chunk of the CPU kernel (its two parallel passes), three sparse dims, a dense dim,
    # repeated and negative positions, indices as rows of a wider buffer
    indices, values, size = random_triplet((40, 30, 20), (2,), 150_000, torch.float64, seed=9)
    wide = torch.cat([indices, indices[:1]]).t().contiguous().t()[:3]
    s = torch.sparse_coo_tensor(wide, values, size, check_invariants=True)
    index = torch.tensor([3, -1, 3, 0, 17, -30, 25, 25, 25], dtype=torch.long)
    threads = torch.get_num_threads()
    try:
        for count in (1, 3):
            torch.set_num_threads(count)
            for dim in (0, 1):
                out = torch_ragged.sparse.index_select(s, dim, index)
                # the documented order: entry e of the input, then position p of the index
                wrapped = index % size[dim]
                pairs = torch.cat([torch.stack([(indices[dim] == v).nonzero()[:, 0], torch.full_like(
                    (indices[dim] == v).nonzero()[:, 0], p)], 1) for p, v in enumerate(wrapped.tolist())])
                pairs = pairs[torch.argsort(pairs[:, 0] * len(index) + pairs[:, 1])]
                expected_indices = indices[:, pairs[:, 0]].clone()
                expected_indices[dim] = pairs[:, 1]
                assert torch.equal(out._indices(), expected_indices)
                assert torch.equal(out._values(), values[pairs[:, 0]])
                assert torch.equal(out.to_dense(), s.to_dense().index_select(dim, wrapped))
    finally:
        torch.set_num_threads(threads)


def test_coalesce_and_sum_are_bitwise_identical_across_thread_counts():
    indices, values, size = random_triplet((1000, 1000), (), 300_000, torch.float32, seed=7)
    values = torch.randn(values.shape, generator=torch.Generator().manual_seed(8))
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(ops.sparse_coalesce(indices, values, size)[1])
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(results[0], r) for r in results[1:])


def test_every_combination_of_small_sizes_and_nnz():
    # exhaustive small cases, including nnz 0 / 1 and single-position tensors
    for sizes, nnz in itertools.product([(1,), (3,), (2, 2), (1, 3, 2)], [0, 1, 2, 9]):
        indices, values, size = random_triplet(sizes, (), nnz, torch.float64, seed=nnz)
        s = torch_sparse(indices, values, size)
        assert_same_sparse(torch_ragged.sparse.coalesce(s), s)


def test_to_dense_of_uncoalesced_input_is_bitwise_deterministic():
    """index_put's accumulate gave a different float32 sum in 26 of 30 repeats with 2 threads: duplicates are now
    added in a fixed order (a stable sort, then the segment core's fixed-order sum per position)."""
    g = torch.Generator().manual_seed(3)
    indices = torch.randint(0, 300, (2, 200_000), generator=g)
    values = torch.randn(200_000, generator=g) * torch.logspace(-4, 4, 200_000)
    s = torch.sparse_coo_tensor(indices, values, (300, 300))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        results = [torch_ragged.sparse.to_dense(s) for _ in range(10)]
        torch.set_num_threads(1)
        results.append(torch_ragged.sparse.to_dense(s))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(results[0], r) for r in results[1:])
    expected = np.zeros(300 * 300)  # float64, entry by entry
    np.add.at(expected, (indices[0] * 300 + indices[1]).numpy(), values.double().numpy())
    torch.testing.assert_close(results[0].double().reshape(-1), torch.from_numpy(expected), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("nnz", [0, 1, 5, 255, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.bool, torch.int8])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_small_coalesced_inputs_write_each_entry_as_it_is(nnz, dtype, index_dtype):
    """Small CPU inputs take one loop that writes each entry's values where they lie (below 256 entries; 256 takes
    the general route): every byte as given (-0.0, NaN), equal to a Python loop over the entries, for int32 and int64
    indices and a dense dim; unsorted, repeated or out-of-range entries and values that need a gradient still take
    the general route (its sums, its errors, its autograd)."""
    g = torch.Generator().manual_seed(nnz)
    positions = torch.randperm(40 * 40, generator=g)[:nnz].sort().values
    indices = torch.stack([positions // 40, positions % 40]).to(index_dtype)
    values = torch.randn(nnz, 2, generator=g)
    if nnz:
        values[0, 0], values[-1, 1] = -0.0, float("nan")
    values = values.to(dtype) if dtype != torch.bool else values > 0
    dense = ops.sparse_to_dense(indices, values, (40, 40, 2))
    loop = torch.zeros(40, 40, 2, dtype=values.dtype)
    for k in range(nnz):
        loop[int(indices[0, k]), int(indices[1, k])] = values[k]
    assert dense.view(torch.uint8).equal(loop.view(torch.uint8)) if dtype != torch.bool else dense.equal(loop)
    if nnz >= 2:  # a repeated entry: summed (the general route), not overwritten
        repeated = torch.cat([indices, indices[:, :1]], 1)
        sums = ops.sparse_to_dense(repeated, torch.cat([values, values[:1]]), (40, 40, 2))
        if dtype in (torch.float32, torch.int8):
            row, col = int(indices[0, 0]), int(indices[1, 0])
            assert torch.equal(sums[row, col], values[0] + values[0])
        bad = indices.clone()
        bad[1, -1] = 40
        with pytest.raises(IndexError, match="torch_ragged.sparse_to_dense"):
            ops.sparse_to_dense(bad, values, (40, 40, 2))
    if dtype == torch.float32 and nnz:
        leaf = values.nan_to_num().requires_grad_()
        (grad,) = torch.autograd.grad((ops.sparse_to_dense(indices, leaf, (40, 40, 2)) * 3).sum(), leaf)
        assert torch.equal(grad, torch.full_like(leaf, 3.0))


@pytest.mark.parametrize("dtype,dense_sizes", [(torch.float32, (3,)), (torch.bool, ())])
def test_to_dense_routes_give_the_same_bits(dtype, dense_sizes):
    """Coalesced (written in place), uncoalesced eager (the coalesce core) and traced (static sizes) give one
    result, bit for bit, equal to a dense loop (bool: duplicates or-ed)."""
    g = torch.Generator().manual_seed(8)
    indices = torch.randint(0, 40, (2, 5000), generator=g)
    values = torch.randn(5000, *dense_sizes, generator=g) * torch.logspace(-3, 3, 5000).view(-1, *[1] * len(
        dense_sizes))
    values = values > 0 if dtype == torch.bool else values.to(dtype)
    size = (40, 40, *dense_sizes)
    eager = ops.sparse_to_dense(indices, values, size)
    traced = torch.compile(ops.sparse_to_dense, fullgraph=True, dynamic=False)(indices, values, size)
    assert torch.equal(eager, traced)
    coalesced_indices, sums, _, _ = ops.sparse_coalesce(indices, values, size)
    assert torch.equal(ops.sparse_to_dense(coalesced_indices, sums, size), eager)
    loop = torch.zeros(size, dtype=torch.float64)
    for k in range(5000):
        loop[indices[0, k], indices[1, k]] += values[k].double()
    if dtype == torch.bool:
        assert torch.equal(eager, loop != 0)
    else:
        torch.testing.assert_close(eager.double(), loop.to(dtype).double() if dtype == torch.int8 else loop,
                                   rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.float16, torch.float32, torch.float64,
                                   torch.complex128])
@pytest.mark.parametrize("dense_sizes", [(), (3,)])
def test_coalesced_to_dense_writes_every_position_once_as_torch_does(dtype, dense_sizes):
    """A coalesced input of >= 256 entries outside autograd: each block of output rows zeroed, then its entries
    written (bytes as they are). 700 x 700 positions span both threads' ranges and many 128 KiB blocks; an entry sits
    on the first and the last position. Against torch's own to_dense and a loop."""
    g = torch.Generator().manual_seed(5)
    positions = torch.cat([torch.tensor([0, 700 * 700 - 1]), torch.randperm(700 * 700, generator=g)[:3000]]).unique()
    indices = torch.stack([positions // 700, positions % 700])
    values = (torch.randn(positions.numel(), *dense_sizes, generator=g) * 100).to(dtype)
    s = torch.sparse_coo_tensor(indices, values, (700, 700, *dense_sizes)).coalesce()
    ours = torch_ragged.sparse.to_dense(s)
    assert torch.equal(ours, s.to_dense())
    loop = torch.zeros(700 * 700, *dense_sizes, dtype=dtype)
    for k, p in enumerate(positions.tolist()):
        loop[p] = values[k]
    assert torch.equal(ours, loop.view(700, 700, *dense_sizes))
    torch_ragged.sparse.accelerate(True)
    try:
        assert torch.equal(s.to_dense(), loop.view(700, 700, *dense_sizes))
    finally:
        torch_ragged.sparse.accelerate(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.float16, torch.int32])
@pytest.mark.parametrize("dense_sizes", [(), (2,), (20,)])
def test_small_uncoalesced_to_dense_has_the_coalesce_routes_bits(dtype, dense_sizes):
    """Up to 32 entries, unsorted with duplicates (folded onto their zero entry by entry where the values are their
    own accumulator, else the coalesce route): bit for bit what coalescing first gives (the coalesce core's run sums;
    test_to_dense_routes_give_the_same_bits ties that to the traced route), with a lone -0.0 entry (0 + -0.0 is +0.0
    in a sum from the identity) and terms of mixed magnitude whose sum depends on the order. Near a dense loop in
    double."""
    g = torch.Generator().manual_seed(11)
    for nnz in (2, 7, 32, 33):
        indices = torch.randint(0, 3, (2, nnz), generator=g)
        indices[:, 0] = torch.tensor([2, 2])  # a position of its own, holding -0.0
        indices[:, 1:][(indices[:, 1:] == 2).all(0).expand(2, -1)] = 0
        values = torch.randn(nnz, *dense_sizes, generator=g) * torch.logspace(-4, 4, nnz).view(-1, *[1] * len(
            dense_sizes))
        values[0] = -0.0
        values = values.to(dtype) if not dtype.is_complex else torch.complex(values, values.flip(0)).to(dtype)
        size = (3, 3, *dense_sizes)
        small = ops.sparse_to_dense(indices, values, size)
        coalesced_indices, sums, _, _ = ops.sparse_coalesce(indices, values, size)
        coalesced = ops.sparse_to_dense(coalesced_indices, sums, size)
        assert torch.equal(small, coalesced) and torch.equal(small.view(torch.uint8), coalesced.view(torch.uint8))
        loop = torch.zeros(size, dtype=torch.complex128 if dtype.is_complex else torch.float64)
        for k in range(nnz):
            loop[indices[0, k], indices[1, k]] += values[k].to(loop.dtype)
        coarse = dtype in (torch.float16, torch.int32)  # values rounded to the dtype before the loop's sums
        torch.testing.assert_close(small.to(loop.dtype), loop, rtol=1e-2 if coarse else 1e-5,
                                   atol=1e-2 if coarse else 1e-3)


TO_DENSE_PEAK = """
import resource, torch, torch_ragged
g = torch.Generator().manual_seed(0)
indices = torch.randint(0, 12_000, (2, 2000), generator=g)
values = torch.ones(2000, dtype=torch.int8)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
dense = torch_ragged.sparse.to_dense(torch.sparse_coo_tensor(indices, values, (12_000, 12_000)))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before, dense.numel())
"""


def test_to_dense_needs_scratch_in_proportion_to_nnz_not_to_the_dense_size():
    """A 12000 x 12000 int8 result (144 MB) from 2000 entries: the process's peak grows by about the output (it
    grew by ~24 bytes per dense position before, 3.5 GB here); a request past the machine's memory is refused
    before anything is allocated."""
    done = subprocess.run([sys.executable, "-c", TO_DENSE_PEAK], capture_output=True, text=True, check=True)
    grown, positions = map(int, done.stdout.split())
    assert grown < 1.5 * positions + (64 << 20), (grown, positions)
    with pytest.raises(ValueError, match="torch_ragged.sparse_to_dense: the dense output would need 8796093022208 "
                                         "bytes, more than this machine's"):
        ops.sparse_to_dense(torch.zeros(2, 1, dtype=torch.long), torch.ones(1, dtype=torch.float64), [2**20, 2**20])


@pytest.mark.parametrize("device", DEVICES)
def test_validate_checks_the_reduced_and_selected_dims_too(device):
    """An index out of range in a dim that is summed away or selected along was summed in without complaint."""
    values = torch.tensor([1.0, 2.0, 3.0], device=device)
    for bad in (-1, 2**40):
        indices = torch.tensor([[0, bad, 1], [0, 1, 2]], device=device)
        s = torch.sparse_coo_tensor(indices, values, (2, 3))
        with pytest.raises(IndexError, match=r"torch_ragged.sparse_sum: indices\[0\]\[1\] = "):
            torch_ragged.sparse.sum(s, 0)
        with pytest.raises(IndexError, match=r"torch_ragged.sparse_sum: indices\[0\]\[1\] = "):
            torch_ragged.sparse.sum(s)
        with pytest.raises(IndexError, match=r"torch_ragged.sparse_index_select: indices\[0\]\[1\] = "):
            torch_ragged.sparse.index_select(s, 1, [0])
    column_5 = torch.tensor([[0, 1], [5, 0]], device=device)
    with pytest.raises(IndexError, match=r"torch_ragged.sparse_sum: indices\[1\]\[0\] = 5 is out of range"):
        ops.sparse_sum(column_5, values[:2], [2, 3], [1], True)
    assert ops.sparse_sum(column_5, values[:2], [2, 3], [1], False)[1].shape == (2,)  # validate=False trusts it


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_full_sums_of_integers_are_int64_as_torch(dtype):
    s = torch.sparse_coo_tensor([[0, 1, 1], [0, 1, 2]], torch.tensor([1, 1, 0]).to(dtype), (2, 3))
    expected = torch.sparse.sum(s) if dtype != torch.bool else torch.tensor(2)
    assert torch_ragged.sparse.sum(s).dtype == torch.int64 == expected.dtype
    assert torch_ragged.sparse.sum(s) == expected
    assert torch_ragged.sparse.sum(s, [0, 1]).dtype == torch.int64
    assert torch_ragged.sparse.sum(s, 0).dtype == torch.sparse.sum(s, 0).dtype == dtype  # a sparse result keeps it


@pytest.mark.parametrize("device", DEVICES)
def test_index_select_takes_negative_indices_as_torch(device):
    s = torch.sparse_coo_tensor([[0, 2, 2], [1, 0, 1]], [1.0, 2.0, 3.0], (3, 2)).to(device)
    for dim in (0, 1):
        index = torch.tensor([-1, 0, -s.shape[dim]], device=device)
        assert torch.equal(torch_ragged.sparse.index_select(s, dim, index).to_dense(),
                           s.to_dense().index_select(dim, index % s.shape[dim]))
        assert torch.equal(torch_ragged.sparse.index_select(s, dim, index).to_dense(),
                           s.index_select(dim, index).to_dense())
    with pytest.raises(IndexError, match=r"index must lie in \[-3, 3\) for sparse dim 0 of size 3"):
        torch_ragged.sparse.index_select(s, 0, [-4])
