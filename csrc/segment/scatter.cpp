// scatter / scatter_max / scatter_min (torch_scatter's API) on the segment core: schemas, the
// kernels written once for both backends (scatter.h), their autograd and the C++ API.
//
// Gradients (each a deterministic torch op, differentiable in turn, so double backward comes from
// the same code):
//   sum:       grad_src = grad_out.index_select(dim, index)       (each row reads its position)
//   mean:      the same over each position's row count
//   max / min: grad_out scattered to the rows in arg (one row per output element: no collisions;
//              positions no row reaches hold arg = src.size(dim), an extra row that is dropped).

#include "segment/scatter.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <torch_ragged/segment.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "segment/segment_args.h"
#include "segment/segment_index.h"
#include "segment/segment_ops.h"
#include "segment/tree_replay.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(
      "scatter(Tensor src, Tensor index, int dim=-1, SymInt? dim_size=None, str reduce=\"sum\") "
      "-> Tensor",
      tags);
  m.def(
      "scatter_max(Tensor src, Tensor index, int dim=-1, SymInt? dim_size=None) "
      "-> (Tensor values, Tensor arg)",
      tags);
  m.def(
      "scatter_min(Tensor src, Tensor index, int dim=-1, SymInt? dim_size=None) "
      "-> (Tensor values, Tensor arg)",
      tags);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using OptionalSize = std::optional<c10::SymInt>;

constexpr std::string_view kReductions[] = {"sum", "add", "mean", "mul", "max", "min"};

bool is_extremum(std::string_view reduce) { return reduce == "max" || reduce == "min"; }

// Sizes as Python prints a shape tuple: "(4, 3)", "(3,)", "()".
std::string shape_tuple(c10::SymIntArrayRef sizes) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << (sizes.size() == 1 ? ",)" : ")");
  return out.str();
}

// src, index and dim checked; dim made non-negative.
int64_t checked_dim(std::string_view op, const at::Tensor& src, const at::Tensor& index,
                    int64_t dim) {
  check_defined(op, "src", src);
  check_defined(op, "index", index);
  TORCH_CHECK_VALUE(src.dim() > 0, "torch_ragged.", op,
                    ": src must have at least one dim, got a 0-d tensor");
  TORCH_CHECK_INDEX(-src.dim() <= dim && dim < src.dim(), "torch_ragged.", op, ": dim ", dim,
                    " is out of range for a ", src.dim(), "-D src");
  TORCH_CHECK_TYPE(at::isIntegralType(index.scalar_type(), /*includeBool=*/false), "torch_ragged.",
                   op, ": index must hold integers, got a ", index.scalar_type(), " tensor");
  TORCH_CHECK_VALUE(index.device() == src.device(), "torch_ragged.", op,
                    ": index must be on src's device ", src.device(), ", got ", index.device());
  return dim < 0 ? dim + src.dim() : dim;
}

// The smallest and largest key (n > 0): a loop on the CPU, one read of both on a GPU.
std::pair<int64_t, int64_t> key_range(const at::Tensor& keys) {
  if (keys.is_cpu()) {  // a plain loop vectorises (std::minmax_element does not)
    const int64_t* k = keys.const_data_ptr<int64_t>();
    int64_t lo = k[0], hi = k[0];
    for (int64_t i = 1; i < keys.numel(); ++i) {
      lo = std::min(lo, k[i]);
      hi = std::max(hi, k[i]);
    }
    return {lo, hi};
  }
  const auto [lo, hi] = at::aminmax(keys);
  const at::Tensor both = at::stack({lo, hi}).cpu();
  return {both[0].item<int64_t>(), both[1].item<int64_t>()};
}

// The rows of src grouped by position: positions (runs,) int64 ascending, permutation (rows,)
// grouped position -> src row (undefined: the identity), first_idx (runs + 1,) over grouped rows.
// positions undefined: every position 0 .. dim_size - 1 has a group (empty where no row goes).
struct Groups {
  at::Tensor positions, permutation, first_idx;
  int64_t dim_size = 0;
};

// The keys (one int64 entry each, any shape) checked to lie in [0, dim_size), and dim_size
// (given, or the largest key + 1).
std::pair<at::Tensor, int64_t> checked_keys(std::string_view op, const at::Tensor& index,
                                            const OptionalSize& dim_size) {
  int64_t size = 0;
  if (dim_size.has_value()) {
    size = dim_size->expect_int();
    TORCH_CHECK_VALUE(size >= 0, "torch_ragged.", op, ": dim_size must be a non-negative int, got ",
                      size);
  }
  at::Tensor keys = index.to(at::kLong).contiguous();
  if (keys.numel() > 0) {
    const auto [lo, hi] = key_range(keys);
    TORCH_CHECK_VALUE(lo >= 0, "torch_ragged.", op, ": index must be non-negative, got ", lo);
    if (!dim_size.has_value()) size = hi + 1;
    TORCH_CHECK_VALUE(hi < size, "torch_ragged.", op, ": index holds ", hi,
                      ", out of range for dim_size ", size);
  }
  return {keys, size};
}

// keys: checked_keys' (one per row of src along dim, in [0, size)). every_position: a group for
// each position, empty ones included, where the backend groups keys from a range not much larger
// than their count in one counting pass (cheaper than sorting them; the same grouped order,
// stable, so the same sums).
Groups group_rows(const GroupingBackend& backend, const at::Tensor& keys, int64_t size,
                  bool every_position = false) {
  Groups groups;
  if (every_position && backend.group_small_keys != nullptr && keys.numel() > 0 &&
      size <= 4 * keys.numel() + 4096) {
    if (std::optional<KeyGroups> grouped = backend.group_small_keys(keys, size)) {
      groups.dim_size = size;
      groups.permutation = std::move(grouped->permutation);
      groups.first_idx = std::move(grouped->first_idx);
      return groups;
    }
  }
  groups.dim_size = size;
  const int64_t rows = keys.numel();
  if (rows == 0) {
    groups.positions = keys;
    groups.first_idx = at::zeros({1}, keys.options());
    return groups;
  }
  KeyOrder order = backend.sort_keys(keys, key_bits_for(groups.dim_size));
  groups.first_idx = backend.run_offsets(order.sorted_keys);
  const int64_t runs = groups.first_idx.numel() - 1;
  groups.positions = order.sorted_keys.index_select(0, groups.first_idx.narrow(0, 0, runs));
  groups.permutation = std::move(order.permutation);
  return groups;
}

// t with dim moved to the front / back (no view made for dim 0: per-call cost on small inputs).
at::Tensor dim_first(const at::Tensor& t, int64_t dim) { return dim == 0 ? t : t.movedim(dim, 0); }
at::Tensor dim_back(const at::Tensor& t, int64_t dim) { return dim == 0 ? t : t.movedim(0, dim); }

// src's sizes with dim_size rows along dim.
std::vector<int64_t> scattered_sizes(const at::Tensor& src, int64_t dim, int64_t dim_size) {
  std::vector<int64_t> out(src.sizes().begin(), src.sizes().end());
  out[dim] = dim_size;
  return out;
}

