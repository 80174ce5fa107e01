// Autograd of the batch family (Autograd dispatch key), so C++ and TorchScript callers get
// gradients too. Each backward calls the family's own ops, which are differentiable in turn: that
// gives double backward. Pairs: packed_to_padded <-> padded_to_packed, list_to_packed <->
// packed_to_list, list_to_padded <-> padded_to_list. tile_to_packed is composite (segment_expand).
// Gradients never flow into padding: the backward kernels only read the data region.

#include <torch/autograd.h>
#include <torch/library.h>

#include "batch/batch_ops.h"
#include "common/autograd.h"
#include "common/checks.h"
#include "segment/segment_ops.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Gradients for a Function's non-tensor and index-tensor inputs.
variable_list with_undefined_tail(variable_list grads, size_t tail) {
  grads.resize(grads.size() + tail);
  return grads;
}

// first_idx of the packed layout that shape_per_tensor describes.
at::Tensor first_idx_of(const at::Tensor& shape_per_tensor) {
  return ops::get_first_idx(shape_per_tensor.prod(/*dim=*/1));
}

class ListToPacked : public torch::autograd::Function<ListToPacked> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList tensor_list) {
    keep_undefined_grads(ctx);
    ctx->saved_data["members"] = static_cast<int64_t>(tensor_list.size());  // one gradient each
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [packed, shape_per_tensor] = ops::list_to_packed(tensor_list);
    ctx->save_for_backward({shape_per_tensor});
    ctx->mark_non_differentiable({shape_per_tensor});
    return {packed, shape_per_tensor};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return variable_list(ctx->saved_data["members"].toInt());
    const at::Tensor shape_per_tensor = ctx->get_saved_variables()[0];
    return ops::packed_to_list(grads[0], shape_per_tensor, first_idx_of(shape_per_tensor));
  }
};

class ListToPadded : public torch::autograd::Function<ListToPadded> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList tensor_list,
                               const at::Scalar& padding_value,
                               at::OptionalSymIntArrayRef max_shape,
                               c10::string_view padding_side) {
    keep_undefined_grads(ctx);
    ctx->saved_data["members"] = static_cast<int64_t>(tensor_list.size());  // one gradient each
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [padded, shape_per_tensor] =
        ops::list_to_padded(tensor_list, padding_value, max_shape, padding_side);
    ctx->save_for_backward({shape_per_tensor});
    ctx->saved_data["padding_side"] = std::string(padding_side);
    ctx->mark_non_differentiable({shape_per_tensor});
    return {padded, shape_per_tensor};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return variable_list(ctx->saved_data["members"].toInt() + 3);
    const std::string side = ctx->saved_data["padding_side"].toStringRef();
    return with_undefined_tail(ops::padded_to_list(grads[0], ctx->get_saved_variables()[0], side),
                               3);
  }
};

class PackedToPadded : public torch::autograd::Function<PackedToPadded> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& packed_tensor,
                            const at::Tensor& shape_per_tensor, const at::Tensor& first_idx,
                            const at::Scalar& padding_value, at::OptionalSymIntArrayRef max_shape,
                            c10::string_view padding_side) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    // The op validates its arguments before anything here reads their sizes.
    at::Tensor padded = ops::packed_to_padded(packed_tensor, shape_per_tensor, first_idx,
                                              padding_value, max_shape, padding_side);
    ctx->save_for_backward({shape_per_tensor});
    ctx->saved_data["padding_side"] = std::string(padding_side);
    ctx->saved_data["num_rows"] = packed_tensor.sym_size(0);
    return padded;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<PackedToPadded>();
    const std::string side = ctx->saved_data["padding_side"].toStringRef();
    at::Tensor grad = ops::padded_to_packed(grads[0], ctx->get_saved_variables()[0], side,
                                            ctx->saved_data["num_rows"].toSymInt());
    return with_undefined_tail({grad}, 5);
  }
};

class PaddedToPacked : public torch::autograd::Function<PaddedToPacked> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& padded_tensor,
                            const at::Tensor& shape_per_tensor, c10::string_view padding_side,
                            std::optional<c10::SymInt> num_rows) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    // The op validates its arguments (padded_tensor's rank) before its sizes are sliced here.
    at::Tensor packed =
        ops::padded_to_packed(padded_tensor, shape_per_tensor, padding_side, std::move(num_rows));
    ctx->save_for_backward({shape_per_tensor});
    ctx->saved_data["padding_side"] = std::string(padding_side);
    const auto sizes = padded_tensor.sym_sizes();
    ctx->saved_data["max_shape"] = std::vector<c10::SymInt>(sizes.begin() + 1, sizes.end() - 1);
    return packed;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<PaddedToPacked>();
    const std::string side = ctx->saved_data["padding_side"].toStringRef();
    const std::vector<c10::SymInt> max_shape = ctx->saved_data["max_shape"].toSymIntVector();
    const at::Tensor shape_per_tensor = ctx->get_saved_variables()[0];
    at::Tensor grad = ops::packed_to_padded(grads[0], shape_per_tensor,
                                            first_idx_of(shape_per_tensor), 0, max_shape, side);
    return with_undefined_tail({grad}, 3);
  }
};

std::tuple<at::Tensor, at::Tensor> list_to_packed_autograd(at::TensorList tensor_list) {
  const variable_list out = ListToPacked::apply(tensor_list);
  return {out[0], out[1]};
}

std::tuple<at::Tensor, at::Tensor> list_to_padded_autograd(at::TensorList tensor_list,
                                                           const at::Scalar& padding_value,
                                                           at::OptionalSymIntArrayRef max_shape,
                                                           c10::string_view padding_side) {
  const variable_list out =
      ListToPadded::apply(tensor_list, padding_value, max_shape, padding_side);
  return {out[0], out[1]};
}

at::Tensor packed_to_padded_autograd(const at::Tensor& packed_tensor,
                                     const at::Tensor& shape_per_tensor,
                                     const at::Tensor& first_idx, const at::Scalar& padding_value,
                                     at::OptionalSymIntArrayRef max_shape,
                                     c10::string_view padding_side) {
  check_defined("packed_to_padded", "packed_tensor", packed_tensor);
  check_defined("packed_to_padded", "shape_per_tensor", shape_per_tensor);
  check_defined("packed_to_padded", "first_idx", first_idx);
  return PackedToPadded::apply(packed_tensor, shape_per_tensor, first_idx, padding_value, max_shape,
                               padding_side);
}

at::Tensor padded_to_packed_autograd(const at::Tensor& padded_tensor,
                                     const at::Tensor& shape_per_tensor,
                                     c10::string_view padding_side,
                                     std::optional<c10::SymInt> num_rows) {
  check_defined("padded_to_packed", "padded_tensor", padded_tensor);
  check_defined("padded_to_packed", "shape_per_tensor", shape_per_tensor);
  return PaddedToPacked::apply(padded_tensor, shape_per_tensor, padding_side, std::move(num_rows));
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("list_to_packed", &list_to_packed_autograd);
  m.impl("list_to_padded", &list_to_padded_autograd);
  m.impl("packed_to_padded", &packed_to_padded_autograd);
  m.impl("padded_to_packed", &padded_to_packed_autograd);
}

}  // namespace torch_ragged
