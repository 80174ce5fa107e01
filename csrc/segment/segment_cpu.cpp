// CPU kernels of the segment core. Reductions follow segment_index.h's reduction tree in tasks of
// whole rows (at::parallel_for over tree nodes balances by rows, so one huge segment uses every
// thread): the same sums as the GPU's, bit for bit, whatever the thread count.

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "common/checks.h"
#include "common/cpu_clones.h"
#include "common/fill.h"
#include "common/parallel.h"
#include "segment/offsets.h"
#include "segment/portable_lanes.h"
#include "segment/segment_args.h"
#include "segment/segment_index.h"
#include "segment/sort.h"

namespace torch_ragged {
namespace {

// The checked segments of `data`: first_idx on the host, data contiguous.
struct CpuSegments {
  std::vector<int64_t> first_idx;
  at::Tensor data;
  int64_t width;

  int64_t num_segments() const { return static_cast<int64_t>(first_idx.size()) - 1; }
  ReductionTree tree() const {
    return ReductionTree::of(first_idx.data(), num_segments(), first_idx.back(), width);
  }
};

CpuSegments cpu_segments(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                         SegmentDtypes dtypes) {
  check_segment_args(op, data, first_idx, dtypes);
  std::vector<int64_t> offsets = checked_first_idx(op, first_idx, std::nullopt);
  check_last_offset_is_rows(op, offsets.back(), data.size(0));
  return CpuSegments{std::move(offsets), data.contiguous(), row_width(data)};
}

// ---- the reduction tree on the CPU ----
//
// The tree of segment_index.h, computed in tasks of one level-K node each (K from the width: a
// task holds at least kGrainElems elements). Inside a task every value(L, piece) is computed by
// recursion over whole-row loops vectorised over the columns (`Rows` below: fold gives value(0)
// of a piece for every column at once, merge is the reducer's merge per column); a segment inside
// the task is finished there, and the pieces of the segments crossing its edges are left as the
// node's head / tail. The levels above K are the GPU's merge_node, run over their nodes. The same
// tree as the GPU's, so the same bits, whatever the thread count.

// Rows of a reduction, vectorised over the columns (width of them):
//   using Reducer = ...;  (its Acc, identity and per-column merge)
//   static constexpr bool kExact = ...;  (true: any order of merges gives the same result, as for
//                                        max / min: the CPU then folds a whole piece at once)
//   void fold(int64_t segment, int64_t lo, int64_t hi, Acc* out) const;  value(0, [lo, hi))
//   static constexpr bool kCrossingOnly = ...;  (true: only the pieces of segments crossing a
//                                               task's edge are reduced, see reduce_tree)
// hooks before and after a task's rows [begin, end) (each thread works on its own copy of the
// Rows, so the hooks may keep the task's state in members; fold and finish are const):
//   void begin_task(int64_t begin, int64_t end);
//   void end_task();  (after the task's segments are finished, before its crossing pieces)
//   bool finishes_inside() const;  (optional: true when begin_task finishes the segments inside
//                                  the task itself, finish then being left for the others)
// and a finisher called once per segment the task completes:
//   void finish(int64_t segment, int64_t lo, int64_t hi, const Acc* value) const;  (its rows: [lo,
//   hi))

// The level of a task's node: the lowest whose nodes hold kGrainElems elements, or the top.
int task_level(const ReductionTree& tree, int64_t width) {
  const int top = tree.levels() - 1;
  int level = 0;
  while (level < top && tree.node_rows(level) < kGrainElems / std::max<int64_t>(1, width)) ++level;
  return level;
}

template <typename Rows>
class TreeWalker {
 public:
  using Reducer = typename Rows::Reducer;
  using Acc = typename Reducer::Acc;

  TreeWalker(const ReductionTree& tree, int64_t width, const Rows& rows, int levels)
      : tree_(tree), width_(width), rows_(rows), scratch_(std::max(levels, 1) * width) {}

  // out[0, width) = value(level, [lo, hi)) of `segment`; [lo, hi) lies inside one level node.
  void value(int level, int64_t segment, int64_t lo, int64_t hi, Acc* out) {
    if (level == 0) return rows_.fold(segment, lo, hi, out);
    if (level == 1 && width_ == 1) return scalar_level_one(segment, lo, hi, out);
    Acc* child = scratch_.data() + (level - 1) * width_;  // the level below's own scratch
    std::fill(out, out + width_, Reducer::identity());
    for (int64_t start = lo; start < hi;) {
      const int64_t stop = std::min(hi, tree_.end(level - 1, tree_.node_of(level - 1, start)));
      value(level - 1, segment, start, stop, child);
      for (int64_t c = 0; c < width_; ++c) Reducer::merge(out[c], child[c]);
      start = stop;
    }
  }

 private:
  // value(1, [lo, hi)) of one column without the recursion: a short scalar segment across a chunk
  // edge (a sixth of sparse softmax's pools) costs two folds and a merge.
  void scalar_level_one(int64_t segment, int64_t lo, int64_t hi, Acc* out) const {
    Acc acc = Reducer::identity();
    for (int64_t start = lo; start < hi;) {
      const int64_t stop = std::min(hi, tree_.end(0, tree_.node_of(0, start)));
      Acc chunk;
      rows_.fold(segment, start, stop, &chunk);
      Reducer::merge(acc, chunk);
      start = stop;
    }
    *out = acc;
  }

  const ReductionTree& tree_;
  int64_t width_;
  const Rows& rows_;
  std::vector<Acc> scratch_;
};

// Whether a task's begin_task finishes the segments inside it itself (Rows::finishes_inside(),
// where the Rows have one): reduce_tree then leaves them alone.
template <typename Rows>
bool finishes_inside(const Rows& rows) {
  if constexpr (requires { rows.finishes_inside(); }) {
    return rows.finishes_inside();
  } else {
    return false;
  }
}

// Runs the tree: rows.finish(segment, value) for every non-empty segment, at the task or the
// level that completes it (segments above the task level are finished through `write`, the
// per-column form). Empty segments are left to the caller. Rows::kCrossingOnly: only the segments
// crossing a task's edge are reduced (two per task at most), the others are not visited.
template <typename Rows, typename Write>
void reduce_tree(const ReductionTree& tree, int64_t width, const Rows& rows, const Write& write) {
  using Reducer = typename Rows::Reducer;
  using Acc = typename Reducer::Acc;
  if (tree.num_rows == 0 || width == 0) return;
  const int top = tree.levels() - 1;
  const int task = task_level(tree, width);
  const int64_t tasks = tree.nodes(task);
  std::vector<Acc> heads(tasks * width), tails(tasks * width);
  std::vector<CrossingSegments> crossing_of(tasks);  // each task's, for the merges above
  at::parallel_for(0, tasks, 1, [&](int64_t first_task, int64_t last_task) {
    Rows task_rows = rows;  // this thread's: begin_task keeps the task's state in it
    TreeWalker<Rows> walker(tree, width, task_rows, task + 1);
    std::vector<Acc> value(width);
    for (int64_t node = first_task; node < last_task; ++node) {
      const int64_t begin = tree.begin(task, node), end = tree.end(task, node);
      task_rows.begin_task(begin, end);
      // Locals: the rows' stores may alias the tree for the compiler, which would reload it.
      const int64_t* const first = tree.first_idx;
      const int64_t last_segment = tree.segment_of(end - 1);
      const bool visit_inside = !Rows::kCrossingOnly && !finishes_inside(task_rows);
      for (int64_t b = tree.segment_of(begin); visit_inside && b <= last_segment; ++b) {
        const int64_t seg_begin = first[b], seg_end = first[b + 1];
        if (seg_begin == seg_end || seg_begin < begin || seg_end > end) continue;  // not inside
        // Inside one chunk (most short segments): value(0) is the fold itself, no recursion.
        if (Rows::kExact || tree.node_of(0, seg_begin) == tree.node_of(0, seg_end - 1)) {
          task_rows.fold(b, seg_begin, seg_end, value.data());
        } else {
          walker.value(tree.top_level(seg_begin, seg_end), b, seg_begin, seg_end, value.data());
        }
        task_rows.finish(b, seg_begin, seg_end, value.data());
      }
      task_rows.end_task();
      const auto piece = [&](int64_t b, Acc* partial) {
        const int64_t lo = std::max(tree.first_idx[b], begin);
        const int64_t hi = std::min(tree.first_idx[b + 1], end);
        if (Rows::kExact) return task_rows.fold(b, lo, hi, partial);
        walker.value(task, b, lo, hi, partial);
      };
      const CrossingSegments crossing = tree.crossing(task, node);
      crossing_of[node] = crossing;
      if (crossing.head >= 0) piece(crossing.head, heads.data() + node * width);
      if (crossing.tail >= 0) piece(crossing.tail, tails.data() + node * width);
    }
  });
  // The levels above the tasks: the GPU's merge_node, per (node, column).
  for (int level = task + 1; level <= top; ++level) {
    const int64_t nodes = tree.nodes(level);
    std::vector<Acc> level_heads(nodes * width), level_tails(nodes * width);
    at::parallel_for(0, nodes * width, std::max<int64_t>(1, 64 / kFanIn),
                     [&](int64_t lo, int64_t hi) {
                       for (int64_t t = lo; t < hi; ++t) {
                         merge_node<Reducer>(tree, level, t / width, t % width, width,
                                             crossing_of.data(), heads.data(), tails.data(), write,
                                             level_heads.data(), level_tails.data());
                       }
                     });
    heads = std::move(level_heads);
    tails = std::move(level_tails);
    crossing_of.resize(nodes);
    for (int64_t node = 0; node < nodes; ++node)
      node_crossing(tree, level, node, crossing_of.data());
  }
}

// Empty segments get the reducer's identity and count 0, per column.
template <typename Reducer, typename Write>
void write_empty_segments(const ReductionTree& tree, int64_t width, const Write& write) {
  at::parallel_for(0, tree.num_segments, kGrainElems, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (tree.rows_of(b) != 0) continue;
      for (int64_t c = 0; c < width; ++c) write(b, c, Reducer::identity(), 0);
    }
  });
}

