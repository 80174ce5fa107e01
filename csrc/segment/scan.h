#pragma once

// Segmented scans (segment_cumsum / cumprod / cummax / cummin / logcumsumexp): the checked input
// and the plan of levels (segment_index.h, "Segmented scans") shared by the CPU and CUDA kernels.

#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "segment/segment_args.h"
#include "segment/segment_index.h"

namespace torch_ragged {

// The levels of one scan, on the host: level 0 is the rows in scan order (reversed for a reverse
// scan), level l + 1 the chunks of level l cut into runs where a segment starts; the last level is
// one chunk.
struct ScanPlan {
  struct Level {
    int64_t items = 0;
    std::vector<int64_t> first_idx, chunk_first_segment, chunk_last_segment;
    int64_t num_segments() const { return static_cast<int64_t>(first_idx.size()) - 1; }
    int64_t chunks(int chunk_bits) const {
      return (items + (int64_t{1} << chunk_bits) - 1) >> chunk_bits;
    }
  };
  int chunk_bits = 0;
  std::vector<Level> levels;

  // Level `l` with pointers into this plan (host memory).
  ScanLevel view(int l) const;
  // The same with every pointer moved into `base`, where the plan's int64 arrays were copied in
  // packed() order (a device copy of the plan).
  ScanLevel view(int l, const int64_t* base) const;
  // Every level's first_idx, chunk_first_segment and chunk_last_segment, one after the other.
  std::vector<int64_t> packed() const;
};

// The plan is header-only (host code): the emulation tests in tests/cpp build it too.

namespace scan_detail {

// Each chunk's first and last segments: one search per task of chunks, then a walk forward (a
// search per chunk cost ~2 ms of a 100k-segment scan).
inline void fill_chunk_segments(ScanPlan::Level& level, int chunk_bits) {
  const int64_t chunks = level.chunks(chunk_bits);
  level.chunk_first_segment.resize(chunks);
  level.chunk_last_segment.resize(chunks);
  const int64_t* first_idx = level.first_idx.data();
  at::parallel_for(0, chunks, 1024, [&](int64_t begin, int64_t end) {
    int64_t segment = segment_of_row(first_idx, level.num_segments(), begin << chunk_bits);
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first_row = chunk << chunk_bits;
      const int64_t last_row = std::min(first_row + (int64_t{1} << chunk_bits), level.items) - 1;
      while (first_idx[segment + 1] <= first_row) ++segment;  // empty segments hold no row
      level.chunk_first_segment[chunk] = segment;
      while (first_idx[segment + 1] <= last_row) ++segment;
      level.chunk_last_segment[chunk] = segment;
    }
  });
}

// The level above: one item per chunk; a run starts at each chunk whose last segment starts in it
// (chunk 0 always: its last segment starts at row >= 0).
inline ScanPlan::Level level_above(const ScanPlan::Level& level, int chunk_bits) {
  ScanPlan::Level above;
  above.items = level.chunks(chunk_bits);
  for (int64_t chunk = 0; chunk < above.items; ++chunk) {
    if (level.first_idx[level.chunk_last_segment[chunk]] >= chunk << chunk_bits) {
      above.first_idx.push_back(chunk);
    }
  }
  above.first_idx.push_back(above.items);
  return above;
}

}  // namespace scan_detail

inline ScanLevel ScanPlan::view(int l) const {
  const Level& level = levels[l];
  return ScanLevel{
      level.first_idx.data(),           level.num_segments(),           level.items, chunk_bits,
      level.chunk_first_segment.data(), level.chunk_last_segment.data()};
}

inline ScanLevel ScanPlan::view(int l, const int64_t* base) const {
  for (int k = 0; k < l; ++k) {
    base += levels[k].first_idx.size() + 2 * levels[k].chunk_first_segment.size();
  }
  const Level& level = levels[l];
  const int64_t chunks = static_cast<int64_t>(level.chunk_first_segment.size());
  const int64_t* first_idx = base;
  const int64_t* first_segment = first_idx + level.first_idx.size();
  return ScanLevel{first_idx,  level.num_segments(), level.items,
                   chunk_bits, first_segment,        first_segment + chunks};
}

inline std::vector<int64_t> ScanPlan::packed() const {
  std::vector<int64_t> all;
  for (const Level& level : levels) {
    for (const auto* part :
         {&level.first_idx, &level.chunk_first_segment, &level.chunk_last_segment}) {
      all.insert(all.end(), part->begin(), part->end());
    }
  }
  return all;
}

// offsets: first_idx read on the host and checked (rows = offsets.back()); reverse: the scan runs
// from each segment's last row to its first.
inline ScanPlan scan_plan(const std::vector<int64_t>& offsets, int64_t width, bool reverse) {
  ScanPlan plan;
  plan.chunk_bits = chunk_bits(width);
  ScanPlan::Level level;
  level.items = offsets.back();
  level.first_idx = offsets;
  if (reverse) {  // segment b of the reversed rows is segment B - 1 - b backwards
    const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
    for (int64_t b = 0; b <= segments; ++b) {
      level.first_idx[b] = level.items - offsets[segments - b];
    }
  }
  while (true) {
    scan_detail::fill_chunk_segments(level, plan.chunk_bits);
    const bool top = level.items <= int64_t{1} << plan.chunk_bits;
    ScanPlan::Level above =
        top ? ScanPlan::Level{} : scan_detail::level_above(level, plan.chunk_bits);
    plan.levels.push_back(std::move(level));
    if (top) break;
    level = std::move(above);
  }
  return plan;
}

// body(scalar_t{}) for the dtypes a value scan's kernels are built for: cumsum / cumprod take int64
// (integers are promoted first), floating and complex; logcumsumexp (kFloatingOnly) floating.
template <bool kFloatingOnly, typename Body>
void dispatch_value_scan(at::ScalarType type, const Body& body) {
  if constexpr (kFloatingOnly) {
    AT_DISPATCH_V2(type, "segment_scan", AT_WRAP([&] { body(scalar_t{}); }),
                   AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  } else {
    AT_DISPATCH_V2(type, "segment_scan", AT_WRAP([&] { body(scalar_t{}); }),
                   AT_EXPAND(AT_FLOATING_TYPES), AT_EXPAND(AT_COMPLEX_TYPES), at::kLong, at::kHalf,
                   at::kBFloat16);
  }
}

// A scan's checked input: data contiguous (integers and bool as int64 where `promote_integers`,
// as torch.cumsum / cumprod), its row width, and first_idx read on the host (the plan's offsets;
// the CPU's cummax / cummin walk them directly).
struct ScanInput {
  at::Tensor data;
  int64_t width = 0;
  std::vector<int64_t> offsets;
};
ScanInput scan_input(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                     SegmentDtypes dtypes, bool promote_integers);

}  // namespace torch_ragged
