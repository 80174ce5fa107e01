#include "batch/layout.h"

#include <ATen/Dispatch_v2.h>

#include <cmath>
#include <limits>

#include "common/checks.h"
#include "segment/offsets.h"

namespace torch_ragged {

std::vector<int64_t> RaggedLayout::padded_sizes() const {
  std::vector<int64_t> sizes{batch};
  sizes.insert(sizes.end(), max_shape.begin(), max_shape.end());
  sizes.push_back(elem);
  return sizes;
}

at::Tensor RaggedLayout::shape_per_tensor() const {
  return at::tensor(shapes, at::kLong).view({batch, rank});
}

// first_row: the offsets of prod(shape) per sub-tensor (overflow-checked).
static void fill_first_rows(std::string_view op, std::string_view arg, RaggedLayout& layout) {
  std::vector<int64_t> rows(layout.batch);
  for (int64_t b = 0; b < layout.batch; ++b) {
    uint64_t product = 1;
    TORCH_CHECK_VALUE(
        !c10::safe_multiplies_u64(layout.shape_of(b), layout.shape_of(b) + layout.rank, &product) &&
            product <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
        "torch_ragged.", op, ": ", arg, " gives sub-tensor ", b, " more than 2^63 - 1 rows");
    rows[b] = static_cast<int64_t>(product);
  }
  layout.first_row = offsets_from_counts(op, arg, rows.data(), layout.batch);
}

RaggedLayout layout_from_shape_per_tensor(std::string_view op, const at::Tensor& shape_per_tensor,
                                          int64_t elem) {
  const at::Tensor host = index_tensor_on_host(op, "shape_per_tensor", shape_per_tensor, 2);
  RaggedLayout layout;
  layout.batch = host.size(0);
  layout.rank = host.size(1);
  layout.elem = elem;
  const int64_t* data = host.const_data_ptr<int64_t>();
  layout.shapes.assign(data, data + host.numel());
  for (int64_t b = 0; b < layout.batch; ++b) {
    for (int64_t j = 0; j < layout.rank; ++j) {
      TORCH_CHECK_VALUE(layout.shape_of(b)[j] >= 0, "torch_ragged.", op,
                        ": shape_per_tensor must be non-negative, got ", layout.shape_of(b)[j],
                        " for sub-tensor ", b, " in dim ", j);
    }
  }
  fill_first_rows(op, "shape_per_tensor", layout);
  return layout;
}

void check_first_idx(std::string_view op, const RaggedLayout& layout, const at::Tensor& first_idx,
                     int64_t packed_rows) {
  const at::Tensor host = index_tensor_on_host(op, "first_idx", first_idx, 1);
  TORCH_CHECK_VALUE(
      host.size(0) == layout.batch + 1, "torch_ragged.", op,
      ": first_idx must be 1-D (an integer tensor) with shape_per_tensor.size(0) + 1 = ",
      layout.batch + 1, " entries, got shape ", first_idx.sizes());
  const int64_t* idx = host.const_data_ptr<int64_t>();
  TORCH_CHECK_VALUE(idx[0] == 0, "torch_ragged.", op, ": first_idx[0] must be 0, got ", idx[0]);
  for (int64_t b = 0; b < layout.batch; ++b) {
    const int64_t rows = layout.first_row[b + 1] - layout.first_row[b];
    TORCH_CHECK_VALUE(idx[b + 1] >= idx[b], "torch_ragged.", op,
                      ": first_idx must be non-decreasing, got first_idx[", b, "] = ", idx[b],
                      " > first_idx[", b + 1, "] = ", idx[b + 1]);
    TORCH_CHECK_VALUE(idx[b + 1] - idx[b] == rows, "torch_ragged.", op,
                      ": first_idx gives sub-tensor ", b, " ", idx[b + 1] - idx[b],
                      " rows but shape_per_tensor gives prod(",
                      at::IntArrayRef(layout.shape_of(b), layout.rank), ") = ", rows);
  }
  TORCH_CHECK_VALUE(idx[layout.batch] == packed_rows, "torch_ragged.", op,
                    ": first_idx[-1] = ", idx[layout.batch],
                    " must equal the packed tensor's row count ", packed_rows);
}

static void set_offsets(RaggedLayout& layout, bool left) {
  layout.offsets.assign(layout.batch * layout.rank, 0);
  if (!left) return;
  for (int64_t b = 0; b < layout.batch; ++b) {
    for (int64_t j = 0; j < layout.rank; ++j) {
      layout.offsets[b * layout.rank + j] = layout.max_shape[j] - layout.shape_of(b)[j];
    }
  }
}

void resolve_padded_shape(std::string_view op, RaggedLayout& layout,
                          std::optional<std::vector<int64_t>> max_shape, bool left) {
  const int64_t k = layout.rank;
  if (max_shape.has_value()) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(max_shape->size()) == k, "torch_ragged.", op,
                      ": max_shape must have shape_per_tensor.size(1) = ", k, " entries, got ",
                      max_shape->size());
  }
  layout.max_shape.assign(k, 0);
  for (int64_t j = 0; j < k; ++j) {
    int64_t largest = 0;
    for (int64_t b = 0; b < layout.batch; ++b) largest = std::max(largest, layout.shape_of(b)[j]);
    const int64_t requested = max_shape.has_value() ? (*max_shape)[j] : -1;
    TORCH_CHECK_VALUE(requested >= -1, "torch_ragged.", op, ": max_shape[", j,
                      "] must be >= 0, or -1 / None for the largest size, got ", requested);
    if (requested == -1) {
      layout.max_shape[j] = largest;
      continue;
    }
    for (int64_t b = 0; b < layout.batch; ++b) {
      TORCH_CHECK_VALUE(layout.shape_of(b)[j] <= requested, "torch_ragged.", op, ": max_shape[", j,
                        "] = ", requested, " is smaller than sub-tensor ", b, "'s size ",
                        layout.shape_of(b)[j], " in dim ", j, "; padding never truncates");
    }
    layout.max_shape[j] = requested;
  }
  set_offsets(layout, left);
}