// The segments not finished inside their task (they cross a task's edge): map(b, lo, hi) over
// their rows, task by task (a row map after their statistics are known).
template <typename Map>
void for_each_crossing_piece(const ReductionTree& tree, int64_t width, const Map& map) {
  if (tree.num_rows == 0) return;
  const int task = task_level(tree, width);
  at::parallel_for(0, tree.nodes(task), 1, [&](int64_t first_task, int64_t last_task) {
    for (int64_t node = first_task; node < last_task; ++node) {
      const int64_t begin = tree.begin(task, node), end = tree.end(task, node);
      const CrossingSegments crossing = tree.crossing(task, node);
      for (const int64_t b : {crossing.head, crossing.tail}) {
        if (b >= 0)
          map(b, std::max(tree.first_idx[b], begin), std::min(tree.first_idx[b + 1], end));
      }
    }
  });
}

// ---- row loops: rows [lo, hi) of a (rows, width) array, vectorised over columns ----

// Gathered rows fall at random (a sparse matrix's columns): the row kWideGatherAhead rows on is
// fetched, every cache line of it, while this one is added, so that the loads of several rows are
// in flight; without it each row's loads waited on memory (S @ D, 2M entries gathering rows of 64
// floats: 58 -> 36 ms; 4 rows ahead: 39 ms, 12 and 16: no better).
constexpr int64_t kWideGatherAhead = 8;

template <typename scalar_t>
__attribute__((always_inline)) inline void prefetch_row(const scalar_t* row, int64_t width) {
  const char* bytes = reinterpret_cast<const char*>(row);
  const int64_t size = width * static_cast<int64_t>(sizeof(scalar_t));
  for (int64_t line = 0; line < size; line += 64) __builtin_prefetch(bytes + line);
}

// acc[c] = sum of the rows' column c (op-math), from 0 in row order. Row r reads data row
// index[r] when index is given (a gathered sum: coalesce's duplicates; rows up to prefetch_end
// are prefetched) and is scaled by weight[r] when weight is given (a sparse matrix's row times a
// dense matrix): LoadRows' arithmetic.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void sum_rows(const scalar_t* data, const int64_t* index,
                                      const scalar_t* weight, int64_t width, int64_t lo, int64_t hi,
                                      acc_t* __restrict__ acc, int64_t prefetch_end = 0) {
  std::fill(acc, acc + width, acc_t(0));
  for (int64_t row = lo; row < hi; ++row) {
    if (index != nullptr && row + kWideGatherAhead < prefetch_end) {
      prefetch_row(data + index[row + kWideGatherAhead] * width, width);
    }
    const scalar_t* __restrict__ x = data + (index == nullptr ? row : index[row]) * width;
    if (weight != nullptr) {
      const acc_t w = static_cast<acc_t>(weight[row]);
      for (int64_t c = 0; c < width; ++c) acc[c] += w * static_cast<acc_t>(x[c]);
    } else {
      for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<acc_t>(x[c]);
    }
  }
}

// ---- dot products: dot_row's lanes as one vector ----
//
// dot_row (segment_index.h) with its kDotLanes lanes held in one GCC / clang vector, lane j its
// element j: the products are added elementwise (never fused: -ffp-contract=off) and sum_of_lanes'
// halving is three shuffle-and-add steps. The same bits as dot_row; GCC kept the lanes of the
// array form in a register too, but took them apart into eight scalars for the final sum, which
// cost 12 ms of the fused backward's 80 (2M rows of 64 floats). Helpers always inlined, as
// portable_lanes.h's: their callers are compiled once per target.

template <typename acc_t>
struct DotLanes {
  typedef acc_t Values __attribute__((vector_size(kDotLanes * sizeof(acc_t))));
  typedef std::conditional_t<sizeof(acc_t) == 4, int32_t, int64_t> Index;
  typedef Index Indices __attribute__((vector_size(kDotLanes * sizeof(acc_t))));
};

// v = kDotLanes values from p, in acc_t. (Vectors pass by reference: by value, a 32- or 64-byte
// vector would be passed differently by each target's ABI.)
template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline void load_lanes(const scalar_t* p,
                                                      typename DotLanes<acc_t>::Values& v) {
  if constexpr (std::is_same_v<scalar_t, acc_t>) {
    std::memcpy(&v, p, sizeof v);
  } else {
    for (int j = 0; j < kDotLanes; ++j) v[j] = static_cast<acc_t>(p[j]);
  }
}

// sum_of_lanes: lane j + 4 into lane j, then j + 2, then j + 1.
template <typename acc_t>
__attribute__((always_inline)) inline acc_t sum_of_lane_vector(
    const typename DotLanes<acc_t>::Values& lanes) {
  static_assert(kDotLanes == 8, "the shuffles are written out for 8 lanes");
  typename DotLanes<acc_t>::Values v = lanes;
#if defined(__clang__)
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
#else
  using Indices = typename DotLanes<acc_t>::Indices;
  v += __builtin_shuffle(v, Indices{4, 5, 6, 7, 0, 1, 2, 3});
  v += __builtin_shuffle(v, Indices{2, 3, 0, 1, 6, 7, 4, 5});
  v += __builtin_shuffle(v, Indices{1, 0, 3, 2, 5, 4, 7, 6});
#endif
  return v[0];
}

// dot_row(a_row, b_row, width), in acc_t.
template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline acc_t dot_of_rows(const scalar_t* a_row,
                                                        const scalar_t* b_row, int64_t width) {
  typename DotLanes<acc_t>::Values lane = {}, a, b;
  int64_t c = 0;
  for (; c + kDotLanes <= width; c += kDotLanes) {
    load_lanes<acc_t>(a_row + c, a);
    load_lanes<acc_t>(b_row + c, b);
    lane += a * b;
  }
  for (int j = 0; c + j < width; ++j) {
    lane[j] += static_cast<acc_t>(a_row[c + j]) * static_cast<acc_t>(b_row[c + j]);
  }
  return sum_of_lane_vector<acc_t>(lane);
}

