"""Registration checks (opcheck: schema, fake kernel, autograd wiring) and torch.compile; the pad family's samples
live in test_pad_pt2.py, and the coverage test below checks that every registered op has one."""

import pytest
import torch
import torch_ragged
from test_pad_pt2 import pad_samples
from test_segment_autograd import segment_samples
from test_sparse_autograd import sparse_samples
from test_sparse_tensor_ops import sparse_tensor_samples
from test_tiles import tiles_samples
from torch.library import opcheck

ops = torch.ops.torch_ragged


def samples():
    spt = torch.tensor([[2, 1], [1, 3]])
    first_idx = torch.tensor([0, 2, 5])
    packed = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    padded = torch.randn(2, 2, 3, 2, dtype=torch.float64, requires_grad=True)
    tensors = [torch.randn(2, 1, 2, dtype=torch.float64, requires_grad=True),
               torch.randn(1, 3, 2, dtype=torch.float64, requires_grad=True)]
    return [
        (ops.get_first_idx, (torch.tensor([2, 0, 3]),)),
        (ops.get_shape_per_tensor, (tensors,)),
        (ops.fill_max_shape, (spt, [4, -1])),
        (ops.list_to_packed, (tensors,)),
        (ops.list_to_padded, (tensors, 0.0, [3, -1], "left")),
        (ops.packed_to_list, (packed, spt, first_idx)),
        (ops.packed_to_padded, (packed, spt, first_idx, -1.0, None, "right")),
        (ops.packed_to_padded, (packed, spt, first_idx, -1.0, [2, 4], "left")),
        (ops.padded_to_list, (padded, spt, "left")),
        (ops.padded_to_packed, (padded, spt, "right", None)),
        (ops.padded_to_packed, (padded, spt, "left", 5)),
        (ops.tile_to_packed, (torch.randn(3, 2, dtype=torch.float64, requires_grad=True), torch.tensor([2, 0, 3]),
                              None)),
    ]


@pytest.mark.parametrize("op,args", samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_opcheck(op, args):
    opcheck(op, args)


def test_every_op_has_a_sample():
    covered = {str(op).split(".")[1] for op, _ in [*samples(), *pad_samples(), *segment_samples(), *sparse_samples(),
                                                         *sparse_tensor_samples(), *tiles_samples()]}
    registered = {schema.name.split("::")[1] for schema in torch._C._jit_get_all_schemas()
                  if schema.name.startswith("torch_ragged::")}
    # tiles_lookup and tiles_index (integer outputs) run their opcheck subset in test_tiles.py; the accelerate
    # switches take no tensors (test_sparse_accelerate.py)
    assert registered - {"version", "cuda_version", "built_with_cuda", "built_with_torch", "tiles_lookup",
                         "tiles_index", "accelerate_torch_sparse", "torch_sparse_accelerated",
                         "accelerate_torch_sparse_from"} <= covered


@pytest.mark.parametrize("side", ["right", "left"])
def test_compile_fullgraph_packed_padded_packed(side):
    def fn(packed, shape_per_tensor, first_idx):
        padded = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0, padding_side=side)
        padded = torch.relu(padded) * 2
        return torch_ragged.padded_to_packed(padded, shape_per_tensor, side, packed.shape[0])

    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    packed = torch.randn(9, 4)
    spt = torch.tensor([[2], [0], [7]])
    first_idx = torch.tensor([0, 2, 2, 9])
    assert torch.equal(compiled(packed, spt, first_idx), torch.relu(packed) * 2)


def test_compile_with_max_shape_keeps_static_shapes_and_backprops():
    def fn(packed, shape_per_tensor, first_idx):
        padded = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0, [8])
        return torch_ragged.padded_to_packed(padded.sin(), shape_per_tensor, "right", packed.shape[0])

    compiled = torch.compile(fn, fullgraph=True)
    packed = torch.randn(6, 3, requires_grad=True)
    spt, first_idx = torch.tensor([[4], [2]]), torch.tensor([0, 4, 6])
    out = compiled(packed, spt, first_idx)
    out.sum().backward()
    assert torch.allclose(out, packed.sin())
    assert torch.allclose(packed.grad, packed.detach().cos())