void adopt_padded_shape(std::string_view op, RaggedLayout& layout, const at::Tensor& padded,
                        bool left) {
  const int64_t k = layout.rank;
  TORCH_CHECK_VALUE(padded.dim() == k + 2, "torch_ragged.", op,
                    ": padded_tensor must have shape_per_tensor.size(1) + 2 = ", k + 2,
                    " dims (batch, ragged dims, element), got shape ", padded.sizes());
  TORCH_CHECK_VALUE(padded.size(0) == layout.batch, "torch_ragged.", op,
                    ": padded_tensor.size(0) must equal the number of sub-tensors ", layout.batch,
                    ", got shape ", padded.sizes());
  layout.max_shape.assign(k, 0);
  for (int64_t j = 0; j < k; ++j) {
    layout.max_shape[j] = padded.size(j + 1);
    for (int64_t b = 0; b < layout.batch; ++b) {
      TORCH_CHECK_VALUE(layout.shape_of(b)[j] <= layout.max_shape[j], "torch_ragged.", op,
                        ": padded_tensor is smaller than sub-tensor ", b, ": its dim ", j + 1,
                        " has size ", layout.max_shape[j], " but shape_per_tensor gives ",
                        layout.shape_of(b)[j]);
    }
  }
  set_offsets(layout, left);
}