// segment_gather_dot's entries [begin, end): out[entry] = dot_row(a[its segment], b[index[entry]])
// (gather_dot_entry's arithmetic), the entries' segment found once, then walked.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void gather_dot_entries(const scalar_t* a, const scalar_t* b,
                                                const int64_t* index, const int64_t* first_idx,
                                                int64_t segments, int64_t width, int64_t begin,
                                                int64_t end, scalar_t* __restrict__ out) {
  int64_t segment = segment_of_row(first_idx, segments, begin);
  for (int64_t entry = begin; entry < end; ++entry) {
    if (entry + kWideGatherAhead < end)
      prefetch_row(b + index[entry + kWideGatherAhead] * width, width);
    while (first_idx[segment + 1] <= entry) ++segment;
    out[entry] = static_cast<scalar_t>(
        dot_of_rows<acc_t>(a + segment * width, b + index[entry] * width, width));
  }
}

// sum_rows (weight given) and, per row, dots[row] = dot_row(segment_row, the row's data row): each
// gathered row read once for both, its dot taken in the same column loop as its sum (calling a
// dot per row after the sum measured 25% slower: one thread, 2M rows of 64, 202-208 vs 154-172
// ms). The same bits as segment_gather_sum and segment_gather_dot.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void sum_dot_rows(const scalar_t* data, const int64_t* index,
                                          const scalar_t* weight, const scalar_t* segment_row,
                                          int64_t width, int64_t lo, int64_t hi,
                                          acc_t* __restrict__ acc, scalar_t* __restrict__ dots,
                                          int64_t prefetch_end) {
  using Values = typename DotLanes<acc_t>::Values;
  std::fill(acc, acc + width, acc_t(0));
  const int64_t whole = width - width % kDotLanes;
  const scalar_t* __restrict__ o = segment_row;
  for (int64_t row = lo; row < hi; ++row) {
    if (row + kWideGatherAhead < prefetch_end) {
      prefetch_row(data + index[row + kWideGatherAhead] * width, width);
    }
    const scalar_t* __restrict__ x = data + index[row] * width;
    const acc_t w = static_cast<acc_t>(weight[row]);
    Values lane = {}, v, segment_values, sum;
    for (int64_t c = 0; c < whole; c += kDotLanes) {
      load_lanes<acc_t>(x + c, v);
      std::memcpy(&sum, acc + c, sizeof sum);
      sum += w * v;
      std::memcpy(acc + c, &sum, sizeof sum);
      load_lanes<acc_t>(o + c, segment_values);
      lane += segment_values * v;
    }
    for (int j = 0; whole + j < width; ++j) {
      const acc_t v = static_cast<acc_t>(x[whole + j]);
      acc[whole + j] += w * v;
      lane[j] += static_cast<acc_t>(o[whole + j]) * v;
    }
    dots[row] = static_cast<scalar_t>(sum_of_lane_vector<acc_t>(lane));
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
// so the select vectorises; a piece has at most a task's rows (< 2^31).
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

// A per-thread scratch of at least n values.
template <typename T>
T* scratch_values(int64_t n) {
  thread_local std::vector<T> scratch;
  if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(n);
  return scratch.data();
}

// out = x - shift per column for rows [lo, hi), row-major.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void subtract_rows(const scalar_t* data, int64_t width, int64_t lo,
                                           int64_t hi, const acc_t* __restrict__ shift,
                                           acc_t* __restrict__ out) {
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ x = data + row * width;
    acc_t* __restrict__ o = out + (row - lo) * width;
    for (int64_t c = 0; c < width; ++c) o[c] = static_cast<acc_t>(x[c]) - shift[c];
  }
}

// Rows read and written in whole vectors for a short scalar segment (softmax's shifts, sums and
// output rows below): a window of 32 rows from its first, or kVectorRows for one of more than 32,
// the rows past its end masked or overwritten later.
constexpr int64_t kVectorRows = 64;

// The window of a segment of `rows` rows (at most kVectorRows).
inline int64_t vector_window(int64_t rows) {
  return rows <= kVectorRows / 2 ? kVectorRows / 2 : kVectorRows;
}

// Softmax's shifts of the non-empty scalar segments among first..last - 1, all inside a task
// starting at row `begin`, and their rows' x - shift (shifted[r - begin]; the buffer holds
// kVectorRows values past the task). The max of a segment of at most kVectorRows rows is found
// in vectors, in any order: the value of ExtremumReducer's fold (the first of equals), since equal
// floats have the same bits, with two exceptions no output shows. +0 against -0: the shift's zero
// sign differs, but a tie of zeros makes two terms exp(+-0) = 1, so the sum is >= 2 and its log
// > 0 (log_softmax's (x - shift) - log(sum) loses the sign). A NaN row (the fold's shift: the
// first NaN): its term is NaN whatever the shift, so is the sum, so is every output of the segment
// (NaN payloads aside). Longer segments and those whose window passes the data's end (`rows`)
// fold row by row. The window's rows past the segment belong to later segments (or the slack),
// written after: the writes need no mask.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void shift_scalar_segments(const scalar_t* data, const int64_t* first_idx,
                                                   int64_t first, int64_t last, int64_t begin,
                                                   int64_t rows, acc_t* __restrict__ shifts,
                                                   acc_t* __restrict__ shifted) {
  using V = typename Lanes<acc_t>::Values;
  using I = typename Lanes<acc_t>::Ints;
  using Int = typename portable_detail::Bits<acc_t>::Int;
  constexpr int64_t kLanes = sizeof(V) / sizeof(acc_t);
  constexpr acc_t kLowest = -std::numeric_limits<acc_t>::infinity();
  I lane{};
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = l;
  for (int64_t b = first; b < last; ++b) {
    const int64_t lo = first_idx[b], hi = first_idx[b + 1];
    if (lo == hi) continue;
    if constexpr (std::is_same_v<scalar_t, acc_t>) {
      const int64_t window = vector_window(hi - lo);
      if (hi - lo <= kVectorRows && lo + window <= rows) {
        V best = V{} + kLowest;
        for (int64_t j = 0; j < window; j += kLanes) {
          V x;
          std::memcpy(&x, data + lo + j, sizeof(V));
          const I inside = lane + static_cast<Int>(j) < static_cast<Int>(hi - lo);
          const V kept = inside ? x : V{} + kLowest;
          best = best > kept ? best : kept;
        }
        acc_t max = kLowest;
        for (int64_t l = 0; l < kLanes; ++l) max = max > best[l] ? max : best[l];
        const acc_t shift = softmax_shift(max);
        shifts[b] = shift;
        for (int64_t j = 0; j < window; j += kLanes) {
          V x;
          std::memcpy(&x, data + lo + j, sizeof(V));
          const V out = x - shift;
          std::memcpy(shifted + (lo - begin) + j, &out, sizeof(V));
        }
        continue;
      }
    }
    // column_extremum and subtract_rows for one column, written inline: through those helpers (a
    // loop over the columns inside the row loop) segments of 100-3000 rows ran ~2x slower.
    acc_t max = static_cast<acc_t>(data[lo]);
    for (int64_t r = lo + 1; r < hi; ++r) {
      const acc_t v = static_cast<acc_t>(data[r]);
      max = ExtremumReducer<acc_t, true>::beats(v, max) ? v : max;
    }
    const acc_t shift = softmax_shift(max);
    shifts[b] = shift;
    for (int64_t r = lo; r < hi; ++r) shifted[r - begin] = static_cast<acc_t>(data[r]) - shift;
  }
}

// The tree's sum of terms[lo - begin, hi - begin) (one scalar segment inside a task): the rows of
// each chunk piece folded left to right from 0; at each node edge the partial of every level the
// edge closes is merged into its parent's (level by level, upwards), and the open partials merged
// top down at the end. value(L) of segment_index.h: identity first, children in order (levels
// above the segment's top add +0 to a sum >= +0 or NaN: the same bits).
template <typename acc_t>
acc_t tree_sum_of_rows(const acc_t* terms, int64_t lo, int64_t hi, int64_t begin, int chunk_bits) {
  acc_t partial[64 / kFanInBits + 2] = {};  // a level per kFanInBits of a row's 63 bits, and one
  int top = 0;
  const int64_t chunk_mask = (int64_t{1} << chunk_bits) - 1;
  for (int64_t piece = lo; piece < hi;) {
    if (piece != lo) {  // a chunk edge: closes levels 0..level - 1
      int level = 0;
      for (;;) {
        partial[level + 1] += partial[level];
        partial[level] = acc_t(0);
        const int bits = chunk_bits + kFanInBits * ++level;
        if (bits >= 63 || (piece & ((int64_t{1} << bits) - 1)) != 0) break;
      }
      top = std::max(top, level);
    }
    const int64_t piece_end = std::min(hi, (piece | chunk_mask) + 1);
    acc_t sum = 0;
    for (int64_t r = piece; r < piece_end; ++r) sum += terms[r - begin];
    partial[0] = sum;
    piece = piece_end;
  }
  acc_t sum = partial[0];
  for (int level = 1; level <= top; ++level) sum = partial[level] + sum;
  return sum;
}

