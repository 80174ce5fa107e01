// CUDA kernels of the segment core.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cub.cuh"

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

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { m.impl("get_first_idx", &get_first_idx_cuda); }

}  // namespace torch_ragged
