#pragma once

// A CPU-only build (no CUDA toolkit, or the CMake build) still sees CUDA tensors from a CUDA torch.
// Each family registers this fallback for its ops in such builds, so a CUDA tensor gets a clear
// NotImplementedError instead of the dispatcher's generic "Could not run ... 'CUDA' backend":
//
//   #ifndef TORCH_RAGGED_WITH_CUDA
//   TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, {"op_a", "op_b"}); }
//   #endif

#include <torch/library.h>

#include <initializer_list>

namespace torch_ragged {

void register_missing_cuda(torch::Library& m, std::initializer_list<const char*> ops);

}  // namespace torch_ragged
