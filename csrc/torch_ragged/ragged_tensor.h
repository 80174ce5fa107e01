#pragma once

// torch_ragged::RaggedTensor: B tensors of shapes (*s_b, *feature) in one packed buffer, the C++
// counterpart of Python's torch_ragged.RaggedTensor (docs/container.md).
//
// Member b has k ragged dims s_b (shape_per_tensor[b]) and the common feature dims; its rows,
// prod(s_b) of them, are values[first_idx[b] : first_idx[b + 1]]. first_idx (B + 1,) and
// shape_per_tensor (B, k) are int64 on the CPU; values live on any device. Every method calls the
// library's ops through the dispatcher, so it runs on the CPU and the GPU and is differentiable
// through values.

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <torch_ragged/export.h>

#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

namespace torch_ragged {

class TORCH_RAGGED_API RaggedTensor {
 public:
  // Checks that first_idx rises from 0 to values.size(0) and that shape_per_tensor (B, k >= 1),
  // when given, multiplies out to each member's row count (default: one ragged dim, the counts).
  RaggedTensor(at::Tensor values, at::Tensor first_idx, at::Tensor shape_per_tensor = {});

  // Packs tensors of shapes (*s_b, *feature) with ragged_dims = len(s_b) (one copy).
  static RaggedTensor from_list(at::TensorList tensors, int64_t ragged_dims = 1);
  // From padded (B, *max_shape, *feature) and shape_per_tensor (B, k) (or lengths (B,)).
  static RaggedTensor from_padded(const at::Tensor& padded, const at::Tensor& shape_per_tensor,
                                  std::string_view padding_side = "right");

  const at::Tensor& values() const { return values_; }
  const at::Tensor& first_idx() const { return first_idx_; }
  const at::Tensor& shape_per_tensor() const { return shape_per_tensor_; }
  int64_t size() const { return shape_per_tensor_.size(0); }  // B
  int64_t ragged_dims() const { return shape_per_tensor_.size(1); }
  int64_t numel() const { return values_.numel(); }  // the elements stored (no padding)
  at::IntArrayRef feature_shape() const { return values_.sizes().slice(1); }

  // (B, *max_shape, *feature); max_shape entries -1 take the largest member's size.
  at::Tensor padded(const at::Scalar& padding_value = 0,
                    at::OptionalIntArrayRef max_shape = std::nullopt,
                    std::string_view padding_side = "right") const;
  // (B, *max_shape) bool: true where padded() holds a member's element (padding_mask(): true on
  // padding, nn.MultiheadAttention's key_padding_mask).
  at::Tensor mask(at::OptionalIntArrayRef max_shape = std::nullopt,
                  std::string_view padding_side = "right") const;
  at::Tensor padding_mask(at::OptionalIntArrayRef max_shape = std::nullopt,
                          std::string_view padding_side = "right") const;
  // The members, as views of values.
  std::vector<at::Tensor> list() const;
  // Member b (negative counts from the end), a view.
  at::Tensor operator[](int64_t b) const;
  // Members index (1-D integer), packed by one kernel.
  RaggedTensor index_select(const at::Tensor& index) const;
  // Members start:stop (Python's r[a:b]: negative bounds from the end, clipped; nullopt: the first
  // / last), a RaggedTensor viewing the values.
  RaggedTensor slice(std::optional<int64_t> start, std::optional<int64_t> stop) const;
  // The members' row counts (B,): prod(shape_per_tensor[b]).
  at::Tensor lengths() const;
  // Members of several RaggedTensors of one feature shape, in order (one copy of the values).
  static RaggedTensor cat(const std::vector<RaggedTensor>& ragged);
  // Row k of every member (negative counts from the member's end): (B, *feature), Python's
  // r[:, k]. One ragged dim; IndexError naming the first member too short.
  at::Tensor row(int64_t k) const;
  // Rows start:stop:step of every member, each sliced as a Python sequence is (negative bounds from
  // its end, clipped; nullopt: its start / end; step >= 1): Python's r[:, start:stop:step]. One
  // ragged dim.
  RaggedTensor rows(std::optional<int64_t> start, std::optional<int64_t> stop,
                    int64_t step = 1) const;

  // The dims of r, numbered as Python's r.dim(): 0 the members, 1..k the ragged dims, then the
  // feature dims (values().dim() - 1 of them).
  int64_t dim() const { return 1 + ragged_dims() + values_.dim() - 1; }

  // Per member, over its ragged dims: (B, *feature).
  at::Tensor sum() const;
  at::Tensor mean() const;
  at::Tensor amax() const;
  at::Tensor amin() const;
  // Over feature dims `dim` (negative from the end) of every row: the same members, fewer feature
  // dims (size 1 with keepdim). Python's r.sum(dim=-1). Dim 0 (the members) or a ragged dim is
  // refused by name: each member reduced whole is sum() (a Tensor, (B, *feature)).
  RaggedTensor sum(at::IntArrayRef dim, bool keepdim = false) const;
  RaggedTensor mean(at::IntArrayRef dim, bool keepdim = false) const;
  RaggedTensor amax(at::IntArrayRef dim, bool keepdim = false) const;
  RaggedTensor amin(at::IntArrayRef dim, bool keepdim = false) const;
  // Per member: (values (B, *feature), row in the member holding each: -1 for an empty member);
  // Python's r.max() (its MemberExtremum). With one feature dim: (values, indices) along it, both
  // RaggedTensors (torch.max(values, dim)).
  std::tuple<at::Tensor, at::Tensor> max() const;
  std::tuple<at::Tensor, at::Tensor> min() const;
  std::tuple<RaggedTensor, RaggedTensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<RaggedTensor, RaggedTensor> min(int64_t dim, bool keepdim = false) const;
  // Each member's p-norm over its ragged dims, (B, *feature) (p > 0 or inf; 0 for an empty member,
  // gradient 0 at a zero norm as torch.linalg.vector_norm's); with dim, over those feature dims of
  // every row (torch.linalg.vector_norm).
  at::Tensor norm(double p = 2) const;
  RaggedTensor norm(double p, at::IntArrayRef dim, bool keepdim = false) const;

