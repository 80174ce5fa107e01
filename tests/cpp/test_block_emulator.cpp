// The block emulator itself (block_emulator.h): warp collectives give what the CUDA intrinsics
// give, and each report the cooperative kernels rely on (race, barrier and warp divergence,
// out-of-bounds and uninitialised shared reads) is raised on a deliberately broken kernel and not
// on its mended twin.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "block_emulator.h"

namespace torch_ragged::testing {
namespace {

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(BlockEmulator, RunsEveryThreadOfEveryBlockOnce) {
  std::vector<int> visits(3 * 64, 0);
  const LaunchReport report = emulate_cooperative_launch(3, 64, [&](const EmulatedBlock& block) {
    ++visits[block.block() * block.threads() + block.thread()];
    EXPECT_EQ(block.blocks(), 3);
  });
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_EQ(visits, std::vector<int>(3 * 64, 1));
}

TEST(BlockEmulator, WarpCollectivesGiveWhatTheIntrinsicsGive) {
  std::vector<int64_t> up(64), down(64), butterfly_sum(64), from_lane_5(64);
  std::vector<uint32_t> votes(64);
  const LaunchReport report = emulate_cooperative_launch(1, 64, [&](const EmulatedBlock& block) {
    const int t = block.thread(), lane = t % kWarpSize;
    up[t] = block.shfl_up(int64_t{100 + t}, 3);
    down[t] = block.shfl_down(int64_t{100 + t}, 3);
    int64_t sum = t;
    for (int mask = 16; mask > 0; mask /= 2) sum += block.shfl_xor(sum, mask);
    butterfly_sum[t] = sum;
    from_lane_5[t] = block.shfl(int64_t{t}, 5);
    votes[t] = block.ballot(lane % 2 == 1);
  });
  EXPECT_TRUE(report.clean()) << report.summary();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % kWarpSize, warp_first = t - lane;
    EXPECT_EQ(up[t], lane >= 3 ? 100 + t - 3 : 100 + t);  // lanes below delta keep their value
    EXPECT_EQ(down[t], lane + 3 < kWarpSize ? 100 + t + 3 : 100 + t);
    EXPECT_EQ(butterfly_sum[t], 32 * warp_first + 31 * 32 / 2);  // the warp's sum of t
    EXPECT_EQ(from_lane_5[t], warp_first + 5);
    EXPECT_EQ(votes[t], 0xAAAAAAAAu);
  }
}

// Each thread writes its slot, then reads its neighbour's: with and without the barrier between.
LaunchReport neighbour_exchange(bool with_barrier, std::vector<int64_t>& got) {
  return emulate_cooperative_launch(2, 64, [&](const EmulatedBlock& block) {
    auto slots = block.shared<int64_t>(0, "slots", block.threads());
    const int t = block.thread();
    slots[t] = int64_t{t};
    if (with_barrier) block.sync();
    got[block.block() * 64 + t] = slots[(t + 1) % block.threads()];
  });
}

TEST(BlockEmulator, ReportsASharedMemoryRaceAndNotItsMendedTwin) {
  std::vector<int64_t> got(128);
  const LaunchReport broken = neighbour_exchange(false, got);
  EXPECT_TRUE(mentions(broken.races, "shared-memory race: slots[")) << broken.summary();
  const LaunchReport mended = neighbour_exchange(true, got);
  EXPECT_TRUE(mended.clean()) << mended.summary();
  for (int t = 0; t < 128; ++t) EXPECT_EQ(got[t], (t % 64 + 1) % 64);
}

TEST(BlockEmulator, ReportsTwoThreadsWritingOneElementInOnePhase) {
  const LaunchReport report = emulate_cooperative_launch(1, 32, [&](const EmulatedBlock& block) {
    auto last = block.shared<int>(0, "last_writer", 1);
    last[0] = block.thread();  // who wins depends on the order threads run in
  });
  EXPECT_TRUE(mentions(report.races, "last_writer[0] written by thread")) << report.summary();
}

TEST(BlockEmulator, ReportsABarrierOnlyPartOfTheBlockReaches) {
  const LaunchReport report = emulate_cooperative_launch(1, 64, [&](const EmulatedBlock& block) {
    if (block.thread() < 16) block.sync();
  });
  EXPECT_TRUE(mentions(report.divergences, "threads of the block left the kernel without reaching"))
      << report.summary();
}

TEST(BlockEmulator, ReportsThreadsWaitingAtDifferentBarriers) {
  std::atomic<int> after_barrier{0};
  const LaunchReport report = emulate_cooperative_launch(1, 64, [&](const EmulatedBlock& block) {
    if (block.thread() % 2 == 0) {
      block.sync();
    } else {
      block.sync();
    }
    ++after_barrier;
  });
  EXPECT_TRUE(mentions(report.divergences, "barrier divergence: thread")) << report.summary();
  EXPECT_EQ(after_barrier, 0);  // the block is abandoned: nobody passes a divergent barrier
}

TEST(BlockEmulator, ReportsAShuffleHalfAWarpReaches) {
  const LaunchReport report = emulate_cooperative_launch(1, 32, [&](const EmulatedBlock& block) {
    if (block.thread() < 16) block.shfl_xor(block.thread(), 1);
  });
  EXPECT_TRUE(mentions(report.divergences, "warp divergence: lane")) << report.summary();
  EXPECT_TRUE(mentions(report.divergences, "has exited")) << report.summary();
}

TEST(BlockEmulator, ReportsOutOfBoundsAndUninitialisedSharedReads) {
  const LaunchReport report = emulate_cooperative_launch(1, 32, [&](const EmulatedBlock& block) {
    auto a = block.shared<float>(0, "a", 32);
    auto b = block.shared<float>(1, "b", 32);
    a[block.thread()] = 1.0f;
    block.sync();
    const float past_the_end = a[block.thread() + 1];  // thread 31 reads a[32]
    const float never_written = b[block.thread()];
    EXPECT_EQ(past_the_end + never_written, block.thread() == 31 ? 0.0f : 1.0f);
  });
  EXPECT_TRUE(mentions(report.errors, "out-of-bounds shared access a[32] (size 32) by thread 31"))
      << report.summary();
  EXPECT_TRUE(mentions(report.errors, "read of b[0] before any thread wrote it"))
      << report.summary();
}

TEST(BlockEmulator, RefusesABlockThatIsNotWholeWarps) {
  int runs = 0;
  const LaunchReport report =
      emulate_cooperative_launch(1, 48, [&](const EmulatedBlock&) { ++runs; });
  EXPECT_TRUE(mentions(report.errors, "block size 48 is not a positive multiple of the warp size"));
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace torch_ragged::testing
