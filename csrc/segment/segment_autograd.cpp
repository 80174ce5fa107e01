// Autograd of the segment core (Autograd dispatch key). Backward formulas call the core's own ops,
// which are differentiable in turn, so double backward comes from the same code:
//   segment_sum <-> segment_expand (each is the other's adjoint),
//   segment_mean: expand(grad / count),
//   segment_max / min: grad scattered to the arg rows (empty segments, arg = -1, send nothing),
//   segment_softmax / log_softmax: the fused segment_softmax_backward op, whose own backward is
//   written with sum / expand below,
//   ragged_index_select: index_add of the gradient's rows onto the rows they were copied from
//   (index_add is differentiable in the gradient, so double backward comes from ATen).

#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

#include "common/autograd.h"
#include "common/checks.h"
#include "segment/segment_ops.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Per-segment tensor (B, ...) broadcast against row tensors: B entries along dim 0.
at::Tensor per_segment_column(const at::Tensor& v, int64_t dim) {
  std::vector<int64_t> shape(std::max<int64_t>(dim, 1), 1);
  shape[0] = v.size(0);
  return v.view(shape);
}

c10::SymInt rows_of(AutogradContext* ctx) { return ctx->saved_data["rows"].toSymInt(); }

// sum: backward expand(grad); mean: expand(grad / count). Both linear, so twice differentiable.
template <bool kMean>
class SegmentSumOrMean : public torch::autograd::Function<SegmentSumOrMean<kMean>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& data,
                            const at::Tensor& first_idx) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    // the op validates before data's sizes are read here
    at::Tensor out = kMean ? ops::segment_mean(data, first_idx) : ops::segment_sum(data, first_idx);
    ctx->save_for_backward({first_idx});
    ctx->saved_data["rows"] = data.sym_size(0);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentSumOrMean>();
    const at::Tensor first_idx = ctx->get_saved_variables()[0];
    at::Tensor grad = grads[0];
    if (kMean) {
      // Empty segments have no rows to receive anything; clamping keeps their division finite.
      const at::Tensor counts = first_idx.diff().clamp_min(1).to(grad.device(), grad.scalar_type());
      grad = grad / per_segment_column(counts, grad.dim());
    }
    return {ops::segment_expand(grad, first_idx, rows_of(ctx)), at::Tensor()};
  }
};

class SegmentExpand : public torch::autograd::Function<SegmentExpand> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& values,
                            const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({first_idx});
    return ops::segment_expand(values, first_idx, std::move(num_rows));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentExpand>();
    return {ops::segment_sum(grads[0], ctx->get_saved_variables()[0]), at::Tensor(), at::Tensor()};
  }
};

// The gradient of max / min: grad[b, c] goes to row arg[b, c] of column c; empty segments (arg
// -1) go to an extra row that is dropped. Rows are distinct per column (segments do not overlap),
// so the scatter is deterministic, and it is differentiable (its adjoint is a gather).
at::Tensor scatter_to_arg_rows(const at::Tensor& grad, const at::Tensor& arg,
                               c10::SymIntArrayRef data_sizes) {
  std::vector<c10::SymInt> sizes(data_sizes.begin(), data_sizes.end());
  const c10::SymInt rows = sizes[0];
  sizes[0] = rows + 1;
  const at::Tensor index = at::where(arg < 0, c10::Scalar(rows), arg);
  return at::zeros_symint(sizes, grad.options()).scatter(0, index, grad).narrow_symint(0, 0, rows);
}

template <bool kMax>
class SegmentExtremum : public torch::autograd::Function<SegmentExtremum<kMax>> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& data,
                               const at::Tensor& first_idx) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [values, arg] =
        kMax ? ops::segment_max(data, first_idx) : ops::segment_min(data, first_idx);
    ctx->save_for_backward({arg});
    ctx->saved_data["sizes"] = data.sym_sizes();
    ctx->mark_non_differentiable({arg});
    return {values, arg};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentExtremum>();
    const std::vector<c10::SymInt> sizes = ctx->saved_data["sizes"].toSymIntVector();
    return {scatter_to_arg_rows(grads[0], ctx->get_saved_variables()[0], sizes), at::Tensor()};
  }
};

template <bool kLog>
class SegmentSoftmax : public torch::autograd::Function<SegmentSoftmax<kLog>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& data,
                            const at::Tensor& first_idx) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out =
        kLog ? ops::segment_log_softmax(data, first_idx) : ops::segment_softmax(data, first_idx);
    ctx->save_for_backward({out, first_idx});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentSoftmax>();
    const variable_list saved = ctx->get_saved_variables();
    return {ops::segment_softmax_backward(grads[0], saved[0], saved[1], kLog), at::Tensor()};
  }
};

