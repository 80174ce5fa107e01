#include "tiles/tiles_args.h"

#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "common/checks.h"
#include "common/fill.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

std::vector<int64_t> dim_list(std::string_view op, std::string_view arg, at::IntArrayRef values,
                              int64_t dims) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(values.size()) == dims, "torch_ragged.", op, ": ", arg,
                    " must have one entry per tile dim (", dims, "), got ", values);
  return values.vec();
}

TileGeometry tile_geometry(std::string_view op, at::IntArrayRef tile_size, at::IntArrayRef full_min,
                           at::IntArrayRef full_max) {
  const int64_t dims = static_cast<int64_t>(tile_size.size());
  TORCH_CHECK_VALUE(dims >= 1 && dims <= kMaxTileDims, "torch_ragged.", op,
                    ": tiles have 1, 2 or 3 dims, got tile_size ", tile_size);
  dim_list(op, "full_min", full_min, dims);
  dim_list(op, "full_max", full_max, dims);
  TileGeometry geo{};
  geo.dims = static_cast<int>(dims);
  geo.tile_elems = geo.bound_elems = geo.num_cells = 1;
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK_VALUE(tile_size[d] >= 1, "torch_ragged.", op, ": tile sizes must be >= 1, got ",
                      tile_size);
    int64_t extent = 0;
    TORCH_CHECK_VALUE(
        full_min[d] < full_max[d] && !__builtin_sub_overflow(full_max[d], full_min[d], &extent),
        "torch_ragged.", op, ": the bound needs full_min < full_max in every dim, got ", full_min,
        " and ", full_max);
    geo.tile[d] = tile_size[d];
    geo.lo[d] = full_min[d];
    geo.extent[d] = extent;
    geo.cells[d] = extent / tile_size[d] + (extent % tile_size[d] != 0);
    TORCH_CHECK_VALUE(!c10::mul_overflows(geo.tile_elems, tile_size[d], &geo.tile_elems) &&
                          !c10::mul_overflows(geo.bound_elems, extent, &geo.bound_elems) &&
                          !c10::mul_overflows(geo.num_cells, geo.cells[d], &geo.num_cells),
                      "torch_ragged.", op, ": the tile or the bound has more than 2^63 - 1 points");
  }
  return geo;
}

TileSet tile_set(std::string_view op, const at::Tensor& origins, int64_t dims,
                 const std::optional<at::Tensor>& tile_first_idx, at::Device device) {
  check_index_tensor(op, "origins", origins, 2);
  TORCH_CHECK_VALUE(origins.size(1) == dims, "torch_ragged.", op, ": origins must be (T, ", dims,
                    "), one origin per tile, got shape ", origins.sizes());
  TORCH_CHECK_VALUE(origins.is_cpu() || origins.device() == device, "torch_ragged.", op,
                    ": origins must be on the CPU or on ", device, ", got ", origins.device());
  TileSet set{origins.to(device, at::kLong).contiguous(), at::Tensor(), 1};
  if (tile_first_idx.has_value() && tile_first_idx->defined()) {
    const at::Tensor& first = *tile_first_idx;
    check_index_tensor(op, "tile_first_idx", first, 1);
    TORCH_CHECK_VALUE(first.is_cpu() || first.device() == device, "torch_ragged.", op,
                      ": tile_first_idx must be on the CPU or on ", device, ", got ",
                      first.device());
    TORCH_CHECK_VALUE(first.size(0) >= 1, "torch_ragged.", op,
                      ": tile_first_idx needs B + 1 >= 1 entries");
    set.members = first.size(0) - 1;
    // segment_ids checks that tile_first_idx rises from 0 to T.
    set.member = ops::segment_ids(first, c10::SymInt(set.count())).to(device);
  }
  return set;
}

