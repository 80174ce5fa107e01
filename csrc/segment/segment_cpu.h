#pragma once

// CPU building blocks of the segment core, shared by the CPU kernels of every family.

#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace torch_ragged::cpu {

// Exclusive scan of counts (all >= 0, else ValueError naming op and arg), total appended.
std::vector<int64_t> offsets_from_counts(std::string_view op, std::string_view arg,
                                         const at::Tensor& counts);

// first_idx checked against data (B + 1 non-decreasing entries from 0 to data.size(0)), read on
// the host (a device-to-host copy when it lives on the GPU).
std::vector<int64_t> checked_segment_bounds(std::string_view op, const at::Tensor& data,
                                            const at::Tensor& first_idx);

// Writes `count` copies of a `pattern_bytes`-byte pattern to dst.
void fill_pattern(char* dst, int64_t count, const char* pattern, int64_t pattern_bytes);

}  // namespace torch_ragged::cpu
