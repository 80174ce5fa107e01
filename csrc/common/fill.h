#pragma once

// Filling memory with a repeated element (any dtype, as raw bytes).

#include <cstdint>

namespace torch_ragged::cpu {

// Writes `count` copies of a `pattern_bytes`-byte pattern to dst.
void fill_pattern(char* dst, int64_t count, const char* pattern, int64_t pattern_bytes);

}  // namespace torch_ragged::cpu