// z = y * (g - E(S(g * y)))   (softmax)     z = g - exp(y) * E(S(g))   (log_softmax)
// with S = segment_sum and E = segment_expand. Given u = dL/dz:
//   softmax:     dL/dg = u*y - y*E(S(u*y))          = softmax_backward(u, y)
//                dL/dy = u*g - u*E(S(g*y)) - g*E(S(u*y))
//   log_softmax: dL/dg = u - E(S(u * exp(y)))
//                dL/dy = -u * exp(y) * E(S(g))
class SegmentSoftmaxBackward : public torch::autograd::Function<SegmentSoftmaxBackward> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_output,
                            const at::Tensor& output, const at::Tensor& first_idx, bool log) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({grad_output, output, first_idx});
    ctx->saved_data["log"] = log;
    return ops::segment_softmax_backward(grad_output, output, first_idx, log);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SegmentSoftmaxBackward>();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &g = saved[0], &y = saved[1], &first_idx = saved[2], &u = grads[0];
    const c10::SymInt rows = y.sym_size(0);
    auto sum_expand = [&](const at::Tensor& t) {
      return ops::segment_expand(ops::segment_sum(t, first_idx), first_idx, rows);
    };
    at::Tensor grad_g, grad_y;
    if (ctx->saved_data["log"].toBool()) {
      const at::Tensor exp_y = y.exp();
      grad_g = u - sum_expand(u * exp_y);
      grad_y = -u * exp_y * sum_expand(g);
    } else {
      const at::Tensor uy_sums = sum_expand(u * y);
      grad_g = u * y - y * uy_sums;
      grad_y = u * g - u * sum_expand(g * y) - g * uy_sums;
    }
    return {grad_g, grad_y, at::Tensor(), at::Tensor()};
  }
};

// Row r of the selection's segment k was copied from row first_idx[index[k]] + r -
// out_first_idx[k] of values: (rows,) int64 on `device`.
at::Tensor selected_source_rows(const at::Tensor& first_idx, const at::Tensor& index,
                                const at::Tensor& out_first_idx, const c10::SymInt& rows,
                                at::Device device) {
  const int64_t segments = first_idx.size(0) - 1;
  const at::Tensor offsets = first_idx.to(device, at::kLong);
  const at::Tensor picks = index.to(device, at::kLong);
  const at::Tensor wrapped = at::where(picks < 0, picks + segments, picks);
  const at::Tensor out_offsets = out_first_idx.to(device, at::kLong);
  const at::Tensor shift = offsets.index_select(0, wrapped) - out_offsets.slice(0, 0, -1);
  return ops::segment_expand(shift, out_offsets, rows) +
         at::arange(c10::Scalar(rows), offsets.options());
}

// Whether a concrete CPU index picks each of `segments` segments at most once (negatives counted
// from the end): then no two output rows came from one source row, and the backward copies the
// gradient's rows into place (index_copy_, ~3.5x faster than index_add on the CPU) instead of
// adding them.
bool picks_each_segment_once(const at::Tensor& index, int64_t segments) {
  if (!index.is_cpu() || is_symbolic(index)) return false;
  const at::Tensor picks = index.to(at::kLong).contiguous();
  const int64_t* pick = picks.const_data_ptr<int64_t>();
  std::vector<bool> seen(segments, false);
  for (int64_t k = 0; k < picks.numel(); ++k) {
    const int64_t b = pick[k] < 0 ? pick[k] + segments : pick[k];
    if (b < 0 || b >= segments || seen[b]) return false;
    seen[b] = true;
  }
  return true;
}

