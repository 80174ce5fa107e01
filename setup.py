"""Builds torch_ragged's Python package: the op library (torch_ragged/_C*.so) plus the wrappers.

    pip install --no-build-isolation .        # or -e . for development

CUDA kernels are built when a CUDA toolkit is found (override: TORCH_RAGGED_WITH_CUDA=0/1), for
TORCH_CUDA_ARCH_LIST (default "9.0+PTX": Hopper code, and PTX that newer GPUs compile at load; no GPU is
needed to build). Release builds carry no debug info (TORCH_RAGGED_DEBUG=1 keeps it). For ccache, put
/usr/lib/ccache first on PATH (scripts/build.sh does). The wheel requires the torch minor it was built
against (the op library's ABI is torch's).
"""

import glob
import importlib.util
import os
import re
import shutil
import sys
import sysconfig

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(ROOT, "python", "torch_ragged", "_version.py")) as version_file:
    VERSION = re.search(r'__version__ = "([^"]+)"', version_file.read()).group(1)
TORCH_MINOR = ".".join(cpp_extension.torch.__version__.split("+")[0].split(".")[:2])
DEBUG = os.environ.get("TORCH_RAGGED_DEBUG", "0") not in ("0", "")


def load_toolchain_check():
    """python/torch_ragged/_toolchain.py, loaded by path (the package itself imports the library being built)."""
    spec = importlib.util.spec_from_file_location("_toolchain", os.path.join(ROOT, "python", "torch_ragged",
                                                                             "_toolchain.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_cuda() -> bool:
    flag = os.environ.get("TORCH_RAGGED_WITH_CUDA")
    if flag is not None:
        return flag not in ("0", "false", "OFF", "")
    return cpp_extension.CUDA_HOME is not None and bool(glob.glob(os.path.join(ROOT, "cuda", "*.cu")))


def runpaths() -> list:
    """Where the library finds torch's libraries (and torch's CUDA runtime) by itself: also when a C++ program
    loads it through the package's CMake config, with no Python having loaded torch first. Beside an installed
    torch (site-packages/torch_ragged next to site-packages/torch), then the torch built against."""
    torch_dir = os.path.dirname(os.path.abspath(cpp_extension.torch.__file__))
    paths = ["$ORIGIN/../torch/lib", os.path.join(torch_dir, "lib")]
    cuda = cpp_extension.torch.version.cuda
    if cuda:
        runtime = f"nvidia/cu{cuda.split('.')[0]}/lib"  # pip's CUDA runtime, as torch's own libraries find it
        paths += [f"$ORIGIN/../{runtime}", os.path.join(os.path.dirname(torch_dir), runtime)]
    return paths


def extension():
    sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
    define_macros = [("TORCH_RAGGED_VERSION", f'"{VERSION}"'), ("TORCH_RAGGED_BUILDING", None)]
    # -fopenmp: at::parallel_for is a header template; without it our kernels would run on one thread.
    # -ffp-contract=off: a * b + c is never fused into an FMA, whatever -march a builder adds, so the
    # CPU kernels keep the GPU's bits (the CUDA code fuses nothing either: segment/portable_math.h).
    # -g0: Python's own CFLAGS carry -g, which made the library 80 MB of debug info around ~3 MB of code.
    cxx_flags = ["-O3", "-std=c++20", "-fvisibility=hidden", "-fopenmp", "-ffp-contract=off",
                 "-g" if DEBUG else "-g0"]
    kwargs = dict(
        name="torch_ragged._C",
        include_dirs=[os.path.join(ROOT, "csrc")],
        define_macros=define_macros,
        extra_link_args=["-fopenmp", *(f"-Wl,-rpath,{path}" for path in runpaths())],
        py_limited_api=False,
    )
    if with_cuda():
        # torch's default (the visible GPUs' architectures) fails on a machine without a GPU.
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0+PTX")
        sources += sorted(glob.glob(os.path.join("cuda", "*.cu")))
        define_macros.append(("TORCH_RAGGED_WITH_CUDA", None))
        nvcc_flags = ["-O3", "-DCUB_WRAPPED_NAMESPACE=torch_ragged_cub", "--expt-relaxed-constexpr",
                      "-Xcompiler", "-fvisibility=hidden"]
        return cpp_extension.CUDAExtension(
            sources=sources, extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags}, **kwargs
        )
    return cpp_extension.CppExtension(sources=sources, extra_compile_args={"cxx": cxx_flags}, **kwargs)


def fast_calls_extension():
    """torch_ragged._fast: the ops as direct Python calls (bindings/fast_calls.cpp), for the wrappers' eager calls.
    A Python module beside the op library, not part of it (the C++ package stays free of Python); it finds the ops
    through the dispatcher by name, so it links nothing of ours."""
    return cpp_extension.CppExtension(
        name="torch_ragged._fast", sources=[os.path.join("bindings", "fast_calls.cpp")],
        extra_compile_args={"cxx": ["-O2", "-std=c++20", "-fvisibility=hidden", "-g" if DEBUG else "-g0"]},
        py_limited_api=False)


def stage_headers(package_dir: str) -> None:
    """The public C++ headers into the package (torch_ragged/include/torch_ragged), where the package's CMake
    config (torch_ragged/share/cmake/TorchRagged) finds them: LibTorch programs build against the install."""
    target = os.path.join(package_dir, "include", "torch_ragged")
    os.makedirs(target, exist_ok=True)
    for header in glob.glob(os.path.join(ROOT, "csrc", "torch_ragged", "*.h")):
        shutil.copyfile(header, os.path.join(target, os.path.basename(header)))


# One object folder for every way of building (setup.py build_ext --inplace, pip install -e ., pip wheel .):
# pip's editable install would otherwise compile everything in a new temporary folder each time (the CUDA units
# take ~12 minutes on two cores), and ninja in this folder rebuilds only what changed.
SHARED_BUILD_TEMP = os.path.join(ROOT, "build", f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")


class BuildExtension(cpp_extension.BuildExtension.with_options(use_ninja=True)):
    """torch's build, then a check that the library shares the process's libstdc++ (see _toolchain.py):
    a private copy is relinked away by naming the shared libstdc++ before the toolchain's static one.
    The headers are staged beside the library (the wheel) and in the source package (in-place builds)."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = SHARED_BUILD_TEMP

    def build_extension(self, ext):
        super().build_extension(ext)
        library = self.get_ext_fullpath(ext.name)
        stage_headers(os.path.dirname(library))
        stage_headers(os.path.join(ROOT, "python", "torch_ragged"))
        check = load_toolchain_check()
        if not sys.platform.startswith("linux") or not check.private_libstdcxx_symbols(library):
            return
        print(f"torch_ragged: {library} holds a private copy of libstdc++ (the compiler links it statically); "
              "relinking against the shared libstdc++.so.6 that torch uses")
        ext.extra_link_args = [*ext.extra_link_args, "-l:libstdc++.so.6"]
        os.remove(library)
        super().build_extension(ext)  # the objects are up to date: only the link runs again
        if check.private_libstdcxx_symbols(library):
            raise RuntimeError(
                f"torch_ragged: {library} still holds a private copy of libstdc++, which crashes beside torch's "
                "shared one. Build with a compiler that links libstdc++ dynamically, e.g. "
                "CC=/usr/bin/gcc CXX=/usr/bin/g++.")


def description() -> str:
    """The summary pip shows, saying which kernels the build holds: a CPU-only wheel says so."""
    summary = "Ragged batches, sparse COO and numpy-style padding for PyTorch, as ATen ops with CPU/CUDA kernels"
    if not with_cuda():
        return f"{summary} (CPU-only build: CUDA tensors raise NotImplementedError)"
    return f"{summary} (CUDA kernels for TORCH_CUDA_ARCH_LIST={os.environ.get('TORCH_CUDA_ARCH_LIST', '9.0+PTX')})"


setup(
    name="torch_ragged",
    version=VERSION,
    description=description(),
    package_dir={"": "python"},
    packages=find_packages("python"),
    package_data={"torch_ragged": ["py.typed", "include/torch_ragged/*.h", "share/cmake/TorchRagged/*.cmake"]},
    install_requires=[f"torch=={TORCH_MINOR}.*"],
    ext_modules=[extension(), fast_calls_extension()],
    cmdclass={"build_ext": BuildExtension},
    zip_safe=False,
)