// Softmax's divisors (1 / sum, or log(sum) for log_softmax: WriteSoftmaxDivisor::of) of the
// scalar segments first..last - 1 inside a task starting at `begin`, from their terms (the buffer
// holds kVectorRows values past the task), each sum the tree's (tree_sum_of_rows). Segments of at
// most kVectorRows rows inside one level-1 node (most: the node holds 1024 rows) sum to ((0 +
// piece 1) + piece 2) + ... over their chunk pieces: those run kLanes at a time, a segment per
// lane, row j of every lane in step j, the pieces closed at each lane's chunk edges (no loop exit
// per segment, and kLanes sums' chains at once).
template <typename acc_t, bool kLog>
TORCH_RAGGED_CPU_CLONES void divisors_of_scalar_segments(const int64_t* first_idx, int64_t first,
                                                         int64_t last, int64_t begin,
                                                         int chunk_bits,
                                                         const acc_t* __restrict__ terms,
                                                         acc_t* __restrict__ divisors) {
  using V = typename Lanes<acc_t>::Values;
  using I = typename Lanes<acc_t>::Ints;
  using Int = typename portable_detail::Bits<acc_t>::Int;
  constexpr int64_t kLanes = sizeof(V) / sizeof(acc_t);
  const Int chunk_mask = static_cast<Int>((int64_t{1} << chunk_bits) - 1);
  const int node_bits = chunk_bits + kFanInBits;  // level 1's
  int64_t segment[kLanes];
  const acc_t* row[kLanes];  // each lane's first term
  I rows{}, phase{};         // each lane's rows; its first row's place in its chunk
  int64_t lanes = 0;
  const auto run_lanes = [&] {
    int64_t steps = 0;
    for (int64_t l = 0; l < lanes; ++l) steps = std::max<int64_t>(steps, rows[l]);
    V closed{}, open{};  // the chunk pieces closed so far, folded; the piece being summed
    for (int64_t j = 0; j < steps; ++j) {
      V term;
      for (int64_t l = 0; l < kLanes; ++l) term[l] = row[l][j];  // within kVectorRows: no overrun
      const I step = I{} + static_cast<Int>(j);
      const I inside = step < rows;
      const I at_edge = (((phase + step) & chunk_mask) == 0) & (step > 0) & inside;
      closed = at_edge ? closed + open : closed;
      open = (at_edge ? V{} : open) + (inside ? term : V{});
    }
    V sum = closed + open;
    if constexpr (kLog) {
      acc_t sums[kLanes];
      std::memcpy(sums, &sum, sizeof(V));
      log_values(sums, kLanes);
      std::memcpy(&sum, sums, sizeof(V));
    } else {
      sum = acc_t(1) / sum;  // WriteSoftmaxDivisor::of, lane by lane
    }
    for (int64_t l = 0; l < lanes; ++l) divisors[segment[l]] = sum[l];
    lanes = 0;
    rows = I{};
  };
  for (int64_t b = first; b < last; ++b) {
    const int64_t lo = first_idx[b], hi = first_idx[b + 1];
    if (lo == hi) continue;
    if (hi - lo > kVectorRows || (lo >> node_bits) != ((hi - 1) >> node_bits)) {
      divisors[b] =
          WriteSoftmaxDivisor<acc_t, kLog>::of(tree_sum_of_rows(terms, lo, hi, begin, chunk_bits));
      continue;
    }
    segment[lanes] = b;
    row[lanes] = terms + (lo - begin);
    rows[lanes] = static_cast<Int>(hi - lo);
    phase[lanes] = static_cast<Int>(lo) & chunk_mask;
    if (++lanes == kLanes) run_lanes();
  }
  if (lanes > 0) {
    for (int64_t l = lanes; l < kLanes; ++l) row[l] = terms;  // read, never added (no rows)
    run_lanes();
  }
}

// Softmax's output rows of the scalar segments first..last - 1 inside a task [begin, end) from
// their terms (terms[r - begin]) or, for log_softmax, their rows: SoftmaxOutput's arithmetic. A
// segment of at most kVectorRows rows whose window (vector_window) ends inside the task is written
// in whole vectors: the rows past it belong to later segments of the task, written after it, or to
// the task's tail, written after the tree (in ascending order, as the loop goes).
template <typename scalar_t, bool kLog, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void write_scalar_segments(const scalar_t* data, const int64_t* first_idx,
                                                   int64_t first, int64_t last, int64_t begin,
                                                   int64_t end, const acc_t* __restrict__ terms,
                                                   const acc_t* __restrict__ shifts,
                                                   const acc_t* __restrict__ divisors,
                                                   scalar_t* __restrict__ out) {
  using V = typename Lanes<acc_t>::Values;
  constexpr int64_t kLanes = sizeof(V) / sizeof(acc_t);
  for (int64_t b = first; b < last; ++b) {
    const int64_t lo = first_idx[b], hi = first_idx[b + 1];
    if (lo == hi) continue;
    const acc_t shift = shifts[b], divisor = divisors[b];
    const int64_t window = vector_window(hi - lo);
    if (std::is_same_v<scalar_t, acc_t> && hi - lo <= kVectorRows && lo + window <= end) {
      for (int64_t j = 0; j < window; j += kLanes) {
        V value;
        if (kLog) {
          std::memcpy(&value, data + lo + j, sizeof(V));
          value = (value - shift) - divisor;
        } else {
          std::memcpy(&value, terms + (lo - begin) + j, sizeof(V));
          value = value * divisor;
        }
        std::memcpy(out + lo + j, &value, sizeof(V));
      }
      continue;
    }
    for (int64_t r = lo; r < hi; ++r) {  // softmax_rows' / scale_rows' arithmetic, one column
      out[r] = static_cast<scalar_t>(kLog ? (static_cast<acc_t>(data[r]) - shift) - divisor
                                          : terms[r - begin] * divisor);
    }
  }
}

// out = terms * scale per column, for `rows` rows (softmax's output from its terms).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void scale_rows(const acc_t* terms, int64_t width, int64_t rows,
                                        const acc_t* __restrict__ scale, scalar_t* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const acc_t* __restrict__ t = terms + row * width;
    scalar_t* __restrict__ o = out + row * width;
    for (int64_t c = 0; c < width; ++c) o[c] = static_cast<scalar_t>(t[c] * scale[c]);
  }
}

// terms = exp(x - shift per column) for rows [lo, hi), row-major.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void shifted_exp_rows(const scalar_t* data, int64_t width, int64_t lo,
                                              int64_t hi, const acc_t* __restrict__ shift,
                                              acc_t* __restrict__ terms) {
  subtract_rows(data, width, lo, hi, shift, terms);
  exp_values(terms, (hi - lo) * width);
}

// out rows [lo, hi) = SoftmaxOutput::value per element (shift and divisor: one per column).
template <typename scalar_t, bool kLog, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void softmax_rows(const scalar_t* data, int64_t width, int64_t lo,
                                          int64_t hi, const acc_t* __restrict__ shift,
                                          const acc_t* __restrict__ divisor, scalar_t* out) {
  if (kLog) {  // (x - shift) - log(sum)
    for (int64_t row = lo; row < hi; ++row) {
      const scalar_t* __restrict__ x = data + row * width;
      scalar_t* __restrict__ o = out + row * width;
      for (int64_t c = 0; c < width; ++c) {
        o[c] = static_cast<scalar_t>((static_cast<acc_t>(x[c]) - shift[c]) - divisor[c]);
      }
    }
    return;
  }
  acc_t* terms = scratch_values<acc_t>((hi - lo) * width);  // exp(x - shift) * (1 / sum)
  shifted_exp_rows(data, width, lo, hi, shift, terms);
  scale_rows(terms, width, hi - lo, divisor, out + lo * width);
}