// src with dim first as (count, width) rows, and a (dim_size, width) result back in src's layout
// (dim_size rows along dim, contiguous).
struct RowLayout {
  at::Tensor rows;
  std::vector<int64_t> sizes;  // rows' sizes before flattening (dim first)
  int64_t dim = 0;

  RowLayout(const at::Tensor& src, int64_t d) : dim(d) {
    const at::Tensor first = dim_first(src, d).contiguous();
    sizes.assign(first.sizes().begin(), first.sizes().end());
    const int64_t width = c10::multiply_integers(sizes.begin() + 1, sizes.end());
    rows = first.view({first.size(0), width});
  }
  at::Tensor back(const at::Tensor& result, int64_t dim_size) const {
    std::vector<int64_t> result_sizes = sizes;
    result_sizes[0] = dim_size;
    return dim_back(result.view(result_sizes), dim).contiguous();
  }
};

// The rows (dim first) in the dtype their sums run in: bool sums are or-ed (a sum of counts, then
// != 0); integer means sum in 64 bits (a sum in a narrow dtype would wrap first: 256 int8 ones sum
// to 0).
at::Tensor rows_to_sum(const at::Tensor& src, int64_t dim, bool mean) {
  const at::Tensor rows = dim_first(src, dim);
  // as segment_mean: a mean of bools has no meaning torch gives it (torch.mean refuses them)
  TORCH_CHECK_TYPE(
      !(mean && rows.scalar_type() == at::kBool),
      "torch_ragged.scatter: reduce=\"mean\" needs numbers (bool is not averaged: convert "
      "it, e.g. src.long()), got Bool");
  const bool narrow_int = !at::isFloatingType(rows.scalar_type()) &&
                          !at::isComplexType(rows.scalar_type()) &&
                          rows.scalar_type() != at::kLong && rows.scalar_type() != at::kUInt64;
  const bool widen = rows.scalar_type() == at::kBool || (mean && narrow_int);
  return widen ? rows.to(at::kLong) : rows;
}

// Per-group sums (groups, ...) and row counts (groups,) int64 to the output: means divided, bools
// or-ed, each group at its position along dim of a zero output (positions undefined: every
// position has a group) -- contiguous, as torch's reductions give.
at::Tensor finish_sums(at::Tensor sums, const at::Tensor& counts, const at::Tensor& positions,
                       int64_t dim_size, const at::Tensor& src, int64_t dim, bool mean) {
  if (mean) {
    std::vector<int64_t> column(std::max<int64_t>(sums.dim(), 1), 1);
    column[0] = -1;
    const at::Tensor divisor = counts.clamp_min(1).view(column);  // empty: 0 / 1
    if (at::isFloatingType(src.scalar_type()) || at::isComplexType(src.scalar_type())) {
      sums = sums / divisor.to(sums.scalar_type());
    } else {  // the quotient of the 64-bit sum fits src's dtype again (|mean| <= max |row|),
              // rounded toward minus infinity as torch_scatter's
      sums = sums.div(divisor, "floor");
    }
  }
  if (src.scalar_type() == at::kBool) sums = sums.ne(0);
  if (!positions.defined()) return dim_back(sums.to(src.scalar_type()), dim).contiguous();
  at::Tensor out =
      empty_output("scatter", "the output", scattered_sizes(src, dim, dim_size), src.options())
          .zero_();
  return out.index_copy_(dim, positions, dim_back(sums.to(src.scalar_type()), dim));
}

// Each group's sum (reduce sum / add) or mean.
at::Tensor sum_or_mean(const GroupingBackend& backend, const Groups& groups, const at::Tensor& src,
                       int64_t dim, bool mean) {
  const at::Tensor sums = backend.segment_gather_sum(
      rows_to_sum(src, dim, mean), groups.permutation, at::Tensor(), groups.first_idx);
  return finish_sums(sums, groups.first_idx.diff(), groups.positions, groups.dim_size, src, dim,
                     mean);
}

// Sums of few rows without grouping them (the backend's sums_in_order, the grouped route's bits
// for them), or nullopt.
std::optional<at::Tensor> few_rows_sum_or_mean(const GroupingBackend& backend,
                                               const at::Tensor& src, const at::Tensor& keys,
                                               int64_t size, int64_t dim, bool mean) {
  const int64_t count = src.size(dim);
  if (backend.sums_in_order == nullptr || count == 0) return std::nullopt;
  if (count > (int64_t{1} << chunk_bits(src.numel() / count))) return std::nullopt;
  const at::Tensor rows = rows_to_sum(src, dim, mean).contiguous();
  auto [sums, counts] = backend.sums_in_order(rows.view({count, -1}), keys, size);
  std::vector<int64_t> first_sizes(rows.sizes().begin(), rows.sizes().end());
  first_sizes[0] = size;
  return finish_sums(sums.view(first_sizes), counts, at::Tensor(), size, src, dim, mean);
}

// Each group's product in src's order, copied to its position along dim of an output of ones
// (torch_scatter's scatter_mul: positions no row reaches hold 1). The products come from the
// grouped rows' segment_cumprod (its last row per group), so they accumulate in op-math and round
// once, as the by-keys pass of the CPU does for the dtypes it takes.
at::Tensor product(const Groups& groups, const at::Tensor& src, int64_t dim) {
  const at::Tensor rows = dim_first(src, dim);
  at::Tensor out = empty_output("scatter", "the output", scattered_sizes(src, dim, groups.dim_size),
                                src.options())
                       .fill_(1);
  if (rows.size(0) == 0) return out;
  const at::Tensor grouped =
      groups.permutation.defined() ? rows.index_select(0, groups.permutation) : rows;
  const int64_t runs = groups.first_idx.numel() - 1;
  const at::Tensor products = ops::segment_cumprod(grouped, groups.first_idx, false, false)
                                  .index_select(0, groups.first_idx.narrow(0, 1, runs).sub(1));
  return out.index_copy_(dim, groups.positions, dim_back(products.to(src.scalar_type()), dim));
}

}  // namespace

at::Tensor index_like_src(std::string_view op, const at::Tensor& src, const at::Tensor& index,
                          int64_t dim) {
  at::Tensor aligned = index;
  if (index.dim() > 0 && index.dim() < src.dim()) {
    std::vector<c10::SymInt> shape(index.sym_sizes().begin(), index.sym_sizes().end());
    if (index.dim() == 1) shape.insert(shape.begin(), dim, c10::SymInt(1));
    shape.resize(src.dim(), c10::SymInt(1));
    aligned = index.view_symint(shape);
  }
  bool expandable = aligned.dim() == src.dim();
  for (int64_t d = 0; expandable && d < src.dim(); ++d) {
    expandable = aligned.sym_size(d) == 1 || aligned.sym_size(d) == src.sym_size(d);
  }
  TORCH_CHECK_VALUE(expandable, "torch_ragged.", op, ": index must be 1-D with src.size(", dim,
                    ") = ", src.sym_size(dim), " entries or broadcast to src's shape ",
                    shape_tuple(src.sym_sizes()), ", got ", shape_tuple(index.sym_sizes()));
  return aligned.expand_symint(src.sym_sizes());
}

