#pragma once

// numpy.pad for tensors: every numpy mode, any rank, CPU and CUDA, differentiable.
//
// pad_width holds (before, after) for every axis in order: {b_0, a_0, b_1, a_1, ...}. Modes:
// constant, edge, linear_ramp, maximum, mean, median, minimum, reflect, symmetric, wrap, empty, and
// F.pad's names replicate (= edge) and circular (= wrap). Keywords as numpy.pad, each only for its
// modes: constant_values (constant) and end_values (linear_ramp) broadcast to (ndim, 2);
// stat_length (maximum, mean, median, minimum) holds one (before, after) pair per axis;
// reflect_type (reflect, symmetric) is "even" or "odd". Results match numpy >= 2.1; see
// docs/pad.md.

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <torch_ragged/export.h>

#include <optional>
#include <string_view>

namespace torch_ragged {

TORCH_RAGGED_API at::Tensor pad(const at::Tensor& input, at::IntArrayRef pad_width,
                                std::string_view mode = "constant",
                                const std::optional<at::Tensor>& constant_values = std::nullopt,
                                const std::optional<at::Tensor>& end_values = std::nullopt,
                                at::OptionalIntArrayRef stat_length = std::nullopt,
                                std::optional<std::string_view> reflect_type = std::nullopt);

}  // namespace torch_ragged
