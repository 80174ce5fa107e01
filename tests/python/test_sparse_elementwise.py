"""add / sub / mul between sparse tensors, transpose / t, cat: against torch.sparse's own operators (values compared
densely, patterns compared after torch's coalesce), hybrid tensors, uncoalesced inputs, dtype promotion, gradients,
bad input."""

import pytest
import torch
import torch_ragged.sparse as S
from devices import DEVICES
from torch.autograd import gradcheck


def random_sparse(sizes, sparse_dim, nnz, seed, dtype=torch.float64, coalesced=False):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, sizes[d], (nnz,), generator=g) for d in range(sparse_dim)])
    values = torch.randn((nnz, *sizes[sparse_dim:]), generator=g, dtype=torch.float64).to(dtype)
    s = torch.sparse_coo_tensor(indices, values, sizes, check_invariants=True)
    return s.coalesce() if coalesced else s


def same_as_torch(ours, theirs):
    """torch's own result exactly: the same entries in the same order, the same coalesced flag (a relabel)."""
    assert ours.is_coalesced() == theirs.is_coalesced() and ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert torch.equal(ours._indices().cpu(), theirs._indices().cpu())
    assert torch.equal(ours._values().cpu(), theirs._values().cpu())


def same_sparse(ours, theirs):
    theirs = theirs.coalesce()
    assert ours.is_coalesced() and ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert torch.equal(ours.indices().cpu(), theirs.indices().cpu())
    torch.testing.assert_close(ours.values().cpu(), theirs.values().cpu())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sizes,sparse_dim", [((6, 5), 2), ((4, 5, 3), 2), ((7,), 1), ((3, 4, 2), 3)])
@pytest.mark.parametrize("coalesced", [True, False])
def test_add_sub_mul_match_torch(device, sizes, sparse_dim, coalesced):
    a = random_sparse(sizes, sparse_dim, 12, seed=1, coalesced=coalesced).to(device)
    b = random_sparse(sizes, sparse_dim, 10, seed=2, coalesced=coalesced).to(device)
    same_sparse(S.add(a, b), torch.add(a, b))
    same_sparse(S.add(a, b, alpha=-2.5), torch.add(a, b, alpha=-2.5))
    same_sparse(S.sub(a, b, alpha=3), torch.sub(a, b, alpha=3))
    torch.testing.assert_close(S.mul(a, b).to_dense(), torch.mul(a, b).to_dense())
    same_sparse(S.mul(a, b), torch.mul(a.coalesce(), b.coalesce()))


def index_layouts(s):
    """s (coalesced, 2-D) with its indices held three ways: contiguous, a narrowed view of a wider buffer (what
    torch's coalesce leaves after merging duplicates) and transposed in memory."""
    i, v = s._indices(), s._values()
    wide = torch.zeros(2, i.shape[1] + 3, dtype=i.dtype)
    wide[:, :i.shape[1]] = i
    layouts = [i.contiguous(), wide[:, :i.shape[1]], i.t().contiguous().t()]
    return [torch.sparse_coo_tensor(x, v, s.shape, is_coalesced=True) for x in layouts]


def test_mul_of_matrices_on_one_pattern_and_on_overlapping_ones_matches_torch():
    """The CPU product's 2-D routes (one pattern shared: no merge; else one merge over the (row, col) pairs), for
    every layout of the index tensors, at magnitudes far apart, against torch.mul; a tensor flagged coalesced
    whose entries do not rise is refused."""
    a = random_sparse((40, 30), 2, 300, seed=31, coalesced=True)
    a = torch.sparse_coo_tensor(a._indices(), a._values() * 1e6, a.shape, is_coalesced=True)
    same_pattern = torch.sparse_coo_tensor(a._indices().clone(), torch.randn(a._nnz(), dtype=torch.float64) * 1e-4,
                                           a.shape, is_coalesced=True)
    overlapping = random_sparse((40, 30), 2, 300, seed=32, coalesced=True)
    for other in (a, same_pattern, overlapping):
        expected = torch.mul(a, other)
        for x in index_layouts(a):
            for y in index_layouts(other):
                same_sparse(S.mul(x, y), expected)
    falling = torch.sparse_coo_tensor(torch.tensor([[1, 0], [0, 0]]), torch.ones(2), (2, 2), is_coalesced=True)
    rising = torch.sparse_coo_tensor(torch.tensor([[0, 1], [0, 0]]), torch.ones(2), (2, 2), is_coalesced=True)
    for x, y in ((falling, falling), (falling, rising), (rising, falling)):
        with pytest.raises(ValueError, match="torch_ragged.sparse.mul: the indices of a tensor flagged coalesced"):
            S.mul(x, y)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.complex64, torch.int64])  # torch adds no half
