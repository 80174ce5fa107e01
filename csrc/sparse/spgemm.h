#pragma once

// Sparse @ sparse, written once for both backends: the operands checked and put in CSR form
// (sparse_matmul.cpp), the product's rows computed by the backend (CoalesceBackend::spgemm_rows),
// written as coalesced COO (sparse_spgemm) or as CSR (sparse_spgemm_csr).

#include <ATen/ATen.h>

#include <string_view>

namespace torch_ragged {

// A (n, k) and B (k, m) in CSR: int64 row offsets (rows + 1) and columns, contiguous values of one
// dtype, all on one device. Columns are sorted within each row (the operands were coalesced).
struct SpgemmOperands {
  at::Tensor a_first, a_cols, a_values;
  at::Tensor b_first, b_cols, b_values;
  int64_t n = 0, k = 0, m = 0;
  // C's layout: COO (indices (2, nnz) int64) or CSR (offsets and columns of csr_index_dtype,
  // int32 or int64, checked by the caller to hold m and n; the backend checks nnz)
  bool csr_output = false;
  at::ScalarType csr_index_dtype = at::kLong;
};

// C = A @ B, its columns sorted within each row: as COO, indices (2, nnz) int64 (rows, then
// columns); as CSR, first (n + 1,) and cols (nnz,); then values.
struct SpgemmResult {
  at::Tensor indices;
  at::Tensor first, cols;
  at::Tensor values;
};

// C's row offsets (n + 1, int64) as the CSR result's first, of csr_index_dtype: refused by name
// when int32 offsets cannot count C's entries.
at::Tensor csr_offsets_of_product(const SpgemmOperands& s, const at::Tensor& first);

// CSR-style offsets of grouped keys in [0, count): (count + 1,) int64, group g at
// offsets[g]:offsets[g + 1] (a count per key, then the segment core's get_first_idx).
at::Tensor offsets_of(const at::Tensor& keys, int64_t count);

// The products of C = A @ B, one per (entry e of A, entry q of B's row a_cols[e]), grouped by A's
// entry, then B's: the segment core's ragged_index_select of B's entry numbers by A's columns.
struct ProductList {
  at::Tensor a_first;           // (nnz_a + 1,): A entry e's products are a_first[e]:a_first[e + 1]
  at::Tensor a_entry, b_entry;  // per product
};
ProductList list_products(const at::Tensor& a_cols, const at::Tensor& b_first, int64_t nnz_b);

}  // namespace torch_ragged
