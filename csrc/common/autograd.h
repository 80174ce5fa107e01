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

// Whether a call must record a graph node: grad mode on and one of its differentiable inputs
// requiring grad. When not, the autograd kernels call their op below autograd directly (as torch's
// own custom-op autograd does): a Function node and its saved tensors would only cost time, a good
// part of a small op's per-call cost.
inline bool input_requires_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }
inline bool input_requires_grad(const std::optional<at::Tensor>& t) {
  return t.has_value() && input_requires_grad(*t);
}
template <typename... Inputs>
bool records_graph(const Inputs&... differentiable_inputs) {
  return at::GradMode::is_enabled() && (input_requires_grad(differentiable_inputs) || ...);
}

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
