"""torch_ragged: ragged batches, sparse COO tensors and numpy-style padding as ATen ops.

Importing the package loads the compiled op library, so ``torch.ops.torch_ragged.*`` is available
(to Python, TorchScript and torch.compile alike), and exposes the friendly wrappers below.
"""

import glob
import os

import torch

from ._version import __version__  # noqa: F401 (the package version)


def _load_library() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    # TORCH_RAGGED_LIBRARY: another build of the op library, e.g. the sanitizer build scripts/sanitize.sh runs with.
    override = os.environ.get("TORCH_RAGGED_LIBRARY")
    built_here = glob.glob(os.path.join(here, "_C*.so")) + glob.glob(os.path.join(here, "_C*.pyd"))
    candidates = [override] if override else sorted(built_here)
    if not candidates:
        raise ImportError(
            f"torch_ragged: the compiled op library (_C*.so) is missing from {here}. This is a source tree that was "
            "not built in place (a `pip install .` builds into site-packages, not here): build it here with "
            "`bash scripts/build.sh` (or `pip install --no-build-isolation -e .`), or import the installed package "
            "from outside the repository."
        )
    try:
        torch.ops.load_library(candidates[0])
    except OSError as error:
        raise ImportError(
            f"torch_ragged: could not load {candidates[0]} ({error}). It was most likely built against "
            f"another torch than the running {torch.__version__}; rebuild with "
            "`pip install --no-build-isolation --force-reinstall --no-deps .`."
        ) from error
    built = torch.ops.torch_ragged.built_with_torch()
    running = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if built != running:
        raise ImportError(
            f"torch_ragged: the op library was built against torch {built} but torch {running} is "
            "running; rebuild with `pip install --no-build-isolation --force-reinstall --no-deps .`."
        )
    built_cuda = torch.ops.torch_ragged.cuda_version()  # e.g. 13000, or -1 for a CPU-only build
    if built_cuda != -1 and torch.version.cuda and built_cuda // 1000 != int(torch.version.cuda.split(".")[0]):
        raise ImportError(
            f"torch_ragged: the op library was built with CUDA {built_cuda // 1000}.x but torch uses CUDA "
            f"{torch.version.cuda}; rebuild with `pip install --no-build-isolation --force-reinstall --no-deps .`."
        )


def _list_ops() -> None:
    """``dir(torch.ops.torch_ragged)`` lists the ops torch has looked up so far: each registered op is looked up once
    here, so that users discover them that way (~6 ms for the ~60 ops)."""
    for name in torch._C._dispatch_get_all_op_names():
        namespace, _, op = name.partition("::")
        if namespace == "torch_ragged":
            getattr(torch.ops.torch_ragged, op.split(".")[0])


_load_library()
_list_ops()

from . import _fast_calls  # noqa: E402

_fast_calls.install()

from . import _fake, batch, container, distributed, scatter_compat, segment, sparse, tiles  # noqa: E402,F401  (_fake registers the fake kernels)
from .batch import *  # noqa: E402,F403  (re-exports batch.__all__)
from .container import LazyStack, MemberExtremum, RaggedCollate, RaggedTensor, collate  # noqa: E402
from .pad import pad  # noqa: E402
from .segment import *  # noqa: E402,F403  (re-exports segment.__all__)


def cmake_prefix_path() -> str:
    """The folder to put on CMake's ``CMAKE_PREFIX_PATH`` so that ``find_package(TorchRagged)`` finds this package's
    op library and headers (beside ``torch.utils.cmake_prefix_path`` for Torch), as ``torch.utils.cmake_prefix_path``
    does for torch."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "cmake")


def cuda_version() -> int:
    """CUDA version the library was built with (e.g. 13000), or -1 for a CPU-only build (see `built_with_cuda`)."""
    return torch.ops.torch_ragged.cuda_version()


def built_with_cuda() -> bool:
    """Whether the library was built with its CUDA kernels. A CPU-only build (no CUDA toolkit at build time, or
    ``TORCH_RAGGED_WITH_CUDA=0``) raises ``NotImplementedError`` naming the op for CUDA tensors."""
    return torch.ops.torch_ragged.built_with_cuda()


__all__ = ["LazyStack", "MemberExtremum", "RaggedCollate", "RaggedTensor", "batch", "built_with_cuda",
           "cmake_prefix_path", "collate", "container", "cuda_version", "distributed", "pad", "segment", "sparse",
           "tiles", *batch.__all__, *(name for name in segment.__all__ if name not in batch.__all__)]
