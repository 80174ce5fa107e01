"""Builds torch_ragged's Python package: the op library (torch_ragged/_C*.so) plus the wrappers.

    pip install --no-build-isolation .        # or -e . for development

CUDA kernels are built when a CUDA toolkit is found (override: TORCH_RAGGED_WITH_CUDA=0/1);
limit architectures with TORCH_CUDA_ARCH_LIST (CI: 9.0). For ccache, put /usr/lib/ccache first on
PATH (scripts/build.sh does).
"""

import glob
import os

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.1.0"


def with_cuda() -> bool:
    flag = os.environ.get("TORCH_RAGGED_WITH_CUDA")
    if flag is not None:
        return flag not in ("0", "false", "OFF", "")
    return cpp_extension.CUDA_HOME is not None and bool(glob.glob(os.path.join(ROOT, "cuda", "*.cu")))


def extension():
    sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
    define_macros = [("TORCH_RAGGED_VERSION", f'"{VERSION}"'), ("TORCH_RAGGED_BUILDING", None)]
    # -fopenmp: at::parallel_for is a header template; without it our kernels would run on one thread.
    # -ffp-contract=off: a * b + c is never fused into an FMA, whatever -march a builder adds, so the
    # CPU kernels keep the GPU's bits (the CUDA code fuses nothing either: segment/portable_math.h).
    cxx_flags = ["-O3", "-std=c++20", "-fvisibility=hidden", "-fopenmp", "-ffp-contract=off"]
    kwargs = dict(
        name="torch_ragged._C",
        include_dirs=[os.path.join(ROOT, "csrc")],
        define_macros=define_macros,
        extra_link_args=["-fopenmp"],
        py_limited_api=False,
    )
    if with_cuda():
        sources += sorted(glob.glob(os.path.join("cuda", "*.cu")))
        define_macros.append(("TORCH_RAGGED_WITH_CUDA", None))
        nvcc_flags = ["-O3", "-DCUB_WRAPPED_NAMESPACE=torch_ragged_cub", "--expt-relaxed-constexpr",
                      "-Xcompiler", "-fvisibility=hidden"]
        return cpp_extension.CUDAExtension(
            sources=sources, extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags}, **kwargs
        )
    return cpp_extension.CppExtension(sources=sources, extra_compile_args={"cxx": cxx_flags}, **kwargs)


setup(
    name="torch_ragged",
    version=VERSION,
    package_dir={"": "python"},
    packages=find_packages("python"),
    ext_modules=[extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
    zip_safe=False,
)