namespace {

// floor(a / b) for b > 0, in 128 bits (origins far outside the bound must not wrap).
__int128 floor_div(__int128 a, int64_t b) {
  const __int128 q = a / b;
  return q * b > a ? q - 1 : q;
}

// The cells [first, last] of [0, cells) that a tile overlaps along one dim (inside: any at all):
// floor(rel / tile) to floor((rel + tile - 1) / tile) for its origin rel = origin - lo points past
// the bound's start (tile > 0), clamped. One 64-bit division (a shift for a power of two) where
// rel fits in 64 bits -- then the last cell fits too (it exceeds the first only where tile > 1) --
// and 128-bit arithmetic where it does not (a 128-bit division per cell cost ~half of a 39k-tile
// index).
struct CellRange {
  int64_t first, last;
  bool inside;
};

C10_ALWAYS_INLINE CellRange cell_range(int64_t origin, int64_t lo, int64_t tile, int64_t cells) {
  int64_t rel = 0;
  if (C10_UNLIKELY(__builtin_sub_overflow(origin, lo, &rel))) {
    const __int128 wide = static_cast<__int128>(origin) - lo;
    const __int128 first = floor_div(wide, tile), last = floor_div(wide + tile - 1, tile);
    return {static_cast<int64_t>(std::max<__int128>(first, 0)),
            static_cast<int64_t>(std::min<__int128>(last, cells - 1)), last >= 0 && first < cells};
  }
  int64_t q = 0, r = 0;
  if ((tile & (tile - 1)) == 0) {  // floor division and modulo of two's complement
    q = rel >> __builtin_ctzll(static_cast<uint64_t>(tile));
    r = rel & (tile - 1);
  } else {
    q = rel / tile;
    r = rel % tile;
    if (r < 0) {
      --q;
      r += tile;
    }
  }
  const int64_t last = q + (r != 0);
  return {std::max<int64_t>(q, 0), std::min(last, cells - 1), last >= 0 && q < cells};
}

// The cell lists where no cell holds two tiles (aligned tiles that do not overlap: the common
// case): one pass over the tiles storing each id at its cell, nullopt (the counting sort) at the
// first cell already taken (a tile never visits a cell twice, so that is a second tile), then the
// table swept. The table is int32 (half the cache footprint of random stores) where ids fit.
// for_each_key as counted_cell_index's.
template <typename Id, typename ForEachKey>
std::optional<CellIndex> single_tile_cells(int64_t count, int64_t entries,
                                           const ForEachKey& for_each_key,
                                           const at::TensorOptions& longs) {
  std::vector<Id> owner(entries, Id{-1});
  int64_t listed = 0;
  bool single = true;
  for (int64_t t = 0; t < count && single; ++t) {
    for_each_key(t, [&](int64_t key) {
      single &= owner[key] < 0;
      owner[key] = static_cast<Id>(t);
      ++listed;
    });
  }
  if (!single) return std::nullopt;
  // one slot past the end: each key is written, and kept by moving on where its cell has a tile
  at::Tensor keys = at::empty({listed + 1}, longs), tiles = at::empty({listed + 1}, longs);
  int64_t *k = keys.mutable_data_ptr<int64_t>(), *tile = tiles.mutable_data_ptr<int64_t>();
  int64_t kept = 0;
  for (int64_t key = 0; key < entries; ++key) {
    k[kept] = key;
    tile[kept] = owner[key];
    kept += owner[key] >= 0;
  }
  at::Tensor first =
      at::empty({listed + 1}, longs);  // 0, 1, ...: a loop (at::arange wakes the pool)
  std::iota(first.mutable_data_ptr<int64_t>(), first.mutable_data_ptr<int64_t>() + listed + 1,
            int64_t{0});
  return CellIndex{keys.narrow(0, 0, listed), first, tiles.narrow(0, 0, listed)};
}

// counted_cell_index for tiles of Dims dims, the table's `entries` checked by the caller.
template <int64_t Dims>
std::optional<CellIndex> counted_cell_index_of(const TileGeometry& geo, const TileSet& set,
                                               int64_t entries) {
  const int64_t count = set.count();
  const int64_t* origins = set.origins.const_data_ptr<int64_t>();
  const int64_t* member = set.member.defined() ? set.member.const_data_ptr<int64_t>() : nullptr;
  // the geometry in locals: the compiler cannot keep it in registers across the table's stores
  int64_t lo[Dims], tile[Dims], cells[Dims];
  for (int64_t d = 0; d < Dims; ++d) {
    lo[d] = geo.lo[d];
    tile[d] = geo.tile[d];
    cells[d] = geo.cells[d];
  }
  const int64_t num_cells = geo.num_cells;
  // Calls visit(key) for each in-bound cell tile t overlaps (at most 2 per dim), row-major.
  auto for_each_key = [&](int64_t t, auto&& visit) {
    int64_t first[kMaxTileDims] = {0, 0, 0}, last[kMaxTileDims] = {0, 0, 0};
    for (int64_t d = 0; d < Dims; ++d) {
      const CellRange range = cell_range(origins[t * Dims + d], lo[d], tile[d], cells[d]);
      if (!range.inside) return;  // wholly outside the bound
      first[d] = range.first;
      last[d] = range.last;
    }
    const int64_t base = (member != nullptr ? member[t] : 0) * num_cells;
    for (int64_t a = first[0]; a <= last[0]; ++a) {
      for (int64_t b = first[1]; b <= last[1]; ++b) {
        for (int64_t c = first[2]; c <= last[2]; ++c) {
          if constexpr (Dims == 1) visit(base + a);
          if constexpr (Dims == 2) visit(base + a * cells[1] + b);
          if constexpr (Dims == 3) visit(base + (a * cells[1] + b) * cells[2] + c);
        }
      }
    }
  };
  const auto longs = set.origins.options();
  auto single = count < std::numeric_limits<int32_t>::max()
                    ? single_tile_cells<int32_t>(count, entries, for_each_key, longs)
                    : single_tile_cells<int64_t>(count, entries, for_each_key, longs);
  if (single) return *std::move(single);
  std::vector<int64_t> start(entries + 1, 0);  // per key: its list's start, after the prefix sum
  int64_t listed = 0, nonempty = 0;
  for (int64_t t = 0; t < count; ++t) {
    for_each_key(t, [&](int64_t key) {
      nonempty += start[key + 1]++ == 0;
      ++listed;
    });
  }
  at::Tensor keys = at::empty({nonempty}, longs), first = at::empty({nonempty + 1}, longs);
  at::Tensor tiles = at::empty({listed}, longs);
  int64_t *k = keys.mutable_data_ptr<int64_t>(), *f = first.mutable_data_ptr<int64_t>();
  f[0] = 0;
  for (int64_t key = 0; key < entries; ++key) {
    if (start[key + 1] > 0) {
      *k++ = key;
      *(f + 1) = *f + start[key + 1];
      ++f;
    }
    start[key + 1] += start[key];
  }
  int64_t* out = tiles.mutable_data_ptr<int64_t>();
  for (int64_t t = 0; t < count; ++t) {  // ascending t: each list comes out in ascending order
    for_each_key(t, [&](int64_t key) { out[start[key]++] = t; });
  }
  return CellIndex{keys, first, tiles};
}

// The CPU cell lists by a counting sort over a dense (member, cell) table: O(cells + T), where
// the ATen route (keys per corner, stable sort, unique) costs ~40 small ops (0.8 ms for 4096
// tiles; tiles_halo_backward builds one per call). Only where the table is small next to the
// tiles; nullopt otherwise (huge sparse bounds, GPU tensors).
std::optional<CellIndex> counted_cell_index(const TileGeometry& geo, const TileSet& set) {
  const int64_t count = set.count(), dims = geo.dims;
  int64_t entries = 0;
  if (!set.origins.is_cpu() || c10::mul_overflows(set.members, geo.num_cells, &entries) ||
      entries > 4 * (count << dims) + (int64_t{1} << 16)) {
    return std::nullopt;
  }
  if (dims == 1) return counted_cell_index_of<1>(geo, set, entries);
  if (dims == 2) return counted_cell_index_of<2>(geo, set, entries);
  return counted_cell_index_of<3>(geo, set, entries);
}

}  // namespace

