#pragma once

// Index arithmetic, reduction rules and kernel bodies of the segment core, shared by the CPU and
// CUDA kernels (C10_HOST_DEVICE): a CUDA kernel is a thin shell that picks its (node, column) from
// the grid and calls a body here; the host tests run the same bodies over the whole launch grid
// (tests/cpp/test_segment_emulation.cpp) and compare them with the CPU kernels bit for bit.
//
// Segment b holds rows [first_idx[b], first_idx[b + 1]) of data (rows, width).
//
// ---- The reduction tree ----
// Every floating-point reduction of the core (sum, mean, softmax's sums of exp and its gradient's
// sums, weighted gathered sums) adds a segment's rows in one fixed tree, whatever the device or
// the thread count:
//   level 0: chunks of consecutive rows (32 for narrow rows, more for wide ones: chunk_bits);
//   level L: nodes of kFanIn = 32 consecutive level-(L - 1) nodes.
// A segment [s, e) is reduced at its *top level* T, the lowest level where one node holds all its
// rows: value(0, piece) folds the piece's rows in order, starting from the identity; value(L,
// piece) folds value(L - 1, piece ∩ child) over the children the piece meets, in order, starting
// from the identity; the segment's result is value(T, [s, e)). A segment inside one chunk is
// therefore summed row by row, in order; a longer one in chunk partials merged left to right, 32
// at a time.
//
// The GPU computes the tree level by level: reduce_chunk gives each (chunk, column) a thread,
// writes the segments inside the chunk and leaves two partials per chunk (head: the segment that
// started before it; tail: the segment that starts in it and continues); merge_node gives each
// (level-L node, column) a thread that merges its children's partials, writes the segments that
// end in it and leaves its own head / tail. 10M rows x 1 column are 312,500 level-0 threads; no
// atomics, no barriers inside a level. The CPU computes the same values with whole-row loops
// (segment_cpu.cpp), vectorised over the columns, and the same merge_node above its task size. So
// results are bitwise identical run to run, across thread counts and between CPU and GPU, for
// float and double (exp and log are portable_math.h's, products never fused into FMAs).

#include <ATen/NumericUtils.h>
#include <ATen/OpMathType.h>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/block.h"
#include "segment/portable_math.h"

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

constexpr int kFanInBits = 5;
constexpr int64_t kFanIn = int64_t{1} << kFanInBits;  // children per node above level 0

// log2 of the rows per chunk, a fixed function of the row width (never of a device): 32 rows for
// rows of up to 15 columns, growing with the width to 1024 rows (width >= 256), so that a chunk
// holds about 256 elements. 10M rows x 1 column: 312,500 chunks; 1.6M rows x 64: 6,400 chunks
// of 256 rows, 409,600 (chunk, column) threads; fewer segments cross a chunk on the CPU.
C10_HOST_DEVICE inline int chunk_bits(int64_t width) {
  int bits = 5;
  for (int64_t w = width / 8; w > 1 && bits < 10; w /= 2) ++bits;
  return bits;
}

// The segments crossing a node's edges: head, the one holding its first row if it started before
// the node (it may also end after it: it then covers the node); tail, the one holding its last row
// if it starts inside the node and ends after it; -1 where there is none. merge_node reads its
// children's instead of searching for them: one entry per node, computed once (not per column).
struct CrossingSegments {
  int64_t head = -1, tail = -1;
};

// The crossing segments of rows [begin, end) (end > begin); the segment holding row begin also
// goes to *first_segment where that is given.
C10_HOST_DEVICE inline CrossingSegments crossing_segments(const int64_t* first_idx,
                                                          int64_t num_segments, int64_t begin,
                                                          int64_t end,
                                                          int64_t* first_segment = nullptr) {
  CrossingSegments crossing;
  const int64_t first = segment_of_row(first_idx, num_segments, begin);
  if (first_segment != nullptr) *first_segment = first;
  const int64_t last = segment_of_row(first_idx, num_segments, end - 1);
  if (first_idx[first] < begin) crossing.head = first;
  if (first_idx[last + 1] > end && last != crossing.head) crossing.tail = last;
  return crossing;
}

// The tree over num_rows rows of `width` columns cut into segments by first_idx (num_segments + 1
// entries).
struct ReductionTree {
  const int64_t* first_idx;
  int64_t num_segments;
  int64_t num_rows;
  int chunk_bits;  // chunk_bits(width)
  // Optional (the GPU's tree tables, tree_table_entry, filled once for all of a tree's passes): the
  // segment of each chunk's first row, and the crossing segments of every node of levels 0 ..
  // levels() - 2, level after level (crossings_of); null: searched where needed.
  const int64_t* chunk_first_segments = nullptr;
  const CrossingSegments* node_crossings = nullptr;

  static ReductionTree of(const int64_t* first_idx, int64_t num_segments, int64_t num_rows,
                          int64_t width) {
    return ReductionTree{first_idx, num_segments, num_rows, torch_ragged::chunk_bits(width)};
  }
  // log2 of the rows per node at `level`, and the rows (a level beyond int64 holds every row).
  // Powers of two: node arithmetic is shifts and masks (divisions cost ~30 cycles, once per
  // segment: a visible part of a million short segments' time).
  C10_HOST_DEVICE int node_bits(int level) const {
    const int bits = chunk_bits + kFanInBits * level;
    return bits < 63 ? bits : 63;
  }
  C10_HOST_DEVICE int64_t node_rows(int level) const {
    const int bits = node_bits(level);
    return bits >= 63 ? std::numeric_limits<int64_t>::max() : int64_t{1} << bits;
  }
  // The node of `level` holding `row`.
  C10_HOST_DEVICE int64_t node_of(int level, int64_t row) const { return row >> node_bits(level); }
  C10_HOST_DEVICE int64_t nodes(int level) const {
    return num_rows == 0 ? 0 : node_of(level, num_rows - 1) + 1;
  }
  // Levels in the tree: level levels() - 1 is the first with at most one node.
  C10_HOST_DEVICE int levels() const {
    int level = 0;
    while (nodes(level) > 1) ++level;
    return level + 1;
  }
  C10_HOST_DEVICE int64_t begin(int level, int64_t node) const { return node << node_bits(level); }
  C10_HOST_DEVICE int64_t end(int level, int64_t node) const {
    return node >= nodes(level) - 1 ? num_rows : (node + 1) << node_bits(level);
  }
  // The lowest level where one node holds rows [s, e) (e > s).
  C10_HOST_DEVICE int top_level(int64_t s, int64_t e) const {
    int level = 0;
    while (node_of(level, s) != node_of(level, e - 1)) ++level;
    return level;
  }
  C10_HOST_DEVICE int64_t segment_of(int64_t row) const {
    return segment_of_row(first_idx, num_segments, row);
  }
  C10_HOST_DEVICE int64_t first_segment_of_chunk(int64_t chunk) const {
    return chunk_first_segments != nullptr ? chunk_first_segments[chunk]
                                           : segment_of(begin(0, chunk));
  }
  C10_HOST_DEVICE int64_t rows_of(int64_t b) const { return first_idx[b + 1] - first_idx[b]; }
  // The segments crossing the edges of `node` at `level` (two searches).
  C10_HOST_DEVICE CrossingSegments crossing(int level, int64_t node) const {
    return crossing_segments(first_idx, num_segments, begin(level, node), end(level, node));
  }
  // Entries of the tree tables before `level`'s, and in all (at least the chunks' row).
  C10_HOST_DEVICE int64_t table_offset(int level) const {
    int64_t offset = 0;
    for (int l = 0; l < level; ++l) offset += nodes(l);
    return offset;
  }
  C10_HOST_DEVICE int64_t table_entries() const {
    const int below_top = levels() - 1;
    return table_offset(below_top > 1 ? below_top : 1);
  }
  // The crossing segments of `level`'s nodes in the tree tables.
  C10_HOST_DEVICE const CrossingSegments* crossings_of(int level) const {
    return node_crossings + table_offset(level);
  }
};

