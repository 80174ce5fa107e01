"""CUDA kernels against the CPU kernels. Skipped, with the reason, where no GPU is present."""

import pytest
import torch
import torch_ragged

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")


@pytest.mark.parametrize("counts", [[], [0], [2, 0, 5], list(range(70000))])
def test_get_first_idx_matches_cpu(counts):
    numel = torch.tensor(counts, dtype=torch.long)
    expected = torch_ragged.get_first_idx(numel)
    for dtype in (torch.int64, torch.int32):
        actual = torch_ragged.get_first_idx(numel.to(dtype).cuda())
        assert actual.device.type == "cuda" and actual.dtype == torch.int64
        assert torch.equal(actual.cpu(), expected)


def test_get_first_idx_rejects_negative_counts():
    with pytest.raises(ValueError, match="torch_ragged.get_first_idx: numel_per_tensor must be non-negative"):
        torch_ragged.get_first_idx(torch.tensor([1, -1], device="cuda"))


def test_get_first_idx_opcheck():
    torch.library.opcheck(torch.ops.torch_ragged.get_first_idx, (torch.tensor([3, 0, 2], device="cuda"),))


# ---- batch family and segment core: CUDA against CPU ----

def random_members(count, max_len, elem, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_len + 1, (count,), generator=generator)
    return [torch.randn(int(n), elem, generator=generator).to(dtype) for n in lengths]


def assert_same(cuda_result, cpu_result):
    assert cuda_result.device.type == "cuda"
    assert cuda_result.dtype == cpu_result.dtype and cuda_result.shape == cpu_result.shape
    assert torch.equal(cuda_result.cpu(), cpu_result)


@pytest.mark.parametrize("count,max_len", [(0, 0), (1, 0), (5, 3), (300, 50), (70000, 3)])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.complex128])
def test_batch_ops_agree_with_cpu(count, max_len, side, dtype):
    tensors = random_members(count, max_len, 3, dtype) if count else []
    if not tensors:  # list ops need one tensor for the dtype; the index-tensor ops take an empty batch
        spt = torch.zeros((0, 1), dtype=torch.long)
        padded = torch_ragged.packed_to_padded(torch.zeros(0, 3, device="cuda"), spt.cuda(),
                                               torch.zeros(1, dtype=torch.long, device="cuda"), 0.0, [4], side)
        assert padded.shape == (0, 4, 3)
        return
    packed_cpu, spt = torch_ragged.list_to_packed(tensors)
    packed, spt_cuda = torch_ragged.list_to_packed([t.cuda() for t in tensors])
    assert_same(packed, packed_cpu)
    assert torch.equal(spt_cuda, spt)
    padded_cpu, _ = torch_ragged.list_to_padded(tensors, 2, padding_side=side)
    assert_same(torch_ragged.list_to_padded([t.cuda() for t in tensors], 2, padding_side=side)[0], padded_cpu)
    first_idx = torch_ragged.get_first_idx(spt.prod(1))
    for index_device in ("cpu", "cuda"):
        padded = torch_ragged.packed_to_padded(packed, spt.to(index_device), first_idx.to(index_device), 2,
                                               padding_side=side)
        assert_same(padded, padded_cpu)
        assert_same(torch_ragged.padded_to_packed(padded, spt.to(index_device), side), packed_cpu)
    values = torch.randn(count, 2).to(dtype)
    assert_same(torch_ragged.tile_to_packed(values.cuda(), spt.prod(1).cuda()),
                torch_ragged.tile_to_packed(values, spt.prod(1)))
    if dtype != torch.int8:
        assert_same(torch_ragged.segment_sum(packed, first_idx.cuda()), torch_ragged.segment_sum(packed_cpu, first_idx))


