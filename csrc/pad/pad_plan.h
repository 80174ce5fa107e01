#pragma once

// Host side of the pad family: mode names, argument checks (numpy.pad's errors, with numpy's
// exception types), and the merged geometry the index-mode kernels walk.

#include <ATen/ATen.h>

#include <string_view>
#include <vector>

#include "common/pad_index.h"

namespace torch_ragged {

// numpy.pad's modes; F.pad's names "replicate" and "circular" parse to kEdge and kWrap.
enum class PadMode {
  kConstant,
  kEmpty,
  kEdge,
  kReflect,
  kSymmetric,
  kWrap,
  kLinearRamp,
  kMaximum,
  kMinimum,
  kMean,
  kMedian
};

PadMode parse_pad_mode(std::string_view op, std::string_view mode);
const char* pad_mode_name(PadMode mode);
bool is_statistic_mode(PadMode mode);

// The index-mode kernel that serves `mode` (even reflections), or nullopt for the value modes.
std::optional<IndexPadMode> index_mode_of(PadMode mode);

// pad_width (before_0, after_0, before_1, ...) as integers, checked against `sizes`: one
// non-negative pair per axis, and no padding of an empty axis in a mode that reads the axis.
std::vector<int64_t> checked_pad_width(std::string_view op, at::IntArrayRef sizes,
                                       c10::SymIntArrayRef pad_width, PadMode mode);

std::vector<int64_t> padded_sizes(at::IntArrayRef sizes, const std::vector<int64_t>& pad_width);

// The input sizes that pad_width pads to `padded` (the inverse of padded_sizes), checked.
std::vector<int64_t> unpadded_sizes(std::string_view op, at::IntArrayRef padded,
                                    const std::vector<int64_t>& pad_width);

// Checked arguments of the index-mode kernels (pad_index and pad_index_backward).
struct IndexPadArgs {
  IndexPadMode mode;
  std::vector<int64_t> pad_width, in_sizes, out_sizes;
};

IndexPadArgs index_pad_args(std::string_view op, at::IntArrayRef in_sizes,
                            c10::SymIntArrayRef pad_width, std::string_view mode,
                            bool has_constant_values);

IndexPadArgs index_pad_backward_args(std::string_view op, at::IntArrayRef out_sizes,
                                     c10::SymIntArrayRef pad_width, std::string_view mode);

// Merges adjacent unpadded axes of a contiguous tensor; errors past kMaxPadDims merged axes.
PadGeometry pad_geometry(std::string_view op, at::IntArrayRef in_sizes,
                         const std::vector<int64_t>& pad_width, IndexPadMode mode);

// constant_values broadcast to (ndim, 2), cast to dtype, contiguous on `device` (zeros when
// undefined). Row k holds the (before, after) values of axis k.
at::Tensor constant_value_table(std::string_view op, const at::Tensor& values, int64_t ndim,
                                at::ScalarType dtype, at::Device device);

}  // namespace torch_ragged
