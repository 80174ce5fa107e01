#pragma once

// exp and log of many values on the CPU: portable_math.h's operations, lane by lane.
//
// The GPU's exp and log (portable_math.h), written with GCC / clang vector extensions: the same
// IEEE operations in the same order on every lane, so the same bits as the scalar functions; exp
// at the speed of torch's own vectorised exp (0.9 ns per float in cache here, as Sleef's).

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

// values[0, count) = portable_log(values[...]) in place: its steps, in its order, lane by lane
// (the scalar function does not vectorise by itself: its selects compile to branches).
template <typename T>
TORCH_RAGGED_CPU_CLONES void log_values(T* values, int64_t count) {
  using V = typename Lanes<T>::Values;
  using I = typename Lanes<T>::Ints;
  using Bits = portable_detail::Bits<T>;
  using Int = typename Bits::Int;
  using Ln2 = portable_detail::Ln2<T>;
  constexpr int64_t kLanes = sizeof(V) / sizeof(T);
  constexpr T kInf = std::numeric_limits<T>::infinity();
  constexpr T kSqrtHalf = T(0x1.6a09e667f3bcdp-1);
  constexpr int kShift = Bits::kMantissa + 1;
  constexpr Int kExponentMask = (Int(1) << (sizeof(T) * 8 - 1 - Bits::kMantissa)) - 1;
  constexpr Int kMantissaMask = (Int(1) << Bits::kMantissa) - 1;
  constexpr int kDegree = std::is_same_v<T, float> ? 3 : 9;
  const T scale = portable_detail::power_of_two<T>(kShift);
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    V x;
    std::memcpy(&x, values + i, sizeof(V));
    const I special = ~(x > T(0)) | (x == kInf);  // 0, < 0, NaN, inf (true lanes are -1)
    const I subnormal = x < std::numeric_limits<T>::min();
    const V normal = special ? V{} + T(1) : subnormal ? x * scale : x;
    const I bits = (I)normal;
    I exponent = ((bits >> Bits::kMantissa) & kExponentMask) - Bits::kBias;
    V m = (V)((bits & kMantissaMask) | (static_cast<Int>(Bits::kBias) << Bits::kMantissa));
    const I high = m > T(2) * kSqrtHalf;
    m = high ? m * T(0.5) : m;
    exponent = exponent - high - (subnormal & kShift);  // +1 if high, -kShift if subnormal
    const V e = __builtin_convertvector(exponent, V);
    const V f = m - T(1);  // portable_detail::log_near_one
    const V s = f / (T(2) + f);
    const V z = s * s;
    const V r = z * horner_lanes<T, portable_detail::TwoOverOdd, 0, kDegree>(z);
    const V half_f_squared = T(0.5) * (f * f);
    const V correction = half_f_squared - s * (half_f_squared + r);
    const V result = e * Ln2::kHi - ((correction - e * Ln2::kLo) - f);
    const V special_result = x == T(0)   ? V{} - kInf
                             : x == kInf ? x
                                         : V{} + std::numeric_limits<T>::quiet_NaN();
    const V out = special ? special_result : result;
    std::memcpy(values + i, &out, sizeof(V));
  }
  for (; i < count; ++i) values[i] = portable_log(values[i]);
}

}  // namespace torch_ragged
