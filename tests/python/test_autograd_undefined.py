"""Undefined in, undefined out: every op's backward, given no gradient for its outputs (nothing downstream used them),
returns None for its inputs -- not a materialised zero, which for a sparse output is a sparse tensor torch's own
checks cannot even compare (gradcheck(sparse.to_dense, masked=True) failed on it)."""

import pytest
import torch
import torch_ragged
from test_export import all_samples
from torch.utils import _pytree as pytree


def differentiable_inputs(args):
    return [leaf for leaf in pytree.tree_leaves(args) if isinstance(leaf, torch.Tensor) and leaf.requires_grad]


@pytest.mark.parametrize("op,args", all_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_backward_of_an_undefined_gradient_is_undefined(op, args):
    inputs = differentiable_inputs(args)
    outputs = [out for out in pytree.tree_leaves(op(*args)) if isinstance(out, torch.Tensor) and out.requires_grad]
    if not inputs or not outputs:
        pytest.skip("no differentiable input or output in this sample")
    # UndefinedGrad's backward hands an undefined gradient to the op's node (what gradcheck's check does).
    undefined = [torch._C._functions.UndefinedGrad()(out) for out in outputs]
    grads = torch.autograd.grad(undefined, inputs, [torch.zeros_like(u) for u in undefined], allow_unused=True)
    assert all(g is None for g in grads), [None if g is None else (g.layout, g.shape) for g in grads]


def test_gradcheck_with_masked_sparse_inputs_as_torch():
    """torch's own to_dense passes this; ours must too, uncoalesced input included."""
    indices = torch.tensor([[0, 1, 1, 2], [0, 1, 1, 0]])
    for s in (torch.sparse_coo_tensor(indices, torch.randn(4, dtype=torch.float64), (3, 2)),
              torch.sparse_coo_tensor(indices, torch.randn(4, dtype=torch.float64), (3, 2)).coalesce()):
        s = s.requires_grad_()
        assert torch.autograd.gradcheck(lambda t: t.to_dense(), (s,), masked=True)
        assert torch.autograd.gradcheck(torch_ragged.sparse.to_dense, (s,), masked=True)
        assert torch.autograd.gradcheck(lambda t: torch_ragged.sparse.softmax(t, 1).to_dense(), (s,), masked=True)
