#pragma once

// Index arithmetic and reduction rules of the segment core, shared by the CPU and CUDA kernels
// (C10_HOST_DEVICE), so the CPU tests exercise the decomposition and the reduction rules the GPU
// runs. The loads, writes and row maps at the end are the CUDA kernels' per-element functors (the
// CPU runs the same arithmetic as whole-row loops, vectorised: segment_cpu.cpp).
//
// Segment b holds rows [first_idx[b], first_idx[b + 1]) of data (rows, width). Reductions are cut
// into fixed blocks of rows, not into segments, so one huge segment spreads over every thread and
// many small ones cost no per-segment task. Within a block each overlapping segment is one *part*:
//   whole: the segment lies inside the block -> reduced and written at once;
//   head:  it started in an earlier block     -> a partial result, stored per block;
//   tail:  it starts here and continues       -> a partial result, stored per block.
// A segment spanning blocks is then finished by the block holding its tail, which merges its tail
// with the heads of the following blocks in block order. Rows are added in order within a part and
// parts are merged left to right, so the result depends only on rows_per_block (a function of the
// width, never of the thread count): bitwise reproducible run to run and across thread counts.

#include <ATen/NumericUtils.h>
#include <ATen/OpMathType.h>
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace torch_ragged {

// Index of the segment holding `row`: the largest b with first_idx[b] <= row, among segments
// [0, num_segments). Empty segments are skipped, as rows never fall into them.
C10_HOST_DEVICE inline int64_t segment_of_row(const int64_t* first_idx, int64_t num_segments,
                                              int64_t row) {
  int64_t lo = 0, hi = num_segments;  // invariant: first_idx[lo] <= row < first_idx[hi]
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (first_idx[mid] <= row) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

enum class SegmentPart : int8_t { kWhole, kHead, kTail };

// The blocks of rows a reduction is cut into.
struct RowBlocks {
  const int64_t* first_idx;  // num_segments + 1 entries
  int64_t num_segments;
  int64_t num_rows;
  int64_t rows_per_block;

  C10_HOST_DEVICE int64_t count() const { return (num_rows + rows_per_block - 1) / rows_per_block; }
  C10_HOST_DEVICE int64_t begin(int64_t block) const { return block * rows_per_block; }
  C10_HOST_DEVICE int64_t end(int64_t block) const {
    const int64_t e = begin(block) + rows_per_block;
    return e < num_rows ? e : num_rows;
  }
  C10_HOST_DEVICE int64_t block_of_row(int64_t row) const { return row / rows_per_block; }

  // Calls visit(segment, lo, hi, part) for each non-empty segment overlapping `block`, in order,
  // with [lo, hi) its rows inside the block.
  template <typename Visit>
  C10_HOST_DEVICE void for_each_part(int64_t block, Visit&& visit) const {
    const int64_t block_begin = begin(block), block_end = end(block);
    for (int64_t b = segment_of_row(first_idx, num_segments, block_begin);
         b < num_segments && first_idx[b] < block_end; ++b) {
      const int64_t seg_begin = first_idx[b], seg_end = first_idx[b + 1];
      const int64_t lo = seg_begin > block_begin ? seg_begin : block_begin;
      const int64_t hi = seg_end < block_end ? seg_end : block_end;
      if (lo >= hi) continue;
      const SegmentPart part = seg_begin < block_begin ? SegmentPart::kHead
                               : seg_end > block_end   ? SegmentPart::kTail
                                                       : SegmentPart::kWhole;
      visit(b, lo, hi, part);
    }
  }

  // The segment whose tail lies in `block` (it starts there and continues past it), or -1.
  C10_HOST_DEVICE int64_t tail_segment(int64_t block) const {
    const int64_t block_end = end(block);
    const int64_t b = segment_of_row(first_idx, num_segments, block_end - 1);
    return first_idx[b] >= begin(block) && first_idx[b + 1] > block_end ? b : -1;
  }

  // The last block holding rows of segment b (non-empty).
  C10_HOST_DEVICE int64_t last_block_of(int64_t b) const {
    return block_of_row(first_idx[b + 1] - 1);
  }
};

// ---- Reduction rules: identity, add one row's value, merge a later partial into an earlier one.

template <typename acc_t>
struct SumReducer {
  using Acc = acc_t;
  C10_HOST_DEVICE static Acc identity() { return Acc(0); }
  C10_HOST_DEVICE static void add(Acc& acc, acc_t value, int64_t /*row*/) { acc += value; }
  C10_HOST_DEVICE static void merge(Acc& acc, const Acc& later) { acc += later; }
};

template <typename acc_t>
struct ValueAndRow {
  acc_t value;
  int64_t row;  // -1: no row yet (an empty segment)
};

// max (kMax) or min with the row that holds it: the first one on ties; NaN wins over numbers and
// the first NaN is kept, as torch.amax / torch.max(dim) propagate NaN.
template <typename acc_t, bool kMax>
struct ExtremumReducer {
  using Acc = ValueAndRow<acc_t>;
  C10_HOST_DEVICE static bool beats(acc_t candidate, acc_t current) {
    if (at::_isnan(candidate)) return !at::_isnan(current);
    return kMax ? candidate > current : candidate < current;
  }
  C10_HOST_DEVICE static Acc identity() { return Acc{acc_t(0), -1}; }
  C10_HOST_DEVICE static void add(Acc& acc, acc_t value, int64_t row) {
    if (acc.row < 0 || beats(value, acc.value)) acc = Acc{value, row};
  }
  C10_HOST_DEVICE static void merge(Acc& acc, const Acc& later) {
    if (later.row >= 0 && (acc.row < 0 || beats(later.value, acc.value))) acc = later;
  }
};

// ---- Loads: the value a row contributes to its segment's reduction, per column.

// Row `row` of data, or row index[row] when index is set (a gathered reduction), times weight[row]
// when weight is set (a sparse matrix's rows times a dense matrix).
template <typename scalar_t>
struct LoadRows {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* data;
  int64_t width;
  const int64_t* index = nullptr;
  const scalar_t* weight = nullptr;
  C10_HOST_DEVICE acc_t operator()(int64_t /*segment*/, int64_t row, int64_t column) const {
    const acc_t x =
        static_cast<acc_t>(data[(index == nullptr ? row : index[row]) * width + column]);
    return weight == nullptr ? x : static_cast<acc_t>(weight[row]) * x;
  }
};

// exp(x - max of the segment's column): softmax's denominator terms. When `keep` is set, each term
// is also stored there (softmax's output before normalising: one exp per element, not two).
template <typename scalar_t>
struct LoadShiftedExp {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* data;
  const acc_t* segment_max;  // num_segments x width
  scalar_t* keep;            // nullptr: do not store
  int64_t width;
  C10_HOST_DEVICE acc_t operator()(int64_t segment, int64_t row, int64_t column) const {
    const int64_t i = row * width + column;
    const acc_t term =
        std::exp(static_cast<acc_t>(data[i]) - segment_max[segment * width + column]);
    if (keep != nullptr) keep[i] = static_cast<scalar_t>(term);
    return term;
  }
};

// grad * output (softmax's backward) or grad alone (log_softmax's).
template <typename scalar_t>
struct LoadGradTerm {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* grad;
  const scalar_t* output;  // nullptr: log_softmax
  int64_t width;
  C10_HOST_DEVICE acc_t operator()(int64_t /*segment*/, int64_t row, int64_t column) const {
    const int64_t i = row * width + column;
    const acc_t g = static_cast<acc_t>(grad[i]);
    return output == nullptr ? g : g * static_cast<acc_t>(output[i]);
  }
};

// ---- Writes: a finished reduction (count = rows of the segment; 0 for an empty one).

template <typename scalar_t, bool kMean>
struct WriteSum {
  using acc_t = at::opmath_type<scalar_t>;
  scalar_t* out;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, acc_t acc, int64_t count) const {
    if (kMean) acc = count > 0 ? acc / static_cast<acc_t>(count) : acc_t(0);
    out[segment * width + column] = static_cast<scalar_t>(acc);
  }
};

// Empty segments give value 0 and row -1.
template <typename scalar_t>
struct WriteExtremum {
  using acc_t = at::opmath_type<scalar_t>;
  scalar_t* out;
  int64_t* arg;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, ValueAndRow<acc_t> acc,
                                  int64_t /*count*/) const {
    const int64_t i = segment * width + column;
    out[i] = static_cast<scalar_t>(acc.row >= 0 ? acc.value : acc_t(0));
    arg[i] = acc.row;
  }
};

