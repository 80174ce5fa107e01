#pragma once

// Sparse softmax and pool sums (sparse_softmax.cpp) on either backend's coalesce kernels, and the
// registration of the family's kernel ops for a backend.

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "common/checks.h"
#include "sparse/coalesce.h"
#include "sparse/sparse_args.h"

namespace torch_ragged {

at::Tensor softmax_with(const CoalesceBackend& backend, const at::Tensor& indices,
                        const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim, bool log);

at::Tensor pool_sum_with(const CoalesceBackend& backend, const at::Tensor& indices,
                         const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim);

// The gradient of sparse_softmax's values (log_softmax's with `log`) from its output's values and
// the gradient of the output, both on the same coalesced `indices`.
at::Tensor sparse_softmax_backward(const at::Tensor& indices, const at::Tensor& output,
                                   const at::Tensor& grad, c10::SymIntArrayRef size, int64_t dim,
                                   bool log);

// The kernels of the sparse family's ops on one backend, under a guard for the inputs' device:
//   TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) { register_sparse_kernels<kCpuBackend>(m); }
template <const CoalesceBackend& kBackend>
struct SparseKernels {
  static at::Tensor flat_keys(const at::Tensor& indices, c10::SymIntArrayRef sparse_size,
                              bool validate) {
    constexpr std::string_view op = "sparse_flat_keys";
    const c10::OptionalDeviceGuard guard(indices.device());
    return kBackend.flat_keys(op, indices, checked_key_geometry(op, indices, sparse_size),
                              validate);
  }
  static CoalesceResult coalesce(const at::Tensor& indices, const at::Tensor& values,
                                 c10::SymIntArrayRef size, bool validate, bool return_order) {
    const c10::OptionalDeviceGuard guard(values.device());
    return coalesce_with(kBackend, indices, values, size, validate, return_order);
  }
  static at::Tensor softmax(const at::Tensor& indices, const at::Tensor& values,
                            c10::SymIntArrayRef size, int64_t dim, bool log) {
    const c10::OptionalDeviceGuard guard(values.device());
    return softmax_with(kBackend, indices, values, size, dim, log);
  }
  static at::Tensor pool_sum(const at::Tensor& indices, const at::Tensor& values,
                             c10::SymIntArrayRef size, int64_t dim) {
    const c10::OptionalDeviceGuard guard(values.device());
    return pool_sum_with(kBackend, indices, values, size, dim);
  }
  static std::tuple<at::Tensor, at::Tensor> spgemm(
      const at::Tensor& a_indices, const at::Tensor& a_values, const at::Tensor& b_indices,
      const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
    const c10::OptionalDeviceGuard guard(a_values.device());
    return spgemm_with(kBackend, a_indices, a_values, b_indices, b_values, a_size, b_size);
  }
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> spgemm_csr(
      const at::Tensor& a_crow, const at::Tensor& a_col, const at::Tensor& a_values,
      const at::Tensor& b_crow, const at::Tensor& b_col, const at::Tensor& b_values,
      c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
    const c10::OptionalDeviceGuard guard(a_values.device());
    return spgemm_csr_with(kBackend, a_crow, a_col, a_values, b_crow, b_col, b_values, a_size,
                           b_size);
  }
};

template <const CoalesceBackend& kBackend>
void register_sparse_kernels(torch::Library& m) {
  m.impl("sparse_flat_keys", &SparseKernels<kBackend>::flat_keys);
  m.impl("sparse_coalesce", &SparseKernels<kBackend>::coalesce);
  m.impl("sparse_softmax", &SparseKernels<kBackend>::softmax);
  m.impl("sparse_pool_sum", &SparseKernels<kBackend>::pool_sum);
  m.impl("sparse_spgemm", &SparseKernels<kBackend>::spgemm);
  m.impl("sparse_spgemm_csr", &SparseKernels<kBackend>::spgemm_csr);
}

}  // namespace torch_ragged
