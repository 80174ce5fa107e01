#pragma once

// Typed dispatcher calls of the sparse ops with their schema's types (common/op_handle.h).

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace torch_ragged::ops {

at::Tensor sparse_flat_keys(const at::Tensor& indices, c10::SymIntArrayRef sparse_size,
                            bool validate);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_coalesce(
    const at::Tensor& indices, const at::Tensor& values, c10::SymIntArrayRef size, bool validate,
    bool return_order = true);
std::tuple<at::Tensor, at::Tensor> sparse_sum(const at::Tensor& indices, const at::Tensor& values,
                                              c10::SymIntArrayRef size, at::OptionalIntArrayRef dim,
                                              bool validate);
at::Tensor sparse_mask(const at::Tensor& dense, const at::Tensor& indices, bool validate);
at::Tensor sparse_to_dense(const at::Tensor& indices, const at::Tensor& values,
                           c10::SymIntArrayRef size, bool validate);
std::tuple<at::Tensor, at::Tensor> sparse_from_dense(const at::Tensor& dense,
                                                     std::optional<int64_t> sparse_dim);
at::Tensor sparse_softmax(const at::Tensor& indices, const at::Tensor& values,
                          c10::SymIntArrayRef size, int64_t dim, bool log);
at::Tensor sparse_pool_sum(const at::Tensor& indices, const at::Tensor& values,
                           c10::SymIntArrayRef size, int64_t dim);
at::Tensor sparse_mm(const at::Tensor& values, const at::Tensor& dense, const at::Tensor& indices,
                     const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                     const at::Tensor& col_order, const at::Tensor& row_order, bool transpose,
                     bool validate);
at::Tensor sparse_sddmm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& indices,
                        const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                        const at::Tensor& col_order, const at::Tensor& row_order, bool transpose,
                        bool validate);
std::tuple<at::Tensor, at::Tensor> sparse_spgemm(
    const at::Tensor& a_indices, const at::Tensor& a_values, const at::Tensor& b_indices,
    const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size);
std::tuple<at::Tensor, at::Tensor, at::Tensor> sparse_spgemm_csr(
    const at::Tensor& a_crow, const at::Tensor& a_col, const at::Tensor& a_values,
    const at::Tensor& b_crow, const at::Tensor& b_col, const at::Tensor& b_values,
    c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size);
std::tuple<at::Tensor, at::Tensor> sparse_index_select(const at::Tensor& indices,
                                                       const at::Tensor& values,
                                                       c10::SymIntArrayRef size, int64_t dim,
                                                       const at::Tensor& index);
std::tuple<at::Tensor, at::Tensor> sparse_intersect(const at::Tensor& a_keys,
                                                    const at::Tensor& b_keys);
at::Tensor sparse_row_offsets(const at::Tensor& rows, c10::SymInt num_rows);
at::Tensor sparse_compressed_violation(const at::Tensor& compressed_indices,
                                       const at::Tensor& plain_indices, c10::SymInt plain_size);

}  // namespace torch_ragged::ops
