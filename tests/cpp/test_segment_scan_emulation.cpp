// The segmented scans' CUDA kernel bodies (segment_index.h, "Segmented scans"), run on the host
// over the launch grids of cuda/segment_scan_cuda.cu (grid_emulator.h), against the CPU kernels:
// the same bits for cumsum / cumprod / logcumsumexp (float and double, both directions, exclusive)
// and cummax / cummin (values and rows), on layouts from empty segments to one segment spanning
// three levels of the plan. The plan goes through packed() and view(l, base), as its device copy.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <random>
#include <vector>

#include "grid_emulator.h"
#include "segment/scan.h"

namespace torch_ragged::testing {
namespace {

// segment_scan_cuda.cu's scan_on_gpu with its launches emulated.
template <typename Scan, typename Load, typename Write>
void emulated_scan(const ScanPlan& plan, int64_t width, const Load& load, const Write& write,
                   bool exclusive) {
  using Acc = typename Scan::Acc;
  const std::vector<int64_t> device_plan = plan.packed();
  const int levels = static_cast<int>(plan.levels.size());
  std::vector<std::vector<Acc>> tails(levels), scanned(levels);
  for (int l = 0; l + 1 < levels; ++l) {
    const ScanLevel level = plan.view(l, device_plan.data());
    tails[l].assign(level.chunks() * width, Scan::identity());
    emulate_launch(level.chunks() * width, [&](int64_t t) {
      if (l == 0) {
        scan_chunk_tail<Scan>(level, t / width, t % width, width, load, tails[l].data());
      } else {
        scan_chunk_tail<Scan>(level, t / width, t % width, width,
                              ScanItems<Acc>{tails[l - 1].data(), width}, tails[l].data());
      }
    });
  }
  for (int l = levels - 1; l >= 1; --l) {
    const ScanLevel level = plan.view(l, device_plan.data());
    scanned[l].assign(level.items * width, Scan::identity());
    const Acc* carries = l + 1 < levels ? scanned[l + 1].data() : nullptr;
    emulate_launch(level.chunks() * width, [&](int64_t t) {
      scan_chunk_rows<Scan>(level, t / width, t % width, width,
                            ScanItems<Acc>{tails[l - 1].data(), width},
                            WriteScanItems<Acc>{scanned[l].data(), width}, carries, false);
    });
  }
  const ScanLevel level = plan.view(0, device_plan.data());
  emulate_launch(level.chunks() * width, [&](int64_t t) {
    scan_chunk_rows<Scan>(level, t / width, t % width, width, load, write,
                          levels > 1 ? scanned[1].data() : nullptr, exclusive);
  });
}

std::vector<int64_t> offsets_of(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> first_idx{0};
  for (const int64_t n : lengths) first_idx.push_back(first_idx.back() + n);
  return first_idx;
}

// Empty segments first, between and last; one segment over three levels (narrow rows: 32-row
// chunks, 1024 rows per level-1 chunk); short ones across chunk edges; random short ones.
std::vector<std::vector<int64_t>> layouts() {
  std::mt19937_64 rng(29);
  std::vector<int64_t> random;
  for (int b = 0; b < 400; ++b) random.push_back(static_cast<int64_t>(rng() % 9));
  return {{0, 3, 1, 0, 5, 2, 7, 0, 4, 1, 30, 33, 2, 0}, {0, 5000, 0, 3, 2100, 1, 0}, {70}, random};
}

template <template <typename> class Rule, typename scalar_t>
at::Tensor emulated_value_scan(const at::Tensor& data, const std::vector<int64_t>& first_idx,
                               bool reverse, bool exclusive) {
  using Scan = Rule<scalar_t>;
  const at::Tensor in = data.contiguous();
  const int64_t width = in.numel() / in.size(0);
  at::Tensor out = torch::empty_like(in);
  const ScanPlan plan = scan_plan(first_idx, width, reverse);
  const ScanOrder order = ScanOrder::of(in.size(0), reverse);
  emulated_scan<Scan>(
      plan, width, LoadScanRows<Scan, scalar_t>{in.data_ptr<scalar_t>(), width, order},
      WriteScanValues<Scan, scalar_t>{out.data_ptr<scalar_t>(), width, order}, exclusive);
  return out;
}

template <typename scalar_t>
void expect_value_scans_match_the_cpu(torch::Dtype dtype) {
  for (const std::vector<int64_t>& lengths : layouts()) {
    const std::vector<int64_t> first_idx = offsets_of(lengths);
    const at::Tensor fi = torch::tensor(first_idx, torch::kLong);
    for (const int64_t width : {1, 3, 40}) {
      const at::Tensor data = torch::randn({first_idx.back(), width}, dtype);
      const at::Tensor near_one = 1 + 0.01 * data;
      for (const bool reverse : {false, true}) {
        for (const bool exclusive : {false, true}) {
          EXPECT_TRUE(
              same_bits(emulated_value_scan<SumScan, scalar_t>(data, first_idx, reverse, exclusive),
                        segment_cumsum(data, fi, reverse, exclusive)))
              << "cumsum " << width << reverse << exclusive;
          EXPECT_TRUE(same_bits(
              emulated_value_scan<ProdScan, scalar_t>(near_one, first_idx, reverse, exclusive),
              segment_cumprod(near_one, fi, reverse, exclusive)))
              << "cumprod " << width << reverse << exclusive;
        }
        EXPECT_TRUE(same_bits_any_nan(
            emulated_value_scan<LogAddExpScan, scalar_t>(data * 100, first_idx, reverse, false),
            segment_logcumsumexp(data * 100, fi, reverse)))
            << "logcumsumexp " << width << reverse;
      }
    }
  }
}

TEST(SegmentScanEmulation, CumsumCumprodLogcumsumexpMatchTheCpuInFloat) {
  expect_value_scans_match_the_cpu<float>(torch::kFloat);
}

TEST(SegmentScanEmulation, CumsumCumprodLogcumsumexpMatchTheCpuInDouble) {
  expect_value_scans_match_the_cpu<double>(torch::kDouble);
}

template <bool kMax>
void expect_extrema_match_the_cpu() {
  for (const std::vector<int64_t>& lengths : layouts()) {
    const std::vector<int64_t> first_idx = offsets_of(lengths);
    const at::Tensor fi = torch::tensor(first_idx, torch::kLong);
    // rounded: ties (the later row wins); some NaNs
    at::Tensor data = (torch::randn({first_idx.back(), 3}) * 3).round();
    if (data.size(0) > 10) data.index_put_({torch::indexing::Slice(3, c10::nullopt, 41), 1}, NAN);
    for (const bool reverse : {false, true}) {
      using Scan = ExtremumScan<float, kMax>;
      at::Tensor values = torch::empty_like(data);
      at::Tensor arg = torch::empty(data.sizes(), torch::kLong);
      const ScanPlan plan = scan_plan(first_idx, 3, reverse);
      const ScanOrder order = ScanOrder::of(data.size(0), reverse);
      emulated_scan<Scan>(
          plan, 3, LoadScanRows<Scan, float>{data.data_ptr<float>(), 3, order},
          WriteScanValueAndRow<float>{values.data_ptr<float>(), arg.data_ptr<int64_t>(), 3, order},
          false);
      const auto [cpu_values, cpu_arg] =
          kMax ? segment_cummax(data, fi, reverse) : segment_cummin(data, fi, reverse);
      EXPECT_TRUE(same_bits_any_nan(values, cpu_values)) << reverse;
      EXPECT_TRUE(torch::equal(arg, cpu_arg)) << reverse;
    }
  }
}

TEST(SegmentScanEmulation, CummaxMatchesTheCpu) { expect_extrema_match_the_cpu<true>(); }
TEST(SegmentScanEmulation, CumminMatchesTheCpu) { expect_extrema_match_the_cpu<false>(); }

// The plan's levels: 5000 + 2100 rows of 1 column are 222 chunks of 32 rows, then 7, then 1.
TEST(SegmentScanEmulation, ThePlanHasALevelPerChunkOfChunks) {
  const ScanPlan plan = scan_plan(offsets_of({0, 5000, 0, 3, 2100, 1, 0}), 1, false);
  ASSERT_EQ(plan.levels.size(), 3u);
  EXPECT_EQ(plan.levels[1].items, 222);
  EXPECT_EQ(plan.levels[2].items, 7);
  // level 1's runs start where a segment starts: chunk 0 (segment 1), chunk 156 (rows 5000 and
  // 5003 start segments 3 and 4 in it), chunk 221 (segment 5 at row 7103)
  EXPECT_EQ(plan.levels[1].first_idx, (std::vector<int64_t>{0, 156, 221, 222}));
}

}  // namespace
}  // namespace torch_ragged::testing
