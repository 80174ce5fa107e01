// The segment core's row movers and run-offset kernels (segment_index.h: move_segment_rows,
// gather_index_in_range, run_head, scatter_run_start), run on the host over their launch grids
// (block_emulator.h for the cooperative mover, grid_emulator.h for the others) against the CPU
// kernels (segment_expand, segment_ids, ragged_index_select, segment_gather_sum's range check) and
// a loop (runs of equal sorted keys).

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "block_emulator.h"
#include "common/element_type.h"
#include "grid_emulator.h"
#include "segment/segment_index.h"

namespace torch_ragged::testing {
namespace {

// Offsets of `segments` segments of 0-4 rows, with a run of `empty_run` empty segments in the
// middle (more than a block's threads: the tile's segment scan loops over them).
std::vector<int64_t> random_offsets(std::mt19937_64& rng, int64_t segments, int64_t empty_run = 0) {
  std::vector<int64_t> first_idx{0};
  for (int64_t b = 0; b < segments; ++b) {
    const bool empty = b >= segments / 2 && b < segments / 2 + empty_run;
    first_idx.push_back(first_idx.back() + (empty ? 0 : static_cast<int64_t>(rng() % 5)));
  }
  return first_idx;
}

// What the CUDA shell does (move_segment_rows_on_gpu), on the block emulator: the widest chunk
// for the row's bytes and both pointers, tiles of `threads` rows on at most `max_blocks` blocks
// (fewer blocks than tiles: the grid-stride loop runs).
template <template <typename> class Source, typename... Tables>
LaunchReport emulate_move_rows(const at::Tensor& in, at::Tensor& out,
                               const std::vector<int64_t>& first_idx, int threads,
                               int64_t max_blocks, Tables... tables) {
  const int64_t rows = out.size(0), row_bytes = out.numel() / rows * out.element_size();
  const int chunk_bytes = widest_chunk_bytes(row_bytes, {in.const_data_ptr(), out.data_ptr()});
  LaunchReport report;
  with_element_type("test", chunk_bytes, [&](auto chunk) {
    using Chunk = decltype(chunk);
    const int64_t blocks = std::min((rows + threads - 1) / threads, max_blocks);
    const int64_t chunks = row_bytes / chunk_bytes;
    const Source<Chunk> source{static_cast<const Chunk*>(in.const_data_ptr()), chunks, tables...};
    report = emulate_cooperative_launch(blocks, threads, [&](const EmulatedBlock& block) {
      move_segment_rows(block, block.shared<int64_t>(0, "row_segment", threads),
                        block.shared<int64_t>(1, "warp_max", threads / kWarpSize), first_idx.data(),
                        static_cast<int64_t>(first_idx.size()) - 1, rows,
                        static_cast<Chunk*>(out.mutable_data_ptr()), chunks, source);
    });
  });
  return report;
}

// Feature shapes and dtypes giving every chunk width (16, 8, 4, 2, 1 bytes) and the lane groups
// of narrow (1 chunk) to wide (more chunks than a warp has lanes) rows.
const std::vector<std::pair<std::vector<int64_t>, torch::Dtype>> kRowShapes = {
    {{2, 3}, torch::kDouble}, {{}, torch::kDouble}, {{4}, torch::kFloat},     {{3}, torch::kFloat},
    {{5}, torch::kHalf},      {{7}, torch::kBool},  {{40, 4}, torch::kFloat}, {{33}, torch::kByte}};

at::Tensor random_rows(int64_t rows, const std::vector<int64_t>& feature, torch::Dtype dtype,
                       bool misaligned) {
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), feature.begin(), feature.end());
  const int64_t numel = c10::multiply_integers(shape);
  // misaligned: one element into the storage, so the chunk narrows to the element's width
  const at::Tensor flat = (torch::randn({numel + 1}) * 10).abs().to(dtype);
  return flat.narrow(0, misaligned ? 1 : 0, numel).view(shape);
}

TEST(SegmentMoversEmulation, ExpandMatchesTheCpuOnTheBlockEmulator) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 24; ++trial) {
    const auto& [feature, dtype] = kRowShapes[trial % kRowShapes.size()];
    // 256: the CUDA shells' block size (kCudaThreads), 8 warps in the scan
    const int threads = trial == 5 ? 256 : trial % 3 == 0 ? 128 : 64;
    const int64_t segments = 1 + static_cast<int64_t>(rng() % 60) + trial % 2 * 300;
    const std::vector<int64_t> first_idx = random_offsets(rng, segments, trial % 2 ? 200 : 0);
    if (first_idx.back() == 0) continue;
    const at::Tensor values = random_rows(segments, feature, dtype, trial % 4 == 1);
    const at::Tensor expected =
        torch_ragged::segment_expand(values, torch::tensor(first_idx, torch::kLong));
    at::Tensor out = torch::empty_like(expected);
    const LaunchReport report =
        emulate_move_rows<SegmentRow>(values, out, first_idx, threads, 1 + trial % 3);
    EXPECT_TRUE(report.clean()) << report.summary();
    EXPECT_TRUE(same_bits(out, expected)) << trial;
  }
}

