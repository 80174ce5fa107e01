"""Bad input: a clear Python exception naming the op and the argument, never a crash or truncation."""

import pytest
import torch
import torch_ragged
from expect import raises

SPT = torch.tensor([[2], [3]])
FIRST_IDX = torch.tensor([0, 2, 5])
PACKED = torch.zeros(5, 2)


def test_list_with_mismatched_dtypes_last_dims_or_ranks():
    with raises(TypeError, "torch_ragged.list_to_padded", "dtype", "tensor 1"):
        torch_ragged.list_to_padded([torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.float64)], 0)
    with raises(ValueError, "torch_ragged.list_to_packed", "last dim", "tensor 1"):
        torch_ragged.list_to_packed([torch.zeros(2, 3), torch.zeros(2, 4)])
    with raises(ValueError, "torch_ragged.get_shape_per_tensor", "number of dims", "tensor 1"):
        torch_ragged.get_shape_per_tensor([torch.zeros(2, 3), torch.zeros(1, 2, 3)])
    with raises(ValueError, "torch_ragged.list_to_packed", "at least 1 dim"):
        torch_ragged.list_to_packed([torch.tensor(1.0)])
    with raises(ValueError, "torch_ragged.list_to_padded", "at least one tensor"):
        torch_ragged.list_to_padded([], 0)


def test_first_idx_wrong_length_not_monotonic_or_not_matching_rows():
    with raises(ValueError, "torch_ragged.packed_to_padded", "first_idx", "3 entries", "[2]"):
        torch_ragged.packed_to_padded(PACKED, SPT, torch.tensor([0, 2]), 0)
    with raises(ValueError, "torch_ragged.packed_to_padded", "first_idx must be non-decreasing"):
        torch_ragged.packed_to_padded(torch.zeros(3, 2), torch.tensor([[3], [0], [0]]), torch.tensor([0, 3, 2, 3]), 0)
    with raises(ValueError, "torch_ragged.packed_to_padded", "first_idx[-1] = 5", "row count 6"):
        torch_ragged.packed_to_padded(torch.zeros(6, 2), SPT, FIRST_IDX, 0)
    with raises(ValueError, "torch_ragged.packed_to_list", "first_idx[0] must be 0"):
        torch_ragged.packed_to_list(PACKED, SPT, torch.tensor([1, 2, 5]))
    with raises(ValueError, "torch_ragged.packed_to_padded", "first_idx must be 1-D"):
        torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX.view(1, 3), 0)
    with raises(TypeError, "torch_ragged.packed_to_padded", "first_idx must be an integer"):
        torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX.float(), 0)


def test_shape_per_tensor_wrong_rank_negative_or_disagreeing():
    with raises(ValueError, "torch_ragged.packed_to_padded", "shape_per_tensor must be 2-D"):
        torch_ragged.packed_to_padded(PACKED, torch.tensor([[[2, 3]]]), FIRST_IDX, 0)  # 1-D: lengths (accepted)
    with raises(ValueError, "torch_ragged.padded_to_packed", "shape_per_tensor must be non-negative",
                "sub-tensor 1"):
        torch_ragged.padded_to_packed(torch.zeros(2, 3, 2), torch.tensor([[2], [-1]]))
    with raises(ValueError, "torch_ragged.packed_to_padded", "sub-tensor 1", "prod([4]) = 4"):
        torch_ragged.packed_to_padded(PACKED, torch.tensor([[2], [4]]), FIRST_IDX, 0)
    with raises(ValueError, "torch_ragged.padded_to_packed", "3 dims"):
        torch_ragged.padded_to_packed(torch.zeros(2, 3, 3, 2), SPT)
    with raises(ValueError, "torch_ragged.padded_to_packed", "padded_tensor.size(0)"):
        torch_ragged.padded_to_packed(torch.zeros(3, 3, 2), SPT)
    with raises(TypeError, "torch_ragged.fill_max_shape", "shape_per_tensor must be an integer"):
        torch_ragged.fill_max_shape(SPT.double())


def test_padded_tensor_smaller_than_shape_per_tensor():
    with raises(ValueError, "torch_ragged.padded_to_packed", "smaller than sub-tensor 1"):
        torch_ragged.padded_to_packed(torch.zeros(2, 2, 2), SPT)
    with raises(ValueError, "torch_ragged.padded_to_list", "smaller than sub-tensor 1"):
        torch_ragged.padded_to_list(torch.zeros(2, 2, 2), SPT)


