// Autograd of the index-mode kernels. pad_index and pad_index_backward are adjoint linear maps,
// so each one's backward is the other (double backward for free); the gradient of constant_values
// is the sum of the gradient over the region each value fills.

#include <ATen/ExpandUtils.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "common/autograd.h"
#include "common/checks.h"
#include "pad/pad_ops.h"
#include "pad/pad_plan.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// d(out)/d(constant_values): entry (k, side) sums grad over the padding of axis k on that side,
// restricted to the interior of the later axes (numpy pads axis k after the earlier axes, and the
// later axes overwrite it), which is exactly where that value lands.
at::Tensor constant_values_grad(const at::Tensor& grad, const std::vector<c10::SymInt>& pad_width) {
  const int64_t ndim = grad.dim();
  at::Tensor region = grad;  // axes after k narrowed to the input, built from the last axis down
  std::vector<at::Tensor> rows(ndim);
  for (int64_t k = ndim - 1; k >= 0; --k) {
    const c10::SymInt& before = pad_width[2 * k];
    const c10::SymInt& after = pad_width[2 * k + 1];
    const c10::SymInt length = region.sym_size(k);
    rows[k] = at::stack({region.narrow_symint(k, 0, before).sum(),
                         region.narrow_symint(k, length - after, after).sum()});
    region = region.narrow_symint(k, before, length - before - after);
  }
  return at::stack(rows);
}

class PadIndex : public torch::autograd::Function<PadIndex> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self,
                            c10::SymIntArrayRef pad_width, c10::string_view mode,
                            const std::optional<at::Tensor>& constant_values) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->saved_data["pad_width"] = pad_width.vec();
    ctx->saved_data["mode"] = std::string(mode);
    if (constant_values.has_value()) {
      ctx->saved_data["values_sizes"] = constant_values->sym_sizes();
      ctx->saved_data["values_like"] = at::empty({0}, constant_values->options());
    }
    return ops::pad_index(self, pad_width, mode, constant_values);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<PadIndex>();
    const std::vector<c10::SymInt> pad_width = ctx->saved_data["pad_width"].toSymIntVector();
    const std::string mode = ctx->saved_data["mode"].toStringRef();
    at::Tensor grad_self, grad_values;
    if (ctx->needs_input_grad(0)) grad_self = ops::pad_index_backward(grads[0], pad_width, mode);
    if (ctx->saved_data.count("values_like") && ctx->needs_input_grad(1)) {  // edge 1: values
      const at::Tensor like = ctx->saved_data["values_like"].toTensor();
      const at::Tensor table = constant_values_grad(grads[0], pad_width).to(like.options());
      grad_values = at::sum_to(table, ctx->saved_data["values_sizes"].toSymIntVector());
    }
    return {grad_self, at::Tensor(), at::Tensor(), grad_values};
  }
};

class PadIndexBackward : public torch::autograd::Function<PadIndexBackward> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_output,
                            c10::SymIntArrayRef pad_width, c10::string_view mode) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->saved_data["pad_width"] = pad_width.vec();
    ctx->saved_data["mode"] = std::string(mode);
    return ops::pad_index_backward(grad_output, pad_width, mode);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<PadIndexBackward>();
    const std::vector<c10::SymInt> pad_width = ctx->saved_data["pad_width"].toSymIntVector();
    const std::string mode = ctx->saved_data["mode"].toStringRef();
    // The adjoint of "take the interior" (constant and empty modes) is "pad with zeros".
    const bool reads_padding = parse_pad_mode("pad_index_backward", mode) != PadMode::kEmpty;
    const at::Tensor grad =
        ops::pad_index(grads[0], pad_width, reads_padding ? mode : "constant", std::nullopt);
    return {grad, at::Tensor(), at::Tensor()};
  }
};

at::Tensor pad_index_autograd(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                              c10::string_view mode,
                              const std::optional<at::Tensor>& constant_values) {
  torch_ragged::check_defined("pad_index", "self", self);
  if (!records_graph(self, constant_values)) {
    at::AutoDispatchBelowAutograd guard;
    return ops::pad_index(self, pad_width, mode, constant_values);
  }
  return PadIndex::apply(self, pad_width, mode, constant_values);
}

at::Tensor pad_index_backward_autograd(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                                       c10::string_view mode) {
  torch_ragged::check_defined("pad_index_backward", "grad_output", grad_output);
  return PadIndexBackward::apply(grad_output, pad_width, mode);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("pad_index", &pad_index_autograd);
  m.impl("pad_index_backward", &pad_index_backward_autograd);
}

}  // namespace torch_ragged
