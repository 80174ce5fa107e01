#pragma once

// Sparse @ sparse, written once for both backends: the operands checked and put in CSR form
// (sparse_matmul.cpp), the product's rows computed by the backend (CoalesceBackend::spgemm_rows),
// written as coalesced COO.

#include <ATen/ATen.h>

#include <string_view>

namespace torch_ragged {

// A (n, k) and B (k, m) in CSR: int64 row offsets (rows + 1) and columns, contiguous values of one
// dtype, all on one device. Columns are sorted within each row (the operands were coalesced).
struct SpgemmOperands {
  at::Tensor a_first, a_cols, a_values;
  at::Tensor b_first, b_cols, b_values;
  int64_t n = 0, k = 0, m = 0;
};

// C as coalesced COO: indices (2, nnz) int64 (rows, then columns sorted within each row), values.
struct SpgemmResult {
  at::Tensor indices, values;
};

}  // namespace torch_ragged