// grad_input rows [lo, hi) = SoftmaxGradInput::value per element; log_softmax's exp(y) of those
// rows are given (exp_y) or computed here.
template <typename scalar_t, bool kLog, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void softmax_grad_rows(const scalar_t* grad, const scalar_t* output,
                                               int64_t width, int64_t lo, int64_t hi,
                                               const acc_t* __restrict__ sum, scalar_t* grad_input,
                                               const acc_t* exp_y = nullptr) {
  if (kLog && exp_y == nullptr) {
    acc_t* values = scratch_values<acc_t>((hi - lo) * width);
    for (int64_t i = 0; i < (hi - lo) * width; ++i) {
      values[i] = static_cast<acc_t>(output[lo * width + i]);
    }
    exp_values(values, (hi - lo) * width);
    exp_y = values;
  }
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ g = grad + row * width;
    const scalar_t* __restrict__ y = output + row * width;
    scalar_t* __restrict__ gi = grad_input + row * width;
    for (int64_t c = 0; c < width; ++c) {
      const acc_t gc = static_cast<acc_t>(g[c]);
      gi[c] = static_cast<scalar_t>(kLog ? gc - exp_y[(row - lo) * width + c] * sum[c]
                                         : static_cast<acc_t>(y[c]) * (gc - sum[c]));
    }
  }
}

// grad * output (or grad alone) summed per column: LoadGradTerm's arithmetic.
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
TORCH_RAGGED_CPU_CLONES void grad_term_rows(const scalar_t* grad, const scalar_t* output,
                                            int64_t width, int64_t lo, int64_t hi,
                                            acc_t* __restrict__ acc) {
  std::fill(acc, acc + width, acc_t(0));
  for (int64_t row = lo; row < hi; ++row) {
    const scalar_t* __restrict__ g = grad + row * width;
    if (output == nullptr) {
      for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<acc_t>(g[c]);
    } else {
      const scalar_t* __restrict__ y = output + row * width;
      for (int64_t c = 0; c < width; ++c) {
        acc[c] += static_cast<acc_t>(g[c]) * static_cast<acc_t>(y[c]);
      }
    }
  }
}

// ---- the reductions' Rows ----

// sum / mean / gathered sums: the finished value is written through `write`.
template <typename scalar_t, typename Write>
struct SumRows {
  using acc_t = sum_acc_t<scalar_t>;
  using Reducer = SumReducer<acc_t>;
  static constexpr bool kExact = false;
  static constexpr bool kCrossingOnly = false;
  const scalar_t* data;
  int64_t width;
  const int64_t* index;    // gathered rows, see sum_rows
  const scalar_t* weight;  // weighted rows, see sum_rows
  Write write;
  // segment_gather_sum_dot (index and weight given): also dots[row] = dot(segment's row of
  // other, the row's data row)
  const scalar_t* other = nullptr;
  scalar_t* dots = nullptr;
  int64_t task_end = 0;  // gathered rows are prefetched up to it
  void begin_task(int64_t, int64_t end) { task_end = end; }
  void end_task() const {}
  void fold(int64_t segment, int64_t lo, int64_t hi, acc_t* out) const {
    if constexpr (std::is_floating_point_v<acc_t>) {  // segment_gather_sum_dot: floating only
      if (dots != nullptr) {  // the tree folds each row exactly once: its dot is taken here
        return sum_dot_rows(data, index, weight, other + segment * width, width, lo, hi, out, dots,
                            task_end);
      }
    }
    if (width == 1) {  // sum_rows' arithmetic, inline: short scalar segments cost no call
      acc_t acc = 0;
      for (int64_t row = lo; row < hi; ++row) {
        // Gathered rows fall at random (coalesce's sorted order): the one kGatherAhead rows on is
        // fetched now, so that the loads overlap across the segments' ends, whose branches keep
        // them apart otherwise (2.8M runs of 1.4 rows: coalesce 1.2x faster). Wider rows measured
        // no gain.
        constexpr int64_t kGatherAhead = 16;
        if (index != nullptr && row + kGatherAhead < task_end) {
          __builtin_prefetch(data + index[row + kGatherAhead]);
        }
        const acc_t x = static_cast<acc_t>(data[index == nullptr ? row : index[row]]);
        acc += weight == nullptr ? x : static_cast<acc_t>(weight[row]) * x;
      }
      out[0] = acc;
      return;
    }
    sum_rows(data, index, weight, width, lo, hi, out, task_end);
  }
  void finish(int64_t segment, int64_t lo, int64_t hi, const acc_t* value) const {
    for (int64_t c = 0; c < width; ++c) write(segment, c, value[c], hi - lo);
  }
};

// max / min and the first row holding it: the extremum per column, then a scan of the (cached)
// rows for its first occurrence.
template <typename scalar_t, bool kMax>
struct ExtremumRows {
  using acc_t = at::opmath_type<scalar_t>;
  using Reducer = ExtremumReducer<acc_t, kMax>;
  static constexpr bool kExact = true;
  static constexpr bool kCrossingOnly = false;
  const scalar_t* data;
  int64_t width;
  WriteExtremum<scalar_t> write;
  void begin_task(int64_t, int64_t) const {}
  void end_task() const {}
  void fold(int64_t /*segment*/, int64_t lo, int64_t hi, ValueAndRow<acc_t>* out) const {
    c10::SmallVector<acc_t, 64> best(width);
    c10::SmallVector<int32_t, 64> found(width);
    column_extremum<scalar_t, kMax>(data, width, lo, hi, best.data());
    first_occurrence(data, width, lo, hi, best.data(), found.data());
    for (int64_t c = 0; c < width; ++c) out[c] = ValueAndRow<acc_t>{best[c], lo + found[c]};
  }
  void finish(int64_t segment, int64_t, int64_t, const ValueAndRow<acc_t>* value) const {
    for (int64_t c = 0; c < width; ++c) write(segment, c, value[c], 0);
  }
};

// The maxima of the segments that cross a task's edge, as softmax's shifts (the segments inside
// a task find theirs in SoftmaxRows, with their rows in cache).
template <typename scalar_t>
struct CrossingMaxRows {
  using acc_t = at::opmath_type<scalar_t>;
  using Reducer = ExtremumReducer<acc_t, true>;
  static constexpr bool kExact = true;
  static constexpr bool kCrossingOnly = true;
  const scalar_t* data;
  int64_t width;
  void begin_task(int64_t, int64_t) const {}
  void end_task() const {}
  void fold(int64_t /*segment*/, int64_t lo, int64_t hi, ValueAndRow<acc_t>* out) const {
    c10::SmallVector<acc_t, 64> best(width);
    column_extremum<scalar_t, true>(data, width, lo, hi, best.data());
    for (int64_t c = 0; c < width; ++c) out[c] = ValueAndRow<acc_t>{best[c], lo};  // any row
  }
  void finish(int64_t, int64_t, int64_t, const ValueAndRow<acc_t>*) const {}
};

// The values a task precomputes for its rows [begin, end): exp(x - shift) for softmax, exp(y) for
// log_softmax's gradient; one vectorised pass over the task, not one per (short) segment. Kept in
// the thread's copy of the Rows (a thread-local looked up per segment costs a call in a shared
// library).
template <typename acc_t>
struct TaskValues {
  int64_t begin = 0, end = 0;
  acc_t* values = nullptr;  // row `begin` first, `width` per row

  // The calling thread's scratch, set up for rows [begin, end): a buffer of its own, since
  // scratch_values serves the row loops that run while the task's values are still read.
  // kVectorRows values of slack past the task: whole-vector windows of the task's last segments.
  void start(int64_t task_begin, int64_t task_end, int64_t width) {
    thread_local std::vector<acc_t> scratch;
    const int64_t size = (task_end - task_begin) * width + kVectorRows;
    if (static_cast<int64_t>(scratch.size()) < size) scratch.resize(size);
    begin = task_begin;
    end = task_end;
    values = scratch.data();
  }
  acc_t* at(int64_t row, int64_t width) const { return values + (row - begin) * width; }
};

