#pragma once

// Argument checks and output shapes of the segment ops, shared by their CPU and CUDA kernels.

#include <ATen/ATen.h>

#include <optional>
#include <string_view>
#include <vector>

namespace torch_ragged {

// Which dtypes an op accepts (checked before any kernel, with a message naming the op).
enum class SegmentDtypes {
  kSummable,  // numbers (integers, floating, complex), not bool
  kOrdered,   // bool, integers, floating: max / min
  kFloating,  // softmax
};

// Whether the segment kernels (CPU and CUDA) are built for this dtype.
bool has_kernels_for(SegmentDtypes dtypes, at::ScalarType t);

// data: at least 1-D with an accepted dtype; first_idx: an integer 1-D tensor with >= 1 entry on
// the CPU or data's device.
void check_segment_args(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                        SegmentDtypes dtypes);

// first_idx[-1] (read on the host) must be the data's row count.
void check_last_offset_is_rows(std::string_view op, int64_t last_offset, int64_t rows);

// A num_rows argument as a concrete, non-negative integer (nullopt when not given).
std::optional<int64_t> concrete_num_rows(std::string_view op,
                                         const std::optional<c10::SymInt>& num_rows);

// A kernel giving one int64 value per row (segment_ids, segment_arange): first_idx checked and
// read on the host (`offsets`), and the (rows,) int64 output on first_idx's device.
struct RowsOutput {
  std::vector<int64_t> offsets;
  at::Tensor out;
};
RowsOutput rows_output(std::string_view op, const at::Tensor& first_idx,
                       const std::optional<c10::SymInt>& num_rows);

// (num_segments, *data.shape[1:]).
std::vector<int64_t> per_segment_sizes(const at::Tensor& data, int64_t num_segments);

// Elements per row: prod(data.shape[1:]).
int64_t row_width(const at::Tensor& data);

// segment_gather_sum / segment_gather_dot: index (n,) integer on data's device, weight (n,) like
// data (optional); returns index as contiguous int64. The values of index are checked by the
// kernels.
at::Tensor checked_gather_index(std::string_view op, const at::Tensor& data,
                                const at::Tensor& index, const std::optional<at::Tensor>& weight);

// segment_gather_dot / segment_gather_sum_dot: the gathered tensor floating with first_idx as
// check_segment_args checks them, and `rows` (the rows dotted with the gathered ones, one per
// segment of first_idx) sharing its dtype, device and sizes after dim 0.
void check_dot_operands(std::string_view op, std::string_view rows_name, const at::Tensor& rows,
                        std::string_view gathered_name, const at::Tensor& gathered,
                        const at::Tensor& first_idx);

// segment_expand: values (num_segments, ...) -> (num_rows, ...); checks values' rank and size.
std::vector<int64_t> expanded_sizes(std::string_view op, const at::Tensor& values,
                                    int64_t num_segments, int64_t num_rows);

// ragged_index_select: values at least 1-D (any dtype), first_idx as for data, index a 1-D integer
// tensor on the CPU or values' device; returns num_rows as a concrete count when given.
std::optional<int64_t> check_index_select_args(std::string_view op, const at::Tensor& values,
                                               const at::Tensor& first_idx, const at::Tensor& index,
                                               const std::optional<c10::SymInt>& num_rows);

// An index entry in [-num_segments, num_segments) made non-negative; IndexError naming op else.
int64_t wrapped_segment_index(std::string_view op, int64_t position, int64_t index,
                              int64_t num_segments);

// A num_rows argument, when given, must be the row count the op produces.
void check_num_rows_matches(std::string_view op, const std::optional<int64_t>& num_rows,
                            int64_t rows);

// ragged_index_select's selection, computed on the host from first_idx and index (read there; a
// device tensor is copied over): each picked segment's first row in `values` (values_rows rows)
// and the output's offsets. first_idx and index are checked (ValueError / IndexError naming op).
struct HostSelection {
  std::vector<int64_t> source_row, out_first_idx;
};
HostSelection select_segments_on_host(std::string_view op, const at::Tensor& first_idx,
                                      const at::Tensor& index, int64_t values_rows);

}  // namespace torch_ragged
