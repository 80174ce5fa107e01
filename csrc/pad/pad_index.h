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

namespace torch_ragged {

enum class IndexPadMode : int8_t { kConstant, kEmpty, kEdge, kReflect, kSymmetric, kWrap };

// Source index of an output position that holds a constant (or, for kEmpty, nothing).
constexpr int64_t kNoSource = -1;

C10_HOST_DEVICE inline int64_t floor_mod(int64_t a, int64_t m) {
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

}  // namespace torch_ragged
