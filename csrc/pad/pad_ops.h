#pragma once

// Typed dispatcher calls of the pad ops (see batch/batch_ops.h for why).

#include <ATen/ATen.h>

#include <optional>

namespace torch_ragged::ops {

at::Tensor pad(const at::Tensor& self, c10::SymIntArrayRef pad_width, c10::string_view mode,
               const std::optional<at::Tensor>& constant_values,
               const std::optional<at::Tensor>& end_values, at::OptionalIntArrayRef stat_length,
               std::optional<c10::string_view> reflect_type);
at::Tensor pad_index(const at::Tensor& self, c10::SymIntArrayRef pad_width, c10::string_view mode,
                     const std::optional<at::Tensor>& constant_values);
at::Tensor pad_index_backward(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                              c10::string_view mode);

}  // namespace torch_ragged::ops
