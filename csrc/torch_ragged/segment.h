#pragma once

// The segment core: offsets and per-segment reductions over `first_idx`.
//
// A segment b is the run of rows [first_idx[b], first_idx[b + 1]) of `data` (rows, ...). first_idx
// has B + 1 non-decreasing entries from 0 to data.size(0), int64 or int32, on the CPU or on data's
// device. Reductions return (B, ...) and reduce each feature column separately. Results are
// deterministic: the summation order depends on neither the thread count nor the run.

#include <ATen/core/Tensor.h>
#include <torch_ragged/export.h>

#include <optional>
#include <string_view>
#include <tuple>

namespace torch_ragged {

// Exclusive prefix sum with the total appended: numel_per_tensor (B,) -> first_idx (B + 1,) int64,
// on numel_per_tensor's device. Kaolin's get_first_idx. On a GPU, validate (no negative count, no
// overflow) reads one flag on the host; validate=false skips it (no synchronisation).
TORCH_RAGGED_API at::Tensor get_first_idx(const at::Tensor& numel_per_tensor, bool validate = true);

// Sum of each segment's rows: (B, ...). Empty segments give 0. Differentiable (backward:
// segment_expand).
TORCH_RAGGED_API at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx);

// Mean of each segment's rows (floating / complex data). Empty segments give 0.
TORCH_RAGGED_API at::Tensor segment_mean(const at::Tensor& data, const at::Tensor& first_idx);

// (values, arg): the max / min of each segment per column and the row of data holding it (the
// first on ties; NaN propagates, as torch.amax). Empty segments give value 0 and arg -1. The
// gradient flows to the rows in arg.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_max(const at::Tensor& data,
                                                                const at::Tensor& first_idx);
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_min(const at::Tensor& data,
                                                                const at::Tensor& first_idx);

// Softmax / log-softmax within each segment, per column: same shape as data (floating dtypes;
// half and bfloat16 accumulate in float). Twice differentiable.
TORCH_RAGGED_API at::Tensor segment_softmax(const at::Tensor& data, const at::Tensor& first_idx);
TORCH_RAGGED_API at::Tensor segment_log_softmax(const at::Tensor& data,
                                                const at::Tensor& first_idx);

// Row r of the result is values[b] for the segment b holding r: (num_rows, ...). num_rows (=
// first_idx[-1]) may be given to skip reading it (on a GPU: no synchronisation).
TORCH_RAGGED_API at::Tensor segment_expand(const at::Tensor& values, const at::Tensor& first_idx,
                                           std::optional<int64_t> num_rows = std::nullopt);

// The segment of every row: (num_rows,) int64.
TORCH_RAGGED_API at::Tensor segment_ids(const at::Tensor& first_idx,
                                        std::optional<int64_t> num_rows = std::nullopt);

// Segmented scans: row r of the result folds the rows of r's segment up to r (inclusive) or before
// r (exclusive: the identity, 0 or 1, on a segment's first row), per column; reverse scans from
// each segment's last row to its first. Same shape as data. cumsum / cumprod give int64 for
// integer and bool data (as torch.cumsum); floats accumulate in float (half / bfloat16 too) and
// in one fixed order (bitwise identical run to run, across thread counts and devices). Twice
// differentiable (cumprod also with zeros).
TORCH_RAGGED_API at::Tensor segment_cumsum(const at::Tensor& data, const at::Tensor& first_idx,
                                           bool reverse = false, bool exclusive = false);
TORCH_RAGGED_API at::Tensor segment_cumprod(const at::Tensor& data, const at::Tensor& first_idx,
                                            bool reverse = false, bool exclusive = false);
// (values, arg): the running max / min and the row of data holding it (the later of equal values,
// NaN wins: torch.cummax's rule, in scan order). The gradient flows to the arg rows.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_cummax(const at::Tensor& data,
                                                                   const at::Tensor& first_idx,
                                                                   bool reverse = false);
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_cummin(const at::Tensor& data,
                                                                   const at::Tensor& first_idx,
                                                                   bool reverse = false);
// log(cumsum(exp(data))) within each segment, computed stably (floating dtypes).
TORCH_RAGGED_API at::Tensor segment_logcumsumexp(const at::Tensor& data,
                                                 const at::Tensor& first_idx, bool reverse = false);
// Each row's position within its segment: (num_rows,) int64 (segment_ids' companion).
TORCH_RAGGED_API at::Tensor segment_arange(const at::Tensor& first_idx,
                                           std::optional<int64_t> num_rows = std::nullopt);

// The segments `index` picks, in that order, packed: (selected values, their first_idx (K + 1,)
// int64 on first_idx's device). index (K,) integer, entries in [-B, B) (negative counts from the
// end), repeats allowed. Segment k of the result is a copy of segment index[k]. num_rows (the
// selected row count) may be given to skip reading it. Differentiable in values (backward:
// index_add of the gradient's rows onto the rows they came from).
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> ragged_index_select(
    const at::Tensor& values, const at::Tensor& first_idx, const at::Tensor& index,
    std::optional<int64_t> num_rows = std::nullopt);

// Row `row` of every segment (negative: counted from the segment's end): (num_segments, *feature),
// a RaggedTensor's r[:, row]. IndexError naming the first segment too short. Differentiable in
// values (an index_select underneath).
TORCH_RAGGED_API at::Tensor segment_row(const at::Tensor& values, const at::Tensor& first_idx,
                                        int64_t row);

// Rows start:stop:step of every segment, each segment sliced as a Python sequence is (negative
// bounds count from its end, bounds clipped to it; nullopt: its start / end; step >= 1), packed:
// (kept rows, their first_idx on values' device, as ragged_index_select's), a RaggedTensor's
// r[:, start:stop:step].
// Differentiable in values.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> segment_slice(
    const at::Tensor& values, const at::Tensor& first_idx,
    std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
    int64_t step = 1);

// torch_scatter's scatter: out[index[i]] (+)= src[i] along dim, by an unsorted index. index has one
// entry per row of src along dim (1-D, or broadcast to src and equal across the other dims), int64
// or int32, on src's device; the output has dim_size rows along dim (default index.max() + 1, read
// on the host). reduce: "sum" (or "add"), "mean", "max", "min"; positions no row reaches are 0.
// Rows are grouped by a stable sort of the index and reduced in src's order: deterministic.
// Differentiable (max / min: the gradient goes to the row holding the extremum).
TORCH_RAGGED_API at::Tensor scatter(const at::Tensor& src, const at::Tensor& index,
                                    int64_t dim = -1,
                                    std::optional<int64_t> dim_size = std::nullopt,
                                    std::string_view reduce = "sum");
// (values, arg): the max / min per position and the row of src along dim holding it (the first on
// ties, NaN wins); positions no row reaches give 0 and arg src.size(dim), as torch_scatter's.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> scatter_max(
    const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
    std::optional<int64_t> dim_size = std::nullopt);
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> scatter_min(
    const at::Tensor& src, const at::Tensor& index, int64_t dim = -1,
    std::optional<int64_t> dim_size = std::nullopt);

}  // namespace torch_ragged
