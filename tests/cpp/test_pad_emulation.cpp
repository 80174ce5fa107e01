// pad's CUDA kernel bodies (pad_index.h: pad_gather_rows, pad_fold_rows), run on the host by the
// block emulator over their whole launch grids on geometries built here axis by axis (in memory
// order for a channels-last input), against
// the CPU kernels (which merge unpadded axes and sum whole rows): the same bytes forward, the same
// bits backward (float, double, half; large magnitudes so the order of additions shows).

#include <ATen/OpMathType.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <string>
#include <vector>

#include "block_emulator.h"
#include "common/op_handle.h"
#include "grid_emulator.h"
#include "pad/pad_index.h"

namespace torch_ragged::testing {
namespace {

struct PadCase {
  std::vector<int64_t> shape, pad_width;  // pad_width: (before, after) per axis
  std::string mode;
};

IndexPadMode index_mode(const std::string& mode) {
  if (mode == "edge") return IndexPadMode::kEdge;
  if (mode == "wrap") return IndexPadMode::kWrap;
  if (mode == "reflect") return IndexPadMode::kReflect;
  return IndexPadMode::kSymmetric;
}

// The kernel's geometry, one axis per caller axis (no merging: a second route to the same sums).
PadGeometry geometry_of(const PadCase& c) {
  PadGeometry g;
  g.ndim = static_cast<int>(c.shape.size());
  g.mode = index_mode(c.mode);
  for (int d = 0; d < g.ndim; ++d) {
    g.in_size[d] = c.shape[d];
    g.before[d] = c.pad_width[2 * d];
    g.out_size[d] = c.shape[d] + c.pad_width[2 * d] + c.pad_width[2 * d + 1];
    g.value_axis[d] = d;
  }
  return g;
}

// Random shapes (rank 1-3, some axes of size 1 or unpadded) and widths up to 3 periods.
std::vector<PadCase> cases() {
  std::mt19937_64 rng(3);
  std::vector<PadCase> out{{{5}, {7, 9}, "reflect"}, {{1, 4}, {3, 2, 0, 0}, "symmetric"}};
  const char* modes[] = {"edge", "wrap", "reflect", "symmetric"};
  for (int k = 0; k < 40; ++k) {
    PadCase c;
    const int rank = 1 + static_cast<int>(rng() % 3);
    for (int d = 0; d < rank; ++d) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 5);
      c.shape.push_back(n);
      const bool padded = rng() % 4 != 0;
      c.pad_width.push_back(padded ? static_cast<int64_t>(rng() % (3 * n + 1)) : 0);
      c.pad_width.push_back(padded ? static_cast<int64_t>(rng() % (3 * n + 1)) : 0);
    }
    c.mode = modes[k % 4];
    out.push_back(c);
  }
  return out;
}

at::Tensor cpu_pad_index(const at::Tensor& x, const PadCase& c) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view,
                           const std::optional<at::Tensor>&)>("torch_ragged::pad_index");
  return op.call(x, c10::fromIntArrayRefSlow(c.pad_width), c.mode, std::nullopt);
}

at::Tensor cpu_pad_backward(const at::Tensor& grad, const PadCase& c) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view)>(
      "torch_ragged::pad_index_backward");
  return op.call(grad, c10::fromIntArrayRefSlow(c.pad_width), c.mode);
}

// pad_gather_rows_kernel's launch (launch_gather_as), on the block emulator: at most 3 blocks, so
// the grid-stride loop runs; `values` as the op's (ndim, 2) table, null for the index modes.
template <typename Element>
at::Tensor emulated_gather(const PadGeometry& g, const at::Tensor& x,
                           const std::vector<int64_t>& out_memory_shape, const at::Tensor& values,
                           int threads) {
  at::Tensor out = torch::full(out_memory_shape, std::nan(""), x.options());
  const int64_t rows = out.numel() / g.out_size[g.ndim - 1];
  const int64_t per_block = threads >> RowLanes::group_bits_for(g.out_size[g.ndim - 1]);
  const LaunchReport report = emulate_cooperative_launch(
      std::min<int64_t>((rows + per_block - 1) / per_block, 3), threads,
      [&](const EmulatedBlock& block) {
        pad_gather_rows(block, g, x.const_data_ptr<Element>(), out.mutable_data_ptr<Element>(),
                        values.defined() ? values.const_data_ptr<Element>() : nullptr,
                        static_cast<uint32_t>(rows));
      });
  EXPECT_TRUE(report.clean()) << report.summary();
  return out;
}