CellIndex build_cell_index(const TileGeometry& geo, const TileSet& set) {
  if (auto counted = counted_cell_index(geo, set)) return *std::move(counted);
  const at::Tensor& origins = set.origins;
  const int64_t count = set.count(), dims = geo.dims;
  const auto longs = origins.options();
  const at::Tensor lo = at::tensor(at::IntArrayRef(geo.lo, dims), at::kLong).to(origins.device());
  const at::Tensor tile =
      at::tensor(at::IntArrayRef(geo.tile, dims), at::kLong).to(origins.device());
  const at::Tensor cells =
      at::tensor(at::IntArrayRef(geo.cells, dims), at::kLong).to(origins.device());
  // The first and the last cell each tile overlaps, per dim (a tile spans at most two).
  const at::Tensor rel = origins - lo;
  const at::Tensor first_cell = at::div(rel, tile, "floor");
  const at::Tensor last_cell = at::div(rel + tile - 1, tile, "floor");
  // Candidates: one per (tile, corner), tile-major so that a stable sort by key keeps the tiles of
  // each cell in ascending order. A corner taking the last cell where it equals the first is a
  // duplicate and is dropped; so are cells outside the bound.
  std::vector<at::Tensor> keys, keep;
  for (int64_t corner = 0; corner < (int64_t{1} << dims); ++corner) {
    at::Tensor key = set.member.defined() ? set.member.clone() : at::zeros({count}, longs);
    at::Tensor valid = at::ones({count}, longs.dtype(at::kBool));
    for (int64_t d = 0; d < dims; ++d) {
      const bool upper = (corner >> d) & 1;
      const at::Tensor c = (upper ? last_cell : first_cell).select(1, d);
      valid = valid & (c >= 0) & (c < cells[d]);
      if (upper) valid = valid & (last_cell.select(1, d) != first_cell.select(1, d));
      key = key * geo.cells[d] + c;
    }
    keys.push_back(key);
    keep.push_back(valid);
  }
  const at::Tensor all_keys = at::stack(keys, 1).reshape(-1);
  const at::Tensor all_keep = at::stack(keep, 1).reshape(-1);
  const at::Tensor all_tiles =
      at::arange(count, longs).unsqueeze(1).expand({count, int64_t{1} << dims}).reshape(-1);
  const at::Tensor kept_keys = all_keys.masked_select(all_keep);
  const at::Tensor kept_tiles = all_tiles.masked_select(all_keep);
  const auto [sorted_keys, order] = at::sort(kept_keys, /*stable=*/true, 0, false);
  const auto [unique_keys, inverse, counts] =
      at::unique_consecutive(sorted_keys, false, /*return_counts=*/true);
  at::Tensor first = at::zeros({unique_keys.numel() + 1}, longs);
  first.slice(0, 1).copy_(counts.cumsum(0));
  return CellIndex{unique_keys.contiguous(), first, kept_tiles.index_select(0, order)};
}

