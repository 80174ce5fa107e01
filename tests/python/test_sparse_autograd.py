"""The sparse family's gradients (gradcheck in float64 against the triplet ops), registration (opcheck) and
torch.compile / TorchScript of the triplet ops."""

import warnings

import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged
# duplicates (0, 1) x2 and (2, 0) x2, an entry alone
INDICES = torch.tensor([[0, 2, 0, 1, 2], [1, 0, 1, 1, 0]])
SIZE = (3, 2, 2)
COALESCED = torch.tensor([[0, 0, 1, 2, 2], [0, 1, 1, 0, 1]])
COALESCED_TRANSPOSED = torch.tensor([[0, 0, 1, 1, 1], [0, 2, 0, 1, 2]])  # COALESCED.flip(0), in row order


def leaf(*shape, device="cpu"):
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(device).requires_grad_(True)


def sparse_samples():
    values = leaf(5, 2)
    dense = leaf(3, 2, 2)
    plain = dense.detach()  # the segment core's gathered sum / dot take no gradients themselves
    return [
        (ops.sparse_flat_keys, (INDICES, [3, 2], True)),
        (ops.sparse_coalesce, (INDICES, values, SIZE, True)),
        (ops.sparse_coalesce, (INDICES.to(torch.int32), values, SIZE, False)),
        (ops.sparse_coalesce, (INDICES, values, SIZE, True, False)),  # no order returned, gradients all the same
        (ops.sparse_sum, (INDICES, values, SIZE, [1], True)),
        (ops.sparse_sum, (INDICES, values, SIZE, [0, 2], True)),
        (ops.sparse_sum, (INDICES, values, SIZE, None, True)),
        (ops.sparse_mask, (dense, INDICES, True)),
        (ops.sparse_to_dense, (INDICES, values, SIZE, True)),
        (ops.sparse_from_dense, (dense, 2)),
        (ops.sparse_index_select, (INDICES, values, SIZE, 0, torch.tensor([2, 2, 0]))),
        (ops.sparse_index_select, (INDICES, values, SIZE, 2, torch.tensor([1]))),
        (ops.sparse_softmax, (COALESCED, values, SIZE, 1, False)),
        (ops.sparse_pool_sum, (COALESCED, values, SIZE, 0)),
        (ops.sparse_mm_plan, (COALESCED, [3, 2])),
        (ops.sparse_mm, (values[:, 0], dense[0], COALESCED, *ops.sparse_mm_plan(COALESCED, [3, 2]), False)),
        (ops.sparse_sddmm, (dense[:, 0], dense[:2, 0], COALESCED, *ops.sparse_mm_plan(COALESCED, [3, 2]), False)),
        (ops.sparse_spgemm, (COALESCED, values[:, 0], COALESCED_TRANSPOSED, values[:, 1], [3, 2], [2, 3])),
        (ops.sparse_spgemm_csr, (torch.tensor([0, 2, 3, 5]), COALESCED[1], values[:, 0], torch.tensor([0, 2, 5]),
                                 COALESCED_TRANSPOSED[1], values[:, 1], [3, 2], [2, 3])),
        (ops.sparse_spgemm_csr, (torch.tensor([0, 2, 3, 5], dtype=torch.int32), COALESCED[1].int(), values[:, 0],
                                 torch.tensor([0, 2, 5]), COALESCED_TRANSPOSED[1], values[:, 1], [3, 2], [2, 3])),
        (ops.sparse_compressed_violation, (torch.tensor([0, 2, 3]), torch.tensor([0, 1, 1]), 2)),
        (ops.sparse_row_offsets, (torch.tensor([0, 0, 2, 2]), 4)),
        (ops.sparse_intersect, (torch.tensor([0, 3, 4, 9]), torch.tensor([1, 3, 9]))),
        (ops.segment_gather_sum, (plain[:, 0], torch.tensor([1, 2]), None, torch.tensor([0, 2]))),
        (ops.segment_gather_dot, (plain[0, :1], plain[1], torch.tensor([1, 0]), torch.tensor([0, 2]))),
        (ops.segment_gather_sum_dot, (plain[1], torch.tensor([1, 0, 1]), plain[:, 0, 0], torch.tensor([0, 1, 3]),
                                      plain[0, :2])),
    ]


# opcheck's test_aot_dispatch_static / _dynamic sum every output into the first one's dtype, so an op whose first
# output is an integer index tensor followed by float values fails inside the checker itself ("result type Double
# can't be cast to the desired output type Long"). Those ops run the other checks here; test_compile_* below
# trace them through AOT autograd, static and dynamic, and check outputs and gradients against eager.
INDEX_FIRST = {"sparse_coalesce", "sparse_sum", "sparse_from_dense", "sparse_index_select", "sparse_mm_plan",
               "sparse_spgemm", "sparse_spgemm_csr"}
NOT_AOT = ("test_schema", "test_autograd_registration", "test_faketensor")
# Only integer outputs whose size is data-dependent (no gradient to check): opcheck's static AOT trace refuses any
# dynamic output shape (DynamicOutputShapeException); the fake kernel (an unbacked size) is checked by test_faketensor.
DATA_DEPENDENT_INDEX_ONLY = {"sparse_intersect"}