// The accumulator of sums and means: op-math (float for half) for floating and complex data; the
// 64-bit integer of the same signedness for integers, so that an integer mean is the true sum over
// the row count (256 int8 ones average to 1, not to their wrapped sum 0 / 256). Integer sums keep
// their bits: wrapping arithmetic, cast to the data's type once at the end.
template <typename scalar_t>
using sum_acc_t =
    std::conditional_t<std::is_integral_v<scalar_t>,
                       std::conditional_t<std::is_signed_v<scalar_t>, int64_t, uint64_t>,
                       at::opmath_type<scalar_t>>;

// ---- Reduction rules: identity, add one row's value, merge a later partial into an earlier one
// ----

template <typename acc_t>
struct SumReducer {
  using Acc = acc_t;
  C10_HOST_DEVICE static Acc identity() { return Acc(0); }
  C10_HOST_DEVICE static void add(Acc& acc, Acc value, int64_t /*row*/) { acc += value; }
  C10_HOST_DEVICE static void merge(Acc& acc, const Acc& later) { acc += later; }
};

template <typename acc_t>
struct ValueAndRow {
  acc_t value;
  int64_t row;  // -1: no row yet (an empty segment)
};

// max (kMax) or min with the row that holds it: the first one on ties; NaN wins over numbers and
// the first NaN is kept, as torch.amax / torch.max(dim) propagate NaN. Exact: every order of the
// merges gives the same result.
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

// Softmax shifts each segment's column by its max (0 for a column of only -inf, so that it
// gives 0 / 0 = NaN, as torch, rather than -inf - -inf).
template <typename acc_t>
C10_HOST_DEVICE inline acc_t softmax_shift(acc_t max) {
  return max == -std::numeric_limits<acc_t>::infinity() ? acc_t(0) : max;
}

// exp in op-math precision: half and bfloat16 accumulate in float.
template <typename acc_t>
C10_HOST_DEVICE inline acc_t exp_of(acc_t x) {
  return portable_exp(x);
}

// ---- Loads: the value a row contributes, per column ----

// Row `row` of data, or row index[row] when index is set (a gathered reduction), times weight[row]
// when weight is set (a sparse matrix's rows times a dense matrix).
template <typename scalar_t, typename Acc = at::opmath_type<scalar_t>>
struct LoadRows {
  using acc_t = Acc;
  static constexpr bool kUsesSegment = false;  // whether a load reads its segment
  const scalar_t* data;
  int64_t width;
  const int64_t* index = nullptr;
  const scalar_t* weight = nullptr;
  C10_HOST_DEVICE acc_t operator()(int64_t /*segment*/, int64_t row, int64_t column) const {
    const acc_t x =
        static_cast<acc_t>(data[(index == nullptr ? row : index[row]) * width + column]);
    return weight == nullptr ? x : product(static_cast<acc_t>(weight[row]), x);
  }
};

// exp(x - shift of the row's segment and column): softmax's terms (its shifts: softmax_shift of
// the segment's max, found by an exact reduction first).
template <typename scalar_t>
struct LoadShiftedExp {
  using acc_t = at::opmath_type<scalar_t>;
  static constexpr bool kUsesSegment = true;  // whether a load reads its segment
  const scalar_t* data;
  const acc_t* shifts;  // num_segments x width
  int64_t width;
  C10_HOST_DEVICE acc_t operator()(int64_t segment, int64_t row, int64_t column) const {
    return exp_of(static_cast<acc_t>(data[row * width + column]) -
                  shifts[segment * width + column]);
  }
};

// grad * output (softmax's backward) or grad alone (log_softmax's).
template <typename scalar_t>
struct LoadGradTerm {
  using acc_t = at::opmath_type<scalar_t>;
  static constexpr bool kUsesSegment = false;  // whether a load reads its segment
  const scalar_t* grad;
  const scalar_t* output;  // nullptr: log_softmax
  int64_t width;
  C10_HOST_DEVICE acc_t operator()(int64_t /*segment*/, int64_t row, int64_t column) const {
    const int64_t i = row * width + column;
    const acc_t g = static_cast<acc_t>(grad[i]);
    return output == nullptr ? g : product(g, static_cast<acc_t>(output[i]));
  }
};

// ---- Writes: a finished reduction (count = rows of the segment; 0 for an empty one) ----

// Means divide in the accumulator's type (64-bit for integers, truncating toward zero: a count
// cast to a narrow data type would wrap to 0 and trap at 256 int8 rows).
template <typename scalar_t, bool kMean>
struct WriteSum {
  using acc_t = sum_acc_t<scalar_t>;
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

// softmax's shift from the segment's max (the value of a max reduction, its row unused).
template <typename acc_t>
struct WriteShift {
  acc_t* out;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, ValueAndRow<acc_t> max,
                                  int64_t /*count*/) const {
    out[segment * width + column] = softmax_shift(max.value);
  }
};

// softmax's scale from the sum of its terms: 1 / sum (one division per segment and column, then
// a product per element), or (log_softmax) log(sum), also once per segment and column.
template <typename acc_t, bool kLog>
struct WriteSoftmaxDivisor {
  acc_t* out;
  int64_t width;
  C10_HOST_DEVICE static acc_t of(acc_t sum) { return kLog ? portable_log(sum) : acc_t(1) / sum; }
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, acc_t sum,
                                  int64_t /*count*/) const {
    out[segment * width + column] = of(sum);
  }
};

// Keeps an op-math value per segment and column (softmax's gradient's sums).
template <typename Acc>
struct WriteAcc {
  Acc* out;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t segment, int64_t column, Acc acc,
                                  int64_t /*count*/) const {
    out[segment * width + column] = acc;
  }
};

