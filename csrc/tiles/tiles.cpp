// Schemas of the tiles family, its composite ops (correlate, from_dense) and its C++ API.
//
// Tiles: pages (T, *tile_size, *F) with origins (T, d) in a bound [full_min, full_max), d = 1..3;
// reading the field at a point takes the first tile covering it (or the fill value). The movers
// tiles_to_dense / dense_to_tiles are each other's adjoints (autograd in tiles_autograd.cpp).

#include <torch/library.h>
#include <torch_ragged/tiles.h>

#include <cmath>

#include "common/checks.h"
#include "common/fill.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "tiles/tiles_args.h"
#include "tiles/tiles_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(
      "tiles_index(Tensor origins, int[] tile_size, int[] full_min, int[] full_max, "
      "Tensor? tile_first_idx=None) -> (Tensor keys, Tensor first, Tensor tiles, "
      "Tensor fingerprint)",
      tags);
  m.def(
      "tiles_to_dense(Tensor pages, Tensor origins, int[] full_min, int[] full_max, "
      "Scalar fill_value=0, str reduce=\"first\", Tensor? tile_first_idx=None, "
      "Tensor[]? index=None) -> Tensor",
      tags);
  m.def(
      "dense_to_tiles(Tensor dense, Tensor origins, int[] tile_size, int[] full_min, "
      "Scalar fill_value=0, bool owned_only=False, Tensor? tile_first_idx=None, "
      "Tensor[]? index=None) -> Tensor",
      tags);
  m.def(
      "tiles_halo(Tensor pages, Tensor origins, int[] radius, int[] full_min, int[] full_max, "
      "Scalar fill_value=0, Tensor? tile_first_idx=None, Tensor[]? index=None) -> Tensor",
      tags);
  m.def(
      "tiles_halo_backward(Tensor grad_halo, Tensor origins, int[] radius, int[] full_min, "
      "int[] full_max, Tensor? tile_first_idx=None, Tensor[]? index=None) -> Tensor",
      tags);
  m.def(
      "tiles_lookup(Tensor origins, int[] tile_size, Tensor coords, int[] full_min, "
      "int[] full_max, Tensor? tile_first_idx=None, Tensor[]? index=None) "
      "-> (Tensor tile, Tensor local)",
      tags);
  m.def(
      "tiles_correlate(Tensor pages, Tensor origins, Tensor weight, int[] full_min, "
      "int[] full_max, Scalar fill_value=0, str out=\"tiles\", Tensor? tile_first_idx=None, "
      "Tensor[]? index=None) -> Tensor",
      tags);
  // The depthwise correlation inside tiles_correlate, channels last: input (N, *S, C), weight
  // (*K, C), zero padding p (0 <= p < K) -> (N, *(S + 2p - K + 1), C), every element one fixed sum.
  m.def("tiles_depthwise_correlate(Tensor input, Tensor weight, int[] padding) -> Tensor", tags);
  m.def(
      "tiles_from_dense(Tensor dense, int[] tile_size, Scalar fill_value=0, "
      "int[]? full_min=None) -> (Tensor pages, Tensor origins)",
      tags);
}

// The ops with CPU / CUDA kernels (the rest are composites of them).
constexpr const char* kKernelOps[] = {"tiles_to_dense", "dense_to_tiles",
                                      "tiles_halo",     "tiles_halo_backward",
                                      "tiles_lookup",   "tiles_depthwise_correlate"};

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kKernelOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kKernelOps);
}