  // Normalised within each member, per feature column; with dim, along it: the ragged dim (one
  // ragged dim: within each member) or a feature dim (every row alone).
  RaggedTensor softmax() const;
  RaggedTensor log_softmax() const;
  RaggedTensor softmax(int64_t dim) const;
  RaggedTensor log_softmax(int64_t dim) const;

  // Scans along dim: the ragged dim (1, one ragged dim: within each member, segment_cumsum & co)
  // or a feature dim (torch.cumsum & co of every row). cummax / cummin: (values, indices), the
  // index along the ragged dim being the row within the member.
  RaggedTensor cumsum(int64_t dim) const;
  RaggedTensor cumprod(int64_t dim) const;
  RaggedTensor logcumsumexp(int64_t dim) const;
  std::tuple<RaggedTensor, RaggedTensor> cummax(int64_t dim) const;
  std::tuple<RaggedTensor, RaggedTensor> cummin(int64_t dim) const;

  // A new feature dim of size 1 at dim (after the ragged dims; negative from the end).
  RaggedTensor unsqueeze(int64_t dim) const;
  // This structure with member b's rows all per_member[b] ((B, *feature)):
  // r - r.broadcast_members(r.mean()) centres each member.
  RaggedTensor broadcast_members(const at::Tensor& per_member) const;

  // r @ weight (Python's r @ w, torch.matmul(r, w)): every row's last feature dim times a dense
  // weight of 1 or 2 dims (a batch of matrices would broadcast against the packed rows: refused),
  // the members' structure kept. Needs a feature dim.
  RaggedTensor matmul(const at::Tensor& weight) const;
  // Every value raised to `exponent` (torch.pow), the structure kept.
  RaggedTensor pow(const at::Scalar& exponent) const;

  // The same structure over other values (rows, ...): the result of elementwise math on values().
  RaggedTensor with_values(at::Tensor values) const;
  RaggedTensor to(const at::TensorOptions& options) const;
  RaggedTensor detach() const;
  RaggedTensor clone() const;
  // Python's r // other and torch.floor_divide (a method: C++ has no // operator).
  RaggedTensor floor_divide(const RaggedTensor& other) const;
  RaggedTensor floor_divide(const at::Tensor& other) const;
  RaggedTensor floor_divide(const at::Scalar& other) const;

 private:
  // Parts already known to be consistent (built by the methods): no checks.
  RaggedTensor(at::Tensor values, at::Tensor first_idx, at::Tensor shape_per_tensor, bool trusted);
  std::vector<int64_t> member_shape(int64_t b) const;
  // The values' dims of the feature dims `dim` names; refuses dim 0 and ragged dims by name.
  std::vector<int64_t> feature_dims(std::string_view where, at::IntArrayRef dim) const;
  RaggedTensor normalise(std::string_view where, int64_t dim, bool log) const;
  // The feature dim of values that dim names, or nullopt for the ragged dim (one ragged dim only).
  std::optional<int64_t> scan_dim(std::string_view where, int64_t dim) const;
  std::tuple<at::Tensor, at::Tensor> member_extremum(bool is_max) const;
  std::tuple<RaggedTensor, RaggedTensor> cum_extremum(std::string_view where, int64_t dim,
                                                      bool is_max) const;

  at::Tensor values_, first_idx_, shape_per_tensor_;
};

// Elementwise math: a RaggedTensor of the same members over the values' result. Two RaggedTensors
// must have one structure (equal first_idx and shape_per_tensor); a dense operand broadcasts over
// the feature dims only (one whose dims reach the packed rows would line up with rows, not members:
// refused, as `r + r.mean()` is in Python); a scalar is a number, as in torch's own operators.
#define TORCH_RAGGED_ELEMENTWISE_OPERATOR(op)                                              \
  TORCH_RAGGED_API RaggedTensor operator op(const RaggedTensor& a, const RaggedTensor& b); \
  TORCH_RAGGED_API RaggedTensor operator op(const RaggedTensor& a, const at::Tensor& b);   \
  TORCH_RAGGED_API RaggedTensor operator op(const at::Tensor& a, const RaggedTensor& b);   \
  TORCH_RAGGED_API RaggedTensor operator op(const RaggedTensor& a, const at::Scalar& b);   \
  TORCH_RAGGED_API RaggedTensor operator op(const at::Scalar& a, const RaggedTensor& b);
TORCH_RAGGED_ELEMENTWISE_OPERATOR(+)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(-)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(*)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(/)
// Python's % (torch.remainder: the sign of the divisor) and the bitwise operators (integer / bool).
TORCH_RAGGED_ELEMENTWISE_OPERATOR(%)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(&)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(|)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(^)
// Comparisons are elementwise too (as at::Tensor's): a bool RaggedTensor, e.g. `r != pad_id`.
TORCH_RAGGED_ELEMENTWISE_OPERATOR(==)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(!=)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(<)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(<=)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(>)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(>=)
#undef TORCH_RAGGED_ELEMENTWISE_OPERATOR
TORCH_RAGGED_API RaggedTensor operator-(const RaggedTensor& r);
TORCH_RAGGED_API RaggedTensor operator~(const RaggedTensor& r);

}  // namespace torch_ragged