@pytest.mark.parametrize("dense", [(), (3,)])
def test_add_of_small_coalesced_matrices_merges_them_as_torch_adds(dtype, dense):
    """Small coalesced matrices are added by one merge of their (row, col) pairs (each position 0 + a + b), for every
    index layout: torch.add's entries and values exactly, the -0.0 of a lone entry included (torch's +0.0); a
    tensor flagged coalesced whose entries do not rise, or lie out of range, goes through the coalesce route
    (sorted; the index named). Gradients: test_gradients_reach_both_values."""
    a = random_sparse((9, 7, *dense), 2, 25, seed=41, coalesced=True)
    b = random_sparse((9, 7, *dense), 2, 20, seed=42, coalesced=True)
    a = torch.sparse_coo_tensor(a._indices(), (a._values() * 1e4).to(dtype), a.shape, is_coalesced=True)
    b = torch.sparse_coo_tensor(b._indices(), (b._values() * 3).to(dtype), b.shape, is_coalesced=True)
    if dtype.is_floating_point:
        a._values()[0] = -0.0
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, *dense, dtype=dtype), a.shape)
    for x in index_layouts(a):
        for y in index_layouts(b):
            same_as_torch(S.add(x, y), torch.add(x, y))
            same_as_torch(S.sub(x, y, alpha=2), torch.sub(x, y, alpha=2))
    same_as_torch(S.add(a, empty.coalesce()), torch.add(a, empty.coalesce()))
    same_as_torch(S.add(empty.coalesce(), b), torch.add(empty.coalesce(), b))
    falling = torch.sparse_coo_tensor(torch.tensor([[1, 0], [0, 0]]), torch.ones(2), (2, 2), is_coalesced=True)
    rising = torch.sparse_coo_tensor(torch.tensor([[0, 1], [0, 1]]), torch.ones(2), (2, 2), is_coalesced=True)
    unflagged = torch.sparse_coo_tensor(falling._indices(), falling._values(), falling.shape)
    same_sparse(S.add(falling, rising), torch.add(unflagged.coalesce(), rising))
    outside = torch.sparse_coo_tensor(torch.tensor([[0, 1], [0, 5]]), torch.ones(2), (2, 2), is_coalesced=True)
    with pytest.raises(IndexError, match="out of range"):
        S.add(outside, rising)


def test_add_of_large_coalesced_matrices_matches_torch_exactly():
    a = random_sparse((3000, 2000), 2, 60_000, seed=45, coalesced=True)
    b = random_sparse((3000, 2000), 2, 50_000, seed=46, coalesced=True)
    same_as_torch(S.add(a, b, alpha=0.5), torch.add(a, b, alpha=0.5))


def test_dtypes_promote_as_torch():
    a = random_sparse((5, 4), 2, 8, seed=3, dtype=torch.float32)
    b = random_sparse((5, 4), 2, 8, seed=4, dtype=torch.float64)
    assert S.add(a, b).dtype == torch.add(a, b).dtype == torch.float64
    assert S.mul(a, b).dtype == torch.float64


def test_the_sum_order_is_a_then_b():
    a = torch.sparse_coo_tensor([[0, 0]], torch.tensor([1e8, 1.0]), (1,))
    b = torch.sparse_coo_tensor([[0]], torch.tensor([-1e8]), (1,))
    assert S.add(a, b).values().item() == ((torch.tensor(0.0) + 1e8 + 1.0) - 1e8).item()


