// CPU kernels of the segment core.

#include "segment/segment_cpu.h"

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>

#include "common/checks.h"

namespace torch_ragged {
namespace cpu {

std::vector<int64_t> offsets_from_counts(std::string_view op, std::string_view arg,
                                         const at::Tensor& counts) {
  const at::Tensor host = index_tensor_on_host(op, arg, counts, 1);
  const int64_t* data = host.const_data_ptr<int64_t>();
  std::vector<int64_t> offsets(host.numel() + 1, 0);
  for (int64_t i = 0; i < host.numel(); ++i) {
    TORCH_CHECK_VALUE(data[i] >= 0, "torch_ragged.", op, ": ", arg, " must be non-negative, got ",
                      data[i], " at index ", i);
    offsets[i + 1] = offsets[i] + data[i];
  }
  return offsets;
}

template <typename Word>
static void fill_words(char* dst, int64_t count, const char* pattern) {
  Word value;
  std::memcpy(&value, pattern, sizeof(Word));
  std::fill_n(reinterpret_cast<Word*>(dst), count, value);
}

std::vector<int64_t> checked_segment_bounds(std::string_view op, const at::Tensor& data,
                                            const at::Tensor& first_idx) {
  TORCH_CHECK_VALUE(data.dim() >= 1, "torch_ragged.", op, ": data must have at least 1 dim, ",
                    "got a 0-D tensor");
  const at::Tensor idx_host = index_tensor_on_host(op, "first_idx", first_idx, 1);
  TORCH_CHECK_VALUE(idx_host.numel() >= 1, "torch_ragged.", op, ": first_idx needs at least ",
                    "1 entry (num_segments + 1), got 0");
  const int64_t* idx = idx_host.const_data_ptr<int64_t>();
  const int64_t segments = idx_host.numel() - 1;
  TORCH_CHECK_VALUE(idx[0] == 0 && idx[segments] == data.size(0), "torch_ragged.", op,
                    ": first_idx must run from 0 to data.size(0) = ", data.size(0), ", got ",
                    idx[0], " .. ", idx[segments]);
  for (int64_t b = 0; b < segments; ++b) {
    TORCH_CHECK_VALUE(idx[b] <= idx[b + 1], "torch_ragged.", op, ": first_idx must be ",
                      "non-decreasing, got first_idx[", b, "] = ", idx[b], " > first_idx[", b + 1,
                      "] = ", idx[b + 1]);
  }
  return std::vector<int64_t>(idx, idx + segments + 1);
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

}  // namespace cpu

namespace {

at::Tensor get_first_idx_cpu(const at::Tensor& numel_per_tensor) {
  const std::vector<int64_t> offsets =
      cpu::offsets_from_counts("get_first_idx", "numel_per_tensor", numel_per_tensor);
  return at::tensor(offsets, at::kLong);
}

// Sums each segment's rows in order (deterministic), accumulating in the op-math type.
at::Tensor segment_sum_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  const std::vector<int64_t> bounds = cpu::checked_segment_bounds("segment_sum", data, first_idx);
  const int64_t* idx = bounds.data();
  const int64_t segments = static_cast<int64_t>(bounds.size()) - 1;
  std::vector<int64_t> out_sizes{segments};
  out_sizes.insert(out_sizes.end(), data.sizes().begin() + 1, data.sizes().end());
  at::Tensor out = at::empty(out_sizes, data.options());
  const at::Tensor src = data.contiguous();
  const int64_t width = c10::multiply_integers(out_sizes.begin() + 1, out_sizes.end());
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND2(
      at::kHalf, at::kBFloat16, data.scalar_type(), "segment_sum_cpu", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* in = src.const_data_ptr<scalar_t>();
        scalar_t* o = out.mutable_data_ptr<scalar_t>();
        const int64_t elems_per_segment = src.numel() / std::max<int64_t>(1, segments);
        const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, elems_per_segment));
        at::parallel_for(0, segments, grain, [&](int64_t begin, int64_t end) {
          std::vector<acc_t> acc(width);
          for (int64_t b = begin; b < end; ++b) {
            std::fill(acc.begin(), acc.end(), acc_t(0));
            for (int64_t r = idx[b]; r < idx[b + 1]; ++r) {
              const scalar_t* row = in + r * width;
              for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<acc_t>(row[c]);
            }
            for (int64_t c = 0; c < width; ++c) o[b * width + c] = static_cast<scalar_t>(acc[c]);
          }
        });
      });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("get_first_idx", &get_first_idx_cpu);
  m.impl("segment_sum", &segment_sum_cpu);
}

}  // namespace torch_ragged
