#pragma once

// CUB, wrapped: built with -DCUB_WRAPPED_NAMESPACE=torch_ragged_cub so our CUB symbols never
// collide with the CUB torch itself was built with. Temporary storage comes from torch's caching
// allocator and every call runs on the current stream. Never pass CUB objects across the library
// boundary.

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <cub/device/device_scan.cuh>

// CUB_NS_QUALIFIER is CUB's own spelling of its (wrapped) namespace: ::torch_ragged_cub::cub.
namespace torch_ragged::cuda {

// out[i] = sum(in[0..i]) for i < n, on the current stream.
template <typename In, typename Out>
void inclusive_sum(const In* in, Out* out, int64_t n) {
  if (n == 0) return;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  size_t temp_bytes = 0;
  C10_CUDA_CHECK(
      CUB_NS_QUALIFIER::DeviceScan::InclusiveSum(nullptr, temp_bytes, in, out, n, stream));
  auto temp = c10::cuda::CUDACachingAllocator::get()->allocate(temp_bytes);
  C10_CUDA_CHECK(
      CUB_NS_QUALIFIER::DeviceScan::InclusiveSum(temp.get(), temp_bytes, in, out, n, stream));
}

}  // namespace torch_ragged::cuda