bool is_row_index(const at::Tensor& src, const at::Tensor& index, int64_t dim) {
  return index.dim() == 1 && index.sym_size(0) == src.sym_size(dim);
}

namespace {

// Whether each row of a (rows, k) index holds one value: a loop over a contiguous int64 index on
// the host (at::equal of an expanded view costs ~3 us a call), at::equal otherwise.
bool rows_agree(const at::Tensor& per_row) {
  if (per_row.is_cpu() && per_row.scalar_type() == at::kLong && per_row.is_contiguous() &&
      !is_symbolic(per_row)) {
    const int64_t* entry = per_row.const_data_ptr<int64_t>();
    const int64_t rows = per_row.size(0), k = per_row.size(1);
    bool agree = true;
    for (int64_t r = 0; r < rows && agree; ++r) {
      for (int64_t j = 1; j < k; ++j) agree &= entry[r * k + j] == entry[r * k];
    }
    return agree;
  }
  return at::equal(per_row, per_row.select(1, 0).unsqueeze(1).expand_as(per_row));
}

}  // namespace

at::Tensor row_index_or_undefined(std::string_view op, const at::Tensor& src,
                                  const at::Tensor& index, int64_t dim) {
  if (is_row_index(src, index, dim)) return index;
  const c10::SymInt rows = src.sym_size(dim);
  if (rows == 0)
    return at::zeros({0}, index.options());  // no rows: nothing to group (and no -1 to infer)
  const at::Tensor per_row =
      index_like_src(op, src, index, dim).movedim(dim, 0).reshape_symint({rows, -1});
  if (per_row.sym_size(1) == 0) return at::zeros_symint({rows}, index.options());
  const at::Tensor first = per_row.select(1, 0);
  return rows_agree(per_row) ? first : at::Tensor();
}

namespace {

// A per-element index (index_like_src) as one flat scatter: src's elements in lines along dim
// (one line per position of the other dims, dim moved last), element j of line l keyed
// l * dim_size + index. The flat result (lines * dim_size,) is the output with dim moved last.
struct FlatLines {
  at::Tensor values, keys;
  int64_t lines = 0, length = 0, dim_size = 0;
  std::vector<int64_t> moved_sizes;  // the output's sizes with dim moved last
};

FlatLines flat_lines(std::string_view op, const at::Tensor& src, const at::Tensor& full_index,
                     int64_t dim, const OptionalSize& dim_size) {
  FlatLines flat;
  const auto [keys, size] = checked_keys(op, full_index.movedim(dim, -1), dim_size);
  flat.length = src.size(dim);
  flat.dim_size = size;
  flat.lines = 1;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (d == dim) continue;
    flat.lines *= src.size(d);
    flat.moved_sizes.push_back(src.size(d));
  }
  flat.moved_sizes.push_back(size);
  TORCH_CHECK_VALUE(size == 0 || flat.lines <= std::numeric_limits<int64_t>::max() / size,
                    "torch_ragged.", op, ": the output's ", flat.lines, " x ", size,
                    " elements overflow int64");
  const at::Tensor line_start = at::arange(flat.lines, keys.options()).mul_(size).unsqueeze(1);
  flat.keys = keys.view({flat.lines, flat.length}).add(line_start).view(-1);
  flat.values = src.movedim(dim, -1).reshape({flat.lines * flat.length});
  return flat;
}

at::Tensor unflatten_lines(const FlatLines& flat, const at::Tensor& result, int64_t dim) {
  return result.view(flat.moved_sizes).movedim(-1, dim).contiguous();
}

// A per-element index (index_like_src) folded by the backend's fold_elements ("max", "min",
// "mul"), in src's layout: (values, arg), or nullopt where the backend has none or does not take
// src's dtype (the flat lines then).
std::optional<std::tuple<at::Tensor, at::Tensor>> fold_per_element(
    const GroupingBackend& backend, std::string_view op, std::string_view fold,
    const at::Tensor& src, const at::Tensor& full_index, int64_t dim, const OptionalSize& dim_size,
    bool with_arg) {
  if (backend.fold_elements == nullptr) return std::nullopt;
  const RowLayout layout(src, dim);
  const auto [keys, size] = checked_keys(op, dim_first(full_index, dim), dim_size);
  auto folded =
      backend.fold_elements(op, fold, layout.rows, keys.view(layout.rows.sizes()), size, with_arg);
  if (!folded.has_value()) return std::nullopt;
  const auto& [values, arg] = *folded;
  return std::make_tuple(layout.back(values, size), with_arg ? layout.back(arg, size) : arg);
}

// A per-element index (index_like_src) summed (or averaged) by the backend's sum_elements, in src's
// layout, or nullopt where the backend has none or declines (the flat lines then).
std::optional<at::Tensor> sum_per_element(const GroupingBackend& backend, std::string_view op,
                                          const at::Tensor& src, const at::Tensor& full_index,
                                          int64_t dim, const OptionalSize& dim_size, bool mean) {
  if (backend.sum_elements == nullptr) return std::nullopt;
  const RowLayout layout(rows_to_sum(src, dim, mean), 0);
  // With dim_size given, the backend checks the keys as it reads them (declining where one lies
  // outside: the flat route's checked_keys then names it); without, their largest is read first.
  at::Tensor keys;
  int64_t size = 0;
  if (dim_size.has_value() && dim_size->expect_int() >= 0) {
    keys = dim_first(full_index, dim).to(at::kLong).contiguous();
    size = dim_size->expect_int();
  } else {
    std::tie(keys, size) = checked_keys(op, dim_first(full_index, dim), dim_size);
  }
  auto summed = backend.sum_elements(layout.rows, keys.view(layout.rows.sizes()), size, mean);
  if (!summed.has_value()) return std::nullopt;
  const auto& [sums, counts] = *summed;
  // finish_sums over the (position, column) groups: the flat route's division and casts
  const at::Tensor finished =
      finish_sums(sums.view(-1), mean ? counts.view(-1) : counts, at::Tensor(), size, src, 0, mean);
  return dim_back(layout.back(finished.view({size, layout.rows.size(1)}), size), dim).contiguous();
}

// reduce (sum / add / mean / mul) of src's rows along dim by checked keys (checked_keys': one per
// row, in [0, size)). The flat lines of a per-element index come here directly: their keys are
// valid by construction, so nothing is checked (or read from a GPU) twice.
at::Tensor scatter_by_keys(const GroupingBackend& backend, const at::Tensor& src,
                           const at::Tensor& keys, int64_t size, int64_t dim,
                           std::string_view reduce) {
  if (reduce == "mul") {
    if (backend.product_by_keys != nullptr) {
      const RowLayout layout(src, dim);
      if (std::optional<at::Tensor> out = backend.product_by_keys(layout.rows, keys, size)) {
        return layout.back(*out, size);
      }
    }
    return product(group_rows(backend, keys, size), src, dim);
  }
  const bool mean = reduce == "mean";
  if (auto out = few_rows_sum_or_mean(backend, src, keys, size, dim, mean)) return *out;
  return sum_or_mean(backend, group_rows(backend, keys, size, /*every_position=*/true), src, dim,
                     mean);
}

