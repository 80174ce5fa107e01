#pragma once

// Binary search usable on the host and in CUDA kernels (std::lower_bound is host-only).

#include <c10/macros/Macros.h>

#include <cstdint>

namespace torch_ragged {

// The first position p in [lo, hi) with sorted[p] >= value (hi when there is none).
template <typename T>
C10_HOST_DEVICE inline int64_t lower_bound_in(const T* sorted, int64_t lo, int64_t hi, T value) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace torch_ragged