std::vector<int64_t> out_shape_of(const PadGeometry& g) {
  std::vector<int64_t> shape;
  for (int d = 0; d < g.ndim; ++d) shape.push_back(g.out_size[d]);
  return shape;
}

TEST(PadEmulation, GatherRowsMatchTheCpuByteForByte) {
  int k = 0;
  for (const PadCase& c : cases()) {
    const at::Tensor x = torch::randn(c.shape, torch::kDouble);
    const PadGeometry g = geometry_of(c);
    EXPECT_TRUE(same_bits(emulated_gather<double>(g, x, out_shape_of(g), at::Tensor(),
                                                  ++k == 3 ? 256
                                                  : k % 2  ? 64
                                                           : 128),
                          cpu_pad_index(x, c)))
        << c.mode << " " << x.sizes();
  }
}

// Constant mode: each axis's (before, after) constants; an element in the padding of several axes
// takes the constant of the latest axis (numpy's order), also for a permuted (channels-last)
// geometry, whose axes are walked in memory order.
TEST(PadEmulation, GatherRowsOfConstantsMatchTheCpu) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 12; ++trial) {
    PadCase c{{}, {}, "constant"};
    for (int d = 0; d < 4; ++d) {
      c.shape.push_back(1 + static_cast<int64_t>(rng() % 4));
      const bool padded = d == 0 ? trial % 3 == 0 : rng() % 4 != 0;
      c.pad_width.push_back(padded ? static_cast<int64_t>(rng() % 4) : 0);
      c.pad_width.push_back(padded ? static_cast<int64_t>(rng() % 4) : 0);
    }
    const at::Tensor values = torch::randn({4, 2}, torch::kFloat);
    const bool channels_last = trial % 2 == 1;
    at::Tensor x = torch::randn(c.shape, torch::kFloat);
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    static auto op =
        op_handle<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view,
                             const std::optional<at::Tensor>&)>("torch_ragged::pad_index");
    const at::Tensor expected = op.call(x, c10::fromIntArrayRefSlow(c.pad_width), c.mode, values);
    // The geometry in memory order (N, H, W, C for channels last), one axis per caller axis.
    const std::vector<int> order =
        channels_last ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{0, 1, 2, 3};
    PadGeometry g;
    g.ndim = 4;
    g.mode = IndexPadMode::kConstant;
    g.permuted = channels_last;
    for (int m = 0; m < 4; ++m) {
      const int d = order[m];
      g.in_size[m] = c.shape[d];
      g.before[m] = c.pad_width[2 * d];
      g.out_size[m] = c.shape[d] + c.pad_width[2 * d] + c.pad_width[2 * d + 1];
      g.value_axis[m] = d;
    }
    const at::Tensor memory_order_in = x.permute({order[0], order[1], order[2], order[3]});
    const at::Tensor got =
        emulated_gather<float>(g, memory_order_in.contiguous(), out_shape_of(g), values, 64);
    const at::Tensor memory_order_expected =
        expected.permute({order[0], order[1], order[2], order[3]}).contiguous();
    EXPECT_TRUE(same_bits(got, memory_order_expected)) << trial << " " << x.sizes();
  }
}

