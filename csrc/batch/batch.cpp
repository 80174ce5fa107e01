// Schemas of the batch family, its C++ API, and its composite ops (the list / view helpers).

#include <torch/library.h>
#include <torch_ragged/batch.h>

#include <algorithm>
#include <vector>

#include "batch/batch_ops.h"
#include "batch/layout.h"
#include "common/checks.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("get_shape_per_tensor(Tensor[] tensor_list) -> Tensor", tags);
  m.def("fill_max_shape(Tensor shape_per_tensor, SymInt[]? partial_max_shape=None) -> Tensor",
        tags);
  m.def("list_to_packed(Tensor[] tensor_list) -> (Tensor, Tensor)", tags);
  m.def(
      "list_to_padded(Tensor[] tensor_list, Scalar padding_value, SymInt[]? max_shape=None, "
      "str padding_side=\"right\") -> (Tensor, Tensor)",
      tags);
  m.def(
      "packed_to_list(Tensor(a) packed_tensor, Tensor shape_per_tensor, Tensor first_idx) "
      "-> Tensor(a)[]",
      tags);
  m.def(
      "packed_to_padded(Tensor packed_tensor, Tensor shape_per_tensor, Tensor first_idx, "
      "Scalar padding_value, SymInt[]? max_shape=None, str padding_side=\"right\") -> Tensor",
      tags);
  m.def(
      "padded_to_list(Tensor(a) padded_tensor, Tensor shape_per_tensor, "
      "str padding_side=\"right\") -> Tensor(a)[]",
      tags);
  m.def(
      "padded_to_packed(Tensor padded_tensor, Tensor shape_per_tensor, "
      "str padding_side=\"right\", SymInt? num_rows=None) -> Tensor",
      tags);
  m.def("tile_to_packed(Tensor values, Tensor numel_per_tensor, SymInt? num_rows=None) -> Tensor",
        tags);
}

// The ops with CPU / CUDA kernels (the rest are composites of them).
constexpr const char* kKernelOps[] = {"list_to_packed", "list_to_padded", "packed_to_padded",
                                      "padded_to_packed"};

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kKernelOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kKernelOps);
}

namespace {

c10::SymInt entry(const at::Tensor& t, int64_t i, int64_t j) {
  return t.select(0, i).select(0, j).item().toSymInt();
}

// ---- get_shape_per_tensor, fill_max_shape (CompositeExplicitAutograd; fake kernels in Python)
// ----

at::Tensor get_shape_per_tensor_impl(at::TensorList tensor_list) {
  return layout_from_tensor_list("get_shape_per_tensor", tensor_list).shape_per_tensor();
}

// Without partial_max_shape, the column maxima in one pass (fill_max_shape needs neither row
// offsets nor products); with it, or for a negative size (an error naming the sub-tensor), the
// layout's checks.
at::Tensor fill_max_shape_impl(const at::Tensor& shape_per_tensor,
                               at::OptionalSymIntArrayRef partial_max_shape) {
  constexpr std::string_view op = "fill_max_shape";
  const at::Tensor host = index_tensor_on_host(op, "shape_per_tensor", shape_per_tensor, 2);
  const int64_t batch = host.size(0), rank = host.size(1);
  const int64_t* shapes = host.const_data_ptr<int64_t>();
  at::Tensor out = at::zeros({rank}, host.options());
  int64_t* largest = out.mutable_data_ptr<int64_t>();
  bool negative = false;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < rank; ++j) {
      largest[j] = std::max(largest[j], shapes[b * rank + j]);
      negative |= shapes[b * rank + j] < 0;
    }
  }
  if (negative || partial_max_shape.has_value()) {
    RaggedLayout layout = layout_from_shape_per_tensor(op, shape_per_tensor, 0);
    std::optional<std::vector<int64_t>> requested;
    if (partial_max_shape.has_value()) {
      requested = concrete_sizes(op, "partial_max_shape", *partial_max_shape);
    }
    resolve_padded_shape(op, layout, requested, /*left=*/false);
    std::copy(layout.max_shape.begin(), layout.max_shape.end(), largest);
  }
  return out.to(shape_per_tensor.device());
}

// ---- packed_to_list, padded_to_list (CompositeImplicitAutograd: views, differentiable) ----

