// The device-side argument checks of the CUDA kernels (check_first_idx_kernel in segment_cuda.cu,
// check_layout_kernel in batch_cuda.cu), run on the host over their whole launch grids
// (grid_emulator.h): on random valid and broken index tensors, the bodies flag an error exactly
// when the CPU kernel raises one, and the grid covers every entry (the shells are grid-stride).

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <cstdint>
#include <random>
#include <vector>

#include "batch/batch_index.h"
#include "grid_emulator.h"
#include "segment/segment_index.h"

namespace torch_ragged::testing {
namespace {

// True when the CPU kernel raises (a ValueError: c10::ValueError).
template <typename Call>
bool cpu_refuses(const Call& call) {
  try {
    call();
  } catch (const c10::ValueError&) {
    return true;
  }
  return false;
}

// One random edit of a valid offsets / sizes table: none, a decrease, a bad first or last entry.
std::vector<int64_t> random_offsets(std::mt19937_64& rng, int64_t segments, int64_t* rows) {
  std::vector<int64_t> first_idx{0};
  for (int64_t b = 0; b < segments; ++b) first_idx.push_back(first_idx.back() + rng() % 4);
  *rows = first_idx.back();
  switch (rng() % 5) {
    case 1:
      first_idx[rng() % first_idx.size()] += 3;
      break;  // a decrease or a bad end
    case 2:
      first_idx[0] = -1;
      break;  // first entry
    case 3:
      *rows += 1;
      break;  // rows beyond the last entry
    case 4:
      first_idx[rng() % first_idx.size()] -= 2;
      break;  // a decrease or a bad start
    default:
      break;  // valid
  }
  return first_idx;
}

TEST(CheckEmulation, FirstIdxBodyFlagsWhatTheCpuRefuses) {
  std::mt19937_64 rng(7);
  int flagged = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t segments = static_cast<int64_t>(rng() % 6);
    int64_t rows = 0;
    const std::vector<int64_t> first_idx = random_offsets(rng, segments, &rows);
    bool error = false;
    emulate_launch(segments + 1, [&](int64_t b) {
      error |= first_idx_entry_error(first_idx.data(), segments, rows, b) != FirstIdxError::kNone;
    });
    const at::Tensor data = torch::zeros({rows, 2});
    const bool refused = cpu_refuses(
        [&] { torch_ragged::segment_sum(data, torch::tensor(first_idx, torch::kLong)); });
    EXPECT_EQ(error, refused) << "trial " << trial;
    flagged += error;
  }
  EXPECT_GT(flagged, 100);  // both outcomes were exercised
  EXPECT_LT(flagged, 350);
}

TEST(CheckEmulation, LayoutBodyFlagsWhatTheCpuRefuses) {
  std::mt19937_64 rng(11);
  int flagged = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t batch = static_cast<int64_t>(rng() % 4), rank = 2;
    std::vector<int64_t> shapes, max_shape{3, 3};
    std::vector<int64_t> first_row{0};
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t s0 = static_cast<int64_t>(rng() % 4), s1 = static_cast<int64_t>(rng() % 4);
      shapes.push_back(s0);
      shapes.push_back(s1);
      first_row.push_back(first_row.back() + s0 * s1);
    }
    int64_t rows = first_row.back();
    switch (rng() % 5) {
      case 1:
        if (batch > 0) shapes[rng() % shapes.size()] = 4;
        break;  // above max_shape
      case 2:
        if (batch > 0) shapes[rng() % shapes.size()] = -1;
        break;  // negative
      case 3:
        first_row[rng() % first_row.size()] += 1;
        break;  // wrong steps / start
      case 4:
        rows += 1;
        break;  // rows beyond the end
      default:
        break;
    }
    bool error = false;
    emulate_launch(batch + 1, [&](int64_t b) {
      error |= layout_entry_error(shapes.data(), max_shape.data(), first_row.data(), batch, rank,
                                  rows, b) != LayoutError::kNone;
    });
    const at::Tensor shape_tensor = torch::tensor(shapes, torch::kLong).view({batch, rank});
    const bool refused = cpu_refuses([&] {
      torch_ragged::packed_to_padded(torch::zeros({rows, 2}), shape_tensor,
                                     torch::tensor(first_row, torch::kLong), 0.0,
                                     at::IntArrayRef(max_shape));
    });
    EXPECT_EQ(error, refused) << "trial " << trial;
    flagged += error;
  }
  EXPECT_GT(flagged, 100);
  EXPECT_LT(flagged, 350);
}

// A product of sizes beyond int64 is an error, not a wrapped row count that happens to match.
TEST(CheckEmulation, LayoutBodyRefusesSizesWhoseProductOverflows) {
  const std::vector<int64_t> shapes{int64_t{1} << 40, int64_t{1} << 40};
  const std::vector<int64_t> first_row{0, 0};  // (2^40)^2 wraps to 0 in int64
  EXPECT_EQ(layout_entry_error(shapes.data(), nullptr, first_row.data(), 1, 2, 0, 0),
            LayoutError::kRowsNotShapes);
}

}  // namespace
}  // namespace torch_ragged::testing