namespace {

// Whether keys / first / tiles (int64, contiguous) have the shape of the cell lists of `count`
// tiles with keys below key_limit (tiles_index.h): keys rising, first rising from 0 to the number
// of entries, every entry a tile. On the CPU one pass (the ATen form cost ~10 small ops, a
// sizeable part of a 0.3 ms dense_to_tiles); elsewhere ATen reductions (a few host reads).
bool index_fits(const at::Tensor& keys, const at::Tensor& first, const at::Tensor& tiles,
                int64_t count, int64_t key_limit) {
  const int64_t num_keys = keys.numel(), entries = tiles.numel();
  if (first.numel() != num_keys + 1) return false;
  if (keys.is_cpu()) {
    const int64_t* k = keys.const_data_ptr<int64_t>();
    const int64_t* f = first.const_data_ptr<int64_t>();
    const int64_t* t = tiles.const_data_ptr<int64_t>();
    if (f[0] != 0 || f[num_keys] != entries) return false;
    for (int64_t i = 0; i < num_keys; ++i) {
      if (k[i] < 0 || k[i] >= key_limit || (i > 0 && k[i] <= k[i - 1]) || f[i + 1] < f[i]) {
        return false;
      }
    }
    return std::all_of(t, t + entries, [&](int64_t tile) { return tile >= 0 && tile < count; });
  }
  return first[0].item<int64_t>() == 0 && first[-1].item<int64_t>() == entries &&
         (num_keys < 2 || (keys.diff() > 0).all().item<bool>()) &&
         (first.diff() >= 0).all().item<bool>() &&
         (entries == 0 || ((tiles >= 0) & (tiles < count)).all().item<bool>()) &&
         (num_keys == 0 || ((keys >= 0) & (keys < key_limit)).all().item<bool>());
}

}  // namespace

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // odd: multiplying by it is a bijection

uint64_t mixed(uint64_t hash, uint64_t value) {
  return (hash ^ (value + kGolden + (hash << 6) + (hash >> 2))) * kGolden;
}

// sum_i values[i] * (2 (first + i) + 1) * kGolden mod 2^64: a change of any one value changes it.
uint64_t weighted_sum(const at::Tensor& values, int64_t first) {
  if (values.numel() == 0) return 0;
  if (values.is_cpu()) {
    const at::Tensor flat = values.contiguous();
    const int64_t* v = flat.const_data_ptr<int64_t>();
    uint64_t sum = 0;
    for (int64_t i = 0; i < flat.numel(); ++i) {
      sum += static_cast<uint64_t>(v[i]) * ((2 * static_cast<uint64_t>(first + i) + 1) * kGolden);
    }
    return sum;
  }
  // The same sum in int64 arithmetic (two's complement wraps as uint64 does), on the device.
  const at::Tensor weights = (at::arange(first, first + values.numel(), values.options()) * 2 + 1) *
                             static_cast<int64_t>(kGolden);
  return static_cast<uint64_t>((values.reshape(-1) * weights).sum().item<int64_t>());
}

}  // namespace

namespace {

// The least and the greatest value of each column of a (count >= 1, Dims) int64 row-major table.
template <int64_t Dims>
void column_bounds(const int64_t* rows, int64_t count, int64_t* low, int64_t* high) {
  std::copy(rows, rows + Dims, low);
  std::copy(rows, rows + Dims, high);
  for (int64_t t = 1; t < count; ++t) {
    for (int64_t d = 0; d < Dims; ++d) {
      low[d] = std::min(low[d], rows[t * Dims + d]);
      high[d] = std::max(high[d], rows[t * Dims + d]);
    }
  }
}

}  // namespace

at::Tensor index_fingerprint(const TileGeometry& geo, const TileSet& set) {
  uint64_t shape = mixed(mixed(0, static_cast<uint64_t>(geo.dims)), set.count());
  shape = mixed(shape, static_cast<uint64_t>(set.members));
  for (int d = 0; d < geo.dims; ++d) {
    shape = mixed(mixed(mixed(shape, geo.tile[d]), geo.lo[d]), geo.extent[d]);
  }
  uint64_t content = weighted_sum(set.origins, 0);
  if (set.member.defined()) content += weighted_sum(set.member, set.origins.numel());
  return at::tensor({static_cast<int64_t>(shape), static_cast<int64_t>(content)}, at::kLong)
      .to(set.origins.device());
}

void check_boxes_fit(std::string_view op, const TileGeometry& geo, const TileSet& set,
                     at::IntArrayRef radius) {
  if (set.count() == 0) return;
  int64_t low[kMaxTileDims], high[kMaxTileDims];
  if (set.origins.is_cpu()) {  // one loop: amin / amax(0) of many origins wake the thread pool
    const int64_t* origin = set.origins.const_data_ptr<int64_t>();
    const int64_t count = set.count();
    if (geo.dims == 1) column_bounds<1>(origin, count, low, high);
    if (geo.dims == 2) column_bounds<2>(origin, count, low, high);
    if (geo.dims == 3) column_bounds<3>(origin, count, low, high);
  } else {  // amin / amax, not aminmax(dim): that one enters a parallel region even for a few
    const at::Tensor lows = set.origins.amin(0).cpu(), highs = set.origins.amax(0).cpu();
    std::copy_n(lows.const_data_ptr<int64_t>(), geo.dims, low);
    std::copy_n(highs.const_data_ptr<int64_t>(), geo.dims, high);
  }
  for (int d = 0; d < geo.dims; ++d) {
    int64_t start = 0, end = 0;
    const int64_t r = radius.empty() ? 0 : radius[d];
    TORCH_CHECK_VALUE(
        !__builtin_sub_overflow(low[d], r, &start) &&
            !c10::add_overflows(high[d], geo.tile[d], &end) && !c10::add_overflows(end, r, &end),
        "torch_ragged.", op, ": origins from ", low[d], " to ", high[d], " in dim ", d,
        " with tile size ", geo.tile[d], " and radius ", r, " put a box outside the int64 range");
  }
}