// Keeps the op-math value per segment and column (softmax's intermediate max and sum).
template <typename acc_t>
struct WriteAcc {
  acc_t* out;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, acc_t acc,
                                  int64_t /*count*/) const {
    out[segment * width + column] = acc;
  }
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, ValueAndRow<acc_t> acc,
                                  int64_t /*count*/) const {
    out[segment * width + column] = acc.value;
  }
};

// ---- Row maps: an output element from its row, column and segment statistics.

// softmax: exp(x - max) / sum, from the terms LoadShiftedExp kept in `out` (recomputed for half /
// bfloat16, whose stored terms are rounded); log_softmax: x - max - log_sum.
template <typename scalar_t, bool kLog>
struct SoftmaxOutput {
  using acc_t = at::opmath_type<scalar_t>;
  static constexpr bool kTermsKept = !kLog && std::is_same_v<scalar_t, acc_t>;
  const scalar_t* data;
  const acc_t* segment_max;
  const acc_t* segment_sum;  // log_softmax: the log of the sum
  scalar_t* out;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t row, int64_t column) const {
    const int64_t i = row * width + column, s = segment * width + column;
    if (kTermsKept) {
      out[i] = static_cast<scalar_t>(static_cast<acc_t>(out[i]) / segment_sum[s]);
      return;
    }
    const acc_t shifted = static_cast<acc_t>(data[i]) - segment_max[s];
    out[i] =
        static_cast<scalar_t>(kLog ? shifted - segment_sum[s] : std::exp(shifted) / segment_sum[s]);
  }
};

// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
template <typename scalar_t, bool kLog>
struct SoftmaxGradInput {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* grad;
  const scalar_t* output;
  const acc_t* segment_sum;
  scalar_t* grad_input;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t row, int64_t column) const {
    const int64_t i = row * width + column;
    const acc_t g = static_cast<acc_t>(grad[i]), y = static_cast<acc_t>(output[i]);
    const acc_t s = segment_sum[segment * width + column];
    grad_input[i] = static_cast<scalar_t>(kLog ? g - std::exp(y) * s : y * (g - s));
  }
};

}  // namespace torch_ragged
