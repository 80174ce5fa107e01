#pragma once

// Byte-moving kernels (gathers and scatters that never do arithmetic) are instantiated per element
// *size*, not per dtype: one instantiation serves every dtype of that size (bool .. complex128).

#include <c10/util/Exception.h>

#include <cstdint>
#include <string_view>

namespace torch_ragged {

struct alignas(16) Bytes16 {
  uint64_t lo, hi;
};

// Calls f(Element{}) with a trivially copyable type of `element_size` bytes.
template <typename F>
void with_element_type(std::string_view op, int64_t element_size, F&& f) {
  switch (element_size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    case 16:
      return f(Bytes16{});
    default:
      TORCH_CHECK(false, "torch_ragged.", op, ": unsupported element size ", element_size);
  }
}

}  // namespace torch_ragged
