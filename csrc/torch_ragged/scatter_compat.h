#pragma once

// torch_scatter's API for LibTorch programs (the C++ side of torch_ragged.scatter_compat): the same
// functions, argument order and conventions as the Python module, each calling its registered op
// (torch_ragged::compat_*). reduce names the torch_scatter function's reduction ("sum" / "add",
// "mean", "mul", "max", "min"; segment_csr: no "mul"). With `out`, the result is written into it
// (combined with its values as torch_scatter combines them: added, multiplied, the better of the
// two; overwritten by segment_csr and the gathers) and `out` is returned. Positions nothing
// reaches are 0 (1 for "mul"), their arg src.size(dim). Deterministic; differentiable.

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch_ragged/export.h>
#include <torch_ragged/segment.h>

#include <optional>
#include <string_view>
#include <tuple>

namespace torch_ragged::scatter_compat {

TORCH_RAGGED_API at::Tensor scatter(const at::Tensor& src, const at::Tensor& index,
                                    int64_t dim = -1,
                                    const std::optional<at::Tensor>& out = std::nullopt,
                                    std::optional<int64_t> dim_size = std::nullopt,
                                    std::string_view reduce = "sum");
// (values, arg): arg the element along dim holding each maximum / minimum.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> scatter_max(
    const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
    const std::optional<at::Tensor>& out = std::nullopt,
    std::optional<int64_t> dim_size = std::nullopt);
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> scatter_min(
    const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
    const std::optional<at::Tensor>& out = std::nullopt,
    std::optional<int64_t> dim_size = std::nullopt);

// The rows indptr[k]:indptr[k + 1] of src along dim indptr.dim() - 1 reduced (indptr broadcast
// over src's leading dims).
TORCH_RAGGED_API at::Tensor segment_csr(const at::Tensor& src, const at::Tensor& indptr,
                                        const std::optional<at::Tensor>& out = std::nullopt,
                                        std::string_view reduce = "sum");
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_max_csr(
    const at::Tensor& src, const at::Tensor& indptr,
    const std::optional<at::Tensor>& out = std::nullopt);
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_min_csr(
    const at::Tensor& src, const at::Tensor& indptr,
    const std::optional<at::Tensor>& out = std::nullopt);
// scatter along dim index.dim() - 1 (torch_scatter's sorted-index form; any order works here).
TORCH_RAGGED_API at::Tensor segment_coo(const at::Tensor& src, const at::Tensor& index,
                                        const std::optional<at::Tensor>& out = std::nullopt,
                                        std::optional<int64_t> dim_size = std::nullopt,
                                        std::string_view reduce = "sum");

// Each segment's row of src repeated over its rows (the output has indptr's last entry rows), and
// src's rows along index.dim() - 1 read at index.
TORCH_RAGGED_API at::Tensor gather_csr(const at::Tensor& src, const at::Tensor& indptr,
                                       const std::optional<at::Tensor>& out = std::nullopt);
TORCH_RAGGED_API at::Tensor gather_coo(const at::Tensor& src, const at::Tensor& index,
                                       const std::optional<at::Tensor>& out = std::nullopt);

TORCH_RAGGED_API at::Tensor scatter_std(const at::Tensor& src, const at::Tensor& index,
                                        int64_t dim = -1,
                                        const std::optional<at::Tensor>& out = std::nullopt,
                                        std::optional<int64_t> dim_size = std::nullopt,
                                        bool unbiased = true);
TORCH_RAGGED_API at::Tensor scatter_logsumexp(const at::Tensor& src, const at::Tensor& index,
                                              int64_t dim = -1,
                                              const std::optional<at::Tensor>& out = std::nullopt,
                                              std::optional<int64_t> dim_size = std::nullopt,
                                              double eps = 1e-12);
TORCH_RAGGED_API at::Tensor scatter_softmax(const at::Tensor& src, const at::Tensor& index,
                                            int64_t dim = -1,
                                            std::optional<int64_t> dim_size = std::nullopt);
TORCH_RAGGED_API at::Tensor scatter_log_softmax(const at::Tensor& src, const at::Tensor& index,
                                                int64_t dim = -1,
                                                std::optional<int64_t> dim_size = std::nullopt);

