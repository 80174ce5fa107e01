"""Bad input to the segment core: a clear exception naming the op and the argument."""

import pytest
import torch
import torch_ragged
from expect import raises

DATA = torch.zeros(5, 2)
REDUCTIONS = ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_softmax",
              "segment_log_softmax"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_first_idx_checks(name):
    op = getattr(torch_ragged, name)
    runs_to_rows = "first_idx must run from 0 to data.size(0) = 5"
    with raises(ValueError, f"torch_ragged.{name}", runs_to_rows, "got first_idx[-1] = 4"):
        op(DATA, torch.tensor([0, 2, 4]))
    with raises(ValueError, f"torch_ragged.{name}", runs_to_rows, "= 6"):
        op(DATA, torch.tensor([0, 2, 6]))
    with raises(ValueError, f"torch_ragged.{name}", "non-decreasing", "first_idx[1] = 3 > first_idx[2] = 2"):
        op(DATA, torch.tensor([0, 3, 2, 5]))
    with raises(ValueError, f"torch_ragged.{name}", "first_idx[0] must be 0, got 1"):
        op(DATA, torch.tensor([1, 5]))
    with raises(TypeError, f"torch_ragged.{name}", "first_idx must be an integer", "Float"):
        op(DATA, torch.tensor([0.0, 5.0]))
    with raises(ValueError, f"torch_ragged.{name}", "first_idx must be 1-D", "[1, 2]"):
        op(DATA, torch.tensor([[0, 5]]))
    with raises(ValueError, f"torch_ragged.{name}", "first_idx needs at least 1 entry"):
        op(DATA, torch.zeros(0, dtype=torch.long))
    with raises(ValueError, f"torch_ragged.{name}", "data must have at least 1 dim"):
        op(torch.tensor(1.0), torch.tensor([0, 1]))


def test_dtype_checks():
    with raises(TypeError, "torch_ragged.segment_sum", "bool is not summed", "data.long()"):
        torch_ragged.segment_sum(torch.zeros(2, dtype=torch.bool), [0, 2])
    with raises(TypeError, "torch_ragged.segment_mean", "bool is not summed", "Bool"):
        torch_ragged.segment_mean(torch.zeros(2, dtype=torch.bool), [0, 2])
    with raises(TypeError, "torch_ragged.segment_max", "real dtype", "ComplexFloat"):
        torch_ragged.segment_max(torch.zeros(2, dtype=torch.complex64), [0, 2])
    with raises(TypeError, "torch_ragged.segment_softmax", "floating dtype", "Int"):
        torch_ragged.segment_softmax(torch.zeros(2, dtype=torch.int32), [0, 2])


def test_expand_and_ids_checks():
    with raises(ValueError, "torch_ragged.segment_expand", "values must have one row per segment", "= 2"):
        torch_ragged.segment_expand(torch.zeros(3, 2), torch.tensor([0, 1, 4]))
    with raises(ValueError, "torch_ragged.segment_expand", "num_rows = 5", "first_idx[-1] = 4"):
        torch_ragged.segment_expand(torch.zeros(2), torch.tensor([0, 1, 4]), 5)
    with raises(ValueError, "torch_ragged.segment_ids", "non-decreasing"):
        torch_ragged.segment_ids(torch.tensor([0, 4, 1]))
    with raises(TypeError, "torch_ragged.segment_expand", "values must be a tensor, got None"):
        torch.ops.torch_ragged.segment_expand(None, torch.tensor([0, 1]))
    with raises(ValueError, "torch_ragged.segment_expand", "more than 2^63 - 1 elements"):
        torch_ragged.segment_expand(torch.zeros(1, 4), torch.tensor([0, 2**62]))


def test_softmax_backward_checks():
    with raises(ValueError, "torch_ragged.segment_softmax_backward", "grad_output must match output"):
        torch.ops.torch_ragged.segment_softmax_backward(torch.zeros(5, 3), DATA, torch.tensor([0, 5]), False)


def test_get_first_idx_overflow_and_negative_counts():
    with raises(ValueError, "torch_ragged.get_first_idx", "more than 2^63 - 1", "index 1"):
        torch_ragged.get_first_idx(torch.tensor([2**62] * 4))
    with raises(ValueError, "torch_ragged.get_first_idx", "numel_per_tensor must be non-negative", "-2 at index 1"):
        torch_ragged.get_first_idx(torch.tensor([1, -2]))


def test_zero_width_rows_return_at_once():
    # a loop per row over zero-byte rows would take forever: work is proportional to bytes
    out = torch_ragged.segment_expand(torch.zeros(1, 0), torch.tensor([0, 2**40]))
    assert out.shape == (2**40, 0)


def test_meta_first_idx_with_cpu_data_raises_instead_of_returning_garbage():
    meta_idx = torch.tensor([0, 2, 5], device="meta")
    with raises(ValueError, "torch_ragged.segment_sum", "first_idx must be on the CPU or on the data's device"):
        torch_ragged.segment_sum(DATA, meta_idx)
    # all-meta inputs propagate shapes
    assert torch_ragged.segment_sum(DATA.to("meta"), meta_idx).shape == (2, 2)


@pytest.mark.parametrize("call,message", [
    (lambda: torch_ragged.segment_ids(torch.tensor([0, 2**62])),
     "torch_ragged.segment_ids: the output would need more than 2^63 - 1 bytes"),
    (lambda: torch_ragged.segment_expand(torch.ones(2, 4), torch.tensor([0, 2**60, 2**61])),
     "torch_ragged.segment_expand: the output would have more than 2^63 - 1 elements"),
    (lambda: torch_ragged.segment_expand(torch.ones(2), torch.tensor([0, 2**40, 2**41])),
     "torch_ragged.segment_expand: the output would need 8796093022208 bytes, more than this machine's"),
])
def test_outputs_sized_by_huge_offsets_are_refused_by_name(call, message):
    with pytest.raises((ValueError, RuntimeError)) as info:
        call()
    assert message in str(info.value), str(info.value)


def test_meta_data_with_real_cpu_offsets_is_checked_like_real_data():
    """One rule for every segment op: index tensors on the CPU beside meta data are real, so they are checked as a
    real call checks them, and the outputs are meta (shapes only), of their true size where it is data-dependent."""
    meta = torch.zeros(5, 2, device="meta")
    bad = torch.tensor([0, 6, 5])
    for op in ("segment_sum", "segment_mean", "segment_max", "segment_softmax", "segment_log_softmax"):
        with raises(ValueError, f"torch_ragged.{op}", "first_idx must be non-decreasing"):
            getattr(torch_ragged, op)(meta, bad)
    with raises(ValueError, "torch_ragged.segment_expand", "num_rows = 7 but the segments hold"):
        torch_ragged.segment_expand(torch.zeros(2, device="meta"), torch.tensor([0, 3, 5]), num_rows=7)
    values, first_idx = torch_ragged.ragged_index_select(meta, torch.tensor([0, 2, 5]), torch.tensor([1, 0]))
    assert values.device.type == "meta" and values.shape == (5, 2) and first_idx.shape == (3,)
    with raises(IndexError, "torch_ragged.ragged_index_select", "index[0] = 3 is out of range"):
        torch_ragged.ragged_index_select(meta, torch.tensor([0, 2, 5]), torch.tensor([3]))
    assert torch_ragged.segment_sum(meta, torch.tensor([0, 2, 5])).shape == (2, 2)