// Short scalar segments (sparse softmax's pools of a few entries) run a fixed count of rows, those
// past the segment masked (reads) or overwritten later (writes): no loop exit to mispredict per
// segment. Rows written past a segment stay inside its task and belong to later segments, finished
// after it in ascending order, or to the task's tail, finished after the tree.
constexpr int64_t kShortRows = 8;

// Whether segment [lo, hi) of a task ending at task_end runs as a short one: kShortRows rows from
// lo, all inside the task (loops of that constant count: unrolled; a loop to a variable end
// measured 11-14% slower on softmax's backward).
inline bool runs_short(int64_t lo, int64_t hi, int64_t task_end) {
  return hi - lo <= kShortRows && lo + kShortRows <= task_end;
}

// x where keep, else +0, without a branch (the bits masked): a short segment's rows past its end
// add +0, which leaves a sum started at +0 unchanged (such a sum is never -0).
template <typename T>
inline T kept_or_zero(T x, bool keep) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(T) == sizeof(Bits));
  Bits bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits &= Bits{0} - static_cast<Bits>(keep);
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

// Softmax's sums of exp(x - shift) (LoadShiftedExp's arithmetic). A task first finds the shifts
// of the segments inside it (the crossing segments' are known beforehand) and every term of its
// rows in one vectorised exp; its segments are then summed by the tree from those terms, and the
// ones inside it normalised at once (rows and terms still in cache: one exp per element).
template <typename scalar_t, bool kLog>
struct SoftmaxRows {
  using acc_t = at::opmath_type<scalar_t>;
  using Reducer = SumReducer<acc_t>;
  static constexpr bool kExact = false;
  static constexpr bool kCrossingOnly = false;
  const scalar_t* data;
  int64_t width;
  acc_t* shifts;    // num_segments x width; the crossing segments' are known beforehand
  acc_t* divisors;  // num_segments x width
  scalar_t* out;
  const ReductionTree* tree;
  TaskValues<acc_t> terms;  // exp(x - shift) of the task's rows
  void begin_task(int64_t begin, int64_t end) {
    terms.start(begin, end, width);
    if (width == 1) return begin_scalar_task(begin, end);
    for (int64_t b = tree->segment_of(begin); b < tree->num_segments && tree->first_idx[b] < end;
         ++b) {
      const int64_t seg_begin = tree->first_idx[b], seg_end = tree->first_idx[b + 1];
      if (seg_begin == seg_end) continue;
      acc_t* shift = shifts + b * width;
      const bool inside = seg_begin >= begin && seg_end <= end;
      const int64_t lo = std::max(seg_begin, begin), hi = std::min(seg_end, end);
      if (inside) {  // its maxima, exactly as a max reduction's
        c10::SmallVector<acc_t, 64> max(width);
        column_extremum<scalar_t, true>(data, width, seg_begin, seg_end, max.data());
        for (int64_t c = 0; c < width; ++c) shift[c] = softmax_shift(max[c]);
      }
      subtract_rows(data, width, lo, hi, shift, terms.at(lo, width));
    }
    exp_values(terms.at(begin, width), (end - begin) * width);
  }
  // Width 1: the segments inside the task finished here, a pass over all of them per step (shifts
  // and x - shift, exp, the tree's sums and divisors, the output rows: no calls or loop exits per
  // segment in between); the pieces of those crossing its edges, whose shifts are known, shifted
  // for the tree's crossing pieces (fold).
  void begin_scalar_task(int64_t begin, int64_t end) {
    const int64_t* first = tree->first_idx;
    const auto shift_piece = [&](int64_t b, int64_t lo, int64_t hi) {
      acc_t* shifted = terms.at(lo, 1);
      for (int64_t r = lo; r < hi; ++r) shifted[r - lo] = static_cast<acc_t>(data[r]) - shifts[b];
    };
    int64_t inside_first = tree->segment_of(begin);
    const int64_t last = tree->segment_of(end - 1);
    if (first[inside_first] < begin) {  // the head piece (the whole task, if it also ends after)
      shift_piece(inside_first, begin, std::min(first[inside_first + 1], end));
      ++inside_first;
    }
    const bool tail_crosses = last >= inside_first && first[last + 1] > end;
    const int64_t inside_last = tail_crosses ? last : last + 1;
    acc_t* task_terms = terms.at(begin, 1);
    shift_scalar_segments(data, first, inside_first, inside_last, begin, tree->num_rows, shifts,
                          task_terms);
    if (tail_crosses) shift_piece(last, first[last], end);
    exp_values(task_terms, end - begin);
    divisors_of_scalar_segments<acc_t, kLog>(first, inside_first, inside_last, begin,
                                             tree->chunk_bits, task_terms, divisors);
    write_scalar_segments<scalar_t, kLog>(data, first, inside_first, inside_last, begin, end,
                                          task_terms, shifts, divisors, out);
  }
  // Width 1: begin_task has finished the segments inside the task.
  bool finishes_inside() const { return width == 1; }
  void fold(int64_t /*segment*/, int64_t lo, int64_t hi, acc_t* value) const {
    const acc_t* term = terms.at(lo, width);
    if (width == 1) {  // inline for short scalar segments (sparse softmax's pools)
      acc_t sum = 0;
      if (runs_short(lo, hi, terms.end)) {  // rows past hi add +0: the row loop's bits
        for (int64_t j = 0; j < kShortRows; ++j) sum += kept_or_zero(term[j], j < hi - lo);
      } else {
        for (int64_t r = 0; r < hi - lo; ++r) sum += term[r];
      }
      value[0] = sum;
      return;
    }
    sum_rows(term, static_cast<const int64_t*>(nullptr), static_cast<const acc_t*>(nullptr), width,
             0, hi - lo, value);  // SumReducer::fold of the terms, in row order
  }
  // Segments of width > 1 inside a task (those of width 1 are finished in begin_task).
  void finish(int64_t segment, int64_t lo, int64_t hi, const acc_t* value) const {
    acc_t* divisor = divisors + segment * width;
    for (int64_t c = 0; c < width; ++c) divisor[c] = WriteSoftmaxDivisor<acc_t, kLog>::of(value[c]);
    if (kLog) {
      return softmax_rows<scalar_t, true>(data, width, lo, hi, shifts + segment * width, divisor,
                                          out);
    }
    scale_rows(terms.at(lo, width), width, hi - lo, divisor, out + lo * width);
  }
  void end_task() const {}
};

// Softmax's backward sums (of grad * output, or of grad); a segment finished inside its task
// gets its gradient rows at once (log_softmax's exp(y) for the whole task in one pass).
template <typename scalar_t, bool kLog>
struct SoftmaxGradRows {
  using acc_t = at::opmath_type<scalar_t>;
  using Reducer = SumReducer<acc_t>;
  static constexpr bool kExact = false;
  static constexpr bool kCrossingOnly = false;
  const scalar_t* grad;
  const scalar_t* output;
  int64_t width;
  scalar_t* grad_input;
  int64_t task_end = 0;
  TaskValues<acc_t> exp_y;  // log_softmax: exp(y) of the task's rows (unused for softmax)
  void end_task() const {}

