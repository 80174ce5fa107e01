#include "common/fill.h"

#include <algorithm>
#include <cstring>

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
