"""The sparse functions that are registered ops on torch sparse tensors (torch_ragged::sparse_<name>, an overload
"tensor" where the triplet op holds the name): each door — the public function, the op packet, TorchScript — gives
torch's own result; gradients reach the values of coalesced and uncoalesced inputs; bad input is refused by name."""

import pytest
import torch
import torch_ragged.sparse as S
from devices import DEVICES
from torch.autograd import gradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged

UNARY = ["neg", "abs", "asin", "asinh", "atan", "atanh", "ceil", "deg2rad", "erf", "erfinv", "expm1", "floor", "frac",
         "log1p", "rad2deg", "relu", "round", "sgn", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh",
         "trunc"]


def uncoalesced(device="cpu", dtype=torch.float64, scale=0.3):
    """(4, 3, 2) hybrid, sparse_dim 2, with a repeated index; values in asin's domain."""
    g = torch.Generator().manual_seed(5)
    indices = torch.tensor([[3, 0, 3, 1, 0], [2, 1, 2, 0, 0]])
    values = (torch.randn(5, 2, generator=g, dtype=torch.float64) * scale).to(dtype)
    return torch.sparse_coo_tensor(indices, values, (4, 3, 2)).to(device)


def sparse_tensor_samples():
    """One sample per sparse-tensor op (the overload itself where the name holds the triplet op too)."""
    s = uncoalesced()
    csr = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]], dtype=torch.float64).to_sparse_csr()
    matrix = torch.sparse_coo_tensor([[1, 0, 1], [2, 1, 2]], [1.0, 2.0, 3.0], (2, 3))  # uncoalesced, float32
    return [*[(getattr(ops, "sparse_" + name).default, (s,)) for name in UNARY],
            (ops.sparse_pow.default, (s, 2)), (ops.sparse_coalesce.tensor, (s, True)),
            (ops.sparse_to_dense.tensor, (csr, True)), (ops.sparse_sum.tensor, (s, [1], True)),
            (ops.sparse_softmax.tensor, (s, 0, None)), (ops.sparse_log_softmax.default, (csr, 1, None)),
            (ops.sparse_unsqueeze.default, (s, 1)), (ops.sparse_select.default, (s, 0, 3)),
            (ops.sparse_narrow_copy.default, (s, 1, 1, 2)), (ops.sparse_permute.default, (s, [1, 0, 2])),
            (ops.sparse_transpose.default, (s, 0, 1)), (ops.sparse_t.default, (s.sum(2),)),
            (ops.sparse_index_select.tensor, (s, 0, torch.tensor([3, 3, 1]))),
            (ops.sparse_add.default, (s, s.coalesce())), (ops.sparse_sub.default, (s.to_dense(), s)),
            (ops.sparse_mul.default, (s, s.coalesce())), (ops.sparse_mul.Scalar, (s, 2.5)),
            (ops.sparse_div.default, (s, torch.tensor(4.0, dtype=torch.float64))),
            (ops.sparse_div.Scalar, (s, 3)), (ops.sparse_cat.default, ([s, s.coalesce()], 1)),
            (ops.sparse_stack.default, ([s, s], 3)), (ops.sparse_to_sparse.default, (csr.to_dense(), None)),
            (ops.sparse_to_sparse_coo.default, (csr, True)), (ops.sparse_to_sparse_csr.default, (s, True)),
            (ops.sparse_to_sparse_csc.default, (csr, True)),
            (ops.sparse_mm.tensor, (csr, torch.ones(3, 2, dtype=torch.float64), True)),
            (ops.sparse_addmm.default, (torch.ones(2, 2), matrix, torch.ones(3, 2))),
            (ops.sparse_bmm.default, (matrix.unsqueeze(0), torch.ones(1, 3, 2))),
            (ops.sparse_mv.default, (matrix, torch.ones(3))), (ops.sparse_matmul.default, (torch.ones(2), matrix)),
            (ops.sparse_hspmm.default, (matrix, torch.ones(3, 2))),
            (ops.sparse_smm.default, (matrix, torch.ones(3, 2))),
            (ops.sparse_sspaddmm.default, (torch.ones(2, 2).to_sparse(), matrix, torch.ones(3, 2))),
            (ops.sparse_sparse_mask.default, (torch.ones(2, 3, dtype=torch.float64), csr, True))]


