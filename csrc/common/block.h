#pragma once

// The thread block a cooperative kernel body runs in.
//
// A cooperative body (shared memory, barriers, warp shuffles) is a C10_HOST_DEVICE template over
// a `Block` type and over its shared arrays, so that the same code runs
//   - on the GPU, with Block = CudaBlock (below) and shared arrays that are `__shared__ T[]`
//     declared by the kernel's thin `__global__` shell, and
//   - on the host, in the block emulator of the C++ tests (tests/cpp/block_emulator.h), which runs
//     every thread of a block as its own thread of control, in a shuffled order between barriers,
//     with shared arrays that record every access and report races, barrier divergence and
//     out-of-bounds or uninitialised shared reads.
//
// What a body may use of a Block (both implementations provide exactly this):
//   thread() / threads()           threadIdx.x / blockDim.x (a multiple of kWarpSize)
//   block() / blocks()             blockIdx.x / gridDim.x
//   sync()                         __syncthreads(): every thread of the block must reach it
//   shfl_up / shfl_down / shfl_xor / shfl   full-warp shuffles of a value of at most 8 bytes
//   ballot(bool)                   __ballot_sync over the full warp
// and of a shared array: operator[] to read and write elements.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace torch_ragged {

constexpr int kWarpSize = 32;
constexpr int kWarpBits = 5;

#if defined(__CUDACC__)

struct CudaBlock {
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int threads() const { return static_cast<int>(blockDim.x); }
  __device__ int64_t block() const { return blockIdx.x; }
  __device__ int64_t blocks() const { return gridDim.x; }
  __device__ void sync() const { __syncthreads(); }

  template <typename T>
  __device__ T shfl_up(T value, int delta) const {
    return __shfl_up_sync(kFullWarp, value, delta);
  }
  template <typename T>
  __device__ T shfl_down(T value, int delta) const {
    return __shfl_down_sync(kFullWarp, value, delta);
  }
  template <typename T>
  __device__ T shfl_xor(T value, int lane_mask) const {
    return __shfl_xor_sync(kFullWarp, value, lane_mask);
  }
  template <typename T>
  __device__ T shfl(T value, int source_lane) const {
    return __shfl_sync(kFullWarp, value, source_lane);
  }
  __device__ uint32_t ballot(bool predicate) const { return __ballot_sync(kFullWarp, predicate); }

 private:
  static constexpr unsigned kFullWarp = 0xffffffffu;
};

#endif  // __CUDACC__

}  // namespace torch_ragged