// Traced with symbolic index tensors (torch.compile / torch.export): sizes are read from
// shape_per_tensor (unbacked SymInts, each bound to an output size) and the row offsets are their
// sizes split the rows, so the op creates no symbol its outputs do not carry (export rejects
// those). first_idx must equal that running sum (check_first_idx's rule); it is checked when the
// graph runs.
std::vector<at::Tensor> packed_to_list_symbolic(const at::Tensor& packed,
                                                const at::Tensor& shape_per_tensor,
                                                const at::Tensor& first_idx) {
  const at::Tensor rows = shape_per_tensor.prod(1).to(first_idx.scalar_type());
  const at::Tensor offsets = at::cat({rows.new_zeros({1}), rows.cumsum(0)});
  TORCH_SYM_CHECK(first_idx.sym_numel().sym_eq(offsets.sym_numel()),
                  "torch_ragged.packed_to_list: first_idx must hold shape_per_tensor.size(0) + 1 "
                  "entries");
  at::_assert_async(first_idx.eq(offsets).all(),
                    "torch_ragged.packed_to_list: first_idx must be the running sum of the "
                    "sub-tensors' row counts (shape_per_tensor), starting at 0");
  const int64_t batch = shape_per_tensor.size(0), rank = shape_per_tensor.size(1);
  std::vector<std::vector<c10::SymInt>> shapes(batch);
  std::vector<c10::SymInt> counts;
  for (int64_t b = 0; b < batch; ++b) {
    c10::SymInt count = 1;
    for (int64_t j = 0; j < rank; ++j) {
      shapes[b].push_back(entry(shape_per_tensor, b, j));
      count = count * shapes[b].back();
    }
    shapes[b].push_back(packed.sym_size(1));
    counts.push_back(count);
  }
  // split (not narrow at a running offset): slicing at an unbacked start mints a new size symbol.
  std::vector<at::Tensor> out = packed.split_with_sizes_symint(counts, 0);
  for (int64_t b = 0; b < batch; ++b) out[b] = out[b].view_symint(shapes[b]);
  return out;
}

std::vector<at::Tensor> packed_to_list_impl(const at::Tensor& packed,
                                            const at::Tensor& shape_per_tensor,
                                            const at::Tensor& first_idx) {
  check_defined("packed_to_list", "packed_tensor", packed);
  TORCH_CHECK_VALUE(packed.dim() == 2, "torch_ragged.packed_to_list: packed_tensor must be 2-D ",
                    "(rows, element), got shape ", packed.sizes());
  check_index_device("packed_to_list", "shape_per_tensor", shape_per_tensor, packed.device());
  check_index_device("packed_to_list", "first_idx", first_idx, packed.device());
  if (is_symbolic(shape_per_tensor) || is_symbolic(first_idx)) {
    return packed_to_list_symbolic(packed, shape_per_tensor, first_idx);
  }
  const RaggedLayout layout =
      layout_from_shape_per_tensor("packed_to_list", shape_per_tensor, packed.size(1));
  check_first_idx("packed_to_list", layout, first_idx, packed.size(0));
  // one split (its views made in one loop), then a view only where a member has more than one
  // packed dim: a narrow + reshape per member costs ~2 us more per member
  std::vector<int64_t> rows(layout.batch);
  for (int64_t b = 0; b < layout.batch; ++b)
    rows[b] = layout.first_row[b + 1] - layout.first_row[b];
  std::vector<at::Tensor> out = packed.split_with_sizes(rows, 0);
  for (int64_t b = 0; b < layout.batch && layout.rank != 1; ++b) {
    std::vector<int64_t> shape(layout.shape_of(b), layout.shape_of(b) + layout.rank);
    shape.push_back(layout.elem);
    out[b] = out[b].view(shape);
  }
  return out;
}

std::vector<at::Tensor> padded_to_list_symbolic(const at::Tensor& padded,
                                                const at::Tensor& shape_per_tensor, bool left) {
  std::vector<at::Tensor> out;
  const int64_t batch = shape_per_tensor.size(0), rank = shape_per_tensor.size(1);
  for (int64_t b = 0; b < batch; ++b) {
    at::Tensor item = padded.select(0, b);
    for (int64_t j = 0; j < rank; ++j) {
      const c10::SymInt size = entry(shape_per_tensor, b, j);
      const c10::SymInt start = left ? item.sym_size(j) - size : c10::SymInt(0);
      item = item.narrow_symint(j, start, size);
    }
    out.push_back(item);
  }
  return out;
}

