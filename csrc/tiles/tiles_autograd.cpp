// Autograd of the tiles ops (Autograd dispatch key). Each backward is the adjoint op, so double
// backward comes from the same code:
//   tiles_to_dense(reduce="first") <-> dense_to_tiles(owned_only=True)  (a point's gradient goes to
//                                                                         its owner only)
//   tiles_to_dense(reduce="sum")   <-> dense_to_tiles(owned_only=False)
//   tiles_halo                     <-> tiles_halo_backward (fill 0)
//   tiles_depthwise_correlate: itself with the flipped kernel (input), segment_sum per tap (weight)
// fill_value is a constant: no gradient.

#include <torch/autograd.h>
#include <torch/library.h>

#include "common/autograd.h"
#include "common/checks.h"
#include "segment/segment_ops.h"
#include "tiles/tiles_ops.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void save_tile_set(AutogradContext* ctx, const at::Tensor& origins,
                   const std::optional<at::Tensor>& tile_first_idx,
                   const std::optional<at::TensorList>& index) {
  ctx->saved_data["origins"] = origins;
  ctx->saved_data["tile_first_idx"] = tile_first_idx;
  if (index.has_value()) ctx->saved_data["index"] = index->vec();
}

struct SavedTiles {
  at::Tensor origins;
  std::optional<at::Tensor> tile_first_idx;
  std::vector<at::Tensor> index;
  bool has_index;
  std::optional<at::TensorList> index_arg() const {
    return has_index ? std::optional<at::TensorList>(index) : std::nullopt;
  }
};

SavedTiles saved_tiles(AutogradContext* ctx) {
  SavedTiles s;
  s.origins = ctx->saved_data["origins"].toTensor();
  s.tile_first_idx = ctx->saved_data["tile_first_idx"].toOptional<at::Tensor>();
  s.has_index = ctx->saved_data.count("index") > 0;
  if (s.has_index) s.index = ctx->saved_data["index"].toTensorVector();
  return s;
}

// pages' tile dims, one per origin column. Concrete, but read one dim at a time: dim 0 (the tile
// count) may be a data-dependent size under torch.compile, and size(d) / sizes() would guard on it.
std::vector<int64_t> tile_sizes(const at::Tensor& pages, const at::Tensor& origins) {
  const int64_t dims = origins.sym_size(1).guard_int(__FILE__, __LINE__);
  std::vector<int64_t> tile;
  for (int64_t d = 1; d <= dims; ++d)
    tile.push_back(pages.sym_size(d).guard_int(__FILE__, __LINE__));
  return tile;
}

std::vector<int64_t> ints(AutogradContext* ctx, const char* key) {
  return ctx->saved_data[key].toIntVector();
}

class TilesToDense : public torch::autograd::Function<TilesToDense> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& pages,
                            const at::Tensor& origins, at::IntArrayRef full_min,
                            at::IntArrayRef full_max, const at::Scalar& fill_value,
                            c10::string_view reduce,
                            const std::optional<at::Tensor>& tile_first_idx,
                            std::optional<at::TensorList> index) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::tiles_to_dense(pages, origins, full_min, full_max, fill_value, reduce,
                                         tile_first_idx, index);
    save_tile_set(ctx, origins, tile_first_idx, index);
    ctx->saved_data["full_min"] = full_min.vec();
    ctx->saved_data["tile"] = tile_sizes(pages, origins);
    ctx->saved_data["first"] = reduce == "first";
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<TilesToDense>();
    const SavedTiles s = saved_tiles(ctx);
    const at::Tensor grad_pages =
        ops::dense_to_tiles(grads[0], s.origins, ints(ctx, "tile"), ints(ctx, "full_min"), 0,
                            ctx->saved_data["first"].toBool(), s.tile_first_idx, s.index_arg());
    return {grad_pages, {}, {}, {}, {}, {}, {}, {}};
  }
};

class DenseToTiles : public torch::autograd::Function<DenseToTiles> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& dense,
                            const at::Tensor& origins, at::IntArrayRef tile_size,
                            at::IntArrayRef full_min, const at::Scalar& fill_value, bool owned_only,
                            const std::optional<at::Tensor>& tile_first_idx,
                            std::optional<at::TensorList> index) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::dense_to_tiles(dense, origins, tile_size, full_min, fill_value,
                                         owned_only, tile_first_idx, index);
    save_tile_set(ctx, origins, tile_first_idx, index);
    const int64_t lead = tile_first_idx.has_value() && tile_first_idx->defined() ? 1 : 0;
    std::vector<int64_t> full_max(full_min.begin(), full_min.end());
    for (size_t d = 0; d < full_max.size(); ++d)
      full_max[d] += dense.sym_size(lead + static_cast<int64_t>(d)).guard_int(__FILE__, __LINE__);
    ctx->saved_data["full_min"] = full_min.vec();
    ctx->saved_data["full_max"] = full_max;
    ctx->saved_data["owned_only"] = owned_only;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<DenseToTiles>();
    const SavedTiles s = saved_tiles(ctx);
    const bool owned_only = ctx->saved_data["owned_only"].toBool();
    const at::Tensor grad_dense =
        ops::tiles_to_dense(grads[0], s.origins, ints(ctx, "full_min"), ints(ctx, "full_max"), 0,
                            owned_only ? "first" : "sum", s.tile_first_idx, s.index_arg());
    return {grad_dense, {}, {}, {}, {}, {}, {}, {}};
  }
};

