#pragma once

// The segment core: offsets and per-segment reductions over `first_idx`.

#include <ATen/core/Tensor.h>
#include <torch_ragged/export.h>

namespace torch_ragged {

// Exclusive prefix sum with the total appended: numel_per_tensor (B,) -> first_idx (B + 1,) int64,
// on numel_per_tensor's device. Kaolin's get_first_idx.
TORCH_RAGGED_API at::Tensor get_first_idx(const at::Tensor& numel_per_tensor);

// Sums rows [first_idx[b], first_idx[b + 1]) of data (N, D...) into row b of the result (B, D...).
// Differentiable; its backward is tile_to_packed.
TORCH_RAGGED_API at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx);

}  // namespace torch_ragged