std::vector<at::Tensor> padded_to_list_impl(const at::Tensor& padded,
                                            const at::Tensor& shape_per_tensor,
                                            c10::string_view padding_side) {
  const bool left = is_left_padding("padded_to_list", padding_side);
  check_defined("padded_to_list", "padded_tensor", padded);
  check_index_device("padded_to_list", "shape_per_tensor", shape_per_tensor, padded.device());
  if (is_symbolic(shape_per_tensor)) {
    return padded_to_list_symbolic(padded, shape_per_tensor, left);
  }
  RaggedLayout layout = layout_from_shape_per_tensor("padded_to_list", shape_per_tensor,
                                                     padded.dim() > 0 ? padded.size(-1) : 0);
  adopt_padded_shape("padded_to_list", layout, padded, left);
  std::vector<at::Tensor> out;
  out.reserve(layout.batch);
  for (int64_t b = 0; b < layout.batch; ++b) {
    at::Tensor item = padded.select(0, b);
    for (int64_t j = 0; j < layout.rank; ++j) {
      item = item.narrow(j, layout.offset_of(b)[j], layout.shape_of(b)[j]);
    }
    out.push_back(item);
  }
  return out;
}

// ---- tile_to_packed: Kaolin's name for segment_expand over counts (CompositeImplicitAutograd)
// ----

at::Tensor tile_to_packed_impl(const at::Tensor& values, const at::Tensor& numel_per_tensor,
                               std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "tile_to_packed";
  check_index_tensor(op, "numel_per_tensor", numel_per_tensor, 1);
  check_defined(op, "values", values);
  check_index_device(op, "numel_per_tensor", numel_per_tensor, values.device());
  TORCH_CHECK_VALUE(values.dim() >= 1 && values.sym_size(0) == numel_per_tensor.sym_size(0),
                    "torch_ragged.tile_to_packed: values must have numel_per_tensor.size(0) = ",
                    numel_per_tensor.sym_size(0), " entries in dim 0, got shape ",
                    values.sym_sizes());
  // On a GPU with num_rows given, segment_expand checks the offsets on the device (a negative
  // count shows as a decrease), so the scan need not read a validation flag on the host.
  const bool validate = !(numel_per_tensor.is_cuda() && num_rows.has_value());
  const at::Tensor out = as_op(op, [&] {
    const at::Tensor first_idx = ops::get_first_idx(numel_per_tensor, validate);
    return ops::segment_expand(values, first_idx, std::move(num_rows));
  });
  return values.dim() == 1 ? out.unsqueeze(1) : out;  // Kaolin: (B,) -> (rows, 1)
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  m.impl("get_shape_per_tensor", &get_shape_per_tensor_impl);
  m.impl("fill_max_shape", &fill_max_shape_impl);
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("packed_to_list", &packed_to_list_impl);
  m.impl("padded_to_list", &padded_to_list_impl);
  m.impl("tile_to_packed", &tile_to_packed_impl);
}

// ---- Typed dispatcher calls ----

namespace ops {

std::tuple<at::Tensor, at::Tensor> list_to_packed(at::TensorList tensor_list) {
  static auto op =
      op_handle<std::tuple<at::Tensor, at::Tensor>(at::TensorList)>("torch_ragged::list_to_packed");
  return op.call(tensor_list);
}

std::tuple<at::Tensor, at::Tensor> list_to_padded(at::TensorList tensor_list,
                                                  const at::Scalar& padding_value,
                                                  at::OptionalSymIntArrayRef max_shape,
                                                  c10::string_view padding_side) {
  static auto op = op_handle<std::tuple<at::Tensor, at::Tensor>(
      at::TensorList, const at::Scalar&, at::OptionalSymIntArrayRef, c10::string_view)>(
      "torch_ragged::list_to_padded");
  return op.call(tensor_list, padding_value, max_shape, padding_side);
}

std::vector<at::Tensor> packed_to_list(const at::Tensor& packed_tensor,
                                       const at::Tensor& shape_per_tensor,
                                       const at::Tensor& first_idx) {
  static auto op =
      op_handle<std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
          "torch_ragged::packed_to_list");
  return op.call(packed_tensor, shape_per_tensor, first_idx);
}

at::Tensor packed_to_padded(const at::Tensor& packed_tensor, const at::Tensor& shape_per_tensor,
                            const at::Tensor& first_idx, const at::Scalar& padding_value,
                            at::OptionalSymIntArrayRef max_shape, c10::string_view padding_side) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Scalar&, at::OptionalSymIntArrayRef, c10::string_view)>(
          "torch_ragged::packed_to_padded");
  return op.call(packed_tensor, shape_per_tensor, first_idx, padding_value, max_shape,
                 padding_side);
}

