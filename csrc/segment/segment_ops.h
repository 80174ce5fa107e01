#pragma once

// Typed dispatcher calls of the segment-core ops with their schema's types (common/op_handle.h).

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace torch_ragged::ops {

at::Tensor get_first_idx(const at::Tensor& numel_per_tensor, bool validate = true);
at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx);
at::Tensor segment_mean(const at::Tensor& data, const at::Tensor& first_idx);
std::tuple<at::Tensor, at::Tensor> segment_max(const at::Tensor& data, const at::Tensor& first_idx);
std::tuple<at::Tensor, at::Tensor> segment_min(const at::Tensor& data, const at::Tensor& first_idx);
at::Tensor segment_softmax(const at::Tensor& data, const at::Tensor& first_idx);
at::Tensor segment_log_softmax(const at::Tensor& data, const at::Tensor& first_idx);
at::Tensor segment_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output,
                                    const at::Tensor& first_idx, bool log);
at::Tensor segment_expand(const at::Tensor& values, const at::Tensor& first_idx,
                          std::optional<c10::SymInt> num_rows);
at::Tensor segment_ids(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows);
at::Tensor segment_gather_sum(const at::Tensor& data, const at::Tensor& index,
                              const std::optional<at::Tensor>& weight, const at::Tensor& first_idx);
at::Tensor segment_gather_dot(const at::Tensor& a, const at::Tensor& b, const at::Tensor& index,
                              const at::Tensor& first_idx);
// (segment_gather_sum(data, index, weight, first_idx), segment_gather_dot(other, data, index,
// first_idx)) in one pass over the gathered rows where the backend can.
std::tuple<at::Tensor, at::Tensor> segment_gather_sum_dot(const at::Tensor& data,
                                                          const at::Tensor& index,
                                                          const std::optional<at::Tensor>& weight,
                                                          const at::Tensor& first_idx,
                                                          const at::Tensor& other);
std::tuple<at::Tensor, at::Tensor> ragged_index_select(const at::Tensor& values,
                                                       const at::Tensor& first_idx,
                                                       const at::Tensor& index,
                                                       std::optional<c10::SymInt> num_rows);
at::Tensor segment_row(const at::Tensor& values, const at::Tensor& first_idx, int64_t row);
std::tuple<at::Tensor, at::Tensor> segment_slice(const at::Tensor& values,
                                                 const at::Tensor& first_idx,
                                                 std::optional<int64_t> start,
                                                 std::optional<int64_t> stop, int64_t step);

at::Tensor segment_cumsum(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                          bool exclusive);
at::Tensor segment_cumprod(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                           bool exclusive);
std::tuple<at::Tensor, at::Tensor> segment_cummax(const at::Tensor& data,
                                                  const at::Tensor& first_idx, bool reverse);
std::tuple<at::Tensor, at::Tensor> segment_cummin(const at::Tensor& data,
                                                  const at::Tensor& first_idx, bool reverse);
at::Tensor segment_logcumsumexp(const at::Tensor& data, const at::Tensor& first_idx, bool reverse);
at::Tensor segment_arange(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows);

at::Tensor scatter(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                   std::optional<c10::SymInt> dim_size, c10::string_view reduce);
// scatter_max (is_max) or scatter_min.
std::tuple<at::Tensor, at::Tensor> scatter_extremum(bool is_max, const at::Tensor& src,
                                                    const at::Tensor& index, int64_t dim,
                                                    std::optional<c10::SymInt> dim_size);

}  // namespace torch_ragged::ops