@pytest.mark.parametrize("op", ["add", "mul"])
def test_gradients_reach_both_values(op):
    a = random_sparse((5, 4), 2, 9, seed=5, coalesced=True)
    b = random_sparse((5, 4), 2, 9, seed=6, coalesced=True)
    b = torch.sparse_coo_tensor(torch.cat([b.indices(), a.indices()[:, :4]], 1),
                                torch.cat([b.values(), torch.randn(4, dtype=torch.float64)]), b.shape).coalesce()

    def fn(av, bv):
        x = torch.sparse_coo_tensor(a.indices(), av, a.shape, is_coalesced=True)
        y = torch.sparse_coo_tensor(b.indices(), bv, b.shape, is_coalesced=True)
        return getattr(S, op)(x, y).to_dense()

    assert gradcheck(fn, (a.values().clone().requires_grad_(True), b.values().clone().requires_grad_(True)))


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_and_t_match_torch(device):
    """torch's relabel (index rows swapped, entries in place, flagged uncoalesced unless empty), coalesced or not."""
    for coalesced in (False, True):
        s = random_sparse((4, 6, 3, 2), 3, 15, seed=7, coalesced=coalesced).to(device)
        same_as_torch(S.transpose(s, 0, 2), s.transpose(0, 2))
        same_as_torch(S.transpose(s, -4, 1), s.transpose(-4, 1))
        same_sparse(S.transpose(s, 0, 2).coalesce(), s.transpose(0, 2))
        matrix = random_sparse((4, 6), 2, 10, seed=9, coalesced=coalesced).to(device)
        same_as_torch(S.t(matrix), matrix.t())
        vector = random_sparse((5,), 1, 4, seed=10, coalesced=coalesced).to(device)
        same_as_torch(S.t(vector), vector.t())
    empty = random_sparse((4, 6), 2, 0, seed=9, coalesced=True).to(device)
    same_as_torch(S.t(empty), empty.t())
    hybrid = random_sparse((4, 6, 3, 2), 2, 15, seed=8).to(device)
    # torch refuses two dense dims ("transposed dimensions must be sparse"); the dense reference:
    for given in (hybrid, hybrid.coalesce()):
        transposed = S.transpose(given, 2, 3)
        assert transposed.is_coalesced() == given.is_coalesced() and transposed.sparse_dim() == 2
        torch.testing.assert_close(transposed.to_dense(), hybrid.to_dense().transpose(2, 3))


@pytest.mark.parametrize("device", DEVICES)
def test_cat_matches_torch(device):
    parts = [random_sparse((3, 5, 2), 2, 6, seed=11).to(device), random_sparse((4, 5, 2), 2, 7, seed=12).to(device),
             random_sparse((1, 5, 2), 2, 2, seed=13).to(device)]
    """torch's concatenation entry for entry (flagged uncoalesced), except along dim 0 of coalesced parts, whose
    concatenation is sorted already and flagged coalesced (torch flags it uncoalesced)."""
    same_as_torch(S.cat(parts, 0), torch.cat(parts, 0))
    coalesced = [p.coalesce() for p in parts]
    ours = S.cat(coalesced, 0)
    assert ours.is_coalesced()
    assert torch.equal(ours._indices(), torch.cat(coalesced, 0)._indices())  # in order: nothing was sorted
    same_sparse(ours, torch.cat(coalesced, 0))
    same_as_torch(S.cat([coalesced[0], parts[1], coalesced[2]], 0), torch.cat([coalesced[0], parts[1], coalesced[2]]))
    same_sparse(S.stack(coalesced[:1] * 3, 0), torch.stack(coalesced[:1] * 3, 0))
    same_as_torch(S.stack(coalesced[:1] * 3, 1), torch.stack(coalesced[:1] * 3, 1))
    wide = [random_sparse((3, 2), 2, 4, seed=14).to(device), random_sparse((3, 5), 2, 6, seed=15).to(device)]
    same_as_torch(S.cat(wide, -1), torch.cat(wide, 1))
    same_sparse(S.coalesce(S.cat(wide, -1)), torch.cat(wide, 1))


