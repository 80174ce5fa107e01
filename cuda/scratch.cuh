#pragma once

// Scratch memory of the CUDA kernels: n items of a trivially copyable type on like's device, from
// torch's caching allocator. The tensor keeps the bytes alive; the allocator keeps a freed buffer
// from reuse until the stream's earlier work on it is done.

#include <ATen/ATen.h>

#include <type_traits>
#include <utility>

namespace torch_ragged::cuda {

template <typename T>
std::pair<at::Tensor, T*> scratch_buffer(const at::Tensor& like, int64_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  at::Tensor bytes =
      at::empty({n * static_cast<int64_t>(sizeof(T))}, like.options().dtype(at::kByte));
  return {bytes, reinterpret_cast<T*>(bytes.mutable_data_ptr())};
}

}  // namespace torch_ragged::cuda