  void begin_task(int64_t begin, int64_t end) {
    task_end = end;
    if (!kLog) return;
    exp_y.start(begin, end, width);
    acc_t* values = exp_y.at(begin, width);
    for (int64_t i = 0; i < (end - begin) * width; ++i) {
      values[i] = static_cast<acc_t>(output[begin * width + i]);
    }
    exp_values(values, (end - begin) * width);
  }
  void fold(int64_t /*segment*/, int64_t lo, int64_t hi, acc_t* value) const {
    if (width == 1) {  // grad_term_rows' arithmetic, inline
      acc_t sum = 0;
      if (runs_short(lo, hi, task_end)) {  // rows past hi add +0: the row loop's bits
        for (int64_t j = 0; j < kShortRows; ++j) sum += kept_or_zero(term(lo + j), j < hi - lo);
      } else {
        for (int64_t r = lo; r < hi; ++r) sum += term(r);
      }
      value[0] = sum;
      return;
    }
    grad_term_rows(grad, kLog ? nullptr : output, width, lo, hi, value);
  }
  void finish(int64_t /*segment*/, int64_t lo, int64_t hi, const acc_t* value) const {
    if (width == 1) {              // softmax_grad_rows' arithmetic, inline
      const acc_t sum = value[0];  // a local: the stores below cannot change it
      if (runs_short(lo, hi, task_end)) {
        for (int64_t j = 0; j < kShortRows; ++j) grad_input[lo + j] = grad_in(lo + j, sum);
      } else {
        for (int64_t r = lo; r < hi; ++r) grad_input[r] = grad_in(r, sum);
      }
      return;
    }
    softmax_grad_rows<scalar_t, kLog>(grad, output, width, lo, hi, value, grad_input,
                                      kLog ? exp_y.at(lo, width) : nullptr);
  }

 private:
  // Width 1: grad_term_rows' term and softmax_grad_rows' value of row r.
  acc_t term(int64_t r) const {
    const acc_t g = static_cast<acc_t>(grad[r]);
    return kLog ? g : g * static_cast<acc_t>(output[r]);
  }
  scalar_t grad_in(int64_t r, acc_t sum) const {
    const acc_t g = static_cast<acc_t>(grad[r]);
    return static_cast<scalar_t>(kLog ? g - *exp_y.at(r, 1) * sum
                                      : static_cast<acc_t>(output[r]) * (g - sum));
  }
};

// ---- reductions ----

template <typename scalar_t, typename Write>
void sum_segments(const ReductionTree& tree, const SumRows<scalar_t, Write>& rows) {
  using acc_t = sum_acc_t<scalar_t>;
  reduce_tree(tree, rows.width, rows, rows.write);
  write_empty_segments<SumReducer<acc_t>>(tree, rows.width, rows.write);
}

template <typename scalar_t, typename Write>
void sum_segments(const ReductionTree& tree, const scalar_t* data, const int64_t* index,
                  const scalar_t* weight, int64_t width, const Write& write) {
  sum_segments(tree, SumRows<scalar_t, Write>{data, width, index, weight, write});
}

template <bool kMean>
at::Tensor sum_or_mean_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  constexpr std::string_view op = kMean ? "segment_mean" : "segment_sum";
  // Integer means: the 64-bit sum over the row count, truncating toward zero (sum_acc_t).
  const CpuSegments s = cpu_segments(op, data, first_idx, SegmentDtypes::kSummable);
  at::Tensor out = at::empty(per_segment_sizes(data, s.num_segments()), data.options());
  AT_DISPATCH_V2(
      data.scalar_type(), "segment_sum_cpu", AT_WRAP([&] {
        sum_segments(s.tree(), s.data.const_data_ptr<scalar_t>(), nullptr,
                     static_cast<const scalar_t*>(nullptr), s.width,
                     WriteSum<scalar_t, kMean>{out.mutable_data_ptr<scalar_t>(), s.width});
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kHalf,
      at::kBFloat16);
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
  AT_DISPATCH_V2(
      data.scalar_type(), "segment_extremum_cpu", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        const ReductionTree tree = s.tree();
        const WriteExtremum<scalar_t> write{values.mutable_data_ptr<scalar_t>(),
                                            arg.mutable_data_ptr<int64_t>(), s.width};
        reduce_tree(tree, s.width,
                    ExtremumRows<scalar_t, kMax>{s.data.const_data_ptr<scalar_t>(), s.width, write},
                    write);
        write_empty_segments<ExtremumReducer<acc_t, kMax>>(tree, s.width, write);
      }),
      AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool, at::kHalf,
      at::kBFloat16);
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

template <typename scalar_t, bool kLog>
void softmax_segments(const ReductionTree& tree, const scalar_t* data, int64_t width,
                      scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  // Uninitialised: a segment's entries are written before they are read (empty ones: never).
  const std::unique_ptr<acc_t[]> shifts(new acc_t[tree.num_segments * width]);
  const std::unique_ptr<acc_t[]> divisors(new acc_t[tree.num_segments * width]);
  // 1. The maxima of the segments crossing a task's edge (the others': in their task, below).
  reduce_tree(tree, width, CrossingMaxRows<scalar_t>{data, width},
              WriteShift<acc_t>{shifts.get(), width});
  // 2. The sums of exp(x - shift) by the tree; segments inside a task are written there.
  reduce_tree(tree, width,
              SoftmaxRows<scalar_t, kLog>{data, width, shifts.get(), divisors.get(), out, &tree},
              WriteSoftmaxDivisor<acc_t, kLog>{divisors.get(), width});
  // 3. The crossing segments' rows.
  for_each_crossing_piece(tree, width, [&](int64_t b, int64_t lo, int64_t hi) {
    softmax_rows<scalar_t, kLog>(data, width, lo, hi, shifts.get() + b * width,
                                 divisors.get() + b * width, out);
  });
}