@pytest.mark.parametrize("op,args", sparse_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_opcheck(op, args):
    name = str(op).split(".")[-1]
    # the triplet op is its name's default overload (the sparse-tensor form, where one exists, is "tensor");
    # opcheck takes an overload, or a packet that has no other
    opcheck(op.default, args, test_utils=NOT_AOT if name in INDEX_FIRST | DATA_DEPENDENT_INDEX_ONLY else "ALL")


def value_ops():
    """Functions of the values (and of a dense tensor) whose gradients gradcheck verifies."""
    return {
        "coalesce": lambda v: ops.sparse_coalesce(INDICES.to(v.device), v, SIZE)[1],
        "sum dim 1": lambda v: ops.sparse_sum(INDICES.to(v.device), v, SIZE, [1])[1],
        "sum dims 0, 2": lambda v: ops.sparse_sum(INDICES.to(v.device), v, SIZE, [0, 2])[1],
        "sum all": lambda v: ops.sparse_sum(INDICES.to(v.device), v, SIZE, None)[1],
        "to_dense": lambda v: ops.sparse_to_dense(INDICES.to(v.device), v, SIZE),
        "index_select": lambda v: ops.sparse_index_select(INDICES.to(v.device), v, SIZE, 0,
                                                          torch.tensor([2, 2, 0], device=v.device))[1],
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(value_ops()))
def test_gradients_to_values(device, name):
    fn = value_ops()[name]
    values = leaf(5, 2, device=device)
    assert gradcheck(fn, (values,))
    assert gradgradcheck(fn, (values,))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_to_dense(device):
    dense = leaf(3, 2, 2, device=device)
    assert gradcheck(lambda d: ops.sparse_mask(d, INDICES.to(device)), (dense,))
    assert gradcheck(lambda d: ops.sparse_from_dense(d, 2)[1], (dense,))


def test_coalesce_gradient_is_the_run_gradient_in_input_order():
    values = torch.ones(5, 2, dtype=torch.float64, requires_grad=True)
    out_indices, out_values, _, _ = ops.sparse_coalesce(INDICES, values, SIZE)
    weights = torch.arange(out_values.numel(), dtype=torch.float64).view_as(out_values)
    (out_values * weights).sum().backward()
    run_of_entry = [out_indices.t().tolist().index(e) for e in INDICES.t().tolist()]
    assert torch.equal(values.grad, weights[run_of_entry])


def test_gradients_through_torch_sparse_tensors():
    values = leaf(5, 2)
    s = torch.sparse_coo_tensor(INDICES, values, SIZE, check_invariants=True)
    torch_ragged.sparse.sum(torch_ragged.sparse.coalesce(s), 1).to_dense().square().sum().backward()
    expected = leaf(5, 2)
    torch.sparse.sum(torch.sparse_coo_tensor(INDICES, expected, SIZE, check_invariants=True).coalesce(),
                     1).to_dense().square().sum().backward()
    torch.testing.assert_close(values.grad, expected.grad)


def coalesce_then_sum(indices, values):
    out_indices, out_values, _, _ = torch.ops.torch_ragged.sparse_coalesce(indices, values, [3, 2, 2])
    row_indices, row_sums = torch.ops.torch_ragged.sparse_sum(out_indices, out_values, [3, 2, 2], [1])
    return row_indices, row_sums.sin()


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_coalesce_and_sum(dynamic):
    values = leaf(5, 2)
    compiled = torch.compile(coalesce_then_sum, fullgraph=True, dynamic=dynamic)
    actual, expected = compiled(INDICES, values), coalesce_then_sum(INDICES, values)
    for a, b in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, b)
    grad = torch.autograd.grad(actual[1].sum(), values)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(expected[1].sum(), values)[0])


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_dense_round_trip_and_index_select(dynamic):
    def fn(dense, index):
        indices, values = torch.ops.torch_ragged.sparse_from_dense(dense, 2)
        picked_indices, picked = torch.ops.torch_ragged.sparse_index_select(indices, values, [3, 2, 2], 0, index)
        masked = torch.ops.torch_ragged.sparse_mask(dense * 2, indices)
        return torch.ops.torch_ragged.sparse_to_dense(picked_indices, picked.exp(), [3, 2, 2]), masked

    dense = leaf(3, 2, 2).detach().masked_fill(torch.rand(3, 2, 2) > 0.5, 0).requires_grad_(True)
    index = torch.tensor([2, 0, 0])
    actual = torch.compile(fn, fullgraph=True, dynamic=dynamic)(dense, index)
    expected = fn(dense, index)
    for a, b in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, b)
    grads = torch.autograd.grad(actual[0].sum() + actual[1].sum(), dense)[0]
    torch.testing.assert_close(grads, torch.autograd.grad(expected[0].sum() + expected[1].sum(), dense)[0])


def test_torchscript():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        scripted = torch.jit.script(coalesce_then_sum)
    values = leaf(5, 2).detach()
    for a, b in zip(scripted(INDICES, values), coalesce_then_sum(INDICES, values), strict=True):
        torch.testing.assert_close(a, b)
