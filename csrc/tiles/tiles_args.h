#pragma once

// Argument checks, geometry and the cell index of the tiles family, shared by its CPU and CUDA
// kernels (host code; the index is built with ATen ops on the data's device).

#include <ATen/ATen.h>

#include <optional>
#include <string_view>
#include <vector>

#include "tiles/tiles_index.h"

namespace torch_ragged {

// The geometry of tiles of `tile_size` in the bound [full_min, full_max): d = 1..3 dims, tile sizes
// >= 1, full_min < full_max per dim, every count within int64. ValueError naming op.
TileGeometry tile_geometry(std::string_view op, at::IntArrayRef tile_size, at::IntArrayRef full_min,
                           at::IntArrayRef full_max);

// Checked origins (T, d) as int64 contiguous on `device`, and each tile's batch member (T,) int64
// on `device` (undefined without tile_first_idx), with the member count B (1 without).
struct TileSet {
  at::Tensor origins;
  at::Tensor member;
  int64_t members = 1;
  int64_t count() const { return origins.size(0); }
};
TileSet tile_set(std::string_view op, const at::Tensor& origins, int64_t dims,
                 const std::optional<at::Tensor>& tile_first_idx, at::Device device);

// The cell lists (tiles_index.h): built from the tile set, or the `index` a caller passed (the
// outputs of tiles_index for the same tiles and geometry), checked.
struct CellIndex {
  at::Tensor keys, first, tiles;  // int64 on the data's device
  TileCells view(const TileSet& set) const {
    return TileCells{keys.const_data_ptr<int64_t>(), first.const_data_ptr<int64_t>(),
                     tiles.const_data_ptr<int64_t>(), keys.numel(),
                     set.origins.const_data_ptr<int64_t>()};
  }
};
CellIndex build_cell_index(const TileGeometry& geo, const TileSet& set);
CellIndex cell_index(std::string_view op, const TileGeometry& geo, const TileSet& set,
                     const std::optional<at::TensorList>& index);

// What an index was built for: (a hash of the geometry and tile count, a hash of the origins and
// members) as int64 (2,) on the origins' device. tiles_index returns it as the index's fourth
// tensor; cell_index refuses an index whose fingerprint differs (built for other tiles, another
// tile size or bound), which would otherwise give a wrong field without complaint.
at::Tensor index_fingerprint(const TileGeometry& geo, const TileSet& set);

// Every tile's box [origin - radius, origin + tile + radius) fits int64 (ValueError naming op):
// the kernels add tile sizes and radii to origins. Every op checks its tiles (radius 0 but for
// the halo's).
void check_boxes_fit(std::string_view op, const TileGeometry& geo, const TileSet& set,
                     at::IntArrayRef radius = {});

// pages (T, *tile, *F) -> the tile sizes (checked against origins' width).
std::vector<int64_t> page_tile_size(std::string_view op, const at::Tensor& pages, int64_t dims);

// "first" -> true, "sum" -> false; ValueError otherwise.
bool is_first_wins(std::string_view op, std::string_view reduce);

// int[] -> vector with a check of its length.
std::vector<int64_t> dim_list(std::string_view op, std::string_view arg, at::IntArrayRef values,
                              int64_t dims);

// Everything a tiles kernel needs, checked, per op. Output rows are points (F elements each).
struct GatherPlan {
  TileGeometry geo;
  TileSet set;
  CellIndex cells;
  at::Tensor source;               // pages or dense, contiguous
  std::vector<int64_t> out_sizes;  // the output's shape
  int64_t rows = 0;                // output points
  int64_t row_elems = 1;           // F: elements per point
  std::vector<char> fill;          // the fill value's bytes in the source's dtype
};

GatherPlan plan_tiles_to_dense(std::string_view op, const at::Tensor& pages,
                               const at::Tensor& origins, at::IntArrayRef full_min,
                               at::IntArrayRef full_max, const at::Scalar& fill_value,
                               const std::optional<at::Tensor>& tile_first_idx,
                               const std::optional<at::TensorList>& index);
GatherPlan plan_dense_to_tiles(std::string_view op, const at::Tensor& dense,
                               const at::Tensor& origins, at::IntArrayRef tile_size,
                               at::IntArrayRef full_min, const at::Scalar& fill_value,
                               const std::optional<at::Tensor>& tile_first_idx,
                               const std::optional<at::TensorList>& index);
// tiles_halo: also the radius and the box (tile + 2 radius) per dim.
GatherPlan plan_tiles_halo(std::string_view op, const at::Tensor& pages, const at::Tensor& origins,
                           at::IntArrayRef radius, at::IntArrayRef full_min,
                           at::IntArrayRef full_max, const at::Scalar& fill_value,
                           const std::optional<at::Tensor>& tile_first_idx,
                           const std::optional<at::TensorList>& index, HaloFromOwner& halo);

// tiles_halo_backward: the tiles' plan (output: page rows; source: grad_halo) and the boxes' own
// geometry and cell lists (a box set has another tile size, so other cells).
struct HaloAdjointPlan {
  GatherPlan tiles;
  TileGeometry box_geo;
  TileSet boxes;
  CellIndex box_cells;
  HaloAdjoint adjoint() const;
};
HaloAdjointPlan plan_tiles_halo_backward(std::string_view op, const at::Tensor& grad_halo,
                                         const at::Tensor& origins, at::IntArrayRef radius,
                                         at::IntArrayRef full_min, at::IntArrayRef full_max,
                                         const std::optional<at::Tensor>& tile_first_idx,
                                         const std::optional<at::TensorList>& index);

// tiles_depthwise_correlate, checked: input (N, *S, C) and weight (*K, C) contiguous, padding
// 0 <= p < K, out = S + 2p - K + 1 >= 0 per dim.
struct CorrelatePlan {
  at::Tensor input, weight;
  int dims = 0;
  int64_t batch = 0, channels = 0;
  int64_t size[kMaxTileDims] = {1, 1, 1}, taps[kMaxTileDims] = {1, 1, 1};
  int64_t pad[kMaxTileDims] = {0, 0, 0}, out[kMaxTileDims] = {1, 1, 1};
  std::vector<int64_t> out_sizes;
};
CorrelatePlan plan_depthwise_correlate(std::string_view op, const at::Tensor& input,
                                       const at::Tensor& weight, at::IntArrayRef padding);

struct LookupPlan {
  TileGeometry geo;
  TileSet set;
  CellIndex cells;
  at::Tensor points;      // (N, d) int64 contiguous
  at::Tensor member;      // (N,) int64, or undefined: one member
  at::Tensor key_owners;  // TileCells::key_owners where the key space is small next to the points
  TileCells cells_view() const {
    TileCells view = cells.view(set);
    if (key_owners.defined()) view.key_owners = key_owners.const_data_ptr<int64_t>();
    return view;
  }
};
LookupPlan plan_tiles_lookup(std::string_view op, const at::Tensor& origins,
                             at::IntArrayRef tile_size, const at::Tensor& coords,
                             at::IntArrayRef full_min, at::IntArrayRef full_max,
                             const std::optional<at::Tensor>& tile_first_idx,
                             const std::optional<at::TensorList>& index);

}  // namespace torch_ragged
