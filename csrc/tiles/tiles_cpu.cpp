// CPU kernels of the tiles family: every output point is found by the cell lists (tiles_index.h)
// and written once, so results are deterministic and need no atomics. Points are balanced across
// threads by at::parallel_for.

#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "common/checks.h"
#include "common/fill.h"
#include "common/parallel.h"
#include "tiles/tiles_args.h"

namespace torch_ragged {
namespace {

// Every (member, cell) -> the cell's position in the keys, or -1: a cell's tile list in one read
// instead of a binary search (a halo looks up ~9 scattered cells per tile; the search was the
// largest cost). Built only where it is small next to the output: at most `budget` entries;
// undefined otherwise (huge sparse bounds keep the search).
at::Tensor cell_table(const CellIndex& index, const TileGeometry& geo, int64_t members,
                      int64_t budget) {
  const int64_t entries = members * geo.num_cells;
  if (entries > budget) return {};
  at::Tensor table = at::full({entries}, -1, at::kLong);
  int64_t* list = table.mutable_data_ptr<int64_t>();
  const int64_t* keys = index.keys.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < index.keys.numel(); ++i) list[keys[i]] = i;  // index_put_ took ~1 ms
  return table;
}

// The budget of cell_table for a kernel writing `points` output points.
int64_t cell_table_budget(int64_t points) { return 4 * points + (int64_t{1} << 16); }

// The cell lists of points met in sequence: consecutive lookups mostly share a cell (a block's
// rows, a tile row's points), whose list is found (a table read, or a binary search) once.
struct OwnerCache {
  const TileGeometry& geo;
  const TileCells& cells;
  const int64_t* table;  // cell_table's, or nullptr
  int64_t key = -1, list = -1;

  OwnerCache(const TileGeometry& geo_, const TileCells& cells_, const at::Tensor& table_)
      : geo(geo_),
        cells(cells_),
        table(table_.defined() ? table_.const_data_ptr<int64_t>() : nullptr) {}

  // The first tile of member b covering g (inside the bound), or -1.
  int64_t owner(int64_t b, const int64_t* g) {
    if (list_of(b, g) < 0) return -1;
    for (int64_t j = cells.first[list]; j < cells.first[list + 1]; ++j) {
      if (cells.covers(cells.tiles[j], g, geo)) return cells.tiles[j];
    }
    return -1;
  }
  // Calls visit(t) for each tile of member b listed in g's cell (it may not cover g), ascending.
  template <typename Visit>
  void for_each_listed(int64_t b, const int64_t* g, Visit&& visit) {
    if (list_of(b, g) < 0) return;
    for (int64_t j = cells.first[list]; j < cells.first[list + 1]; ++j) visit(cells.tiles[j]);
  }
  // The lowest tile listed in g's cell (it may not cover g), or -1.
  int64_t first_listed(int64_t b, const int64_t* g) {
    return list_of(b, g) < 0 ? -1 : cells.tiles[cells.first[list]];
  }

 private:
  int64_t list_of(int64_t b, const int64_t* g) {
    const int64_t k = b * geo.num_cells + geo.cell_of(g);
    if (k == key) return list;
    key = k;
    return list = table != nullptr ? table[k] : cells.find(k);
  }
};

// Byte pointers and sizes of a gather; `row` is one point (F elements).
struct Rows {
  const char* src;
  char* dst;
  int64_t elem, row_bytes, row_elems;
  const char* fill;

  void fill_points(int64_t at, int64_t n) const {
    cpu::fill_pattern(dst + at * row_bytes, n * row_elems, fill, elem);
  }
  void copy_points(int64_t at, int64_t from, int64_t n) const {
    std::memcpy(dst + at * row_bytes, src + from * row_bytes, n * row_bytes);
  }
};

Rows rows_of(const GatherPlan& plan, at::Tensor& out) {
  return Rows{static_cast<const char*>(plan.source.const_data_ptr()),
              static_cast<char*>(out.mutable_data_ptr()),
              out.element_size(),
              plan.row_elems * out.element_size(),
              plan.row_elems,
              plan.fill.data()};
}

// Row-major offset of point g in the box of size `box` at `start`. One scalar chain on purpose: as
// two steps (g - start into an array, then box_offset) the compiler vectorised the subtraction,
// and its 16-byte load of the g just written in 8-byte stores stalled on store forwarding — half
// of tiles_halo's time.
int64_t offset_in_box(const int64_t* g, const int64_t* start, const int64_t* box, int dims) {
  int64_t offset = 0;
  for (int d = 0; d < dims; ++d) offset = offset * box[d] + (g[d] - start[d]);
  return offset;
}

// The page row of point g in tile t.
int64_t page_row(const TileGeometry& geo, const TileCells& cells, int64_t t, const int64_t* g) {
  return t * geo.tile_elems + offset_in_box(g, cells.origins + t * geo.dims, geo.tile, geo.dims);
}

// Calls row(g) for the start of every row (run along the last dim) of a box of size n at `start`,
// in row-major order; row may change its g. The rows are counted like an odometer: this runs once
// per row of every halo block, where unravelling a row number cost two 64-bit divisions.
template <typename Row>
void for_each_box_row(int dims, const int64_t* start, const int64_t* n, Row&& row) {
  const int last = dims - 1;
  for (int d = 0; d < last; ++d) {
    if (n[d] <= 0) return;
  }
  int64_t g[kMaxTileDims] = {};
  for (int d = 0; d < dims; ++d) g[d] = start[d];
  while (true) {
    int64_t h[kMaxTileDims] = {g[0], g[1], g[2]};
    row(h);
    int d = last - 1;
    for (; d >= 0; --d) {
      if (++g[d] < start[d] + n[d]) break;
      g[d] = start[d];
    }
    if (d < 0) return;
  }
}

// tiles_to_dense walks the dense output in memory order, one line (a run along the last dim) at a
// time, split into the cells it crosses. A dense table maps every cell to its tile list (the output
// is prod(tile) times larger than the table, so the table costs nothing in comparison), so a
// segment finds its list in one read: runs of empty cells are filled at once, a segment the list's
// first tile covers whole is one copy (aligned tiles), other segments go point by point.
struct DenseLines {
  const GatherPlan& plan;
  TileCells cells;
  at::Tensor table;  // (members * num_cells,) int64: the cell's position in the keys, or -1

