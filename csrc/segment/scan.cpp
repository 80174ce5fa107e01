// Segmented scans: schemas, the plan of levels, autograd and the C++ API.
//
// Autograd (formulas as torch's cumsum / cumprod / cummax / logcumsumexp, per segment):
//   segment_cumsum: the gradient's scan the other way (same exclusive), so twice differentiable;
//   segment_cumprod: revcumsum(g * y) / x before a segment's first zero, the product of the others
//     at it, and (when a graph is recorded) x_zero * that gradient of the product with the first
//     zero made one after it: zero in value, with the derivative the second order needs;
//   segment_cummax / cummin: the gradient added to the arg rows;
//   segment_logcumsumexp: torch's stable form, positive and negative parts of the gradient in log
//     space, each scanned the other way.

#include "segment/scan.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <torch_ragged/segment.h>

#include <type_traits>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "segment/offsets.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(
      "segment_cumsum(Tensor data, Tensor first_idx, bool reverse=False, bool exclusive=False) -> "
      "Tensor",
      tags);
  m.def(
      "segment_cumprod(Tensor data, Tensor first_idx, bool reverse=False, bool exclusive=False) "
      "-> Tensor",
      tags);
  m.def(
      "segment_cummax(Tensor data, Tensor first_idx, bool reverse=False) -> (Tensor values, "
      "Tensor arg)",
      tags);
  m.def(
      "segment_cummin(Tensor data, Tensor first_idx, bool reverse=False) -> (Tensor values, "
      "Tensor arg)",
      tags);
  m.def("segment_logcumsumexp(Tensor data, Tensor first_idx, bool reverse=False) -> Tensor", tags);
  m.def("segment_arange(Tensor first_idx, SymInt? num_rows=None) -> Tensor", tags);
}

constexpr const char* kScanOps[] = {"segment_cumsum", "segment_cumprod",      "segment_cummax",
                                    "segment_cummin", "segment_logcumsumexp", "segment_arange"};

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kScanOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kScanOps);
}

ScanInput scan_input(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                     SegmentDtypes dtypes, bool promote_integers) {
  at::Tensor values = data;
  if (promote_integers && data.defined() &&
      at::isIntegralType(data.scalar_type(), /*includeBool=*/true)) {
    values = data.to(at::kLong);
  }
  check_segment_args(op, values, first_idx, dtypes);
  std::vector<int64_t> offsets = checked_first_idx(op, first_idx, std::nullopt);
  check_last_offset_is_rows(op, offsets.back(), values.size(0));
  return ScanInput{values.contiguous(), row_width(values), std::move(offsets)};
}

// ---- typed dispatcher calls ----

namespace ops {

using Tensor = at::Tensor;
using TensorPair = std::tuple<at::Tensor, at::Tensor>;

Tensor segment_cumsum(const Tensor& data, const Tensor& first_idx, bool reverse, bool exclusive) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, bool, bool)>("torch_ragged::segment_cumsum");
  return op.call(data, first_idx, reverse, exclusive);
}

Tensor segment_cumprod(const Tensor& data, const Tensor& first_idx, bool reverse, bool exclusive) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, bool, bool)>("torch_ragged::segment_cumprod");
  return op.call(data, first_idx, reverse, exclusive);
}

TensorPair segment_cummax(const Tensor& data, const Tensor& first_idx, bool reverse) {
  static auto op =
      op_handle<TensorPair(const Tensor&, const Tensor&, bool)>("torch_ragged::segment_cummax");
  return op.call(data, first_idx, reverse);
}

TensorPair segment_cummin(const Tensor& data, const Tensor& first_idx, bool reverse) {
  static auto op =
      op_handle<TensorPair(const Tensor&, const Tensor&, bool)>("torch_ragged::segment_cummin");
  return op.call(data, first_idx, reverse);
}

Tensor segment_logcumsumexp(const Tensor& data, const Tensor& first_idx, bool reverse) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, bool)>("torch_ragged::segment_logcumsumexp");
  return op.call(data, first_idx, reverse);
}