class RaggedIndexSelect : public torch::autograd::Function<RaggedIndexSelect> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& values,
                               const at::Tensor& first_idx, const at::Tensor& index,
                               std::optional<c10::SymInt> num_rows) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, out_first_idx] = ops::ragged_index_select(values, first_idx, index, num_rows);
    ctx->save_for_backward({first_idx, index, out_first_idx});
    ctx->saved_data["rows"] = values.sym_size(0);
    ctx->mark_non_differentiable({out_first_idx});
    return {out, out_first_idx};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<RaggedIndexSelect>();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& grad = grads[0];
    at::Tensor grad_values;
    if (grad.defined()) {
      const at::Tensor source =
          selected_source_rows(saved[0], saved[1], saved[2], grad.sym_size(0), grad.device());
      std::vector<c10::SymInt> sizes(grad.sym_sizes().begin(), grad.sym_sizes().end());
      sizes[0] = rows_of(ctx);
      grad_values = at::zeros_symint(sizes, grad.options());
      if (grad.is_cpu() && picks_each_segment_once(saved[1], saved[0].size(0) - 1)) {
        grad_values.index_copy_(0, source, grad);
      } else {
        grad_values = grad_values.index_add(0, source, grad);
      }
    }
    return {grad_values, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_data_and_first_idx(std::string_view op, const at::Tensor& data,
                              const at::Tensor& first_idx) {
  check_defined(op, "data", data);
  check_defined(op, "first_idx", first_idx);
}

at::Tensor segment_sum_autograd(const at::Tensor& data, const at::Tensor& first_idx) {
  check_data_and_first_idx("segment_sum", data, first_idx);
  if (!records_graph(data)) {
    at::AutoDispatchBelowAutograd guard;
    return ops::segment_sum(data, first_idx);
  }
  return SegmentSumOrMean<false>::apply(data, first_idx);
}
at::Tensor segment_expand_autograd(const at::Tensor& values, const at::Tensor& first_idx,
                                   std::optional<c10::SymInt> num_rows) {
  check_defined("segment_expand", "values", values);
  check_defined("segment_expand", "first_idx", first_idx);
  return SegmentExpand::apply(values, first_idx, std::move(num_rows));
}
at::Tensor segment_mean_autograd(const at::Tensor& data, const at::Tensor& first_idx) {
  check_data_and_first_idx("segment_mean", data, first_idx);
  if (!records_graph(data)) {
    at::AutoDispatchBelowAutograd guard;
    return ops::segment_mean(data, first_idx);
  }
  return SegmentSumOrMean<true>::apply(data, first_idx);
}
template <bool kMax>
std::tuple<at::Tensor, at::Tensor> segment_extremum_autograd(const at::Tensor& data,
                                                             const at::Tensor& first_idx) {
  check_data_and_first_idx(kMax ? "segment_max" : "segment_min", data, first_idx);
  if (!records_graph(data)) {
    at::AutoDispatchBelowAutograd guard;
    return kMax ? ops::segment_max(data, first_idx) : ops::segment_min(data, first_idx);
  }
  const variable_list out = SegmentExtremum<kMax>::apply(data, first_idx);
  return {out[0], out[1]};
}
template <bool kLog>
at::Tensor segment_softmax_autograd(const at::Tensor& data, const at::Tensor& first_idx) {
  check_data_and_first_idx(kLog ? "segment_log_softmax" : "segment_softmax", data, first_idx);
  if (!records_graph(data)) {
    at::AutoDispatchBelowAutograd guard;
    return kLog ? ops::segment_log_softmax(data, first_idx) : ops::segment_softmax(data, first_idx);
  }
  return SegmentSoftmax<kLog>::apply(data, first_idx);
}
at::Tensor segment_softmax_backward_autograd(const at::Tensor& grad_output,
                                             const at::Tensor& output, const at::Tensor& first_idx,
                                             bool log) {
  check_defined("segment_softmax_backward", "grad_output", grad_output);
  check_data_and_first_idx("segment_softmax_backward", output, first_idx);
  return SegmentSoftmaxBackward::apply(grad_output, output, first_idx, log);
}

std::tuple<at::Tensor, at::Tensor> ragged_index_select_autograd(
    const at::Tensor& values, const at::Tensor& first_idx, const at::Tensor& index,
    std::optional<c10::SymInt> num_rows) {
  check_defined("ragged_index_select", "values", values);
  check_defined("ragged_index_select", "first_idx", first_idx);
  check_defined("ragged_index_select", "index", index);
  const variable_list out = RaggedIndexSelect::apply(values, first_idx, index, std::move(num_rows));
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("segment_sum", &segment_sum_autograd);
  m.impl("segment_expand", &segment_expand_autograd);
  m.impl("segment_mean", &segment_mean_autograd);
  m.impl("segment_max", &segment_extremum_autograd<true>);
  m.impl("segment_min", &segment_extremum_autograd<false>);
  m.impl("segment_softmax", &segment_softmax_autograd<false>);
  m.impl("segment_log_softmax", &segment_softmax_autograd<true>);
  m.impl("segment_softmax_backward", &segment_softmax_backward_autograd);
  m.impl("ragged_index_select", &ragged_index_select_autograd);
}

}  // namespace torch_ragged