  explicit DenseLines(const GatherPlan& p) : plan(p), cells(p.cells.view(p.set)) {
    table = cell_table(p.cells, p.geo, p.set.members, std::numeric_limits<int64_t>::max());
  }

  // Calls segment(at, g, n, list) for every cell segment of every line: `at` the output point of
  // g, n points along the last dim, `list` the cell's position in the keys (-1: no tile; then n
  // may span several empty cells).
  template <typename Segment>
  void for_each_segment(Segment&& segment) const {
    const TileGeometry& geo = plan.geo;
    const int last = geo.dims - 1;
    const int64_t width = geo.extent[last], tile = geo.tile[last];
    const int64_t lines_per_member = geo.bound_elems / width;
    const int64_t* lists = table.const_data_ptr<int64_t>();
    const int64_t grain =
        std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, width * plan.row_elems));
    at::parallel_for(
        0, plan.set.members * lines_per_member, grain, [&](int64_t begin, int64_t end) {
          for (int64_t line = begin; line < end; ++line) {
            int64_t g[kMaxTileDims];
            geo.bound_point((line % lines_per_member) * width, g);
            int64_t base = line / lines_per_member;  // member, then the cell row of the line
            for (int d = 0; d < last; ++d)
              base = base * geo.cells[d] + (g[d] - geo.lo[d]) / geo.tile[d];
            base *= geo.cells[last];
            for (int64_t x = 0; x < width;) {
              const int64_t list = lists[base + x / tile];
              int64_t stop = std::min(width, (x / tile + 1) * tile);
              while (list < 0 && stop < width && lists[base + stop / tile] < 0) {
                stop = std::min(width, stop + tile);
              }
              g[last] = geo.lo[last] + x;
              segment(line * width + x, g, stop - x, list);
              x = stop;
            }
          }
        });
  }
};

void dense_from_owners(const GatherPlan& plan, at::Tensor& out) {
  if (plan.rows == 0 || plan.row_elems == 0) return;
  const DenseLines lines(plan);
  const TileGeometry& geo = plan.geo;
  const TileCells& cells = lines.cells;
  const Rows io = rows_of(plan, out);
  const int last = geo.dims - 1;
  lines.for_each_segment([&](int64_t at, int64_t* g, int64_t n, int64_t list) {
    if (list < 0) return io.fill_points(at, n);
    // The list's first tile is the lowest overlapping the cell: where it covers a point, it owns
    // it.
    const int64_t first = cells.tiles[cells.first[list]];
    bool whole = true;
    for (int d = 0; d < geo.dims; ++d) {
      const int64_t o = cells.origins[first * geo.dims + d];
      const int64_t top = d == last ? g[d] + n : g[d] + 1;
      whole = whole && o <= g[d] && top <= o + geo.tile[d];
    }
    if (whole) return io.copy_points(at, page_row(geo, cells, first, g), n);
    for (int64_t x = 0; x < n; ++x, ++g[last]) {
      int64_t t = -1;
      for (int64_t j = cells.first[list]; j < cells.first[list + 1] && t < 0; ++j) {
        if (cells.covers(cells.tiles[j], g, geo)) t = cells.tiles[j];
      }
      t < 0 ? io.fill_points(at + x, 1) : io.copy_points(at + x, page_row(geo, cells, t, g), 1);
    }
  });
}

