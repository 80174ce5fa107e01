// portable_math.h's exp and log (the ones the CPU and GPU kernels share, for the same bits on both)
// against the C library's, in ulps, over the ranges softmax uses and beyond; special values; and
// portable_lanes.h's vectorised exp_values / log_values against them, bit for bit.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "segment/portable_lanes.h"
#include "segment/portable_math.h"

namespace torch_ragged {
namespace {

// |a - b| in units of b's last place (b finite and non-zero), 0 for equal values or two NaNs.
template <typename T>
double ulps(T a, T b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  const T step = std::nextafter(b, std::numeric_limits<T>::infinity()) - b;
  return std::fabs(static_cast<double>(a) - static_cast<double>(b)) / static_cast<double>(step);
}

template <typename T>
void expect_close_to_libm(double low, double high, double max_exp_ulps, double max_log_ulps) {
  std::mt19937_64 generator(7);
  std::uniform_real_distribution<double> uniform(low, high);
  double worst_exp = 0, worst_log = 0;
  for (int i = 0; i < 200'000; ++i) {
    const T x = static_cast<T>(uniform(generator));
    const T expected = static_cast<T>(std::exp(static_cast<long double>(x)));
    if (std::fpclassify(expected) == FP_NORMAL) {
      worst_exp = std::max(worst_exp, ulps(portable_exp(x), expected));
    }
    const T y = std::fabs(x) + std::numeric_limits<T>::min();  // positive, normal
    worst_log = std::max(
        worst_log, ulps(portable_log(y), static_cast<T>(std::log(static_cast<long double>(y)))));
  }
  EXPECT_LE(worst_exp, max_exp_ulps);
  EXPECT_LE(worst_log, max_log_ulps);
}

TEST(PortableMath, FloatWithinAFewUlpsOfLibm) {
  expect_close_to_libm<float>(-100, 80, 1, 2);
  expect_close_to_libm<float>(-1, 1, 1, 2);
}

TEST(PortableMath, DoubleWithinAFewUlpsOfLibm) {
  expect_close_to_libm<double>(-700, 700, 1, 2);
  expect_close_to_libm<double>(-1, 1, 1, 2);
}

template <typename T>
void expect_special_values() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  EXPECT_EQ(portable_exp(-inf), T(0));
  EXPECT_EQ(portable_exp(T(0)), T(1));
  EXPECT_EQ(portable_exp(inf), inf);
  EXPECT_EQ(portable_exp(T(1000)), inf);
  EXPECT_TRUE(std::isnan(portable_exp(nan)));
  EXPECT_EQ(portable_log(T(1)), T(0));
  EXPECT_EQ(portable_log(T(0)), -inf);
  EXPECT_EQ(portable_log(inf), inf);
  EXPECT_TRUE(std::isnan(portable_log(T(-1))));
  EXPECT_TRUE(std::isnan(portable_log(nan)));
  // Subnormal results and arguments, exactly as the C library rounds them here.
  const T tiny = std::numeric_limits<T>::denorm_min() * 7;
  EXPECT_LE(ulps(portable_log(tiny), std::log(tiny)), 1);
  const T deep = std::is_same_v<T, float> ? T(-100) : T(-740);
  EXPECT_EQ(portable_exp(deep), std::exp(deep));
}

TEST(PortableMath, SpecialValues) {
  expect_special_values<float>();
  expect_special_values<double>();
}

// Same bits as the scalar functions (NaN payloads aside: any NaN for a NaN), special values,
// subnormals, both signs and magnitudes from 1e-40 to 1e38 spread over the lanes and the tail.
template <typename T>
void expect_lanes_match_scalars() {
  using Limits = std::numeric_limits<T>;
  std::vector<T> inputs{T(0),
                        -T(0),
                        T(1),
                        T(-1),
                        Limits::min(),
                        Limits::denorm_min(),
                        Limits::min() / T(3),
                        Limits::max(),
                        Limits::infinity(),
                        -Limits::infinity(),
                        Limits::quiet_NaN(),
                        T(0.7071),
                        T(1.4142),
                        T(2),
                        T(0.5),
                        T(-104),
                        T(89)};
  std::mt19937_64 generator(11);
  std::uniform_real_distribution<double> exponent(-40, 38), sign(-1, 1);
  for (int i = 0; i < 100'003; ++i) {  // a count that leaves a scalar tail
    inputs.push_back(
        static_cast<T>((sign(generator) < 0 ? -1 : 1) * std::pow(10.0, exponent(generator))));
  }
  std::vector<T> exps = inputs, logs = inputs;
  exp_values(exps.data(), static_cast<int64_t>(exps.size()));
  log_values(logs.data(), static_cast<int64_t>(logs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const T e = portable_exp(inputs[i]), l = portable_log(inputs[i]);
    ASSERT_TRUE(std::memcmp(&logs[i], &l, sizeof(T)) == 0 || (std::isnan(l) && std::isnan(logs[i])))
        << "log(" << inputs[i] << "): " << logs[i] << " vs " << l;
    ASSERT_TRUE(std::memcmp(&exps[i], &e, sizeof(T)) == 0 || (std::isnan(e) && std::isnan(exps[i])))
        << "exp(" << inputs[i] << "): " << exps[i] << " vs " << e;
  }
}

TEST(PortableMath, LanesMatchTheScalarFunctionsBitForBit) {
  expect_lanes_match_scalars<float>();
  expect_lanes_match_scalars<double>();
}

}  // namespace
}  // namespace torch_ragged