CellIndex cell_index(std::string_view op, const TileGeometry& geo, const TileSet& set,
                     const std::optional<at::TensorList>& index) {
  if (!index.has_value()) return build_cell_index(geo, set);
  TORCH_CHECK_VALUE(index->size() == 4, "torch_ragged.", op,
                    ": index must be the 4 tensors tiles_index returns, got ", index->size());
  const at::Device device = set.origins.device();
  std::array<at::Tensor, 4> parts;
  for (size_t i = 0; i < 4; ++i) {
    check_index_tensor(op, "index", (*index)[i], 1);
    check_index_device(op, "index", (*index)[i], device);
    parts[i] = (*index)[i].to(device, at::kLong).contiguous();
  }
  TORCH_CHECK_VALUE(at::equal(parts[3], index_fingerprint(geo, set)), "torch_ragged.", op,
                    ": index was built for other tiles, another tile size or another bound (its "
                    "fingerprint differs): pass the tensors tiles_index returned for the same "
                    "origins, tile size, bounds and tile_first_idx");
  // A damaged index would send the kernels out of bounds: check it against the tiles.
  const at::Tensor &keys = parts[0], &first = parts[1], &tiles = parts[2];
  TORCH_CHECK_VALUE(
      index_fits(keys, first, tiles, set.count(), set.members * geo.num_cells), "torch_ragged.", op,
      ": index does not fit these tiles and bounds (pass the tensors tiles_index returned for the "
      "same origins, tile size, bounds and tile_first_idx)");
  return CellIndex{keys, first, tiles};
}

std::vector<int64_t> page_tile_size(std::string_view op, const at::Tensor& pages, int64_t dims) {
  check_defined(op, "pages", pages);
  TORCH_CHECK_VALUE(pages.dim() >= 1 + dims, "torch_ragged.", op,
                    ": pages must be (T, *tile_size (", dims, " dims), *F), got shape ",
                    pages.sizes());
  return pages.sizes().slice(1, dims).vec();
}

bool is_first_wins(std::string_view op, std::string_view reduce) {
  TORCH_CHECK_VALUE(reduce == "first" || reduce == "sum", "torch_ragged.", op,
                    ": reduce must be \"first\" or \"sum\", got \"", reduce, "\"");
  return reduce == "first";
}

