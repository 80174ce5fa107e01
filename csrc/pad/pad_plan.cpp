#include "pad/pad_plan.h"

#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

#include "common/checks.h"

namespace torch_ragged {
namespace {

constexpr std::array<std::pair<std::string_view, PadMode>, 13> kModeNames{{
    {"constant", PadMode::kConstant},
    {"empty", PadMode::kEmpty},
    {"edge", PadMode::kEdge},
    {"reflect", PadMode::kReflect},
    {"symmetric", PadMode::kSymmetric},
    {"wrap", PadMode::kWrap},
    {"linear_ramp", PadMode::kLinearRamp},
    {"maximum", PadMode::kMaximum},
    {"minimum", PadMode::kMinimum},
    {"mean", PadMode::kMean},
    {"median", PadMode::kMedian},
    {"replicate", PadMode::kEdge},  // F.pad's name
    {"circular", PadMode::kWrap},   // F.pad's name
}};

}  // namespace

PadMode parse_pad_mode(std::string_view op, std::string_view mode) {
  for (const auto& [name, value] : kModeNames) {
    if (name == mode) return value;
  }
  TORCH_CHECK_VALUE(false, "torch_ragged.", op, ": mode '", mode,
                    "' is not supported; expected one of constant, edge, linear_ramp, maximum, "
                    "mean, median, minimum, reflect, symmetric, wrap, empty (or replicate, "
                    "circular)");
}

const char* pad_mode_name(PadMode mode) {
  for (const auto& [name, value] : kModeNames) {
    if (value == mode) return name.data();  // the numpy name comes before the alias
  }
  return "?";
}

bool is_statistic_mode(PadMode mode) {
  return mode == PadMode::kMaximum || mode == PadMode::kMinimum || mode == PadMode::kMean ||
         mode == PadMode::kMedian;
}

std::optional<IndexPadMode> index_mode_of(PadMode mode) {
  switch (mode) {
    case PadMode::kConstant:
      return IndexPadMode::kConstant;
    case PadMode::kEmpty:
      return IndexPadMode::kEmpty;
    case PadMode::kEdge:
      return IndexPadMode::kEdge;
    case PadMode::kReflect:
      return IndexPadMode::kReflect;
    case PadMode::kSymmetric:
      return IndexPadMode::kSymmetric;
    case PadMode::kWrap:
      return IndexPadMode::kWrap;
    default:
      return std::nullopt;
  }
}

// Every padded axis (size + before + after) and the whole output must fit in int64: the kernels'
// index arithmetic and the allocation rely on it (ValueError, not a wrapped size).
static void check_padded_sizes(std::string_view op, at::IntArrayRef sizes,
                               const std::vector<int64_t>& widths) {
  std::vector<int64_t> padded(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    int64_t with_before = 0;
    TORCH_CHECK_VALUE(!c10::add_overflows(sizes[k], widths[2 * k], &with_before) &&
                          !c10::add_overflows(with_before, widths[2 * k + 1], &padded[k]),
                      "torch_ragged.", op, ": axis ", k, " padded by (", widths[2 * k], ", ",
                      widths[2 * k + 1], ") would have more than 2^63 - 1 elements");
  }
  check_numel_fits(op, "the padded output", padded);
}

std::vector<int64_t> checked_widths(std::string_view op, int64_t ndim,
                                    c10::SymIntArrayRef pad_width) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(pad_width.size()) == 2 * ndim, "torch_ragged.", op,
                    ": pad_width must hold one (before, after) pair per axis of the ", ndim,
                    "-d input, i.e. ", 2 * ndim, " entries, got ", pad_width.size());
  std::vector<int64_t> widths;
  widths.reserve(pad_width.size());
  for (const c10::SymInt& w : pad_width) widths.push_back(w.guard_int(__FILE__, __LINE__));
  for (const int64_t w : widths) {
    TORCH_CHECK_VALUE(
        w >= 0, "torch_ragged.", op,
        ": index can't contain negative values: pad_width can't contain negative values, got ",
        at::IntArrayRef(widths));
  }
  return widths;
}

std::vector<int64_t> checked_pad_width(std::string_view op, at::IntArrayRef sizes,
                                       c10::SymIntArrayRef pad_width, PadMode mode) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> widths = checked_widths(op, ndim, pad_width);
  check_padded_sizes(op, sizes, widths);
  if (mode != PadMode::kConstant && mode != PadMode::kEmpty) {
    for (int64_t k = 0; k < ndim; ++k) {
      TORCH_CHECK_VALUE(sizes[k] > 0 || (widths[2 * k] == 0 && widths[2 * k + 1] == 0),
                        "torch_ragged.", op, ": can't extend empty axis ", k,
                        " using modes other than 'constant' or 'empty' (mode '",
                        pad_mode_name(mode), "' reads the axis)");
    }
  }
  return widths;
}

