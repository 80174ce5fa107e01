// The tiles family's CUDA kernel bodies (tiles_index.h: gather_row_span over DenseFromOwner,
// TileFromDense and HaloFromOwner, sum_covering_span, halo_adjoint_span, lookup_point), run
// on the host over their launch grids (grid_emulator.h) against the CPU kernels, bit for bit:
// random tile sets in 1-3 dims with overlapping, unaligned tiles sticking out of the bound, one
// member or several (tile_first_idx). The cell lists come from the public tiles_index, as the CUDA
// plans build them.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/tiles.h>

#include <optional>
#include <random>
#include <vector>

#include "common/op_handle.h"
#include "grid_emulator.h"
#include "tiles/tiles_index.h"

namespace torch_ragged::testing {
namespace {

using Ints = std::vector<int64_t>;

// One random tile set with its geometry, cell lists and per-tile members.
struct TileCase {
  Ints tile, lo, hi;
  at::Tensor origins;                        // (T, d) int64
  std::optional<at::Tensor> tile_first_idx;  // (B + 1,) or none (one member)
  int64_t members = 1;
  TileGeometry geo{};
  at::Tensor keys, first, tiles, member;  // member: (T,) or undefined

  TileCells cells() const {
    return TileCells{keys.const_data_ptr<int64_t>(), first.const_data_ptr<int64_t>(),
                     tiles.const_data_ptr<int64_t>(), keys.numel(),
                     origins.const_data_ptr<int64_t>()};
  }
  const int64_t* member_ptr() const {
    return member.defined() ? member.const_data_ptr<int64_t>() : nullptr;
  }
  int64_t count() const { return origins.size(0); }
  // [(B,) *sizes, F]
  Ints batched(const Ints& sizes, int64_t features) const {
    Ints out;
    if (tile_first_idx.has_value()) out.push_back(members);
    out.insert(out.end(), sizes.begin(), sizes.end());
    out.push_back(features);
    return out;
  }
};

TileGeometry geometry_of(const Ints& tile, const Ints& lo, const Ints& hi) {
  TileGeometry geo{};
  geo.dims = static_cast<int>(tile.size());
  geo.tile_elems = geo.bound_elems = geo.num_cells = 1;
  for (int d = 0; d < geo.dims; ++d) {
    geo.tile[d] = tile[d];
    geo.lo[d] = lo[d];
    geo.extent[d] = hi[d] - lo[d];
    geo.cells[d] = (geo.extent[d] + tile[d] - 1) / tile[d];
    geo.tile_elems *= tile[d];
    geo.bound_elems *= geo.extent[d];
    geo.num_cells *= geo.cells[d];
  }
  return geo;
}

// The cell lists of `origins` (tiles of `tile` in [lo, hi)), from the public op.
void index_into(TileCase& c, const at::Tensor& origins, const Ints& tile) {
  auto [keys, first, tiles, fingerprint] =
      torch_ragged::tiles_index(origins, tile, c.lo, c.hi, c.tile_first_idx);
  c.keys = keys.contiguous();
  c.first = first.contiguous();
  c.tiles = tiles.contiguous();
}

TileCase random_case(std::mt19937_64& rng, bool several_members) {
  TileCase c;
  const int dims = 1 + static_cast<int>(rng() % 3);
  for (int d = 0; d < dims; ++d) {
    c.tile.push_back(1 + static_cast<int64_t>(rng() % 4));
    c.lo.push_back(static_cast<int64_t>(rng() % 11) - 5);
    c.hi.push_back(c.lo[d] + 1 + static_cast<int64_t>(rng() % (dims == 3 ? 6 : 12)));
  }
  const int64_t count = static_cast<int64_t>(rng() % 9);
  c.origins = torch::empty({count, dims}, torch::kLong);
  for (int64_t t = 0; t < count; ++t) {
    for (int d = 0; d < dims; ++d) {  // from just before the bound to just past it, any alignment
      const int64_t span = c.hi[d] - c.lo[d] + c.tile[d] + 2;
      c.origins[t][d] = c.lo[d] - c.tile[d] - 1 + static_cast<int64_t>(rng() % span);
    }
  }
  if (several_members) {
    c.members = 2;
    const int64_t split = count == 0 ? 0 : static_cast<int64_t>(rng() % (count + 1));
    c.tile_first_idx = torch::tensor({int64_t{0}, split, count}, torch::kLong);
    c.member = torch::cat(
        {torch::zeros({split}, torch::kLong), torch::ones({count - split}, torch::kLong)});
  }
  c.geo = geometry_of(c.tile, c.lo, c.hi);
  index_into(c, c.origins, c.tile);
  return c;
}

// The kernels' grid: one thread per (row, span of up to kSpanColumns columns).
int64_t threads_for(const at::Tensor& out) {
  return span_threads(out.numel() / out.size(-1), out.size(-1));
}

template <typename Source>
at::Tensor emulated_gather(const Source& source, const at::Tensor& src, const Ints& out_sizes,
                           float fill) {
  at::Tensor out = torch::empty(out_sizes, torch::kFloat);
  const int64_t width = out_sizes.back();
  emulate_launch(threads_for(out), [&](int64_t t) {
    gather_row_span(source, src.const_data_ptr<float>(), out.mutable_data_ptr<float>(), fill, t,
                    width);
  });
  return out;
}

// Rows of 2 features (one span per row), and every third trial 70 (three spans, the last partial).
int64_t features_of(int trial) { return trial % 3 == 2 ? 70 : 2; }
constexpr float kFill = -7.5F;

class TilesEmulation : public ::testing::TestWithParam<bool> {};

TEST_P(TilesEmulation, TilesToDenseFirstAndSumMatchTheCpu) {
  std::mt19937_64 rng(GetParam() ? 71 : 17);
  for (int trial = 0; trial < 60; ++trial) {
    TileCase c = random_case(rng, GetParam());
    const int64_t features = features_of(trial);
    Ints page_sizes{c.count()};
    page_sizes.insert(page_sizes.end(), c.tile.begin(), c.tile.end());
    page_sizes.push_back(features);
    const at::Tensor pages = torch::randn(page_sizes, torch::kFloat);
    Ints extent;
    for (size_t d = 0; d < c.tile.size(); ++d) extent.push_back(c.hi[d] - c.lo[d]);
    const Ints out_sizes = c.batched(extent, features);

    const at::Tensor first =
        emulated_gather(DenseFromOwner{c.geo, c.cells()}, pages, out_sizes, kFill);
    EXPECT_TRUE(same_bits(first, torch_ragged::tiles_to_dense(pages, c.origins, c.lo, c.hi, kFill,
                                                              "first", c.tile_first_idx)))
        << trial;

    at::Tensor sum = torch::empty(out_sizes, torch::kFloat);
    emulate_launch(threads_for(sum), [&](int64_t t) {
      sum_covering_span<float, float>(c.geo, c.cells(), pages.const_data_ptr<float>(),
                                      sum.mutable_data_ptr<float>(), kFill, t, features);
    });
    EXPECT_TRUE(same_bits(sum, torch_ragged::tiles_to_dense(pages, c.origins, c.lo, c.hi, kFill,
                                                            "sum", c.tile_first_idx)))
        << trial;
  }
}

TEST_P(TilesEmulation, DenseToTilesMatchesTheCpu) {
  std::mt19937_64 rng(GetParam() ? 72 : 27);
  for (int trial = 0; trial < 60; ++trial) {
    TileCase c = random_case(rng, GetParam());
    const int64_t features = features_of(trial);
    Ints extent;
    for (size_t d = 0; d < c.tile.size(); ++d) extent.push_back(c.hi[d] - c.lo[d]);
    const at::Tensor dense = torch::randn(c.batched(extent, features), torch::kFloat);
    Ints out_sizes{c.count()};
    out_sizes.insert(out_sizes.end(), c.tile.begin(), c.tile.end());
    out_sizes.push_back(features);
    for (const bool owned_only : {false, true}) {
      const at::Tensor got = emulated_gather(
          TileFromDense{c.geo, c.cells(), c.member_ptr(), owned_only}, dense, out_sizes, kFill);
      EXPECT_TRUE(same_bits(got, torch_ragged::dense_to_tiles(dense, c.origins, c.tile, c.lo, kFill,
                                                              owned_only, c.tile_first_idx)))
          << trial << " owned_only " << owned_only;
    }
  }
}

TEST_P(TilesEmulation, HaloAndItsAdjointMatchTheCpu) {
  static auto halo_op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                           at::IntArrayRef, const at::Scalar&, const std::optional<at::Tensor>&,
                           std::optional<at::TensorList>)>("torch_ragged::tiles_halo");
  static auto adjoint_op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                           at::IntArrayRef, const std::optional<at::Tensor>&,
                           std::optional<at::TensorList>)>("torch_ragged::tiles_halo_backward");
  std::mt19937_64 rng(GetParam() ? 73 : 37);
  for (int trial = 0; trial < 60; ++trial) {
    TileCase c = random_case(rng, GetParam());
    const int64_t features = features_of(trial);
    const int dims = c.geo.dims;
    HaloFromOwner halo{};
    halo.geo = c.geo;
    halo.cells = c.cells();
    halo.member = c.member_ptr();
    halo.box_elems = 1;
    Ints radius, box;
    for (int d = 0; d < dims; ++d) {
      radius.push_back(static_cast<int64_t>(rng() % 3));
      box.push_back(c.tile[d] + 2 * radius[d]);
      halo.radius[d] = radius[d];
      halo.box[d] = box[d];
      halo.box_elems *= box[d];
    }
    Ints page_sizes{c.count()}, halo_sizes{c.count()};
    page_sizes.insert(page_sizes.end(), c.tile.begin(), c.tile.end());
    page_sizes.push_back(features);
    halo_sizes.insert(halo_sizes.end(), box.begin(), box.end());
    halo_sizes.push_back(features);
    const at::Tensor pages = torch::randn(page_sizes, torch::kFloat);
    const at::Tensor got = emulated_gather(halo, pages, halo_sizes, kFill);
    EXPECT_TRUE(same_bits(
        got, halo_op.call(pages, c.origins, radius, c.lo, c.hi, kFill, c.tile_first_idx, {})))
        << trial;

    // The adjoint: the boxes are a tile set of their own (size tile + 2 radius, origins shifted).
    TileCase boxes = c;
    boxes.geo = geometry_of(box, c.lo, c.hi);
    boxes.origins = (c.origins - torch::tensor(radius, torch::kLong)).contiguous();
    index_into(boxes, boxes.origins, box);
    const HaloAdjoint adjoint{c.geo, c.cells(), boxes.geo, boxes.cells(), c.member_ptr()};
    const at::Tensor grad = torch::randn(halo_sizes, torch::kFloat);
    at::Tensor back = torch::empty(page_sizes, torch::kFloat);
    emulate_launch(threads_for(back), [&](int64_t t) {
      halo_adjoint_span<float, float>(adjoint, grad.const_data_ptr<float>(),
                                      back.mutable_data_ptr<float>(), t, features);
    });
    EXPECT_TRUE(
        same_bits(back, adjoint_op.call(grad, c.origins, radius, c.lo, c.hi, c.tile_first_idx, {})))
        << trial;
  }
}