namespace ops {

using Tensor = at::Tensor;
using Ints = at::IntArrayRef;

std::tuple<Tensor, Tensor, Tensor, Tensor> tiles_index(const Tensor& origins, Ints tile_size,
                                                       Ints full_min, Ints full_max,
                                                       const OptionalTensor& tile_first_idx) {
  static auto op = op_handle<std::tuple<Tensor, Tensor, Tensor, Tensor>(
      const Tensor&, Ints, Ints, Ints, const OptionalTensor&)>("torch_ragged::tiles_index");
  return op.call(origins, tile_size, full_min, full_max, tile_first_idx);
}

Tensor tiles_to_dense(const Tensor& pages, const Tensor& origins, Ints full_min, Ints full_max,
                      const at::Scalar& fill_value, c10::string_view reduce,
                      const OptionalTensor& tile_first_idx, OptionalTensors index) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, Ints, Ints, const at::Scalar&,
                                    c10::string_view, const OptionalTensor&, OptionalTensors)>(
      "torch_ragged::tiles_to_dense");
  return op.call(pages, origins, full_min, full_max, fill_value, reduce, tile_first_idx, index);
}

Tensor dense_to_tiles(const Tensor& dense, const Tensor& origins, Ints tile_size, Ints full_min,
                      const at::Scalar& fill_value, bool owned_only,
                      const OptionalTensor& tile_first_idx, OptionalTensors index) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, Ints, Ints, const at::Scalar&, bool,
                       const OptionalTensor&, OptionalTensors)>("torch_ragged::dense_to_tiles");
  return op.call(dense, origins, tile_size, full_min, fill_value, owned_only, tile_first_idx,
                 index);
}

Tensor tiles_halo(const Tensor& pages, const Tensor& origins, Ints radius, Ints full_min,
                  Ints full_max, const at::Scalar& fill_value, const OptionalTensor& tile_first_idx,
                  OptionalTensors index) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, Ints, Ints, Ints, const at::Scalar&,
                       const OptionalTensor&, OptionalTensors)>("torch_ragged::tiles_halo");
  return op.call(pages, origins, radius, full_min, full_max, fill_value, tile_first_idx, index);
}

Tensor tiles_halo_backward(const Tensor& grad_halo, const Tensor& origins, Ints radius,
                           Ints full_min, Ints full_max, const OptionalTensor& tile_first_idx,
                           OptionalTensors index) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, Ints, Ints, Ints, const OptionalTensor&,
                       OptionalTensors)>("torch_ragged::tiles_halo_backward");
  return op.call(grad_halo, origins, radius, full_min, full_max, tile_first_idx, index);
}

std::tuple<Tensor, Tensor> tiles_lookup(const Tensor& origins, Ints tile_size, const Tensor& coords,
                                        Ints full_min, Ints full_max,
                                        const OptionalTensor& tile_first_idx,
                                        OptionalTensors index) {
  static auto op = op_handle<std::tuple<Tensor, Tensor>(
      const Tensor&, Ints, const Tensor&, Ints, Ints, const OptionalTensor&, OptionalTensors)>(
      "torch_ragged::tiles_lookup");
  return op.call(origins, tile_size, coords, full_min, full_max, tile_first_idx, index);
}

Tensor tiles_correlate(const Tensor& pages, const Tensor& origins, const Tensor& weight,
                       Ints full_min, Ints full_max, const at::Scalar& fill_value,
                       c10::string_view out, const OptionalTensor& tile_first_idx,
                       OptionalTensors index) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, const Tensor&, Ints, Ints, const at::Scalar&,
                       c10::string_view, const OptionalTensor&, OptionalTensors)>(
          "torch_ragged::tiles_correlate");
  return op.call(pages, origins, weight, full_min, full_max, fill_value, out, tile_first_idx,
                 index);
}

Tensor tiles_depthwise_correlate(const Tensor& input, const Tensor& weight, Ints padding) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, Ints)>(
      "torch_ragged::tiles_depthwise_correlate");
  return op.call(input, weight, padding);
}