// How many of the points g, g + 1, ..., g + width - 1 lie below `limit` (0 if g >= limit).
int64_t points_before(int64_t g, int64_t limit, int64_t width) {
  if (g >= limit) return 0;
  const uint64_t distance = static_cast<uint64_t>(limit) - static_cast<uint64_t>(g);  // exact
  return distance >= static_cast<uint64_t>(width) ? width : static_cast<int64_t>(distance);
}

// A tile wholly inside the bound: its rows are runs of the dense tensor at fixed strides, copied
// with pointer steps (no per-row index arithmetic or bound checks). False for other tiles.
bool copy_inner_tile(const TileGeometry& geo, const Rows& io, int64_t t, int64_t b,
                     const int64_t* origin) {
  for (int d = 0; d < geo.dims; ++d) {
    if (origin[d] < geo.lo[d] || origin[d] + geo.tile[d] > geo.lo[d] + geo.extent[d]) return false;
  }
  const int64_t run_bytes = geo.tile[geo.dims - 1] * io.row_bytes;
  // Dense strides (in points) of dims 0 .. dims-2; a 3-D tile walks planes, then lines.
  int64_t stride[kMaxTileDims] = {1, 1, 1};
  for (int d = geo.dims - 2; d >= 0; --d) stride[d] = stride[d + 1] * geo.extent[d + 1];
  const char* src = io.src + (b * geo.bound_elems + geo.bound_offset(origin)) * io.row_bytes;
  char* dst = io.dst + t * geo.tile_elems * io.row_bytes;
  const int64_t planes = geo.dims == 3 ? geo.tile[0] : 1;
  const int64_t lines = geo.dims >= 2 ? geo.tile[geo.dims - 2] : 1;
  const int64_t line_stride = geo.dims >= 2 ? stride[geo.dims - 2] * io.row_bytes : 0;
  const int64_t plane_stride = geo.dims == 3 ? stride[0] * io.row_bytes : 0;
  for (int64_t z = 0; z < planes; ++z) {
    const char* line = src + z * plane_stride;
    for (int64_t y = 0; y < lines; ++y, line += line_stride, dst += run_bytes) {
      std::memcpy(dst, line, run_bytes);
    }
  }
  return true;
}

// dense_to_tiles, one tile row at a time: the part inside the bound is one contiguous run of the
// dense tensor (copied whole unless owned_only asks for the owner of each point).
void tiles_from_dense(const GatherPlan& plan, at::Tensor& out, bool owned_only) {
  if (plan.rows == 0 || plan.row_elems == 0) return;
  const TileGeometry& geo = plan.geo;
  const TileCells cells = plan.cells.view(plan.set);
  const Rows io = rows_of(plan, out);
  const int last = geo.dims - 1;
  const int64_t* member =
      plan.set.member.defined() ? plan.set.member.const_data_ptr<int64_t>() : nullptr;
  const int64_t per_tile = std::max<int64_t>(1, geo.tile_elems * plan.row_elems);
  const int64_t zero[kMaxTileDims] = {0, 0, 0};
  const at::Tensor table =
      owned_only ? cell_table(plan.cells, geo, plan.set.members, cell_table_budget(plan.rows))
                 : at::Tensor();
  at::parallel_for(
      0, plan.set.count(), std::max<int64_t>(1, kGrainElems / per_tile),
      [&](int64_t begin, int64_t end) {
        OwnerCache cache{geo, cells, table};
        for (int64_t t = begin; t < end; ++t) {
          const int64_t b = member != nullptr ? member[t] : 0;
          const int64_t* origin = cells.origins + t * geo.dims;
          if (!owned_only && copy_inner_tile(geo, io, t, b, origin)) continue;
          for_each_box_row(geo.dims, zero, geo.tile, [&](int64_t* p) {
            const int64_t at = t * geo.tile_elems + TileGeometry::box_offset(p, geo.tile, geo.dims);
            int64_t g[kMaxTileDims];
            bool inside = true;
            for (int d = 0; d < geo.dims; ++d) {
              g[d] = origin[d] + p[d];
              inside =
                  inside && (d == last || (g[d] >= geo.lo[d] && g[d] < geo.lo[d] + geo.extent[d]));
            }
            const int64_t width = geo.tile[last];
            // The row's points [x0, x1) inside the bound: lo - g may not fit int64 (g near
            // -2^63), so its distances are taken as unsigned, then clamped to the row.
            const int64_t x0 = !inside ? width : points_before(g[last], geo.lo[last], width);
            const int64_t x1 =
                !inside
                    ? width
                    : std::max(x0, points_before(g[last], geo.lo[last] + geo.extent[last], width));
            io.fill_points(at, x0);
            io.fill_points(at + x1, width - x1);
            if (x1 <= x0) return;
            g[last] += x0;
            const int64_t from = b * geo.bound_elems + geo.bound_offset(g);
            if (!owned_only) return io.copy_points(at + x0, from, x1 - x0);
            for (int64_t x = 0; x < x1 - x0; ++x, ++g[last]) {
              cache.owner(b, g) == t ? io.copy_points(at + x0 + x, from + x, 1)
                                     : io.fill_points(at + x0 + x, 1);
            }
          });
        }
      });
}