// ---- Row maps: an output element from its row, column and segment statistics ----
// (softmax_chunk on the GPU, one overload per map; the CPU kernels call value() on whole rows.)

// softmax: exp(x - shift) * (1 / S); log_softmax: (x - shift) - log(S): shifted first, so that at
// large magnitudes log(S) is not rounded away (x - (M + log S) lost it at -1e7 in float).
template <typename scalar_t, bool kLog>
struct SoftmaxOutput {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* data;
  const acc_t* shifts;    // num_segments x width
  const acc_t* divisors;  // num_segments x width: 1 / S, or log(S)
  scalar_t* out;
  int64_t width;
  C10_HOST_DEVICE static acc_t value(acc_t x, acc_t shift, acc_t divisor) {
    const acc_t shifted = x - shift;
    return kLog ? shifted - divisor : product(exp_of(shifted), divisor);
  }
};

// softmax: y * (g - s); log_softmax: g - exp(y) * s, with s the segment's sum of LoadGradTerm.
template <typename scalar_t, bool kLog>
struct SoftmaxGradInput {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* grad;
  const scalar_t* output;
  const acc_t* segment_sum;
  scalar_t* out;  // the gradient of the input
  int64_t width;
  C10_HOST_DEVICE static acc_t value(acc_t g, acc_t y, acc_t s) {
    return kLog ? g - product(exp_of(y), s) : product(y, g - s);
  }
};

// ---- first_idx checked on the device (what checked_first_idx checks on the host) ----

enum class FirstIdxError : int { kNone, kFirstNotZero, kLastNotRows, kDecreasing };

// Entry b in [0, num_segments] of first_idx: first_idx[0] == 0 (b == 0), first_idx[num_segments] ==
// num_rows (b == num_segments), first_idx[b] <= first_idx[b + 1] (b < num_segments). One GPU
// thread per entry.
C10_HOST_DEVICE inline FirstIdxError first_idx_entry_error(const int64_t* first_idx,
                                                           int64_t num_segments, int64_t num_rows,
                                                           int64_t b) {
  if (b == 0 && first_idx[0] != 0) return FirstIdxError::kFirstNotZero;
  if (b == num_segments) {
    return first_idx[b] == num_rows ? FirstIdxError::kNone : FirstIdxError::kLastNotRows;
  }
  return first_idx[b] <= first_idx[b + 1] ? FirstIdxError::kNone : FirstIdxError::kDecreasing;
}

// ---- Row movers (cooperative: one block per tile of consecutive output rows) ----
//
// Output row r of segment k is a copy of input row source_row(k, r): segment_expand (source k)
// and segment_ids (the same over arange) and ragged_index_select (source_row[k] + r -
// out_first_idx[k]). A block takes a tile of block.threads() consecutive output rows and finds
// every row's segment with one search per tile, not one per element (tile_row_segments), then
// copies the rows with lanes over columns.

// The segment of every row of the tile [tile_start, tile_start + tile_rows), tile_rows <=
// block.threads(), into row_segment[0, tile_rows). The tile's first row is searched (every thread
// reads the same addresses: one transaction per step); every non-empty segment starting inside
// the tile marks its first row (one writer per row: no two non-empty segments share a first row);
// a running maximum over the block fills the rows between marks (a warp scan with shuffles, then
// across warps through warp_max). row_segment holds block.threads() entries, warp_max one per
// warp; on return (after a barrier) every thread may read any row's segment.
template <typename Block, typename SharedIds>
C10_HOST_DEVICE void tile_row_segments(const Block& block, SharedIds row_segment,
                                       SharedIds warp_max, const int64_t* first_idx,
                                       int64_t num_segments, int64_t tile_start,
                                       int64_t tile_rows) {
  const int t = block.thread();
  row_segment[t] = int64_t{-1};
  const int64_t first = segment_of_row(first_idx, num_segments, tile_start);
  block.sync();
  // Segments after `first` start after tile_start; empty ones (any number) are read and skipped.
  for (int64_t b = first + 1 + t; b < num_segments; b += block.threads()) {
    const int64_t head = first_idx[b];
    if (head >= tile_start + tile_rows) break;
    if (first_idx[b + 1] > head) row_segment[head - tile_start] = b;
  }
  block.sync();
  const int lane = t & (kWarpSize - 1), warp = t >> kWarpBits;
  int64_t running = row_segment[t];
  for (int delta = 1; delta < kWarpSize; delta <<= 1) {
    const int64_t before = block.shfl_up(running, delta);
    if (lane >= delta && before > running) running = before;
  }
  if (lane == kWarpSize - 1) warp_max[warp] = running;
  block.sync();
  int64_t segment = first;
  for (int w = 0; w < warp; ++w) {
    const int64_t earlier = warp_max[w];
    if (earlier > segment) segment = earlier;
  }
  row_segment[t] = running > segment ? running : segment;
  block.sync();
}

// The rows' sources (a functor (k, r) -> the first Chunk of output row r's input row, r in
// segment k): segment_expand / segment_ids, segment k's one input row.
template <typename Chunk>
struct SegmentRow {
  const Chunk* in;
  int64_t chunks;
  C10_HOST_DEVICE const Chunk* operator()(int64_t k, int64_t /*row*/) const {
    return in + k * chunks;
  }
};

// ragged_index_select: selected segment k's rows start at input row start[k].
template <typename Chunk>
struct SelectedRow {
  const Chunk* in;
  int64_t chunks;
  const int64_t* out_first_idx;
  const int64_t* start;
  C10_HOST_DEVICE const Chunk* operator()(int64_t k, int64_t row) const {
    return in + (start[k] + row - out_first_idx[k]) * chunks;
  }
};

// How a block's lanes share rows of `chunks` Chunks: groups of the row width rounded up to a
// power of two, at most a warp, so narrow rows keep every lane busy and no lane divides.
struct RowLanes {
  int group_bits;     // log2 of the lanes per row
  int row_in_pass;    // this thread's row within a pass
  int rows_per_pass;  // rows the block covers per pass
  int64_t column;     // this thread's first chunk of a row

  C10_HOST_DEVICE static int group_bits_for(int64_t chunks) {
    int bits = 0;
    while (bits < kWarpBits && (int64_t{1} << bits) < chunks) ++bits;
    return bits;
  }

  template <typename Block>
  C10_HOST_DEVICE RowLanes(const Block& block, int64_t chunks)
      : group_bits(group_bits_for(chunks)) {
    row_in_pass = block.thread() >> group_bits;
    rows_per_pass = block.threads() >> group_bits;
    column = block.thread() & ((1 << group_bits) - 1);
  }
};

// Writes output rows tile_start + r, r < tile_rows: source_of(r) is the first Chunk of the row to
// copy, or nullptr for a row of `fill`. Each thread keeps kRowsInFlight loads in flight (Little's
// law: an H200 needs ~30 KB in flight per SM; 2048 threads x 4 x 16 B is 128 KB, x 4 B still 32
// KB).
constexpr int kRowsInFlight = 4;

