// The C++ API of the tiles family, through the public headers only: two overlapping 1-D tiles of
// two points in a bound of four, every value below worked out by hand (the numpy oracle runs in the
// Python tests).

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <string>

namespace {

at::Tensor longs(std::vector<int64_t> values) { return torch::tensor(values, torch::kLong); }

// tile 0 = [1, 2] at 0, tile 1 = [10, 20] at 1: point 1 is covered by both.
struct TwoTiles {
  at::Tensor pages = torch::tensor({1.f, 2.f, 10.f, 20.f}).view({2, 2});
  at::Tensor origins = longs({0, 1}).view({2, 1});
};

TEST(Tiles, TheFirstCoveringTileWinsAndSumAddsThemAll) {
  const TwoTiles t;
  EXPECT_TRUE(torch::equal(torch_ragged::tiles_to_dense(t.pages, t.origins, {0}, {4}, -1.0),
                           torch::tensor({1.f, 2.f, 20.f, -1.f})));
  EXPECT_TRUE(torch::equal(torch_ragged::tiles_to_dense(t.pages, t.origins, {0}, {4}, -1.0, "sum"),
                           torch::tensor({1.f, 12.f, 20.f, -1.f})));
}

TEST(Tiles, DenseToTilesReadsEveryPointOrOnlyTheOwnedOnes) {
  const TwoTiles t;
  const auto dense = torch::tensor({1.f, 2.f, 20.f, -1.f});
  EXPECT_TRUE(torch::equal(torch_ragged::dense_to_tiles(dense, t.origins, {2}, {0}),
                           torch::tensor({1.f, 2.f, 2.f, 20.f}).view({2, 2})));
  EXPECT_TRUE(torch::equal(torch_ragged::dense_to_tiles(dense, t.origins, {2}, {0}, 0.0, true),
                           torch::tensor({1.f, 2.f, 0.f, 20.f}).view({2, 2})));
}

TEST(Tiles, LookupFindsTheOwnerAndThePositionInIt) {
  const TwoTiles t;
  const auto [tile, local] =
      torch_ragged::tiles_lookup(t.origins, {2}, longs({1, 2, 3}).view({3, 1}), {0}, {4});
  EXPECT_TRUE(torch::equal(tile, longs({0, 1, -1})));
  EXPECT_TRUE(torch::equal(local, longs({1, 1, 0}).view({3, 1})));
}

TEST(Tiles, BoxFilterReadsAcrossTilesAndEmptySpace) {
  const TwoTiles t;  // the field [1, 2, 20, 0], 0 outside: means of three neighbours
  const auto out = torch_ragged::tiles_box_filter(t.pages, t.origins, {0}, {4}, 3, 0.0, "dense");
  EXPECT_TRUE(torch::allclose(out, torch::tensor({1.f, 23.f / 3, 22.f / 3, 20.f / 3})));
}

TEST(Tiles, FromDenseKeepsTheAlignedTilesThatHoldData) {
  const auto [pages, origins] =
      torch_ragged::tiles_from_dense(torch::tensor({0.f, 0.f, 5.f, 0.f, 0.f, 0.f}), {2});
  EXPECT_TRUE(torch::equal(pages, torch::tensor({5.f, 0.f}).view({1, 2})));
  EXPECT_TRUE(torch::equal(origins, longs({2}).view({1, 1})));
}

TEST(Tiles, GradientsGoToTheWinningPixels) {
  const TwoTiles t;
  const auto pages = t.pages.clone().requires_grad_();
  torch_ragged::tiles_to_dense(pages, t.origins, {0}, {4}).sum().backward();
  EXPECT_TRUE(torch::equal(pages.grad(), torch::tensor({1.f, 1.f, 0.f, 1.f}).view({2, 2})));
}

TEST(Tiles, ABadReduceIsRefusedByName) {
  const TwoTiles t;
  try {
    torch_ragged::tiles_to_dense(t.pages, t.origins, {0}, {4}, 0.0, "max");
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("torch_ragged.tiles_to_dense"), std::string::npos)
        << e.what();
  }
}

}  // namespace