def test_max_shape_smaller_than_a_sub_tensor_never_truncates():
    with raises(ValueError, "torch_ragged.packed_to_padded", "max_shape[0] = 2", "sub-tensor 1", "dim 0"):
        torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX, 0, [2])
    with raises(ValueError, "torch_ragged.list_to_padded", "max_shape[1] = 1", "sub-tensor 0"):
        torch_ragged.list_to_padded([torch.zeros(1, 2, 3)], 0, [None, 1])
    with raises(ValueError, "torch_ragged.fill_max_shape", "max_shape[0] = 1"):
        torch_ragged.fill_max_shape(SPT, [1])
    with raises(ValueError, "torch_ragged.packed_to_padded", "max_shape must have"):
        torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX, 0, [3, 3])


def test_unknown_padding_side():
    for call in (
        lambda: torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX, 0, padding_side="top"),
        lambda: torch_ragged.padded_to_packed(torch.zeros(2, 3, 2), SPT, "top"),
        lambda: torch_ragged.list_to_padded([PACKED], 0, padding_side="top"),
        lambda: torch_ragged.padded_to_list(torch.zeros(2, 3, 2), SPT, "top"),
    ):
        with raises(ValueError, "padding_side must be \"right\" or \"left\", got \"top\""):
            call()


def test_tile_to_packed_arguments():
    # tile_to_packed is get_first_idx + segment_expand: their checks name them.
    with raises(ValueError, "torch_ragged.tile_to_packed", "values must have numel_per_tensor.size(0) = 3"):
        torch_ragged.tile_to_packed(torch.zeros(2), torch.tensor([1, 1, 1]))
    with raises(ValueError, "torch_ragged.get_first_idx", "numel_per_tensor must be non-negative"):
        torch_ragged.tile_to_packed(torch.zeros(2), torch.tensor([1, -1]))
    with raises(ValueError, "torch_ragged.segment_expand", "num_rows = 5", "hold first_idx[-1] = 2 rows"):
        torch_ragged.tile_to_packed(torch.zeros(2), torch.tensor([1, 1]), 5)


@pytest.mark.parametrize("dtype,value", [(torch.uint8, 300), (torch.uint8, -1), (torch.float16, 2.0**62),
                                         (torch.int64, 2.5), (torch.int32, float("nan")), (torch.int8, 128),
                                         (torch.bool, 2), (torch.int64, 1 + 2j)])
def test_padding_value_that_does_not_fit_the_dtype(dtype, value):
    # issue 16, item 15: these wrapped (255), became inf, truncated (2) or became INT_MIN silently
    tensors = [torch.zeros(1, 1, dtype=dtype), torch.zeros(2, 1, dtype=dtype)]
    with raises(ValueError, "torch_ragged.list_to_padded: padding_value"):
        torch_ragged.list_to_padded(tensors, value)
    packed, spt = torch_ragged.list_to_packed(tensors)
    with raises(ValueError, "torch_ragged.packed_to_padded: padding_value"):
        torch_ragged.packed_to_padded(packed, spt, torch.tensor([0, 1, 3]), value)


def test_padding_values_that_fit_are_taken():
    tensors = [torch.zeros(1, 1, dtype=torch.uint8), torch.zeros(2, 1, dtype=torch.uint8)]
    assert torch_ragged.list_to_padded(tensors, 255.0)[0][0, 1, 0] == 255
    halves = [t.half() for t in tensors]
    assert torch.isinf(torch_ragged.list_to_padded(halves, float("-inf"))[0][0, 1, 0])
    assert torch_ragged.list_to_padded([t.bool() for t in tensors], True)[0][0, 1, 0]
    big = [t.to(torch.uint64) for t in tensors]
    assert torch_ragged.list_to_padded(big, 2**63)[0][0, 1, 0].item() == 2**63


@pytest.mark.skipif(not torch.cuda.is_available() or torch_ragged.cuda_version() != -1,
                    reason="needs a CUDA device and a CPU-only build of torch_ragged")
