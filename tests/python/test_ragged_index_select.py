"""ragged_index_select (segment core): against a Python loop over the selected segments + torch.cat; autograd,
opcheck, compile, bad input."""

import pytest
import torch
import torch_ragged
from devices import DEVICES
from expect import raises
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged
FIRST_IDX = [0, 3, 3, 7, 8]  # an empty segment and a single-row one


def reference(values, first_idx, index):
    """The selected segments, one slice each, concatenated."""
    b = len(first_idx) - 1
    parts = [values[first_idx[i % b]:first_idx[i % b + 1]] for i in index]
    counts = [len(p) for p in parts]
    offsets = [0]
    for n in counts:
        offsets.append(offsets[-1] + n)
    return torch.cat(parts) if parts else values[:0], offsets


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64,
                                   torch.uint8])
@pytest.mark.parametrize("feature", [(), (3,), (2, 0), (2, 5)])
@pytest.mark.parametrize("index", [[3, 0, -1, 2, 2], [], [1, 1], [-4]])
def test_matches_loop_and_cat(device, dtype, feature, index):
    values = (torch.arange(8 * max(1, int(torch.tensor(feature).prod())) if feature else 8) % 5)
    values = values.reshape(8, *feature).to(dtype).to(device) if 0 not in feature else torch.zeros(8, *feature,
                                                                                                   dtype=dtype,
                                                                                                   device=device)
    out, out_first_idx = torch_ragged.ragged_index_select(values, FIRST_IDX, index)
    expected, expected_first_idx = reference(values.cpu(), FIRST_IDX, index)
    assert out.dtype == dtype and out.device == values.device and out.shape == expected.shape
    assert torch.equal(out.cpu(), expected)
    assert out_first_idx.tolist() == expected_first_idx and out_first_idx.dtype == torch.long


@pytest.mark.parametrize("device", DEVICES)
def test_index_and_first_idx_devices_and_dtypes(device):
    values = torch.randn(8, 2, device=device)
    for first_idx in (torch.tensor(FIRST_IDX, dtype=torch.int32), torch.tensor(FIRST_IDX, device=device)):
        for index in (torch.tensor([2, 0], dtype=torch.int32), torch.tensor([2, 0], device=device)):
            out, out_first_idx = ops.ragged_index_select(values, first_idx, index)
            assert torch.equal(out, torch.cat([values[3:7], values[0:3]]))
            assert out_first_idx.device == first_idx.device and out_first_idx.tolist() == [0, 4, 7]


def test_large_segments_split_across_threads_copy_exactly():
    # Segments far larger than one thread's share, selected out of order and repeated.
    lengths = torch.tensor([300_000, 5, 0, 123_457])
    first_idx = torch_ragged.get_first_idx(lengths)
    values = torch.randn(int(lengths.sum()), 3)
    index = [3, 0, 3, 1, 2]
    out, out_first_idx = torch_ragged.ragged_index_select(values, first_idx, index)
    expected, expected_first_idx = reference(values, first_idx.tolist(), index)
    assert torch.equal(out, expected) and out_first_idx.tolist() == expected_first_idx


def test_num_rows_given_must_match():
    values = torch.randn(8, 2)
    out, _ = ops.ragged_index_select(values, torch.tensor(FIRST_IDX), torch.tensor([0, 2]), 7)
    assert out.shape == (7, 2)
    with raises(ValueError, "torch_ragged.ragged_index_select", "num_rows = 6", "hold 7 rows"):
        ops.ragged_index_select(values, torch.tensor(FIRST_IDX), torch.tensor([0, 2]), 6)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_add_up_over_repeats(device):
    values = torch.randn(8, 2, dtype=torch.float64, device=device, requires_grad=True)
    first_idx = torch.tensor(FIRST_IDX)
    index = torch.tensor([2, 0, 2, -1, 1])
    assert gradcheck(lambda v: ops.ragged_index_select(v, first_idx, index)[0], (values,))
    assert gradgradcheck(lambda v: ops.ragged_index_select(v, first_idx, index)[0], (values,))
    # index picks segments 2 (rows 3:7), 0 (0:3), 2 again, 3 (7:8) and the empty 1: 12 output rows.
    out, out_first_idx = ops.ragged_index_select(values, first_idx, index)
    assert out_first_idx.tolist() == [0, 4, 7, 11, 12, 12]
    weights = torch.randn(12, 2, dtype=torch.float64)
    (out * weights.to(device)).sum().backward()
    expected = torch.zeros(8, 2, dtype=torch.float64)
    expected[3:7] = weights[0:4] + weights[7:11]
    expected[0:3] = weights[4:7]
    expected[7:8] = weights[11:12]
    assert torch.allclose(values.grad.cpu(), expected)


def test_opcheck_and_compile():
    values = torch.randn(8, 2, requires_grad=True)
    args = (values, torch.tensor(FIRST_IDX), torch.tensor([3, 0, 2]))
    opcheck(ops.ragged_index_select, args)
    opcheck(ops.ragged_index_select, (*args, 8))

    def f(v, first_idx, index):
        out, out_first_idx = ops.ragged_index_select(v, first_idx, index)
        return (out * 2).sum(0), out_first_idx

    for dynamic in (False, True):
        torch._dynamo.reset()
        got = torch.compile(f, fullgraph=True, dynamic=dynamic)(*args)
        want = f(*args)
        torch.testing.assert_close(got[0], want[0])  # inductor sums the two rows in its own order
        assert torch.equal(got[1], want[1])


def test_bad_input():
    values = torch.randn(8, 2)
    first_idx = torch.tensor(FIRST_IDX)
    name = "torch_ragged.ragged_index_select"
    with raises(IndexError, name, "index[1] = 4 is out of range for 4 segments"):
        ops.ragged_index_select(values, first_idx, torch.tensor([0, 4]))
    with raises(IndexError, name, "index[0] = -5 is out of range"):
        ops.ragged_index_select(values, first_idx, torch.tensor([-5]))
    with raises(TypeError, name, "index must be an integer"):
        ops.ragged_index_select(values, first_idx, torch.tensor([0.0]))
    with raises(ValueError, name, "index must be 1-D"):
        ops.ragged_index_select(values, first_idx, torch.tensor([[0]]))
    with raises(ValueError, name, "first_idx must run from 0 to data.size(0) = 8"):
        ops.ragged_index_select(values, torch.tensor([0, 3, 7]), torch.tensor([0]))
    with raises(ValueError, name, "values must have at least 1 dim"):
        ops.ragged_index_select(torch.tensor(1.0), torch.tensor([0, 1]), torch.tensor([0]))
    with raises(TypeError, name, "values must be a tensor, got None"):
        ops.ragged_index_select(None, first_idx, torch.tensor([0]))
    with raises(IndexError, name, "out of range for 0 segments"):
        ops.ragged_index_select(values[:0], torch.tensor([0]), torch.tensor([0]))
