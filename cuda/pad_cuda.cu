// CUDA kernels of the index modes of pad; the host half (checks, geometry) is pad/pad_plan.cpp and
// the index arithmetic pad/pad_index.h, shared with the CPU kernels.
//
// pad_index: a group of lanes per output row along the last axis (grid-stride) decodes the row's
// outer axes once and copies its elements' sources as raw bytes (pad_gather_rows).
// pad_index_backward: a group of lanes per input row sums each element's gradient over its
// preimage in the CPU kernel's order (pad_fold_rows): no atomics, the CPU's bits. Neither
// synchronises with the host. The bodies live in pad/pad_index.h and run on the host in
// tests/cpp/test_pad_emulation.cpp.

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "common/element_type.h"
#include "common/parallel.h"
#include "pad/pad_index.h"
#include "pad/pad_plan.h"

namespace torch_ragged {
namespace {

// Thin shells over pad_index.h's bodies, grid-stride. index_t: uint32_t when every index fits
// (the common case: 32-bit division is several times cheaper than 64-bit, and each row's decode
// does one per outer axis), else int64_t.
template <typename Element, typename index_t>
__global__ void __launch_bounds__(kCudaThreads)
    pad_gather_rows_kernel(PadGeometry g, const Element* __restrict__ in, Element* __restrict__ out,
                           const Element* __restrict__ values, index_t rows) {
  pad_gather_rows(CudaBlock{}, g, in, out, values, rows);
}

// kAxes: fold_axes_for(g.ndim), the size of the per-thread axis arrays.
template <typename scalar_t, int kAxes>
__global__ void __launch_bounds__(kCudaThreads)
    pad_fold_rows_kernel(PadGeometry g, const scalar_t* __restrict__ grad,
                         scalar_t* __restrict__ grad_in, int64_t rows) {
  pad_fold_rows<CudaBlock, scalar_t, at::opmath_type<scalar_t>, kAxes>(CudaBlock{}, g, grad,
                                                                       grad_in, rows);
}

// Blocks for `rows` rows of `row_length` elements, a group of lanes per row (RowLanes), capped as
// the kernels stride.
int64_t blocks_for_rows(int64_t rows, int64_t row_length) {
  const int64_t rows_per_block = kCudaThreads >> RowLanes::group_bits_for(row_length);
  return std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, int64_t{1} << 20);
}

template <typename Element, typename index_t>
void launch_gather_as(const PadGeometry& g, const at::Tensor& in, at::Tensor& out,
                      const at::Tensor& values) {
  const int64_t row_length = g.out_size[g.ndim - 1];
  if (out.numel() == 0) return;
  const int64_t rows = out.numel() / row_length;
  pad_gather_rows_kernel<Element, index_t>
      <<<blocks_for_rows(rows, row_length), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          g, static_cast<const Element*>(in.const_data_ptr()),
          static_cast<Element*>(out.mutable_data_ptr()),
          values.defined() ? static_cast<const Element*>(values.const_data_ptr()) : nullptr,
          static_cast<index_t>(rows));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_gather(const PadGeometry& g, const at::Tensor& in, at::Tensor& out,
                   const at::Tensor& values) {
  const c10::cuda::CUDAGuard guard(in.device());
  const bool narrow_index = out.numel() < (int64_t{1} << 32) && in.numel() < (int64_t{1} << 32);
  with_element_type("pad", in.element_size(), [&](auto element) {
    using Element = decltype(element);
    if (narrow_index) {
      launch_gather_as<Element, uint32_t>(g, in, out, values);
    } else {
      launch_gather_as<Element, int64_t>(g, in, out, values);
    }
  });
}

template <typename scalar_t, int kAxes>
void launch_fold_as(const PadGeometry& g, const at::Tensor& grad, at::Tensor& grad_in) {
  if (grad_in.numel() == 0) return;
  const int64_t row_length = g.in_size[g.ndim - 1];
  const int64_t rows = grad_in.numel() / row_length;
  pad_fold_rows_kernel<scalar_t, kAxes>
      <<<blocks_for_rows(rows, row_length), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          g, grad.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_fold(const PadGeometry& g, const at::Tensor& grad, at::Tensor& grad_in) {
  const c10::cuda::CUDAGuard guard(grad.device());
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "pad_index_backward", [&] {
        with_fold_axes(g.ndim, [&](auto axes) {
          launch_fold_as<scalar_t, decltype(axes)::value>(g, grad, grad_in);
        });
      });
}

at::Tensor pad_index_cuda(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                          c10::string_view mode, const std::optional<at::Tensor>& constant_values) {
  return run_pad_index(self, pad_width, mode, constant_values, &launch_gather);
}

at::Tensor pad_index_backward_cuda(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                                   c10::string_view mode) {
  return run_pad_index_backward(grad_output, pad_width, mode, &launch_fold);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  m.impl("pad_index", &pad_index_cuda);
  m.impl("pad_index_backward", &pad_index_backward_cuda);
}

}  // namespace torch_ragged