def test_cuda_tensors_in_a_cpu_only_build_raise_clearly():
    with pytest.raises(NotImplementedError, match="torch_ragged.packed_to_padded: got CUDA tensors"):
        torch_ragged.packed_to_padded(PACKED.cuda(), SPT, FIRST_IDX, 0)


def test_sizes_are_read_only_after_validation_and_none_is_named():
    # issue 16, items 16 and 17: a 1-D padded tensor once built a std::vector from a reversed range
    with raises(ValueError, "torch_ragged.padded_to_packed", "padded_tensor must have", "got shape [3]"):
        torch_ragged.padded_to_packed(torch.zeros(3), torch.zeros(3, 0, dtype=torch.long))
    with raises(ValueError, "torch_ragged.packed_to_padded", "packed_tensor must be 2-D"):
        torch_ragged.packed_to_padded(torch.tensor(1.0), torch.zeros(1, 1, dtype=torch.long), torch.tensor([0, 1]), 0)
    with raises(TypeError, "torch_ragged.packed_to_padded", "packed_tensor must be a tensor, got None"):
        torch.ops.torch_ragged.packed_to_padded(None, torch.zeros(1, 1, dtype=torch.long), torch.tensor([0, 1]), 0)
    with raises(TypeError, "torch_ragged.padded_to_packed", "shape_per_tensor must be a tensor, got None"):
        torch.ops.torch_ragged.padded_to_packed(torch.zeros(1, 2, 1), None)


def test_tile_to_packed_of_zero_width_rows_returns_at_once():
    # issue 16, item 13: one loop iteration per zero-byte row once hung on 2^62 rows
    assert torch_ragged.tile_to_packed(torch.zeros(1, 0), torch.tensor([2**62])).shape == (2**62, 0)


def test_meta_tensors_mixed_with_real_ones_raise_instead_of_returning_garbage():
    # issue 16, items 10 and 14: these reached the fake kernels eagerly and returned uninitialised CPU memory
    meta = torch.ones(1, 3, device="meta")
    with raises(ValueError, "torch_ragged.list_to_padded", "tensors must share one device", "tensor 1 is on meta"):
        torch_ragged.list_to_padded([torch.ones(2, 3), meta], 0)
    with raises(ValueError, "torch_ragged.list_to_packed", "tensors must share one device"):
        torch_ragged.list_to_packed([torch.ones(2, 3), meta])
    with raises(ValueError, "torch_ragged.get_shape_per_tensor", "tensors must share one device"):
        torch_ragged.get_shape_per_tensor([meta, torch.ones(2, 3)])
    with raises(ValueError, "torch_ragged.packed_to_padded", "shape_per_tensor must be on the CPU or on the data's"):
        torch_ragged.packed_to_padded(torch.ones(3, 2), torch.tensor([[1], [2]], device="meta"), FIRST_IDX[:3], 0)
    with raises(ValueError, "torch_ragged.pad", "constant_values must be on the CPU or on the input's device"):
        torch_ragged.pad(torch.ones(3), 1, constant_values=torch.tensor(2.0, device="meta"))
    # all-meta inputs propagate shapes
    padded, _ = torch_ragged.list_to_padded([torch.ones(2, 3, device="meta"), meta], 0)
    assert padded.device.type == "meta" and padded.shape == (2, 2, 3)


def test_kaolin_messages_for_rank_and_last_dim_mismatches():
    """Issue 16, item 11: Kaolin's (torch.stack / torch.cat) wording appears in ours, after our own."""
    for op in (torch_ragged.list_to_packed, lambda tensors: torch_ragged.list_to_padded(tensors, 0)):
        with pytest.raises(ValueError) as info:
            op([torch.zeros(2, 3, 3), torch.zeros(2, 3, 3, 3)])
        assert "Expected all tensors to have 3 dimensions but got 4 at index 1" in str(info.value)
        assert "tensors must share one number of dims" in str(info.value)
        with pytest.raises(ValueError) as info:
            op([torch.zeros(2, 3), torch.zeros(2, 4)])
        assert ("Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor "
                "number 1 in the list.") in str(info.value)


def test_kaolin_message_for_a_last_dim_mismatch():
    """Kaolin's own test (test_list_to_packed_fail1) matches this exact sentence."""
    tensors = [torch.zeros(2, 2, 2), torch.zeros(3, 3, 3)]
    with pytest.raises(ValueError, match="Expected all tensor to have last dimension 2 but got 3 at index 1"):
        torch_ragged.list_to_packed(tensors)


