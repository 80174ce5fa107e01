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
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "segment/segment_args.h"
#include "segment/segment_index.h"
#include "segment/segment_ops.h"

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

constexpr std::string_view kReductions[] = {"sum", "add", "mean", "max", "min"};

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
struct Groups {
  at::Tensor positions, permutation, first_idx;
  int64_t dim_size = 0;
};

// One int64 key per row of src along dim, each checked to lie in [0, dim_size), and dim_size
// (given, or the largest key + 1).
std::pair<at::Tensor, int64_t> checked_keys(std::string_view op, const at::Tensor& src,
                                            const at::Tensor& index, int64_t dim,
                                            const OptionalSize& dim_size) {
  int64_t size = 0;
  if (dim_size.has_value()) {
    size = dim_size->expect_int();
    TORCH_CHECK_VALUE(size >= 0, "torch_ragged.", op, ": dim_size must be a non-negative int, got ",
                      size);
  }
  at::Tensor keys =
      one_index_per_row(op, src, index, dim, /*check_rows_agree=*/true).to(at::kLong).contiguous();
  if (keys.numel() > 0) {
    const auto [lo, hi] = key_range(keys);
    TORCH_CHECK_VALUE(lo >= 0, "torch_ragged.", op, ": index must be non-negative, got ", lo);
    if (!dim_size.has_value()) size = hi + 1;
    TORCH_CHECK_VALUE(hi < size, "torch_ragged.", op, ": index holds ", hi,
                      ", out of range for dim_size ", size);
  }
  return {keys, size};
}

Groups group_rows(std::string_view op, const GroupingBackend& backend, const at::Tensor& src,
                  const at::Tensor& index, int64_t dim, const OptionalSize& dim_size) {
  Groups groups;
  const auto [keys, size] = checked_keys(op, src, index, dim, dim_size);
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

// Each group's sum (reduce sum / add) or mean, copied to its position along dim of a zero output
// (contiguous, as torch's reductions give).
at::Tensor sum_or_mean(const GroupingBackend& backend, const Groups& groups, const at::Tensor& src,
                       int64_t dim, bool mean) {
  const at::Tensor rows = dim_first(src, dim);
  // as segment_mean: a mean of bools has no meaning torch gives it (torch.mean refuses them)
  TORCH_CHECK_TYPE(
      !(mean && rows.scalar_type() == at::kBool),
      "torch_ragged.scatter: reduce=\"mean\" needs numbers (bool is not averaged: convert "
      "it, e.g. src.long()), got Bool");
  const bool narrow_int = !at::isFloatingType(rows.scalar_type()) &&
                          !at::isComplexType(rows.scalar_type()) &&
                          rows.scalar_type() != at::kLong && rows.scalar_type() != at::kUInt64;
  // bool sums are or-ed (a sum of counts, then != 0); integer means sum in 64 bits (a sum in a
  // narrow dtype would wrap first: 256 int8 ones sum to 0).
  const bool widen = rows.scalar_type() == at::kBool || (mean && narrow_int);
  at::Tensor sums = backend.segment_gather_sum(widen ? rows.to(at::kLong) : rows,
                                               groups.permutation, at::Tensor(), groups.first_idx);
  if (mean) {
    std::vector<int64_t> column(std::max<int64_t>(rows.dim(), 1), 1);
    column[0] = -1;
    const at::Tensor counts = groups.first_idx.diff().view(column);
    if (at::isFloatingType(rows.scalar_type()) || at::isComplexType(rows.scalar_type())) {
      sums = sums / counts.to(sums.scalar_type());
    } else {  // the quotient of the 64-bit sum fits src's dtype again (|mean| <= max |row|),
              // rounded toward minus infinity as torch_scatter's
      sums = sums.div(counts, "floor");
    }
  }
  if (rows.scalar_type() == at::kBool) sums = sums.ne(0);
  at::Tensor out = empty_output("scatter", "the output", scattered_sizes(src, dim, groups.dim_size),
                                src.options())
                       .zero_();
  return out.index_copy_(dim, groups.positions, dim_back(sums.to(src.scalar_type()), dim));
}

}  // namespace

at::Tensor one_index_per_row(std::string_view op, const at::Tensor& src, const at::Tensor& index,
                             int64_t dim, bool check_rows_agree) {
  const c10::SymInt rows = src.sym_size(dim);
  if (index.dim() == 1 && index.sym_size(0) == rows) return index;
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
                    ") = ", rows, " entries or broadcast to src's shape ",
                    shape_tuple(src.sym_sizes()), ", got ", shape_tuple(index.sym_sizes()));
  const at::Tensor per_row =
      aligned.expand_symint(src.sym_sizes()).movedim(dim, 0).reshape_symint({rows, -1});
  if (per_row.sym_size(1) == 0) return at::zeros_symint({rows}, index.options());
  const at::Tensor first = per_row.select(1, 0);
  if (check_rows_agree && !is_symbolic(per_row)) {
    TORCH_CHECK_VALUE(at::equal(per_row, first.unsqueeze(1).expand_as(per_row)), "torch_ragged.",
                      op, ": index must be the same for every element of a row along dim ", dim,
                      " (one group per row); different indices per column are not supported");
  }
  return first;
}