std::vector<at::Tensor> padded_to_list(const at::Tensor& padded_tensor,
                                       const at::Tensor& shape_per_tensor,
                                       c10::string_view padding_side) {
  static auto op =
      op_handle<std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, c10::string_view)>(
          "torch_ragged::padded_to_list");
  return op.call(padded_tensor, shape_per_tensor, padding_side);
}

at::Tensor padded_to_packed(const at::Tensor& padded_tensor, const at::Tensor& shape_per_tensor,
                            c10::string_view padding_side, std::optional<c10::SymInt> num_rows) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view,
                           std::optional<c10::SymInt>)>("torch_ragged::padded_to_packed");
  return op.call(padded_tensor, shape_per_tensor, padding_side, std::move(num_rows));
}

at::Tensor tile_to_packed(const at::Tensor& values, const at::Tensor& numel_per_tensor,
                          std::optional<c10::SymInt> num_rows) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, std::optional<c10::SymInt>)>(
          "torch_ragged::tile_to_packed");
  return op.call(values, numel_per_tensor, std::move(num_rows));
}

}  // namespace ops

// ---- Public C++ API (int sizes, converted to the schema's SymInts) ----

static at::OptionalSymIntArrayRef as_sym(at::OptionalIntArrayRef sizes) {
  if (!sizes.has_value()) return std::nullopt;
  return c10::fromIntArrayRefSlow(*sizes);
}

static std::optional<c10::SymInt> as_sym(std::optional<int64_t> n) {
  if (!n.has_value()) return std::nullopt;
  return c10::SymInt(*n);
}

// An empty list has no tensor to pick a dispatch key from: say so before the dispatcher does.
static void check_not_empty(const char* op, at::TensorList tensor_list) {
  TORCH_CHECK_VALUE(!tensor_list.empty(), "torch_ragged.", op,
                    ": tensor_list must hold at least one tensor (the dtype and element size of an "
                    "empty batch are unknown)");
}

at::Tensor get_shape_per_tensor(at::TensorList tensor_list) {
  check_not_empty("get_shape_per_tensor", tensor_list);
  static auto op = op_handle<at::Tensor(at::TensorList)>("torch_ragged::get_shape_per_tensor");
  return op.call(tensor_list);
}

at::Tensor fill_max_shape(const at::Tensor& shape_per_tensor,
                          at::OptionalIntArrayRef partial_max_shape) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, at::OptionalSymIntArrayRef)>(
      "torch_ragged::fill_max_shape");
  return op.call(shape_per_tensor, as_sym(partial_max_shape));
}

std::tuple<at::Tensor, at::Tensor> list_to_packed(at::TensorList tensor_list) {
  check_not_empty("list_to_packed", tensor_list);
  return ops::list_to_packed(tensor_list);
}

std::tuple<at::Tensor, at::Tensor> list_to_padded(at::TensorList tensor_list,
                                                  const at::Scalar& padding_value,
                                                  at::OptionalIntArrayRef max_shape,
                                                  std::string_view padding_side) {
  check_not_empty("list_to_padded", tensor_list);
  return ops::list_to_padded(tensor_list, padding_value, as_sym(max_shape), padding_side);
}

std::vector<at::Tensor> packed_to_list(const at::Tensor& packed_tensor,
                                       const at::Tensor& shape_per_tensor,
                                       const at::Tensor& first_idx) {
  return ops::packed_to_list(packed_tensor, shape_per_tensor, first_idx);
}

at::Tensor packed_to_padded(const at::Tensor& packed_tensor, const at::Tensor& shape_per_tensor,
                            const at::Tensor& first_idx, const at::Scalar& padding_value,
                            at::OptionalIntArrayRef max_shape, std::string_view padding_side) {
  return ops::packed_to_padded(packed_tensor, shape_per_tensor, first_idx, padding_value,
                               as_sym(max_shape), padding_side);
}

std::vector<at::Tensor> padded_to_list(const at::Tensor& padded_tensor,
                                       const at::Tensor& shape_per_tensor,
                                       std::string_view padding_side) {
  return ops::padded_to_list(padded_tensor, shape_per_tensor, padding_side);
}

at::Tensor padded_to_packed(const at::Tensor& padded_tensor, const at::Tensor& shape_per_tensor,
                            std::string_view padding_side, std::optional<int64_t> num_rows) {
  return ops::padded_to_packed(padded_tensor, shape_per_tensor, padding_side, as_sym(num_rows));
}

at::Tensor tile_to_packed(const at::Tensor& values, const at::Tensor& numel_per_tensor,
                          std::optional<int64_t> num_rows) {
  return ops::tile_to_packed(values, numel_per_tensor, as_sym(num_rows));
}

}  // namespace torch_ragged