std::tuple<Tensor, Tensor> tiles_from_dense(const Tensor& dense, Ints tile_size,
                                            const at::Scalar& fill_value,
                                            at::OptionalIntArrayRef full_min) {
  static auto op = op_handle<std::tuple<Tensor, Tensor>(const Tensor&, Ints, const at::Scalar&,
                                                        at::OptionalIntArrayRef)>(
      "torch_ragged::tiles_from_dense");
  return op.call(dense, tile_size, fill_value, full_min);
}

}  // namespace ops

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tiles_index_any(
    const at::Tensor& origins, at::IntArrayRef tile_size, at::IntArrayRef full_min,
    at::IntArrayRef full_max, const std::optional<at::Tensor>& tile_first_idx) {
  constexpr std::string_view op = "tiles_index";
  check_defined(op, "origins", origins);
  const TileGeometry geo = tile_geometry(op, tile_size, full_min, full_max);
  const TileSet set = tile_set(op, origins, geo.dims, tile_first_idx, origins.device());
  check_boxes_fit(op, geo, set);
  CellIndex cells = build_cell_index(geo, set);
  return {cells.keys, cells.first, cells.tiles, index_fingerprint(geo, set)};
}

at::Tensor tiles_correlate_composite(const at::Tensor& pages, const at::Tensor& origins,
                                     const at::Tensor& weight, at::IntArrayRef full_min,
                                     at::IntArrayRef full_max, const at::Scalar& fill_value,
                                     c10::string_view out,
                                     const std::optional<at::Tensor>& tile_first_idx,
                                     std::optional<at::TensorList> index) {
  constexpr std::string_view op = "tiles_correlate";
  check_index_tensor(op, "origins", origins, 2);
  check_defined(op, "weight", weight);
  check_defined(op, "pages", pages);
  check_index_device(op, "origins", origins, pages.device());
  TORCH_CHECK_VALUE(weight.device() == pages.device(), "torch_ragged.", op,
                    ": weight must be on the pages' device ", pages.device(), ", got ",
                    weight.device());
  const int64_t dims = origins.size(1);
  const std::vector<int64_t> tile = page_tile_size(op, pages, dims);
  const at::IntArrayRef feature = pages.sizes().slice(1 + dims);
  TORCH_CHECK_TYPE(
      at::isFloatingType(pages.scalar_type()) && weight.scalar_type() == pages.scalar_type(),
      "torch_ragged.", op, ": pages and weight must share a floating dtype, got ",
      pages.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK_VALUE(weight.dim() == dims + static_cast<int64_t>(feature.size()) &&
                        weight.sizes().slice(dims) == feature,
                    "torch_ragged.", op, ": weight must be (*kernel (", dims,
                    " dims), *F = ", feature, "), got shape ", weight.sizes());
  std::vector<int64_t> radius(dims);
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK_VALUE(weight.size(d) % 2 == 1, "torch_ragged.", op,
                      ": the kernel must have an odd size in every dim (it is centred), got ",
                      weight.sizes().slice(0, dims));
    radius[d] = weight.size(d) / 2;
  }
  TORCH_CHECK_VALUE(out == "tiles" || out == "dense", "torch_ragged.", op,
                    ": out must be \"tiles\" or \"dense\", got \"", out, "\"");
  // half / bfloat16 correlate in float (float accumulation), then round once.
  const at::ScalarType compute =
      at::isReducedFloatingType(pages.scalar_type()) ? at::kFloat : pages.scalar_type();
  // Channels last throughout: the F feature dims flattened to C channels.
  const int64_t channels = c10::multiply_integers(feature);
  const auto channels_last = [&](const at::Tensor& t) {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().begin() + 1 + dims);
    shape.push_back(channels);
    return t.reshape(shape);
  };
  std::vector<int64_t> kernel_shape(weight.sizes().begin(), weight.sizes().begin() + dims);
  kernel_shape.push_back(channels);
  at::Tensor input;
  if (out == "tiles") {
    input = channels_last(as_op(op, [&] {
      return ops::tiles_halo(pages, origins, radius, full_min, full_max, fill_value, tile_first_idx,
                             index);
    }));
  } else {
    at::Tensor dense = as_op(op, [&] {
      return ops::tiles_to_dense(pages, origins, full_min, full_max, fill_value, "first",
                                 tile_first_idx, index);
    });
    if (!(tile_first_idx.has_value() && tile_first_idx->defined())) {
      dense = dense.unsqueeze(0);
    }
    std::vector<int64_t> pad{0, 0};  // channels, then the spatial dims from the last
    for (int64_t d = dims - 1; d >= 0; --d) pad.insert(pad.end(), {radius[d], radius[d]});
    input = at::constant_pad_nd(channels_last(dense), pad, fill_value);
  }
  at::Tensor result = ops::tiles_depthwise_correlate(
      input.to(compute), weight.reshape(kernel_shape).to(compute), std::vector<int64_t>(dims, 0));
  // back to (N, *spatial, *F)
  std::vector<int64_t> shape(result.sizes().begin(), result.sizes().end() - 1);
  shape.insert(shape.end(), feature.begin(), feature.end());
  result = result.reshape(shape).to(pages.scalar_type());
  if (out == "dense" && !(tile_first_idx.has_value() && tile_first_idx->defined())) {
    result = result.squeeze(0);
  }
  return result;
}

