// CUDA kernels of the segment core.

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cub.cuh"
#include "segment/segment_cpu.h"

namespace torch_ragged {
namespace {

// first_idx = [0, cumsum(numel_per_tensor)...] as int64 on the input's device. Validating that no
// count is negative needs one device-to-host read (documented in docs/batch.md).
at::Tensor get_first_idx_cuda(const at::Tensor& numel_per_tensor) {
  check_index_tensor("get_first_idx", "numel_per_tensor", numel_per_tensor, 1);
  const c10::cuda::CUDAGuard guard(numel_per_tensor.device());
  const at::Tensor counts = numel_per_tensor.to(at::kLong).contiguous();
  TORCH_CHECK_VALUE(!counts.lt(0).any().item<bool>(),
                    "torch_ragged.get_first_idx: numel_per_tensor must be non-negative");
  at::Tensor first_idx = at::zeros({counts.numel() + 1}, counts.options());
  cuda::inclusive_sum(counts.const_data_ptr<int64_t>(), first_idx.mutable_data_ptr<int64_t>() + 1,
                      counts.numel());
  return first_idx;
}

constexpr int kThreads = 256;

// One thread per (segment, column) sums the segment's rows in order, in the op-math type: no
// atomics, deterministic; consecutive threads read consecutive columns (coalesced).
template <typename scalar_t>
__global__ void segment_sum_kernel(const scalar_t* __restrict__ data,
                                   const int64_t* __restrict__ first_idx,
                                   scalar_t* __restrict__ out, int64_t total, int64_t width) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t segment = e / width, column = e % width;
    acc_t sum = 0;
    for (int64_t row = first_idx[segment]; row < first_idx[segment + 1]; ++row) {
      sum += static_cast<acc_t>(data[row * width + column]);
    }
    out[e] = static_cast<scalar_t>(sum);
  }
}

// Validating first_idx reads it on the host (one device-to-host copy, as on the CPU path).
at::Tensor segment_sum_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  const std::vector<int64_t> bounds = cpu::checked_segment_bounds("segment_sum", data, first_idx);
  const c10::cuda::CUDAGuard guard(data.device());
  const int64_t segments = static_cast<int64_t>(bounds.size()) - 1;
  std::vector<int64_t> out_sizes{segments};
  out_sizes.insert(out_sizes.end(), data.sizes().begin() + 1, data.sizes().end());
  at::Tensor out = at::empty(out_sizes, data.options());
  const int64_t total = out.numel();
  if (total == 0) return out;
  const at::Tensor src = data.contiguous();
  const at::Tensor offsets = first_idx.to(data.device(), at::kLong).contiguous();
  const int64_t width = total / segments;
  const int64_t grid = std::min<int64_t>((total + kThreads - 1) / kThreads, 1 << 20);
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND2(
      at::kHalf, at::kBFloat16, data.scalar_type(), "segment_sum_cuda", [&] {
        segment_sum_kernel<scalar_t><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            src.const_data_ptr<scalar_t>(), offsets.const_data_ptr<int64_t>(),
            out.mutable_data_ptr<scalar_t>(), total, width);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  m.impl("get_first_idx", &get_first_idx_cuda);
  m.impl("segment_sum", &segment_sum_cuda);
}

}  // namespace torch_ragged
