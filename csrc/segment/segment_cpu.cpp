// CPU kernels of the segment core. Reductions and row maps walk fixed blocks of rows
// (segment_index.h): at::parallel_for over blocks balances by rows, so one huge segment uses every
// thread, and the summation order is independent of the thread count.

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <cstring>
#include <limits>

#include "common/checks.h"
#include "common/cpu_clones.h"
#include "common/fill.h"
#include "common/parallel.h"
#include "segment/offsets.h"
#include "segment/segment_args.h"
#include "segment/segment_index.h"
#include "segment/sort.h"

namespace torch_ragged {
namespace {

// A fixed function of the width (never of the thread count): results are bitwise reproducible.
int64_t cpu_rows_per_block(int64_t width) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, width));
}

// The checked segments of `data`: first_idx on the host, data contiguous.
struct CpuSegments {
  std::vector<int64_t> first_idx;
  at::Tensor data;
  int64_t width;

  int64_t num_segments() const { return static_cast<int64_t>(first_idx.size()) - 1; }
  RowBlocks blocks() const {
    return RowBlocks{first_idx.data(), num_segments(), first_idx.back(), cpu_rows_per_block(width)};
  }
};

CpuSegments cpu_segments(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                         SegmentDtypes dtypes) {
  check_segment_args(op, data, first_idx, dtypes);
  std::vector<int64_t> offsets = checked_first_idx(op, first_idx, std::nullopt);
  check_last_offset_is_rows(op, offsets.back(), data.size(0));
  return CpuSegments{std::move(offsets), data.contiguous(), row_width(data)};
}

// ---- the two loops every CPU kernel is made of ----

// Segments spanning blocks: the block holding a segment's tail merges the heads of the following
// blocks into its tail slot, in block order (so the result does not depend on the thread count).
template <typename Acc, typename Merge>
void merge_spanning_segments(const RowBlocks& blocks, int64_t width, const std::vector<Acc>& heads,
                             std::vector<Acc>& tails, const Merge& merge) {
  at::parallel_for(0, blocks.count(), 64, [&](int64_t first_block, int64_t last_block) {
    for (int64_t k = first_block; k < last_block; ++k) {
      const int64_t b = blocks.tail_segment(k);
      if (b < 0) continue;
      const int64_t last = blocks.last_block_of(b);
      for (int64_t c = 0; c < width; ++c) {
        for (int64_t j = k + 1; j <= last; ++j) merge(tails[k * width + c], heads[j * width + c]);
      }
    }
  });
}

// The tail slot holding the merged result of segment b (after merge_spanning_segments).
int64_t merged_slot(const RowBlocks& blocks, int64_t b) {
  return blocks.block_of_row(blocks.first_idx[b]);
}

// Reductions: reduce_part(b, lo, hi, acc) reduces rows [lo, hi) of segment b into acc[0..width);
// write(b, c, acc, count) stores a finished one. Empty segments get the identity and count 0.
template <typename Reducer, typename ReducePart, typename Write>
void reduce_segments(const RowBlocks& blocks, int64_t width, const ReducePart& reduce_part,
                     const Write& write) {
  using Acc = typename Reducer::Acc;
  const int64_t num_blocks = blocks.count();
  std::vector<Acc> heads(num_blocks * width), tails(num_blocks * width);
  at::parallel_for(0, num_blocks, 1, [&](int64_t first_block, int64_t last_block) {
    std::vector<Acc> acc(width);
    for (int64_t k = first_block; k < last_block; ++k) {
      blocks.for_each_part(k, [&](int64_t b, int64_t lo, int64_t hi, SegmentPart part) {
        reduce_part(b, lo, hi, acc.data());
        if (part == SegmentPart::kWhole) {
          for (int64_t c = 0; c < width; ++c) write(b, c, acc[c], hi - lo);
        } else {
          Acc* slot = (part == SegmentPart::kHead ? heads : tails).data() + k * width;
          std::copy(acc.begin(), acc.end(), slot);
        }
      });
    }
  });
  merge_spanning_segments(blocks, width, heads, tails, &Reducer::merge);
  at::parallel_for(0, num_blocks, 64, [&](int64_t first_block, int64_t last_block) {
    for (int64_t k = first_block; k < last_block; ++k) {
      const int64_t b = blocks.tail_segment(k);
      if (b < 0) continue;
      const int64_t count = blocks.first_idx[b + 1] - blocks.first_idx[b];
      for (int64_t c = 0; c < width; ++c) write(b, c, tails[k * width + c], count);
    }
  });
  at::parallel_for(0, blocks.num_segments, kGrainElems, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (blocks.first_idx[b] != blocks.first_idx[b + 1]) continue;
      for (int64_t c = 0; c < width; ++c) write(b, c, Reducer::identity(), 0);
    }
  });
}