std::tuple<at::Tensor, at::Tensor> tiles_from_dense_composite(const at::Tensor& dense,
                                                              at::IntArrayRef tile_size,
                                                              const at::Scalar& fill_value,
                                                              at::OptionalIntArrayRef full_min) {
  constexpr std::string_view op = "tiles_from_dense";
  check_defined(op, "dense", dense);
  const int64_t dims = static_cast<int64_t>(tile_size.size());
  TORCH_CHECK_VALUE(dims >= 1 && dims <= kMaxTileDims && dense.dim() >= dims, "torch_ragged.", op,
                    ": tile_size must have 1 to 3 entries and dense at least as many dims, got ",
                    tile_size, " and shape ", dense.sizes());
  const std::vector<int64_t> lo =
      full_min.has_value() ? dim_list(op, "full_min", *full_min, dims) : std::vector<int64_t>(dims);
  std::vector<int64_t> hi(dims);
  for (int64_t d = 0; d < dims; ++d) hi[d] = lo[d] + dense.size(d);
  const TileGeometry geo = tile_geometry(op, tile_size, lo, hi);
  check_fill_value(op, "fill_value", fill_value, dense.scalar_type());
  // A point is active where it differs from the fill value (NaN fill: where it is not NaN).
  const bool nan_fill = fill_value.isFloatingPoint() && std::isnan(fill_value.toDouble());
  at::Tensor active = nan_fill ? dense.isnan().logical_not() : dense.ne(fill_value);
  if (dense.dim() > dims) active = active.flatten(dims).any(-1);
  std::vector<int64_t> pad, blocks;
  for (int64_t d = dims - 1; d >= 0; --d) {
    pad.insert(pad.end(), {0, geo.cells[d] * geo.tile[d] - geo.extent[d]});
  }
  for (int64_t d = 0; d < dims; ++d) blocks.insert(blocks.end(), {geo.cells[d], geo.tile[d]});
  at::Tensor cells = at::constant_pad_nd(active, pad, 0).reshape(blocks);
  for (int64_t d = dims - 1; d >= 0; --d) cells = cells.any(2 * d + 1);
  // origin = full_min + cell * tile, per column (scalar arithmetic: traceable by torch.compile)
  const at::Tensor occupied = at::nonzero(cells);
  std::vector<at::Tensor> columns;
  for (int64_t d = 0; d < dims; ++d)
    columns.push_back(occupied.select(1, d) * tile_size[d] + lo[d]);
  const at::Tensor origins = at::stack(columns, 1);
  return {ops::dense_to_tiles(dense, origins, tile_size, lo, fill_value, false, std::nullopt,
                              std::nullopt),
          origins};
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  m.impl("tiles_index", &tiles_index_any);  // ATen ops on origins' device: every backend
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("tiles_correlate", &tiles_correlate_composite);
  m.impl("tiles_from_dense", &tiles_from_dense_composite);
}