// pad_fold_rows_kernel's launch (launch_fold_as) with per-thread arrays of kAxes axes, on the block
// emulator (at most 3 blocks: the grid-stride loop runs).
template <typename scalar_t, int kAxes>
at::Tensor emulated_fold(const PadGeometry& g, const at::Tensor& grad,
                         const std::vector<int64_t>& in_shape, int threads = 64) {
  at::Tensor grad_in = torch::empty(in_shape, grad.options());
  const int64_t row_length = g.in_size[g.ndim - 1];
  const int64_t rows = grad_in.numel() / row_length;
  const int64_t per_block = threads >> RowLanes::group_bits_for(row_length);
  const LaunchReport report = emulate_cooperative_launch(
      std::min<int64_t>((rows + per_block - 1) / per_block, 3), threads,
      [&](const EmulatedBlock& block) {
        pad_fold_rows<EmulatedBlock, scalar_t, at::opmath_type<scalar_t>, kAxes>(
            block, g, grad.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), rows);
      });
  EXPECT_TRUE(report.clean()) << report.summary();
  return grad_in;
}

// The kernel launch_fold picks for the geometry's rank (fold_axes_for).
template <typename scalar_t>
at::Tensor emulated_launch_fold(const PadGeometry& g, const at::Tensor& grad,
                                const std::vector<int64_t>& in_shape) {
  return with_fold_axes(g.ndim, [&](auto axes) {
    return emulated_fold<scalar_t, decltype(axes)::value>(g, grad, in_shape);
  });
}

template <typename scalar_t>
void expect_backward_matches(const PadCase& c, at::ScalarType dtype) {
  const PadGeometry g = geometry_of(c);
  std::vector<int64_t> out_shape;
  for (int d = 0; d < g.ndim; ++d) out_shape.push_back(g.out_size[d]);
  // Magnitudes spread over 1e-3..1e7: a different order of additions changes the last bits.
  const at::Tensor grad =
      (torch::randn(out_shape, torch::kDouble) * torch::exp(torch::randn(out_shape) * 5)).to(dtype);
  const at::Tensor expected = cpu_pad_backward(grad, c);
  EXPECT_TRUE(same_bits(emulated_launch_fold<scalar_t>(g, grad, c.shape), expected))
      << c.mode << " " << expected.sizes() << " " << dtype;
  // The largest arrays (any rank) give the same bits.
  EXPECT_TRUE(same_bits(emulated_fold<scalar_t, kMaxPadDims>(g, grad, c.shape), expected))
      << c.mode << " " << expected.sizes() << " " << dtype;
}

TEST(PadEmulation, BackwardMatchesTheCpuBitForBit) {
  torch::manual_seed(5);
  for (const PadCase& c : cases()) {
    expect_backward_matches<float>(c, torch::kFloat);
    expect_backward_matches<double>(c, torch::kDouble);
    expect_backward_matches<at::Half>(c, torch::kHalf);
  }
}

// Ranks past the small arrays: the launcher's 8- and 25-axis kernels (geometry one axis per
// caller axis, so nothing merges them away).
TEST(PadEmulation, BackwardOfHighRanksMatchesTheCpu) {
  torch::manual_seed(6);
  const PadCase six{{2, 1, 3, 2, 1, 2}, {1, 0, 0, 2, 2, 1, 0, 0, 1, 1, 0, 3}, "reflect"};
  const PadCase ten{{2, 2, 1, 2, 2, 1, 2, 2, 1, 2},
                    {1, 0, 0, 0, 2, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 2},
                    "symmetric"};
  ASSERT_EQ(fold_axes_for(6), kFoldAxesMedium);
  ASSERT_EQ(fold_axes_for(10), kMaxPadDims);
  for (const PadCase& c : {six, ten}) {
    expect_backward_matches<float>(c, torch::kFloat);
    expect_backward_matches<double>(c, torch::kDouble);
  }
}

// Negative zero survives a preimage of one position (the sum starts from the first term, not 0).
TEST(PadEmulation, BackwardKeepsNegativeZero) {
  const PadCase c{{3}, {0, 0}, "edge"};
  const at::Tensor grad = torch::tensor({-0.0, 1.0, -0.0});
  EXPECT_TRUE(same_bits(emulated_fold<float, kFoldAxesSmall>(geometry_of(c), grad, {3}), grad));
}

}  // namespace
}  // namespace torch_ragged::testing