# torch's SchemaCheckMode cannot read a sparse tensor's storage (test_schema fails inside the checker), and
# torch.compile / torch.export do not take sparse tensors as inputs ("Attempted to wrap sparse Tensor"; an
# uncoalesced result's nnz is an unbacked size export cannot return): the other opcheck tests run.
SPARSE_TENSOR_OPCHECK = ("test_autograd_registration", "test_faketensor")


@pytest.mark.parametrize("op,args", sparse_tensor_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_opcheck(op, args):
    opcheck(op, args, test_utils=SPARSE_TENSOR_OPCHECK)


def same_entries(ours, theirs):
    """Entry for entry: indices, values, the coalesced flag, shape and dtype (NaN equal to NaN)."""
    assert ours.layout == theirs.layout and ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert ours.is_coalesced() == theirs.is_coalesced()
    assert torch.equal(ours._indices().cpu(), theirs._indices().cpu())
    torch.testing.assert_close(ours._values().cpu(), theirs._values().cpu(), equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("coalesced", [False, True])
def test_unary_ops_give_torchs_entries_through_every_door(device, coalesced):
    s = uncoalesced(device)
    s = s.coalesce() if coalesced else s
    for name in UNARY:
        theirs = getattr(torch, name)(s)
        theirs = theirs if theirs.is_coalesced() or name == "neg" else theirs.coalesce()
        same_entries(getattr(S, name)(s), theirs)
        same_entries(getattr(ops, "sparse_" + name)(s), theirs)
    same_entries(S.pow(s, 3), torch.pow(s, 3).coalesce())
    same_entries(ops.sparse_pow(s, 0.5), torch.pow(s, 0.5).coalesce())


def test_scripted_functions_call_the_ops_and_match_eager():
    s = uncoalesced()
    csr = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]).to_sparse_csr()

    @torch.jit.script
    def scripted(s: torch.Tensor, csr: torch.Tensor) -> list[torch.Tensor]:
        return [S.tanh(s), S.pow(s, 2), S.sum(s, 1), S.sum(s), S.to_dense(s), S.softmax(s, 0),
                S.log_softmax(csr, 1), S.to_dense(csr, True), S.unsqueeze(s, 0), S.select(s, 1, 2),
                S.narrow_copy(s, 0, 1, 2), S.permute(s, [1, 0, 2]), S.transpose(s, 0, 1), S.t(S.sum(s, 2)),
                S.index_select(s, 0, torch.tensor([3, 1])), S.to_sparse_csr(s), S.to_sparse_coo(csr),
                S.to_sparse(S.to_dense(csr))]

    eager = [S.tanh(s), S.pow(s, 2), S.sum(s, 1), S.sum(s), S.to_dense(s), S.softmax(s, 0), S.log_softmax(csr, 1),
             S.to_dense(csr, True), S.unsqueeze(s, 0), S.select(s, 1, 2), S.narrow_copy(s, 0, 1, 2),
             S.permute(s, [1, 0, 2]), S.transpose(s, 0, 1), S.t(S.sum(s, 2)),
             S.index_select(s, 0, torch.tensor([3, 1])), S.to_sparse_csr(s), S.to_sparse_coo(csr),
             S.to_sparse(S.to_dense(csr))]
    graph = str(scripted.inlined_graph)
    for op in ("sparse_tanh", "sparse_pow", "sparse_sum", "sparse_to_dense", "sparse_softmax", "sparse_log_softmax",
               "sparse_unsqueeze", "sparse_select", "sparse_narrow_copy", "sparse_permute", "sparse_transpose",
               "sparse_t", "sparse_index_select", "sparse_to_sparse_csr", "sparse_to_sparse_coo", "sparse_to_sparse"):
        assert f"torch_ragged::{op}" in graph, op
    for ours, expected in zip(scripted(s, csr), eager, strict=True):
        assert ours.layout == expected.layout
        torch.testing.assert_close(ours.to_dense(), expected.to_dense(), rtol=0, atol=0)
    # eager against torch, so the comparison above is with the right values
    torch.testing.assert_close(eager[2].to_dense(), torch.sparse.sum(s, 1).to_dense())
    torch.testing.assert_close(eager[5].to_dense(), torch.sparse.softmax(s.coalesce(), 0).to_dense())