template <typename Chunk, typename SourceOf>
C10_HOST_DEVICE void copy_tile_rows(const RowLanes& lanes, int64_t tile_start, int64_t tile_rows,
                                    Chunk* out, int64_t chunks, const SourceOf& source_of,
                                    Chunk fill) {
  for (int64_t first = lanes.row_in_pass; first < tile_rows;
       first += kRowsInFlight * lanes.rows_per_pass) {
    const Chunk* from[kRowsInFlight];
    Chunk* to[kRowsInFlight];  // nullptr: past the tile
    for (int i = 0; i < kRowsInFlight; ++i) {
      const int64_t r = first + i * lanes.rows_per_pass;
      to[i] = r < tile_rows ? out + (tile_start + r) * chunks : nullptr;
      from[i] = r < tile_rows ? source_of(r) : nullptr;
    }
    for (int64_t c = lanes.column; c < chunks; c += int64_t{1} << lanes.group_bits) {
      Chunk held[kRowsInFlight];  // every load issued before the first store
      for (int i = 0; i < kRowsInFlight; ++i) held[i] = from[i] != nullptr ? from[i][c] : fill;
      for (int i = 0; i < kRowsInFlight; ++i) {
        if (to[i] != nullptr) to[i][c] = held[i];
      }
    }
  }
}

// The row mover, grid-stride over tiles of block.threads() output rows. Rows are `chunks` Chunks
// wide (the shell picks the widest Chunk dividing the row's bytes and aligning every pointer:
// widest_chunk_bytes); source(k, r) gives output row r's input row, r in segment k.
template <typename Block, typename SharedIds, typename Chunk, typename Source>
C10_HOST_DEVICE void move_segment_rows(const Block& block, SharedIds row_segment,
                                       SharedIds warp_max, const int64_t* first_idx,
                                       int64_t num_segments, int64_t rows, Chunk* out,
                                       int64_t chunks, const Source& source) {
  const RowLanes lanes(block, chunks);
  for (int64_t tile_start = block.block() * block.threads(); tile_start < rows;
       tile_start += block.blocks() * block.threads()) {
    const int64_t tile_rows =
        rows - tile_start < block.threads() ? rows - tile_start : int64_t{block.threads()};
    tile_row_segments(block, row_segment, warp_max, first_idx, num_segments, tile_start, tile_rows);
    copy_tile_rows(
        lanes, tile_start, tile_rows, out, chunks,
        [&](int64_t r) { return source(row_segment[r], tile_start + r); }, Chunk{});
    block.sync();  // the next tile rewrites row_segment
  }
}

// The widest of 16, 8, 4, 2, 1 bytes that divides `bits` (a row's bytes or'ed with addresses).
inline int widest_chunk_bytes(uint64_t bits) {
  int bytes = 16;
  while (bytes > 1 && bits % bytes != 0) bytes /= 2;
  return bytes;
}

// The widest chunk that divides a row's bytes and every address given.
inline int widest_chunk_bytes(int64_t row_bytes, std::initializer_list<const void*> addresses) {
  auto bits = static_cast<uint64_t>(row_bytes);
  for (const void* address : addresses) bits |= reinterpret_cast<uintptr_t>(address);
  return widest_chunk_bytes(bits);
}

// ---- Index checks and run offsets ----

// segment_gather_*: entry i of index must name a row of the data.
C10_HOST_DEVICE inline bool gather_index_in_range(const int64_t* index, int64_t rows, int64_t i) {
  return index[i] >= 0 && index[i] < rows;
}

// Runs of equal sorted keys: heads[i] = 1 where a run starts.
C10_HOST_DEVICE inline int64_t run_head(const int64_t* keys, int64_t i) {
  return i == 0 || keys[i] != keys[i - 1];
}

// With slots = the exclusive sum of heads: first_idx[slot[i]] = i at every run head, and
// first_idx[runs] = n (written by entry 0).
C10_HOST_DEVICE inline void scatter_run_start(const int64_t* heads, const int64_t* slots, int64_t n,
                                              int64_t runs, int64_t* first_idx, int64_t i) {
  if (heads[i]) first_idx[slots[i]] = i;
  if (i == 0) first_idx[runs] = n;
}

// ---- The GPU's launches of one reduction (the launch plan; sizes only, no data read) ----

// In order: the chunks (level 0), one merge per level above, the empty segments. Each launch
// gives every one of its `threads` (node or segment) x column pairs a thread; all of them write
// distinct elements (no atomics), and a launch only reads what earlier launches wrote.
struct TreeLaunch {
  enum Kind { kChunks, kMerge, kEmptySegments } kind;
  int level;
  int64_t threads;
};

inline std::vector<TreeLaunch> tree_launches(const ReductionTree& tree, int64_t width) {
  std::vector<TreeLaunch> launches;
  if (tree.num_rows > 0 && width > 0) {
    launches.push_back({TreeLaunch::kChunks, 0, tree.nodes(0) * width});
    for (int level = 1; level < tree.levels(); ++level) {
      launches.push_back({TreeLaunch::kMerge, level, tree.nodes(level) * width});
    }
  }
  if (tree.num_segments > 0 && width > 0) {
    launches.push_back({TreeLaunch::kEmptySegments, 0, tree.num_segments * width});
  }
  return launches;
}

// ---- Kernel bodies (one thread each on the GPU) ----

// Entry i of the tree tables (one GPU thread each, all levels in one launch): for a chunk, the
// segment of its first row (chunk_first_segments: read by every column's reduce_chunk /
// softmax_chunk instead of a search) and its crossing segments; for a node above, its crossing
// segments (read by the merges of the level above instead of two searches per child and column).
C10_HOST_DEVICE inline void tree_table_entry(const ReductionTree& tree, int64_t i,
                                             int64_t* chunk_first_segments,
                                             CrossingSegments* node_crossings) {
  int level = 0;
  int64_t node = i;
  while (node >= tree.nodes(level)) node -= tree.nodes(level++);
  node_crossings[i] =
      crossing_segments(tree.first_idx, tree.num_segments, tree.begin(level, node),
                        tree.end(level, node), level == 0 ? chunk_first_segments + node : nullptr);
}

// Rows a level-0 thread (reduce_chunk, fold_rows, the softmax chunks) loads before it uses any of
// them: its loads in flight. The rows are loaded (with their segments first where the load needs
// them: first_idx is read only where a segment ends), then used in row order, so a segment's
// additions keep their order (the same bits) while the loads of one batch overlap, whatever the
// segments' lengths. 8 values of 4 bytes or less, 4 of 8 bytes or more: ~32 bytes per thread, which
// fits the CUDA shell's 48 registers without spilling (8 doubles spilled 120 bytes).
template <typename T>
constexpr int kChunkLoads = sizeof(T) <= 4 ? 8 : 4;

