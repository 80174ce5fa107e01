// The segment core's row movers and run-offset kernels (segment_index.h: expand_row_element,
// copy_selected_element, gather_index_in_range, run_head, scatter_run_start), run on the host over
// their launch grids (grid_emulator.h) against the CPU kernels (segment_expand,
// ragged_index_select, segment_gather_sum's range check) and a loop (runs of equal sorted keys).

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "grid_emulator.h"
#include "segment/segment_index.h"

namespace torch_ragged::testing {
namespace {

std::vector<int64_t> random_offsets(std::mt19937_64& rng, int64_t segments) {
  std::vector<int64_t> first_idx{0};
  for (int64_t b = 0; b < segments; ++b) first_idx.push_back(first_idx.back() + rng() % 5);
  return first_idx;
}

TEST(SegmentMoversEmulation, ExpandMatchesTheCpu) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t segments = 1 + static_cast<int64_t>(rng() % 12);
    const std::vector<int64_t> first_idx = random_offsets(rng, segments);
    const at::Tensor values = torch::randn({segments, 2, 3}, torch::kDouble);
    const at::Tensor expected =
        torch_ragged::segment_expand(values, torch::tensor(first_idx, torch::kLong));
    at::Tensor out = torch::empty_like(expected);
    const int64_t row_elems = 6;
    emulate_launch(out.numel(), [&](int64_t e) {
      expand_row_element(first_idx.data(), segments, values.const_data_ptr<double>(),
                         out.mutable_data_ptr<double>(), e, row_elems);
    });
    EXPECT_TRUE(same_bits(out, expected)) << trial;
  }
}

TEST(SegmentMoversEmulation, IndexSelectMatchesTheCpu) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t segments = 1 + static_cast<int64_t>(rng() % 10);
    const std::vector<int64_t> first_idx = random_offsets(rng, segments);
    const at::Tensor values = torch::randn({first_idx.back(), 3}, torch::kDouble);
    std::vector<int64_t> index, source_row, out_first_idx{0};
    for (int64_t k = 0; k < 1 + static_cast<int64_t>(rng() % 8); ++k) {
      const int64_t pick = static_cast<int64_t>(rng() % (2 * segments)) - segments;  // negatives
      const int64_t b = pick < 0 ? pick + segments : pick;
      index.push_back(pick);
      source_row.push_back(first_idx[b]);
      out_first_idx.push_back(out_first_idx.back() + first_idx[b + 1] - first_idx[b]);
    }
    const auto [expected, expected_first_idx] = torch_ragged::ragged_index_select(
        values, torch::tensor(first_idx, torch::kLong), torch::tensor(index, torch::kLong));
    EXPECT_TRUE(torch::equal(expected_first_idx, torch::tensor(out_first_idx, torch::kLong)));
    at::Tensor out = torch::empty_like(expected);
    emulate_launch(out.numel(), [&](int64_t e) {
      copy_selected_element(out_first_idx.data(), source_row.data(),
                            static_cast<int64_t>(index.size()), values.const_data_ptr<double>(),
                            out.mutable_data_ptr<double>(), e, 3);
    });
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
