"""The batch family against Kaolin's documented examples and the slow reference (reference.py)."""

import pytest
import reference as ref
import torch
import torch_ragged
from devices import DEVICES
from torch_ragged import batch

DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64]
SIDES = ["right", "left"]


def assert_equal(actual, expected):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.equal(actual.cpu(), expected.cpu())


# ---- Every example of the seed (kaolin.ops.batch docs), output exactly as shown ----

def test_kaolin_fill_max_shape_example():
    shape_per_tensor = torch.LongTensor([[2, 3, 5], [3, 4, 2]])
    assert_equal(torch_ragged.fill_max_shape(shape_per_tensor, (6, -1, -1)), torch.tensor([6, 4, 5]))


def test_kaolin_get_first_idx_example():
    assert_equal(torch_ragged.get_first_idx(torch.LongTensor([2, 3, 5])), torch.tensor([0, 2, 5, 10]))


def test_kaolin_get_shape_per_tensor_example():
    tensor_list = [torch.zeros((1, 3, 4, 2)), torch.ones((2, 5, 3, 2))]
    assert_equal(torch_ragged.get_shape_per_tensor(tensor_list), torch.tensor([[1, 3, 4], [2, 5, 3]]))


def test_kaolin_list_to_packed_example():
    a = torch.LongTensor([[0, 1, 2], [1, 2, 3]])
    b = torch.LongTensor([[2, 4, 5]])
    packed_tensor, shape_per_tensor = torch_ragged.list_to_packed([a, b])
    assert_equal(packed_tensor, torch.tensor([[0, 1, 2], [1, 2, 3], [2, 4, 5]]))
    assert_equal(shape_per_tensor, torch.tensor([[2], [1]]))


def test_kaolin_list_to_padded_example():
    a = torch.LongTensor([[0, 1, 2], [1, 2, 3]])
    b = torch.LongTensor([[2, 4, 5]])
    padded_tensor, shape_per_tensor = torch_ragged.list_to_padded([a, b], -1, [3])
    assert_equal(padded_tensor, torch.tensor([[[0, 1, 2], [1, 2, 3], [-1, -1, -1]],
                                              [[2, 4, 5], [-1, -1, -1], [-1, -1, -1]]]))
    assert_equal(shape_per_tensor, torch.tensor([[2], [1]]))


def test_kaolin_packed_to_list_example():
    packed_tensor = torch.arange(16).reshape(8, 2)
    out = torch_ragged.packed_to_list(packed_tensor, torch.LongTensor([[3], [4], [1]]),
                                      torch.LongTensor([0, 3, 7, 8]))
    assert len(out) == 3
    assert_equal(out[0], torch.tensor([[0, 1], [2, 3], [4, 5]]))
    assert_equal(out[1], torch.tensor([[6, 7], [8, 9], [10, 11], [12, 13]]))
    assert_equal(out[2], torch.tensor([[14, 15]]))


def test_kaolin_padded_to_list_example():
    padded_tensor = torch.LongTensor([[[0, 1, 2], [1, 2, 3], [-1, -1, -1]],
                                      [[2, 4, 5], [-1, -1, -1], [-1, -1, -1]]])
    out = torch_ragged.padded_to_list(padded_tensor, torch.LongTensor([[2], [1]]))
    assert len(out) == 2
    assert_equal(out[0], torch.tensor([[0, 1, 2], [1, 2, 3]]))
    assert_equal(out[1], torch.tensor([[2, 4, 5]]))


def test_kaolin_tile_to_packed_example():
    out = torch_ragged.tile_to_packed(torch.tensor([0., 6., 7.]), torch.LongTensor([2, 2, 3]))
    assert_equal(out, torch.tensor([[0.], [0.], [6.], [6.], [7.], [7.], [7.]]))


def test_kaolin_texture_example_shapes():
    # The seed's prose: textures (32, 32, 3) and (64, 16, 3) pad to (2, 64, 32, 3) or to (2, 128, 128, 3).
    textures = [torch.rand(32, 32, 3), torch.rand(64, 16, 3)]
    padded, shape_per_tensor = torch_ragged.list_to_padded(textures, 0.0)
    assert padded.shape == (2, 64, 32, 3)
    assert_equal(shape_per_tensor, torch.tensor([[32, 32], [64, 16]]))
    assert torch_ragged.list_to_padded(textures, 0.0, (128, 128))[0].shape == (2, 128, 128, 3)
    packed, _ = torch_ragged.list_to_packed(textures)
    assert packed.shape == (32 * 32 + 64 * 16, 3)
    assert_equal(torch_ragged.get_first_idx(shape_per_tensor.prod(1)), torch.tensor([0, 1024, 2048]))


