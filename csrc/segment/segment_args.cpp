#include "segment/segment_args.h"

#include "common/checks.h"
#include "segment/offsets.h"

namespace torch_ragged {

bool has_kernels_for(SegmentDtypes dtypes, at::ScalarType t) {
  // the dtypes the kernels are dispatched over (AT_DISPATCH_V2 lists in segment_cpu.cpp and
  // cuda/segment_cuda.cu): not complex32, float8 or the bit / quantized types
  const bool is_float = t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
  switch (dtypes) {
    case SegmentDtypes::kSummable:
      return is_float || at::isIntegralType(t, /*includeBool=*/false) || t == at::kComplexFloat ||
             t == at::kComplexDouble;
    case SegmentDtypes::kOrdered:
      return is_float || at::isIntegralType(t, /*includeBool=*/true);
    case SegmentDtypes::kFloating:
      return is_float;
  }
  return false;
}

static const char* expected_dtypes(SegmentDtypes dtypes) {
  switch (dtypes) {
    case SegmentDtypes::kSummable:
      return "an integer, float, double, half, bfloat16 or complex64 / complex128 dtype (bool is "
             "not summed: convert it, e.g. data.long())";
    case SegmentDtypes::kOrdered:
      return "a real dtype (bool, integer, float, double, half or bfloat16)";
    case SegmentDtypes::kFloating:
      return "a floating dtype (float, double, half or bfloat16)";
  }
  return "";
}

void check_segment_args(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                        SegmentDtypes dtypes) {
  TORCH_CHECK_TYPE(data.defined(), "torch_ragged.", op, ": data must be a tensor, got None");
  TORCH_CHECK_VALUE(data.dim() >= 1, "torch_ragged.", op,
                    ": data must have at least 1 dim (rows, ...), got a 0-D tensor");
  TORCH_CHECK_TYPE(has_kernels_for(dtypes, data.scalar_type()), "torch_ragged.", op,
                   ": data must have ", expected_dtypes(dtypes), ", got ", data.scalar_type());
  check_first_idx_tensor(op, first_idx, data);
}

void check_last_offset_is_rows(std::string_view op, int64_t last_offset, int64_t rows) {
  TORCH_CHECK_VALUE(last_offset == rows, "torch_ragged.", op,
                    ": first_idx must run from 0 to data.size(0) = ", rows,
                    ", got first_idx[-1] = ", last_offset);
}

std::optional<int64_t> concrete_num_rows(std::string_view op,
                                         const std::optional<c10::SymInt>& num_rows) {
  if (!num_rows.has_value()) return std::nullopt;
  const std::optional<int64_t> rows = num_rows->maybe_as_int();
  TORCH_CHECK(rows.has_value(), "torch_ragged.", op, ": num_rows must be concrete here");
  TORCH_CHECK_VALUE(*rows >= 0, "torch_ragged.", op, ": num_rows must be >= 0, got ", *rows);
  return rows;
}

RowsOutput rows_output(std::string_view op, const at::Tensor& first_idx,
                       const std::optional<c10::SymInt>& num_rows) {
  check_index_tensor(op, "first_idx", first_idx, 1);
  RowsOutput rows{checked_first_idx(op, first_idx, concrete_num_rows(op, num_rows)), {}};
  rows.out =
      empty_output(op, "the output", {rows.offsets.back()}, first_idx.options().dtype(at::kLong));
  return rows;
}

std::vector<int64_t> per_segment_sizes(const at::Tensor& data, int64_t num_segments) {
  std::vector<int64_t> sizes{num_segments};
  sizes.insert(sizes.end(), data.sizes().begin() + 1, data.sizes().end());
  return sizes;
}

int64_t row_width(const at::Tensor& data) {
  int64_t width = 1;
  for (int64_t d = 1; d < data.dim(); ++d) width *= data.size(d);
  return width;
}

at::Tensor checked_gather_index(std::string_view op, const at::Tensor& data,
                                const at::Tensor& index, const std::optional<at::Tensor>& weight) {
  check_index_tensor(op, "index", index, 1);
  TORCH_CHECK_VALUE(index.device() == data.device(), "torch_ragged.", op,
                    ": index must be on the data's device ", data.device(), ", got ",
                    index.device());
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK_VALUE(weight->dim() == 1 && weight->size(0) == index.size(0), "torch_ragged.", op,
                      ": weight must be 1-D with index.size(0) = ", index.size(0),
                      " entries, got shape ", weight->sizes());
    TORCH_CHECK_TYPE(weight->scalar_type() == data.scalar_type(), "torch_ragged.", op,
                     ": weight must have data's dtype ", data.scalar_type(), ", got ",
                     weight->scalar_type());
    TORCH_CHECK_VALUE(weight->device() == data.device(), "torch_ragged.", op,
                      ": weight must be on the data's device ", data.device());
  }
  return index.to(at::kLong).contiguous();
}

