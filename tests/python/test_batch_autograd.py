"""gradcheck / gradgradcheck in float64 for every differentiable batch op; padding gets no gradient."""

import pytest
import torch
import torch_ragged
from torch.autograd import gradcheck, gradgradcheck

SIDES = ["right", "left"]


def leaf(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("shapes", [[[2], [0], [3]], [[2, 3], [1, 1], [3, 2]]])
def test_packed_to_padded_and_back(side, shapes):
    shape_per_tensor = torch.tensor(shapes)
    first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
    packed = leaf(int(first_idx[-1]), 2)

    def to_padded(x):
        return torch_ragged.packed_to_padded(x, shape_per_tensor, first_idx, 3.0, padding_side=side)

    assert gradcheck(to_padded, (packed,))
    assert gradgradcheck(to_padded, (packed,))
    padded = leaf(*to_padded(packed).shape)

    def to_packed(x):
        return torch_ragged.padded_to_packed(x, shape_per_tensor, side)

    assert gradcheck(to_packed, (padded,))
    assert gradgradcheck(to_packed, (padded,))


@pytest.mark.parametrize("side", SIDES)
def test_list_ops(side):
    tensors = (leaf(2, 3, 2), leaf(1, 4, 2), leaf(0, 1, 2))
    assert gradcheck(lambda *ts: torch_ragged.list_to_padded(ts, 0.0, [3, None], side)[0], tensors)
    assert gradgradcheck(lambda *ts: torch_ragged.list_to_padded(ts, 0.0, [3, None], side)[0], tensors)
    assert gradcheck(lambda *ts: torch_ragged.list_to_packed(ts)[0], tensors)
    assert gradgradcheck(lambda *ts: torch_ragged.list_to_packed(ts)[0], tensors)


def test_view_helpers():
    packed = leaf(5, 2)
    spt, first_idx = torch.tensor([[2], [3]]), torch.tensor([0, 2, 5])
    assert gradcheck(lambda x: torch_ragged.packed_to_list(x, spt, first_idx), (packed,))
    padded = leaf(2, 3, 2)
    assert gradcheck(lambda x: torch_ragged.padded_to_list(x, spt, "left"), (padded,))
    assert gradgradcheck(lambda x: torch_ragged.padded_to_list(x, spt, "left"), (padded,))


@pytest.mark.parametrize("trailing", [(), (3,)])
def test_tile_to_packed_and_segment_sum(trailing):
    numel = torch.tensor([2, 0, 3])
    values = leaf(3, *trailing)
    assert gradcheck(lambda v: torch_ragged.tile_to_packed(v, numel), (values,))
    assert gradgradcheck(lambda v: torch_ragged.tile_to_packed(v, numel), (values,))
    data = leaf(5, *trailing)
    first_idx = torch.tensor([0, 2, 2, 5])
    assert gradcheck(lambda d: torch_ragged.segment_sum(d, first_idx), (data,))
    assert gradgradcheck(lambda d: torch_ragged.segment_sum(d, first_idx), (data,))


@pytest.mark.parametrize("side", SIDES)
def test_padding_receives_no_gradient(side):
    padded = torch.ones(2, 3, 2, requires_grad=True)
    spt = torch.tensor([[1], [3]])
    torch_ragged.padded_to_packed(padded, spt, side).sum().backward()
    data_rows = [2] if side == "left" else [0]
    expected = torch.zeros(2, 3, 2)
    expected[0, data_rows] = 1
    expected[1] = 1
    assert torch.equal(padded.grad, expected)

    tensors = [torch.ones(1, 2, requires_grad=True), torch.ones(3, 2, requires_grad=True)]
    padded, _ = torch_ragged.list_to_padded(tensors, 0.0, padding_side=side)
    (padded * torch.arange(12.0).reshape(2, 3, 2)).sum().backward()
    assert torch.equal(tensors[0].grad, torch.tensor([[4.0, 5.0]] if side == "left" else [[0.0, 1.0]]))
    assert torch.equal(tensors[1].grad, torch.arange(6.0, 12.0).reshape(3, 2))