def test_functions_are_importable_from_the_batch_module_and_the_package():
    for name in batch.__all__:
        assert getattr(batch, name) is getattr(torch_ragged, name)


# ---- Reference comparisons: dtypes x ranks x sides x max_shape, incl. empty members ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_round_trips_match_reference(device, dtype, side, rank):
    generator = torch.Generator().manual_seed(rank * 7 + len(side))
    cpu_tensors = ref.random_batch(generator, 6, rank, 3, dtype)
    tensors = [t.to(device) for t in cpu_tensors]
    pad = 1 if dtype != torch.bool else True

    padded, shape_per_tensor = torch_ragged.list_to_padded(tensors, pad, padding_side=side)
    assert padded.device.type == device
    expected_padded, expected_shapes = ref.list_to_padded(cpu_tensors, pad, side=side)
    assert_equal(padded, expected_padded)
    assert_equal(shape_per_tensor, expected_shapes)

    packed, shapes2 = torch_ragged.list_to_packed(tensors)
    expected_packed, _ = ref.list_to_packed(cpu_tensors)
    assert_equal(packed, expected_packed)
    assert_equal(shapes2, expected_shapes)

    shape_per_tensor = shape_per_tensor.to(device)  # index tensors on the data's device
    first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
    assert_equal(first_idx, ref.first_idx_of(shape_per_tensor.cpu()))
    assert_equal(torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, pad, padding_side=side),
                 expected_padded)
    assert_equal(torch_ragged.padded_to_packed(padded, shape_per_tensor, padding_side=side), expected_packed)

    for actual, expected in zip(torch_ragged.padded_to_list(padded, shape_per_tensor, side), cpu_tensors,
                                strict=True):
        assert_equal(actual, expected)
    for actual, expected in zip(torch_ragged.packed_to_list(packed, shape_per_tensor, first_idx), cpu_tensors,
                                strict=True):
        assert_equal(actual, expected)


@pytest.mark.parametrize("side", SIDES)
def test_max_shape_with_none_and_minus_one_entries(side):
    tensors = [torch.rand(2, 3, 4), torch.rand(3, 1, 4)]
    for max_shape in ([5, None], [5, -1], torch.tensor([5, -1]), (5, 3)):
        padded, _ = torch_ragged.list_to_padded(tensors, 0.5, max_shape, padding_side=side)
        assert_equal(padded, ref.list_to_padded(tensors, 0.5, [5, 3], side)[0])
    packed, shape_per_tensor = torch_ragged.list_to_packed(tensors)
    first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
    padded = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.5, [None, 6], side)
    assert_equal(padded, ref.list_to_padded(tensors, 0.5, [3, 6], side)[0])


def test_left_padding_aligns_to_the_end_of_every_dim():
    padded, _ = torch_ragged.list_to_padded([torch.ones(1, 2, 1), torch.ones(2, 1, 1)], 0, padding_side="left")
    assert padded[..., 0].tolist() == [[[0, 0], [1, 1]], [[0, 1], [0, 1]]]


def test_empty_batch_and_zero_size_members():
    empty_spt = torch.zeros((0, 2), dtype=torch.long)
    padded = torch_ragged.packed_to_padded(torch.zeros(0, 3), empty_spt, torch.zeros(1, dtype=torch.long), 0.0)
    assert padded.shape == (0, 0, 0, 3)
    padded = torch_ragged.packed_to_padded(torch.zeros(0, 3), empty_spt, torch.zeros(1, dtype=torch.long), 0.0,
                                           [2, 4])
    assert padded.shape == (0, 2, 4, 3)
    assert torch_ragged.padded_to_packed(padded, empty_spt).shape == (0, 3)
    assert torch_ragged.get_first_idx(torch.zeros(0, dtype=torch.long)).tolist() == [0]
    assert torch_ragged.tile_to_packed(torch.zeros(0), torch.zeros(0, dtype=torch.long)).shape == (0, 1)

    tensors = [torch.rand(0, 2), torch.rand(3, 2), torch.rand(0, 2)]
    padded, spt = torch_ragged.list_to_padded(tensors, -1.0)
    assert_equal(padded, ref.list_to_padded(tensors, -1.0)[0])
    all_empty = [torch.rand(0, 2), torch.rand(0, 2)]
    assert torch_ragged.list_to_padded(all_empty, 0.0)[0].shape == (2, 0, 2)
    assert torch_ragged.list_to_packed(all_empty)[0].shape == (0, 2)
    assert torch_ragged.list_to_packed([torch.rand(2, 0)])[0].shape == (2, 0)