// ---- Public C++ API ----

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tiles_index(
    const at::Tensor& origins, at::IntArrayRef tile_size, at::IntArrayRef full_min,
    at::IntArrayRef full_max, const std::optional<at::Tensor>& tile_first_idx) {
  return ops::tiles_index(origins, tile_size, full_min, full_max, tile_first_idx);
}
at::Tensor tiles_to_dense(const at::Tensor& pages, const at::Tensor& origins,
                          at::IntArrayRef full_min, at::IntArrayRef full_max,
                          const at::Scalar& fill_value, std::string_view reduce,
                          const std::optional<at::Tensor>& tile_first_idx,
                          std::optional<at::TensorList> index) {
  return ops::tiles_to_dense(pages, origins, full_min, full_max, fill_value, reduce, tile_first_idx,
                             index);
}
at::Tensor dense_to_tiles(const at::Tensor& dense, const at::Tensor& origins,
                          at::IntArrayRef tile_size, at::IntArrayRef full_min,
                          const at::Scalar& fill_value, bool owned_only,
                          const std::optional<at::Tensor>& tile_first_idx,
                          std::optional<at::TensorList> index) {
  return ops::dense_to_tiles(dense, origins, tile_size, full_min, fill_value, owned_only,
                             tile_first_idx, index);
}
std::tuple<at::Tensor, at::Tensor> tiles_lookup(const at::Tensor& origins,
                                                at::IntArrayRef tile_size, const at::Tensor& coords,
                                                at::IntArrayRef full_min, at::IntArrayRef full_max,
                                                const std::optional<at::Tensor>& tile_first_idx,
                                                std::optional<at::TensorList> index) {
  return ops::tiles_lookup(origins, tile_size, coords, full_min, full_max, tile_first_idx, index);
}
at::Tensor tiles_correlate(const at::Tensor& pages, const at::Tensor& origins,
                           const at::Tensor& weight, at::IntArrayRef full_min,
                           at::IntArrayRef full_max, const at::Scalar& fill_value,
                           std::string_view out, const std::optional<at::Tensor>& tile_first_idx,
                           std::optional<at::TensorList> index) {
  return ops::tiles_correlate(pages, origins, weight, full_min, full_max, fill_value, out,
                              tile_first_idx, index);
}
at::Tensor tiles_box_filter(const at::Tensor& pages, const at::Tensor& origins,
                            at::IntArrayRef full_min, at::IntArrayRef full_max, int64_t size,
                            const at::Scalar& fill_value, std::string_view out) {
  TORCH_CHECK_VALUE(size >= 1 && size % 2 == 1, "torch_ragged.tiles_box_filter: size must be odd ",
                    "and >= 1, got ", size);
  const int64_t dims = origins.dim() == 2 ? origins.size(1) : 1;
  std::vector<int64_t> shape(dims, size);
  const auto feature = pages.sizes().slice(std::min<int64_t>(pages.dim(), 1 + dims));
  shape.insert(shape.end(), feature.begin(), feature.end());
  const double cells = std::pow(static_cast<double>(size), static_cast<double>(dims));
  const at::Tensor weight = at::full(shape, 1.0 / cells, pages.options());
  return tiles_correlate(pages, origins, weight, full_min, full_max, fill_value, out);
}
std::tuple<at::Tensor, at::Tensor> tiles_from_dense(const at::Tensor& dense,
                                                    at::IntArrayRef tile_size,
                                                    const at::Scalar& fill_value,
                                                    at::OptionalIntArrayRef full_min) {
  return ops::tiles_from_dense(dense, tile_size, fill_value, full_min);
}

}  // namespace torch_ragged
