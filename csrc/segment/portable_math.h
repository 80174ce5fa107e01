#pragma once

// exp, log and products that give the same bits on the CPU and on a GPU, for the segment core's
// promise that softmax / log_softmax / weighted sums are bitwise identical across devices.
//
// The libraries differ: torch's CPU exp is Sleef's (1 ulp), CUDA's expf another approximation,
// and nvcc fuses `a * b + c` into one FMA (one rounding) where the CPU rounds twice. So these are
// written once, C10_HOST_DEVICE, from IEEE operations only (+, -, *, / and exact bit moves): every
// product goes through `product`, which on the device is __fmul_rn / __dmul_rn (never fused into
// an FMA) and on the host a plain multiply (the CPU builds never enable FMA: common/cpu_clones.h).
// Branches are selects, so the host loops that call them vectorise.
//
// Accuracy: exp and log within 1 ulp of the C library's on the tested ranges, held to 1 and 2 ulp
// by tests/cpp/test_portable_math.cpp.

#include <c10/macros/Macros.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace torch_ragged {

// a * b rounded once, never fused with a neighbouring addition.
template <typename T>
C10_HOST_DEVICE inline T product(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    return __fmul_rn(a, b);
  } else if constexpr (std::is_same_v<T, double>) {
    return __dmul_rn(a, b);
  } else {
    return a * b;
  }
#else
  return a * b;
#endif
}

namespace portable_detail {

template <typename T>
struct Bits;
template <>
struct Bits<float> {
  using Int = int32_t;
  static constexpr int kMantissa = 23, kBias = 127;
};
template <>
struct Bits<double> {
  using Int = int64_t;
  static constexpr int kMantissa = 52, kBias = 1023;
};

template <typename To, typename From>
C10_HOST_DEVICE inline To bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// 2^n for an integer n with kBias - 1 >= n >= 1 - kBias (a normal number).
template <typename T>
C10_HOST_DEVICE inline T power_of_two(typename Bits<T>::Int n) {
  using Int = typename Bits<T>::Int;
  return bit_cast<T>(static_cast<Int>((n + Bits<T>::kBias)) << Bits<T>::kMantissa);
}

// c[k] + x (c[k + 1] + x (... + x c[kLast])): Horner's rule unrolled at compile time (a loop here
// kept the callers' loops from vectorising).
template <typename T, typename Table, int k, int kLast>
C10_HOST_DEVICE inline T horner(T x) {
  if constexpr (k == kLast) {
    return static_cast<T>(Table::kCoefficient[k]);
  } else {
    return static_cast<T>(Table::kCoefficient[k]) + product(x, horner<T, Table, k + 1, kLast>(x));
  }
}

struct InverseFactorials {  // 1 / k!, exact hex literals
  static constexpr double kCoefficient[] = {
      0x1.0000000000000p+0,  0x1.0000000000000p+0,  0x1.0000000000000p-1,  0x1.5555555555555p-3,
      0x1.5555555555555p-5,  0x1.1111111111111p-7,  0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
      0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
      0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};
};

struct TwoOverOdd {  // 2 / (2k + 3): 2/3, 2/5, ...
  static constexpr double kCoefficient[] = {
      0x1.5555555555555p-1, 0x1.999999999999ap-2, 0x1.2492492492492p-2, 0x1.c71c71c71c71cp-3,
      0x1.745d1745d1746p-3, 0x1.3b13b13b13b14p-3, 0x1.1111111111111p-3, 0x1.e1e1e1e1e1e1ep-4,
      0x1.af286bca1af28p-4, 0x1.8618618618618p-4};
};

// exp(r) for |r| <= ln(2) / 2: the Taylor polynomial, degree 7 in float and 13 in double (the
// first dropped term is below half an ulp).
template <typename T>
C10_HOST_DEVICE inline T exp_near_zero(T r) {
  return horner < T, InverseFactorials, 0, std::is_same_v<T, float> ? 7 : 13 > (r);
}

// log(m) for m in [sqrt(1/2), sqrt(2)), as fdlibm arranges it: with f = m - 1 (exact) and
// s = f / (2 + f), log(m) = 2 atanh(s) = f - (f^2 / 2 - s (f^2 / 2 + R)), R = z (2/3 + 2 z / 5 +
// ...), z = s^2 <= 0.0295: the small correction carries the series' rounding, f stays exact.
// Returns f and that correction apart, for the caller to add the exponent's part first.
template <typename T>
struct LogParts {
  T f, correction;  // log(m) = f - correction
};

template <typename T>
C10_HOST_DEVICE inline LogParts<T> log_near_one(T m) {
  const T f = m - T(1);
  const T s = f / (T(2) + f);
  const T z = product(s, s);
  const T r = product(z, horner < T, TwoOverOdd, 0, std::is_same_v<T, float> ? 3 : 9 > (z));
  const T half_f_squared = product(T(0.5), product(f, f));
  return {f, half_f_squared - product(s, half_f_squared + r)};
}

// ln 2 = kHi + kLo, kHi with few enough bits that n * kHi is exact for every exponent n (fdlibm's).
template <typename T>
struct Ln2 {
  static constexpr T kHi = std::is_same_v<T, float> ? T(0x1.62e4p-1) : T(0x1.62e42feep-1);
  static constexpr T kLo =
      std::is_same_v<T, float> ? T(0x1.62e42fefa39efp-1 - 0x1.62e4p-1) : T(0x1.a39ef35793c76p-33);
};

}  // namespace portable_detail

