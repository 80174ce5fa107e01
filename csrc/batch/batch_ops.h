#pragma once

// Typed dispatcher calls of the batch ops with their schema's (SymInt) types. The public C++ API
// and the autograd kernels both go through these, so every caller reaches the same registered op.

#include <ATen/ATen.h>

#include <optional>
#include <tuple>
#include <vector>

namespace torch_ragged::ops {

std::tuple<at::Tensor, at::Tensor> list_to_packed(at::TensorList tensor_list);
std::tuple<at::Tensor, at::Tensor> list_to_padded(at::TensorList tensor_list,
                                                  const at::Scalar& padding_value,
                                                  at::OptionalSymIntArrayRef max_shape,
                                                  c10::string_view padding_side);
std::vector<at::Tensor> packed_to_list(const at::Tensor& packed_tensor,
                                       const at::Tensor& shape_per_tensor,
                                       const at::Tensor& first_idx);
at::Tensor packed_to_padded(const at::Tensor& packed_tensor, const at::Tensor& shape_per_tensor,
                            const at::Tensor& first_idx, const at::Scalar& padding_value,
                            at::OptionalSymIntArrayRef max_shape, c10::string_view padding_side);
std::vector<at::Tensor> padded_to_list(const at::Tensor& padded_tensor,
                                       const at::Tensor& shape_per_tensor,
                                       c10::string_view padding_side);
at::Tensor padded_to_packed(const at::Tensor& padded_tensor, const at::Tensor& shape_per_tensor,
                            c10::string_view padding_side, std::optional<c10::SymInt> num_rows);
at::Tensor tile_to_packed(const at::Tensor& values, const at::Tensor& numel_per_tensor,
                          std::optional<c10::SymInt> num_rows);

}  // namespace torch_ragged::ops
