#pragma once

// coalesce, written once for both backends: flattened keys -> stable sort -> runs of equal keys ->
// each run's values summed in input order (the segment core), indices taken at the run heads.
// The backends differ only in the kernels below (the last, sparse @ sparse's rows, is not part of
// coalesce; the family's ops share this table).

#include <ATen/ATen.h>

#include <string_view>
#include <tuple>

#include "segment/sort.h"
#include "sparse/sparse_index.h"
#include "sparse/spgemm.h"

namespace torch_ragged {

struct CoalesceBackend {
  // Keys of the entries (sparse_flat_keys' kernel); IndexError when validate and out of range.
  at::Tensor (*flat_keys)(std::string_view op, const at::Tensor& indices, const KeyGeometry& g,
                          bool validate);
  // A copy of the indices if the entries are coalesced already (every index in range, the index
  // tuples strictly increasing), else an undefined tensor, found in a pass that stops at the first
  // entry that is not; nullptr where the backend has no such pass (CUDA: the sort finds the order).
  at::Tensor (*copy_if_coalesced)(const at::Tensor& indices, const KeyGeometry& g);
  KeyOrder (*sort_keys)(const at::Tensor& keys, int key_bits);
  at::Tensor (*run_offsets)(const at::Tensor& sorted_keys);
  // (sparse_dim, runs) of dtype: each run's indices, decoded from its key (run_head_indices)
  at::Tensor (*run_indices)(const at::Tensor& sorted_keys, const at::Tensor& first_idx,
                            const KeyGeometry& g, at::ScalarType dtype);
  at::Tensor (*segment_gather_sum)(const at::Tensor& data, const at::Tensor& index,
                                   const at::Tensor& weight, const at::Tensor& first_idx);
  SpgemmResult (*spgemm_rows)(const SpgemmOperands& operands);
};

// (indices, values, permutation, first_idx): see sparse_coalesce's schema (sparse.cpp);
// permutation and first_idx empty unless return_order.
using CoalesceResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

CoalesceResult coalesce_with(const CoalesceBackend& backend, const at::Tensor& indices,
                             const at::Tensor& values, c10::SymIntArrayRef size, bool validate,
                             bool return_order);

// sparse_spgemm's kernel: (indices, values) of the coalesced product A @ B.
std::tuple<at::Tensor, at::Tensor> spgemm_with(
    const CoalesceBackend& backend, const at::Tensor& a_indices, const at::Tensor& a_values,
    const at::Tensor& b_indices, const at::Tensor& b_values, c10::SymIntArrayRef a_size,
    c10::SymIntArrayRef b_size);

// sparse_spgemm_csr's kernel: (crow_indices, col_indices, values) of the product A @ B of CSR
// operands, its indices of a_crow_indices' dtype.
std::tuple<at::Tensor, at::Tensor, at::Tensor> spgemm_csr_with(
    const CoalesceBackend& backend, const at::Tensor& a_crow, const at::Tensor& a_col,
    const at::Tensor& a_values, const at::Tensor& b_crow, const at::Tensor& b_col,
    const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size);

}  // namespace torch_ragged
