// The C++ API of the batch family, through the public headers only.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

namespace {

at::Tensor longs(std::vector<int64_t> values) { return torch::tensor(values, torch::kLong); }

TEST(Batch, GetFirstIdxMatchesKaolinExample) {
  EXPECT_TRUE(torch::equal(torch_ragged::get_first_idx(longs({2, 3, 5})), longs({0, 2, 5, 10})));
}

TEST(Batch, ListToPaddedMatchesKaolinExample) {
  const auto a = longs({0, 1, 2, 1, 2, 3}).view({2, 3});
  const auto b = longs({2, 4, 5}).view({1, 3});
  auto [padded, shape_per_tensor] =
      torch_ragged::list_to_padded({a, b}, -1, std::vector<int64_t>{3});
  const auto expected =
      longs({0, 1, 2, 1, 2, 3, -1, -1, -1, 2, 4, 5, -1, -1, -1, -1, -1, -1}).view({2, 3, 3});
  EXPECT_TRUE(torch::equal(padded, expected));
  EXPECT_TRUE(torch::equal(shape_per_tensor, longs({2, 1}).view({2, 1})));
}

TEST(Batch, LeftPaddingAlignsToTheEnd) {
  const auto packed = torch::arange(6, torch::kFloat).view({3, 2});
  const auto padded = torch_ragged::packed_to_padded(packed, longs({2, 1}).view({2, 1}),
                                                     longs({0, 2, 3}), 9.0, std::nullopt, "left");
  const auto expected = torch::tensor({0.f, 1.f, 2.f, 3.f, 9.f, 9.f, 4.f, 5.f}).view({2, 2, 2});
  EXPECT_TRUE(torch::equal(padded, expected));
  const auto round_trip =
      torch_ragged::padded_to_packed(padded, longs({2, 1}).view({2, 1}), "left");
  EXPECT_TRUE(torch::equal(round_trip, packed));
}

TEST(Batch, BackwardThroughTheCppApiSkipsPadding) {
  const auto packed = torch::randn({5, 3}, torch::requires_grad());
  const auto shape_per_tensor = longs({4, 1}).view({2, 1});
  const auto padded = torch_ragged::packed_to_padded(
      packed, shape_per_tensor, torch_ragged::get_first_idx(longs({4, 1})), 0.0);
  (padded * torch::arange(1, padded.numel() + 1).view(padded.sizes())).sum().backward();
  // padded is (2, 4, 3); sub-tensor 1's row sits at padded[1, 0], i.e. weights 13..15.
  const auto expected =
      torch::cat({torch::arange(1, 13).view({4, 3}), torch::arange(13, 16).view({1, 3})});
  EXPECT_TRUE(torch::allclose(packed.grad(), expected.to(torch::kFloat)));
}

TEST(Batch, TileToPackedRepeatsEachValue) {
  const auto tiled = torch_ragged::tile_to_packed(torch::tensor({0.f, 6.f, 7.f}), longs({2, 0, 3}));
  EXPECT_TRUE(torch::equal(tiled, torch::tensor({0.f, 0.f, 7.f, 7.f, 7.f}).view({5, 1})));
}

TEST(Batch, BadFirstIdxRaisesValueErrorNamingTheOp) {
  const auto packed = torch::zeros({3, 2});
  try {
    torch_ragged::packed_to_padded(packed, longs({2, 1}).view({2, 1}), longs({0, 2}), 0.0);
    FAIL() << "expected an error";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("torch_ragged.packed_to_padded: first_idx"),
              std::string::npos);
  }
}

TEST(Batch, MaxShapeSmallerThanASubTensorRaises) {
  const auto a = torch::zeros({4, 2});
  EXPECT_THROW(torch_ragged::list_to_padded({a}, 0, std::vector<int64_t>{3}), c10::ValueError);
}

TEST(Library, ReportsVersionAndBuild) {
  EXPECT_EQ(torch_ragged::version(), TORCH_RAGGED_PROJECT_VERSION);
  EXPECT_FALSE(std::string(TORCH_RAGGED_PROJECT_VERSION).empty());
  EXPECT_TRUE(torch_ragged::cuda_version() == -1 || torch_ragged::cuda_version() >= 11000);
  EXPECT_EQ(torch_ragged::built_with_cuda(), torch_ragged::cuda_version() != -1);
}

}  // namespace

namespace {

TEST(Batch, EmptyListRaisesValueError) {
  EXPECT_THROW(torch_ragged::list_to_packed(std::vector<at::Tensor>{}), c10::ValueError);
  EXPECT_THROW(torch_ragged::list_to_padded(std::vector<at::Tensor>{}, 0), c10::ValueError);
}

}  // namespace
