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