// With >= 256 points the CPU op reads a key -> owner table (TileCells::key_owners); the emulated
// body here searches the cell lists: the two routes must agree.
TEST_P(TilesEmulation, LookupMatchesTheCpu) {
  std::mt19937_64 rng(GetParam() ? 74 : 47);
  for (int trial = 0; trial < 60; ++trial) {
    TileCase c = random_case(rng, GetParam());
    const int dims = c.geo.dims;
    const int64_t n = trial % 2 == 0 ? 40 : 400;
    const int64_t lead = c.tile_first_idx.has_value() ? 1 : 0;  // the member column
    at::Tensor coords = torch::empty({n, lead + dims}, torch::kLong);
    for (int64_t i = 0; i < n; ++i) {
      if (lead == 1) coords[i][0] = static_cast<int64_t>(rng() % c.members);
      for (int d = 0; d < dims; ++d) {  // inside the bound, and a little outside
        coords[i][lead + d] = c.lo[d] - 1 + static_cast<int64_t>(rng() % (c.hi[d] - c.lo[d] + 2));
      }
    }
    const at::Tensor points = coords.narrow(1, lead, dims).contiguous();
    const at::Tensor member = coords.select(1, 0).contiguous();
    at::Tensor tile = torch::empty({n}, torch::kLong),
               local = torch::empty({n, dims}, torch::kLong);
    emulate_launch(n, [&](int64_t i) {
      tile[i] = lookup_point(c.geo, c.cells(), lead == 1 ? member.const_data_ptr<int64_t>()[i] : 0,
                             points.const_data_ptr<int64_t>() + i * dims,
                             local.mutable_data_ptr<int64_t>() + i * dims);
    });
    auto [cpu_tile, cpu_local] =
        torch_ragged::tiles_lookup(c.origins, c.tile, coords, c.lo, c.hi, c.tile_first_idx);
    EXPECT_TRUE(torch::equal(tile, cpu_tile)) << trial;
    EXPECT_TRUE(torch::equal(local, cpu_local)) << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Members, TilesEmulation, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Several" : "One"; });

}  // namespace
}  // namespace torch_ragged::testing
