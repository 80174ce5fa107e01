#pragma once

// Host side of the pad family: mode names, argument checks (numpy.pad's errors, with numpy's
// exception types), and the merged geometry the index-mode kernels walk.

#include <ATen/ATen.h>

#include <string_view>
#include <vector>

#include "pad/pad_index.h"

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

// pad_width as ints: one (before, after) pair per axis, none negative. The checks that need no
// sizes (what a traced pad with symbolic sizes can check; the kernel checks the rest when it runs).
std::vector<int64_t> checked_widths(std::string_view op, int64_t ndim,
                                    c10::SymIntArrayRef pad_width);

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
// `axis_order`: the caller's axis of each of in_sizes' axes (empty: the identity).
PadGeometry pad_geometry(std::string_view op, at::IntArrayRef in_sizes,
                         const std::vector<int64_t>& pad_width, IndexPadMode mode,
                         const std::vector<int64_t>& axis_order = {});

// The order of self's axes in memory, outermost first, when self is dense and non-overlapping but
// not contiguous (channels_last, Fortran order, a permuted view): permuting self by it gives a
// contiguous view. Empty for contiguous or overlapping / gapped tensors. The fake kernel of
// pad_index (_fake.py) applies the same rule: stable sort of the axes by decreasing stride.
std::vector<int64_t> dense_layout_order(const at::Tensor& self);

// values (constant_values / end_values) broadcast to (ndim, 2) as numpy broadcasts them; ValueError
// naming `arg` otherwise. Keeps autograd.
at::Tensor value_pairs(std::string_view op, std::string_view arg, const at::Tensor& values,
                       int64_t ndim);

// constant_values broadcast to (ndim, 2), cast to dtype, contiguous on `device` (zeros when
// undefined). Row k holds the (before, after) values of axis k.
at::Tensor constant_value_table(std::string_view op, const at::Tensor& values, int64_t ndim,
                                at::ScalarType dtype, at::Device device);

// The device-independent half of the index-mode kernels: checks, allocation, the merged geometry
// and the constant table; `launch` runs the device's kernel on contiguous tensors (never empty).
using PadGatherLauncher = void (*)(const PadGeometry& geometry, const at::Tensor& in,
                                   at::Tensor& out, const at::Tensor& values);
using PadFoldLauncher = void (*)(const PadGeometry& geometry, const at::Tensor& grad,
                                 at::Tensor& grad_in);

at::Tensor run_pad_index(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                         std::string_view mode, const std::optional<at::Tensor>& constant_values,
                         PadGatherLauncher launch);

// Constant / empty modes need no kernel: their gradient is the interior, copied.
at::Tensor run_pad_index_backward(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                                  std::string_view mode, PadFoldLauncher launch);

}  // namespace torch_ragged