namespace {

std::vector<int64_t> concat(std::vector<int64_t> head, at::IntArrayRef tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace

GatherPlan plan_tiles_to_dense(std::string_view op, const at::Tensor& pages,
                               const at::Tensor& origins, at::IntArrayRef full_min,
                               at::IntArrayRef full_max, const at::Scalar& fill_value,
                               const std::optional<at::Tensor>& tile_first_idx,
                               const std::optional<at::TensorList>& index) {
  check_defined(op, "origins", origins);
  const int64_t dims = origins.dim() == 2 ? origins.size(1) : 0;
  const std::vector<int64_t> tile = page_tile_size(op, pages, dims);
  GatherPlan plan;
  plan.geo = tile_geometry(op, tile, full_min, full_max);
  plan.set = tile_set(op, origins, dims, tile_first_idx, pages.device());
  TORCH_CHECK_VALUE(pages.size(0) == plan.set.count(), "torch_ragged.", op,
                    ": pages and origins disagree: ", pages.size(0), " pages, ", plan.set.count(),
                    " origins");
  check_boxes_fit(op, plan.geo, plan.set);
  plan.cells = cell_index(op, plan.geo, plan.set, index);
  plan.source = pages.contiguous();
  const at::IntArrayRef feature = pages.sizes().slice(1 + dims);
  std::vector<int64_t> lead;
  if (plan.set.member.defined()) lead.push_back(plan.set.members);
  lead.insert(lead.end(), plan.geo.extent, plan.geo.extent + dims);
  plan.out_sizes = concat(lead, feature);
  check_numel_fits(op, "the dense output", plan.out_sizes);
  plan.rows = plan.set.members * plan.geo.bound_elems;
  plan.row_elems = c10::multiply_integers(feature);
  plan.fill = fill_value_bytes(op, "fill_value", fill_value, pages.scalar_type());
  return plan;
}

GatherPlan plan_dense_to_tiles(std::string_view op, const at::Tensor& dense,
                               const at::Tensor& origins, at::IntArrayRef tile_size,
                               at::IntArrayRef full_min, const at::Scalar& fill_value,
                               const std::optional<at::Tensor>& tile_first_idx,
                               const std::optional<at::TensorList>& index) {
  check_defined(op, "dense", dense);
  const int64_t dims = static_cast<int64_t>(tile_size.size());
  const bool batched = tile_first_idx.has_value() && tile_first_idx->defined();
  const int64_t lead = batched ? 1 : 0;
  TORCH_CHECK_VALUE(dense.dim() >= lead + dims, "torch_ragged.", op, ": dense must be (",
                    batched ? "B, " : "", "*extent (", dims, " dims), *F), got shape ",
                    dense.sizes());
  dim_list(op, "full_min", full_min, dims);
  std::vector<int64_t> full_max(dims);
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK_VALUE(!c10::add_overflows(full_min[d], dense.size(lead + d), &full_max[d]),
                      "torch_ragged.", op, ": full_min ", full_min, " plus the extent of dense ",
                      dense.sizes(), " exceeds 2^63 - 1");
  }
  GatherPlan plan;
  plan.geo = tile_geometry(op, tile_size, full_min, full_max);
  plan.set = tile_set(op, origins, dims, tile_first_idx, dense.device());
  TORCH_CHECK_VALUE(!batched || dense.size(0) == plan.set.members, "torch_ragged.", op,
                    ": dense holds ", dense.size(0), " members but tile_first_idx describes ",
                    plan.set.members);
  check_boxes_fit(op, plan.geo, plan.set);
  plan.cells = cell_index(op, plan.geo, plan.set, index);
  plan.source = dense.contiguous();
  const at::IntArrayRef feature = dense.sizes().slice(lead + dims);
  plan.out_sizes = concat(concat({plan.set.count()}, tile_size), feature);
  check_numel_fits(op, "the pages", plan.out_sizes);
  plan.rows = plan.set.count() * plan.geo.tile_elems;
  plan.row_elems = c10::multiply_integers(feature);
  plan.fill = fill_value_bytes(op, "fill_value", fill_value, dense.scalar_type());
  return plan;
}

GatherPlan plan_tiles_halo(std::string_view op, const at::Tensor& pages, const at::Tensor& origins,
                           at::IntArrayRef radius, at::IntArrayRef full_min,
                           at::IntArrayRef full_max, const at::Scalar& fill_value,
                           const std::optional<at::Tensor>& tile_first_idx,
                           const std::optional<at::TensorList>& index, HaloFromOwner& halo) {
  GatherPlan plan = plan_tiles_to_dense(op, pages, origins, full_min, full_max, fill_value,
                                        tile_first_idx, index);
  const int64_t dims = plan.geo.dims;
  dim_list(op, "radius", radius, dims);
  std::vector<int64_t> box(dims);
  halo.box_elems = 1;
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK_VALUE(radius[d] >= 0, "torch_ragged.", op, ": radius must be >= 0, got ", radius);
    int64_t diameter = 0;
    TORCH_CHECK_VALUE(!c10::mul_overflows(radius[d], int64_t{2}, &diameter) &&
                          !c10::add_overflows(plan.geo.tile[d], diameter, &box[d]) &&
                          !c10::mul_overflows(halo.box_elems, box[d], &halo.box_elems),
                      "torch_ragged.", op, ": a tile with its halo of radius ", radius,
                      " would have more than 2^63 - 1 points");
    halo.radius[d] = radius[d];
    halo.box[d] = box[d];
  }
  check_boxes_fit(op, plan.geo, plan.set, radius);
  plan.out_sizes = concat(concat({plan.set.count()}, box), pages.sizes().slice(1 + dims));
  // One halo page must fit even with no tiles: the kernels size their work per page.
  check_numel_fits(op, "one halo page", at::IntArrayRef(plan.out_sizes).slice(1));
  check_numel_fits(op, "the halo pages", plan.out_sizes);
  plan.rows = plan.set.count() * halo.box_elems;
  return plan;
}

