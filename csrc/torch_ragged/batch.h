#pragma once

// Ragged batching in Kaolin's packed / padded representations (kaolin.ops.batch), plus
// padding_side.
//
// A batch of B sub-tensors of shapes (s_b1, ..., s_bk, C):
//   packed:  (sum_b prod(s_b), C), sub-tensor b in rows [first_idx[b], first_idx[b + 1])
//   padded:  (B, M_1, ..., M_k, C), sub-tensor b at [b, :s_b1, ..., :s_bk] ("right" padding) or at
//            [b, M_1 - s_b1:, ..., M_k - s_bk:] ("left" padding)
//   shape_per_tensor: (B, k) int64;  first_idx: (B + 1,) int64.
// max_shape entries of -1 mean "the largest sub-tensor's size"; a smaller max_shape is an error.

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <torch_ragged/export.h>

#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

namespace torch_ragged {

TORCH_RAGGED_API at::Tensor get_shape_per_tensor(at::TensorList tensor_list);

TORCH_RAGGED_API at::Tensor fill_max_shape(
    const at::Tensor& shape_per_tensor, at::OptionalIntArrayRef partial_max_shape = std::nullopt);

// Returns (packed_tensor, shape_per_tensor).
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> list_to_packed(at::TensorList tensor_list);

// Returns (padded_tensor, shape_per_tensor).
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> list_to_padded(
    at::TensorList tensor_list, const at::Scalar& padding_value,
    at::OptionalIntArrayRef max_shape = std::nullopt, std::string_view padding_side = "right");

// Views of packed_tensor, one per sub-tensor, shaped (s_b..., C).
TORCH_RAGGED_API std::vector<at::Tensor> packed_to_list(const at::Tensor& packed_tensor,
                                                        const at::Tensor& shape_per_tensor,
                                                        const at::Tensor& first_idx);

TORCH_RAGGED_API at::Tensor packed_to_padded(const at::Tensor& packed_tensor,
                                             const at::Tensor& shape_per_tensor,
                                             const at::Tensor& first_idx,
                                             const at::Scalar& padding_value,
                                             at::OptionalIntArrayRef max_shape = std::nullopt,
                                             std::string_view padding_side = "right");

// Views of padded_tensor, one per sub-tensor, shaped (s_b..., C).
TORCH_RAGGED_API std::vector<at::Tensor> padded_to_list(const at::Tensor& padded_tensor,
                                                        const at::Tensor& shape_per_tensor,
                                                        std::string_view padding_side = "right");

// num_rows (the packed row count, sum_b prod(s_b)) may be given to skip computing it.
TORCH_RAGGED_API at::Tensor padded_to_packed(const at::Tensor& padded_tensor,
                                             const at::Tensor& shape_per_tensor,
                                             std::string_view padding_side = "right",
                                             std::optional<int64_t> num_rows = std::nullopt);

// values (B,) -> (sum, 1) as Kaolin; values (B, D...) -> (sum, D...).
TORCH_RAGGED_API at::Tensor tile_to_packed(const at::Tensor& values,
                                           const at::Tensor& numel_per_tensor,
                                           std::optional<int64_t> num_rows = std::nullopt);

}  // namespace torch_ragged