// Moves (b, next) -- a segment and its end, first_idx[b + 1] -- to the segment holding `row` (at
// or after the rows before it); empty segments hold no row and are passed over.
C10_HOST_DEVICE inline void advance_to_row(const ReductionTree& tree, int64_t row, int64_t& b,
                                           int64_t& next) {
  while (next <= row) next = tree.first_idx[++b + 1];
}

// Level 0, one (chunk, column): each segment inside the chunk is reduced (from the identity, row
// by row in order) and written; the head and tail pieces leave their values in heads / tails
// (chunks x width). The rows stream through in batches of kChunkLoads, across segment ends.
template <typename Reducer, typename Load, typename Write>
C10_HOST_DEVICE void reduce_chunk(const ReductionTree& tree, int64_t chunk, int64_t column,
                                  int64_t width, const Load& load, const Write& write,
                                  typename Reducer::Acc* heads, typename Reducer::Acc* tails) {
  using Acc = typename Reducer::Acc;
  const int64_t begin = tree.begin(0, chunk), end = tree.end(0, chunk);
  int64_t open = tree.first_segment_of_chunk(chunk), next = tree.first_idx[open + 1];
  int64_t piece_begin = begin;  // the first row of the open segment's piece
  Acc acc = Reducer::identity();
  const auto close = [&](int64_t hi) {  // the open piece ends before row hi
    if (tree.first_idx[open] < begin) {
      heads[chunk * width + column] = acc;
    } else if (next > end) {
      tails[chunk * width + column] = acc;
    } else {
      write(open, column, acc, hi - piece_begin);
    }
  };
  using Value = typename Load::acc_t;
  constexpr int kLoads = kChunkLoads<Value>;
  for (int64_t first = begin; first < end; first += kLoads) {
    Value value[kLoads];
    if constexpr (Load::kUsesSegment) {  // each row's segment, then the loads
      int64_t segment[kLoads], b = open, b_next = next;
      for (int k = 0; k < kLoads; ++k) {
        if (first + k < end) advance_to_row(tree, first + k, b, b_next);
        segment[k] = b;
      }
      for (int k = 0; k < kLoads; ++k) {
        if (first + k < end) value[k] = load(segment[k], first + k, column);
      }
    } else {
      for (int k = 0; k < kLoads; ++k) {
        if (first + k < end) value[k] = load(open, first + k, column);
      }
    }
    for (int k = 0; k < kLoads; ++k) {
      const int64_t row = first + k;
      if (row >= end) break;
      if (row >= next) {  // the open segment ended: the next non-empty one starts here
        close(row);
        advance_to_row(tree, row, open, next);
        piece_begin = row;
        acc = Reducer::identity();
      }
      Reducer::add(acc, value[k], row);
    }
  }
  close(end);
}

// value(0, rows [lo, hi)) of one column: folded from the identity in row order, kChunkLoads rows
// loaded at a time.
template <typename Reducer, typename Load>
C10_HOST_DEVICE typename Reducer::Acc fold_rows(const Load& load, int64_t segment, int64_t lo,
                                                int64_t hi, int64_t column) {
  using Value = typename Load::acc_t;
  constexpr int kLoads = kChunkLoads<Value>;
  typename Reducer::Acc acc = Reducer::identity();
  for (int64_t first = lo; first < hi; first += kLoads) {
    Value value[kLoads];
    for (int k = 0; k < kLoads; ++k) {
      if (first + k < hi) value[k] = load(segment, first + k, column);
    }
    for (int k = 0; k < kLoads; ++k) {
      if (first + k < hi) Reducer::add(acc, value[k], first + k);
    }
  }
  return acc;
}

// Level 0 of a tree whose segments inside one chunk are computed elsewhere (softmax_chunk): one
// (chunk, column) folds only its head and tail pieces (the tree tables' crossing segments), which
// are what the merges read -- the same values reduce_chunk leaves -- and neither reads nor writes
// the segments inside the chunk. Needs the tree tables.
template <typename Reducer, typename Load>
C10_HOST_DEVICE void reduce_chunk_pieces(const ReductionTree& tree, int64_t chunk, int64_t column,
                                         int64_t width, const Load& load,
                                         typename Reducer::Acc* heads,
                                         typename Reducer::Acc* tails) {
  const int64_t begin = tree.begin(0, chunk), end = tree.end(0, chunk);
  const CrossingSegments crossing = tree.node_crossings[chunk];
  if (crossing.head >= 0) {
    const int64_t head_end = tree.first_idx[crossing.head + 1];
    heads[chunk * width + column] =
        fold_rows<Reducer>(load, crossing.head, begin, head_end < end ? head_end : end, column);
  }
  if (crossing.tail >= 0) {
    tails[chunk * width + column] =
        fold_rows<Reducer>(load, crossing.tail, tree.first_idx[crossing.tail], end, column);
  }
}

// Level L >= 1, one (node, column): its children's partials (level L - 1) merged in order. A
// segment that started in one of its children and ends in another is written; the piece of the
// segment that started before the node is its head, the piece of the one that continues after it
// its tail. child_crossing: the crossing segments of every level L - 1 node (node_crossing). The
// children are read kMergeLoads at a time (their crossing entries, then their partials and the
// head segments' ends), then merged in order.
constexpr int kMergeLoads = 4;

template <typename Reducer, typename Write>
C10_HOST_DEVICE void merge_node(const ReductionTree& tree, int level, int64_t node, int64_t column,
                                int64_t width, const CrossingSegments* child_crossing,
                                const typename Reducer::Acc* child_heads,
                                const typename Reducer::Acc* child_tails, const Write& write,
                                typename Reducer::Acc* heads, typename Reducer::Acc* tails) {
  using Acc = typename Reducer::Acc;
  const int64_t first_child = node * kFanIn;
  const int64_t children = tree.nodes(level - 1);
  const int64_t last_child = first_child + kFanIn < children ? first_child + kFanIn : children;
  int64_t open = -1;         // the segment being merged
  bool from_before = false;  // it started before this node
  Acc acc = Reducer::identity();
  for (int64_t first = first_child; first < last_child; first += kMergeLoads) {
    const int count = static_cast<int>(last_child - first < kMergeLoads ? last_child - first
                                                                        : int64_t{kMergeLoads});
    CrossingSegments crossing[kMergeLoads];
    for (int k = 0; k < kMergeLoads; ++k) {
      if (k < count) crossing[k] = child_crossing[first + k];
    }
    Acc head_part[kMergeLoads], tail_part[kMergeLoads];
    int64_t head_end[kMergeLoads];
    for (int k = 0; k < kMergeLoads && k < count; ++k) {
      const int64_t i = (first + k) * width + column;
      if (crossing[k].head >= 0) {
        head_part[k] = child_heads[i];
        head_end[k] = tree.first_idx[crossing[k].head + 1];
      }
      if (crossing[k].tail >= 0) tail_part[k] = child_tails[i];
    }
    for (int k = 0; k < kMergeLoads && k < count; ++k) {
      const int64_t head = crossing[k].head;
      if (head >= 0) {
        if (open < 0) {  // the first child: the segment started before this node
          open = head;
          from_before = true;
          acc = Reducer::identity();
        }
        Reducer::merge(acc, head_part[k]);
        if (head_end[k] <= tree.end(level - 1, first + k)) {  // it ends in this child
          if (from_before) {
            heads[node * width + column] = acc;
          } else {
            write(head, column, acc, tree.rows_of(head));
          }
          open = -1;
        }
      }
      if (crossing[k].tail >= 0) {
        open = crossing[k].tail;
        from_before = false;
        acc = Reducer::identity();
        Reducer::merge(acc, tail_part[k]);
      }
    }
  }
  if (open >= 0) (from_before ? heads : tails)[node * width + column] = acc;  // it goes on
}

