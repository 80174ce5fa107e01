#pragma once

// Typed dispatcher calls of the segment-core ops (see batch/batch_ops.h for why).

#include <ATen/ATen.h>

namespace torch_ragged::ops {

at::Tensor get_first_idx(const at::Tensor& numel_per_tensor);
at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx);

}  // namespace torch_ragged::ops