// What tiles_halo and tiles_halo_backward (each the other's backward) keep for their backward.
void save_halo_args(AutogradContext* ctx, const at::Tensor& origins, at::IntArrayRef radius,
                    at::IntArrayRef full_min, at::IntArrayRef full_max,
                    const std::optional<at::Tensor>& tile_first_idx,
                    const std::optional<at::TensorList>& index) {
  save_tile_set(ctx, origins, tile_first_idx, index);
  ctx->saved_data["radius"] = radius.vec();
  ctx->saved_data["full_min"] = full_min.vec();
  ctx->saved_data["full_max"] = full_max.vec();
}

class TilesHalo : public torch::autograd::Function<TilesHalo> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& pages,
                            const at::Tensor& origins, at::IntArrayRef radius,
                            at::IntArrayRef full_min, at::IntArrayRef full_max,
                            const at::Scalar& fill_value,
                            const std::optional<at::Tensor>& tile_first_idx,
                            std::optional<at::TensorList> index) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::tiles_halo(pages, origins, radius, full_min, full_max, fill_value,
                                     tile_first_idx, index);
    save_halo_args(ctx, origins, radius, full_min, full_max, tile_first_idx, index);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<TilesHalo>();
    const SavedTiles s = saved_tiles(ctx);
    const at::Tensor grad_pages =
        ops::tiles_halo_backward(grads[0], s.origins, ints(ctx, "radius"), ints(ctx, "full_min"),
                                 ints(ctx, "full_max"), s.tile_first_idx, s.index_arg());
    return {grad_pages, {}, {}, {}, {}, {}, {}, {}};
  }
};

// tiles_halo_backward is linear in grad_halo with tiles_halo (fill 0) as its adjoint, so each is
// the other's backward and higher derivatives come free.
class TilesHaloBackward : public torch::autograd::Function<TilesHaloBackward> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_halo,
                            const at::Tensor& origins, at::IntArrayRef radius,
                            at::IntArrayRef full_min, at::IntArrayRef full_max,
                            const std::optional<at::Tensor>& tile_first_idx,
                            std::optional<at::TensorList> index) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::tiles_halo_backward(grad_halo, origins, radius, full_min, full_max,
                                              tile_first_idx, index);
    save_halo_args(ctx, origins, radius, full_min, full_max, tile_first_idx, index);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<TilesHaloBackward>();
    const SavedTiles s = saved_tiles(ctx);
    const at::Tensor grad_halo =
        ops::tiles_halo(grads[0], s.origins, ints(ctx, "radius"), ints(ctx, "full_min"),
                        ints(ctx, "full_max"), 0, s.tile_first_idx, s.index_arg());
    return {grad_halo, {}, {}, {}, {}, {}, {}};
  }
};

at::Tensor tiles_to_dense_autograd(const at::Tensor& pages, const at::Tensor& origins,
                                   at::IntArrayRef full_min, at::IntArrayRef full_max,
                                   const at::Scalar& fill_value, c10::string_view reduce,
                                   const std::optional<at::Tensor>& tile_first_idx,
                                   std::optional<at::TensorList> index) {
  check_defined("tiles_to_dense", "pages", pages);
  check_index_tensor("tiles_to_dense", "origins", origins, 2);
  return TilesToDense::apply(pages, origins, full_min, full_max, fill_value, reduce, tile_first_idx,
                             index);
}

at::Tensor dense_to_tiles_autograd(const at::Tensor& dense, const at::Tensor& origins,
                                   at::IntArrayRef tile_size, at::IntArrayRef full_min,
                                   const at::Scalar& fill_value, bool owned_only,
                                   const std::optional<at::Tensor>& tile_first_idx,
                                   std::optional<at::TensorList> index) {
  check_defined("dense_to_tiles", "dense", dense);
  check_defined("dense_to_tiles", "origins", origins);
  return DenseToTiles::apply(dense, origins, tile_size, full_min, fill_value, owned_only,
                             tile_first_idx, index);
}