def same_compressed(ours, theirs):
    """A CSR / CSC tensor entry for entry: offsets, plain indices (their dtype too), values, layout and shape."""
    assert ours.layout == theirs.layout and ours.shape == theirs.shape and ours.dtype == theirs.dtype
    compressed, plain = ((torch.Tensor.crow_indices, torch.Tensor.col_indices) if ours.layout == torch.sparse_csr
                         else (torch.Tensor.ccol_indices, torch.Tensor.row_indices))
    for part in (compressed, plain):
        assert part(ours).dtype == part(theirs).dtype and torch.equal(part(ours).cpu(), part(theirs).cpu())
    torch.testing.assert_close(ours.values().cpu(), theirs.values().cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_conversions_give_torchs_tensors_through_every_door(device):
    """to_sparse / to_sparse_coo / csr / csc of dense, uncoalesced COO (hybrid), CSR and CSC (int32 indices kept):
    torch's own conversion, from the public function, the op and the C++-bound fast call alike."""
    s = uncoalesced(device)
    dense = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 5.0]], dtype=torch.float64, device=device)
    csr32 = torch.sparse_csr_tensor(torch.tensor([0, 2, 3, 4], dtype=torch.int32),
                                    torch.tensor([1, 2, 0, 2], dtype=torch.int32),
                                    torch.tensor([2.0, 1.0, 3.0, 5.0]), (3, 3)).to(device)
    for doors in ((S.to_sparse, S.to_sparse_coo, S.to_sparse_csr, S.to_sparse_csc),
                  (ops.sparse_to_sparse, ops.sparse_to_sparse_coo, ops.sparse_to_sparse_csr, ops.sparse_to_sparse_csc)):
        to_sparse, to_coo, to_csr, to_csc = doors
        same_entries(to_sparse(dense, None), dense.to_sparse())
        same_entries(to_sparse(dense, 1), dense.to_sparse(1))
        for x in (dense, s, s.coalesce(), csr32, csr32.to_sparse_csc(), dense.to_sparse_csc()):
            if x.layout != torch.sparse_coo or x.sparse_dim() == 2:
                same_compressed(to_csr(x, True), x.to_sparse_csr())
                same_compressed(to_csc(x, True), x.to_sparse_csc())
            same_entries(to_coo(x, True), x.to_sparse().coalesce())
    assert S.to_sparse_csr(csr32) is csr32 and ops.sparse_to_sparse_coo(s.coalesce(), False) is not None
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.to_sparse_csr: expected a matrix \(at least 2 dims\)"):
        ops.sparse_to_sparse_csr(torch.ones(3, device=device), True)
    with pytest.raises(TypeError, match="torch_ragged.sparse.to_sparse_coo: expected a dense, sparse COO, CSR or CSC"):
        ops.sparse_to_sparse_coo(dense.to_sparse_bsr((1, 1)), True)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_mask_gives_torchs_tensor_in_each_layout(device):
    dense = torch.arange(12.0, dtype=torch.float64, device=device).view(3, 4)
    coo = torch.sparse_coo_tensor([[2, 0, 2], [1, 3, 1]], [1.0, 1.0, 1.0], (3, 4), dtype=torch.float64).to(device)
    for mask in (coo, coo.coalesce(), coo.coalesce().to_sparse_csr(), coo.coalesce().to_sparse_csc()):
        for ours in (S.sparse_mask(dense, mask), ops.sparse_sparse_mask(dense, mask, True)):
            theirs = dense.sparse_mask(mask)
            if mask.layout == torch.sparse_coo:
                same_entries(ours, theirs)
            else:
                same_compressed(ours, theirs)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.sparse_mask: dense has shape \(3, 3\) but mask"):
        S.sparse_mask(dense[:, :3], coo)