// One node of `level`: its crossing segments, for the merges of the level above (one thread per
// node on the GPU).
C10_HOST_DEVICE inline void node_crossing(const ReductionTree& tree, int level, int64_t node,
                                          CrossingSegments* out) {
  out[node] = tree.crossing(level, node);
}

// Softmax's terms with the shift of one segment and column held by the thread: LoadShiftedExp's
// arithmetic.
template <typename scalar_t>
struct LoadExpShiftedBy {
  using acc_t = at::opmath_type<scalar_t>;
  static constexpr bool kUsesSegment = false;
  const scalar_t* data;
  int64_t width;
  acc_t shift;
  C10_HOST_DEVICE acc_t operator()(int64_t /*segment*/, int64_t row, int64_t column) const {
    return exp_of(static_cast<acc_t>(data[row * width + column]) - shift);
  }
};

// out[row * width + column] = value_of(row) for rows [lo, hi), kChunkLoads rows computed (their
// loads in flight together) before any is stored.
template <typename scalar_t, typename ValueOf>
C10_HOST_DEVICE void store_rows(scalar_t* out, int64_t width, int64_t lo, int64_t hi,
                                int64_t column, const ValueOf& value_of) {
  constexpr int kLoads = kChunkLoads<scalar_t>;
  for (int64_t first = lo; first < hi; first += kLoads) {
    scalar_t value[kLoads];
    for (int k = 0; k < kLoads; ++k) {
      if (first + k < hi) value[k] = value_of(first + k);
    }
    for (int k = 0; k < kLoads; ++k) {
      if (first + k < hi) out[(first + k) * width + column] = value[k];
    }
  }
}

// Calls visit(b, lo, hi, crossing) for the rows [lo, hi) of each non-empty segment b in the chunk,
// in order; crossing: b also has rows outside the chunk (its statistics come from the tree).
template <typename Visit>
C10_HOST_DEVICE void for_each_piece(const ReductionTree& tree, int64_t chunk, const Visit& visit) {
  const int64_t begin = tree.begin(0, chunk), end = tree.end(0, chunk);
  int64_t b = tree.first_segment_of_chunk(chunk), next = tree.first_idx[b + 1];
  for (int64_t lo = begin; lo < end;) {
    advance_to_row(tree, lo, b, next);
    const int64_t hi = next < end ? next : end;
    visit(b, lo, hi, tree.first_idx[b] < begin || next > end);
    lo = hi;
  }
}

// softmax / log_softmax of one (chunk, column), after the tree passes of reduce_chunk_pieces: a
// segment inside the chunk is computed from its own rows -- its max (exact), the sum of exp(x -
// shift) from the identity in row order (the tree's value for a segment inside one chunk), then
// its outputs: its rows read three times, the second and third from cache; the rows of a segment
// crossing the chunk's edges take the shift and divisor the tree wrote for it. The same bits as
// two full tree passes and a map, so as the CPU; the data read once from memory instead of
// three times.
template <typename scalar_t, bool kLog>
C10_HOST_DEVICE void softmax_chunk(const ReductionTree& tree, int64_t chunk, int64_t column,
                                   const SoftmaxOutput<scalar_t, kLog>& map) {
  using acc_t = at::opmath_type<scalar_t>;
  for_each_piece(tree, chunk, [&](int64_t b, int64_t lo, int64_t hi, bool crossing) {
    acc_t shift, divisor;
    if (crossing) {
      shift = map.shifts[b * map.width + column];
      divisor = map.divisors[b * map.width + column];
    } else {
      const LoadRows<scalar_t> rows{map.data, map.width};
      shift = softmax_shift(fold_rows<ExtremumReducer<acc_t, true>>(rows, b, lo, hi, column).value);
      divisor = WriteSoftmaxDivisor<acc_t, kLog>::of(fold_rows<SumReducer<acc_t>>(
          LoadExpShiftedBy<scalar_t>{map.data, map.width, shift}, b, lo, hi, column));
    }
    store_rows(map.out, map.width, lo, hi, column, [&](int64_t row) {
      const acc_t x = static_cast<acc_t>(map.data[row * map.width + column]);
      return static_cast<scalar_t>(map.value(x, shift, divisor));
    });
  });
}

// softmax's backward of one (chunk, column), after the tree of LoadGradTerm over the chunks' head
// and tail pieces (reduce_chunk_pieces): a segment inside the chunk sums its own terms (from the
// identity in row order: the tree's value) and maps its rows with that sum, the second pass from
// cache; a crossing segment's rows map with the sum the tree wrote. The same bits as a full tree
// and a map, so as the CPU.
template <typename scalar_t, bool kLog>
C10_HOST_DEVICE void softmax_chunk(const ReductionTree& tree, int64_t chunk, int64_t column,
                                   const SoftmaxGradInput<scalar_t, kLog>& map) {
  using acc_t = at::opmath_type<scalar_t>;
  for_each_piece(tree, chunk, [&](int64_t b, int64_t lo, int64_t hi, bool crossing) {
    const acc_t s =
        crossing ? map.segment_sum[b * map.width + column]
                 : fold_rows<SumReducer<acc_t>>(
                       LoadGradTerm<scalar_t>{map.grad, kLog ? nullptr : map.output, map.width}, b,
                       lo, hi, column);
    store_rows(map.out, map.width, lo, hi, column, [&](int64_t row) {
      const int64_t i = row * map.width + column;
      return static_cast<scalar_t>(
          map.value(static_cast<acc_t>(map.grad[i]), static_cast<acc_t>(map.output[i]), s));
    });
  });
}

// One empty segment's identity, per column (count 0).
template <typename Reducer, typename Write>
C10_HOST_DEVICE void write_if_empty(const ReductionTree& tree, int64_t segment, int64_t column,
                                    const Write& write) {
  if (tree.rows_of(segment) == 0) write(segment, column, Reducer::identity(), 0);
}