// scatter_max / scatter_min of src's rows along dim by checked keys (as scatter_by_keys).
std::tuple<at::Tensor, at::Tensor> extremum_by_keys(const GroupingBackend& backend,
                                                    std::string_view op, bool is_max,
                                                    const at::Tensor& src, const at::Tensor& keys,
                                                    int64_t size, int64_t dim, bool with_arg) {
  if (backend.extremum_by_keys != nullptr) {
    const RowLayout layout(src, dim);
    auto [values, arg] = backend.extremum_by_keys(op, is_max, layout.rows, keys, size, with_arg);
    return {layout.back(values, size), with_arg ? layout.back(arg, size) : arg};
  }
  const Groups groups = group_rows(backend, keys, size);
  const at::Tensor rows = dim_first(src, dim);
  const std::vector<int64_t> out_sizes = scattered_sizes(src, dim, groups.dim_size);
  at::Tensor out = empty_output(op, "the output", out_sizes, src.options()).zero_();
  // arg: positions no row reaches hold src.size(dim), as torch_scatter's
  at::Tensor source_row =
      empty_output(op, "arg", out_sizes, src.options().dtype(at::kLong)).fill_(rows.size(0));
  if (rows.size(0) > 0) {
    const bool grouped_in_place = !groups.permutation.defined();
    const at::Tensor grouped = grouped_in_place ? rows : rows.index_select(0, groups.permutation);
    auto [values, arg] = as_op(op, [&] {
      return is_max ? ops::segment_max(grouped, groups.first_idx)
                    : ops::segment_min(grouped, groups.first_idx);
    });
    out.index_copy_(dim, groups.positions, dim_back(values, dim));
    const at::Tensor source = grouped_in_place ? arg : at::take(groups.permutation, arg);
    source_row.index_copy_(dim, groups.positions, dim_back(source, dim));
  }
  return {out, source_row};
}

}  // namespace

at::Tensor scatter_with(const GroupingBackend& backend, const at::Tensor& src,
                        const at::Tensor& index, int64_t dim, const OptionalSize& dim_size,
                        std::string_view reduce) {
  constexpr std::string_view op = "scatter";
  const bool known =
      std::find(std::begin(kReductions), std::end(kReductions), reduce) != std::end(kReductions);
  TORCH_CHECK_VALUE(known,
                    "torch_ragged.scatter: reduce must be one of sum, add, mean, mul, max, "
                    "min, got '",
                    reduce, "'");
  if (is_extremum(reduce)) {
    return std::get<0>(as_op(op, [&] {
      return scatter_extremum_with(backend, reduce == "max", src, index, dim, dim_size,
                                   /*with_arg=*/false);
    }));
  }
  const int64_t d = checked_dim(op, src, index, dim);
  const at::Tensor row_index = row_index_or_undefined(op, src, index, d);
  if (row_index.defined()) {
    const auto [keys, size] = checked_keys(op, row_index, dim_size);
    return scatter_by_keys(backend, src, keys, size, d, reduce);
  }
  const at::Tensor full_index = index_like_src(op, src, index, d);
  if (reduce == "mul") {
    if (auto folded = fold_per_element(backend, op, "mul", src, full_index, d, dim_size, false)) {
      return std::get<0>(*folded);
    }
  } else if (auto sums =
                 sum_per_element(backend, op, src, full_index, d, dim_size, reduce == "mean")) {
    return *sums;
  }
  const FlatLines flat = flat_lines(op, src, full_index, d, dim_size);
  return unflatten_lines(
      flat, scatter_by_keys(backend, flat.values, flat.keys, flat.lines * flat.dim_size, 0, reduce),
      d);
}

std::tuple<at::Tensor, at::Tensor> scatter_extremum_with(const GroupingBackend& backend,
                                                         bool is_max, const at::Tensor& src,
                                                         const at::Tensor& index, int64_t dim,
                                                         const OptionalSize& dim_size,
                                                         bool with_arg) {
  const std::string_view op = is_max ? "scatter_max" : "scatter_min";
  const int64_t d = checked_dim(op, src, index, dim);
  const at::Tensor row_index = row_index_or_undefined(op, src, index, d);
  if (row_index.defined()) {
    const auto [keys, size] = checked_keys(op, row_index, dim_size);
    return extremum_by_keys(backend, op, is_max, src, keys, size, d, with_arg);
  }
  const at::Tensor full_index = index_like_src(op, src, index, d);
  if (auto folded = fold_per_element(backend, op, is_max ? "max" : "min", src, full_index, d,
                                     dim_size, with_arg)) {
    return *folded;
  }
  const FlatLines flat = flat_lines(op, src, full_index, d, dim_size);
  auto [values, arg] = extremum_by_keys(backend, op, is_max, flat.values, flat.keys,
                                        flat.lines * flat.dim_size, 0, with_arg);
  if (with_arg) {  // flat rows l * length + j back to j; unreached (lines * length) to length
    const at::Tensor line_start =
        at::arange(flat.lines, arg.options()).mul_(flat.length).unsqueeze(1);
    const at::Tensor flat_arg = arg.view({flat.lines, flat.dim_size});
    arg = flat_arg.sub(line_start).masked_fill_(flat_arg == flat.lines * flat.length, flat.length);
    arg = unflatten_lines(flat, arg, d);
  }
  return {unflatten_lines(flat, values, d), arg};
}

namespace {

// best = the better of best and x, element by element (ExtremumReducer::beats spelled without
// branches: a data-dependent branch mispredicts on about a third of the elements of short groups),
// with the row of each best when kArg.
template <typename scalar_t, bool kMax, bool kArg>
inline void fold_row(const scalar_t* __restrict x, scalar_t* __restrict best,
                     int64_t* __restrict best_row, int64_t row, int64_t width) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t c = 0; c < width; ++c) {
    const acc_t v = static_cast<acc_t>(x[c]), b = static_cast<acc_t>(best[c]);
    const bool better = kMax ? v > b : v < b;
    const bool first_nan = at::_isnan(v) & !at::_isnan(b);
    const bool take = better | first_nan;
    best[c] = take ? x[c] : best[c];
    if constexpr (kArg) {  // a mask, not a select: mixed 4- / 8-byte selects do not vectorise
      const int64_t mask = -static_cast<int64_t>(take);
      best_row[c] = (row & mask) | (best_row[c] & ~mask);
    }
  }
}

enum class RowFold { kMax, kMin, kProduct };