// Per-segment statistics, then a pass over the rows that uses them (softmax and its backward).
// Per block, into a block-sized scratch that stays in cache:
//   op.prepare(b, lo, hi, rows, stats)   per part: first statistics, and the part's scratch rows;
//   op.transform(scratch, n)             once for the whole block (a vectorised exp: one call per
//                                        block, not per small segment);
//   op.complete(b, lo, hi, rows, stats)  per part: the rest of the statistics;
//   op.finish(b, lo, hi, stats, rows, fresh) writes the part's output rows; fresh says the scratch
//                                        rows still match these statistics.
// A segment inside one block is finished at once; a segment spanning blocks merges its block
// statistics in order (Op::merge) and its rows get a second pass (fresh = false).
template <typename Op>
void reduce_then_map(const RowBlocks& blocks, int64_t width, const Op& op) {
  using Stat = typename Op::Stat;
  using acc_t = typename Op::acc_t;
  const int64_t num_blocks = blocks.count();
  std::vector<Stat> heads(num_blocks * width), tails(num_blocks * width);
  const int64_t scratch_size = blocks.rows_per_block * width;
  at::parallel_for(0, num_blocks, 1, [&](int64_t first_block, int64_t last_block) {
    std::vector<acc_t> scratch(scratch_size);
    std::vector<Stat> part_stats(scratch_size);  // a block has at most one part per row
    for (int64_t k = first_block; k < last_block; ++k) {
      const int64_t begin = blocks.begin(k);
      int64_t parts = 0;
      blocks.for_each_part(k, [&](int64_t b, int64_t lo, int64_t hi, SegmentPart) {
        op.prepare(b, lo, hi, scratch.data() + (lo - begin) * width,
                   part_stats.data() + parts++ * width);
      });
      op.transform(scratch.data(), (blocks.end(k) - begin) * width);
      parts = 0;
      blocks.for_each_part(k, [&](int64_t b, int64_t lo, int64_t hi, SegmentPart part) {
        Stat* stats = part_stats.data() + parts++ * width;
        acc_t* rows = scratch.data() + (lo - begin) * width;
        op.complete(b, lo, hi, rows, stats);
        if (part == SegmentPart::kWhole) {
          op.finish(b, lo, hi, stats, rows, /*fresh=*/true);
        } else {
          Stat* slot = (part == SegmentPart::kHead ? heads : tails).data() + k * width;
          std::copy(stats, stats + width, slot);
        }
      });
    }
  });
  merge_spanning_segments(blocks, width, heads, tails, &Op::merge);
  at::parallel_for(0, num_blocks, 1, [&](int64_t first_block, int64_t last_block) {
    std::vector<acc_t> scratch(scratch_size);
    for (int64_t k = first_block; k < last_block; ++k) {
      blocks.for_each_part(k, [&](int64_t b, int64_t lo, int64_t hi, SegmentPart part) {
        if (part == SegmentPart::kWhole) return;
        op.finish(b, lo, hi, tails.data() + merged_slot(blocks, b) * width, scratch.data(),
                  /*fresh=*/false);
      });
    }
  });
}

// exp of n values in place with torch's vectorised kernel (on a block that sits in cache).
template <typename acc_t>
void exp_in_place(acc_t* values, int64_t n) {
  at::from_blob(values, {n}, at::TensorOptions().dtype(c10::CppTypeToScalarType<acc_t>::value))
      .exp_();
}

// ---- row loops: rows [lo, hi) of a (rows, width) array, vectorised over columns ----

// acc[c] = sum of the rows' column c (op-math), or of data * times when times is given; row r
// reads data row index[r] when index is given (a gathered sum: coalesce's duplicates) and is
// scaled by weight[r] when weight is given (a sparse matrix's row times a dense matrix).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void sum_rows(const scalar_t* data, const scalar_t* times,
                                      const int64_t* index, const scalar_t* weight, int64_t width,
                                      int64_t lo, int64_t hi, acc_t* __restrict__ acc) {
  std::fill(acc, acc + width, acc_t(0));
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ x = data + (index == nullptr ? row : index[row]) * width;
    if (weight != nullptr) {
      const acc_t w = static_cast<acc_t>(weight[row]);
      for (int64_t c = 0; c < width; ++c) acc[c] += w * static_cast<acc_t>(x[c]);
    } else if (times == nullptr) {
      for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<acc_t>(x[c]);
    } else {
      const scalar_t* __restrict__ y = times + row * width;
      for (int64_t c = 0; c < width; ++c) {
        acc[c] += static_cast<acc_t>(x[c]) * static_cast<acc_t>(y[c]);
      }
    }
  }
}

// Per column, the max (kMax) or min of rows [lo, hi) (non-empty), NaN winning: branch-free, so
// the loop vectorises. ExtremumReducer's rule, written for whole rows.
template <typename scalar_t, bool kMax, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void column_extremum(const scalar_t* data, int64_t width, int64_t lo,
                                             int64_t hi, acc_t* __restrict__ best) {
  for (int64_t c = 0; c < width; ++c) best[c] = static_cast<acc_t>(data[lo * width + c]);
  for (int64_t row = lo + 1; row < hi; ++row) {
    const scalar_t* __restrict__ x = data + row * width;
    for (int64_t c = 0; c < width; ++c) {
      const acc_t v = static_cast<acc_t>(x[c]), b = best[c];
      best[c] = ExtremumReducer<acc_t, kMax>::beats(v, b) ? v : b;
    }
  }
}