// One dim of a block: the points [start, start + n), inside the bound or wholly outside it.
struct Span {
  int64_t start, n;
  bool inside;
};
using Spans = c10::SmallVector<Span, 8>;

// Splits [from, to) of dim d at the bound's ends and at the boundaries of the cells of size
// `cell_a` and of size `cell_b` (both aligned at the bound's lo): an inside span lies in one cell
// of each grid.
Spans split_dim(const TileGeometry& geo, int d, int64_t from, int64_t to, int64_t cell_a,
                int64_t cell_b) {
  Spans spans;
  const int64_t lo = geo.lo[d], hi = geo.lo[d] + geo.extent[d];
  int64_t x = from;
  if (x < std::min(to, lo)) {
    spans.push_back({x, std::min(to, lo) - x, false});
    x = std::min(to, lo);
  }
  for (const int64_t stop = std::min(to, hi); x < stop;) {
    const int64_t rel = x - lo;
    const int64_t end = std::min({stop, x + cell_a - rel % cell_a, x + cell_b - rel % cell_b});
    spans.push_back({x, end - x, true});
    x = end;
  }
  if (x < to) spans.push_back({x, to - x, false});
  return spans;
}

// Calls block(start, n, inside) for every block of the product of the dims' spans.
template <typename Block>
void for_each_block(int dims, const Spans* spans, Block&& block) {
  int64_t count = 1;
  for (int d = 0; d < dims; ++d) count *= static_cast<int64_t>(spans[d].size());
  for (int64_t k = 0; k < count; ++k) {
    int64_t start[kMaxTileDims], n[kMaxTileDims];
    bool inside = true;
    int64_t rest = k;
    for (int d = dims - 1; d >= 0; --d) {
      const Span& s = spans[d][rest % static_cast<int64_t>(spans[d].size())];
      rest /= static_cast<int64_t>(spans[d].size());
      start[d] = s.start;
      n[d] = s.n;
      inside = inside && s.inside;
    }
    block(start, n, inside);
  }
}

// Whether tile t covers the whole block [start, start + n).
bool covers_block(const TileGeometry& geo, const TileCells& cells, int64_t t, const int64_t* start,
                  const int64_t* n) {
  for (int d = 0; d < geo.dims; ++d) {
    const int64_t o = cells.origins[t * geo.dims + d];
    if (start[d] < o || start[d] + n[d] > o + geo.tile[d]) return false;
  }
  return true;
}

// The owners of n points from g along the last dim, all in one cell (a block row): owner[x] is
// the first tile of the cell's list (ascending) covering point x, or -1. Each listed tile marks
// the points it covers that no lower tile took, so the cell's list is scanned once per row, not
// once per point (unaligned tiles overlap, and their blocks mostly take this path).
void row_owners(const TileGeometry& geo, const TileCells& cells, OwnerCache& cache, int64_t b,
                const int64_t* g, int64_t n, c10::SmallVector<int64_t, 16>& owner) {
  const int last = geo.dims - 1;
  owner.assign(n, -1);
  int64_t left = n;
  cache.for_each_listed(b, g, [&](int64_t t) {
    const int64_t* o = cells.origins + t * geo.dims;
    for (int d = 0; d < last; ++d) {
      if (g[d] < o[d] || g[d] >= o[d] + geo.tile[d]) return;
    }
    const int64_t x0 = std::max<int64_t>(0, o[last] - g[last]);
    const int64_t x1 = std::min(n, o[last] + geo.tile[last] - g[last]);
    for (int64_t x = x0; x < x1 && left > 0; ++x) {
      if (owner[x] < 0) {
        owner[x] = t;
        --left;
      }
    }
  });
}

// A block row (n points from g, one cell) point by point from the owners; runs of one owner (its
// page row continues) or of the fill move with one call.
void copy_row_by_owner(const TileGeometry& geo, const TileCells& cells, const Rows& io,
                       OwnerCache& cache, int64_t b, const int64_t* g, int64_t n, int64_t at) {
  c10::SmallVector<int64_t, 16> owner;
  row_owners(geo, cells, cache, b, g, n, owner);
  int64_t point[kMaxTileDims] = {g[0], g[1], g[2]};
  for (int64_t x = 0, run = 1; x < n; x += run) {
    for (run = 1; x + run < n && owner[x + run] == owner[x];) ++run;
    if (owner[x] < 0) {
      io.fill_points(at + x, run);
    } else {
      point[geo.dims - 1] = g[geo.dims - 1] + x;
      io.copy_points(at + x, page_row(geo, cells, owner[x], point), run);
    }
  }
}

