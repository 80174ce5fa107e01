#pragma once

// scatter by an unsorted index (torch_scatter's API), written once for both backends: the index is
// grouped by the segment core's stable sort, each group reduced in src's order:
//   index (n,) --sort_keys--> permutation, sorted keys --run_offsets--> first_idx (one run per
//   output position reached) --segment_gather_sum / segment_max / segment_min--> one row per run,
//   copied to its position of a zero output.
// Deterministic on every device (the sums' order depends only on the sort, which is stable).

#include <ATen/ATen.h>

#include <optional>
#include <string_view>
#include <tuple>

#include "segment/sort.h"

namespace torch_ragged {

struct GroupingBackend {
  KeyOrder (*sort_keys)(const at::Tensor& keys, int key_bits);
  at::Tensor (*run_offsets)(const at::Tensor& sorted_keys);
  at::Tensor (*segment_gather_sum)(const at::Tensor& data, const at::Tensor& index,
                                   const at::Tensor& weight, const at::Tensor& first_idx);
  // Optional: max / min of rows (rows, width) by keys (rows,) in [0, dim_size) without grouping
  // them first -> (values, arg), both (dim_size, width); arg = rows where no row reaches, undefined
  // unless with_arg. Max and
  // min are exact, so any pass that keeps the earlier row on a tie and the first NaN gives the
  // grouped route's values and args. Null: the grouped route.
  std::tuple<at::Tensor, at::Tensor> (*extremum_by_keys)(std::string_view op, bool is_max,
                                                         const at::Tensor& rows,
                                                         const at::Tensor& keys, int64_t dim_size,
                                                         bool with_arg) = nullptr;
  // Optional: reduce="mul" of rows (rows, width) by keys (rows,) in [0, dim_size) without
  // grouping, the product of each position's rows in order (the grouped route's bits) ->
  // (dim_size, width); nullopt where the backend does not take the dtype.
  std::optional<at::Tensor> (*product_by_keys)(const at::Tensor& rows, const at::Tensor& keys,
                                               int64_t dim_size) = nullptr;
  // Optional: max / min / mul (fold: "max", "min", "mul") of the elements of rows (n, width) by an
  // index per element, keys (n, width) in [0, dim_size), each (position, column) folding its
  // elements in row order: the flat grouping's bits (index_like_src's general case) without it ->
  // (values, arg) (dim_size, width), arg undefined unless with_arg; nullopt for a dtype not taken.
  std::optional<std::tuple<at::Tensor, at::Tensor>> (*fold_elements)(
      std::string_view op, std::string_view fold, const at::Tensor& rows, const at::Tensor& keys,
      int64_t dim_size, bool with_arg) = nullptr;
  // Optional: sort.h's group_small_keys (keys grouped by one counting pass over [0, num_keys)).
  std::optional<KeyGroups> (*group_small_keys)(const at::Tensor& keys, int64_t num_keys) = nullptr;
  // Optional: sums of rows (count, width) by keys in [0, dim_size), every position's rows added in
  // order from 0 in the segment core's accumulator -> (sums (dim_size, width), counts (dim_size,)
  // int64): the grouped route's bits when count <= 2^chunk_bits(width) (every group then lies in
  // one chunk of the reduction tree, summed row by row); used only then (per-call cost).
  std::pair<at::Tensor, at::Tensor> (*sums_in_order)(const at::Tensor& rows, const at::Tensor& keys,
                                                     int64_t dim_size) = nullptr;
  // Optional: sums of the elements of rows (n, width) by an index per element, keys (n, width) in
  // [0, dim_size), each (position, column) adding its elements in row order over the reduction
  // tree of the flat grouping (index_like_src's general case: the same bits, without moving the
  // elements) -> (sums, counts), both (dim_size, width), counts int64 and undefined unless
  // with_counts. keys need not be checked: nullopt where the backend
  // declines (a dtype, too many positions for the elements, or a key outside [0, dim_size)).
  std::optional<std::pair<at::Tensor, at::Tensor>> (*sum_elements)(const at::Tensor& rows,
                                                                   const at::Tensor& keys,
                                                                   int64_t dim_size,
                                                                   bool with_counts) = nullptr;
};

// The kernels of the scatter / scatter_max / scatter_min ops (schemas in scatter.cpp).
at::Tensor scatter_with(const GroupingBackend& backend, const at::Tensor& src,
                        const at::Tensor& index, int64_t dim,
                        const std::optional<c10::SymInt>& dim_size, std::string_view reduce);
std::tuple<at::Tensor, at::Tensor> scatter_extremum_with(const GroupingBackend& backend,
                                                         bool is_max, const at::Tensor& src,
                                                         const at::Tensor& index, int64_t dim,
                                                         const std::optional<c10::SymInt>& dim_size,
                                                         bool with_arg = true);

// index broadcast to src's shape, a view (torch_scatter's broadcast: a 1-D index lines up with
// dim, one of more dims with src's leading dims, then it is expanded over the dims it lacks).
at::Tensor index_like_src(std::string_view op, const at::Tensor& src, const at::Tensor& index,
                          int64_t dim);
// Whether index is 1-D with one entry per row of src along dim (no device read).
bool is_row_index(const at::Tensor& src, const at::Tensor& index, int64_t dim);
// The index as one entry per row of src along dim when it names one position per row (1-D, or the
// same along the other dims: a device read), else undefined (an index per element).
// values (src's shape with dim_size along dim) read at each element's position along dim: src's
// shape (index_select by a 1-D row index, else gather by the index broadcast to src).
at::Tensor read_at_positions(const at::Tensor& values, const at::Tensor& src,
                             const at::Tensor& index, int64_t dim);
at::Tensor row_index_or_undefined(std::string_view op, const at::Tensor& src,
                                  const at::Tensor& index, int64_t dim);

}  // namespace torch_ragged