// found[c] = the first row (counted from lo) whose column c equals target[c] (NaN matching NaN):
// a backward scan, so the last match written is the first. int32 offsets are as wide as a float,
// so the select vectorises; a part has at most rows_per_block <= kGrainElems rows.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void first_occurrence(const scalar_t* data, int64_t width, int64_t lo,
                                              int64_t hi, const acc_t* __restrict__ target,
                                              int32_t* __restrict__ found) {
  for (int64_t row = hi - 1; row >= lo; --row) {
    const scalar_t* __restrict__ x = data + row * width;
    const int32_t offset = static_cast<int32_t>(row - lo);
    for (int64_t c = 0; c < width; ++c) {
      const acc_t v = static_cast<acc_t>(x[c]);
      const bool same = (v == target[c]) | (at::_isnan(v) & at::_isnan(target[c]));
      found[c] = same ? offset : found[c];
    }
  }
}

// out[row - lo] = x - shift per column (op-math), for rows [lo, hi).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void shifted_rows(const scalar_t* data, int64_t width, int64_t lo,
                                          int64_t hi, const acc_t* __restrict__ shift,
                                          acc_t* __restrict__ out) {
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ x = data + row * width;
    acc_t* __restrict__ o = out + (row - lo) * width;
    for (int64_t c = 0; c < width; ++c) o[c] = static_cast<acc_t>(x[c]) - shift[c];
  }
}

// out rows [lo, hi) = terms * scale per column (terms: the part's rows, from row lo).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void scaled_rows(const acc_t* terms, int64_t width, int64_t lo, int64_t hi,
                                         const acc_t* __restrict__ scale, scalar_t* out) {
  for (int64_t row = lo; row < hi; ++row) {
    const acc_t* __restrict__ t = terms + (row - lo) * width;
    scalar_t* __restrict__ o = out + row * width;
    for (int64_t c = 0; c < width; ++c) o[c] = static_cast<scalar_t>(t[c] * scale[c]);
  }
}

// log_softmax's out rows [lo, hi) = (x - shift) - log_sum per column. Shifted first: at large
// magnitudes x - (shift + log_sum) would lose log_sum to rounding (x = -1e7 in float32).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void log_softmax_rows(const scalar_t* data, int64_t width, int64_t lo,
                                              int64_t hi, const acc_t* __restrict__ shift,
                                              const acc_t* __restrict__ log_sum, scalar_t* out) {
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ x = data + row * width;
    scalar_t* __restrict__ o = out + row * width;
    for (int64_t c = 0; c < width; ++c)
      o[c] = static_cast<scalar_t>((static_cast<acc_t>(x[c]) - shift[c]) - log_sum[c]);
  }
}

// softmax's gradient y * (g - s), or log_softmax's g - e * s (e = exp(y), the part's rows).
template <typename scalar_t, bool kLog, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void softmax_grad_rows(const scalar_t* grad, const scalar_t* output,
                                               const acc_t* exp_output, int64_t width, int64_t lo,
                                               int64_t hi, const acc_t* __restrict__ sum,
                                               scalar_t* grad_input) {
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ g = grad + row * width;
    const scalar_t* __restrict__ y = output + row * width;
    const acc_t* __restrict__ e = exp_output + (row - lo) * width;
    scalar_t* __restrict__ gi = grad_input + row * width;
    for (int64_t c = 0; c < width; ++c) {
      const acc_t gc = static_cast<acc_t>(g[c]);
      gi[c] = static_cast<scalar_t>(kLog ? gc - e[c] * sum[c]
                                         : static_cast<acc_t>(y[c]) * (gc - sum[c]));
    }
  }
}

// ---- part reducers ----

template <typename scalar_t>
struct SumRows {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* data;
  int64_t width;
  const int64_t* index = nullptr;    // gathered rows, see sum_rows
  const scalar_t* weight = nullptr;  // weighted rows, see sum_rows
  void operator()(int64_t /*segment*/, int64_t lo, int64_t hi, acc_t* acc) const {
    sum_rows(data, static_cast<const scalar_t*>(nullptr), index, weight, width, lo, hi, acc);
  }
};

// max / min and the first row holding it: the extremum per column, then a scan of the (cached)
// rows for its first occurrence.
template <typename scalar_t, bool kMax>
struct ExtremumRows {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* data;
  int64_t width;
  void operator()(int64_t /*segment*/, int64_t lo, int64_t hi, ValueAndRow<acc_t>* acc) const {
    c10::SmallVector<acc_t, 64> best(width);
    c10::SmallVector<int32_t, 64> found(width);
    column_extremum<scalar_t, kMax>(data, width, lo, hi, best.data());
    first_occurrence(data, width, lo, hi, best.data(), found.data());
    for (int64_t c = 0; c < width; ++c) acc[c] = ValueAndRow<acc_t>{best[c], lo + found[c]};
  }
};

// ---- reductions ----