// Lanes of dot_row: independent partial sums, so no add waits on the one before it (a single chain
// of 64 dependent adds made the SDDMM twice as slow as the gather-sum it pairs with). The CPU
// kernels hold the lanes in one vector (segment_cpu.cpp, dot_of_rows / sum_dot_rows) in this same
// order; this scalar form is the GPU's, run on the host by the emulation tests.
constexpr int kDotLanes = 8;

// dot_row's last step: lane j + half added into lane j, halving; the sum ends in lane 0.
template <typename acc_t>
C10_HOST_DEVICE acc_t sum_of_lanes(const acc_t* lane) {
  static_assert(kDotLanes == 8, "sum_of_lanes is written out for 8 lanes");
  // the halving order, written out for the eight lanes
  const acc_t a0 = lane[0] + lane[4], a1 = lane[1] + lane[5], a2 = lane[2] + lane[6],
              a3 = lane[3] + lane[7];
  return (a0 + a2) + (a1 + a3);
}

// dot(a_row, b_row) over width columns in one fixed order every backend shares: column c's product
// added to lane c % kDotLanes (each lane in column order), then lane j + half into lane j, halving.
template <typename scalar_t>
C10_HOST_DEVICE scalar_t dot_row(const scalar_t* a_row, const scalar_t* b_row, int64_t width) {
  using acc_t = at::opmath_type<scalar_t>;
  acc_t lane[kDotLanes] = {};
  int64_t c = 0;
  for (; c + kDotLanes <= width; c += kDotLanes) {
    for (int j = 0; j < kDotLanes; ++j) {
      lane[j] += product(static_cast<acc_t>(a_row[c + j]), static_cast<acc_t>(b_row[c + j]));
    }
  }
  for (int j = 0; c + j < width; ++j) {
    lane[j] += product(static_cast<acc_t>(a_row[c + j]), static_cast<acc_t>(b_row[c + j]));
  }
  return static_cast<scalar_t>(sum_of_lanes(lane));
}

// segment_gather_dot, one output entry: dot(a[segment of the entry], b[index[entry]]).
template <typename scalar_t>
C10_HOST_DEVICE void gather_dot_entry(const scalar_t* a, const scalar_t* b, const int64_t* index,
                                      const int64_t* first_idx, int64_t segments, int64_t width,
                                      int64_t entry, scalar_t* out) {
  const int64_t segment = segment_of_row(first_idx, segments, entry);
  out[entry] = dot_row(a + segment * width, b + index[entry] * width, width);
}

// ---- Segmented scans ----
//
// segment_cumsum / cumprod / cummax / cummin / logcumsumexp: output row r is the fold, in the
// scan's rule, of the rows of r's segment up to r (inclusive) or before r (exclusive), in one fixed
// order whatever the device or the thread count:
//   - rows are cut into chunks of 2^chunk_bits(width) (the reduction tree's chunks); in a chunk,
//     each column folds a piece (a segment's rows inside the chunk) in order from its first row;
//   - a piece continuing a segment from earlier chunks folds on from the carry: the value, at chunk
//     c - 1, of the inclusive scan of the chunk tails (a chunk's fold of its last piece, where that
//     segment goes on past the chunk), cut into runs where a segment starts. That scan is this scan
//     again, one level up (items = the chunks below), until one chunk holds every item.
// So an output folds its chunk's rows onto the carry (or onto the identity in a segment's first
// chunk): ((carry (+) x_a) (+) x_a+1) ... The GPU runs these bodies with one thread per (chunk,
// column): the tails level by level upwards, then the rows level by level downwards; the CPU runs
// them per chunk (scan_cpu.cpp), except cummax / cummin, which are exact: any order gives their
// result, and the CPU walks each segment directly.

// One level of a scan: `items` rows cut into segments by first_idx (num_segments + 1 entries), and
// per chunk the segments of its first and last rows (ScanPlan fills them on the host, scan.h).
struct ScanLevel {
  const int64_t* first_idx;
  int64_t num_segments;
  int64_t items;
  int chunk_bits;
  const int64_t* chunk_first_segment;
  const int64_t* chunk_last_segment;

  C10_HOST_DEVICE int64_t chunks() const {
    return (items + (int64_t{1} << chunk_bits) - 1) >> chunk_bits;
  }
  C10_HOST_DEVICE int64_t begin(int64_t chunk) const { return chunk << chunk_bits; }
  C10_HOST_DEVICE int64_t end(int64_t chunk) const {
    const int64_t end = (chunk + 1) << chunk_bits;
    return end < items ? end : items;
  }
  // Whether the segment of the chunk's last row goes on past the chunk (the next chunk's carry is
  // this chunk's scan of tails).
  C10_HOST_DEVICE bool continues(int64_t chunk) const {
    return first_idx[chunk_last_segment[chunk] + 1] > end(chunk);
  }
};

// The scan rules: Acc, identity(), of(value, row) (a loaded element as an Acc; row: the packed
// row it came from), fold(earlier, later) (earlier (+) later, in scan order) and result(acc) (the
// output value of an Acc; the extrema write theirs apart).
template <typename scalar_t>
struct SumScan {
  using Acc = at::opmath_type<scalar_t>;
  static constexpr bool kFloatingOnly = false;
  C10_HOST_DEVICE static Acc identity() { return Acc(0); }
  C10_HOST_DEVICE static Acc of(scalar_t value, int64_t /*row*/) { return static_cast<Acc>(value); }
  C10_HOST_DEVICE static Acc fold(const Acc& earlier, const Acc& later) { return earlier + later; }
  C10_HOST_DEVICE static Acc result(const Acc& acc) { return acc; }
};

template <typename scalar_t>
struct ProdScan {
  using Acc = at::opmath_type<scalar_t>;
  static constexpr bool kFloatingOnly = false;
  C10_HOST_DEVICE static Acc identity() { return Acc(1); }
  C10_HOST_DEVICE static Acc of(scalar_t value, int64_t /*row*/) { return static_cast<Acc>(value); }
  C10_HOST_DEVICE static Acc fold(const Acc& earlier, const Acc& later) {
    return product(earlier, later);
  }
  C10_HOST_DEVICE static Acc result(const Acc& acc) { return acc; }
};

// cummax / cummin as torch.cummax / cummin: the later of equal values wins, and a NaN wins over
// every number (the later of NaNs). Exact, so any grouping gives torch's sequential result.
template <typename scalar_t, bool kMax>
struct ExtremumScan {
  using Acc = ValueAndRow<scalar_t>;
  C10_HOST_DEVICE static Acc identity() { return Acc{scalar_t(0), -1}; }
  C10_HOST_DEVICE static Acc of(scalar_t value, int64_t row) { return Acc{value, row}; }
  C10_HOST_DEVICE static bool takes(scalar_t later, scalar_t earlier) {
    if (at::_isnan(later)) return true;
    if (at::_isnan(earlier)) return false;
    return kMax ? later >= earlier : later <= earlier;
  }
  C10_HOST_DEVICE static Acc fold(const Acc& earlier, const Acc& later) {
    const bool take = later.row >= 0 && (earlier.row < 0 || takes(later.value, earlier.value));
    return take ? later : earlier;
  }
};

