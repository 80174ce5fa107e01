// Schemas of the segment core and its C++ API.

#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>
#include <torch_ragged/segment.h>

#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("get_first_idx(Tensor numel_per_tensor, bool validate=True) -> Tensor", tags);
  m.def("segment_sum(Tensor data, Tensor first_idx) -> Tensor", tags);
  m.def("segment_mean(Tensor data, Tensor first_idx) -> Tensor", tags);
  m.def("segment_max(Tensor data, Tensor first_idx) -> (Tensor values, Tensor arg)", tags);
  m.def("segment_min(Tensor data, Tensor first_idx) -> (Tensor values, Tensor arg)", tags);
  m.def("segment_softmax(Tensor data, Tensor first_idx) -> Tensor", tags);
  m.def("segment_log_softmax(Tensor data, Tensor first_idx) -> Tensor", tags);
  m.def(
      "segment_softmax_backward(Tensor grad_output, Tensor output, Tensor first_idx, bool log) "
      "-> Tensor",
      tags);
  m.def("segment_expand(Tensor values, Tensor first_idx, SymInt? num_rows=None) -> Tensor", tags);
  m.def("segment_ids(Tensor first_idx, SymInt? num_rows=None) -> Tensor", tags);
  m.def("segment_gather_sum(Tensor data, Tensor index, Tensor? weight, Tensor first_idx) -> Tensor",
        tags);
  m.def("segment_gather_dot(Tensor a, Tensor b, Tensor index, Tensor first_idx) -> Tensor", tags);
  m.def(
      "segment_gather_sum_dot(Tensor data, Tensor index, Tensor? weight, Tensor first_idx, "
      "Tensor other) -> (Tensor sum, Tensor dot)",
      tags);
  m.def(
      "ragged_index_select(Tensor values, Tensor first_idx, Tensor index, SymInt? num_rows=None) "
      "-> (Tensor values, Tensor first_idx)",
      tags);
}

// The gathered sum, dot and sum-and-dot are the kernels under the sparse family's matmul, whose
// autograd (sparse_matmul.cpp) knows the transposed structure they need; alone they do not
// differentiate, and say so when asked to.
TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("segment_gather_sum", torch::autograd::autogradNotImplementedFallback());
  m.impl("segment_gather_dot", torch::autograd::autogradNotImplementedFallback());
  m.impl("segment_gather_sum_dot", torch::autograd::autogradNotImplementedFallback());
}

// The ops with CPU / CUDA kernels (the rest are composites of them).
constexpr const char* kKernelOps[] = {"get_first_idx",
                                      "segment_sum",
                                      "segment_mean",
                                      "segment_max",
                                      "segment_min",
                                      "segment_softmax",
                                      "segment_log_softmax",
                                      "segment_softmax_backward",
                                      "segment_expand",
                                      "segment_ids",
                                      "segment_gather_sum",
                                      "segment_gather_dot",
                                      "segment_gather_sum_dot",
                                      "ragged_index_select"};

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kKernelOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kKernelOps);
}

namespace ops {

using Tensor = at::Tensor;
using TensorPair = std::tuple<at::Tensor, at::Tensor>;
using OptionalRows = std::optional<c10::SymInt>;

at::Tensor get_first_idx(const Tensor& numel_per_tensor, bool validate) {
  static auto op = op_handle<Tensor(const Tensor&, bool)>("torch_ragged::get_first_idx");
  return op.call(numel_per_tensor, validate);
}

at::Tensor segment_sum(const Tensor& data, const Tensor& first_idx) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&)>("torch_ragged::segment_sum");
  return op.call(data, first_idx);
}

at::Tensor segment_mean(const Tensor& data, const Tensor& first_idx) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&)>("torch_ragged::segment_mean");
  return op.call(data, first_idx);
}

TensorPair segment_max(const Tensor& data, const Tensor& first_idx) {
  static auto op = op_handle<TensorPair(const Tensor&, const Tensor&)>("torch_ragged::segment_max");
  return op.call(data, first_idx);
}

TensorPair segment_min(const Tensor& data, const Tensor& first_idx) {
  static auto op = op_handle<TensorPair(const Tensor&, const Tensor&)>("torch_ragged::segment_min");
  return op.call(data, first_idx);
}

at::Tensor segment_softmax(const Tensor& data, const Tensor& first_idx) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&)>("torch_ragged::segment_softmax");
  return op.call(data, first_idx);
}

at::Tensor segment_log_softmax(const Tensor& data, const Tensor& first_idx) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&)>("torch_ragged::segment_log_softmax");
  return op.call(data, first_idx);
}