// tiles_depthwise_correlate (out[o] = sum_k weight[k] input[o + k - p]): the input gradient is
// the full correlation with the flipped kernel, the same op with padding K - 1 - p, so double
// backward comes from this Function again. The weight gradient is a fixed-order sum: for each tap
// k, the segment_sum (the segment core's thread-count-independent order) of grad times the
// (zero-padded) input shifted by k over all N * out points — torch's own depthwise weight
// gradient reduces in an order that depends on the thread count.
class DepthwiseCorrelate : public torch::autograd::Function<DepthwiseCorrelate> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            at::IntArrayRef padding) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({input, weight});
    ctx->saved_data["padding"] = padding.vec();
    return ops::tiles_depthwise_correlate(input, weight, padding);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<DepthwiseCorrelate>();
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1], &grad = grads[0];
    const std::vector<int64_t> padding = ctx->saved_data["padding"].toIntVector();
    const int64_t dims = weight.dim() - 1;
    at::Tensor grad_input, grad_weight;
    if (ctx->needs_input_grad(0)) {
      std::vector<int64_t> taps(dims), full(dims);
      for (int64_t d = 0; d < dims; ++d) {
        taps[d] = d;
        full[d] = weight.size(d) - 1 - padding[d];
      }
      grad_input = ops::tiles_depthwise_correlate(grad, weight.flip(taps), full);
    }
    if (ctx->needs_input_grad(1)) grad_weight = weight_gradient(input, weight, grad, padding);
    return {grad_input, grad_weight, at::Tensor()};
  }

 private:
  static at::Tensor weight_gradient(const at::Tensor& input, const at::Tensor& weight,
                                    const at::Tensor& grad, at::IntArrayRef padding) {
    const int64_t dims = weight.dim() - 1, channels = weight.size(dims);
    std::vector<int64_t> pad{0, 0};  // channels, then the spatial dims from the last
    for (int64_t d = dims - 1; d >= 0; --d) pad.insert(pad.end(), {padding[d], padding[d]});
    const at::Tensor padded = at::constant_pad_nd(input, pad, 0);
    // Every tap sums the same rows (N * output points) as one segment.
    c10::SymInt num_rows = grad.sym_size(0);
    for (int64_t d = 0; d < dims; ++d) num_rows *= grad.sym_size(1 + d);
    const at::Tensor first_idx =
        at::arange(2, grad.options().dtype(at::kLong)).mul(c10::Scalar(num_rows));
    const int64_t num_taps = c10::multiply_integers(weight.sizes().slice(0, dims));
    std::vector<at::Tensor> sums;
    sums.reserve(num_taps);
    for (int64_t k = 0; k < num_taps; ++k) {
      at::Tensor shifted = padded;
      for (int64_t d = dims - 1, rest = k; d >= 0; rest /= weight.size(d), --d) {
        shifted = shifted.narrow_symint(1 + d, rest % weight.size(d), grad.sym_size(1 + d));
      }
      sums.push_back(ops::segment_sum((grad * shifted).reshape({-1, channels}), first_idx));
    }
    return at::cat(sums).reshape(weight.sizes());
  }
};

at::Tensor tiles_depthwise_correlate_autograd(const at::Tensor& input, const at::Tensor& weight,
                                              at::IntArrayRef padding) {
  check_defined("tiles_depthwise_correlate", "input", input);
  check_defined("tiles_depthwise_correlate", "weight", weight);
  return DepthwiseCorrelate::apply(input, weight, padding);
}

at::Tensor tiles_halo_autograd(const at::Tensor& pages, const at::Tensor& origins,
                               at::IntArrayRef radius, at::IntArrayRef full_min,
                               at::IntArrayRef full_max, const at::Scalar& fill_value,
                               const std::optional<at::Tensor>& tile_first_idx,
                               std::optional<at::TensorList> index) {
  check_defined("tiles_halo", "pages", pages);
  check_index_tensor("tiles_halo", "origins", origins, 2);
  return TilesHalo::apply(pages, origins, radius, full_min, full_max, fill_value, tile_first_idx,
                          index);
}

at::Tensor tiles_halo_backward_autograd(const at::Tensor& grad_halo, const at::Tensor& origins,
                                        at::IntArrayRef radius, at::IntArrayRef full_min,
                                        at::IntArrayRef full_max,
                                        const std::optional<at::Tensor>& tile_first_idx,
                                        std::optional<at::TensorList> index) {
  check_defined("tiles_halo_backward", "grad_halo", grad_halo);
  check_index_tensor("tiles_halo_backward", "origins", origins, 2);
  return TilesHaloBackward::apply(grad_halo, origins, radius, full_min, full_max, tile_first_idx,
                                  index);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("tiles_to_dense", &tiles_to_dense_autograd);
  m.impl("dense_to_tiles", &dense_to_tiles_autograd);
  m.impl("tiles_halo", &tiles_halo_autograd);
  m.impl("tiles_halo_backward", &tiles_halo_backward_autograd);
  m.impl("tiles_depthwise_correlate", &tiles_depthwise_correlate_autograd);
}

}  // namespace torch_ragged
