// CUDA kernels of the tiles family: one thread per (output row, span of up to 32 of its columns),
// the point's source found once per span by the cell lists (tiles/tiles_index.h, shared with the
// CPU kernels), each element written once: no atomics, deterministic. The cell index is built with
// ATen ops on the device (tiles_args.cpp).

#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstring>

#include "common/checks.h"
#include "common/element_type.h"
#include "common/parallel.h"
#include "tiles/tiles_args.h"

namespace torch_ragged {
namespace {

cudaStream_t stream() { return at::cuda::getCurrentCUDAStream(); }

// Thin grid-stride shells over tiles_index.h's span bodies; `threads`: span_threads(rows, width).
template <typename Element, typename Source>
__global__ void gather_rows_kernel(Source source, const Element* __restrict__ src,
                                   Element* __restrict__ out, Element fill, int64_t threads,
                                   int64_t row_elems) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < threads;
       t += int64_t{gridDim.x} * blockDim.x) {
    gather_row_span(source, src, out, fill, t, row_elems);
  }
}

template <typename Source>
void gather_rows(const GatherPlan& plan, at::Tensor& out, const Source& source) {
  if (plan.rows * plan.row_elems == 0) return;
  const int64_t threads = span_threads(plan.rows, plan.row_elems);
  with_element_type("tiles", out.element_size(), [&](auto element) {
    using Element = decltype(element);
    Element fill;
    std::memcpy(&fill, plan.fill.data(), sizeof(Element));
    gather_rows_kernel<Element><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
        source, static_cast<const Element*>(plan.source.const_data_ptr()),
        static_cast<Element*>(out.mutable_data_ptr()), fill, threads, plan.row_elems);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// reduce="sum": a thin shell over sum_covering_span (tiles_index.h).
template <typename scalar_t>
__global__ void sum_covering_kernel(TileGeometry geo, TileCells cells,
                                    const scalar_t* __restrict__ pages, scalar_t* __restrict__ out,
                                    scalar_t fill, int64_t threads, int64_t width) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < threads;
       t += int64_t{gridDim.x} * blockDim.x) {
    sum_covering_span<scalar_t, at::opmath_type<scalar_t>>(geo, cells, pages, out, fill, t, width);
  }
}

// tiles_halo_backward: a span of a page row sums its columns of the halo rows reading its point.
template <typename scalar_t>
__global__ void halo_adjoint_kernel(HaloAdjoint adjoint, const scalar_t* __restrict__ grad,
                                    scalar_t* __restrict__ out, int64_t threads, int64_t width) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < threads;
       t += int64_t{gridDim.x} * blockDim.x) {
    halo_adjoint_span<scalar_t, at::opmath_type<scalar_t>>(adjoint, grad, out, t, width);
  }
}

__global__ void lookup_kernel(TileGeometry geo, TileCells cells, const int64_t* points,
                              const int64_t* member, int64_t n, int64_t* tile, int64_t* local) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    tile[i] = lookup_point(geo, cells, member != nullptr ? member[i] : 0, points + i * geo.dims,
                           local + i * geo.dims);
  }
}

const int64_t* member_of(const TileSet& set) {
  return set.member.defined() ? set.member.const_data_ptr<int64_t>() : nullptr;
}

// The data's GPU, once the index tensors are checked against it. Checked before any CUDAGuard:
// CPU data with a CUDA index dispatches here, and a guard on a CPU device would throw torch's raw
// error instead of the ValueError naming the argument (the plans check the same again).
at::Device checked_data_device(std::string_view op, std::string_view arg, const at::Tensor& data,
                               const at::Tensor& origins,
                               const std::optional<at::Tensor>& tile_first_idx,
                               const std::optional<at::TensorList>& index) {
  check_defined(op, arg, data);
  check_index_device(op, "origins", origins, data.device());
  if (tile_first_idx.has_value()) {
    check_index_device(op, "tile_first_idx", *tile_first_idx, data.device());
  }
  if (index.has_value()) {
    for (const at::Tensor& part : *index) check_index_device(op, "index", part, data.device());
  }
  TORCH_CHECK_VALUE(data.is_cuda(), "torch_ragged.", op, ": ", arg, " must be on the GPU when ",
                    "its index tensors are, got ", data.device());
  return data.device();
}

