#pragma once

// Sparse softmax and pool sums (sparse_softmax.cpp), on either backend's coalesce kernels.

#include <ATen/ATen.h>

#include "sparse/coalesce.h"

namespace torch_ragged {

at::Tensor softmax_with(const CoalesceBackend& backend, const at::Tensor& indices,
                        const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim, bool log);

at::Tensor pool_sum_with(const CoalesceBackend& backend, const at::Tensor& indices,
                         const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim);

}  // namespace torch_ragged