at::Tensor segment_softmax_backward(const Tensor& grad_output, const Tensor& output,
                                    const Tensor& first_idx, bool log) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, const Tensor&, bool)>(
      "torch_ragged::segment_softmax_backward");
  return op.call(grad_output, output, first_idx, log);
}

at::Tensor segment_expand(const Tensor& values, const Tensor& first_idx, OptionalRows num_rows) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, OptionalRows)>("torch_ragged::segment_expand");
  return op.call(values, first_idx, std::move(num_rows));
}

at::Tensor segment_gather_sum(const Tensor& data, const Tensor& index,
                              const std::optional<Tensor>& weight, const Tensor& first_idx) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&, const Tensor&)>(
          "torch_ragged::segment_gather_sum");
  return op.call(data, index, weight, first_idx);
}

at::Tensor segment_gather_dot(const Tensor& a, const Tensor& b, const Tensor& index,
                              const Tensor& first_idx) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>(
      "torch_ragged::segment_gather_dot");
  return op.call(a, b, index, first_idx);
}

TensorPair segment_gather_sum_dot(const Tensor& data, const Tensor& index,
                                  const std::optional<Tensor>& weight, const Tensor& first_idx,
                                  const Tensor& other) {
  static auto op =
      op_handle<TensorPair(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                           const Tensor&, const Tensor&)>("torch_ragged::segment_gather_sum_dot");
  return op.call(data, index, weight, first_idx, other);
}

at::Tensor segment_ids(const Tensor& first_idx, OptionalRows num_rows) {
  static auto op = op_handle<Tensor(const Tensor&, OptionalRows)>("torch_ragged::segment_ids");
  return op.call(first_idx, std::move(num_rows));
}

TensorPair ragged_index_select(const Tensor& values, const Tensor& first_idx, const Tensor& index,
                               OptionalRows num_rows) {
  static auto op = op_handle<TensorPair(const Tensor&, const Tensor&, const Tensor&, OptionalRows)>(
      "torch_ragged::ragged_index_select");
  return op.call(values, first_idx, index, std::move(num_rows));
}

}  // namespace ops

// ---- Public C++ API (int sizes, converted to the schema's SymInts) ----

static std::optional<c10::SymInt> as_sym(std::optional<int64_t> n) {
  if (!n.has_value()) return std::nullopt;
  return c10::SymInt(*n);
}

at::Tensor get_first_idx(const at::Tensor& numel_per_tensor, bool validate) {
  return ops::get_first_idx(numel_per_tensor, validate);
}
at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx) {
  return ops::segment_sum(data, first_idx);
}
at::Tensor segment_mean(const at::Tensor& data, const at::Tensor& first_idx) {
  return ops::segment_mean(data, first_idx);
}
std::tuple<at::Tensor, at::Tensor> segment_max(const at::Tensor& data,
                                               const at::Tensor& first_idx) {
  return ops::segment_max(data, first_idx);
}
std::tuple<at::Tensor, at::Tensor> segment_min(const at::Tensor& data,
                                               const at::Tensor& first_idx) {
  return ops::segment_min(data, first_idx);
}
at::Tensor segment_softmax(const at::Tensor& data, const at::Tensor& first_idx) {
  return ops::segment_softmax(data, first_idx);
}
at::Tensor segment_log_softmax(const at::Tensor& data, const at::Tensor& first_idx) {
  return ops::segment_log_softmax(data, first_idx);
}
at::Tensor segment_expand(const at::Tensor& values, const at::Tensor& first_idx,
                          std::optional<int64_t> num_rows) {
  return ops::segment_expand(values, first_idx, as_sym(num_rows));
}
at::Tensor segment_ids(const at::Tensor& first_idx, std::optional<int64_t> num_rows) {
  return ops::segment_ids(first_idx, as_sym(num_rows));
}
std::tuple<at::Tensor, at::Tensor> ragged_index_select(const at::Tensor& values,
                                                       const at::Tensor& first_idx,
                                                       const at::Tensor& index,
                                                       std::optional<int64_t> num_rows) {
  return ops::ragged_index_select(values, first_idx, index, as_sym(num_rows));
}
at::Tensor segment_row(const at::Tensor& values, const at::Tensor& first_idx, int64_t row) {
  return ops::segment_row(values, first_idx, row);
}

std::tuple<at::Tensor, at::Tensor> segment_slice(const at::Tensor& values,
                                                 const at::Tensor& first_idx,
                                                 std::optional<int64_t> start,
                                                 std::optional<int64_t> stop, int64_t step) {
  return ops::segment_slice(values, first_idx, start, stop, step);
}

}  // namespace torch_ragged