// tiles_halo, one tile's box at a time, cut into blocks by the bound and the cell grid: a block
// outside the bound or in an empty cell is filled; a block the cell's lowest listed tile covers
// whole is copied row by row from that tile's page (no lower tile covers any of it, so it owns
// all of it — the common case, one lookup per block); other blocks find each point's owner.
void halo_from_owners(const GatherPlan& plan, const HaloFromOwner& halo, at::Tensor& out) {
  if (plan.rows == 0 || plan.row_elems == 0) return;
  const TileGeometry& geo = plan.geo;
  const TileCells& cells = halo.cells;
  const Rows io = rows_of(plan, out);
  const int dims = geo.dims, last = dims - 1;
  const int64_t per_box = std::max<int64_t>(1, halo.box_elems * plan.row_elems);
  const at::Tensor table =
      cell_table(plan.cells, geo, plan.set.members, cell_table_budget(plan.rows));
  at::parallel_for(
      0, plan.set.count(), std::max<int64_t>(1, kGrainElems / per_box),
      [&](int64_t begin, int64_t end) {
        OwnerCache cache{geo, cells, table};
        for (int64_t t = begin; t < end; ++t) {
          const int64_t b = halo.member != nullptr ? halo.member[t] : 0;
          int64_t box_start[kMaxTileDims];
          Spans spans[kMaxTileDims];
          for (int d = 0; d < dims; ++d) {
            box_start[d] = cells.origins[t * dims + d] - halo.radius[d];
            spans[d] = split_dim(geo, d, box_start[d], box_start[d] + halo.box[d], geo.tile[d],
                                 geo.tile[d]);
          }
          auto out_point = [&](const int64_t* g) {
            return t * halo.box_elems + offset_in_box(g, box_start, halo.box, dims);
          };
          for_each_block(dims, spans, [&](const int64_t* start, const int64_t* n, bool inside) {
            const int64_t first = inside ? cache.first_listed(b, start) : -1;
            if (first < 0) {
              return for_each_box_row(dims, start, n,
                                      [&](int64_t* g) { io.fill_points(out_point(g), n[last]); });
            }
            if (covers_block(geo, cells, first, start, n)) {
              return for_each_box_row(dims, start, n, [&](int64_t* g) {
                io.copy_points(out_point(g), page_row(geo, cells, first, g), n[last]);
              });
            }
            for_each_box_row(dims, start, n, [&](int64_t* g) {
              copy_row_by_owner(geo, cells, io, cache, b, g, n[last], out_point(g));
            });
          });
        }
      });
}

// tiles_halo_backward: page point g of tile t sums, where t owns g, the halo rows of the boxes
// reading g in ascending box order (op-math accumulation), else 0. One tile at a time, its points
// cut into blocks by the bound, the tiles' cells and the boxes' cells: each box listed in the
// block's box cell adds its overlap with the block row by row (every point still sums its readers
// in ascending box order, so the result matches the per-point HaloAdjoint of the CUDA kernel);
// a block in a cell whose lowest listed tile is not t is then checked point by point for points a
// lower tile owns, which are set back to 0.
void halo_adjoint_rows(const HaloAdjointPlan& plan, at::Tensor& out) {
  const GatherPlan& tiles = plan.tiles;
  if (tiles.rows == 0 || tiles.row_elems == 0) return;
  const TileGeometry& geo = tiles.geo;
  const TileGeometry& box_geo = plan.box_geo;
  const TileCells cells = tiles.cells.view(tiles.set);
  const TileCells box_cells = plan.box_cells.view(plan.boxes);
  const int64_t* member =
      tiles.set.member.defined() ? tiles.set.member.const_data_ptr<int64_t>() : nullptr;
  const int64_t width = tiles.row_elems;
  const int dims = geo.dims, last = dims - 1;
  const int64_t per_tile = std::max<int64_t>(1, geo.tile_elems * width);
  const int64_t budget = cell_table_budget(tiles.rows);
  const at::Tensor table = cell_table(tiles.cells, geo, tiles.set.members, budget);
  const at::Tensor box_table = cell_table(plan.box_cells, box_geo, plan.boxes.members, budget);
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(
      at::kHalf, at::kBFloat16, out.scalar_type(), "tiles_halo_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* grad = tiles.source.const_data_ptr<scalar_t>();
        scalar_t* o = out.mutable_data_ptr<scalar_t>();
        at::parallel_for(
            0, tiles.set.count(), std::max<int64_t>(1, kGrainElems / per_tile),
            [&](int64_t begin, int64_t end) {
              OwnerCache owners{geo, cells, table};
              OwnerCache readers{box_geo, box_cells,
                                 box_table};  // its cell lists: the boxes at a point
              std::vector<acc_t> acc(per_tile);
              for (int64_t t = begin; t < end; ++t) {
                const int64_t b = member != nullptr ? member[t] : 0;
                const int64_t* origin = cells.origins + t * dims;
                std::fill(acc.begin(), acc.end(), acc_t(0));
                Spans spans[kMaxTileDims];
                for (int d = 0; d < dims; ++d) {
                  spans[d] = split_dim(geo, d, origin[d], origin[d] + geo.tile[d], geo.tile[d],
                                       box_geo.tile[d]);
                }
                auto acc_row = [&](const int64_t* g) {
                  return acc.data() + offset_in_box(g, origin, geo.tile, dims) * width;
                };
                for_each_block(
                    dims, spans, [&](const int64_t* start, const int64_t* n, bool inside) {
                      if (!inside) return;  // outside the bound: 0
                      readers.for_each_listed(b, start, [&](int64_t box) {
                        const int64_t* box_origin = box_cells.origins + box * dims;
                        int64_t from[kMaxTileDims], count[kMaxTileDims];
                        for (int d = 0; d < dims; ++d) {
                          from[d] = std::max(start[d], box_origin[d]);
                          count[d] =
                              std::min(start[d] + n[d], box_origin[d] + box_geo.tile[d]) - from[d];
                          if (count[d] <= 0) return;
                        }
                        for_each_box_row(dims, from, count, [&](int64_t* g) {
                          acc_t* a = acc_row(g);
                          const scalar_t* h = grad + page_row(box_geo, box_cells, box, g) * width;
                          for (int64_t k = 0; k < count[last] * width; ++k) {
                            a[k] += static_cast<acc_t>(h[k]);
                          }
                        });
                      });
                      if (owners.first_listed(b, start) == t) return;  // t owns the whole block
                      c10::SmallVector<int64_t, 16> owner;
                      for_each_box_row(dims, start, n, [&](int64_t* g) {
                        row_owners(geo, cells, owners, b, g, n[last], owner);
                        acc_t* row = acc_row(g);
                        for (int64_t x = 0; x < n[last]; ++x) {
                          if (owner[x] != t) std::fill_n(row + x * width, width, acc_t(0));
                        }
                      });
                    });
                scalar_t* page = o + t * per_tile;
                for (int64_t k = 0; k < per_tile; ++k) page[k] = static_cast<scalar_t>(acc[k]);
              }
            });
      });
}

