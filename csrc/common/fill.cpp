#include "common/fill.h"

#include <ATen/Dispatch_v2.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace torch_ragged::cpu {

template <typename Word>
static void fill_words(char* dst, int64_t count, const char* pattern) {
  Word value;
  std::memcpy(&value, pattern, sizeof(Word));
  std::fill_n(reinterpret_cast<Word*>(dst), count, value);
}

void fill_pattern(char* dst, int64_t count, const char* pattern, int64_t pattern_bytes) {
  switch (pattern_bytes) {
    case 1:
      std::memset(dst, *pattern, count);
      return;
    case 2:
      return fill_words<uint16_t>(dst, count, pattern);
    case 4:
      return fill_words<uint32_t>(dst, count, pattern);
    case 8:
      return fill_words<uint64_t>(dst, count, pattern);
    default:
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(dst + i * pattern_bytes, pattern, pattern_bytes);
  }
}

}  // namespace torch_ragged::cpu

namespace torch_ragged {

void check_fill_value(std::string_view op, std::string_view arg, const at::Scalar& value,
                      at::ScalarType dtype) {
  if (at::isComplexType(dtype)) return;
  if (at::isFloatingType(dtype)) {
    if (value.isComplex()) {
      TORCH_CHECK_VALUE(false, "torch_ragged.", op, ": ", arg, " ", value,
                        " is complex but the tensors are ", dtype);
    }
    const double v = value.toDouble();
    const double largest = AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, dtype, "fill_value_range",
        [] { return static_cast<double>(std::numeric_limits<scalar_t>::max()); });
    TORCH_CHECK_VALUE(!std::isfinite(v) || std::abs(v) <= largest, "torch_ragged.", op, ": ", arg,
                      " ", value, " does not fit dtype ", dtype, " (it would become inf)");
    return;
  }
  // bool and integers: an integral value within the dtype's range.
  bool integral = value.isIntegral(/*includeBool=*/true);
  if (value.isFloatingPoint()) {
    const double v = value.toDouble();
    integral = std::isfinite(v) && std::trunc(v) == v;
  }
  TORCH_CHECK_VALUE(!value.isComplex() && integral, "torch_ragged.", op, ": ", arg, " ", value,
                    " is not an integer, but the tensors are ", dtype);
  const double v = value.toDouble();  // exact for every value an int64 / uint64 dtype can hold
  double low = 0, high = 1;
  if (dtype != at::kBool) {
    AT_DISPATCH_V2(dtype, "fill_value_range", AT_WRAP([&] {
                     low = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
                     high = static_cast<double>(std::numeric_limits<scalar_t>::max());
                   }),
                   AT_EXPAND(AT_INTEGRAL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  }
  TORCH_CHECK_VALUE(v >= low && v <= high, "torch_ragged.", op, ": ", arg, " ", value,
                    " does not fit dtype ", dtype, " (range [", low, ", ", high, "])");
}

std::vector<char> fill_value_bytes(std::string_view op, std::string_view arg,
                                   const at::Scalar& value, at::ScalarType dtype) {
  check_fill_value(op, arg, value, dtype);
  const at::Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(dtype));
  const char* p = static_cast<const char*>(t.const_data_ptr());
  return std::vector<char>(p, p + t.element_size());
}

}  // namespace torch_ragged