at::Tensor tiles_to_dense_cuda(const at::Tensor& pages, const at::Tensor& origins,
                               at::IntArrayRef full_min, at::IntArrayRef full_max,
                               const at::Scalar& fill_value, c10::string_view reduce,
                               const std::optional<at::Tensor>& tile_first_idx,
                               std::optional<at::TensorList> index) {
  constexpr std::string_view op = "tiles_to_dense";
  const bool first_wins = is_first_wins(op, reduce);
  TORCH_CHECK_TYPE(first_wins || (pages.defined() && pages.scalar_type() != at::kBool),
                   "torch_ragged.", op, ": reduce=\"sum\" needs numbers, got bool pages");
  const c10::cuda::CUDAGuard guard(
      checked_data_device(op, "pages", pages, origins, tile_first_idx, index));
  const GatherPlan plan = plan_tiles_to_dense(op, pages, origins, full_min, full_max, fill_value,
                                              tile_first_idx, index);
  at::Tensor out = at::empty(plan.out_sizes, pages.options());
  if (first_wins) {
    gather_rows(plan, out, DenseFromOwner{plan.geo, plan.cells.view(plan.set)});
    return out;
  }
  if (plan.rows * plan.row_elems == 0) return out;
  const int64_t threads = span_threads(plan.rows, plan.row_elems);
  AT_DISPATCH_V2(
      pages.scalar_type(), "tiles_to_dense_sum_cuda", AT_WRAP([&] {
        scalar_t fill;
        std::memcpy(&fill, plan.fill.data(), sizeof(scalar_t));
        sum_covering_kernel<scalar_t><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
            plan.geo, plan.cells.view(plan.set), plan.source.const_data_ptr<scalar_t>(),
            out.mutable_data_ptr<scalar_t>(), fill, threads, plan.row_elems);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kHalf,
      at::kBFloat16);
  return out;
}

at::Tensor dense_to_tiles_cuda(const at::Tensor& dense, const at::Tensor& origins,
                               at::IntArrayRef tile_size, at::IntArrayRef full_min,
                               const at::Scalar& fill_value, bool owned_only,
                               const std::optional<at::Tensor>& tile_first_idx,
                               std::optional<at::TensorList> index) {
  const c10::cuda::CUDAGuard guard(
      checked_data_device("dense_to_tiles", "dense", dense, origins, tile_first_idx, index));
  const GatherPlan plan = plan_dense_to_tiles("dense_to_tiles", dense, origins, tile_size, full_min,
                                              fill_value, tile_first_idx, index);
  at::Tensor out = at::empty(plan.out_sizes, dense.options());
  gather_rows(plan, out,
              TileFromDense{plan.geo, plan.cells.view(plan.set), member_of(plan.set), owned_only});
  return out;
}

at::Tensor tiles_halo_cuda(const at::Tensor& pages, const at::Tensor& origins,
                           at::IntArrayRef radius, at::IntArrayRef full_min,
                           at::IntArrayRef full_max, const at::Scalar& fill_value,
                           const std::optional<at::Tensor>& tile_first_idx,
                           std::optional<at::TensorList> index) {
  const c10::cuda::CUDAGuard guard(
      checked_data_device("tiles_halo", "pages", pages, origins, tile_first_idx, index));
  HaloFromOwner halo{};
  const GatherPlan plan = plan_tiles_halo("tiles_halo", pages, origins, radius, full_min, full_max,
                                          fill_value, tile_first_idx, index, halo);
  halo.geo = plan.geo;
  halo.cells = plan.cells.view(plan.set);
  halo.member = member_of(plan.set);
  at::Tensor out = at::empty(plan.out_sizes, pages.options());
  gather_rows(plan, out, halo);
  return out;
}

at::Tensor tiles_halo_backward_cuda(const at::Tensor& grad_halo, const at::Tensor& origins,
                                    at::IntArrayRef radius, at::IntArrayRef full_min,
                                    at::IntArrayRef full_max,
                                    const std::optional<at::Tensor>& tile_first_idx,
                                    std::optional<at::TensorList> index) {
  const c10::cuda::CUDAGuard guard(checked_data_device("tiles_halo_backward", "grad_halo",
                                                       grad_halo, origins, tile_first_idx, index));
  const HaloAdjointPlan plan = plan_tiles_halo_backward(
      "tiles_halo_backward", grad_halo, origins, radius, full_min, full_max, tile_first_idx, index);
  at::Tensor out = at::empty(plan.tiles.out_sizes, grad_halo.options());
  if (plan.tiles.rows * plan.tiles.row_elems == 0) return out;
  const int64_t threads = span_threads(plan.tiles.rows, plan.tiles.row_elems);
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_halo.scalar_type(), "tiles_halo_backward_cuda", [&] {
        halo_adjoint_kernel<scalar_t><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
            plan.adjoint(), plan.tiles.source.const_data_ptr<scalar_t>(),
            out.mutable_data_ptr<scalar_t>(), threads, plan.tiles.row_elems);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

std::tuple<at::Tensor, at::Tensor> tiles_lookup_cuda(
    const at::Tensor& origins, at::IntArrayRef tile_size, const at::Tensor& coords,
    at::IntArrayRef full_min, at::IntArrayRef full_max,
    const std::optional<at::Tensor>& tile_first_idx, std::optional<at::TensorList> index) {
  const c10::cuda::CUDAGuard guard(
      checked_data_device("tiles_lookup", "coords", coords, origins, tile_first_idx, index));
  const LookupPlan plan = plan_tiles_lookup("tiles_lookup", origins, tile_size, coords, full_min,
                                            full_max, tile_first_idx, index);
  const int64_t n = plan.points.size(0);
  at::Tensor tile = at::empty({n}, plan.points.options());
  at::Tensor local = at::empty({n, plan.geo.dims}, plan.points.options());
  if (n > 0) {
    lookup_kernel<<<cuda_grid_for(n), kCudaThreads, 0, stream()>>>(
        plan.geo, plan.cells_view(), plan.points.const_data_ptr<int64_t>(),
        plan.member.defined() ? plan.member.const_data_ptr<int64_t>() : nullptr, n,
        tile.mutable_data_ptr<int64_t>(), local.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return {tile, local};
}

}  // namespace

// tiles_depthwise_correlate on the GPU: torch's depthwise convolution (cuDNN) on channels-first
// views, back to channels last.
at::Tensor tiles_depthwise_correlate_cuda(const at::Tensor& input, const at::Tensor& weight,
                                          at::IntArrayRef padding) {
  const CorrelatePlan plan =
      plan_depthwise_correlate("tiles_depthwise_correlate", input, weight, padding);
  if (c10::multiply_integers(plan.out_sizes) == 0)
    return at::zeros(plan.out_sizes, input.options());
  const int64_t channels = plan.channels;
  std::vector<int64_t> kernel_shape{channels, 1};
  kernel_shape.insert(kernel_shape.end(), plan.taps, plan.taps + plan.dims);
  const at::Tensor kernel = plan.weight.reshape({-1, channels}).t().reshape(kernel_shape);
  const std::vector<int64_t> ones(plan.dims, 1), zeros(plan.dims, 0);
  // cuDNN may round float32 through TF32 (torch.backends.cudnn.allow_tf32 defaults to True: ~1e-3
  // relative error); this op promises the CPU kernel's float32 accuracy, so TF32 is off for this
  // call (an argument of at::_convolution: the process-wide setting, which other threads read, is
  // left alone). The other cuDNN settings are the user's, as at::convolution reads them.
  const at::Context& context = at::globalContext();
  return at::_convolution(plan.input.movedim(-1, 1), kernel, std::nullopt, ones, padding, ones,
                          /*transposed=*/false, zeros, channels, context.benchmarkCuDNN(),
                          context.deterministicCuDNN() || context.deterministicAlgorithms(),
                          context.userEnabledCuDNN(), /*allow_tf32=*/false)
      .movedim(1, -1)
      .contiguous();
}

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  m.impl("tiles_to_dense", &tiles_to_dense_cuda);
  m.impl("dense_to_tiles", &dense_to_tiles_cuda);
  m.impl("tiles_halo", &tiles_halo_cuda);
  m.impl("tiles_halo_backward", &tiles_halo_backward_cuda);
  m.impl("tiles_depthwise_correlate", &tiles_depthwise_correlate_cuda);
  m.impl("tiles_lookup", &tiles_lookup_cuda);
}

}  // namespace torch_ragged