@pytest.mark.parametrize("device", DEVICES)
def test_intersect_finds_the_keys_both_lists_hold(device):
    """sparse_intersect (mul's matching step) against Python sets, on lists of every overlap, empty ones included;
    lists that do not rise strictly are refused (a merge over them would miss matches)."""
    g = torch.Generator().manual_seed(30)
    ops = torch.ops.torch_ragged
    lists = [torch.unique(torch.randint(0, 200, (n,), generator=g)) for n in (120, 90, 1)] + [
        torch.zeros(0, dtype=torch.long), torch.arange(0, 200, 3)]
    for a in lists:
        for b in lists:
            in_a, in_b = ops.sparse_intersect(a.to(device), b.to(device))
            shared = sorted(set(a.tolist()) & set(b.tolist()))
            assert a[in_a.cpu()].tolist() == shared and b[in_b.cpu()].tolist() == shared
    for broken in (torch.tensor([3, 1]), torch.tensor([2, 2])):
        with pytest.raises(ValueError, match="torch_ragged.sparse_intersect: a_keys and b_keys must each rise"):
            ops.sparse_intersect(broken.to(device), lists[0].to(device))
        with pytest.raises(ValueError, match="must each rise strictly"):
            ops.sparse_intersect(lists[0].to(device), broken.to(device))