namespace {

// TileCells::key_owners of the keys' cells on the CPU: one pass over the keys.
void fill_key_owners(const TileGeometry& geo, const TileSet& set, const CellIndex& cells,
                     int64_t* owners) {
  const int64_t* keys = cells.keys.const_data_ptr<int64_t>();
  const int64_t* first = cells.first.const_data_ptr<int64_t>();
  const int64_t* tiles = cells.tiles.const_data_ptr<int64_t>();
  const int64_t* origins = set.origins.const_data_ptr<int64_t>();
  for (int64_t slot = 0; slot < cells.keys.numel(); ++slot) {
    const int64_t t = tiles[first[slot]];
    int64_t cell = keys[slot] % geo.num_cells;
    bool aligned = true;
    for (int d = geo.dims - 1; d >= 0; --d) {
      aligned &= origins[t * geo.dims + d] == geo.lo[d] + (cell % geo.cells[d]) * geo.tile[d];
      cell /= geo.cells[d];
    }
    owners[keys[slot]] = aligned ? t : -2 - slot;
  }
}

// The same with ATen ops (on the index's device).
at::Tensor key_owner_values(const TileGeometry& geo, const TileSet& set, const CellIndex& cells) {
  const int64_t keys = cells.keys.numel();
  const at::Tensor owner = cells.tiles.index_select(0, cells.first.narrow(0, 0, keys));
  at::Tensor cell = cells.keys.remainder(geo.num_cells);
  at::Tensor aligned = at::ones({keys}, cells.keys.options().dtype(at::kBool));
  for (int d = geo.dims - 1; d >= 0; --d) {
    const at::Tensor start = cell.remainder(geo.cells[d]) * geo.tile[d] + geo.lo[d];
    aligned = aligned.logical_and(set.origins.select(1, d).index_select(0, owner).eq(start));
    cell = cell.div(geo.cells[d], "floor");
  }
  return at::where(aligned, owner, -2 - at::arange(keys, cells.keys.options()));
}

// TileCells::key_owners for a lookup of `points` points: worth its O(key space) build when there
// are at least 256 points, the key space is at most 8 entries per point or key (each point then
// saves a binary search of ~log2(keys) dependent loads) and at most 2^24 keys (128 MB); undefined
// otherwise.
at::Tensor key_owners_for(const TileGeometry& geo, const TileSet& set, const CellIndex& cells,
                          int64_t points) {
  constexpr int64_t kMaxKeySpace = int64_t{1} << 24;
  if (points < 256 || set.members < 1 || geo.num_cells > kMaxKeySpace / set.members) return {};
  const int64_t key_space = set.members * geo.num_cells, keys = cells.keys.numel();
  if (key_space > 8 * (points + keys)) return {};
  if (cells.keys.is_cpu()) {
    at::Tensor owners = at::empty({key_space}, cells.keys.options());
    std::fill_n(owners.mutable_data_ptr<int64_t>(), key_space, int64_t{-1});  // no pool wake-up
    fill_key_owners(geo, set, cells, owners.mutable_data_ptr<int64_t>());
    return owners;
  }
  at::Tensor owners = at::full({key_space}, -1, cells.keys.options());
  owners.index_put_({cells.keys}, key_owner_values(geo, set, cells));
  return owners;
}

}  // namespace

LookupPlan plan_tiles_lookup(std::string_view op, const at::Tensor& origins,
                             at::IntArrayRef tile_size, const at::Tensor& coords,
                             at::IntArrayRef full_min, at::IntArrayRef full_max,
                             const std::optional<at::Tensor>& tile_first_idx,
                             const std::optional<at::TensorList>& index) {
  const int64_t dims = static_cast<int64_t>(tile_size.size());
  check_index_tensor(op, "coords", coords, 2);
  const bool batched = tile_first_idx.has_value() && tile_first_idx->defined();
  const int64_t width = dims + (batched ? 1 : 0);
  TORCH_CHECK_VALUE(coords.size(1) == width, "torch_ragged.", op, ": coords must be (N, ", width,
                    ")", batched ? " (the member, then the point)" : " (one point per row)",
                    ", got shape ", coords.sizes());
  LookupPlan plan;
  plan.geo = tile_geometry(op, tile_size, full_min, full_max);
  plan.set = tile_set(op, origins, dims, tile_first_idx, coords.device());
  check_boxes_fit(op, plan.geo, plan.set);
  plan.cells = cell_index(op, plan.geo, plan.set, index);
  const at::Tensor longs = coords.to(at::kLong);
  plan.points = longs.slice(1, width - dims).contiguous();
  if (batched) {
    plan.member = longs.select(1, 0).contiguous();
    TORCH_CHECK_INDEX(
        plan.member.numel() == 0 ||
            ((plan.member >= 0) & (plan.member < plan.set.members)).all().item<bool>(),
        "torch_ragged.", op, ": coords[:, 0] (the member) must be in [0, ", plan.set.members, ")");
  }
  plan.key_owners = key_owners_for(plan.geo, plan.set, plan.cells, plan.points.size(0));
  return plan;
}

HaloAdjoint HaloAdjointPlan::adjoint() const {
  return HaloAdjoint{
      tiles.geo, tiles.cells.view(tiles.set), box_geo, box_cells.view(boxes),
      tiles.set.member.defined() ? tiles.set.member.const_data_ptr<int64_t>() : nullptr};
}

