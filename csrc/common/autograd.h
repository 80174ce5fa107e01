#pragma once

// Undefined in, undefined out: a gradient nothing downstream produced stays undefined (None in
// Python) instead of becoming a tensor of zeros, as torch's own functions do (gradcheck checks it,
// and a materialised zero of a sparse or large output costs memory and time). A Function opts in
// with keep_undefined_grads(ctx) in forward and starts its backward with
//   if (all_undefined(grads)) return undefined_grads<Self>();
// Each Function here has one differentiable output, so past that line its gradient is defined.

#include <c10/util/TypeTraits.h>
#include <torch/autograd.h>

#include <algorithm>

namespace torch_ragged {

inline void keep_undefined_grads(torch::autograd::AutogradContext* ctx) {
  ctx->set_materialize_grads(false);
}

inline bool all_undefined(const torch::autograd::variable_list& grads) {
  return std::none_of(grads.begin(), grads.end(), [](const at::Tensor& g) { return g.defined(); });
}

// One undefined gradient per argument of Function::forward (after the context). A TensorList
// argument counts once here; autograd accepts extra undefined gradients, not fewer, so Functions
// taking a list size theirs themselves.
template <typename Function>
torch::autograd::variable_list undefined_grads() {
  using Traits = c10::guts::infer_function_traits_t<decltype(&Function::forward)>;
  return torch::autograd::variable_list(Traits::number_of_parameters - 1);
}

}  // namespace torch_ragged
