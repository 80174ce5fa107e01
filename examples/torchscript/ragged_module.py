"""A TorchScript module that calls torch.ops.torch_ragged ops; `python ragged_module.py OUT.pt` saves it.

examples/cpp_app loads the saved file from C++ (no Python) and runs it; tests/python/test_torchscript.py
checks the scripted module against eager mode.
"""

import sys

import torch
import torch_ragged  # noqa: F401  (registers torch.ops.torch_ragged)


class RaggedSumAndScale(torch.nn.Module):
    """Per-sub-tensor sums of a packed batch, and the batch scaled by 2 after a padded round trip."""

    def forward(self, packed: torch.Tensor, first_idx: torch.Tensor):
        shape_per_tensor = (first_idx[1:] - first_idx[:-1]).unsqueeze(1)
        padded = torch.ops.torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0, None, "left")
        sums = padded.sum(dim=1)  # padding is zero, so it does not change the sums
        scaled = torch.ops.torch_ragged.padded_to_packed(padded * 2, shape_per_tensor, "left", None)
        return sums, scaled


def save(path: str) -> None:
    torch.jit.script(RaggedSumAndScale()).save(path)


if __name__ == "__main__":
    save(sys.argv[1])
    print(f"saved a scripted RaggedSumAndScale to {sys.argv[1]}")
