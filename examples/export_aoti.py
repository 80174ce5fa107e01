"""torch.export + AOTInductor with torch_ragged ops, end to end: `python export_aoti.py [OUT.pt2]`.

1. A model whose forward calls torch_ragged ops (a per-cloud segment sum, a packed -> padded batch, an image padded
   in numpy's reflect mode) is exported with torch.export, its sizes dynamic (`Dim.DYNAMIC`): rows, clouds and the
   image's height and width may change from call to call.
2. AOTInductor compiles the exported program into a package (`.pt2`: a shared library plus its weights and
   metadata). The package records the torch_ragged version it was built against (`torch_ragged_version` in
   its metadata), which examples/cpp_app checks before loading it.
3. The package is loaded back in Python (`torch._inductor.aoti_load_package`) and checked against eager mode on
   inputs of other sizes. From C++, `torch::inductor::AOTIModelPackageLoader` loads the same file (see
   examples/cpp_app/main.cpp); the program links torch_ragged so that the ops are registered without Python.

Compiling takes about 20-40 s on two CPU cores (a C++ compiler must be installed); loading takes milliseconds.
"""

import sys
import time

import torch
import torch_ragged
from torch.export import Dim


class RaggedFeatures(torch.nn.Module):
    """Per-cloud feature sums, the clouds as one padded batch, and an image with a 2-pixel reflected border."""

    def forward(self, points: torch.Tensor, first_idx: torch.Tensor, image: torch.Tensor):
        sums = torch_ragged.segment_sum(points, first_idx)
        shape_per_tensor = (first_idx[1:] - first_idx[:-1]).unsqueeze(1)
        padded = torch_ragged.packed_to_padded(points, shape_per_tensor, first_idx, 0.0)
        border = torch_ragged.pad(image, ((0, 0), (2, 2), (2, 2)), "reflect")
        return sums, padded, border


def example_inputs(lengths=(2, 0, 3), height=5, width=7):
    """Clouds of `lengths` points (3 features each), packed, and a 3-channel image."""
    first_idx = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    points = torch.arange(int(first_idx[-1]) * 3, dtype=torch.float32).view(-1, 3)
    image = torch.arange(3 * height * width, dtype=torch.float32).view(3, height, width)
    return points, first_idx, image


def export_model() -> torch.export.ExportedProgram:
    dynamic = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}, {1: Dim.DYNAMIC, 2: Dim.DYNAMIC})
    return torch.export.export(RaggedFeatures(), example_inputs(), dynamic_shapes=dynamic)


def build_package(path: str) -> str:
    """Exports RaggedFeatures and compiles it with AOTInductor into `path` (a .pt2 package)."""
    metadata = {"torch_ragged_version": torch_ragged.__version__}
    return torch._inductor.aoti_compile_and_package(
        export_model(), package_path=path, inductor_configs={"aot_inductor.metadata": metadata})


def check_package(path: str) -> None:
    """Runs the package on inputs of other sizes than the example's and compares with eager mode."""
    compiled = torch._inductor.aoti_load_package(path)
    eager = RaggedFeatures()
    for inputs in [example_inputs(), example_inputs((4, 1, 0, 6), height=9, width=3)]:
        for got, expected in zip(compiled(*inputs), eager(*inputs), strict=True):
            torch.testing.assert_close(got, expected)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "ragged_features.pt2"
    start = time.perf_counter()
    build_package(path)
    print(f"built {path} with AOTInductor in {time.perf_counter() - start:.1f} s")
    check_package(path)
    print("the package matches eager mode on inputs of two sizes")


if __name__ == "__main__":
    main()
