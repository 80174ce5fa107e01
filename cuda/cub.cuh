#pragma once

// CUB, wrapped: built with -DCUB_WRAPPED_NAMESPACE=torch_ragged_cub so our CUB symbols never
// collide with the CUB torch itself was built with. Temporary storage comes from torch's caching
// allocator and every call runs on the current stream. Never pass CUB objects across the library
// boundary. Item counts are int64 (these CUB entry points take 64-bit counts).

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

// The int64 item counts below need CUB >= 2.0 (64-bit offsets selected from the count type; older
// CUB truncated counts to int): refuse to build against an older one rather than sort 2^31 items
// wrongly.
static_assert(CUB_VERSION >= 200000, "torch_ragged needs CUB >= 2.0 (CUDA 12 or newer)");

// CUB_NS_QUALIFIER is CUB's own spelling of its (wrapped) namespace: ::torch_ragged_cub::cub.
namespace torch_ragged::cuda {

// Runs a CUB device call twice: once to size its temporary storage, once for real. At least one
// byte is allocated: CUB reads a null temporary storage as "size query only", and the caching
// allocator returns null for zero bytes, so a call needing none would silently do nothing.
template <typename Call>
void with_cub_temp_storage(const Call& call) {
  size_t temp_bytes = 0;
  C10_CUDA_CHECK(call(nullptr, temp_bytes));
  temp_bytes = std::max<size_t>(temp_bytes, 1);
  auto temp = c10::cuda::CUDACachingAllocator::get()->allocate(temp_bytes);
  C10_CUDA_CHECK(call(temp.get(), temp_bytes));
}

// out[i] = sum(in[0..i]) for i < n, on the current stream.
template <typename In, typename Out>
void inclusive_sum(const In* in, Out* out, int64_t n) {
  if (n == 0) return;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  with_cub_temp_storage([&](void* temp, size_t& bytes) {
    return CUB_NS_QUALIFIER::DeviceScan::InclusiveSum(temp, bytes, in, out, n, stream);
  });
}

// out[i] = sum(in[0..i)) for i < n.
template <typename In, typename Out>
void exclusive_sum(const In* in, Out* out, int64_t n) {
  if (n == 0) return;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  with_cub_temp_storage([&](void* temp, size_t& bytes) {
    return CUB_NS_QUALIFIER::DeviceScan::ExclusiveSum(temp, bytes, in, out, n, stream);
  });
}

// Stable sort of (key, value) pairs by the key's bits [0, end_bit).
template <typename Key, typename Value>
void sort_pairs(const Key* keys_in, Key* keys_out, const Value* values_in, Value* values_out,
                int64_t n, int end_bit) {
  if (n == 0) return;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  with_cub_temp_storage([&](void* temp, size_t& bytes) {
    return CUB_NS_QUALIFIER::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in,
                                                        values_out, n, 0, end_bit, stream);
  });
}

}  // namespace torch_ragged::cuda
