#pragma once

// Index arithmetic of the sparse family, shared by the CPU and CUDA kernels (C10_HOST_DEVICE).
//
// An entry of a COO tensor with sparse sizes (s_0, ..., s_{d-1}) sits at indices (i_0, ...,
// i_{d-1}); its key is the row-major flattened index sum_k i_k * stride_k, stride_{d-1} = 1. Keys
// order entries lexicographically, so sorting keys sorts the entries as coalesce must.

#include <c10/macros/Macros.h>

#include <cstdint>

#include "common/search.h"
#include "segment/portable_math.h"

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
// row_stride: from one sparse dim's row of indices to the next (nnz when contiguous).
template <typename index_t>
C10_HOST_DEVICE inline int64_t flat_key(const KeyGeometry& g, const index_t* indices,
                                        int64_t row_stride, int64_t entry, bool& in_range) {
  int64_t key = 0;
  in_range = true;
  for (int d = 0; d < g.sparse_dim; ++d) {
    const int64_t i = static_cast<int64_t>(indices[d * row_stride + entry]);
    const bool ok = i >= 0 && i < g.size[d];
    in_range = in_range && ok;
    key += (ok ? i : 0) * g.stride[d];
  }
  return key;
}

// flat_key's inverse for run r of coalesce: the indices of its key (the key at its head,
// sorted_keys[first_idx[r]], in range), written to out[d * runs + r] for each sparse dim d. One
// division per dim after the first (quotient and remainder from the same one).
template <typename index_t>
C10_HOST_DEVICE inline void run_head_indices(const KeyGeometry& g, const int64_t* sorted_keys,
                                             const int64_t* first_idx, int64_t runs, int64_t r,
                                             index_t* out) {
  if (g.sparse_dim == 0) return;
  int64_t key = sorted_keys[first_idx[r]];
  for (int d = g.sparse_dim - 1; d > 0; --d) {
    const int64_t above = key / g.size[d];
    out[d * runs + r] = static_cast<index_t>(key - above * g.size[d]);
    key = above;
  }
  out[r] = static_cast<index_t>(key);
}

// ---- compressed layouts (CSR / CSC): torch's invariants on the plain indices ----

// What breaks a compressed tensor's invariants first (sparse_compressed_violation's kinds, in the
// order they are looked for): the offsets, then the first entry whose plain index does.
enum CompressedViolation : int64_t {
  kCompressedValid = 0,
  kOffsetsStartAboveZero = 1,  // compressed[0] != 0
  kOffsetsFall = 2,            // compressed[p] < compressed[p - 1]
  kOffsetsEndOffNnz = 3,       // compressed[slices] != nnz
  kPlainOutOfRange = 4,        // plain[p] outside [0, plain_size)
  kPlainNotRising = 5,         // plain[p] <= plain[p - 1] inside one slice
};

// The slice holding entry p (0 <= p < compressed[slices], the offsets valid): the last s with
// compressed[s] <= p, so empty slices before p are passed over.
template <typename offset_t>
C10_HOST_DEVICE inline int64_t slice_of_entry(const offset_t* compressed, int64_t slices,
                                              int64_t p) {
  return lower_bound_in(compressed, 0, slices + 1, static_cast<offset_t>(p + 1)) - 1;
}

// Entry p of slice `slice`: kPlainOutOfRange, kPlainNotRising (not its slice's first entry and not
// above the one before), or kCompressedValid.
template <typename offset_t, typename index_t>
C10_HOST_DEVICE inline int64_t compressed_entry_violation(const offset_t* compressed, int64_t slice,
                                                          const index_t* plain, int64_t plain_size,
                                                          int64_t p) {
  const int64_t index = plain[p];
  if (index < 0 || index >= plain_size) return kPlainOutOfRange;
  if (p > static_cast<int64_t>(compressed[slice]) && index <= static_cast<int64_t>(plain[p - 1])) {
    return kPlainNotRising;
  }
  return kCompressedValid;
}

// ---- sparse @ sparse (C = A @ B, CSR operands: int64 row offsets and columns) ----

// One product a * b as C accumulates it: in acc_t (float for half / bfloat16), rounded once to
// scalar_t (what a product of two scalar_t tensors gives), never fused with the addition after it.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline acc_t spgemm_product(scalar_t a, scalar_t b) {
  return static_cast<acc_t>(
      static_cast<scalar_t>(product(static_cast<acc_t>(a), static_cast<acc_t>(b))));
}

// The device tables of C = A @ B's numeric step (SpgemmOperands' pointers): A and B as CSR (row
// offsets, columns, values) and C's pattern (row offsets, columns sorted within each row).
template <typename scalar_t>
struct SpgemmRowTables {
  const int64_t* a_first;
  const int64_t* a_cols;
  const scalar_t* a_values;
  const int64_t* b_first;
  const int64_t* b_cols;
  const scalar_t* b_values;
  const int64_t* c_first;
  const int64_t* c_cols;
};

// Row i of C with C's pattern known (c_cols sorted within each row, holding every column row i can
// reach): acc[p] for each entry p of row i is 0 + the products a_il * b_lj of its column j, added
// in ascending l (A's row order), then j. The CPU kernel's accumulator adds in the same order from
// 0, so both devices give the same bits. The column's entry is found by binary search in row i;
// false when some column is missing from the pattern (its products are dropped, never written
// past the row: the symbolic step and this one disagree, which the GPU shell asserts against).
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE inline bool spgemm_row_numeric(int64_t i, const SpgemmRowTables<scalar_t>& op,
                                               acc_t* acc) {
  const auto [a_first, a_cols, a_values, b_first, b_cols, b_values, c_first, c_cols] = op;
  const int64_t c_begin = c_first[i], c_end = c_first[i + 1];
  for (int64_t p = c_begin; p < c_end; ++p) acc[p] = acc_t(0);
  bool every_column_found = true;
  for (int64_t e = a_first[i]; e < a_first[i + 1]; ++e) {
    const int64_t l = a_cols[e];
    const scalar_t a = a_values[e];
    for (int64_t q = b_first[l]; q < b_first[l + 1]; ++q) {
      const int64_t p = lower_bound_in(c_cols, c_begin, c_end, b_cols[q]);
      if (p == c_end || c_cols[p] != b_cols[q]) {
        every_column_found = false;
        continue;
      }
      acc[p] += spgemm_product<scalar_t, acc_t>(a, b_values[q]);
    }
  }
  return every_column_found;
}

}  // namespace torch_ragged