// torch_scatter's one-reduction names and PyG's softmax, as the Python module has them: each is the
// function above with its reduction.
inline at::Tensor scatter_sum(const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
                              const std::optional<at::Tensor>& out = std::nullopt,
                              std::optional<int64_t> dim_size = std::nullopt) {
  return scatter(src, index, dim, out, dim_size, "sum");
}
inline at::Tensor scatter_add(const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
                              const std::optional<at::Tensor>& out = std::nullopt,
                              std::optional<int64_t> dim_size = std::nullopt) {
  return scatter(src, index, dim, out, dim_size, "sum");
}
inline at::Tensor scatter_mul(const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
                              const std::optional<at::Tensor>& out = std::nullopt,
                              std::optional<int64_t> dim_size = std::nullopt) {
  return scatter(src, index, dim, out, dim_size, "mul");
}
inline at::Tensor scatter_mean(const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
                               const std::optional<at::Tensor>& out = std::nullopt,
                               std::optional<int64_t> dim_size = std::nullopt) {
  return scatter(src, index, dim, out, dim_size, "mean");
}
inline at::Tensor segment_sum_csr(const at::Tensor& src, const at::Tensor& indptr,
                                  const std::optional<at::Tensor>& out = std::nullopt) {
  return segment_csr(src, indptr, out, "sum");
}
inline at::Tensor segment_add_csr(const at::Tensor& src, const at::Tensor& indptr,
                                  const std::optional<at::Tensor>& out = std::nullopt) {
  return segment_csr(src, indptr, out, "sum");
}
inline at::Tensor segment_mean_csr(const at::Tensor& src, const at::Tensor& indptr,
                                   const std::optional<at::Tensor>& out = std::nullopt) {
  return segment_csr(src, indptr, out, "mean");
}
inline at::Tensor segment_sum_coo(const at::Tensor& src, const at::Tensor& index,
                                  const std::optional<at::Tensor>& out = std::nullopt,
                                  std::optional<int64_t> dim_size = std::nullopt) {
  return segment_coo(src, index, out, dim_size, "sum");
}
inline at::Tensor segment_add_coo(const at::Tensor& src, const at::Tensor& index,
                                  const std::optional<at::Tensor>& out = std::nullopt,
                                  std::optional<int64_t> dim_size = std::nullopt) {
  return segment_coo(src, index, out, dim_size, "sum");
}
inline at::Tensor segment_mean_coo(const at::Tensor& src, const at::Tensor& index,
                                   const std::optional<at::Tensor>& out = std::nullopt,
                                   std::optional<int64_t> dim_size = std::nullopt) {
  return segment_coo(src, index, out, dim_size, "mean");
}
// (values, arg), arg along index.dim() - 1.
inline std::tuple<at::Tensor, at::Tensor> segment_max_coo(
    const at::Tensor& src, const at::Tensor& index,
    const std::optional<at::Tensor>& out = std::nullopt,
    std::optional<int64_t> dim_size = std::nullopt) {
  return scatter_max(src, index, index.dim() - 1, out, dim_size);
}
inline std::tuple<at::Tensor, at::Tensor> segment_min_coo(
    const at::Tensor& src, const at::Tensor& index,
    const std::optional<at::Tensor>& out = std::nullopt,
    std::optional<int64_t> dim_size = std::nullopt) {
  return scatter_min(src, index, index.dim() - 1, out, dim_size);
}

// PyG's torch_geometric.utils.softmax: the softmax of src's entries along dim that share a group,
// given by ptr (sorted groups: offsets along dim, the segment core's first_idx) or by index (any
// order; num_nodes groups).
inline at::Tensor softmax(const at::Tensor& src,
                          const std::optional<at::Tensor>& index = std::nullopt,
                          const std::optional<at::Tensor>& ptr = std::nullopt,
                          std::optional<int64_t> num_nodes = std::nullopt, int64_t dim = 0) {
  if (ptr.has_value()) {
    if (dim == 0 || dim == -src.dim()) return torch_ragged::segment_softmax(src, *ptr);
    return torch_ragged::segment_softmax(src.movedim(dim, 0), *ptr).movedim(0, dim);
  }
  TORCH_CHECK_VALUE(index.has_value(), "torch_ragged.scatter_compat.softmax: give index or ptr");
  return scatter_softmax(src, *index, dim, num_nodes);
}

}  // namespace torch_ragged::scatter_compat