Tensor segment_arange(const Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  static auto op =
      op_handle<Tensor(const Tensor&, std::optional<c10::SymInt>)>("torch_ragged::segment_arange");
  return op.call(first_idx, std::move(num_rows));
}

}  // namespace ops

// ---- autograd ----

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// first_idx of the rows read backwards (what scan_plan builds for a reverse scan), on its device.
at::Tensor reversed_first_idx(const at::Tensor& first_idx) {
  return first_idx.select(0, -1) - first_idx.flip(0);
}

// Row k's gradient becomes row k + 1's within each segment, 0 on a segment's last row: the
// gradient of an exclusive scan in terms of the inclusive one (y_excl[k + 1] = y_incl[k]).
at::Tensor shifted_to_earlier_rows(const at::Tensor& grad, const at::Tensor& first_idx) {
  const int64_t rows = grad.size(0);
  if (rows == 0) return grad;
  const at::Tensor ids = ops::segment_ids(first_idx.to(grad.device()), rows);
  const at::Tensor segment_end = first_idx.to(grad.device(), at::kLong).index_select(0, ids + 1);
  const at::Tensor last = at::arange(1, rows + 1, segment_end.options()) == segment_end;
  std::vector<int64_t> shape(grad.dim(), 1);
  shape[0] = rows;
  return at::where(last.view(shape), at::zeros({}, grad.options()), grad.roll(-1, 0));
}

