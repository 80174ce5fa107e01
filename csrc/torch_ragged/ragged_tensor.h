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

#include <string_view>
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

  // (B, *max_shape, *feature); max_shape entries -1 take the largest member's size.
  at::Tensor padded(const at::Scalar& padding_value = 0,
                    at::OptionalIntArrayRef max_shape = std::nullopt,
                    std::string_view padding_side = "right") const;
  // The members, as views of values.
  std::vector<at::Tensor> list() const;
  // Member b (negative counts from the end), a view.
  at::Tensor operator[](int64_t b) const;
  // Members index (1-D integer), packed by one kernel.
  RaggedTensor index_select(const at::Tensor& index) const;
  // Row k of every member (negative counts from the member's end): (B, *feature), Python's
  // r[:, k]. One ragged dim; IndexError naming the first member too short.
  at::Tensor row(int64_t k) const;

  // Per member, over its ragged dims: (B, *feature).
  at::Tensor sum() const;
  at::Tensor mean() const;
  at::Tensor amax() const;
  at::Tensor amin() const;
  // Normalised within each member, per feature column.
  RaggedTensor softmax() const;
  RaggedTensor log_softmax() const;

  // The same structure over other values (rows, ...): the result of elementwise math on values().
  RaggedTensor with_values(at::Tensor values) const;
  RaggedTensor to(const at::TensorOptions& options) const;

 private:
  // Parts already known to be consistent (built by the methods): no checks.
  RaggedTensor(at::Tensor values, at::Tensor first_idx, at::Tensor shape_per_tensor, bool trusted);
  std::vector<int64_t> member_shape(int64_t b) const;

  at::Tensor values_, first_idx_, shape_per_tensor_;
};

}  // namespace torch_ragged
