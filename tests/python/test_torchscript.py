"""TorchScript: a scripted module calling torch.ops.torch_ragged ops, saved and loaded back.

examples/cpp_app runs the same saved module from C++ (scripts/test.sh)."""

import os
import sys
import warnings

import torch
import torch_ragged

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torchscript"))
import ragged_module  # noqa: E402


def test_scripted_module_round_trips_through_a_file(tmp_path):
    path = str(tmp_path / "model.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        ragged_module.save(path)
        loaded = torch.jit.load(path)
    packed = torch.randn(6, 3)
    first_idx = torch.tensor([0, 1, 1, 6])
    sums, scaled = loaded(packed, first_idx)
    eager_sums, eager_scaled = ragged_module.RaggedSumAndScale()(packed, first_idx)
    assert torch.allclose(sums, torch_ragged.segment_sum(packed, first_idx))
    assert torch.allclose(sums, eager_sums)
    assert torch.equal(scaled, packed * 2)
    assert torch.equal(scaled, eager_scaled)


def pad_reflect(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.torch_ragged.pad(x, [1, 2, 0, 3], "reflect", reflect_type="odd")


def test_scripted_function_calls_pad():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        scripted = torch.jit.script(pad_reflect)
    x = torch.randn(3, 4)
    torch.testing.assert_close(scripted(x), torch_ragged.pad(x, ((1, 2), (0, 3)), "reflect", reflect_type="odd"))
