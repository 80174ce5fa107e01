// CUDA kernels of the sparse family: flattened keys, and coalesce (sparse/coalesce.cpp) on the
// segment core's device sort. Host reads: the out-of-range flag when validating, and the number of
// runs (the output nnz, a data-dependent size).

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "common/parallel.h"
#include "sparse/coalesce.h"
#include "sparse/softmax.h"
#include "sparse/sparse_args.h"

namespace torch_ragged {
namespace {

template <typename index_t>
__global__ void flat_keys_kernel(KeyGeometry g, const index_t* __restrict__ indices, int64_t nnz,
                                 int64_t* __restrict__ keys, int32_t* __restrict__ out_of_range) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nnz;
       i += int64_t{gridDim.x} * blockDim.x) {
    bool in_range;
    keys[i] = flat_key(g, indices, nnz, i, in_range);
    if (!in_range) *out_of_range = 1;  // every writer writes 1: a benign race
  }
}

at::Tensor flat_keys_cuda(std::string_view op, const at::Tensor& indices, const KeyGeometry& g,
                          bool validate) {
  const c10::cuda::CUDAGuard guard(indices.device());
  const at::Tensor src = indices.contiguous();
  const int64_t nnz = src.size(1);
  at::Tensor keys = at::empty({nnz}, src.options().dtype(at::kLong));
  at::Tensor flag = at::zeros({1}, src.options().dtype(at::kInt));
  if (nnz > 0) {
    AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sparse_flat_keys_cuda", [&] {
      flat_keys_kernel<index_t>
          <<<cuda_grid_for(nnz), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
              g, src.const_data_ptr<index_t>(), nnz, keys.mutable_data_ptr<int64_t>(),
              flag.mutable_data_ptr<int32_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  if (validate && flag.item<int32_t>() != 0) {  // one host read (documented: validate=False skips)
    raise_out_of_range(op, indices, at::IntArrayRef(g.size, g.sparse_dim));
  }
  return keys;
}

}  // namespace

// Linkage outside the anonymous namespace: register_sparse_kernels takes it as a template argument.
extern const CoalesceBackend kCudaBackend;
const CoalesceBackend kCudaBackend{&flat_keys_cuda, &cuda::sort_keys, &cuda::run_offsets,
                                   &cuda::segment_gather_sum};

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_sparse_kernels<kCudaBackend>(m); }

}  // namespace torch_ragged