void check_dot_operands(std::string_view op, std::string_view rows_name, const at::Tensor& rows,
                        std::string_view gathered_name, const at::Tensor& gathered,
                        const at::Tensor& first_idx) {
  check_segment_args(op, gathered, first_idx, SegmentDtypes::kFloating);
  check_defined(op, rows_name, rows);
  TORCH_CHECK_VALUE(
      rows.dim() == gathered.dim() && rows.sizes().slice(1) == gathered.sizes().slice(1) &&
          rows.scalar_type() == gathered.scalar_type() && rows.device() == gathered.device(),
      "torch_ragged.", op, ": ", rows_name, " (", rows.sizes(), ", ", rows.scalar_type(), ") and ",
      gathered_name, " (", gathered.sizes(), ", ", gathered.scalar_type(),
      ") must share dtype, device and the sizes after dim 0");
  TORCH_CHECK_VALUE(first_idx.size(0) == rows.size(0) + 1, "torch_ragged.", op,
                    ": first_idx must have ", rows_name, ".size(0) + 1 = ", rows.size(0) + 1,
                    " entries, got ", first_idx.size(0));
}

std::vector<int64_t> expanded_sizes(std::string_view op, const at::Tensor& values,
                                    int64_t num_segments, int64_t num_rows) {
  TORCH_CHECK_VALUE(values.dim() >= 1 && values.size(0) == num_segments, "torch_ragged.", op,
                    ": values must have one row per segment (first_idx.size(0) - 1 = ",
                    num_segments, "), got shape ", values.sizes());
  std::vector<int64_t> sizes{num_rows};
  sizes.insert(sizes.end(), values.sizes().begin() + 1, values.sizes().end());
  check_numel_fits(op, "the output", sizes);
  return sizes;
}

std::optional<int64_t> check_index_select_args(std::string_view op, const at::Tensor& values,
                                               const at::Tensor& first_idx, const at::Tensor& index,
                                               const std::optional<c10::SymInt>& num_rows) {
  check_defined(op, "values", values);
  TORCH_CHECK_VALUE(values.dim() >= 1, "torch_ragged.", op,
                    ": values must have at least 1 dim (rows, ...), got a 0-D tensor");
  check_first_idx_tensor(op, first_idx, values);
  check_index_tensor(op, "index", index, 1);
  TORCH_CHECK_VALUE(index.is_cpu() || index.device() == values.device(), "torch_ragged.", op,
                    ": index must be on the CPU or on values' device ", values.device(), ", got ",
                    index.device());
  return concrete_num_rows(op, num_rows);
}

int64_t wrapped_segment_index(std::string_view op, int64_t position, int64_t index,
                              int64_t num_segments) {
  TORCH_CHECK_INDEX(index >= -num_segments && index < num_segments, "torch_ragged.", op, ": index[",
                    position, "] = ", index, " is out of range for ", num_segments,
                    " segments (expected -", num_segments, " <= index < ", num_segments, ")");
  return index < 0 ? index + num_segments : index;
}

void check_num_rows_matches(std::string_view op, const std::optional<int64_t>& num_rows,
                            int64_t rows) {
  TORCH_CHECK_VALUE(!num_rows.has_value() || *num_rows == rows, "torch_ragged.", op,
                    ": num_rows = ", num_rows.value_or(-1), " but the selected segments hold ",
                    rows, " rows");
}

HostSelection select_segments_on_host(std::string_view op, const at::Tensor& first_idx,
                                      const at::Tensor& index, int64_t values_rows) {
  const std::vector<int64_t> offsets = checked_first_idx(op, first_idx, std::nullopt);
  check_last_offset_is_rows(op, offsets.back(), values_rows);
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  const at::Tensor picks = index_tensor_on_host(op, "index", index, 1);
  const int64_t* pick = picks.const_data_ptr<int64_t>();
  const int64_t selected = picks.numel();
  HostSelection selection;
  selection.source_row.resize(selected);
  std::vector<int64_t> counts(selected);
  for (int64_t k = 0; k < selected; ++k) {
    const int64_t b = wrapped_segment_index(op, k, pick[k], segments);
    selection.source_row[k] = offsets[b];
    counts[k] = offsets[b + 1] - offsets[b];
  }
  selection.out_first_idx = offsets_from_counts(op, "index", counts.data(), selected);
  return selection;
}

}  // namespace torch_ragged