TEST(SegmentMoversEmulation, SegmentIdsMatchTheCpuOnTheBlockEmulator) {
  std::mt19937_64 rng(18);
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<int64_t> first_idx = random_offsets(rng, 80, trial % 2 ? 200 : 0);
    const at::Tensor expected = torch_ragged::segment_ids(torch::tensor(first_idx, torch::kLong));
    at::Tensor out = torch::empty_like(expected);
    const at::Tensor ids = torch::arange(static_cast<int64_t>(first_idx.size()) - 1, torch::kLong);
    const LaunchReport report = emulate_move_rows<SegmentRow>(ids, out, first_idx, 64, 2);
    EXPECT_TRUE(report.clean()) << report.summary();
    EXPECT_TRUE(torch::equal(out, expected)) << trial;
  }
}

TEST(SegmentMoversEmulation, IndexSelectMatchesTheCpuOnTheBlockEmulator) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 16; ++trial) {
    const auto& [feature, dtype] = kRowShapes[trial % kRowShapes.size()];
    const int64_t segments = 1 + static_cast<int64_t>(rng() % 30);
    const std::vector<int64_t> first_idx = random_offsets(rng, segments);
    const at::Tensor values = random_rows(first_idx.back(), feature, dtype, trial % 3 == 1);
    std::vector<int64_t> index, start, out_first_idx{0};
    for (int64_t k = 0; k < 1 + static_cast<int64_t>(rng() % 120); ++k) {
      const int64_t pick = static_cast<int64_t>(rng() % (2 * segments)) - segments;  // negatives
      const int64_t b = pick < 0 ? pick + segments : pick;
      index.push_back(pick);
      start.push_back(first_idx[b]);
      out_first_idx.push_back(out_first_idx.back() + first_idx[b + 1] - first_idx[b]);
    }
    const auto [expected, expected_first_idx] = torch_ragged::ragged_index_select(
        values, torch::tensor(first_idx, torch::kLong), torch::tensor(index, torch::kLong));
    EXPECT_TRUE(torch::equal(expected_first_idx, torch::tensor(out_first_idx, torch::kLong)));
    if (out_first_idx.back() == 0) continue;
    at::Tensor out = torch::empty_like(expected);
    const LaunchReport report = emulate_move_rows<SelectedRow>(values, out, out_first_idx, 64, 2,
                                                               out_first_idx.data(), start.data());
    EXPECT_TRUE(report.clean()) << report.summary();
    EXPECT_TRUE(same_bits(out, expected)) << trial;
  }
}

TEST(SegmentMoversEmulation, GatherRangeCheckFlagsWhatTheCpuRefuses) {
  std::mt19937_64 rng(23);
  int flagged = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 6),
                  n = 1 + static_cast<int64_t>(rng() % 6);
    std::vector<int64_t> index;
    for (int64_t i = 0; i < n; ++i) index.push_back(static_cast<int64_t>(rng() % (rows + 2)) - 1);
    bool error = false;
    emulate_launch(n, [&](int64_t i) { error |= !gather_index_in_range(index.data(), rows, i); });
    bool refused = false;
    try {
      static auto op =
          c10::Dispatcher::singleton()
              .findSchemaOrThrow("torch_ragged::segment_gather_sum", "")
              .typed<at::Tensor(const at::Tensor&, const at::Tensor&,
                                const std::optional<at::Tensor>&, const at::Tensor&)>();
      op.call(torch::randn({rows, 2}), torch::tensor(index, torch::kLong), std::nullopt,
              torch::tensor({int64_t{0}, n}, torch::kLong));
    } catch (const c10::IndexError&) {
      refused = true;
    }
    EXPECT_EQ(error, refused) << trial;
    flagged += error;
  }
  EXPECT_GT(flagged, 20);
  EXPECT_LT(flagged, 90);
}

TEST(SegmentMoversEmulation, RunOffsetsMatchALoop) {
  std::mt19937_64 rng(29);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 40);
    std::vector<int64_t> keys(n);
    for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 6);
    std::sort(keys.begin(), keys.end());
    std::vector<int64_t> heads(n), slots(n);
    emulate_launch(n, [&](int64_t i) { heads[i] = run_head(keys.data(), i); });
    std::exclusive_scan(heads.begin(), heads.end(), slots.begin(), int64_t{0});  // CUB's scan
    const int64_t runs = slots[n - 1] + heads[n - 1];
    std::vector<int64_t> first_idx(runs + 1, -1);
    emulate_launch(n, [&](int64_t i) {
      scatter_run_start(heads.data(), slots.data(), n, runs, first_idx.data(), i);
    });
    std::vector<int64_t> expected;  // where each run of equal keys starts, then n
    for (int64_t i = 0; i < n; ++i) {
      if (i == 0 || keys[i] != keys[i - 1]) expected.push_back(i);
    }
    expected.push_back(n);
    EXPECT_EQ(first_idx, expected) << trial;
  }
}

}  // namespace
}  // namespace torch_ragged::testing