template <bool kLog>
at::Tensor softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  const CpuSegments s = cpu_segments(kLog ? "segment_log_softmax" : "segment_softmax", data,
                                     first_idx, SegmentDtypes::kFloating);
  at::Tensor out = at::empty_like(s.data);
  AT_DISPATCH_V2(data.scalar_type(), "segment_softmax_cpu", AT_WRAP([&] {
                   softmax_segments<scalar_t, kLog>(s.tree(), s.data.const_data_ptr<scalar_t>(),
                                                    s.width, out.mutable_data_ptr<scalar_t>());
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

template <typename scalar_t, bool kLog>
void softmax_grad_segments(const ReductionTree& tree, const scalar_t* grad, const scalar_t* output,
                           int64_t width, scalar_t* grad_input) {
  using acc_t = at::opmath_type<scalar_t>;
  // The crossing segments' sums (written by the levels above the tasks; others: never read).
  const std::unique_ptr<acc_t[]> sums(new acc_t[tree.num_segments * width]);
  const WriteAcc<acc_t> write{sums.get(), width};
  reduce_tree(tree, width, SoftmaxGradRows<scalar_t, kLog>{grad, output, width, grad_input}, write);
  for_each_crossing_piece(tree, width, [&](int64_t b, int64_t lo, int64_t hi) {
    softmax_grad_rows<scalar_t, kLog>(grad, output, width, lo, hi, sums.get() + b * width,
                                      grad_input);
  });
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
  AT_DISPATCH_V2(output.scalar_type(), "segment_softmax_backward_cpu", AT_WRAP([&] {
                   const scalar_t* g = grad.const_data_ptr<scalar_t>();
                   const scalar_t* y = s.data.const_data_ptr<scalar_t>();
                   scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
                   if (log) {
                     softmax_grad_segments<scalar_t, true>(s.tree(), g, y, s.width, gi);
                   } else {
                     softmax_grad_segments<scalar_t, false>(s.tree(), g, y, s.width, gi);
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

// The gathered ops' index (int64, each entry a row of `data`) and first_idx (on the host, ending at
// the index's length), checked: IndexError / ValueError naming op.
struct CheckedGather {
  at::Tensor rows;
  at::Tensor offsets;  // contiguous int64 on the host

  const int64_t* first_idx() const { return offsets.const_data_ptr<int64_t>(); }
  int64_t segments() const { return offsets.numel() - 1; }
};

CheckedGather checked_gather(std::string_view op, const at::Tensor& data, const at::Tensor& index,
                             const std::optional<at::Tensor>& weight, const at::Tensor& first_idx) {
  at::Tensor rows = checked_gather_index(op, data, index, weight);
  at::Tensor offsets = checked_first_idx_on_host(op, first_idx, rows.numel());
  check_gather_range(op, rows, data.size(0));
  return {std::move(rows), std::move(offsets)};
}

at::Tensor segment_gather_sum_cpu(const at::Tensor& data, const at::Tensor& index,
                                  const std::optional<at::Tensor>& weight,
                                  const at::Tensor& first_idx) {
  constexpr std::string_view op = "segment_gather_sum";
  check_segment_args(op, data, first_idx, SegmentDtypes::kSummable);
  const CheckedGather gathered = checked_gather(op, data, index, weight, first_idx);
  return cpu::segment_gather_sum(data, gathered.rows, weight.value_or(at::Tensor()),
                                 gathered.offsets);
}

at::Tensor segment_gather_dot_cpu(const at::Tensor& a, const at::Tensor& b, const at::Tensor& index,
                                  const at::Tensor& first_idx) {
  constexpr std::string_view op = "segment_gather_dot";
  check_dot_operands(op, "a", a, "b", b, first_idx);
  const CheckedGather gathered = checked_gather(op, b, index, std::nullopt, first_idx);
  const at::Tensor& rows = gathered.rows;
  const int64_t* offsets = gathered.first_idx();
  const at::Tensor left = a.contiguous(), right = b.contiguous();
  const int64_t width = row_width(b), n = rows.numel();
  at::Tensor out = at::empty({n}, a.options());
  AT_DISPATCH_V2(a.scalar_type(), "segment_gather_dot_cpu", AT_WRAP([&] {
                   const scalar_t* l = left.const_data_ptr<scalar_t>();
                   const scalar_t* r = right.const_data_ptr<scalar_t>();
                   scalar_t* o = out.mutable_data_ptr<scalar_t>();
                   const int64_t* idx = rows.const_data_ptr<int64_t>();
                   const int64_t segments = a.size(0);
                   const int64_t grain =
                       std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, width));
                   at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
                     gather_dot_entries(l, r, idx, offsets, segments, width, begin, end, o);
                   });
                 }),
                 AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// segment_gather_sum and segment_gather_dot(other, data, index, first_idx) in one pass over the
// gathered rows (Sᵀ @ G and the SDDMM of S @ D's backward read the same rows of G): each output the
// same bits as its op's.
std::tuple<at::Tensor, at::Tensor> segment_gather_sum_dot_cpu(
    const at::Tensor& data, const at::Tensor& index, const std::optional<at::Tensor>& weight,
    const at::Tensor& first_idx, const at::Tensor& other) {
  constexpr std::string_view op = "segment_gather_sum_dot";
  check_dot_operands(op, "other", other, "data", data, first_idx);
  const CheckedGather gathered = checked_gather(op, data, index, weight, first_idx);
  const at::Tensor& rows = gathered.rows;
  const at::Tensor src = data.contiguous(), segment_rows = other.contiguous();
  // Weights of 1 when none are given: 1 * x is x, bit for bit, so the sums stay gather_sum's.
  const at::Tensor weights = weight.has_value() && weight->defined()
                                 ? weight->contiguous()
                                 : at::ones({rows.numel()}, data.options());
  const int64_t segments = gathered.segments(), width = row_width(data);
  at::Tensor sums = at::empty(per_segment_sizes(data, segments), data.options());
  at::Tensor dots = at::empty({rows.numel()}, data.options());
  const ReductionTree tree = ReductionTree::of(gathered.first_idx(), segments, rows.numel(), width);
  AT_DISPATCH_V2(
      data.scalar_type(), "segment_gather_sum_dot_cpu", AT_WRAP([&] {
        using Write = WriteSum<scalar_t, false>;
        sum_segments(tree, SumRows<scalar_t, Write>{src.const_data_ptr<scalar_t>(), width,
                                                    rows.const_data_ptr<int64_t>(),
                                                    weights.const_data_ptr<scalar_t>(),
                                                    Write{sums.mutable_data_ptr<scalar_t>(), width},
                                                    segment_rows.const_data_ptr<scalar_t>(),
                                                    dots.mutable_data_ptr<scalar_t>()});
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return {sums, dots};
}

// ---- expand, ids, offsets ----

// Rows [begin, end) of out from segment b on, for rows of one machine word: a plain typed loop,
// as short segments (one or two rows each: sparse gathers, sum backwards) cost a call per
// segment through fill_pattern.
template <typename Word>
void expand_words(const Word* in, Word* out, const int64_t* first_idx, int64_t b, int64_t begin,
                  int64_t end) {
  for (int64_t row = begin; row < end;) {
    while (first_idx[b + 1] <= row) ++b;  // skip empty segments
    const int64_t stop = std::min(end, first_idx[b + 1]);
    const Word word = in[b];
    for (; row < stop; ++row) out[row] = word;
  }
}

// Row r of out is row b of `values` for the segment b holding r (values contiguous; `out` fresh,
// so aligned: only `in` may sit at an odd offset, e.g. two halfs of a sliced tensor).
void expand_rows(const at::Tensor& values, at::Tensor& out, const std::vector<int64_t>& first_idx) {
  const int64_t batch = static_cast<int64_t>(first_idx.size()) - 1, rows = first_idx.back();
  if (out.numel() == 0) return;  // also zero-width rows: no work per row
  const int64_t row_bytes = out.nbytes() / rows;
  const char* in = static_cast<const char*>(values.const_data_ptr());
  char* dst = static_cast<char*>(out.mutable_data_ptr());
  const int64_t grain = std::max<int64_t>(1, kGrainElems * 4 / row_bytes);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    int64_t b = segment_of_row(first_idx.data(), batch, begin);
    const auto aligned = [&](size_t bytes) { return reinterpret_cast<uintptr_t>(in) % bytes == 0; };
    if (row_bytes == 4 && aligned(4)) {
      return expand_words(reinterpret_cast<const uint32_t*>(in), reinterpret_cast<uint32_t*>(dst),
                          first_idx.data(), b, begin, end);
    }
    if (row_bytes == 8 && aligned(8)) {
      return expand_words(reinterpret_cast<const uint64_t*>(in), reinterpret_cast<uint64_t*>(dst),
                          first_idx.data(), b, begin, end);
    }
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

// ids[row] = the segment holding row, for every row of the (checked, host) offsets.
void fill_segment_ids(const std::vector<int64_t>& offsets, int64_t* ids) {
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  at::parallel_for(0, offsets.back(), kGrainElems, [&](int64_t begin, int64_t end) {
    int64_t b = segment_of_row(offsets.data(), segments, begin);
    for (int64_t row = begin; row < end;) {
      while (offsets[b + 1] <= row) ++b;  // skip empty segments
      for (const int64_t stop = std::min(end, offsets[b + 1]); row < stop; ++row) ids[row] = b;
    }
  });
}

at::Tensor segment_ids_cpu(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  RowsOutput rows = rows_output("segment_ids", first_idx, num_rows);
  if (rows.out.numel() > 0) fill_segment_ids(rows.offsets, rows.out.mutable_data_ptr<int64_t>());
  return rows.out;
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
  const auto [source_row, out_first_idx] =
      select_segments_on_host(op, first_idx, index, values.size(0));
  check_num_rows_matches(op, rows_given, out_first_idx.back());
  at::Tensor out = empty_output(op, "the output", per_segment_sizes(values, out_first_idx.back()),
                                values.options());
  copy_selected_rows(values.contiguous(), out, source_row, out_first_idx);
  return {out, at::tensor(out_first_idx, at::kLong).to(first_idx.device())};
}

at::Tensor get_first_idx_cpu(const at::Tensor& numel_per_tensor, bool validate) {
  // The scan checks as it goes; on the CPU that costs nothing, so validate=False changes nothing.
  (void)validate;
  return offsets_tensor_from_counts("get_first_idx", "numel_per_tensor", numel_per_tensor);
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
  const ReductionTree tree = ReductionTree::of(offsets, runs, rows, width);
  AT_DISPATCH_V2(data.scalar_type(), "segment_gather_sum_cpu", AT_WRAP([&] {
                   sum_segments(tree, src.const_data_ptr<scalar_t>(), gather,
                                weights.defined() ? weights.const_data_ptr<scalar_t>() : nullptr,
                                width,
                                WriteSum<scalar_t, false>{out.mutable_data_ptr<scalar_t>(), width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
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
  m.impl("segment_gather_sum_dot", &segment_gather_sum_dot_cpu);
  m.impl("segment_gather_dot", &segment_gather_dot_cpu);
  m.impl("ragged_index_select", &ragged_index_select_cpu);
}

}  // namespace torch_ragged