def test_conversions_pass_gradients_to_the_values():
    s = uncoalesced().requires_grad_()
    for convert in (S.to_sparse_csr, S.to_sparse_csc, S.to_sparse_coo):
        out = convert(s)
        (grad,) = torch.autograd.grad(out.values().sum(), s)  # values(): a COO result is coalesced
        torch.testing.assert_close(grad.to_dense(), torch.ones(4, 3, 2, dtype=torch.float64) *
                                   (s.detach().to_dense() != 0).any(-1, keepdim=True), rtol=0, atol=0)
    dense = torch.tensor([[0.0, 2.0], [3.0, 0.0]], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(S.to_sparse(dense).values().sum(), dense)
    assert torch.equal(grad, torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64))


def test_scripted_products_call_the_ops_and_match_torch():
    s = torch.sparse_coo_tensor([[1, 0, 1, 2], [2, 1, 2, 0]], [1.0, 2.0, 3.0, 4.0], (3, 3))  # uncoalesced
    d = torch.arange(6.0).view(3, 2)

    @torch.jit.script
    def scripted(s: torch.Tensor, d: torch.Tensor) -> list[torch.Tensor]:
        return [S.bmm(S.unsqueeze(s, 0), d.unsqueeze(0)), S.mv(s, d[:, 0]), S.matmul(d.t(), s),
                S.hspmm(s, d), S.smm(s, d), S.sspaddmm(S.to_sparse(d * 3), s, d, 2, 0.5)]

    graph = str(scripted.inlined_graph)
    for op in ("sparse_bmm", "sparse_mv", "sparse_matmul", "sparse_hspmm", "sparse_smm", "sparse_sspaddmm"):
        assert f"torch_ragged::{op}" in graph, op
    sd = s.to_dense()
    expected = [(sd @ d).unsqueeze(0), sd @ d[:, 0], d.t() @ sd, sd @ d, sd @ d, 2 * (d * 3) + 0.5 * (sd @ d)]
    for ours, theirs in zip(scripted(s, d), expected, strict=True):
        torch.testing.assert_close(ours.to_dense() if ours.is_sparse else ours, theirs, rtol=0, atol=0)
    # the sparse results keep torch's patterns
    assert torch.equal(S.hspmm(s, d)._indices(), torch.hspmm(s, d).coalesce()._indices())
    assert torch.equal(S.smm(s, d).coalesce()._indices(), torch.smm(s, d).coalesce()._indices())


@pytest.mark.parametrize("device", DEVICES)
def test_structure_ops_match_torch_and_dense_math(device):
    """unsqueeze / select / narrow_copy / permute / transpose / t / index_select: torch's own result where torch
    has the function on sparse tensors (flags as documented), the dense function of to_dense otherwise."""
    s = uncoalesced(device)
    for given in (s, s.coalesce()):
        dense = given.to_dense()
        for dim in (0, 2, -1, 3):
            ours = ops.sparse_unsqueeze(given, dim)
            assert ours.is_coalesced() == given.is_coalesced()
            torch.testing.assert_close(ours.to_dense(), dense.unsqueeze(dim), rtol=0, atol=0)
        for dim, index in ((0, 3), (1, -1), (2, 1)):
            torch.testing.assert_close(ops.sparse_select(given, dim, index).to_dense(), dense.select(dim, index),
                                       rtol=0, atol=0)
        for dim, start, length in ((0, 1, 3), (1, -2, 2), (2, 0, 1)):
            torch.testing.assert_close(ops.sparse_narrow_copy(given, dim, start, length).to_dense(),
                                       dense.narrow(dim, start, length), rtol=0, atol=0)
        same_entries(ops.sparse_transpose(given, 0, 1), given.transpose(0, 1))
        same_entries(ops.sparse_permute(given, [1, 0, 2]), given.permute(1, 0, 2))
        torch.testing.assert_close(ops.sparse_transpose(given, 2, 2).to_dense(), dense, rtol=0, atol=0)
        matrix = given.sum(2)
        same_entries(ops.sparse_t(matrix), matrix.t())
        index = torch.tensor([3, 3, 0], device=device)
        picked = ops.sparse_index_select(given, 0, index)  # entries in another order than torch's: compared densely
        assert not picked.is_coalesced()
        torch.testing.assert_close(picked.to_dense(), given.index_select(0, index).to_dense(), rtol=0, atol=0)
        torch.testing.assert_close(S.index_select(given, 1, [2, 0]).to_dense(), dense[:, [2, 0]], rtol=0, atol=0)
    vector = torch.sparse_coo_tensor([[2, 0, 2]], torch.tensor([1.0, 2.0, 3.0]), (3,)).to(device)
    assert ops.sparse_select(vector, 0, 2).item() == 4.0  # the only sparse dim: the dense sum of its entries
    same_entries(ops.sparse_t(vector), vector.t())


