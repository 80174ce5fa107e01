#pragma once

// Index arithmetic of the sparse family, shared by the CPU and CUDA kernels (C10_HOST_DEVICE).
//
// An entry of a COO tensor with sparse sizes (s_0, ..., s_{d-1}) sits at indices (i_0, ...,
// i_{d-1}); its key is the row-major flattened index sum_k i_k * stride_k, stride_{d-1} = 1. Keys
// order entries lexicographically, so sorting keys sorts the entries as coalesce must.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace torch_ragged {

// Most sparse dims a flattened key is built for (more fall back to a lexicographic sort).
constexpr int kMaxKeyDims = 16;

struct KeyGeometry {
  int sparse_dim = 0;
  int key_bits = 0;  // bits of the largest key, prod(sizes) - 1
  int64_t size[kMaxKeyDims];
  int64_t stride[kMaxKeyDims];
};

// The key of entry `entry` of indices (sparse_dim, nnz), row-major; in_range is false when an
// index lies outside [0, size) (the key is then meaningless but computed without overflow).
template <typename index_t>
C10_HOST_DEVICE inline int64_t flat_key(const KeyGeometry& g, const index_t* indices, int64_t nnz,
                                        int64_t entry, bool& in_range) {
  int64_t key = 0;
  in_range = true;
  for (int d = 0; d < g.sparse_dim; ++d) {
    const int64_t i = static_cast<int64_t>(indices[d * nnz + entry]);
    const bool ok = i >= 0 && i < g.size[d];
    in_range = in_range && ok;
    key += (ok ? i : 0) * g.stride[d];
  }
  return key;
}

}  // namespace torch_ragged