std::vector<int64_t> padded_sizes(at::IntArrayRef sizes, const std::vector<int64_t>& pad_width) {
  std::vector<int64_t> out(sizes.begin(), sizes.end());
  for (size_t k = 0; k < out.size(); ++k) out[k] += pad_width[2 * k] + pad_width[2 * k + 1];
  return out;
}

std::vector<int64_t> unpadded_sizes(std::string_view op, at::IntArrayRef padded,
                                    const std::vector<int64_t>& pad_width) {
  TORCH_CHECK_VALUE(pad_width.size() == 2 * padded.size(), "torch_ragged.", op,
                    ": pad_width must hold 2 entries per axis of grad_output (", padded.size(),
                    " axes), got ", pad_width.size());
  std::vector<int64_t> out(padded.begin(), padded.end());
  for (size_t k = 0; k < out.size(); ++k) {
    // widths are non-negative: subtracting them one at a time cannot overflow
    const bool fits =
        pad_width[2 * k] <= out[k] && pad_width[2 * k + 1] <= out[k] - pad_width[2 * k];
    TORCH_CHECK_VALUE(fits, "torch_ragged.", op, ": axis ", k, " of grad_output (size ", padded[k],
                      ") is smaller than its padding ", pad_width[2 * k], " + ",
                      pad_width[2 * k + 1]);
    out[k] -= pad_width[2 * k] + pad_width[2 * k + 1];
  }
  return out;
}

namespace {

IndexPadMode checked_index_mode(std::string_view op, std::string_view mode) {
  const std::optional<IndexPadMode> index_mode = index_mode_of(parse_pad_mode(op, mode));
  TORCH_CHECK_VALUE(index_mode.has_value(), "torch_ragged.", op,
                    ": mode must be constant, empty, edge, reflect, symmetric or wrap, got '", mode,
                    "' (torch_ragged.pad serves the other modes)");
  return *index_mode;
}

}  // namespace

IndexPadArgs index_pad_args(std::string_view op, at::IntArrayRef in_sizes,
                            c10::SymIntArrayRef pad_width, std::string_view mode,
                            bool has_constant_values) {
  const PadMode pad_mode = parse_pad_mode(op, mode);
  const IndexPadMode index_mode = checked_index_mode(op, mode);
  TORCH_CHECK_VALUE(!has_constant_values || index_mode == IndexPadMode::kConstant, "torch_ragged.",
                    op, ": constant_values is only for mode 'constant', got mode '", mode, "'");
  IndexPadArgs args{index_mode, checked_pad_width(op, in_sizes, pad_width, pad_mode)};
  args.in_sizes = in_sizes.vec();
  args.out_sizes = padded_sizes(in_sizes, args.pad_width);
  return args;
}

IndexPadArgs index_pad_backward_args(std::string_view op, at::IntArrayRef out_sizes,
                                     c10::SymIntArrayRef pad_width, std::string_view mode) {
  const IndexPadMode index_mode = checked_index_mode(op, mode);
  IndexPadArgs args{index_mode};
  for (const c10::SymInt& w : pad_width) {
    args.pad_width.push_back(w.guard_int(__FILE__, __LINE__));
    TORCH_CHECK_VALUE(args.pad_width.back() >= 0, "torch_ragged.", op,
                      ": pad_width can't contain negative values, got ", pad_width);
  }
  args.in_sizes = unpadded_sizes(op, out_sizes, args.pad_width);
  args.out_sizes = out_sizes.vec();
  return args;
}

PadGeometry pad_geometry(std::string_view op, at::IntArrayRef in_sizes,
                         const std::vector<int64_t>& pad_width, IndexPadMode mode,
                         const std::vector<int64_t>& axis_order) {
  PadGeometry g;
  g.mode = mode;
  g.permuted = !axis_order.empty();
  bool previous_unpadded = false;
  for (size_t k = 0; k < in_sizes.size(); ++k) {
    const int64_t before = pad_width[2 * k], after = pad_width[2 * k + 1];
    const bool unpadded = before == 0 && after == 0;
    if (unpadded && previous_unpadded) {  // merge into the previous (also unpadded) axis
      g.in_size[g.ndim - 1] *= in_sizes[k];
      g.out_size[g.ndim - 1] *= in_sizes[k];
      continue;
    }
    TORCH_CHECK_VALUE(g.ndim < kMaxPadDims, "torch_ragged.", op,
                      ": input has too many padded axes (", in_sizes.size(), " axes; at most ",
                      kMaxPadDims, " after merging adjacent unpadded axes)");
    g.in_size[g.ndim] = in_sizes[k];
    g.out_size[g.ndim] = in_sizes[k] + before + after;
    g.before[g.ndim] = before;
    g.value_axis[g.ndim] = static_cast<int>(g.permuted ? axis_order[k] : k);
    ++g.ndim;
    previous_unpadded = unpadded;
  }
  if (g.ndim == 0) {  // a 0-d tensor: one element, nothing padded
    g.in_size[0] = g.out_size[0] = 1;
    g.before[0] = 0;
    g.value_axis[0] = 0;
    g.ndim = 1;
  }
  return g;
}