HaloAdjointPlan plan_tiles_halo_backward(std::string_view op, const at::Tensor& grad_halo,
                                         const at::Tensor& origins, at::IntArrayRef radius,
                                         at::IntArrayRef full_min, at::IntArrayRef full_max,
                                         const std::optional<at::Tensor>& tile_first_idx,
                                         const std::optional<at::TensorList>& index) {
  check_defined(op, "grad_halo", grad_halo);
  check_defined(op, "origins", origins);
  const int64_t dims = origins.dim() == 2 ? origins.size(1) : 0;
  TORCH_CHECK_VALUE(grad_halo.dim() >= 1 + dims, "torch_ragged.", op,
                    ": grad_halo must be (T, *box (", dims, " dims), *F), got shape ",
                    grad_halo.sizes());
  TORCH_CHECK_TYPE(
      at::isFloatingType(grad_halo.scalar_type()) || at::isComplexType(grad_halo.scalar_type()),
      "torch_ragged.", op, ": grad_halo must be a floating or complex tensor, got ",
      grad_halo.scalar_type());
  dim_list(op, "radius", radius, dims);
  const std::vector<int64_t> box = grad_halo.sizes().slice(1, dims).vec();
  std::vector<int64_t> tile(dims);
  for (int64_t d = 0; d < dims; ++d) {
    int64_t diameter = 0;
    TORCH_CHECK_VALUE(radius[d] >= 0 && !c10::mul_overflows(radius[d], int64_t{2}, &diameter) &&
                          box[d] > diameter,
                      "torch_ragged.", op, ": radius must be >= 0 and grad_halo's box ",
                      at::IntArrayRef(box), " larger than 2 * radius ", radius, " in every dim");
    tile[d] = box[d] - diameter;
  }
  HaloAdjointPlan plan;
  GatherPlan& tiles = plan.tiles;
  tiles.geo = tile_geometry(op, tile, full_min, full_max);
  tiles.set = tile_set(op, origins, dims, tile_first_idx, grad_halo.device());
  TORCH_CHECK_VALUE(grad_halo.size(0) == tiles.set.count(), "torch_ragged.", op,
                    ": grad_halo and origins disagree: ", grad_halo.size(0), " boxes, ",
                    tiles.set.count(), " origins");
  tiles.cells = cell_index(op, tiles.geo, tiles.set, index);
  check_boxes_fit(op, tiles.geo, tiles.set, radius);
  tiles.source = grad_halo.contiguous();
  const at::IntArrayRef feature = grad_halo.sizes().slice(1 + dims);
  tiles.out_sizes = concat(concat({tiles.set.count()}, tile), feature);
  check_numel_fits(op, "the pages' gradient", tiles.out_sizes);
  tiles.rows = tiles.set.count() * tiles.geo.tile_elems;
  tiles.row_elems = c10::multiply_integers(feature);
  plan.box_geo = tile_geometry(op, box, full_min, full_max);
  const at::Tensor shift = at::tensor(radius.vec(), tiles.set.origins.options().device(at::kCPU))
                               .to(tiles.set.origins.device());
  plan.boxes =
      TileSet{(tiles.set.origins - shift).contiguous(), tiles.set.member, tiles.set.members};
  plan.box_cells = build_cell_index(plan.box_geo, plan.boxes);
  return plan;
}

CorrelatePlan plan_depthwise_correlate(std::string_view op, const at::Tensor& input,
                                       const at::Tensor& weight, at::IntArrayRef padding) {
  check_defined(op, "input", input);
  check_defined(op, "weight", weight);
  const int64_t dims = static_cast<int64_t>(padding.size());
  TORCH_CHECK_VALUE(dims >= 1 && dims <= kMaxTileDims, "torch_ragged.", op,
                    ": padding must have 1, 2 or 3 entries (one per spatial dim), got ", padding);
  TORCH_CHECK_VALUE(input.dim() == dims + 2 && weight.dim() == dims + 1 &&
                        weight.size(dims) == input.size(dims + 1),
                    "torch_ragged.", op, ": input must be (N, *S, C) and weight (*K, C) with ",
                    dims, " spatial dims, got shapes ", input.sizes(), " and ", weight.sizes());
  TORCH_CHECK_TYPE((input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble) &&
                       weight.scalar_type() == input.scalar_type(),
                   "torch_ragged.", op,
                   ": input and weight must share a float32 or float64 dtype, got ",
                   input.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK_VALUE(weight.device() == input.device(), "torch_ragged.", op,
                    ": weight must be on the input's device ", input.device(), ", got ",
                    weight.device());
  CorrelatePlan plan;
  plan.dims = static_cast<int>(dims);
  plan.batch = input.size(0);
  plan.channels = input.size(dims + 1);
  plan.out_sizes.push_back(plan.batch);
  for (int64_t d = 0; d < dims; ++d) {
    plan.size[d] = input.size(1 + d);
    plan.taps[d] = weight.size(d);
    plan.pad[d] = padding[d];
    TORCH_CHECK_VALUE(plan.taps[d] >= 1 && padding[d] >= 0 && padding[d] < plan.taps[d],
                      "torch_ragged.", op,
                      ": padding must be 0 <= p < kernel size in every dim, got padding ", padding,
                      " for a kernel of ", weight.sizes().slice(0, dims));
    plan.out[d] = plan.size[d] + 2 * plan.pad[d] - plan.taps[d] + 1;
    TORCH_CHECK_VALUE(plan.out[d] >= 0, "torch_ragged.", op, ": the input (", input.sizes(),
                      ") is smaller than the kernel (", weight.sizes(), ") with padding ", padding);
    plan.out_sizes.push_back(plan.out[d]);
  }
  plan.out_sizes.push_back(plan.channels);
  plan.input = input.contiguous();
  plan.weight = weight.contiguous();
  return plan;
}

}  // namespace torch_ragged
