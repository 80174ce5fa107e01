"""A pytest plugin that runs a test session with ``torch_ragged.sparse.accelerate()`` on, for PyTorch's own
test/test_sparse.py (``-p accelerate_plugin``, this folder on PYTHONPATH; see scripts/peer_test_sparse.py)."""

import torch
import torch_ragged


def pytest_configure(config):
    # PyTorch's tests use small tensors, which accelerate() leaves to torch's own CPU kernels by default: every call
    # goes to this library's kernels here, so that the suite tests them.
    torch.ops.torch_ragged.accelerate_torch_sparse_from(0)
    torch_ragged.sparse.accelerate(True)
    assert torch_ragged.sparse.is_accelerated()


def pytest_unconfigure(config):
    # still on at the end: no test turned it off behind the session's back
    assert torch_ragged.sparse.is_accelerated(), "accelerate() was turned off during the session"
    torch_ragged.sparse.accelerate(False)
