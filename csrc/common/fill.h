#pragma once

// Filling memory with a repeated element (any dtype, as raw bytes).

#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace torch_ragged::cpu {

// Writes `count` copies of a `pattern_bytes`-byte pattern to dst.
void fill_pattern(char* dst, int64_t count, const char* pattern, int64_t pattern_bytes);

}  // namespace torch_ragged::cpu

namespace torch_ragged {

// A fill / padding value must be representable in `dtype`: an integer dtype takes integral values
// in its range (no wrapping: -1 into uint8 is not 255), bool takes 0 / 1, a floating dtype any NaN
// / inf or a finite value within its range (2^62 into half is not inf). ValueError naming op and
// arg.
void check_fill_value(std::string_view op, std::string_view arg, const at::Scalar& value,
                      at::ScalarType dtype);

// The value converted to `dtype` as raw bytes, after check_fill_value.
std::vector<char> fill_value_bytes(std::string_view op, std::string_view arg,
                                   const at::Scalar& value, at::ScalarType dtype);

}  // namespace torch_ragged