// tiles_to_dense(reduce="sum"): each point adds its covering tiles' rows in tile order (op-math
// accumulation), or holds the fill value where none covers it; lines and cells as for "first".
void sum_covering_rows(const GatherPlan& plan, at::Tensor& out) {
  if (plan.rows == 0 || plan.row_elems == 0) return;
  const DenseLines lines(plan);
  const TileGeometry& geo = plan.geo;
  const TileCells& cells = lines.cells;
  const Rows io = rows_of(plan, out);
  const int64_t width = plan.row_elems;
  const int last = geo.dims - 1;
  AT_DISPATCH_V2(out.scalar_type(), "tiles_to_dense_sum", AT_WRAP([&] {
                   using acc_t = at::opmath_type<scalar_t>;
                   const scalar_t* pages = plan.source.const_data_ptr<scalar_t>();
                   scalar_t* o = out.mutable_data_ptr<scalar_t>();
                   lines.for_each_segment([&](int64_t at, int64_t* g, int64_t n, int64_t list) {
                     if (list < 0) return io.fill_points(at, n);
                     c10::SmallVector<acc_t, 16> acc(width);
                     for (int64_t x = 0; x < n; ++x, ++g[last]) {
                       std::fill(acc.begin(), acc.end(), acc_t(0));
                       bool covered = false;
                       for (int64_t j = cells.first[list]; j < cells.first[list + 1]; ++j) {
                         const int64_t t = cells.tiles[j];
                         if (!cells.covers(t, g, geo)) continue;
                         const scalar_t* row = pages + page_row(geo, cells, t, g) * width;
                         for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<acc_t>(row[c]);
                         covered = true;
                       }
                       if (!covered) {
                         io.fill_points(at + x, 1);
                         continue;
                       }
                       for (int64_t c = 0; c < width; ++c)
                         o[(at + x) * width + c] = static_cast<scalar_t>(acc[c]);
                     }
                   });
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
}

at::Tensor tiles_to_dense_cpu(const at::Tensor& pages, const at::Tensor& origins,
                              at::IntArrayRef full_min, at::IntArrayRef full_max,
                              const at::Scalar& fill_value, c10::string_view reduce,
                              const std::optional<at::Tensor>& tile_first_idx,
                              std::optional<at::TensorList> index) {
  constexpr std::string_view op = "tiles_to_dense";
  const bool first_wins = is_first_wins(op, reduce);
  TORCH_CHECK_TYPE(first_wins || (pages.defined() && pages.scalar_type() != at::kBool),
                   "torch_ragged.", op, ": reduce=\"sum\" needs numbers, got bool pages");
  const GatherPlan plan = plan_tiles_to_dense(op, pages, origins, full_min, full_max, fill_value,
                                              tile_first_idx, index);
  at::Tensor out = at::empty(plan.out_sizes, pages.options());
  if (first_wins) {
    dense_from_owners(plan, out);
  } else {
    sum_covering_rows(plan, out);
  }
  return out;
}

at::Tensor dense_to_tiles_cpu(const at::Tensor& dense, const at::Tensor& origins,
                              at::IntArrayRef tile_size, at::IntArrayRef full_min,
                              const at::Scalar& fill_value, bool owned_only,
                              const std::optional<at::Tensor>& tile_first_idx,
                              std::optional<at::TensorList> index) {
  const GatherPlan plan = plan_dense_to_tiles("dense_to_tiles", dense, origins, tile_size, full_min,
                                              fill_value, tile_first_idx, index);
  at::Tensor out = at::empty(plan.out_sizes, dense.options());
  tiles_from_dense(plan, out, owned_only);
  return out;
}

at::Tensor tiles_halo_cpu(const at::Tensor& pages, const at::Tensor& origins,
                          at::IntArrayRef radius, at::IntArrayRef full_min,
                          at::IntArrayRef full_max, const at::Scalar& fill_value,
                          const std::optional<at::Tensor>& tile_first_idx,
                          std::optional<at::TensorList> index) {
  HaloFromOwner halo{};
  const GatherPlan plan = plan_tiles_halo("tiles_halo", pages, origins, radius, full_min, full_max,
                                          fill_value, tile_first_idx, index, halo);
  halo.geo = plan.geo;
  halo.cells = plan.cells.view(plan.set);
  halo.member = plan.set.member.defined() ? plan.set.member.const_data_ptr<int64_t>() : nullptr;
  at::Tensor out = at::empty(plan.out_sizes, pages.options());
  halo_from_owners(plan, halo, out);
  return out;
}

at::Tensor tiles_halo_backward_cpu(const at::Tensor& grad_halo, const at::Tensor& origins,
                                   at::IntArrayRef radius, at::IntArrayRef full_min,
                                   at::IntArrayRef full_max,
                                   const std::optional<at::Tensor>& tile_first_idx,
                                   std::optional<at::TensorList> index) {
  const HaloAdjointPlan plan = plan_tiles_halo_backward(
      "tiles_halo_backward", grad_halo, origins, radius, full_min, full_max, tile_first_idx, index);
  at::Tensor out = at::empty(plan.tiles.out_sizes, grad_halo.options());
  halo_adjoint_rows(plan, out);
  return out;
}

// d[j] += w[j] * s[j]: restrict lets the compiler vectorise without run-time overlap checks.
template <typename T>
void multiply_add(T* __restrict d, const T* __restrict w, const T* __restrict s, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] += w[j] * s[j];
}
// Three taps at once, in order: d[j] += w0 s0, then w1 s1, then w2 s2.
template <typename T>
void multiply_add3(T* __restrict d, const T* __restrict w0, const T* __restrict w1,
                   const T* __restrict w2, const T* __restrict s0, const T* __restrict s1,
                   const T* __restrict s2, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    T acc = d[j];
    acc += w0[j] * s0[j];
    acc += w1[j] * s1[j];
    acc += w2[j] * s2[j];
    d[j] = acc;
  }
}

// tiles_depthwise_correlate: out[n, o, c] = the sum over the taps k (row-major) of
// weight[k, c] * input[n, o + k - pad, c] (0 outside the input), one output row (a run along the
// last spatial dim, all channels) at a time. Every element is one sum in one fixed order, so the
// result does not depend on the thread count. torch's depthwise convolution took 1.0 ms forward
// and 3.8 ms for its input gradient on 4096 halos of 10x10x4; this is a multiply-add of
// contiguous runs per tap.
at::Tensor tiles_depthwise_correlate_cpu(const at::Tensor& input, const at::Tensor& weight,
                                         at::IntArrayRef padding) {
  const CorrelatePlan plan =
      plan_depthwise_correlate("tiles_depthwise_correlate", input, weight, padding);
  // Each row is zeroed by its thread right before its sums (one pass over the output, not two).
  at::Tensor out = at::empty(plan.out_sizes, input.options());
  if (out.numel() == 0) return out;
  const int dims = plan.dims, last = dims - 1;
  const int64_t channels = plan.channels, out_row = plan.out[last] * channels;
  int64_t rows_per_item = 1, num_taps = 1;
  for (int d = 0; d < last; ++d) rows_per_item *= plan.out[d];
  for (int d = 0; d < dims; ++d) num_taps *= plan.taps[d];
  int64_t stride[kMaxTileDims + 1];  // the input's, in elements: spatial dims, then the item
  stride[last] = channels;
  for (int d = last - 1; d >= 0; --d) stride[d] = stride[d + 1] * plan.size[d + 1];
  const int64_t item_stride = stride[0] * plan.size[0];
  const int64_t k_last = plan.taps[last];
  std::vector<std::array<int64_t, kMaxTileDims>> taps(num_taps);
  for (int64_t k = 0; k < num_taps; ++k) {
    TileGeometry::box_point(k, plan.taps, dims, taps[k].data());
  }
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "tiles_depthwise_correlate", [&] {
    const scalar_t* in = plan.input.const_data_ptr<scalar_t>();
    const scalar_t* w = plan.weight.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    // Each tap's weights repeated along an output row: the inner loop is then a multiply-add of
    // contiguous runs (vectorised), with no channel index.
    std::vector<scalar_t> wide(num_taps * out_row);
    for (int64_t k = 0; k < num_taps; ++k) {
      for (int64_t j = 0; j < out_row; ++j) wide[k * out_row + j] = w[k * channels + j % channels];
    }
    const int64_t grain =
        std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, out_row * num_taps));
    at::parallel_for(0, plan.batch * rows_per_item, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t at_row[kMaxTileDims] = {0, 0, 0};  // the row's output point (last dim 0)
        TileGeometry::box_point(r % rows_per_item, plan.out, last, at_row);
        scalar_t* dst = o + r * out_row;
        std::fill_n(dst, out_row, scalar_t(0));
        // The taps in groups along the last dim (row-major: one input row per group).
        for (int64_t group = 0; group < num_taps; group += k_last) {
          int64_t from = (r / rows_per_item) * item_stride;
          bool inside = true;
          for (int d = 0; d < last; ++d) {
            const int64_t i = at_row[d] + taps[group][d] - plan.pad[d];
            inside = inside && i >= 0 && i < plan.size[d];
            from += i * stride[d];
          }
          if (!inside) continue;
          const scalar_t* row = in + from;
          const scalar_t* w = wide.data() + group * out_row;
          // Output x reads input x + kx - pad: every tap of the group is in range on [x0, x1).
          const int64_t x0 = std::min(plan.out[last], plan.pad[last]);
          const int64_t x1 =
              std::max(x0, std::min(plan.out[last], plan.size[last] - k_last + 1 + plan.pad[last]));
          auto taps_on = [&](int64_t kx, int64_t a, int64_t b) {  // one tap on [a, b)
            a = std::max(a, plan.pad[last] - kx);
            b = std::min(b, plan.size[last] - kx + plan.pad[last]);
            if (b <= a) return;
            multiply_add(dst + a * channels, w + kx * out_row + a * channels,
                         row + (a + kx - plan.pad[last]) * channels, (b - a) * channels);
          };
          // Each element still takes the group's taps in ascending kx: the edges tap by tap,
          // the middle all three at once (one load and store of the output per group).
          if (k_last == 3 && x0 < x1) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              taps_on(kx, 0, x0);
              taps_on(kx, x1, plan.out[last]);
            }
            const scalar_t* s0 = row + (x0 - plan.pad[last]) * channels;
            multiply_add3(dst + x0 * channels, w + x0 * channels, w + out_row + x0 * channels,
                          w + 2 * out_row + x0 * channels, s0, s0 + channels, s0 + 2 * channels,
                          (x1 - x0) * channels);
          } else {
            for (int64_t kx = 0; kx < k_last; ++kx) taps_on(kx, 0, plan.out[last]);
          }
        }
      }
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> tiles_lookup_cpu(
    const at::Tensor& origins, at::IntArrayRef tile_size, const at::Tensor& coords,
    at::IntArrayRef full_min, at::IntArrayRef full_max,
    const std::optional<at::Tensor>& tile_first_idx, std::optional<at::TensorList> index) {
  const LookupPlan plan = plan_tiles_lookup("tiles_lookup", origins, tile_size, coords, full_min,
                                            full_max, tile_first_idx, index);
  const int64_t n = plan.points.size(0), dims = plan.geo.dims;
  at::Tensor tile = at::empty({n}, plan.points.options());
  at::Tensor local = at::empty({n, dims}, plan.points.options());
  const TileCells cells = plan.cells_view();
  const int64_t* points = plan.points.const_data_ptr<int64_t>();
  const int64_t* member = plan.member.defined() ? plan.member.const_data_ptr<int64_t>() : nullptr;
  int64_t* t = tile.mutable_data_ptr<int64_t>();
  int64_t* l = local.mutable_data_ptr<int64_t>();
  at::parallel_for(0, n, kGrainElems / 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      t[i] = lookup_point(plan.geo, cells, member != nullptr ? member[i] : 0, points + i * dims,
                          l + i * dims);
    }
  });
  return {tile, local};
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("tiles_to_dense", &tiles_to_dense_cpu);
  m.impl("dense_to_tiles", &dense_to_tiles_cpu);
  m.impl("tiles_halo", &tiles_halo_cpu);
  m.impl("tiles_halo_backward", &tiles_halo_backward_cpu);
  m.impl("tiles_lookup", &tiles_lookup_cpu);
  m.impl("tiles_depthwise_correlate", &tiles_depthwise_correlate_cpu);
}

}  // namespace torch_ragged