// The clamp of portable_exp: below kLow the result rounds to 0, above kHigh it overflows to inf,
// both reached by the same arithmetic (no special-case branch: the CPU's vector loops compute it
// with the same operations, segment_cpu.cpp's exp_values).
template <typename T>
struct ExpRange {
  static constexpr T kLow = std::is_same_v<T, float> ? T(-104) : T(-746);
  static constexpr T kHigh = std::is_same_v<T, float> ? T(89) : T(710);
  static constexpr T kLog2e = T(0x1.71547652b82fep+0);
};

// e^x. NaN stays NaN, e^-inf = 0, overflow gives inf, deep underflow gives 0 (through subnormals).
// x is clamped into [kLow, kHigh] (NaN to kLow, then restored); n = floor(x / ln 2 + 1/2) and
// r = x - n ln 2 (in two parts, exactly); e^x = e^r 2^(n / 2) 2^(n - n / 2), the power of two in
// two normal factors, so that results in the subnormal range are rounded once.
template <typename T>
C10_HOST_DEVICE inline T portable_exp(T x) {
  using namespace portable_detail;
  using Int = typename Bits<T>::Int;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  T clamped = x > ExpRange<T>::kLow ? x : ExpRange<T>::kLow;  // NaN -> kLow
  clamped = clamped < ExpRange<T>::kHigh ? clamped : ExpRange<T>::kHigh;
  const T y = product(clamped, ExpRange<T>::kLog2e) + T(0.5);
  const Int truncated = static_cast<Int>(y);
  const Int k = truncated - (y < static_cast<T>(truncated) ? 1 : 0);  // floor(y)
  const T n = static_cast<T>(k);
  const T r = (clamped - product(n, Ln2<T>::kHi)) - product(n, Ln2<T>::kLo);
  const Int half = k / 2;
  const T scaled =
      product(product(exp_near_zero(r), power_of_two<T>(half)), power_of_two<T>(k - half));
  return x != x ? x : scaled;
}

// ln x. NaN stays NaN, ln 0 = -inf, ln of a negative number is NaN, ln inf = inf.
template <typename T>
C10_HOST_DEVICE inline T portable_log(T x) {
  using namespace portable_detail;
  using Int = typename Bits<T>::Int;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  constexpr T kSqrtHalf = T(0x1.6a09e667f3bcdp-1);
  const bool special = !(x > T(0)) | (x == std::numeric_limits<T>::infinity());  // 0, < 0, NaN, inf
  // Subnormals are scaled into the normal range first (exactly), their exponent adjusted after.
  const bool subnormal = x < std::numeric_limits<T>::min();
  constexpr int kShift = Bits<T>::kMantissa + 1;
  const T normal = special ? T(1) : subnormal ? product(x, power_of_two<T>(kShift)) : x;
  const Int bits = bit_cast<Int>(normal);
  Int exponent =
      ((bits >> Bits<T>::kMantissa) & ((Int(1) << (sizeof(T) * 8 - 1 - Bits<T>::kMantissa)) - 1)) -
      Bits<T>::kBias;
  T m = bit_cast<T>((bits & ((Int(1) << Bits<T>::kMantissa) - 1)) |
                    (static_cast<Int>(Bits<T>::kBias) << Bits<T>::kMantissa));  // in [1, 2)
  const bool high = m > T(2) * kSqrtHalf;
  m = high ? product(m, T(0.5)) : m;  // in [sqrt(1/2), sqrt(2))
  exponent += (high ? 1 : 0) - (subnormal ? kShift : 0);
  const T e = static_cast<T>(exponent);
  const LogParts<T> parts = log_near_one(m);
  const T result =
      product(e, Ln2<T>::kHi) - ((parts.correction - product(e, Ln2<T>::kLo)) - parts.f);
  const T special_result = x == T(0) ? -std::numeric_limits<T>::infinity()
                           : x == std::numeric_limits<T>::infinity()
                               ? x
                               : std::numeric_limits<T>::quiet_NaN();
  return special ? special_result : result;
}

}  // namespace torch_ragged
