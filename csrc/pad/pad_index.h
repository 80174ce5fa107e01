#pragma once

// Index arithmetic of numpy.pad's index modes, shared by the CPU and CUDA kernels
// (C10_HOST_DEVICE), so the CPU tests exercise the arithmetic the GPU runs.
//
// Along one axis of input length n padded by `before` and `after`, output index i sits at
// t = i - before relative to the input. Interior positions (0 <= t < n) copy input[t]; padding
// positions copy input[source(t)] (edge, wrap, even reflect / symmetric) or hold a constant.
// The closed forms reproduce numpy >= 2.1 for pads of any width (several periods):
//   edge:      clamp(t, 0, n - 1)
//   wrap:      t mod n                          (floor mod)
//   reflect:   r = t mod 2(n-1); r < n ? r : 2(n-1) - r   (n == 1 copies the edge, as numpy)
//   symmetric: r = t mod 2n;     r < n ? r : 2n - 1 - r
// Each mode is separable: a multi-dimensional output element reads the input element whose
// coordinate along every axis is that axis's source index, so padding order does not matter.

#include <c10/macros/Macros.h>

#include <cstdint>
#include <type_traits>

#include "segment/segment_index.h"  // RowLanes, kRowsInFlight

namespace torch_ragged {

enum class IndexPadMode : int8_t { kConstant, kEmpty, kEdge, kReflect, kSymmetric, kWrap };

// Source index of an output position that holds a constant (or, for kEmpty, nothing).
constexpr int64_t kNoSource = -1;

// In 32-bit arithmetic when both fit (on the GPU a 64-bit remainder is a call of ~70 instructions;
// the border elements of reflect / symmetric / wrap take one each).
C10_HOST_DEVICE inline int64_t floor_mod(int64_t a, int64_t m) {
  if (a == static_cast<int32_t>(a) && m == static_cast<int32_t>(m)) {
    const int32_t r = static_cast<int32_t>(a) % static_cast<int32_t>(m);
    return r < 0 ? r + m : r;
  }
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// Period of the source pattern of a periodic mode along an axis of length n (n >= 1).
// Size: int64_t in the kernels, c10::SymInt in the traced composite (odd reflections, pad.cpp).
template <typename Size>
C10_HOST_DEVICE inline Size pad_period(IndexPadMode mode, Size n) {
  switch (mode) {
    case IndexPadMode::kWrap:
      return n;
    case IndexPadMode::kReflect:
      return (n - 1) * 2;
    case IndexPadMode::kSymmetric:
      return n * 2;
    default:
      return Size(0);
  }
}

// Input index for output index i along an axis of length n padded by `before` at its start.
C10_HOST_DEVICE inline int64_t pad_source_index(IndexPadMode mode, int64_t i, int64_t n,
                                                int64_t before) {
  const int64_t t = i - before;
  if (t >= 0 && t < n) return t;
  switch (mode) {
    case IndexPadMode::kEdge:
      return t < 0 ? 0 : n - 1;
    case IndexPadMode::kWrap:
      return floor_mod(t, n);
    case IndexPadMode::kReflect:
    case IndexPadMode::kSymmetric: {
      if (n == 1) return 0;
      const int64_t period = pad_period(mode, n);
      const int64_t r = floor_mod(t, period);
      if (r < n) return r;
      return mode == IndexPadMode::kReflect ? period - r : period - 1 - r;
    }
    default:
      return kNoSource;
  }
}

// Output positions first, first + step, ..., first + (count - 1) * step.
struct Progression {
  int64_t first;
  int64_t step;
  int64_t count;
};

// The output positions in [0, out_len) congruent to before + r modulo `period`.
C10_HOST_DEVICE inline Progression residue_positions(int64_t r, int64_t period, int64_t before,
                                                     int64_t out_len) {
  const int64_t first = floor_mod(before + r, period);
  const int64_t count = first < out_len ? (out_len - 1 - first) / period + 1 : 0;
  return {first, period, count};
}

// The preimage of input index j: every output position along the axis whose source is j, as at
// most two progressions (written to `out`; returns how many). The backward of the index modes sums
// the gradient over exactly these positions, so it needs no atomics.
C10_HOST_DEVICE inline int pad_preimages(IndexPadMode mode, int64_t j, int64_t n, int64_t before,
                                         int64_t out_len, Progression* out) {
  const int64_t self = before + j;
  switch (mode) {
    case IndexPadMode::kEdge:
    case IndexPadMode::kReflect:
    case IndexPadMode::kSymmetric:
      if (n == 1) {  // every output position copies the single element
        out[0] = {0, 1, out_len};
        return 1;
      }
      break;
    default:
      break;
  }
  switch (mode) {
    case IndexPadMode::kEdge:
      if (j == 0) {
        out[0] = {0, 1, before + 1};
      } else if (j == n - 1) {
        out[0] = {self, 1, out_len - self};
      } else {
        out[0] = {self, 1, 1};
      }
      return 1;
    case IndexPadMode::kWrap:
      out[0] = residue_positions(j, n, before, out_len);
      return 1;
    case IndexPadMode::kReflect: {
      const int64_t period = pad_period(mode, n);
      out[0] = residue_positions(j, period, before, out_len);
      if (j == 0 || j == n - 1) return 1;  // their mirror residues coincide with themselves
      out[1] = residue_positions(period - j, period, before, out_len);
      return 2;
    }
    case IndexPadMode::kSymmetric: {
      const int64_t period = pad_period(mode, n);
      out[0] = residue_positions(j, period, before, out_len);
      out[1] = residue_positions(period - 1 - j, period, before, out_len);
      return 2;
    }
    default:  // constant / empty: only the interior position reads the input
      out[0] = {self, 1, 1};
      return 1;
  }
}

// Walks the preimage of input index j along one axis, position by position, in a fixed order (the
// backward kernels' summation order, so their result is reproducible).
struct AxisPreimage {
  Progression runs[2];
  int count;      // progressions in runs
  int run;        // the current one
  int64_t index;  // the current element of it

  C10_HOST_DEVICE void start(IndexPadMode mode, int64_t j, int64_t n, int64_t before,
                             int64_t out_len) {
    count = pad_preimages(mode, j, n, before, out_len, runs);
    rewind();
  }
  C10_HOST_DEVICE void rewind() {
    run = 0;
    index = 0;
    while (runs[run].count == 0) ++run;  // position before + j itself is always in one
  }
  C10_HOST_DEVICE int64_t position() const { return runs[run].first + index * runs[run].step; }
  // Moves to the next position; after the last one, rewinds and returns false.
  C10_HOST_DEVICE bool next() {
    if (++index < runs[run].count) return true;
    index = 0;
    do {
      ++run;
    } while (run < count && runs[run].count == 0);
    if (run < count) return true;
    rewind();
    return false;
  }
};

// Most axes an index-mode kernel walks, counted after adjacent unpadded axes are merged (as
// TensorIterator's 25; the CUDA kernels take the geometry by value).
constexpr int kMaxPadDims = 25;

// The geometry an index-mode kernel walks, with adjacent unpadded axes merged (contiguous layout).
// value_axis maps a merged axis back to the caller's axis for the constant values.
struct PadGeometry {
  int ndim = 0;
  IndexPadMode mode = IndexPadMode::kConstant;
  int64_t in_size[kMaxPadDims];
  int64_t out_size[kMaxPadDims];
  int64_t before[kMaxPadDims];
  int value_axis[kMaxPadDims];
  // The axes are the caller's in another order (the input's memory layout): value_axis does not
  // ascend, so a constant's winning axis is not simply the last one in padding.
  bool permuted = false;
};

// ---- Kernel bodies (one thread per element on the GPU; emulated on the host in tests/cpp) ----

// ---- pad_index as a row kernel: output rows along the last (merged) axis ----
//
// Output element by element: the source element along every axis, copied as raw bytes, with the
// outer axes decoded once per row. An element in padding along several axes (constant mode) takes
// the constant of the one with the largest caller axis (value_axis; numpy's winner: the first
// met from the last axis, unless the layout is permuted).

// An output row's outer axes: where its source row starts in the input, or kNoSource when the row
// lies in the outer axes' padding; then (constant mode) the winning outer axis and side, or -1.
struct PadRowSource {
  int64_t in_row = 0;
  int value_axis = -1;
  int value_side = 0;
};

template <typename index_t>
C10_HOST_DEVICE PadRowSource pad_row_source(const PadGeometry& g, index_t row) {
  PadRowSource s;
  index_t rest = row;
  int64_t in_stride = g.in_size[g.ndim - 1];
  for (int d = g.ndim - 2; d >= 0; --d) {
    const index_t out_size = static_cast<index_t>(g.out_size[d]);
    const int64_t i = static_cast<int64_t>(rest % out_size);
    rest /= out_size;
    const int64_t n = g.in_size[d];
    const int64_t source = n == 0 ? kNoSource : pad_source_index(g.mode, i, n, g.before[d]);
    if (source == kNoSource) {
      s.in_row = kNoSource;
      if (g.mode != IndexPadMode::kConstant) break;  // an index mode over an empty axis
      if (g.value_axis[d] > s.value_axis) {
        s.value_axis = g.value_axis[d];
        s.value_side = i < g.before[d] ? 0 : 1;
      }
      continue;
    }
    if (s.in_row != kNoSource) s.in_row += source * in_stride;
    in_stride *= n;
  }
  return s;
}

// Output element `column` of a row whose outer axes are `s`: false when nothing is written (an
// index mode over an empty axis: the output is empty too).
template <typename Element>
C10_HOST_DEVICE bool pad_row_element(const PadGeometry& g, const PadRowSource& s, const Element* in,
                                     const Element* values, int64_t column, Element* value) {
  const int last = g.ndim - 1;
  const int64_t n = g.in_size[last];
  const int64_t source = n == 0 ? kNoSource : pad_source_index(g.mode, column, n, g.before[last]);
  if (source != kNoSource && s.in_row != kNoSource) {
    *value = in[s.in_row + source];
    return true;
  }
  if (g.mode != IndexPadMode::kConstant) return false;
  int axis = s.value_axis, side = s.value_side;
  if (source == kNoSource && g.value_axis[last] > axis) {
    axis = g.value_axis[last];
    side = column < g.before[last] ? 0 : 1;
  }
  *value = values[2 * axis + side];
  return true;
}

// pad_index over every output row (rows x g.out_size[last] elements), grid-stride: lanes in groups
// of the row length rounded up to a power of two (at most a warp) take a row each, decode its outer
// axes once (index_t: uint32_t when every index fits) and write its elements kRowsInFlight at a
// time (all loads issued before the first store).
template <typename Block, typename Element, typename index_t>
C10_HOST_DEVICE void pad_gather_rows(const Block& block, const PadGeometry& g, const Element* in,
                                     Element* out, const Element* values, index_t rows) {
  const int64_t row_length = g.out_size[g.ndim - 1];
  const RowLanes lanes(block, row_length);
  const int64_t lane_step = int64_t{1} << lanes.group_bits;
  const int64_t first_row = block.block() * lanes.rows_per_pass + lanes.row_in_pass;
  for (int64_t row = first_row; row < static_cast<int64_t>(rows);
       row += block.blocks() * lanes.rows_per_pass) {
    const PadRowSource s = pad_row_source(g, static_cast<index_t>(row));
    Element* out_row = out + row * row_length;
    for (int64_t first = lanes.column; first < row_length; first += kRowsInFlight * lane_step) {
      Element held[kRowsInFlight];
      bool written[kRowsInFlight];
      for (int k = 0; k < kRowsInFlight; ++k) {
        const int64_t column = first + k * lane_step;
        written[k] = column < row_length && pad_row_element(g, s, in, values, column, &held[k]);
      }
      for (int k = 0; k < kRowsInFlight; ++k) {
        if (written[k]) out_row[first + k * lane_step] = held[k];
      }
    }
  }
}

// The preimage of j along one axis, in ascending positions (its progressions are ascending; at
// most two, merged), skipping `skip`.
struct AscendingPreimage {
  Progression runs[2];
  int count;
  int64_t taken[2];

  C10_HOST_DEVICE void start(IndexPadMode mode, int64_t j, int64_t n, int64_t before,
                             int64_t out_len) {
    count = pad_preimages(mode, j, n, before, out_len, runs);
    rewind();
  }
  C10_HOST_DEVICE void rewind() { taken[0] = taken[1] = 0; }
  // The next position (ascending) other than `skip`; false after the last.
  C10_HOST_DEVICE bool next(int64_t skip, int64_t* position) {
    while (true) {
      int best = -1;
      int64_t best_position = 0;
      for (int r = 0; r < count; ++r) {
        if (taken[r] == runs[r].count) continue;
        const int64_t p = runs[r].first + taken[r] * runs[r].step;
        if (best < 0 || p < best_position) {
          best = r;
          best_position = p;
        }
      }
      if (best < 0) return false;
      ++taken[best];
      if (best_position == skip) continue;
      *position = best_position;
      return true;
    }
  }
};

// The per-thread arrays of pad_fold_rows hold kAxes axes (the geometry's ndim at most): the
// launcher picks the smallest of these that fits, so a thread of a common (merged) 1-4-axis pad
// keeps ~0.3 KB of state instead of the 1.8 KB that 25 axes would pin in local memory.
constexpr int kFoldAxesSmall = 4;
constexpr int kFoldAxesMedium = 8;
C10_HOST_DEVICE inline int fold_axes_for(int ndim) {
  return ndim <= kFoldAxesSmall    ? kFoldAxesSmall
         : ndim <= kFoldAxesMedium ? kFoldAxesMedium
                                   : kMaxPadDims;
}
// f(std::integral_constant<int, kAxes>{}) with kAxes = fold_axes_for(ndim) (host only): the one
// dispatch of the launcher and of its emulation.
template <typename F>
decltype(auto) with_fold_axes(int ndim, F&& f) {
  switch (fold_axes_for(ndim)) {
    case kFoldAxesSmall:
      return f(std::integral_constant<int, kFoldAxesSmall>{});
    case kFoldAxesMedium:
      return f(std::integral_constant<int, kFoldAxesMedium>{});
    default:
      return f(std::integral_constant<int, kMaxPadDims>{});
  }
}

// pad_index_backward (index modes other than constant), every input element: the sum of the
// gradient over its preimage, in the CPU kernel's order (fold_rows in pad_cpu.cpp, which adds whole
// rows): the outer axes' preimage positions lexicographically (AxisPreimage order, the last outer
// axis fastest), and for each, along the last axis the element's own position first, then the
// padding positions left to right; the first term starts the sum (no 0 + x: -0.0 stays -0.0).
//
// A group of lanes (RowLanes over the row length) takes an input row (grid-stride over `rows` =
// grad_in.numel() / g.in_size[last]), decodes its outer axes once, and each lane sums
// kRowsInFlight elements of it at a time: the outer preimage is walked once for them, each
// element's own sum still in the order above (so the CPU's bits). g.ndim <= kAxes (fold_axes_for).
template <typename Block, typename scalar_t, typename acc_t, int kAxes = kMaxPadDims>
C10_HOST_DEVICE void pad_fold_rows(const Block& block, const PadGeometry& g, const scalar_t* grad,
                                   scalar_t* grad_in, int64_t rows) {
  static_assert(kAxes >= 1 && kAxes <= kMaxPadDims);
  const int last = g.ndim - 1;
  const int64_t row_length = g.in_size[last];
  const RowLanes lanes(block, row_length);
  const int64_t lane_step = int64_t{1} << lanes.group_bits;
  for (int64_t row = block.block() * lanes.rows_per_pass + lanes.row_in_pass; row < rows;
       row += block.blocks() * lanes.rows_per_pass) {
    AxisPreimage axes[kAxes];
    int64_t out_stride[kAxes];
    int64_t rest = row, stride = g.out_size[last];
    for (int d = last - 1; d >= 0; --d) {
      axes[d].start(g.mode, rest % g.in_size[d], g.in_size[d], g.before[d], g.out_size[d]);
      rest /= g.in_size[d];
      out_stride[d] = stride;
      stride *= g.out_size[d];
    }
    for (int64_t first = lanes.column; first < row_length; first += kRowsInFlight * lane_step) {
      AscendingPreimage along_row[kRowsInFlight];
      acc_t sums[kRowsInFlight];
      for (int k = 0; k < kRowsInFlight; ++k) {
        const int64_t j = first + k * lane_step;
        if (j < row_length) {
          along_row[k].start(g.mode, j, row_length, g.before[last], g.out_size[last]);
        }
      }
      for (bool first_position = true;; first_position = false) {
        int64_t offset = 0;
        for (int d = 0; d < last; ++d) offset += axes[d].position() * out_stride[d];
        // The lanes' own terms first, all in flight (their padding terms, on border columns only,
        // follow in each element's order).
        acc_t own_terms[kRowsInFlight];
        for (int k = 0; k < kRowsInFlight; ++k) {
          const int64_t j = first + k * lane_step;
          if (j < row_length) own_terms[k] = static_cast<acc_t>(grad[offset + g.before[last] + j]);
        }
        for (int k = 0; k < kRowsInFlight; ++k) {
          const int64_t j = first + k * lane_step;
          if (j >= row_length) break;
          const int64_t own = g.before[last] + j;
          sums[k] = first_position ? own_terms[k] : sums[k] + own_terms[k];
          along_row[k].rewind();
          for (int64_t position = 0; along_row[k].next(own, &position);) {
            sums[k] += static_cast<acc_t>(grad[offset + position]);
          }
        }
        int d = last - 1;
        while (d >= 0 && !axes[d].next()) --d;  // the odometer; every axis rewinds at the end
        if (d < 0) break;
      }
      for (int k = 0; k < kRowsInFlight; ++k) {
        const int64_t j = first + k * lane_step;
        if (j < row_length) grad_in[row * row_length + j] = static_cast<scalar_t>(sums[k]);
      }
    }
  }
}

}  // namespace torch_ragged
