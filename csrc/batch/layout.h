#pragma once

// Host-side description of a ragged batch, built from the index tensors after validating them.
// Backends (CPU now, CUDA later) validate with these functions before any kernel runs, then hand
// the flat arrays to the index math of batch/batch_index.h.

#include <ATen/ATen.h>

#include <optional>
#include <string_view>
#include <vector>

namespace torch_ragged {

struct RaggedLayout {
  int64_t batch = 0;               // B, number of sub-tensors
  int64_t rank = 0;                // k, ragged dims per sub-tensor (the element dim C excluded)
  int64_t elem = 0;                // C, the element size (last dim)
  std::vector<int64_t> shapes;     // B x k, row-major: shape of each sub-tensor
  std::vector<int64_t> first_row;  // B + 1: packed row where each sub-tensor starts, then the total
  std::vector<int64_t> max_shape;  // k: the padded dims M_1..M_k
  std::vector<int64_t> offsets;    // B x k: start of each sub-tensor in each padded dim

  const int64_t* shape_of(int64_t b) const { return shapes.data() + b * rank; }
  const int64_t* offset_of(int64_t b) const { return offsets.data() + b * rank; }
  int64_t num_rows() const { return first_row.back(); }
  // The padded tensor's shape (B, M_1..M_k, C).
  std::vector<int64_t> padded_sizes() const;
  // shapes as Kaolin's shape_per_tensor: a (B, k) int64 CPU tensor.
  at::Tensor shape_per_tensor() const;
};

// Validates shape_per_tensor ((B, k) integer, entries >= 0) and fills batch, rank, shapes and
// first_row (the exclusive scan of prod(shape)).
RaggedLayout layout_from_shape_per_tensor(std::string_view op, const at::Tensor& shape_per_tensor,
                                          int64_t elem);

// Checks that first_idx is (B + 1,) with first_idx[0] = 0, steps equal to prod(shape) of each
// sub-tensor, and a last entry equal to the packed tensor's row count.
void check_first_idx(std::string_view op, const RaggedLayout& layout, const at::Tensor& first_idx,
                     int64_t packed_rows);

// Sets max_shape (entries -1 or absent = the largest sub-tensor's size; a smaller entry is an
// error) and the per-sub-tensor offsets for the padding side.
void resolve_padded_shape(std::string_view op, RaggedLayout& layout,
                          std::optional<std::vector<int64_t>> max_shape, bool left);

// Validates that a padded tensor (B, M_1..M_k, C) holds every sub-tensor, then sets max_shape and
// offsets from its sizes.
void adopt_padded_shape(std::string_view op, RaggedLayout& layout, const at::Tensor& padded,
                        bool left);

// The layout of a list of tensors of equal dtype, rank >= 1 and last dim.
RaggedLayout layout_from_tensor_list(std::string_view op, at::TensorList tensors);

// ---- each op's checked layout, shared by its CPU and CUDA kernels ----

RaggedLayout list_to_padded_layout(at::TensorList tensor_list, at::OptionalSymIntArrayRef max_shape,
                                   std::string_view padding_side);
RaggedLayout packed_to_padded_layout(const at::Tensor& packed_tensor,
                                     const at::Tensor& shape_per_tensor,
                                     const at::Tensor& first_idx,
                                     at::OptionalSymIntArrayRef max_shape,
                                     std::string_view padding_side);
RaggedLayout padded_to_packed_layout(const at::Tensor& padded_tensor,
                                     const at::Tensor& shape_per_tensor,
                                     std::string_view padding_side,
                                     const std::optional<c10::SymInt>& num_rows);

// ---- host helpers shared by the CPU and CUDA kernels of the family ----

// padding_value checks and bytes: check_fill_value / fill_value_bytes (common/fill.h).

std::vector<at::Tensor> contiguous_all(at::TensorList tensors);

// max_shape as integers (nullopt: not given).
std::optional<std::vector<int64_t>> requested_max_shape(std::string_view op,
                                                        at::OptionalSymIntArrayRef max_shape);

// A given num_rows must equal the rows the sub-tensors hold.
void check_num_rows(std::string_view op, const std::optional<c10::SymInt>& num_rows,
                    int64_t actual);

}  // namespace torch_ragged