at::Tensor value_pairs(std::string_view op, std::string_view arg, const at::Tensor& values,
                       int64_t ndim) {
  const bool broadcastable = values.dim() <= 2 &&
                             (values.dim() < 1 || values.size(-1) == 1 || values.size(-1) == 2) &&
                             (values.dim() < 2 || values.size(0) == 1 || values.size(0) == ndim);
  TORCH_CHECK_VALUE(broadcastable, "torch_ragged.", op,
                    ": operands could not be broadcast together: ", arg,
                    " must broadcast to one (before, after) pair per axis, shape (", ndim,
                    ", 2), got shape ", values.sizes());
  return values.broadcast_to({ndim, 2});
}

at::Tensor constant_value_table(std::string_view op, const at::Tensor& values, int64_t ndim,
                                at::ScalarType dtype, at::Device device) {
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  if (!values.defined()) return at::zeros({ndim, 2}, options);
  return value_pairs(op, "constant_values", values.detach(), ndim).to(options).contiguous();
}

std::vector<int64_t> dense_layout_order(const at::Tensor& self) {
  if (self.is_contiguous() || !self.is_non_overlapping_and_dense()) return {};
  std::vector<int64_t> order(self.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  return order;
}

namespace {

// pad_width's (before, after) pairs in `order`.
std::vector<int64_t> permuted_widths(const std::vector<int64_t>& widths,
                                     const std::vector<int64_t>& order) {
  std::vector<int64_t> out;
  for (const int64_t k : order) out.insert(out.end(), {widths[2 * k], widths[2 * k + 1]});
  return out;
}

}  // namespace

// The output keeps the input's memory layout (numpy keeps Fortran order; torch.empty_like keeps
// channels_last): the kernel pads the contiguous view of the input in memory order, and the
// result is that padded tensor viewed back in the caller's axis order.
at::Tensor run_pad_index(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                         std::string_view mode, const std::optional<at::Tensor>& constant_values,
                         PadGatherLauncher launch) {
  const IndexPadArgs args =
      index_pad_args("pad_index", self.sizes(), pad_width, mode, constant_values.has_value());
  const std::vector<int64_t> order = dense_layout_order(self);
  const at::Tensor in = order.empty() ? self.contiguous() : self.permute(order);
  const std::vector<int64_t> widths =
      order.empty() ? args.pad_width : permuted_widths(args.pad_width, order);
  at::Tensor out = at::empty(padded_sizes(in.sizes(), widths), self.options());
  std::vector<int64_t> caller_order(order.size());
  for (size_t k = 0; k < order.size(); ++k) caller_order[order[k]] = static_cast<int64_t>(k);
  at::Tensor result = order.empty() ? out : out.permute(caller_order);
  if (out.numel() == 0) return result;
  const PadGeometry geometry = pad_geometry("pad_index", in.sizes(), widths, args.mode, order);
  const at::Tensor values =
      args.mode == IndexPadMode::kConstant
          ? constant_value_table("pad_index", constant_values.value_or(at::Tensor()), self.dim(),
                                 self.scalar_type(), self.device())
          : at::Tensor();
  launch(geometry, in, out, values);
  return result;
}

at::Tensor run_pad_index_backward(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                                  std::string_view mode, PadFoldLauncher launch) {
  const IndexPadArgs args =
      index_pad_backward_args("pad_index_backward", grad_output.sizes(), pad_width, mode);
  if (args.mode == IndexPadMode::kConstant || args.mode == IndexPadMode::kEmpty) {
    at::Tensor interior = grad_output;
    for (int64_t k = 0; k < grad_output.dim(); ++k) {
      interior = interior.narrow(k, args.pad_width[2 * k], args.in_sizes[k]);
    }
    return interior.clone(at::MemoryFormat::Contiguous);
  }
  at::Tensor grad_in = at::empty(args.in_sizes, grad_output.options());
  if (grad_in.numel() == 0) return grad_in;
  TORCH_CHECK_TYPE(
      at::isFloatingType(grad_output.scalar_type()) || at::isComplexType(grad_output.scalar_type()),
      "torch_ragged.pad_index_backward: grad_output must be a floating or complex "
      "tensor, got ",
      grad_output.scalar_type());
  const PadGeometry geometry =
      pad_geometry("pad_index_backward", args.in_sizes, args.pad_width, args.mode);
  launch(geometry, grad_output.contiguous(), grad_in);
  return grad_in;
}

}  // namespace torch_ragged