// Rows in order, each folded into its position: max / min by ExtremumReducer::beats, the segment
// core's rule (the earlier row keeps a tie, the first NaN wins), products in src's order (the
// grouped route's, so the same bits). A position's first row is copied whole (no per-element
// "empty yet?" test); `arg` is written only when asked for (scatter(reduce="max") has none).
// Threads split the positions; each reads every key and only its positions' rows, so the result
// does not depend on the thread count. Positions no row reaches: 0, or 1 for products.
template <typename scalar_t, RowFold kFold>
void fold_rows_in_order(const scalar_t* src, const int64_t* keys, int64_t rows, int64_t width,
                        int64_t dim_size, scalar_t* out, int64_t* arg) {
  std::vector<uint8_t> reached_flags(dim_size, 0);
  uint8_t* const reached = reached_flags.data();
  const int64_t threads = rows * width < (int64_t{1} << 15) ? 1 : at::get_num_threads();
  at::parallel_for(0, dim_size, (dim_size + threads - 1) / threads, [=](int64_t lo, int64_t hi) {
    // captured by value: the stores through out / arg cannot alias the loop's own state
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t position = keys[row];
      if (position < lo || position >= hi) continue;
      const scalar_t* x = src + row * width;
      scalar_t* best = out + position * width;
      int64_t* best_row = arg == nullptr ? nullptr : arg + position * width;
      if (!reached[position]) {
        reached[position] = 1;
        std::copy(x, x + width, best);
        if (best_row != nullptr) std::fill(best_row, best_row + width, row);
        continue;
      }
      if constexpr (kFold == RowFold::kProduct && std::is_same_v<scalar_t, bool>) {
        for (int64_t c = 0; c < width; ++c) best[c] = best[c] && x[c];
      } else if constexpr (kFold == RowFold::kProduct) {
        for (int64_t c = 0; c < width; ++c) best[c] = best[c] * x[c];
      } else if (best_row == nullptr) {
        fold_row<scalar_t, kFold == RowFold::kMax, false>(x, best, nullptr, row, width);
      } else {
        fold_row<scalar_t, kFold == RowFold::kMax, true>(x, best, best_row, row, width);
      }
    }
    const scalar_t unreached = kFold == RowFold::kProduct ? scalar_t(1) : scalar_t(0);
    for (int64_t position = lo; position < hi; ++position) {
      if (!reached[position])
        std::fill(out + position * width, out + (position + 1) * width, unreached);
    }
  });
}

// fold_rows_in_order for an index per element: keys (rows, width), each (position, column) folding
// its column's elements in row order (the same rule and order, so the flat grouping's bits).
// Threads split the columns.
template <typename scalar_t, RowFold kFold>
void fold_elements_in_order(const scalar_t* src, const int64_t* keys, int64_t rows, int64_t width,
                            int64_t dim_size, scalar_t* out, int64_t* arg) {
  std::vector<uint8_t> reached_flags(dim_size * width, 0);
  uint8_t* const reached = reached_flags.data();
  const int64_t threads = rows * width < (int64_t{1} << 15) ? 1 : at::get_num_threads();
  at::parallel_for(0, width, (width + threads - 1) / threads, [=](int64_t lo, int64_t hi) {
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = lo; c < hi; ++c) {
        const int64_t element = row * width + c, at = keys[element] * width + c;
        if (!reached[at]) {
          reached[at] = 1;
          out[at] = src[element];
          if (arg != nullptr) arg[at] = row;
        } else if constexpr (kFold == RowFold::kProduct && std::is_same_v<scalar_t, bool>) {
          out[at] = out[at] && src[element];
        } else if constexpr (kFold == RowFold::kProduct) {
          out[at] = out[at] * src[element];
        } else if (arg == nullptr) {
          fold_row<scalar_t, kFold == RowFold::kMax, false>(src + element, out + at, nullptr, row,
                                                            1);
        } else {
          fold_row<scalar_t, kFold == RowFold::kMax, true>(src + element, out + at, arg + at, row,
                                                           1);
        }
      }
    }
    const scalar_t unreached = kFold == RowFold::kProduct ? scalar_t(1) : scalar_t(0);
    for (int64_t position = 0; position < dim_size; ++position) {
      for (int64_t c = lo; c < hi; ++c) {
        if (!reached[position * width + c]) out[position * width + c] = unreached;
      }
    }
  });
}

std::optional<std::tuple<at::Tensor, at::Tensor>> fold_elements_cpu(
    std::string_view op, std::string_view fold, const at::Tensor& rows, const at::Tensor& keys,
    int64_t dim_size, bool with_arg) {
  const at::ScalarType dtype = rows.scalar_type();
  const bool product = fold == "mul";
  if (product ? (dtype == at::kHalf || dtype == at::kBFloat16 || at::isComplexType(dtype))
              : !has_kernels_for(SegmentDtypes::kOrdered, dtype)) {
    return std::nullopt;  // the flat grouping names the dtype or rounds as the grouped route does
  }
  const int64_t count = rows.size(0), width = rows.size(1);
  at::Tensor out = empty_output(op, "the output", {dim_size, width}, rows.options());
  at::Tensor arg;
  if (with_arg) {
    arg = empty_output(op, "arg", {dim_size, width}, rows.options().dtype(at::kLong)).fill_(count);
  }
  AT_DISPATCH_V2(
      dtype, "scatter_fold_elements_cpu", AT_WRAP([&] {
        const auto run = product         ? &fold_elements_in_order<scalar_t, RowFold::kProduct>
                         : fold == "max" ? &fold_elements_in_order<scalar_t, RowFold::kMax>
                                         : &fold_elements_in_order<scalar_t, RowFold::kMin>;
        run(rows.const_data_ptr<scalar_t>(), keys.const_data_ptr<int64_t>(), count, width, dim_size,
            out.mutable_data_ptr<scalar_t>(), with_arg ? arg.mutable_data_ptr<int64_t>() : nullptr);
      }),
      AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool, at::kHalf,
      at::kBFloat16);
  return std::make_tuple(out, arg);
}

std::tuple<at::Tensor, at::Tensor> extremum_by_keys_cpu(std::string_view op, bool is_max,
                                                        const at::Tensor& rows,
                                                        const at::Tensor& keys, int64_t dim_size,
                                                        bool with_arg) {
  TORCH_CHECK_TYPE(has_kernels_for(SegmentDtypes::kOrdered, rows.scalar_type()), "torch_ragged.",
                   op,
                   ": src must have a real dtype (bool, integer, float, double, half or "
                   "bfloat16), got ",
                   rows.scalar_type());
  const int64_t count = rows.size(0), width = rows.size(1);
  at::Tensor out = empty_output(op, "the output", {dim_size, width}, rows.options());
  at::Tensor arg;
  if (with_arg) {  // positions no row reaches keep src.size(dim), as torch_scatter's
    arg = empty_output(op, "arg", {dim_size, width}, rows.options().dtype(at::kLong)).fill_(count);
  }
  AT_DISPATCH_V2(rows.scalar_type(), "scatter_extremum_cpu", AT_WRAP([&] {
                   const auto run = is_max ? &fold_rows_in_order<scalar_t, RowFold::kMax>
                                           : &fold_rows_in_order<scalar_t, RowFold::kMin>;
                   run(rows.const_data_ptr<scalar_t>(), keys.const_data_ptr<int64_t>(), count,
                       width, dim_size, out.mutable_data_ptr<scalar_t>(),
                       with_arg ? arg.mutable_data_ptr<int64_t>() : nullptr);
                 }),
                 AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool,
                 at::kHalf, at::kBFloat16);
  return {out, arg};
}