def test_bad_input_is_named():
    a = random_sparse((4, 5), 2, 6, seed=16)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.add: a and b must have the same shape"):
        S.add(a, random_sparse((4, 6), 2, 6, seed=17))
    with pytest.raises(TypeError, match="torch_ragged.sparse.mul: expected a sparse COO tensor, got torch.strided"):
        S.mul(torch.zeros(4, 5), torch.zeros(4, 5))
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.mul: the dense operand must have the sparse one's "
                                         r"shape and device, got \(4, 6\)"):
        S.mul(a, torch.zeros(4, 6))
    with pytest.raises(ValueError, match="torch_ragged.sparse.transpose: dims 1 and 2 are one sparse and one dense"):
        S.transpose(random_sparse((4, 5, 2), 2, 6, seed=18), 1, 2)
    with pytest.raises(IndexError, match="torch_ragged.sparse.transpose: dim1 = 2 is out of range"):
        S.transpose(a, 0, 2)
    with pytest.raises(ValueError, match="torch_ragged.sparse.t: expected a tensor of at most 2 dims"):
        S.t(random_sparse((2, 2, 2), 3, 3, seed=19))
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.cat: tensors\[1\] has shape \(4, 6\)"):
        S.cat([a, random_sparse((4, 6), 2, 6, seed=20)], 0)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.cat: tensors\[1\] has shape \(4, 5, 2\) \(sparse_dim=1"):
        S.cat([random_sparse((4, 5, 2), 2, 6, seed=21), random_sparse((4, 5, 2), 1, 6, seed=21)], 2)
    with pytest.raises(ValueError, match="torch_ragged.sparse.cat: expected at least one tensor"):
        S.cat([], 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sizes,sparse_dim", [((6, 5), 2), ((4, 5, 3), 2), ((7,), 1)])
@pytest.mark.parametrize("coalesced", [True, False])
def test_sparse_with_dense_operands_match_torch(device, sizes, sparse_dim, coalesced):
    a = random_sparse(sizes, sparse_dim, 12, seed=3, coalesced=coalesced).to(device)
    d = torch.randn(sizes, dtype=torch.float64, device=device)
    same_sparse(S.mul(a, d), a * d)
    same_sparse(S.mul(d, a), d * a)
    same_sparse(S.mul(a, d.float()), a * d.float())  # promotion as torch
    torch.testing.assert_close(S.add(d, a, alpha=2), torch.add(d, a, alpha=2))
    torch.testing.assert_close(S.add(a, d, alpha=-3), a.to_dense() - 3 * d)  # torch refuses a sparse a here
    torch.testing.assert_close(S.sub(d, a), d - a.to_dense())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sizes,sparse_dim", [((6, 5), 2), ((4, 5, 3), 2), ((7,), 1)])
def test_unsqueeze_and_stack_match_torch(device, sizes, sparse_dim):
    a = random_sparse(sizes, sparse_dim, 9, seed=4).to(device)
    b = random_sparse(sizes, sparse_dim, 7, seed=5, coalesced=True).to(device)
    for dim in range(-len(sizes) - 1, len(sizes) + 1):
        ours, theirs = S.unsqueeze(a, dim), a.unsqueeze(dim)
        assert ours.sparse_dim() == theirs.sparse_dim() and ours.shape == theirs.shape
        assert not ours.is_coalesced() and S.unsqueeze(b, dim).is_coalesced()
        torch.testing.assert_close(ours.to_dense(), theirs.to_dense())
        stacked, expected = S.stack([a, b, a], dim), torch.stack([a, b, a], dim)
        same_as_torch(stacked, expected)  # torch's concatenation of the unsqueezed tensors, flagged uncoalesced
        assert S.stack([b, b], dim).is_coalesced() == (dim % (len(sizes) + 1) == 0)  # sorted along dim 0 only
        torch.testing.assert_close(stacked.to_dense(), expected.to_dense())
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.stack: tensors\[1\] has shape"):
        S.stack([a, random_sparse((2, 2), 2, 1, seed=6)])


def test_mv_and_matmul_dispatch_match_dense_math():
    a = random_sparse((6, 5), 2, 12, seed=7, coalesced=True)
    dense = a.to_dense()
    v, w = torch.randn(5, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    m = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(S.mv(a, v), dense @ v)
    torch.testing.assert_close(S.mv(a.to_sparse_csr(), v), dense @ v)
    torch.testing.assert_close(S.matmul(a, v), dense @ v)
    torch.testing.assert_close(S.matmul(w, a), w @ dense)
    torch.testing.assert_close(S.matmul(a, m), dense @ m)
    torch.testing.assert_close(S.matmul(a, a.t().coalesce()).to_dense(), dense @ dense.t())
    batch = random_sparse((2, 4, 5), 3, 10, seed=8, coalesced=True)
    right = torch.randn(2, 5, 3, dtype=torch.float64)
    torch.testing.assert_close(S.matmul(batch, right), batch.to_dense() @ right)
    assert gradcheck(lambda v: S.mv(a, v), (v.clone().requires_grad_(),))
    with pytest.raises(ValueError, match="torch_ragged.sparse.mv: expected a 1-D dense vector"):
        S.mv(a, m)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sizes,sparse_dim", [((6, 5), 2), ((4, 5, 3), 2), ((7,), 1), ((5, 3), 1), ((3, 4, 2), 3)])
@pytest.mark.parametrize("coalesced", [True, False])
def test_select_and_narrow_copy_match_torch(device, sizes, sparse_dim, coalesced):
    a = random_sparse(sizes, sparse_dim, 14, seed=9, coalesced=coalesced).to(device)
    dense = a.to_dense()
    for dim in range(-len(sizes), len(sizes)):
        for index in (0, sizes[dim] - 1, -1):
            ours = S.select(a, dim, index)
            expected = dense.select(dim, index)
            torch.testing.assert_close(ours.to_dense() if ours.is_sparse else ours, expected)
            if ours.is_sparse:
                assert ours.is_coalesced() == a.is_coalesced()
                assert ours.sparse_dim() == a.select(dim, index).sparse_dim()
        for start, length in ((0, sizes[dim]), (1, sizes[dim] - 1), (sizes[dim] - 1, 1), (-2, 2), (2, 0)):
            if not 0 <= start % sizes[dim] <= sizes[dim] - length:
                continue
            ours = S.narrow_copy(a, dim, start, length)
            assert ours.is_coalesced() == a.is_coalesced()
            torch.testing.assert_close(ours.to_dense(), dense.narrow(dim, start, length))
    with pytest.raises(IndexError, match="torch_ragged.sparse.select: index 9 is out of range for size"):
        S.select(a, 0, 9)
    with pytest.raises(IndexError, match="torch_ragged.sparse.narrow_copy: start 1 and length 9 do not fit"):
        S.narrow_copy(a, 0, 1, 9)
    c = a.coalesce()
    selected = S.select(torch.sparse_coo_tensor(c.indices(), c.values(), c.shape), 0, 1)
    to_dense = S.to_dense if selected.is_sparse else (lambda x: x)
    assert gradcheck(lambda v: to_dense(S.select(torch.sparse_coo_tensor(c.indices(), v, c.shape), 0, 1)),
                     (c.values().clone().requires_grad_(),))


@pytest.mark.parametrize("device", DEVICES)
def test_permute_and_cat_along_dense_dims_match_torch(device):
    a = random_sparse((4, 5, 3, 2), 2, 10, seed=10).to(device)
    b = random_sparse((4, 5, 3, 2), 2, 8, seed=11, coalesced=True).to(device)
    for dims in ((1, 0, 2, 3), (0, 1, 3, 2), (1, 0, 3, 2), (-3, -4, -1, -2)):
        for given in (a, b):
            ours, theirs = S.permute(given, dims), given.permute(dims)
            assert ours.is_coalesced() == theirs.is_coalesced() and ours.sparse_dim() == 2
            assert ours.shape == theirs.shape and torch.equal(ours._indices(), theirs._indices())
            torch.testing.assert_close(ours.to_dense(), theirs.to_dense())
    for dim in (2, 3, -1):
        wider = random_sparse((4, 5, 3, 4), 2, 6, seed=12).to(device)
        others = [a, b] if dim == 2 else [a, wider]
        ours = S.cat(others, dim)
        assert not ours.is_coalesced() and ours.sparse_dim() == 2  # as torch's: a position two parts hold, twice
        torch.testing.assert_close(ours.to_dense(), torch.cat([x.to_dense() for x in others], dim))
    with pytest.raises(ValueError, match="torch_ragged.sparse.permute: dims .* move a sparse dim among the dense"):
        S.permute(a, (2, 1, 0, 3))
    with pytest.raises(IndexError, match="torch_ragged.sparse.permute: dims .* are not a permutation"):
        S.permute(a, (0, 0, 1, 2))
    values = a.coalesce().values().clone().requires_grad_()
    assert gradcheck(lambda v: S.to_dense(S.cat([torch.sparse_coo_tensor(a.coalesce().indices(), v, a.shape)] * 2, 3)),
                     (values,))


UNARY = ["neg", "abs", "asin", "asinh", "atan", "atanh", "ceil", "deg2rad", "erf", "erfinv", "expm1", "floor", "frac",
         "log1p", "rad2deg", "relu", "round", "sgn", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh",
         "trunc"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [True, False])
def test_pattern_keeping_functions_match_torch(device, coalesced):
    a = random_sparse((6, 5, 2), 2, 14, seed=13, coalesced=coalesced).to(device)
    a = torch.sparse_coo_tensor(a._indices(), a._values() * 0.3, a.shape, is_coalesced=coalesced)  # in asin's domain
    for name in UNARY:
        ours, theirs = getattr(S, name)(a), getattr(torch, name)(a)
        assert ours.is_coalesced() == theirs.is_coalesced(), name
        assert ours.dtype == theirs.dtype, name
        torch.testing.assert_close(ours.to_dense(), theirs.to_dense(), equal_nan=True, msg=name)
    for ours, theirs in ((S.mul(a, 2.5), a * 2.5), (S.mul(torch.tensor(-2.0, dtype=torch.float64), a), -2.0 * a),
                         (S.div(a, 4), a / 4), (S.div(a, 0.3, rounding_mode="floor"), torch.div(a, 0.3,
                                                                                                 rounding_mode="floor")),
                         (S.pow(a, 3), torch.pow(a, 3)), (S.pow(a, 0.5), torch.pow(a, 0.5))):
        assert ours.is_coalesced() == theirs.is_coalesced()
        torch.testing.assert_close(ours.to_dense(), theirs.to_dense(), equal_nan=True)
    with pytest.raises(ValueError, match="torch_ragged.sparse.pow: the exponent must be a positive number"):
        S.pow(a, 0)
    assert gradcheck(lambda v: S.tanh(torch.sparse_coo_tensor(a._indices(), v, a.shape)).to_dense(),
                     (a._values().clone().requires_grad_(),))