template <bool kMean>
at::Tensor sum_or_mean_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  constexpr std::string_view op = kMean ? "segment_mean" : "segment_sum";
  // Integer means divide in the integer type, truncating (torch_scatter's segment_csr does too).
  const CpuSegments s = cpu_segments(op, data, first_idx, SegmentDtypes::kSummable);
  at::Tensor out = at::empty(per_segment_sizes(data, s.num_segments()), data.options());
  AT_DISPATCH_V2(data.scalar_type(), "segment_sum_cpu", AT_WRAP([&] {
                   using acc_t = at::opmath_type<scalar_t>;
                   reduce_segments<SumReducer<acc_t>>(
                       s.blocks(), s.width,
                       SumRows<scalar_t>{s.data.const_data_ptr<scalar_t>(), s.width},
                       WriteSum<scalar_t, kMean>{out.mutable_data_ptr<scalar_t>(), s.width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor segment_sum_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return sum_or_mean_cpu<false>(data, first_idx);
}

at::Tensor segment_mean_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return sum_or_mean_cpu<true>(data, first_idx);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> extremum_cpu(const at::Tensor& data,
                                                const at::Tensor& first_idx) {
  const CpuSegments s =
      cpu_segments(kMax ? "segment_max" : "segment_min", data, first_idx, SegmentDtypes::kOrdered);
  const std::vector<int64_t> sizes = per_segment_sizes(data, s.num_segments());
  at::Tensor values = at::empty(sizes, data.options());
  at::Tensor arg = at::empty(sizes, data.options().dtype(at::kLong));
  AT_DISPATCH_V2(data.scalar_type(), "segment_extremum_cpu", AT_WRAP([&] {
                   using acc_t = at::opmath_type<scalar_t>;
                   reduce_segments<ExtremumReducer<acc_t, kMax>>(
                       s.blocks(), s.width,
                       ExtremumRows<scalar_t, kMax>{s.data.const_data_ptr<scalar_t>(), s.width},
                       WriteExtremum<scalar_t>{values.mutable_data_ptr<scalar_t>(),
                                               arg.mutable_data_ptr<int64_t>(), s.width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool,
                 at::kHalf, at::kBFloat16);
  return {values, arg};
}

std::tuple<at::Tensor, at::Tensor> segment_max_cpu(const at::Tensor& data,
                                                   const at::Tensor& first_idx) {
  return extremum_cpu<true>(data, first_idx);
}

std::tuple<at::Tensor, at::Tensor> segment_min_cpu(const at::Tensor& data,
                                                   const at::Tensor& first_idx) {
  return extremum_cpu<false>(data, first_idx);
}

// ---- softmax ----

// Statistics (max m, sum of exp(x - m)) per column; parts merge as in the online softmax:
// M = max(m1, m2), S = s1 exp(m1 - M) + s2 exp(m2 - M). A part of only -inf has sum 0 (it is
// shifted by 0, not by -inf), so it adds nothing; a segment of only -inf ends with NaN, as torch.
template <typename scalar_t, bool kLog>
struct SoftmaxRows {
  using acc_t = at::opmath_type<scalar_t>;
  struct Stat {
    acc_t max, sum;
  };
  const scalar_t* data;
  scalar_t* out;
  int64_t width;

  static acc_t shift_of(acc_t max) {
    return max == -std::numeric_limits<acc_t>::infinity() ? acc_t(0) : max;
  }
  static void merge(Stat& acc, const Stat& later) {
    const acc_t m = ExtremumReducer<acc_t, true>::beats(later.max, acc.max) ? later.max : acc.max;
    acc.sum = acc.sum * std::exp(acc.max - m) + later.sum * std::exp(later.max - m);
    acc.max = m;
  }
  // rows = x - shift(max) for the part (exp'd by transform), stats = the column maxima.
  void prepare(int64_t /*segment*/, int64_t lo, int64_t hi, acc_t* rows, Stat* stats) const {
    c10::SmallVector<acc_t, 64> max(width), shift(width);
    column_extremum<scalar_t, true>(data, width, lo, hi, max.data());
    for (int64_t c = 0; c < width; ++c) {
      shift[c] = shift_of(max[c]);
      stats[c].max = max[c];
    }
    shifted_rows(data, width, lo, hi, shift.data(), rows);
  }
  void transform(acc_t* scratch, int64_t n) const { exp_in_place(scratch, n); }
  void complete(int64_t /*segment*/, int64_t lo, int64_t hi, const acc_t* rows, Stat* stats) const {
    c10::SmallVector<acc_t, 64> sum(width);
    sum_rows(rows, static_cast<const acc_t*>(nullptr), nullptr, static_cast<const acc_t*>(nullptr),
             width, 0, hi - lo, sum.data());
    for (int64_t c = 0; c < width; ++c) stats[c].sum = sum[c];
  }
  void finish(int64_t /*segment*/, int64_t lo, int64_t hi, const Stat* stats, acc_t* rows,
              bool fresh) const {
    c10::SmallVector<acc_t, 64> shift(width), scale(width);
    for (int64_t c = 0; c < width; ++c) {
      shift[c] = shift_of(stats[c].max);
      scale[c] = kLog ? std::log(stats[c].sum) : acc_t(1) / stats[c].sum;
    }
    if (kLog) return log_softmax_rows(data, width, lo, hi, shift.data(), scale.data(), out);
    if (!fresh) {  // rows = exp(x - merged max)
      shifted_rows(data, width, lo, hi, shift.data(), rows);
      exp_in_place(rows, (hi - lo) * width);
    }
    scaled_rows(rows, width, lo, hi, scale.data(), out);
  }
};

// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g), exp(y) in the scratch rows.
template <typename scalar_t, bool kLog>
struct SoftmaxGradRows {
  using acc_t = at::opmath_type<scalar_t>;
  using Stat = acc_t;
  const scalar_t* grad;
  const scalar_t* output;
  scalar_t* grad_input;
  int64_t width;

  static void merge(Stat& acc, const Stat& later) { acc += later; }
  void copy_output(int64_t lo, int64_t hi, acc_t* rows) const {
    const scalar_t* y = output + lo * width;
    std::transform(y, y + (hi - lo) * width, rows,
                   [](scalar_t v) { return static_cast<acc_t>(v); });
  }
  void prepare(int64_t /*segment*/, int64_t lo, int64_t hi, acc_t* rows, Stat* sum) const {
    sum_rows(grad, kLog ? nullptr : output, nullptr, static_cast<const scalar_t*>(nullptr), width,
             lo, hi, sum);
    if (kLog) copy_output(lo, hi, rows);
  }
  void transform(acc_t* scratch, int64_t n) const {
    if (kLog) exp_in_place(scratch, n);
  }
  void complete(int64_t, int64_t, int64_t, const acc_t*, Stat*) const {}
  void finish(int64_t /*segment*/, int64_t lo, int64_t hi, const Stat* sum, acc_t* rows,
              bool fresh) const {
    if (kLog && !fresh) {
      copy_output(lo, hi, rows);
      exp_in_place(rows, (hi - lo) * width);
    }
    softmax_grad_rows<scalar_t, kLog>(grad, output, rows, width, lo, hi, sum, grad_input);
  }
};

// ---- scalar rows in many short segments (width 1: sparse softmax's pools, attention scores) ----
//
// The row-block machinery pays its per-part bookkeeping per segment; with one column and a few
// rows per segment that is most of the time. These loops take runs of whole segments per task
// instead (balanced by segments), with one vectorised exp per run of segments. Each segment is
// still summed in row order, so results do not depend on the thread count.

constexpr int64_t kShortSegmentRows = 64;  // average rows per segment below which they apply

bool short_scalar_segments(const CpuSegments& s) {
  return s.width == 1 && s.first_idx.back() < kShortSegmentRows * s.num_segments();
}

// f(first segment, end segment) over runs of whole segments, in parallel.
template <typename F>
void for_segment_runs(const CpuSegments& s, const F& f) {
  at::parallel_for(0, s.num_segments(), std::max<int64_t>(1, kGrainElems / kShortSegmentRows), f);
}

template <typename scalar_t, bool kLog>
void softmax_of_short_segments(const CpuSegments& s, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* x = s.data.const_data_ptr<scalar_t>();
  const int64_t* first = s.first_idx.data();
  for_segment_runs(s, [&](int64_t b0, int64_t b1) {
    const int64_t base = first[b0];
    std::vector<acc_t> terms(first[b1] - base), maxima(b1 - b0);
    for (int64_t b = b0; b < b1; ++b) {
      if (first[b] == first[b + 1]) continue;
      acc_t m = static_cast<acc_t>(x[first[b]]);
      for (int64_t i = first[b] + 1; i < first[b + 1]; ++i) {
        const acc_t v = static_cast<acc_t>(x[i]);
        m = ExtremumReducer<acc_t, true>::beats(v, m) ? v : m;
      }
      maxima[b - b0] = m;
      const acc_t shift = SoftmaxRows<scalar_t, kLog>::shift_of(m);
      for (int64_t i = first[b]; i < first[b + 1]; ++i) {
        terms[i - base] = static_cast<acc_t>(x[i]) - shift;
      }
    }
    exp_in_place(terms.data(), static_cast<int64_t>(terms.size()));
    for (int64_t b = b0; b < b1; ++b) {
      acc_t sum = 0;
      for (int64_t i = first[b]; i < first[b + 1]; ++i) sum += terms[i - base];
      const acc_t shift = SoftmaxRows<scalar_t, kLog>::shift_of(maxima[b - b0]);
      const acc_t log_sum = std::log(sum);
      for (int64_t i = first[b]; i < first[b + 1];
           ++i) {  // (x - max) - log_sum: see log_softmax_rows
        out[i] = static_cast<scalar_t>(kLog ? (static_cast<acc_t>(x[i]) - shift) - log_sum
                                            : terms[i - base] / sum);
      }
    }
  });
}

template <typename scalar_t, bool kLog>
void softmax_grad_of_short_segments(const CpuSegments& s, const scalar_t* grad,
                                    scalar_t* grad_input) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* y = s.data.const_data_ptr<scalar_t>();
  const int64_t* first = s.first_idx.data();
  for_segment_runs(s, [&](int64_t b0, int64_t b1) {
    const int64_t base = first[b0];
    std::vector<acc_t> exp_y;
    if (kLog) {
      exp_y.assign(y + base, y + first[b1]);
      exp_in_place(exp_y.data(), static_cast<int64_t>(exp_y.size()));
    }
    for (int64_t b = b0; b < b1; ++b) {
      acc_t sum = 0;
      for (int64_t i = first[b]; i < first[b + 1]; ++i) {
        const acc_t g = static_cast<acc_t>(grad[i]);
        sum += kLog ? g : g * static_cast<acc_t>(y[i]);
      }
      for (int64_t i = first[b]; i < first[b + 1]; ++i) {
        const acc_t g = static_cast<acc_t>(grad[i]);
        grad_input[i] = static_cast<scalar_t>(kLog ? g - exp_y[i - base] * sum
                                                   : static_cast<acc_t>(y[i]) * (g - sum));
      }
    }
  });
}

template <bool kLog>
at::Tensor softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  const CpuSegments s = cpu_segments(kLog ? "segment_log_softmax" : "segment_softmax", data,
                                     first_idx, SegmentDtypes::kFloating);
  at::Tensor out = at::empty_like(s.data);
  AT_DISPATCH_V2(data.scalar_type(), "segment_softmax_cpu", AT_WRAP([&] {
                   scalar_t* o = out.mutable_data_ptr<scalar_t>();
                   if (short_scalar_segments(s)) {
                     return softmax_of_short_segments<scalar_t, kLog>(s, o);
                   }
                   reduce_then_map(
                       s.blocks(), s.width,
                       SoftmaxRows<scalar_t, kLog>{s.data.const_data_ptr<scalar_t>(), o, s.width});
                 }),
                 AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out.view(data.sizes());
}

at::Tensor segment_softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return softmax_cpu<false>(data, first_idx);
}

at::Tensor segment_log_softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return softmax_cpu<true>(data, first_idx);
}

at::Tensor segment_softmax_backward_cpu(const at::Tensor& grad_output, const at::Tensor& output,
                                        const at::Tensor& first_idx, bool log) {
  constexpr std::string_view op = "segment_softmax_backward";
  const CpuSegments s = cpu_segments(op, output, first_idx, SegmentDtypes::kFloating);
  TORCH_CHECK_VALUE(
      grad_output.sizes() == output.sizes() && grad_output.scalar_type() == output.scalar_type(),
      "torch_ragged.", op, ": grad_output must match output (shape ", output.sizes(), ", dtype ",
      output.scalar_type(), "), got shape ", grad_output.sizes(), " and dtype ",
      grad_output.scalar_type());
  const at::Tensor grad = grad_output.contiguous();
  at::Tensor grad_input = at::empty_like(s.data);
  AT_DISPATCH_V2(
      output.scalar_type(), "segment_softmax_backward_cpu", AT_WRAP([&] {
        const scalar_t* g = grad.const_data_ptr<scalar_t>();
        const scalar_t* y = s.data.const_data_ptr<scalar_t>();
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        if (short_scalar_segments(s)) {
          return log ? softmax_grad_of_short_segments<scalar_t, true>(s, g, gi)
                     : softmax_grad_of_short_segments<scalar_t, false>(s, g, gi);
        }
        if (log) {
          reduce_then_map(s.blocks(), s.width, SoftmaxGradRows<scalar_t, true>{g, y, gi, s.width});
        } else {
          reduce_then_map(s.blocks(), s.width, SoftmaxGradRows<scalar_t, false>{g, y, gi, s.width});
        }
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return grad_input.view(output.sizes());
}

// ---- gathered sums and dots (a sparse matrix's rows times a dense matrix, and its gradient) ----

// index (int64, contiguous, on the CPU) must lie in [0, rows): IndexError naming the first entry
// out.
void check_gather_range(std::string_view op, const at::Tensor& index, int64_t rows) {
  const int64_t* idx = index.const_data_ptr<int64_t>();
  const int64_t n = index.numel();
  const bool in_range = at::parallel_reduce(
      int64_t{0}, n, kGrainElems, true,
      [&](int64_t begin, int64_t end, bool ok) {
        for (int64_t i = begin; i < end; ++i) ok = ok && idx[i] >= 0 && idx[i] < rows;
        return ok;
      },
      [](bool a, bool b) { return a && b; });
  if (in_range) return;
  const int64_t bad =
      std::find_if(idx, idx + n, [&](int64_t v) { return v < 0 || v >= rows; }) - idx;
  TORCH_CHECK_INDEX(false, "torch_ragged.", op, ": index[", bad, "] = ", idx[bad],
                    " is out of range for the ", rows, " rows of the gathered tensor");
}

at::Tensor segment_gather_sum_cpu(const at::Tensor& data, const at::Tensor& index,
                                  const std::optional<at::Tensor>& weight,
                                  const at::Tensor& first_idx) {
  constexpr std::string_view op = "segment_gather_sum";
  check_segment_args(op, data, first_idx, SegmentDtypes::kSummable);
  const at::Tensor rows = checked_gather_index(op, data, index, weight);
  const std::vector<int64_t> offsets = checked_first_idx(op, first_idx, rows.numel());
  check_gather_range(op, rows, data.size(0));
  return cpu::segment_gather_sum(data, rows, weight.value_or(at::Tensor()),
                                 at::tensor(offsets, at::kLong));
}

// out[r] = dot(a_row, row index[r] of b) over the row's columns, for r in [lo, hi).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void dot_rows(const scalar_t* a_row, const scalar_t* b,
                                      const int64_t* index, int64_t width, int64_t lo, int64_t hi,
                                      scalar_t* out) {
  for (int64_t r = lo; r < hi; ++r) {
    const scalar_t* __restrict__ x = b + index[r] * width;
    acc_t acc = 0;
    for (int64_t c = 0; c < width; ++c)
      acc += static_cast<acc_t>(a_row[c]) * static_cast<acc_t>(x[c]);
    out[r] = static_cast<scalar_t>(acc);
  }
}

at::Tensor segment_gather_dot_cpu(const at::Tensor& a, const at::Tensor& b, const at::Tensor& index,
                                  const at::Tensor& first_idx) {
  constexpr std::string_view op = "segment_gather_dot";
  check_segment_args(op, b, first_idx, SegmentDtypes::kFloating);
  TORCH_CHECK_VALUE(a.dim() == b.dim() && a.sizes().slice(1) == b.sizes().slice(1) &&
                        a.scalar_type() == b.scalar_type() && a.device() == b.device(),
                    "torch_ragged.", op, ": a (", a.sizes(), ", ", a.scalar_type(), ") and b (",
                    b.sizes(), ", ", b.scalar_type(),
                    ") must share dtype, device and the sizes after dim 0");
  const at::Tensor rows = checked_gather_index(op, b, index, std::nullopt);
  const std::vector<int64_t> offsets = checked_first_idx(op, first_idx, rows.numel());
  TORCH_CHECK_VALUE(static_cast<int64_t>(offsets.size()) - 1 == a.size(0), "torch_ragged.", op,
                    ": first_idx must have a.size(0) + 1 = ", a.size(0) + 1, " entries, got ",
                    offsets.size());
  check_gather_range(op, rows, b.size(0));
  const at::Tensor left = a.contiguous(), right = b.contiguous();
  const int64_t width = row_width(b), n = rows.numel();
  at::Tensor out = at::empty({n}, a.options());
  const RowBlocks blocks{offsets.data(), a.size(0), n, cpu_rows_per_block(width)};
  AT_DISPATCH_V2(
      a.scalar_type(), "segment_gather_dot_cpu", AT_WRAP([&] {
        const scalar_t* l = left.const_data_ptr<scalar_t>();
        const scalar_t* r = right.const_data_ptr<scalar_t>();
        scalar_t* o = out.mutable_data_ptr<scalar_t>();
        const int64_t* idx = rows.const_data_ptr<int64_t>();
        at::parallel_for(0, blocks.count(), 1, [&](int64_t first_block, int64_t last_block) {
          for (int64_t k = first_block; k < last_block; ++k) {
            blocks.for_each_part(k, [&](int64_t seg, int64_t lo, int64_t hi, SegmentPart) {
              dot_rows(l + seg * width, r, idx, width, lo, hi, o);
            });
          }
        });
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// ---- expand, ids, offsets ----

// Row r of out is row b of `values` for the segment b holding r (values contiguous).
void expand_rows(const at::Tensor& values, at::Tensor& out, const std::vector<int64_t>& first_idx) {
  const int64_t batch = static_cast<int64_t>(first_idx.size()) - 1, rows = first_idx.back();
  if (out.numel() == 0) return;  // also zero-width rows: no work per row
  const int64_t row_bytes = out.nbytes() / rows;
  const char* in = static_cast<const char*>(values.const_data_ptr());
  char* dst = static_cast<char*>(out.mutable_data_ptr());
  const int64_t grain = std::max<int64_t>(1, kGrainElems * 4 / row_bytes);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    int64_t b = segment_of_row(first_idx.data(), batch, begin);
    for (int64_t row = begin; row < end;) {
      while (first_idx[b + 1] <= row) ++b;  // skip empty segments
      const int64_t n = std::min(end, first_idx[b + 1]) - row;
      cpu::fill_pattern(dst + row * row_bytes, n, in + b * row_bytes, row_bytes);
      row += n;
    }
  });
}

at::Tensor segment_expand_cpu(const at::Tensor& values, const at::Tensor& first_idx,
                              std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_expand";
  TORCH_CHECK_TYPE(values.defined(), "torch_ragged.", op, ": values must be a tensor, got None");
  check_first_idx_tensor(op, first_idx, values);
  const std::vector<int64_t> offsets =
      checked_first_idx(op, first_idx, concrete_num_rows(op, num_rows));
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  at::Tensor out = empty_output(
      op, "the output", expanded_sizes(op, values, segments, offsets.back()), values.options());
  expand_rows(values.contiguous(), out, offsets);
  return out;
}

at::Tensor segment_ids_cpu(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_ids";
  check_index_tensor(op, "first_idx", first_idx, 1);
  const std::vector<int64_t> offsets =
      checked_first_idx(op, first_idx, concrete_num_rows(op, num_rows));
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  at::Tensor out =
      empty_output(op, "the output", {offsets.back()}, first_idx.options().dtype(at::kLong));
  expand_rows(at::arange(segments, out.options()), out, offsets);
  return out;
}

// ---- index select ----

// Output segment k is a copy of the rows starting at source_row[k] (out_first_idx[k + 1] -
// out_first_idx[k] of them). Balanced by output rows, so a few huge segments use every thread as
// well as many small ones do; each thread copies whole runs with memcpy.
void copy_selected_rows(const at::Tensor& values, at::Tensor& out,
                        const std::vector<int64_t>& source_row,
                        const std::vector<int64_t>& out_first_idx) {
  const int64_t selected = static_cast<int64_t>(source_row.size()), rows = out_first_idx.back();
  if (out.numel() == 0) return;
  const int64_t row_bytes = out.nbytes() / rows;
  const char* in = static_cast<const char*>(values.const_data_ptr());
  char* dst = static_cast<char*>(out.mutable_data_ptr());
  const int64_t grain = std::max<int64_t>(1, kGrainElems * 16 / row_bytes);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    int64_t k = segment_of_row(out_first_idx.data(), selected, begin);
    for (int64_t row = begin; row < end;) {
      while (out_first_idx[k + 1] <= row) ++k;  // skip empty segments
      const int64_t n = std::min(end, out_first_idx[k + 1]) - row;
      const int64_t from = source_row[k] + (row - out_first_idx[k]);
      std::memcpy(dst + row * row_bytes, in + from * row_bytes, n * row_bytes);
      row += n;
    }
  });
}

std::tuple<at::Tensor, at::Tensor> ragged_index_select_cpu(const at::Tensor& values,
                                                           const at::Tensor& first_idx,
                                                           const at::Tensor& index,
                                                           std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "ragged_index_select";
  const std::optional<int64_t> rows_given =
      check_index_select_args(op, values, first_idx, index, num_rows);
  const std::vector<int64_t> offsets = checked_first_idx(op, first_idx, std::nullopt);
  check_last_offset_is_rows(op, offsets.back(), values.size(0));
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  const at::Tensor picks = index_tensor_on_host(op, "index", index, 1);
  const int64_t* pick = picks.const_data_ptr<int64_t>();
  const int64_t selected = picks.numel();
  std::vector<int64_t> source_row(selected), counts(selected);
  for (int64_t k = 0; k < selected; ++k) {
    const int64_t b = wrapped_segment_index(op, k, pick[k], segments);
    source_row[k] = offsets[b];
    counts[k] = offsets[b + 1] - offsets[b];
  }
  const std::vector<int64_t> out_first_idx =
      offsets_from_counts(op, "index", counts.data(), selected);
  check_num_rows_matches(op, rows_given, out_first_idx.back());
  at::Tensor out = empty_output(op, "the output", per_segment_sizes(values, out_first_idx.back()),
                                values.options());
  copy_selected_rows(values.contiguous(), out, source_row, out_first_idx);
  return {out, at::tensor(out_first_idx, at::kLong).to(first_idx.device())};
}

at::Tensor get_first_idx_cpu(const at::Tensor& numel_per_tensor, bool validate) {
  // The scan checks as it goes; on the CPU that costs nothing, so validate=False changes nothing.
  (void)validate;
  return at::tensor(offsets_from_counts("get_first_idx", "numel_per_tensor", numel_per_tensor),
                    at::kLong);
}

// Runs averaging fewer rows than this are summed one run per loop iteration (balanced by runs;
// the row-block machinery's per-part bookkeeping would cost more than the additions).
constexpr int64_t kShortRuns = 16;

template <typename scalar_t>
void sum_short_runs(const scalar_t* data, const int64_t* index, const scalar_t* weight,
                    const int64_t* first, int64_t runs, int64_t width, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t grain =
      std::max<int64_t>(1, kGrainElems / (kShortRuns * std::max<int64_t>(1, width)));
  at::parallel_for(0, runs, grain, [&](int64_t begin, int64_t end) {
    c10::SmallVector<acc_t, 64> acc(width);
    for (int64_t r = begin; r < end; ++r) {  // each run in row order: thread-count independent
      sum_rows(data, static_cast<const scalar_t*>(nullptr), index, weight, width, first[r],
               first[r + 1], acc.data());
      for (int64_t c = 0; c < width; ++c) out[r * width + c] = static_cast<scalar_t>(acc[c]);
    }
  });
}

}  // namespace

namespace cpu {

at::Tensor segment_gather_sum(const at::Tensor& data, const at::Tensor& index,
                              const at::Tensor& weight, const at::Tensor& first_idx) {
  const at::Tensor src = data.contiguous();
  const at::Tensor weights = weight.defined() ? weight.contiguous() : weight;
  const int64_t runs = first_idx.numel() - 1, width = row_width(data);
  const int64_t* offsets = first_idx.const_data_ptr<int64_t>();
  const int64_t rows = offsets[runs];
  const int64_t* gather = index.defined() ? index.const_data_ptr<int64_t>() : nullptr;
  at::Tensor out = at::empty(per_segment_sizes(data, runs), data.options());
  AT_DISPATCH_V2(
      data.scalar_type(), "segment_gather_sum_cpu", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* in = src.const_data_ptr<scalar_t>();
        const scalar_t* w = weights.defined() ? weights.const_data_ptr<scalar_t>() : nullptr;
        scalar_t* o = out.mutable_data_ptr<scalar_t>();
        if (rows < kShortRuns * runs) {  // short runs (coalesce's duplicates): one loop per run
          sum_short_runs(in, gather, w, offsets, runs, width, o);
          return;
        }
        reduce_segments<SumReducer<acc_t>>(
            RowBlocks{offsets, runs, rows, cpu_rows_per_block(width)}, width,
            SumRows<scalar_t>{in, width, gather, w}, WriteSum<scalar_t, false>{o, width});
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kHalf,
      at::kBFloat16);
  return out;
}

}  // namespace cpu

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("get_first_idx", &get_first_idx_cpu);
  m.impl("segment_sum", &segment_sum_cpu);
  m.impl("segment_mean", &segment_mean_cpu);
  m.impl("segment_max", &segment_max_cpu);
  m.impl("segment_min", &segment_min_cpu);
  m.impl("segment_softmax", &segment_softmax_cpu);
  m.impl("segment_log_softmax", &segment_log_softmax_cpu);
  m.impl("segment_softmax_backward", &segment_softmax_backward_cpu);
  m.impl("segment_expand", &segment_expand_cpu);
  m.impl("segment_ids", &segment_ids_cpu);
  m.impl("segment_gather_sum", &segment_gather_sum_cpu);
  m.impl("segment_gather_dot", &segment_gather_dot_cpu);
  m.impl("ragged_index_select", &ragged_index_select_cpu);
}

}  // namespace torch_ragged
