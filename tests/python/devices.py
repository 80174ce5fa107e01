"""Devices every kernel test runs on; CUDA is skipped, with the reason, where no GPU is present."""

import pytest
import torch

CUDA_MISSING = "needs a CUDA device (none on this machine)"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason=CUDA_MISSING))]
