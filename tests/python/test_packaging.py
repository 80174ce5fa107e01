"""Packaging metadata: one version everywhere, the torch pin derived from the torch built against, the license."""

import os
import pathlib
import subprocess
import sys

import torch
import torch_ragged

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_version_is_written_once_and_reported_everywhere():
    assert torch_ragged.__version__ == torch.ops.torch_ragged.version()  # the compiled library's
    assert f"Status ({torch_ragged.__version__})" in (ROOT / "README.md").read_text()
    assert f"## {torch_ragged.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_distribution_metadata(tmp_path):
    env = dict(os.environ, TORCH_RAGGED_WITH_CUDA="0")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    info = next(tmp_path.glob("*.egg-info"))
    metadata = (info / "PKG-INFO").read_text()
    assert f"Version: {torch_ragged.__version__}" in metadata
    assert "License-Expression: BSD-3-Clause" in metadata
    assert "(CPU-only build: CUDA tensors raise NotImplementedError)" in metadata  # TORCH_RAGGED_WITH_CUDA=0
    torch_minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert (info / "requires.txt").read_text().split() == [f"torch=={torch_minor}.*"]
    sources = (info / "SOURCES.txt").read_text()
    assert "python/torch_ragged/py.typed" in sources
    assert "python/torch_ragged/share/cmake/TorchRagged/TorchRaggedConfig.cmake" in sources
    assert "BSD 3-Clause License" in (ROOT / "LICENSE").read_text()


def test_the_summary_says_whether_the_build_has_cuda_kernels(tmp_path):
    env = dict(os.environ, TORCH_RAGGED_WITH_CUDA="1", TORCH_CUDA_ARCH_LIST="9.0")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    summary = next(line for line in (next(tmp_path.glob("*.egg-info")) / "PKG-INFO").read_text().splitlines()
                   if line.startswith("Summary: "))
    assert summary.endswith("(CUDA kernels for TORCH_CUDA_ARCH_LIST=9.0)") and "CPU-only" not in summary


def test_the_package_carries_what_find_package_needs():
    """Headers staged by the build and the CMake config under cmake_prefix_path(); the op library finds torch's
    libraries itself (a C++ program loads it before any torch library: its RUNPATH names them)."""
    package = pathlib.Path(torch_ragged.__file__).parent
    assert (pathlib.Path(torch_ragged.cmake_prefix_path()) / "TorchRagged" / "TorchRaggedConfig.cmake").is_file()
    for header in (ROOT / "csrc" / "torch_ragged").glob("*.h"):
        assert (package / "include" / "torch_ragged" / header.name).read_text() == header.read_text(), header.name
    library = next(package.glob("_C*.so"))
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    assert "$ORIGIN/../torch/lib" in dynamic
    assert "libtorch_python" not in dynamic and "libpython" not in dynamic  # C++ programs link it without Python



def test_built_with_cuda_says_whether_the_library_links_the_cuda_runtime():
    """Read independently of the library: its ELF dynamic section needs libcudart exactly when the CUDA kernels
    were compiled in."""
    import glob

    readelf = "readelf"  # binutils: installed with g++, which the build needs
    library = glob.glob(os.path.join(os.path.dirname(torch_ragged.__file__), "_C*.so"))[0]
    needed = subprocess.run([readelf, "-d", library], capture_output=True, text=True, check=True).stdout
    links_cudart = "libcudart" in needed
    assert torch_ragged.built_with_cuda() is links_cudart
    assert torch.ops.torch_ragged.built_with_cuda() is links_cudart
    assert (torch_ragged.cuda_version() != -1) is links_cudart