def test_more_than_two_to_the_31_elements():
    free, _ = torch.cuda.mem_get_info()
    rows = 2**31 // 64 + 7  # > 2^31 uint8 elements in the packed and the padded tensor
    if free < 6 * rows * 64:
        pytest.skip(f"needs ~{6 * rows * 64 / 2**30:.0f} GiB of free GPU memory, {free / 2**30:.0f} GiB free")
    packed = torch.arange(rows * 64, dtype=torch.uint8, device="cuda").reshape(rows, 64)
    spt = torch.tensor([[rows - 5], [5]])
    first_idx = torch.tensor([0, rows - 5, rows])
    padded = torch_ragged.packed_to_padded(packed, spt, first_idx, 0)
    assert padded.shape == (2, rows - 5, 64)
    assert torch.equal(padded[1, :5], packed[-5:]) and not padded[1, 5:].any()
    assert torch.equal(padded[0, -1], packed[rows - 6])
    back = torch_ragged.padded_to_packed(padded, spt)
    assert torch.equal(back, packed)


@pytest.mark.parametrize("name", ["packed_to_padded", "padded_to_packed", "list_to_padded", "tile_to_packed",
                                  "segment_sum", "pad"])
def test_gradcheck_on_cuda(name):
    spt = torch.tensor([[2, 1], [1, 3]], device="cuda")
    first_idx = torch.tensor([0, 2, 5], device="cuda")
    packed = torch.randn(5, 2, dtype=torch.float64, device="cuda", requires_grad=True)
    padded = torch.randn(2, 2, 3, 2, dtype=torch.float64, device="cuda", requires_grad=True)
    cases = {
        "packed_to_padded": (lambda p: torch_ragged.packed_to_padded(p, spt, first_idx, 0.0), packed),
        "padded_to_packed": (lambda p: torch_ragged.padded_to_packed(p, spt, "left"), padded),
        "list_to_padded": (lambda p: torch_ragged.list_to_padded([p[:2], p[2:]], 0.0)[0], packed),
        "tile_to_packed": (lambda p: torch_ragged.tile_to_packed(p, torch.tensor([2, 0, 3], device="cuda")),
                           torch.randn(3, 2, dtype=torch.float64, device="cuda", requires_grad=True)),
        "segment_sum": (lambda p: torch_ragged.segment_sum(p, first_idx), packed),
        "pad": (lambda p: torch_ragged.pad(p, ((2, 7), (1, 0)), "symmetric"), packed),
    }
    fn, x = cases[name]
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_opcheck_on_cuda():
    from test_batch_pt2 import samples
    from test_pad_pt2 import pad_samples

    for op, args in [*samples(), *pad_samples()]:
        moved = [a.cuda() if isinstance(a, torch.Tensor) else
                 [t.cuda() for t in a] if isinstance(a, list) and a and isinstance(a[0], torch.Tensor) else a
                 for a in args]
        moved = [m.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else m
                 for m, a in zip(moved, args, strict=True)]
        torch.library.opcheck(op, tuple(moved))


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_sizes_given_and_device_index_tensors_do_not_synchronise(side, rank):
    """packed_to_padded with max_shape, padded_to_packed / tile_to_packed with num_rows: no host sync."""
    generator = torch.Generator().manual_seed(rank)
    import reference as ref

    tensors = ref.random_batch(generator, 40, rank, 3, torch.float32)
    packed, spt = torch_ragged.list_to_packed(tensors)
    first_idx = torch_ragged.get_first_idx(spt.prod(1))
    max_shape = [int(m) + 1 for m in spt.max(0).values] if rank else []
    padded_cpu = torch_ragged.packed_to_padded(packed, spt, first_idx, -1.0, max_shape, side)
    values = torch.randn(spt.shape[0], 2)
    tiled_cpu = torch_ragged.tile_to_packed(values, spt.prod(1), packed.shape[0])
    packed_d, spt_d, first_idx_d, values_d, numel_d = (t.cuda() for t in (packed, spt, first_idx, values,
                                                                           spt.prod(1)))
    padded_d = padded_cpu.cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host synchronisation now raises
    try:
        padded = torch_ragged.packed_to_padded(packed_d, spt_d, first_idx_d, -1.0, max_shape, side)
        repacked = torch_ragged.padded_to_packed(padded_d, spt_d, side, packed.shape[0])
        tiled = torch_ragged.tile_to_packed(values_d, numel_d, packed.shape[0])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert_same(padded, padded_cpu)
    assert_same(repacked, packed)
    assert_same(tiled, tiled_cpu)