// logcumsumexp as a running (max, sum of exp(x - max)): the output is max + log(sum). Folding a row
// costs one exp, off the dependent chain (which is a max and a multiply-add), and each output one
// log; a log-add-exp per row (max + log(1 + exp(min - max))) would chain an exp and a log per row.
// The smaller max's sum is scaled by exp(its max - the larger); equal maxima (equal infinities too:
// inf - inf would be NaN) add the sums. -inf rows count in the sum while the max is -inf, and
// vanish (scaled by exp(-inf) = 0) once a number comes: the output stays -inf, then is exact. NaN
// wins. exp / log are portable_math.h's (the same bits on both devices).
template <typename acc_t>
struct MaxAndSum {
  acc_t max, sum;
};

template <typename scalar_t>
struct LogAddExpScan {
  using acc_t = at::opmath_type<scalar_t>;
  using Acc = MaxAndSum<acc_t>;
  static constexpr bool kFloatingOnly = true;  // dispatch_value_scan's dtypes
  C10_HOST_DEVICE static Acc identity() {
    return Acc{-std::numeric_limits<acc_t>::infinity(), acc_t(0)};
  }
  C10_HOST_DEVICE static Acc of(scalar_t value, int64_t /*row*/) {
    return Acc{static_cast<acc_t>(value), acc_t(1)};
  }
  C10_HOST_DEVICE static Acc fold(const Acc& earlier, const Acc& later) {
    const bool later_higher = later.max > earlier.max || at::_isnan(later.max);
    const acc_t high = later_higher ? later.max : earlier.max;
    const acc_t low = later_higher ? earlier.max : later.max;
    const acc_t scale = low == high ? acc_t(1) : portable_exp(low - high);
    const acc_t sum = later_higher ? product(earlier.sum, scale) + later.sum
                                   : earlier.sum + product(later.sum, scale);
    return Acc{high, sum};
  }
  C10_HOST_DEVICE static acc_t result(const Acc& acc) { return acc.max + portable_log(acc.sum); }
};

// One (chunk, column) of a level, upwards: where the chunk's last segment continues past it, its
// piece in the chunk folded from the identity into tails[chunk * width + column] (the item of the
// level above); the identity elsewhere (an item no carry reads). load(item, column) -> Acc.
template <typename Scan, typename Load>
C10_HOST_DEVICE void scan_chunk_tail(const ScanLevel& level, int64_t chunk, int64_t column,
                                     int64_t width, const Load& load, typename Scan::Acc* tails) {
  typename Scan::Acc acc = Scan::identity();
  if (level.continues(chunk)) {
    const int64_t segment_begin = level.first_idx[level.chunk_last_segment[chunk]];
    const int64_t begin = level.begin(chunk);
    for (int64_t item = segment_begin > begin ? segment_begin : begin; item < level.end(chunk);
         ++item) {
      acc = Scan::fold(acc, load(item, column));
    }
  }
  tails[chunk * width + column] = acc;
}

// One (chunk, column) of a level, downwards: write(item, column, value) for every item of the
// chunk. carries: the inclusive scan of this level's tails (the level above's output; null at the
// top level, which is one chunk); the chunk's first piece, when its segment started in an earlier
// chunk, folds on from carries[(chunk - 1) * width + column], the others from the identity.
// exclusive: each item gets the fold before its own value is added (the identity on a segment's
// first item).
template <typename Scan, typename Load, typename Write>
C10_HOST_DEVICE void scan_chunk_rows(const ScanLevel& level, int64_t chunk, int64_t column,
                                     int64_t width, const Load& load, const Write& write,
                                     const typename Scan::Acc* carries, bool exclusive) {
  using Acc = typename Scan::Acc;
  const int64_t begin = level.begin(chunk), end = level.end(chunk);
  int64_t segment = level.chunk_first_segment[chunk];
  const bool carried = carries != nullptr && level.first_idx[segment] < begin;
  Acc acc = carried ? carries[(chunk - 1) * width + column] : Scan::identity();
  int64_t segment_end = level.first_idx[segment + 1];
  for (int64_t item = begin; item < end; ++item) {
    if (item == segment_end) {  // a segment starts (empty ones hold no item)
      while (level.first_idx[segment + 1] <= item) ++segment;
      segment_end = level.first_idx[segment + 1];
      acc = Scan::identity();
    }
    const Acc value = load(item, column);
    if (exclusive) write(item, column, acc);
    acc = Scan::fold(acc, value);
    if (!exclusive) write(item, column, acc);
  }
}

// The scans' loads and writes: a level's items (the tails of the level below), and level 0's rows.

// A level's items (the level below's tails), (items, width) row-major.
template <typename Acc>
struct ScanItems {
  const Acc* items;
  int64_t width;
  C10_HOST_DEVICE Acc operator()(int64_t item, int64_t column) const {
    return items[item * width + column];
  }
};

template <typename Acc>
struct WriteScanItems {
  Acc* items;
  int64_t width;
  C10_HOST_DEVICE void operator()(int64_t item, int64_t column, const Acc& value) const {
    items[item * width + column] = value;
  }
};

// Row `item` of the scan order is packed row origin + step * item (step -1: a reverse scan).
struct ScanOrder {
  int64_t origin, step;
  C10_HOST_DEVICE static ScanOrder of(int64_t rows, bool reverse) {
    return reverse ? ScanOrder{rows - 1, -1} : ScanOrder{0, 1};
  }
  C10_HOST_DEVICE int64_t row(int64_t item) const { return origin + step * item; }
};

template <typename Scan, typename scalar_t>
struct LoadScanRows {
  const scalar_t* data;
  int64_t width;
  ScanOrder order;
  C10_HOST_DEVICE typename Scan::Acc operator()(int64_t item, int64_t column) const {
    const int64_t row = order.row(item);
    return Scan::of(data[row * width + column], row);
  }
};

template <typename Scan, typename scalar_t>
struct WriteScanValues {
  scalar_t* out;
  int64_t width;
  ScanOrder order;
  C10_HOST_DEVICE void operator()(int64_t item, int64_t column,
                                  const typename Scan::Acc& value) const {
    out[order.row(item) * width + column] = static_cast<scalar_t>(Scan::result(value));
  }
};

template <typename scalar_t>
struct WriteScanValueAndRow {
  scalar_t* values;
  int64_t* arg;
  int64_t width;
  ScanOrder order;
  C10_HOST_DEVICE void operator()(int64_t item, int64_t column,
                                  const ValueAndRow<scalar_t>& value) const {
    const int64_t i = order.row(item) * width + column;
    values[i] = value.value;
    arg[i] = value.row;
  }
};

}  // namespace torch_ragged
