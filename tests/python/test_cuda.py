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


# ---- review defects of the CUDA host code (each was found by reading; these are their GPU checks) ----

def test_device_only_padded_to_packed_with_an_empty_batch_and_rows_is_a_value_error():
    """An empty batch with num_rows > 0 is refused on the host (the gather once read null tables)."""
    padded = torch.zeros(0, 3, 2, device="cuda")
    spt = torch.zeros(0, 1, dtype=torch.long, device="cuda")
    with pytest.raises(ValueError, match="torch_ragged.padded_to_packed"):
        torch_ragged.padded_to_packed(padded, spt, "right", 5)
    assert torch_ragged.padded_to_packed(padded, spt, "right", 0).shape == (0, 2)


def test_device_only_packed_to_padded_validates_an_empty_output():
    """A 0 in max_shape below a member's size, or rows with an empty batch: refused as on the CPU."""
    packed = torch.zeros(4, 2, device="cuda")
    with pytest.raises(ValueError, match="torch_ragged.packed_to_padded: the batch is empty"):
        torch_ragged.packed_to_padded(packed, torch.zeros(0, 1, dtype=torch.long, device="cuda"),
                                      torch.zeros(1, dtype=torch.long, device="cuda"), 0.0, [3])
    # Sizes are only known on the device there: a device-side assert (in a child process, as it
    # ends the CUDA context).
    assert_device_assert("""
        torch_ragged.packed_to_padded(torch.zeros(4, 2, device="cuda"), torch.tensor([[4]], device="cuda"),
                                      torch.tensor([0, 4], device="cuda"), 0.0, [0])
    """)


def assert_device_assert(code):
    """Runs `code` in a child process and checks that it died of a device-side assert."""
    import subprocess
    import sys
    import textwrap

    script = "import torch, torch_ragged\n" + textwrap.dedent(code) + "\ntorch.cuda.synchronize()\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0, "expected a device-side assert, the call succeeded"
    assert "device-side assert" in result.stderr or "torch_ragged:" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("call", [
    lambda cpu, dev: torch_ragged.segment_sum(cpu, dev),
    lambda cpu, dev: torch_ragged.segment_max(cpu, dev),
    lambda cpu, dev: torch_ragged.segment_softmax(cpu, dev),
    lambda cpu, dev: torch.ops.torch_ragged.segment_softmax_backward(cpu, cpu, dev, False),
])
def test_cpu_data_with_a_cuda_index_is_a_value_error(call):
    """Devices are checked before the CUDA guard: the documented ValueError, not torch's raw error."""
    data = torch.randn(5, 2)
    with pytest.raises(ValueError, match="first_idx must be on the CPU or on the data's device"):
        call(data, torch.tensor([0, 2, 5], device="cuda"))


def test_cpu_pages_with_cuda_origins_is_a_value_error():
    pages = torch.randn(1, 2, 2, 1)
    with pytest.raises(ValueError, match="origins must be on the CPU or on the data's device"):
        torch_ragged.tiles_to_dense(pages, torch.zeros(1, 2, dtype=torch.long, device="cuda"), [0, 0], [2, 2])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_device_only_batch_path_refuses_an_index_on_another_gpu():
    packed = torch.zeros(4, 2, device="cuda:0")
    with pytest.raises(ValueError, match="shape_per_tensor must be on the CPU or on the data's device"):
        torch_ragged.packed_to_padded(packed, torch.tensor([[4]], device="cuda:1"),
                                      torch.tensor([0, 4], device="cuda:1"), 0.0, [4])


def test_depthwise_correlate_is_float32_accurate_with_tf32_allowed():
    """cuDNN would round through TF32 (torch's default allows it); the op keeps float32 accuracy."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 33, 35, 16, generator=generator)
    w = torch.randn(3, 3, 16, generator=generator)
    expected = torch.ops.torch_ragged.tiles_depthwise_correlate(x.double(), w.double(), [1, 1])
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        actual = torch.ops.torch_ragged.tiles_depthwise_correlate(x.cuda(), w.cuda(), [1, 1])
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    assert torch.backends.cudnn.allow_tf32 == saved  # the user's setting restored
    torch.testing.assert_close(actual.cpu().double(), expected, rtol=1e-5, atol=1e-5)


def test_check_kernels_cover_more_entries_than_one_grid():
    """The check kernels are grid-stride: a bad entry past 2^28 segments is still caught."""
    assert_device_assert("""
        first_idx = torch.zeros((1 << 28) + 6, dtype=torch.long, device="cuda")
        first_idx[-2] = 1  # first_idx[-2] > first_idx[-1] = 0: decreasing, past the first grid's reach
        torch_ragged.segment_sum(torch.zeros(0, 1, device="cuda"), first_idx)
    """)


def count_host_syncs(fn):
    """The number of host synchronisations torch's sync debug mode reports while fn runs."""
    import warnings

    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return result, sum("synchroniz" in str(w.message) for w in caught)


@pytest.mark.parametrize("first_idx_device,index_device,syncs", [
    ("cpu", "cpu", 0), ("cpu", "cuda", 1), ("cuda", "cpu", 1), ("cuda", "cuda", 1),
])
def test_ragged_index_select_host_reads_are_as_documented(first_idx_device, index_device, syncs):
    values = torch.randn(10, 3)
    first_idx, index = torch.tensor([0, 4, 4, 10]), torch.tensor([2, 0, -1, 1])
    expected, expected_first_idx = torch_ragged.ragged_index_select(values, first_idx, index)
    values_d, first_idx_d, index_d = values.cuda(), first_idx.to(first_idx_device), index.to(index_device)
    (out, out_first_idx), counted = count_host_syncs(
        lambda: torch.ops.torch_ragged.ragged_index_select(values_d, first_idx_d, index_d))
    assert counted == syncs
    assert_same(out, expected)
    assert out_first_idx.device == first_idx_d.device and torch.equal(out_first_idx.cpu(), expected_first_idx)
