// Autograd of the sparse family's kernel ops (the composite ops differentiate through their parts).
// sparse_coalesce: each output value is a sum of input values, so each input's gradient is the
// gradient of the run it joined: segment_expand over the runs, put back in input order through the
// permutation (a permutation: every row written once, deterministic, and differentiable again).

#include <torch/autograd.h>
#include <torch/library.h>

#include "common/autograd.h"
#include "common/checks.h"
#include "segment/segment_ops.h"
#include "sparse/sparse_ops.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class SparseCoalesce : public torch::autograd::Function<SparseCoalesce> {
 public:
  // order_for_backward: the values need a gradient, so the order is computed whatever the caller
  // asked for (and returned only if it asked).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& indices,
                               const at::Tensor& values, c10::SymIntArrayRef size, bool validate,
                               bool return_order, bool order_for_backward) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_indices, out_values, permutation, first_idx] =
        ops::sparse_coalesce(indices, values, size, validate, return_order || order_for_backward);
    ctx->save_for_backward({permutation, first_idx});
    ctx->saved_data["nnz"] = values.sym_size(0);
    if (!return_order) {
      permutation = at::empty({0}, permutation.options());
      first_idx = at::empty({0}, first_idx.options());
    }
    ctx->mark_non_differentiable({out_indices, permutation, first_idx});
    return {out_indices, out_values, permutation, first_idx};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SparseCoalesce>();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &permutation = saved[0], &first_idx = saved[1];
    const at::Tensor expanded =
        ops::segment_expand(grads[1], first_idx, ctx->saved_data["nnz"].toSymInt());
    return {at::Tensor(), at::index_copy(at::empty_like(expanded), 0, permutation, expanded),
            at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_coalesce_autograd(
    const at::Tensor& indices, const at::Tensor& values, c10::SymIntArrayRef size, bool validate,
    bool return_order) {
  check_defined("sparse_coalesce", "indices", indices);
  check_defined("sparse_coalesce", "values", values);
  const bool order_for_backward = at::GradMode::is_enabled() && values.requires_grad();
  const variable_list out =
      SparseCoalesce::apply(indices, values, size, validate, return_order, order_for_backward);
  return {out[0], out[1], out[2], out[3]};
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("sparse_coalesce", &sparse_coalesce_autograd);
}

}  // namespace torch_ragged