RaggedLayout layout_from_tensor_list(std::string_view op, at::TensorList tensors) {
  TORCH_CHECK_VALUE(!tensors.empty(), "torch_ragged.", op,
                    ": tensor_list must hold at least one tensor (the dtype and element size of "
                    "an empty batch are unknown)");
  const at::Tensor& first = tensors[0];
  TORCH_CHECK_VALUE(
      first.dim() >= 1, "torch_ragged.", op,
      ": tensors must have at least 1 dim (the last is the element), tensor 0 is 0-D");
  RaggedLayout layout;
  layout.batch = static_cast<int64_t>(tensors.size());
  layout.rank = first.dim() - 1;
  layout.elem = first.size(-1);
  layout.shapes.reserve(layout.batch * layout.rank);
  for (int64_t b = 0; b < layout.batch; ++b) {
    const at::Tensor& t = tensors[b];
    TORCH_CHECK_TYPE(t.scalar_type() == first.scalar_type(), "torch_ragged.", op,
                     ": tensors must share one dtype, tensor 0 is ", first.scalar_type(),
                     " but tensor ", b, " is ", t.scalar_type());
    TORCH_CHECK_VALUE(t.device() == first.device(), "torch_ragged.", op,
                      ": tensors must share one device, tensor 0 is on ", first.device(),
                      " but tensor ", b, " is on ", t.device());
    // The parenthesised phrases are Kaolin's (torch.stack / torch.cat) messages for the same
    // mistakes, so code matching them keeps working.
    TORCH_CHECK_VALUE(t.dim() == first.dim(), "torch_ragged.", op,
                      ": tensors must share one number of dims, tensor 0 has ", first.dim(),
                      " but tensor ", b, " has ", t.dim(), " (Expected all tensors to have ",
                      first.dim(), " dimensions but got ", t.dim(), " at index ", b, ")");
    TORCH_CHECK_VALUE(
        t.size(-1) == layout.elem, "torch_ragged.", op,
        ": tensors must share the last dim (element size), tensor 0 has ", layout.elem,
        " but tensor ", b, " has ", t.size(-1), " (Expected all tensor to have last dimension ",
        layout.elem, " but got ", t.size(-1), " at index ", b,
        "; Sizes of tensors must match except in dimension 0. Expected size ", layout.elem,
        " but got size ", t.size(-1), " for tensor number ", b, " in the list.)");
    for (int64_t j = 0; j < layout.rank; ++j) layout.shapes.push_back(t.size(j));
  }
  fill_first_rows(op, "tensor_list", layout);
  return layout;
}

std::vector<at::Tensor> contiguous_all(at::TensorList tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.contiguous());
  return out;
}

std::optional<std::vector<int64_t>> requested_max_shape(std::string_view op,
                                                        at::OptionalSymIntArrayRef max_shape) {
  if (!max_shape.has_value()) return std::nullopt;
  return concrete_sizes(op, "max_shape", *max_shape);
}

void check_num_rows(std::string_view op, const std::optional<c10::SymInt>& num_rows,
                    int64_t actual) {
  if (!num_rows.has_value()) return;
  const auto given = num_rows->maybe_as_int();
  TORCH_CHECK_VALUE(!given.has_value() || *given == actual, "torch_ragged.", op,
                    ": num_rows = ", *given, " but the sub-tensors hold ", actual, " rows");
}

RaggedLayout list_to_padded_layout(at::TensorList tensor_list, at::OptionalSymIntArrayRef max_shape,
                                   std::string_view padding_side) {
  constexpr std::string_view op = "list_to_padded";
  const bool left = is_left_padding(op, padding_side);
  RaggedLayout layout = layout_from_tensor_list(op, tensor_list);
  resolve_padded_shape(op, layout, requested_max_shape(op, max_shape), left);
  check_numel_fits(op, "the padded output", layout.padded_sizes());
  return layout;
}

RaggedLayout packed_to_padded_layout(const at::Tensor& packed_tensor,
                                     const at::Tensor& shape_per_tensor,
                                     const at::Tensor& first_idx,
                                     at::OptionalSymIntArrayRef max_shape,
                                     std::string_view padding_side) {
  constexpr std::string_view op = "packed_to_padded";
  const bool left = is_left_padding(op, padding_side);
  TORCH_CHECK_VALUE(packed_tensor.dim() == 2, "torch_ragged.packed_to_padded: packed_tensor must ",
                    "be 2-D (rows, element), got shape ", packed_tensor.sizes());
  RaggedLayout layout = layout_from_shape_per_tensor(op, shape_per_tensor, packed_tensor.size(1));
  check_first_idx(op, layout, first_idx, packed_tensor.size(0));
  resolve_padded_shape(op, layout, requested_max_shape(op, max_shape), left);
  check_numel_fits(op, "the padded output", layout.padded_sizes());
  return layout;
}

RaggedLayout padded_to_packed_layout(const at::Tensor& padded_tensor,
                                     const at::Tensor& shape_per_tensor,
                                     std::string_view padding_side,
                                     const std::optional<c10::SymInt>& num_rows) {
  constexpr std::string_view op = "padded_to_packed";
  const bool left = is_left_padding(op, padding_side);
  RaggedLayout layout = layout_from_shape_per_tensor(
      op, shape_per_tensor, padded_tensor.dim() > 0 ? padded_tensor.size(-1) : 0);
  adopt_padded_shape(op, layout, padded_tensor, left);
  check_num_rows(op, num_rows, layout.num_rows());
  return layout;
}

}  // namespace torch_ragged