def test_non_contiguous_inputs():
    base = torch.arange(60.0).reshape(3, 4, 5)
    tensors = [base[:, 1:3, ::2].transpose(0, 1), base[1:, :, ::2]]
    assert not tensors[0].is_contiguous()
    assert_equal(torch_ragged.list_to_padded(tensors, 0.0)[0], ref.list_to_padded(tensors, 0.0)[0])
    packed, spt = ref.list_to_packed([t.contiguous() for t in tensors])
    first_idx = ref.first_idx_of(spt)
    packed_nc = packed.t().contiguous().t()
    assert not packed_nc.is_contiguous()
    padded = torch_ragged.packed_to_padded(packed_nc, spt, first_idx, 0.0)
    assert_equal(padded, ref.list_to_padded(tensors, 0.0)[0])
    assert_equal(torch_ragged.padded_to_packed(padded.transpose(1, 2).contiguous().transpose(1, 2), spt), packed)


def test_index_tensors_may_be_int32():
    packed = torch.arange(10.0).reshape(5, 2)
    spt = torch.tensor([[2], [3]], dtype=torch.int32)
    first_idx = torch.tensor([0, 2, 5], dtype=torch.int32)
    padded = torch_ragged.packed_to_padded(packed, spt, first_idx, 0.0)
    assert_equal(padded, ref.list_to_padded([packed[:2], packed[2:]], 0.0)[0])
    assert_equal(torch_ragged.get_first_idx(torch.tensor([1, 2], dtype=torch.int32)), torch.tensor([0, 1, 3]))


def test_padding_value_is_cast_to_the_dtype():
    ints = [torch.zeros(1, 1, dtype=torch.int32), torch.zeros(2, 1, dtype=torch.int32)]
    padded, _ = torch_ragged.list_to_padded(ints, 7.0)
    assert padded.dtype == torch.int32 and padded[0, 1, 0].item() == 7
    bools = [torch.zeros(1, 1, dtype=torch.bool), torch.zeros(2, 1, dtype=torch.bool)]
    padded, _ = torch_ragged.list_to_padded(bools, True)
    assert padded[0, 1, 0].item() is True


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("trailing", [(), (3,), (2, 2)])
def test_tile_to_packed_matches_reference(device, dtype, trailing):
    values = torch.arange(4 * max(1, torch.Size(trailing).numel())).reshape(4, *trailing).to(dtype).to(device)
    numel = torch.tensor([3, 0, 1, 5], device=device)
    assert_equal(torch_ragged.tile_to_packed(values, numel), ref.tile_to_packed(values, numel))
    assert_equal(torch_ragged.tile_to_packed(values, numel, 9), ref.tile_to_packed(values, numel))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.float16, torch.complex128])
def test_segment_sum_matches_reference(device, dtype):
    data = torch.randint(-5, 5, (9, 2, 3)).to(dtype).to(device)
    first_idx = torch.tensor([0, 4, 4, 9], device=device)
    expected = torch.stack([data[0:4].sum(0), torch.zeros_like(data[0]), data[4:9].sum(0)]).to(dtype)
    assert_equal(torch_ragged.segment_sum(data, first_idx), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_large_random_batch_spans_many_threads(device):
    generator = torch.Generator().manual_seed(0)
    tensors = [torch.rand(int(n), 5, generator=generator).to(device)
               for n in torch.randint(0, 3000, (40,), generator=generator)]
    for side in SIDES:
        padded, spt = torch_ragged.list_to_padded(tensors, -2.0, padding_side=side)
        assert_equal(padded, ref.list_to_padded(tensors, -2.0, side=side)[0])
        packed = torch.cat(tensors)
        assert_equal(torch_ragged.padded_to_packed(padded, spt, side), packed)