@pytest.mark.parametrize("device", DEVICES)
def test_arithmetic_ops_match_torch(device):
    """add / sub / mul / div through the packet (each overload) against torch's own operators, densely compared, with
    the flags documented: results coalesced except the linear scalings, which keep the input's flag."""
    a, b = uncoalesced(device), uncoalesced(device, scale=2.0).transpose(0, 1).transpose(0, 1)
    b = torch.sparse_coo_tensor(b._indices().flip(1), b._values(), b.shape)  # other entries at other positions
    dense = torch.randn(4, 3, 2, dtype=torch.float64, device=device)
    pairs = [(ops.sparse_add(a, b, alpha=-2.5), torch.add(a, b, alpha=-2.5)),
             (ops.sparse_sub(a, b), torch.sub(a, b)), (ops.sparse_mul(a, b), torch.mul(a.coalesce(), b.coalesce())),
             (ops.sparse_add(dense, a, alpha=2), torch.add(dense, a, alpha=2)),
             (ops.sparse_add(a, dense), a.to_dense() + dense), (ops.sparse_mul(a, dense), torch.mul(a, dense)),
             (ops.sparse_mul(dense, a), torch.mul(a, dense)), (ops.sparse_mul(a, 2.5), a * 2.5),
             (S.mul(3, a), 3 * a), (ops.sparse_mul(a, torch.tensor(-2.0, dtype=torch.float64)), a * -2.0),
             (ops.sparse_div(a, 4), a / 4), (ops.sparse_div(a, torch.tensor(0.5, dtype=torch.float64)), a / 0.5),
             (ops.sparse_div(a, 0.3, rounding_mode="floor"), torch.div(a, 0.3, rounding_mode="floor"))]
    for ours, theirs in pairs:
        assert ours.layout == theirs.layout and ours.dtype == theirs.dtype
        torch.testing.assert_close(ours.to_dense(), theirs.to_dense())
    assert not ops.sparse_mul(a, 2.5).is_coalesced() and ops.sparse_div(a, 0.3, rounding_mode="trunc").is_coalesced()
    assert ops.sparse_add(a, b).is_coalesced() and ops.sparse_mul(a, dense).is_coalesced()
    assert ops.sparse_add(a.float(), b).dtype == torch.float64  # promoted as torch
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.add: a and b must have the same shape and sparse dims"):
        ops.sparse_add(a, a.sum(2))
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.div: the divisor must be a scalar, got shape \(2,\)"):
        ops.sparse_div(a, torch.ones(2, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_coalesce_to_dense_sum_softmax_match_torch(device):
    s = uncoalesced(device, scale=1e4)  # softmax at large magnitudes: 1e4 apart, exp would overflow unshifted
    same_entries(ops.sparse_coalesce(s), s.coalesce())
    same_entries(S.coalesce(s, validate=False), s.coalesce())
    torch.testing.assert_close(ops.sparse_to_dense(s), s.to_dense(), rtol=0, atol=0)
    same_entries(ops.sparse_sum(s, [0]), torch.sparse.sum(s, [0]))
    torch.testing.assert_close(ops.sparse_sum(s), torch.sparse.sum(s))
    for dim in (0, 1, 2, -1):
        torch.testing.assert_close(ops.sparse_softmax(s, dim).to_dense(), torch.sparse.softmax(s, dim).to_dense())
        torch.testing.assert_close(ops.sparse_log_softmax(s, dim).to_dense(),
                                   torch.sparse.log_softmax(s, dim).to_dense())
    half = ops.sparse_softmax(s.to(torch.float16) / 1e4, 1, torch.float32)
    assert half.dtype == torch.float32
    torch.testing.assert_close(half.to_dense(), torch.sparse.softmax((s / 1e4).coalesce(), 1, torch.float32).to_dense(),
                               atol=1e-3, rtol=1e-3)


def test_gradients_reach_the_values_of_uncoalesced_and_coalesced_inputs():
    s = uncoalesced()
    indices, shape = s._indices(), s.shape
    for coalesced in (False, True):
        base = s.coalesce() if coalesced else s
        values = base._values().clone().requires_grad_()

        def build(v, base=base, coalesced=coalesced):
            return torch.sparse_coo_tensor(base._indices(), v, shape, is_coalesced=coalesced)

        assert gradcheck(lambda v: S.asinh(build(v)).to_dense(), (values,))
        assert gradcheck(lambda v: S.coalesce(build(v)).to_dense(), (values,))
        assert gradcheck(lambda v: S.to_dense(build(v)), (values,))
        assert gradcheck(lambda v: S.sum(build(v), 1).to_dense(), (values,))
        assert gradcheck(lambda v: S.log_softmax(build(v), 1).to_dense(), (values,))
    # an uncoalesced tensor's gradient: each duplicate gets its index's gradient (torch's rule)
    values = s._values().clone().requires_grad_()
    S.square(torch.sparse_coo_tensor(indices, values, shape)).values().sum().backward()
    summed = torch.zeros(4, 3, 2, dtype=torch.float64).index_put_((indices[0], indices[1]), s._values(),
                                                                  accumulate=True)
    torch.testing.assert_close(values.grad, 2 * summed[indices[0], indices[1]])


def test_an_unused_output_leaves_the_gradient_undefined():
    s = uncoalesced()
    values = s._values().clone().requires_grad_()
    other = torch.ones(3, requires_grad=True)
    out = S.sin(torch.sparse_coo_tensor(s._indices(), values, s.shape))
    grads = torch.autograd.grad([(other * 2).sum()], [values, other], allow_unused=True)
    assert grads[0] is None and out.requires_grad


def test_bad_input_is_refused_by_name():
    dense = torch.ones(3, 2)
    for name in ("abs", "neg", "tanh"):
        with pytest.raises(TypeError, match=f"torch_ragged.sparse.{name}: expected a sparse COO tensor, got "
                                            "torch.strided"):
            getattr(S, name)(dense)
    with pytest.raises(TypeError, match="torch_ragged.sparse.coalesce: expected a sparse COO tensor, got "
                                        "torch.sparse_csr"):
        ops.sparse_coalesce(dense.to_sparse_csr())
    with pytest.raises(TypeError, match="torch_ragged.sparse.sum: expected a sparse COO, CSR or CSC tensor"):
        S.sum(dense)
    with pytest.raises(ValueError, match="torch_ragged.sparse.pow: the exponent must be a positive number"):
        ops.sparse_pow(uncoalesced(), -1)
    with pytest.raises(IndexError, match="torch_ragged.sparse.softmax: dim 2 is out of range for a 2-D tensor"):
        S.softmax(dense.to_sparse_csr(), 2)
    bad = torch.sparse_csr_tensor(torch.tensor([0, 2, 1]), torch.tensor([0, 1]), torch.ones(2), (2, 2),
                                  check_invariants=False)
    with pytest.raises(ValueError, match=r"torch_ragged.sparse.to_dense: the crow_indices of a torch.sparse_csr "
                                         r"tensor of shape \(2, 2\) must not decrease"):
        S.to_dense(bad)
