// The torch_ragged op library: library-wide ops. Families add theirs with TORCH_LIBRARY_FRAGMENT.

#include <torch/headeronly/version.h>
#include <torch/library.h>
#include <torch_ragged/torch_ragged.h>

#ifdef TORCH_RAGGED_WITH_CUDA
#include <cuda.h>
#endif

#ifndef TORCH_RAGGED_VERSION  // setup.py and CMakeLists.txt pass python/torch_ragged/_version.py's
#error "TORCH_RAGGED_VERSION must be defined by the build"
#endif

namespace torch_ragged {

std::string version() { return TORCH_RAGGED_VERSION; }

int64_t cuda_version() {
#ifdef TORCH_RAGGED_WITH_CUDA
  return CUDA_VERSION;
#else
  return -1;
#endif
}

bool built_with_cuda() { return cuda_version() != -1; }

// "major.minor" of the torch the library was compiled against, checked at import.
static std::string built_with_torch() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
}

TORCH_LIBRARY(torch_ragged, m) {
  m.def("version() -> str", [] { return version(); });
  m.def("cuda_version() -> int", [] { return cuda_version(); });
  m.def("built_with_cuda() -> bool", [] { return built_with_cuda(); });
  m.def("built_with_torch() -> str", [] { return built_with_torch(); });
}

}  // namespace torch_ragged
