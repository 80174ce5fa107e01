#pragma once

// Sparse tiles <-> dense: fixed-size tiles ("pages") of a field, each with an origin in a bound.
//
//   pages (T, *tile_size, *F), origins (T, d) integer (negative / unaligned allowed), d = 1..3;
//   the bound [full_min, full_max); tile_first_idx (B + 1,) optionally splits the tiles into B
//   members (one dense output each).
// Reading the field at a point takes the *first* tile covering it (lowest t), or fill_value where
// no tile does or outside the bound. Every op runs on the CPU and the GPU; the movers and the
// correlation are differentiable (deterministic: no atomics). `index` is the optional output of
// tiles_index for the same tiles and bound (built once, reused by every call).

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <torch_ragged/export.h>

#include <optional>
#include <string_view>
#include <tuple>

namespace torch_ragged {

// The per-cell tile lists (keys, first, tiles) that every tiles op uses to find a point's owner,
// and the fingerprint of the tiles and geometry they were built for (an index passed with other
// tiles is refused).
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tiles_index(
    const at::Tensor& origins, at::IntArrayRef tile_size, at::IntArrayRef full_min,
    at::IntArrayRef full_max, const std::optional<at::Tensor>& tile_first_idx = std::nullopt);

// [(B,) *extent, *F]: each point from its first covering tile ("first") or the sum of all covering
// tiles in tile order ("sum"); fill_value elsewhere. Pixels of tiles outside the bound are dropped.
TORCH_RAGGED_API at::Tensor tiles_to_dense(
    const at::Tensor& pages, const at::Tensor& origins, at::IntArrayRef full_min,
    at::IntArrayRef full_max, const at::Scalar& fill_value = 0, std::string_view reduce = "first",
    const std::optional<at::Tensor>& tile_first_idx = std::nullopt,
    std::optional<at::TensorList> index = std::nullopt);

// pages (T, *tile_size, *F) gathered from dense [(B,) *extent, *F] (the bound is full_min +
// extent); points outside the bound read fill_value, and with owned_only so do points another
// tile owns. The adjoint of tiles_to_dense.
TORCH_RAGGED_API at::Tensor dense_to_tiles(
    const at::Tensor& dense, const at::Tensor& origins, at::IntArrayRef tile_size,
    at::IntArrayRef full_min, const at::Scalar& fill_value = 0, bool owned_only = false,
    const std::optional<at::Tensor>& tile_first_idx = std::nullopt,
    std::optional<at::TensorList> index = std::nullopt);

// (tile (N,), local (N, d)): the owner of each point (-1 where none) and the position in it.
// With tile_first_idx, coords are (N, 1 + d): the member, then the point.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> tiles_lookup(
    const at::Tensor& origins, at::IntArrayRef tile_size, const at::Tensor& coords,
    at::IntArrayRef full_min, at::IntArrayRef full_max,
    const std::optional<at::Tensor>& tile_first_idx = std::nullopt,
    std::optional<at::TensorList> index = std::nullopt);

// Per-channel correlation of the first-wins field with an odd, centred kernel weight (*K, *F),
// reading across tile boundaries (fill_value outside the bound and where no tile is): at the
// tiles' points (out = "tiles": (T, *tile_size, *F)) or over the bound (out = "dense").
TORCH_RAGGED_API at::Tensor tiles_correlate(
    const at::Tensor& pages, const at::Tensor& origins, const at::Tensor& weight,
    at::IntArrayRef full_min, at::IntArrayRef full_max, const at::Scalar& fill_value = 0,
    std::string_view out = "tiles", const std::optional<at::Tensor>& tile_first_idx = std::nullopt,
    std::optional<at::TensorList> index = std::nullopt);

// The box filter: tiles_correlate with a size^d box of 1 / size^d.
TORCH_RAGGED_API at::Tensor tiles_box_filter(const at::Tensor& pages, const at::Tensor& origins,
                                             at::IntArrayRef full_min, at::IntArrayRef full_max,
                                             int64_t size = 3, const at::Scalar& fill_value = 0,
                                             std::string_view out = "tiles");

// (pages, origins) of the tile_size-aligned tiles of dense (*extent, *F) holding any value other
// than fill_value; origins start at full_min (default 0). tiles_to_dense gives dense back.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> tiles_from_dense(
    const at::Tensor& dense, at::IntArrayRef tile_size, const at::Scalar& fill_value = 0,
    at::OptionalIntArrayRef full_min = std::nullopt);

}  // namespace torch_ragged