class SegmentCumsum : public torch::autograd::Function<SegmentCumsum> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& data,
                            const at::Tensor& first_idx, bool reverse, bool exclusive) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({first_idx});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["exclusive"] = exclusive;
    return ops::segment_cumsum(data, first_idx, reverse, exclusive);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentCumsum>();
    return {ops::segment_cumsum(grads[0], ctx->get_saved_variables()[0],
                                !ctx->saved_data["reverse"].toBool(),
                                ctx->saved_data["exclusive"].toBool()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The gradient of y = segment_cumprod(x) (inclusive, forward) for the output gradient g: row j
// gets sum over rows i >= j of its segment of g_i * conj(prod_{k <= i, k != j} x_k). Before the
// segment's first zero that is revcumsum(g * conj(y)) / conj(x); at the first zero z it is
// revcumsum(g * conj(y')) with y' the product with x_z made one; after it 0 -- written as
// conj(x_z) * (the same gradient for x with x_z made one) when second_order, so that its
// derivative by x_z is right.
at::Tensor cumprod_gradient(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y,
                            const at::Tensor& first_idx, bool second_order) {
  const at::Tensor is_zero = x == 0;
  const at::Tensor reversed_sum_of_gy =
      ops::segment_cumsum(grad * y.conj(), first_idx, true, false);
  // No test for "any zero" first (torch's reads one on the host): the masks cost a few passes, but
  // the backward stays free of host reads, so it traces (torch.compile / export) and never syncs.
  const at::Tensor zeros_so_far = ops::segment_cumsum(is_zero, first_idx, false, false);
  const at::Tensor before = zeros_so_far == 0;
  const at::Tensor first_zero = is_zero.logical_and(zeros_so_far == 1);
  const at::Tensor one = at::ones({}, x.options());
  const at::Tensor before_zero = reversed_sum_of_gy / at::where(before, x, one).conj();
  const at::Tensor x_without_zero = at::where(first_zero, one, x);
  const at::Tensor y_without_zero = ops::segment_cumprod(x_without_zero, first_idx, false, false);
  const at::Tensor at_zero =
      ops::segment_cumsum(grad * y_without_zero.conj(), first_idx, true, false);
  at::Tensor after_zero = at::zeros({}, x.options());
  if (second_order) {
    const at::Tensor x_zero = ops::segment_cumsum(
        at::where(first_zero, x, at::zeros({}, x.options())), first_idx, false, false);
    after_zero =
        x_zero.conj() * cumprod_gradient(grad, x_without_zero, y_without_zero, first_idx, false);
  }
  return at::where(before, before_zero, at::where(first_zero, at_zero, after_zero));
}

class SegmentCumprod : public torch::autograd::Function<SegmentCumprod> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& data,
                            const at::Tensor& first_idx, bool reverse, bool exclusive) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::segment_cumprod(data, first_idx, reverse, exclusive);
    ctx->save_for_backward({data, out, first_idx});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["exclusive"] = exclusive;
    return out;
  }
  // Reverse: the rows read backwards (flip, reversed_first_idx) make it a forward scan; exclusive:
  // y_excl[k + 1] = y_incl[k], so the inclusive scan's gradient is the output's shifted by one row.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentCumprod>();
    const variable_list saved = ctx->get_saved_variables();
    const bool reverse = ctx->saved_data["reverse"].toBool();
    const bool exclusive = ctx->saved_data["exclusive"].toBool();
    at::Tensor grad = grads[0], x = saved[0], y = saved[1], first_idx = saved[2];
    if (reverse) {
      grad = grad.flip(0);
      x = x.flip(0);
      y = y.flip(0);
      first_idx = reversed_first_idx(first_idx);
    }
    if (exclusive) {
      grad = shifted_to_earlier_rows(grad, first_idx);
      y = ops::segment_cumprod(x, first_idx, false, false);
    }
    at::Tensor grad_x = cumprod_gradient(grad, x, y, first_idx, at::GradMode::is_enabled());
    if (reverse) grad_x = grad_x.flip(0);
    return {grad_x, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <bool kMax>
class SegmentCumExtremum : public torch::autograd::Function<SegmentCumExtremum<kMax>> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& data,
                               const at::Tensor& first_idx, bool reverse) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [values, arg] = kMax ? ops::segment_cummax(data, first_idx, reverse)
                              : ops::segment_cummin(data, first_idx, reverse);
    ctx->save_for_backward({arg});
    ctx->saved_data["sizes"] = data.sym_sizes();
    ctx->mark_non_differentiable({arg});
    return {values, arg};
  }
  // Many outputs share an arg row: their gradients add there (scatter_add is sequential on the
  // CPU; on a GPU its atomics add in any order unless torch.use_deterministic_algorithms is on).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentCumExtremum>();
    const std::vector<c10::SymInt> sizes = ctx->saved_data["sizes"].toSymIntVector();
    const at::Tensor arg = ctx->get_saved_variables()[0];
    return {at::zeros_symint(sizes, grads[0].options()).scatter_add(0, arg, grads[0]), at::Tensor(),
            at::Tensor()};
  }
};

// torch's logcumsumexp backward per segment: grad_x_j = sum_{i >= j} g_i exp(x_j - y_i), the
// positive and the negative g apart, each as exp(logcumsumexp_reversed(log|g| - y) + x).
class SegmentLogcumsumexp : public torch::autograd::Function<SegmentLogcumsumexp> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& data,
                            const at::Tensor& first_idx, bool reverse) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::segment_logcumsumexp(data, first_idx, reverse);
    ctx->save_for_backward({data, out, first_idx});
    ctx->saved_data["reverse"] = reverse;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentLogcumsumexp>();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &grad = grads[0], &x = saved[0], &y = saved[1], &first_idx = saved[2];
    const bool other_way = !ctx->saved_data["reverse"].toBool();
    at::Tensor lowest;  // log of a zero part: the dtype's lowest number (as torch), not -inf
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "lowest", [&] {
      lowest = at::full({}, std::numeric_limits<scalar_t>::lowest(), grad.options());
    });
    const at::Tensor log_abs = grad.abs().log();
    const auto part = [&](const at::Tensor& log_part) {
      return (ops::segment_logcumsumexp(log_part - y, first_idx, other_way) + x).exp();
    };
    const at::Tensor positive = part(at::where(grad > 0, log_abs, lowest));
    const at::Tensor negative = part(at::where(grad < 0, log_abs, lowest));
    return {positive - negative, at::Tensor(), at::Tensor()};
  }
};

