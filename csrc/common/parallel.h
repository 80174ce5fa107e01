#pragma once

// Work sizes shared by every CPU and CUDA kernel.

#include <algorithm>
#include <cstdint>

namespace torch_ragged {

// Elements one at::parallel_for task handles at least (amortises the task's start-up).
constexpr int64_t kGrainElems = int64_t{1} << 15;

// Threads per CUDA block, and the grid a grid-stride kernel over `total` items launches (never
// empty; capped, as the kernels stride).
constexpr int kCudaThreads = 256;

inline int64_t cuda_grid_for(int64_t total) {
  return std::max<int64_t>(
      1, std::min<int64_t>((total + kCudaThreads - 1) / kCudaThreads, int64_t{1} << 20));
}

}  // namespace torch_ragged
