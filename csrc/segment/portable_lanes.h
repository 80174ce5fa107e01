#pragma once

// exp of many values on the CPU: portable_exp's operations, lane by lane.
//
// The GPU's exp (portable_math.h), written with GCC / clang vector extensions: the same IEEE
// operations in the same order on every lane, so the same bits as the scalar function, at the
// speed of torch's own vectorised exp (0.9 ns per float in cache here, as Sleef's).

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/cpu_clones.h"
#include "segment/portable_math.h"

namespace torch_ragged {

template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float Values __attribute__((vector_size(32)));
  typedef int32_t Ints __attribute__((vector_size(32)));
};
template <>
struct Lanes<double> {
  typedef double Values __attribute__((vector_size(32)));
  typedef int64_t Ints __attribute__((vector_size(32)));
};

// portable_detail::horner, lane by lane. Always inlined: the callers are compiled once per target
// (TORCH_RAGGED_CPU_CLONES), and a call to an out-of-line helper taking 32-byte vectors would cross
// targets whose ABIs pass them differently (wrong values at -O1, as in the sanitizer build, where
// nothing else inlines it).
template <typename T, typename Table, int k, int kLast, typename V>
__attribute__((always_inline)) inline V horner_lanes(V x) {
  if constexpr (k == kLast) {
    return V{} + static_cast<T>(Table::kCoefficient[k]);
  } else {
    return static_cast<T>(Table::kCoefficient[k]) + x * horner_lanes<T, Table, k + 1, kLast>(x);
  }
}

// values[0, count) = portable_exp(values[...]) in place.
template <typename T>
TORCH_RAGGED_CPU_CLONES void exp_values(T* values, int64_t count) {
  using V = typename Lanes<T>::Values;
  using I = typename Lanes<T>::Ints;
  using Bits = portable_detail::Bits<T>;
  using Ln2 = portable_detail::Ln2<T>;
  constexpr int64_t kLanes = sizeof(V) / sizeof(T);
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    V x;
    std::memcpy(&x, values + i, sizeof(V));
    V clamped = x > ExpRange<T>::kLow ? x : ExpRange<T>::kLow;  // as portable_exp, lane by lane
    clamped = clamped < ExpRange<T>::kHigh ? clamped : ExpRange<T>::kHigh;
    const V y = clamped * ExpRange<T>::kLog2e + static_cast<T>(0.5);
    const I truncated = __builtin_convertvector(y, I);
    const I k = truncated + (y < __builtin_convertvector(truncated, V));  // true lanes are -1
    const V n = __builtin_convertvector(k, V);
    const V r = (clamped - n * Ln2::kHi) - n * Ln2::kLo;
    const I half = k / 2;
    const V first = (V)((half + Bits::kBias) << Bits::kMantissa);
    const V second = (V)((k - half + Bits::kBias) << Bits::kMantissa);
    constexpr int kDegree = std::is_same_v<T, float> ? 7 : 13;
    V result =
        (horner_lanes<T, portable_detail::InverseFactorials, 0, kDegree>(r) * first) * second;
    result = x != x ? x : result;
    std::memcpy(values + i, &result, sizeof(V));
  }
  for (; i < count; ++i) values[i] = portable_exp(values[i]);
}

}  // namespace torch_ragged