def test_shape_per_tensor_of_meta_tensors_is_their_true_shape():
    tensors = [torch.zeros(2, 3, 5, device="meta"), torch.zeros(4, 1, 5, device="meta")]
    assert torch.equal(torch_ragged.get_shape_per_tensor(tensors), torch.tensor([[2, 3], [4, 1]]))
    _, shapes = torch_ragged.list_to_packed(tensors)
    assert torch.equal(shapes, torch.tensor([[2, 3], [4, 1]]))


@pytest.mark.parametrize("call,exception,message", [
    (lambda: torch.ops.torch_ragged.list_to_packed([]), ValueError,
     "torch_ragged.list_to_packed: tensor_list must hold at least one tensor, got an empty list"),
    (lambda: torch.ops.torch_ragged.list_to_padded([], 0.0), ValueError,
     "torch_ragged.list_to_padded: tensor_list must hold at least one tensor"),
    (lambda: torch.ops.torch_ragged.get_first_idx(None), TypeError,
     "torch_ragged.get_first_idx: numel_per_tensor must be a tensor, got None"),
    (lambda: torch.ops.torch_ragged.segment_sum(None, None), TypeError,
     "torch_ragged.segment_sum: data must be a tensor, got None"),
    (lambda: torch.ops.torch_ragged.pad_index(None, [1, 1], "edge", None), TypeError,
     "torch_ragged.pad_index: self must be a tensor, got None"),
])
def test_calls_without_any_tensor_name_the_op_and_argument(call, exception, message):
    """The dispatcher has no tensor to pick a kernel by; it used to print its table of dispatch keys."""
    with pytest.raises(exception) as info:
        call()
    assert message in str(info.value) and "dispatch" not in str(info.value)


def test_every_message_names_the_op_and_lists_are_taken_as_the_siblings_take_them():
    """max_shape errors name the op; shape_per_tensor / first_idx given as Python lists are read as get_first_idx
    reads them (they leaked the dispatcher's schema dump); the first_idx message does not claim int64 only."""
    with raises(ValueError, "torch_ragged.list_to_padded: max_shape must be 1-D", "(1, 2)"):
        torch_ragged.list_to_padded([torch.zeros(2, 3)], 0, torch.tensor([[3, 3]]))
    with raises(ValueError, "torch_ragged.packed_to_padded: max_shape must be 1-D"):
        torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX, 0, torch.tensor([[3]]))
    with raises(TypeError, "torch_ragged.fill_max_shape: max_shape must be a sequence"):
        torch_ragged.fill_max_shape(SPT, 3.5)
    with raises(TypeError, "torch_ragged.list_to_padded: max_shape must hold integers"):
        torch_ragged.list_to_padded([torch.zeros(2, 3)], 0, torch.tensor([3.0]))
    expected = torch_ragged.packed_to_padded(PACKED, SPT, FIRST_IDX, 0)
    assert torch.equal(torch_ragged.packed_to_padded(PACKED, [[2], [3]], [0, 2, 5], 0), expected)
    assert torch.equal(torch_ragged.packed_to_padded(PACKED, [2, 3], [0, 2, 5], 0), expected)  # lengths
    parts = torch_ragged.packed_to_list(PACKED, [[2], [3]], [0, 2, 5])
    assert [p.shape[0] for p in parts] == [2, 3]
    padded = torch_ragged.padded_to_packed(expected, [[2], [3]])
    assert torch.equal(padded, PACKED)
    assert torch.equal(torch_ragged.fill_max_shape([[2, 3], [3, 1]], [-1, 5]), torch.tensor([3, 5]))
    with raises(TypeError, "torch_ragged.packed_to_padded: shape_per_tensor must hold integers"):
        torch_ragged.packed_to_padded(PACKED, [[2.5], [3]], [0, 2, 5], 0)
    with raises(ValueError, "torch_ragged.packed_to_padded: first_idx must be 1-D (an integer tensor) with "
                            "shape_per_tensor.size(0) + 1 = 3 entries"):
        torch_ragged.packed_to_padded(PACKED, SPT, [0, 5], 0)