at::Tensor scatter_with(const GroupingBackend& backend, const at::Tensor& src,
                        const at::Tensor& index, int64_t dim, const OptionalSize& dim_size,
                        std::string_view reduce) {
  constexpr std::string_view op = "scatter";
  const bool known =
      std::find(std::begin(kReductions), std::end(kReductions), reduce) != std::end(kReductions);
  TORCH_CHECK_VALUE(known,
                    "torch_ragged.scatter: reduce must be one of sum, add, mean, max, min, "
                    "got '",
                    reduce, "'");
  if (is_extremum(reduce)) {
    return std::get<0>(as_op(op, [&] {
      return scatter_extremum_with(backend, reduce == "max", src, index, dim, dim_size,
                                   /*with_arg=*/false);
    }));
  }
  const int64_t d = checked_dim(op, src, index, dim);
  const Groups groups = group_rows(op, backend, src, index, d, dim_size);
  return sum_or_mean(backend, groups, src, d, reduce == "mean");
}

std::tuple<at::Tensor, at::Tensor> scatter_extremum_with(const GroupingBackend& backend,
                                                         bool is_max, const at::Tensor& src,
                                                         const at::Tensor& index, int64_t dim,
                                                         const OptionalSize& dim_size,
                                                         bool with_arg) {
  const std::string_view op = is_max ? "scatter_max" : "scatter_min";
  const int64_t d = checked_dim(op, src, index, dim);
  if (backend.extremum_by_keys != nullptr) {
    const auto [keys, size] = checked_keys(op, src, index, d, dim_size);
    const at::Tensor rows = dim_first(src, d).contiguous();
    const int64_t width = c10::multiply_integers(rows.sizes().begin() + 1, rows.sizes().end());
    auto [values, arg] = backend.extremum_by_keys(op, is_max, rows.view({rows.size(0), width}),
                                                  keys, size, with_arg);
    std::vector<int64_t> first_sizes(rows.sizes().begin(), rows.sizes().end());
    first_sizes[0] = size;  // (dim_size, the other dims in order): dim moved back below
    return {dim_back(values.view(first_sizes), d).contiguous(),
            with_arg ? dim_back(arg.view(first_sizes), d).contiguous() : arg};
  }
  const Groups groups = group_rows(op, backend, src, index, d, dim_size);
  const at::Tensor rows = dim_first(src, d);
  const std::vector<int64_t> out_sizes = scattered_sizes(src, d, groups.dim_size);
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
    out.index_copy_(d, groups.positions, dim_back(values, d));
    const at::Tensor source = grouped_in_place ? arg : at::take(groups.permutation, arg);
    source_row.index_copy_(d, groups.positions, dim_back(source, d));
  }
  return {out, source_row};
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

// Rows in order, each compared into its position (ExtremumReducer::beats, the segment core's rule:
// the earlier row keeps a tie, the first NaN wins). A position's first row is copied whole (no
// per-element "empty yet?" test); `arg` is written only when asked for (scatter(reduce="max") has
// none). Threads split the positions; each reads every key and only its positions' rows, so the
// result does not depend on the thread count.
template <typename scalar_t, bool kMax>
void extremum_rows_in_order(const scalar_t* src, const int64_t* keys, int64_t rows, int64_t width,
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
      if (best_row == nullptr) {
        fold_row<scalar_t, kMax, false>(x, best, nullptr, row, width);
      } else {
        fold_row<scalar_t, kMax, true>(x, best, best_row, row, width);
      }
    }
    for (int64_t position = lo; position < hi; ++position) {  // positions no row reaches: 0
      if (!reached[position])
        std::fill(out + position * width, out + (position + 1) * width, scalar_t(0));
    }
  });
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
                   const auto run = is_max ? &extremum_rows_in_order<scalar_t, true>
                                           : &extremum_rows_in_order<scalar_t, false>;
                   run(rows.const_data_ptr<scalar_t>(), keys.const_data_ptr<int64_t>(), count,
                       width, dim_size, out.mutable_data_ptr<scalar_t>(),
                       with_arg ? arg.mutable_data_ptr<int64_t>() : nullptr);
                 }),
                 AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool,
                 at::kHalf, at::kBFloat16);
  return {out, arg};
}

const GroupingBackend kCpuGrouping{&cpu::sort_keys, &cpu::run_offsets, &cpu::segment_gather_sum,
                                   &extremum_by_keys_cpu};

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

class ScatterSumOrMean : public torch::autograd::Function<ScatterSumOrMean> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& src, const at::Tensor& index,
                            int64_t dim, OptionalSize dim_size, c10::string_view reduce) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_scatter(src, index, dim, dim_size, reduce);
    // the op checked its arguments
    const int64_t d = dim < 0 ? dim + src.dim() : dim;
    ctx->save_for_backward({one_index_per_row("scatter", src, index, d, false)});
    ctx->saved_data["dim"] = d;
    ctx->saved_data["mean"] = reduce == "mean";
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<ScatterSumOrMean>();
    const at::Tensor row_index = ctx->get_saved_variables()[0];
    const int64_t dim = ctx->saved_data["dim"].toInt();
    at::Tensor grad = grads[0];
    if (ctx->saved_data["mean"].toBool()) {
      // rows per position, counted in int64 (exact, deterministic); unreached positions send
      // nothing, clamping keeps their division finite
      const at::Tensor counts =
          at::zeros_symint({grad.sym_size(dim)}, row_index.options().dtype(at::kLong))
              .index_add_(0, row_index, at::ones_like(row_index, at::kLong))
              .clamp_min_(1);
      grad = grad / along(counts.to(grad.scalar_type()), dim, grad.dim());
    }
    return {grad.index_select(dim, row_index), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
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