// A scan's Autograd kernel: the op itself below autograd when no graph is recorded (no node, no
// saved tensors), else Function's node. `call` is the op's typed dispatcher call.
template <typename Function, typename Call, typename... Flags>
auto scan_autograd(std::string_view op, const Call& call, const at::Tensor& data,
                   const at::Tensor& first_idx, Flags... flags) {
  check_defined(op, "data", data);
  check_defined(op, "first_idx", first_idx);
  using Result = decltype(call(data, first_idx, flags...));
  if (!records_graph(data)) {
    at::AutoDispatchBelowAutograd guard;
    return call(data, first_idx, flags...);
  }
  if constexpr (std::is_same_v<Result, at::Tensor>) {
    return Function::apply(data, first_idx, flags...);
  } else {  // (values, arg)
    const variable_list out = Function::apply(data, first_idx, flags...);
    return Result{out[0], out[1]};
  }
}

at::Tensor segment_cumsum_autograd(const at::Tensor& data, const at::Tensor& first_idx,
                                   bool reverse, bool exclusive) {
  return scan_autograd<SegmentCumsum>("segment_cumsum", ops::segment_cumsum, data, first_idx,
                                      reverse, exclusive);
}

at::Tensor segment_cumprod_autograd(const at::Tensor& data, const at::Tensor& first_idx,
                                    bool reverse, bool exclusive) {
  return scan_autograd<SegmentCumprod>("segment_cumprod", ops::segment_cumprod, data, first_idx,
                                       reverse, exclusive);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> segment_cum_extremum_autograd(const at::Tensor& data,
                                                                 const at::Tensor& first_idx,
                                                                 bool reverse) {
  return scan_autograd<SegmentCumExtremum<kMax>>(kMax ? "segment_cummax" : "segment_cummin",
                                                 kMax ? ops::segment_cummax : ops::segment_cummin,
                                                 data, first_idx, reverse);
}

at::Tensor segment_logcumsumexp_autograd(const at::Tensor& data, const at::Tensor& first_idx,
                                         bool reverse) {
  return scan_autograd<SegmentLogcumsumexp>("segment_logcumsumexp", ops::segment_logcumsumexp, data,
                                            first_idx, reverse);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("segment_cumsum", &segment_cumsum_autograd);
  m.impl("segment_cumprod", &segment_cumprod_autograd);
  m.impl("segment_cummax", &segment_cum_extremum_autograd<true>);
  m.impl("segment_cummin", &segment_cum_extremum_autograd<false>);
  m.impl("segment_logcumsumexp", &segment_logcumsumexp_autograd);
}

// ---- public C++ API ----

at::Tensor segment_cumsum(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                          bool exclusive) {
  return ops::segment_cumsum(data, first_idx, reverse, exclusive);
}
at::Tensor segment_cumprod(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                           bool exclusive) {
  return ops::segment_cumprod(data, first_idx, reverse, exclusive);
}
std::tuple<at::Tensor, at::Tensor> segment_cummax(const at::Tensor& data,
                                                  const at::Tensor& first_idx, bool reverse) {
  return ops::segment_cummax(data, first_idx, reverse);
}
std::tuple<at::Tensor, at::Tensor> segment_cummin(const at::Tensor& data,
                                                  const at::Tensor& first_idx, bool reverse) {
  return ops::segment_cummin(data, first_idx, reverse);
}
at::Tensor segment_logcumsumexp(const at::Tensor& data, const at::Tensor& first_idx, bool reverse) {
  return ops::segment_logcumsumexp(data, first_idx, reverse);
}
at::Tensor segment_arange(const at::Tensor& first_idx, std::optional<int64_t> num_rows) {
  if (!num_rows.has_value()) return ops::segment_arange(first_idx, std::nullopt);
  return ops::segment_arange(first_idx, c10::SymInt(*num_rows));
}

}  // namespace torch_ragged