// Rows (count, width) summed by keys, each position's rows in order from 0 in the segment core's
// accumulator (sum_acc_t), cast once: a segment inside one chunk of the reduction tree is summed
// exactly so (segment_index.h), so for count <= 2^chunk_bits(width) these are its bits.
std::pair<at::Tensor, at::Tensor> sums_in_order_cpu(const at::Tensor& rows, const at::Tensor& keys,
                                                    int64_t dim_size) {
  const int64_t count = rows.size(0), width = rows.size(1);
  at::Tensor sums = empty_output("scatter", "the output", {dim_size, width}, rows.options());
  at::Tensor counts = at::zeros({dim_size}, keys.options());
  int64_t* const row_counts = counts.mutable_data_ptr<int64_t>();
  const int64_t* const key = keys.const_data_ptr<int64_t>();
  AT_DISPATCH_V2(rows.scalar_type(), "scatter_sums_in_order_cpu", AT_WRAP([&] {
                   using acc_t = sum_acc_t<scalar_t>;
                   std::vector<acc_t> acc(dim_size * width, acc_t(0));
                   const scalar_t* x = rows.const_data_ptr<scalar_t>();
                   for (int64_t row = 0; row < count; ++row) {
                     acc_t* a = acc.data() + key[row] * width;
                     for (int64_t c = 0; c < width; ++c)
                       a[c] += static_cast<acc_t>(x[row * width + c]);
                     ++row_counts[key[row]];
                   }
                   scalar_t* out = sums.mutable_data_ptr<scalar_t>();
                   for (int64_t i = 0; i < dim_size * width; ++i)
                     out[i] = static_cast<scalar_t>(acc[i]);
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
  return {sums, counts};
}

// Sums of an index per element, keys (rows, width), replaying the flat grouping's tree: group
// (column c, position p) is flat group c * dim_size + p, whose elements the grouping puts at
// positions from c * rows (every column holds `rows` elements) plus the counts of the column's
// earlier positions. Threads split the columns (each owns its columns' groups, so the result does
// not depend on the thread count). A thread first copies its columns out (row by row, checking
// each key), then works column by column: the column's counts and replay state (~16 bytes per
// position) stay in the core's cache while its elements stream by, where going row by row touches
// a line of every column's state for each row (2x slower at 625k x 16 elements into 78k
// positions). sums and counts (counts: null unless wanted) are (dim_size, width). false: a key
// lies outside [0, dim_size) (nothing else is then defined).
template <typename scalar_t, typename Index>
bool sum_elements_in_tree_order(const scalar_t* src, const int64_t* keys, int64_t rows,
                                int64_t width, int64_t dim_size, scalar_t* sums, int64_t* counts) {
  using acc_t = sum_acc_t<scalar_t>;
  const int64_t n = rows * width;
  const int64_t threads = n < (int64_t{1} << 15) ? 1 : at::get_num_threads();
  std::atomic<bool> in_range{true};
  at::parallel_for(0, width, (width + threads - 1) / threads, [&](int64_t lo, int64_t hi) {
    const int64_t columns = hi - lo;
    // uninitialised scratch (every entry is written)
    const at::Tensor scratch =
        at::empty({columns * rows * static_cast<int64_t>(sizeof(Index) + sizeof(scalar_t))},
                  at::TensorOptions().dtype(at::kByte));
    auto* column_values = reinterpret_cast<scalar_t*>(scratch.mutable_data_ptr<uint8_t>());
    auto* column_keys = reinterpret_cast<Index*>(column_values + columns * rows);
    bool ok = true;
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t* key = keys + row * width + lo;
      const scalar_t* x = src + row * width + lo;
      for (int64_t c = 0; c < columns; ++c) {
        // an unsigned compare catches negative keys too
        ok &= static_cast<uint64_t>(key[c]) < static_cast<uint64_t>(dim_size);
        column_keys[c * rows + row] = static_cast<Index>(key[c]);
        column_values[c * rows + row] = x[c];
      }
    }
    if (!ok) {
      in_range = false;
      return;
    }
    cpu::TreeSumReplay<acc_t, Index> replay(n, dim_size);  // one column's groups at a time
    std::vector<Index> tally(dim_size);
    for (int64_t c = lo; c < hi; ++c) {
      const Index* k = column_keys + (c - lo) * rows;
      const scalar_t* x = column_values + (c - lo) * rows;
      std::fill(tally.begin(), tally.end(), Index(0));
      for (int64_t row = 0; row < rows; ++row) ++tally[k[row]];
      replay.clear_upper();
      int64_t position = c * rows;
      for (int64_t p = 0; p < dim_size; ++p) {
        replay.start(p, position);
        position += tally[p];
      }
      if (counts != nullptr) {
        for (int64_t p = 0; p < dim_size; ++p) counts[p * width + c] = tally[p];
      }
      for (int64_t row = 0; row < rows; ++row) replay.add(k[row], static_cast<acc_t>(x[row]));
      for (int64_t p = 0; p < dim_size; ++p) {
        sums[p * width + c] = static_cast<scalar_t>(replay.sum(p));
      }
    }
  });
  return in_range.load();
}

// sum_elements for every dtype sum_segments takes, where the positions (a replay state of ~16
// bytes each per thread) stay within a few times the elements' count.
std::optional<std::pair<at::Tensor, at::Tensor>> sum_elements_cpu(const at::Tensor& rows,
                                                                  const at::Tensor& keys,
                                                                  int64_t dim_size,
                                                                  bool with_counts) {
  const int64_t count = rows.size(0), width = rows.size(1), n = count * width;
  if (width == 0 || dim_size > 4 * n + 4096) return std::nullopt;
  at::Tensor sums = empty_output("scatter", "the output", {dim_size, width}, rows.options());
  at::Tensor counts;
  if (with_counts) counts = at::empty({dim_size, width}, keys.options());
  // int32 keys and positions where every one fits: less scratch, a smaller replay state
  const bool narrow = std::max(n, dim_size) <= std::numeric_limits<int32_t>::max();
  bool in_range = true;
  AT_DISPATCH_V2(rows.scalar_type(), "scatter_sum_elements_cpu", AT_WRAP([&] {
                   const auto run = narrow ? &sum_elements_in_tree_order<scalar_t, int32_t>
                                           : &sum_elements_in_tree_order<scalar_t, int64_t>;
                   in_range = run(rows.const_data_ptr<scalar_t>(), keys.const_data_ptr<int64_t>(),
                                  count, width, dim_size, sums.mutable_data_ptr<scalar_t>(),
                                  with_counts ? counts.mutable_data_ptr<int64_t>() : nullptr);
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
  if (!in_range) return std::nullopt;
  return std::make_pair(sums, counts);
}

// Half and bfloat16 products round at every row here but once on the grouped route (op-math
// accumulation): those take the grouped route.
std::optional<at::Tensor> product_by_keys_cpu(const at::Tensor& rows, const at::Tensor& keys,
                                              int64_t dim_size) {
  const at::ScalarType dtype = rows.scalar_type();
  if (dtype == at::kHalf || dtype == at::kBFloat16 ||
      !(at::isIntegralType(dtype, /*includeBool=*/true) || at::isFloatingType(dtype) ||
        at::isComplexType(dtype))) {
    return std::nullopt;
  }
  const int64_t count = rows.size(0), width = rows.size(1);
  at::Tensor out = empty_output("scatter", "the output", {dim_size, width}, rows.options());
  AT_DISPATCH_V2(dtype, "scatter_product_cpu", AT_WRAP([&] {
                   fold_rows_in_order<scalar_t, RowFold::kProduct>(
                       rows.const_data_ptr<scalar_t>(), keys.const_data_ptr<int64_t>(), count,
                       width, dim_size, out.mutable_data_ptr<scalar_t>(), nullptr);
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kBool);
  return out;
}

const GroupingBackend kCpuGrouping{
    &cpu::sort_keys,        &cpu::run_offsets,    &cpu::segment_gather_sum,
    &extremum_by_keys_cpu,  &product_by_keys_cpu, &fold_elements_cpu,
    &cpu::group_small_keys, &sums_in_order_cpu,   &sum_elements_cpu};

at::Tensor scatter_cpu(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                       OptionalSize dim_size, c10::string_view reduce) {
  return scatter_with(kCpuGrouping, src, index, dim, dim_size, reduce);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> scatter_extremum_cpu(const at::Tensor& src,
                                                        const at::Tensor& index, int64_t dim,
                                                        OptionalSize dim_size) {
  return scatter_extremum_with(kCpuGrouping, kMax, src, index, dim, dim_size);
}

// ---- autograd ----

at::Tensor call_scatter(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                        OptionalSize dim_size, c10::string_view reduce) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, OptionalSize,
                                        c10::string_view)>("torch_ragged::scatter");
  return op.call(src, index, dim, dim_size, reduce);
}

using ExtremumSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                             int64_t, OptionalSize);

std::tuple<at::Tensor, at::Tensor> call_scatter_extremum(bool is_max, const at::Tensor& src,
                                                         const at::Tensor& index, int64_t dim,
                                                         OptionalSize dim_size) {
  static auto max_op = op_handle<ExtremumSignature>("torch_ragged::scatter_max");
  static auto min_op = op_handle<ExtremumSignature>("torch_ragged::scatter_min");
  return (is_max ? max_op : min_op).call(src, index, dim, dim_size);
}

// Along dim: a (n,) tensor shaped to broadcast against a tensor of `rank` dims.
at::Tensor along(const at::Tensor& v, int64_t dim, int64_t rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[dim] = -1;
  return v.view(shape);
}

// The index as the backward passes read it: 1-D per row as given (index_select), else broadcast
// to src (gather: right whether or not it names one position per row).
struct SavedIndex {
  at::Tensor index;
  bool per_row;
};

SavedIndex saved_index(const at::Tensor& src, const at::Tensor& index, int64_t dim) {
  if (is_row_index(src, index, dim)) return {index, true};
  return {index_like_src("scatter", src, index, dim), false};
}

// grad_out read at each element's position: grad_src's shape.
at::Tensor read_positions(const at::Tensor& grad_out, const at::Tensor& index, bool per_row,
                          int64_t dim) {
  // index_select of a strided grad_out (sum().backward()'s expanded ones) takes a per-element
  // path ~4x slower than making it contiguous first (the output is the larger tensor)
  return per_row ? grad_out.contiguous().index_select(dim, index) : grad_out.gather(dim, index);
}

}  // namespace

at::Tensor read_at_positions(const at::Tensor& values, const at::Tensor& src,
                             const at::Tensor& index, int64_t dim) {
  const SavedIndex read = saved_index(src, index, dim);
  return read_positions(values, read.index, read.per_row, dim);
}

namespace {

// Elements per output position, in int64 (exact, deterministic), shaped to divide grad_out.
at::Tensor counts_per_position(const at::Tensor& grad_out, const at::Tensor& index, bool per_row,
                               int64_t dim) {
  if (per_row) {
    const at::Tensor counts =
        at::zeros_symint({grad_out.sym_size(dim)}, index.options().dtype(at::kLong))
            .index_add_(0, index, at::ones_like(index, at::kLong));
    return along(counts, dim, grad_out.dim());
  }
  return at::zeros_symint(grad_out.sym_sizes(), index.options().dtype(at::kLong))
      .scatter_add_(dim, index.to(at::kLong), at::ones_like(index, at::kLong));
}

class ScatterSumOrMean : public torch::autograd::Function<ScatterSumOrMean> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& src, const at::Tensor& index,
                            int64_t dim, OptionalSize dim_size, c10::string_view reduce) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_scatter(src, index, dim, dim_size, reduce);
    // the op checked its arguments
    const int64_t d = dim < 0 ? dim + src.dim() : dim;
    const SavedIndex saved = saved_index(src, index, d);
    ctx->save_for_backward({saved.index});
    ctx->saved_data["per_row"] = saved.per_row;
    ctx->saved_data["dim"] = d;
    ctx->saved_data["mean"] = reduce == "mean";
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<ScatterSumOrMean>();
    const at::Tensor index = ctx->get_saved_variables()[0];
    const bool per_row = ctx->saved_data["per_row"].toBool();
    const int64_t dim = ctx->saved_data["dim"].toInt();
    at::Tensor grad = grads[0];
    if (ctx->saved_data["mean"].toBool()) {
      // unreached positions send nothing: clamping keeps their division finite
      const at::Tensor counts = counts_per_position(grad, index, per_row, dim).clamp_min_(1);
      grad = grad / counts.to(grad.scalar_type());
    }
    return {read_positions(grad, index, per_row, dim), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

// reduce="mul": d out / d src_i = the product of the other elements at i's position: out / src_i
// where src holds no zero (one device read decides, as torch's prod backward), else computed
// without dividing by zero: P = the product of the position's nonzero
// elements, Z = the product of its zero elements (1 without any); a nonzero element gets
// Z * P / src_i, a zero element P when it is the only zero there, else 0. Built from
// differentiable ops (this op included), so it is differentiable in turn -- twice exactly where a
// position holds at most one zero (Z carries d/d(that zero) = 1); with more, torch's
// scatter_reduce refuses the double backward and so does this.
class ScatterProduct : public torch::autograd::Function<ScatterProduct> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& src, const at::Tensor& index,
                            int64_t dim, OptionalSize dim_size) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_scatter(src, index, dim, dim_size, "mul");
    const int64_t d = dim < 0 ? dim + src.dim() : dim;
    const SavedIndex saved = saved_index(src, index, d);
    ctx->save_for_backward({src, index, saved.index, out});
    ctx->saved_data["per_row"] = saved.per_row;
    ctx->saved_data["dim"] = d;
    ctx->saved_data["dim_size"] = out.sym_size(d);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<ScatterProduct>();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &src = saved[0], &index = saved[1], &read_index = saved[2];
    const bool per_row = ctx->saved_data["per_row"].toBool();
    const int64_t dim = ctx->saved_data["dim"].toInt();
    const c10::SymInt dim_size = ctx->saved_data["dim_size"].toSymInt();
    const auto at_positions = [&](const at::Tensor& t) {
      return read_positions(t, read_index, per_row, dim);
    };
    const at::Tensor is_zero = src == 0;
    // no zero (one read, as torch's prod backward): out / src; traced (no data to read): the
    // zero-safe form, right either way
    if (!is_symbolic(src) && !is_zero.any().item<bool>()) {
      const at::Tensor out = saved[3].is_complex() ? saved[3].conj() : saved[3];
      return {at_positions(grads[0] * out) / (src.is_complex() ? src.conj() : src), at::Tensor(),
              at::Tensor(), at::Tensor()};
    }
    const at::Tensor zeros_here =
        at_positions(call_scatter(is_zero.to(at::kLong), index, dim, dim_size, "sum"));
    if (at::GradMode::is_enabled() && !is_symbolic(src)) {  // a double backward may follow
      TORCH_CHECK_VALUE(!zeros_here.gt(1).any().item<bool>(),
                        "torch_ragged.scatter: the double backward of reduce=\"mul\" is not "
                        "supported where more than one zero of src reaches the same position (as "
                        "torch's scatter_reduce prod)");
    }
    const at::Tensor nonzero = at::where(is_zero, at::ones_like(src), src);
    const at::Tensor product_of_nonzero =
        at_positions(call_scatter(nonzero, index, dim, dim_size, "mul"));
    const at::Tensor product_of_zeros = at_positions(
        call_scatter(at::where(is_zero, src, at::ones_like(src)), index, dim, dim_size, "mul"));
    at::Tensor others = at::where(is_zero, at::where(zeros_here == 1, product_of_nonzero, 0),
                                  product_of_zeros * product_of_nonzero / nonzero);
    if (others.is_complex()) others = others.conj();
    return {at_positions(grads[0]) * others, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class ScatterExtremum : public torch::autograd::Function<ScatterExtremum> {
 public:
  static variable_list forward(AutogradContext* ctx, bool is_max, const at::Tensor& src,
                               const at::Tensor& index, int64_t dim, const OptionalSize& dim_size) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [values, arg] = call_scatter_extremum(is_max, src, index, dim, dim_size);
    const int64_t d = dim < 0 ? dim + src.dim() : dim;
    ctx->save_for_backward({arg});
    ctx->saved_data["dim"] = d;
    ctx->saved_data["rows"] = src.sym_size(d);
    ctx->mark_non_differentiable({arg});
    return {values, arg};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<ScatterExtremum>();
    const at::Tensor arg = ctx->get_saved_variables()[0];
    const int64_t dim = ctx->saved_data["dim"].toInt();
    const c10::SymInt rows = ctx->saved_data["rows"].toSymInt();
    std::vector<c10::SymInt> sizes(grads[0].sym_sizes().begin(), grads[0].sym_sizes().end());
    sizes[dim] = rows + 1;
    at::Tensor grad = at::zeros_symint(sizes, grads[0].options())
                          .scatter(dim, arg, grads[0])
                          .narrow_symint(dim, 0, rows);
    return {at::Tensor(), grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor scatter_autograd(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                            OptionalSize dim_size, c10::string_view reduce) {
  check_defined("scatter", "src", src);  // before autograd reads their devices
  check_defined("scatter", "index", index);
  if (!records_graph(src)) {
    at::AutoDispatchBelowAutograd guard;
    return call_scatter(src, index, dim, dim_size, reduce);
  }
  if (is_extremum(reduce)) {
    return as_op("scatter", [&] {
      return ScatterExtremum::apply(reduce == "max", src, index, dim, dim_size)[0];
    });
  }
  if (reduce == "mul") return ScatterProduct::apply(src, index, dim, dim_size);
  return ScatterSumOrMean::apply(src, index, dim, dim_size, reduce);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> scatter_extremum_autograd(const at::Tensor& src,
                                                             const at::Tensor& index, int64_t dim,
                                                             OptionalSize dim_size) {
  const std::string_view op = kMax ? "scatter_max" : "scatter_min";
  check_defined(op, "src", src);
  check_defined(op, "index", index);
  if (!records_graph(src)) {
    at::AutoDispatchBelowAutograd guard;
    return call_scatter_extremum(kMax, src, index, dim, dim_size);
  }
  variable_list out = ScatterExtremum::apply(kMax, src, index, dim, dim_size);
  return {out[0], out[1]};
}

constexpr const char* kKernelOps[] = {"scatter", "scatter_max", "scatter_min"};

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("scatter", &scatter_cpu);
  m.impl("scatter_max", &scatter_extremum_cpu<true>);
  m.impl("scatter_min", &scatter_extremum_cpu<false>);
}

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("scatter", &scatter_autograd);
  m.impl("scatter_max", &scatter_extremum_autograd<true>);
  m.impl("scatter_min", &scatter_extremum_autograd<false>);
}

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kKernelOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kKernelOps);
}

namespace ops {

at::Tensor scatter(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                   OptionalSize dim_size, c10::string_view reduce) {
  return call_scatter(src, index, dim, std::move(dim_size), reduce);
}

std::tuple<at::Tensor, at::Tensor> scatter_extremum(bool is_max, const at::Tensor& src,
                                                    const at::Tensor& index, int64_t dim,
                                                    OptionalSize dim_size) {
  return call_scatter_extremum(is_max, src, index, dim, std::move(dim_size));
}

}  // namespace ops

// ---- Public C++ API ----

static OptionalSize as_sym_size(std::optional<int64_t> n) {
  if (!n.has_value()) return std::nullopt;
  return c10::SymInt(*n);
}

at::Tensor scatter(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                   std::optional<int64_t> dim_size, std::string_view reduce) {
  return call_scatter(src, index, dim, as_sym_size(dim_size),
                      c10::string_view(reduce.data(), reduce.size()));
}

std::tuple<at::Tensor, at::Tensor> scatter_max(const at::Tensor& src, const at::Tensor& index,
                                               int64_t dim, std::optional<int64_t> dim_size) {
  return call_scatter_extremum(true, src, index, dim, as_sym_size(dim_size));
}

std::tuple<at::Tensor, at::Tensor> scatter_min(const at::Tensor& src, const at::Tensor& index,
                                               int64_t dim, std::optional<int64_t> dim_size) {
  return call_scatter_extremum(false, src, index, dim, as_sym_size(dim_size));
}

}  // namespace torch_ragged
