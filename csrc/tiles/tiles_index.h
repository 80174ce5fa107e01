#pragma once

// Geometry of a tile set and its per-cell tile lists: the index math every tiles kernel shares,
// host and device alike.
//
// A tile set: T tiles of one size `tile` (d <= 3 dims), tile t covering the global points
// [origins[t], origins[t] + tile), inside a bound [lo, lo + extent). Origins may be negative or
// unaligned; tiles may overlap and may stick out of the bound. Reading the field at a point g finds
// the *first* tile (lowest t) covering g — the seed's select chain — or the fill value.
//
// The lookup: the bound is cut into cells of the tile's size, aligned at lo; a tile overlaps at
// most 2 cells per dim. Each (member, cell) that some tile overlaps has a key, member * num_cells +
// cell; keys are sorted and distinct, and the tiles overlapping keys[i] are
// tiles[first[i] : first[i + 1]] in ascending order. A point's owner is found by one binary search
// (or one load, from a key -> slot table where a lookup builds one) and a scan of a short list (1
// entry for non-overlapping aligned tiles).

#include <c10/macros/Macros.h>

#include <cstdint>

#include "common/search.h"

namespace torch_ragged {

constexpr int kMaxTileDims = 3;

// rel / tile for rel >= 0 and tile >= 1: a shift where tile is a power of two (tiles mostly are),
// a 64-bit division (tens of cycles) otherwise.
C10_HOST_DEVICE inline int64_t divide_by_tile(int64_t rel, int64_t tile) {
  if ((tile & (tile - 1)) != 0) return rel / tile;
#ifdef __CUDA_ARCH__
  return rel >> (__ffsll(tile) - 1);
#else
  return rel >> __builtin_ctzll(static_cast<uint64_t>(tile));
#endif
}

struct TileGeometry {
  int dims;
  int64_t tile[kMaxTileDims];    // tile size per dim
  int64_t lo[kMaxTileDims];      // full_min
  int64_t extent[kMaxTileDims];  // full_max - full_min
  int64_t cells[kMaxTileDims];   // ceil(extent / tile): the cell grid of the bound
  int64_t tile_elems;            // prod(tile): points per tile
  int64_t bound_elems;           // prod(extent): points per member's bound
  int64_t num_cells;             // prod(cells): cells per member

  C10_HOST_DEVICE bool in_bound(const int64_t* g) const {
    for (int d = 0; d < dims; ++d) {
      if (g[d] < lo[d] || g[d] >= lo[d] + extent[d]) return false;
    }
    return true;
  }
  // Cell of a point inside the bound (row-major over the cell grid).
  C10_HOST_DEVICE int64_t cell_of(const int64_t* g) const {
    int64_t cell = 0;
    for (int d = 0; d < dims; ++d) cell = cell * cells[d] + divide_by_tile(g[d] - lo[d], tile[d]);
    return cell;
  }
  // Row-major offset of a point inside the bound, and back.
  C10_HOST_DEVICE int64_t bound_offset(const int64_t* g) const {
    int64_t offset = 0;
    for (int d = 0; d < dims; ++d) offset = offset * extent[d] + (g[d] - lo[d]);
    return offset;
  }
  C10_HOST_DEVICE void bound_point(int64_t offset, int64_t* g) const {
    for (int d = dims - 1; d >= 0; --d) {
      g[d] = lo[d] + offset % extent[d];
      offset /= extent[d];
    }
  }
  // Row-major offset within a box of size `box`, and back.
  C10_HOST_DEVICE static int64_t box_offset(const int64_t* p, const int64_t* box, int dims) {
    int64_t offset = 0;
    for (int d = 0; d < dims; ++d) offset = offset * box[d] + p[d];
    return offset;
  }
  C10_HOST_DEVICE static void box_point(int64_t offset, const int64_t* box, int dims, int64_t* p) {
    for (int d = dims - 1; d >= 0; --d) {
      p[d] = offset % box[d];
      offset /= box[d];
    }
  }
};

// The cell lists of one tile set (see the header comment); origins (T, dims) int64 contiguous.
struct TileCells {
  const int64_t* keys;
  const int64_t* first;
  const int64_t* tiles;
  int64_t num_keys;
  const int64_t* origins;
  // Optional, over the whole key space (members * num_cells), for lookup_point: per key the tile
  // that owns its whole cell (v >= 0: the cell's first listed tile, aligned on the cell, so the
  // lowest tile covering each of its points), -1 for a key no tile lists, or -2 - its position in
  // keys where the cell's points scan its list. One load per point instead of a binary search and
  // three dependent loads (tiles_lookup of many points).
  const int64_t* key_owners = nullptr;

  C10_HOST_DEVICE int64_t find(int64_t key) const {
    const int64_t lo = lower_bound_in(keys, 0, num_keys, key);
    return lo < num_keys && keys[lo] == key ? lo : -1;
  }
  C10_HOST_DEVICE bool covers(int64_t t, const int64_t* g, const TileGeometry& geo) const {
    for (int d = 0; d < geo.dims; ++d) {
      const int64_t o = origins[t * geo.dims + d];
      if (g[d] < o || g[d] >= o + geo.tile[d]) return false;
    }
    return true;
  }
  // The tiles of g's cell in member b (inside the bound): tiles[list.begin : list.end], in
  // ascending order; the ones covering g are among them. One binary search.
  struct List {
    int64_t begin = 0, end = 0;
  };
  C10_HOST_DEVICE List cell_list(int64_t b, const int64_t* g, const TileGeometry& geo) const {
    const int64_t i = find(b * geo.num_cells + geo.cell_of(g));
    return i < 0 ? List{} : List{first[i], first[i + 1]};
  }
  // Calls visit(t) for each tile of `list` covering g, in ascending t, until visit returns false.
  template <typename Visit>
  C10_HOST_DEVICE void for_each_cover_in(List list, const int64_t* g, const TileGeometry& geo,
                                         Visit&& visit) const {
    for (int64_t j = list.begin; j < list.end; ++j) {
      if (covers(tiles[j], g, geo) && !visit(tiles[j])) return;
    }
  }
  // The same over every tile of member b covering g (inside the bound).
  template <typename Visit>
  C10_HOST_DEVICE void for_each_cover(int64_t b, const int64_t* g, const TileGeometry& geo,
                                      Visit&& visit) const {
    for_each_cover_in(cell_list(b, g, geo), g, geo, visit);
  }
  // The first tile of member b covering g (inside the bound), or -1.
  C10_HOST_DEVICE int64_t owner(int64_t b, const int64_t* g, const TileGeometry& geo) const {
    int64_t found = -1;
    for_each_cover(b, g, geo, [&](int64_t t) {
      found = t;
      return false;
    });
    return found;
  }
};

}  // namespace torch_ragged

namespace torch_ragged {

// Output row -> source row, or -1 for the fill value: the gathers behind the tiles ops. A row is
// one point's feature vector (F elements).

// tiles_to_dense(reduce="first"): out row (member b, point of the bound) <- the owner's page row.
struct DenseFromOwner {
  TileGeometry geo;
  TileCells cells;
  C10_HOST_DEVICE int64_t operator()(int64_t row) const {
    int64_t g[kMaxTileDims], p[kMaxTileDims];
    geo.bound_point(row % geo.bound_elems, g);
    const int64_t t = cells.owner(row / geo.bound_elems, g, geo);
    if (t < 0) return -1;
    for (int d = 0; d < geo.dims; ++d) p[d] = g[d] - cells.origins[t * geo.dims + d];
    return t * geo.tile_elems + TileGeometry::box_offset(p, geo.tile, geo.dims);
  }
};

// The tiles kernels' threads: one per (row, span of up to kSpanColumns of its columns). A row's
// source — its point's cell found by a binary search, then the cell's short list — is looked up
// once per span (once per point for rows of up to kSpanColumns elements), not once per element;
// adjacent threads take adjacent spans, so a warp's reads and writes stay contiguous.
constexpr int64_t kSpanColumns = 32;

struct RowSpan {
  int64_t row, begin, end;  // columns [begin, end) of `row`
};

C10_HOST_DEVICE inline int64_t spans_per_row(int64_t row_elems) {
  return (row_elems + kSpanColumns - 1) / kSpanColumns;
}
// The threads of a launch over `rows` rows of `row_elems` elements.
C10_HOST_DEVICE inline int64_t span_threads(int64_t rows, int64_t row_elems) {
  return rows * spans_per_row(row_elems);
}
C10_HOST_DEVICE inline RowSpan row_span(int64_t thread, int64_t row_elems) {
  const int64_t spans = spans_per_row(row_elems);
  const int64_t begin = thread % spans * kSpanColumns;
  const int64_t end = begin + kSpanColumns < row_elems ? begin + kSpanColumns : row_elems;
  return {thread / spans, begin, end};
}

// The gathers' kernel body, thread `thread`: its span of an output row of `row_elems` elements <-
// the same columns of the source row `source` gives for the row, or `fill` where it gives -1.
template <typename Element, typename Source>
C10_HOST_DEVICE void gather_row_span(const Source& source, const Element* src, Element* out,
                                     Element fill, int64_t thread, int64_t row_elems) {
  const RowSpan span = row_span(thread, row_elems);
  const int64_t s = source(span.row);
  Element* to = out + span.row * row_elems;
  if (s < 0) {
    for (int64_t c = span.begin; c < span.end; ++c) to[c] = fill;
    return;
  }
  const Element* from = src + s * row_elems;
  for (int64_t c = span.begin; c < span.end; ++c) to[c] = from[c];
}

// tiles_to_dense(reduce="sum"), thread `thread`'s span of an output row of `width`: each column
// the sum of that column of every covering tile's row, in tile order (acc_t accumulates), or
// `fill` where no tile covers the point. The cell is searched once; its list is scanned per column.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE void sum_covering_span(const TileGeometry& geo, const TileCells& cells,
                                       const scalar_t* pages, scalar_t* out, scalar_t fill,
                                       int64_t thread, int64_t width) {
  const RowSpan span = row_span(thread, width);
  int64_t g[kMaxTileDims];
  geo.bound_point(span.row % geo.bound_elems, g);
  const TileCells::List list = cells.cell_list(span.row / geo.bound_elems, g, geo);
  for (int64_t c = span.begin; c < span.end; ++c) {
    acc_t acc = acc_t(0);
    bool covered = false;
    cells.for_each_cover_in(list, g, geo, [&](int64_t t) {
      int64_t p[kMaxTileDims];
      for (int d = 0; d < geo.dims; ++d) p[d] = g[d] - cells.origins[t * geo.dims + d];
      const int64_t row = t * geo.tile_elems + TileGeometry::box_offset(p, geo.tile, geo.dims);
      acc += static_cast<acc_t>(pages[row * width + c]);
      covered = true;
      return true;
    });
    out[span.row * width + c] = covered ? static_cast<scalar_t>(acc) : fill;
  }
}

// dense_to_tiles: out row (tile t, point of the tile) <- the dense row of that point; -1 outside
// the bound, or (owned_only) where another tile owns the point.
struct TileFromDense {
  TileGeometry geo;
  TileCells cells;
  const int64_t* member;  // (T,) or nullptr: one member
  bool owned_only;
  C10_HOST_DEVICE int64_t operator()(int64_t row) const {
    const int64_t t = row / geo.tile_elems;
    int64_t g[kMaxTileDims];
    TileGeometry::box_point(row % geo.tile_elems, geo.tile, geo.dims, g);
    for (int d = 0; d < geo.dims; ++d) g[d] += cells.origins[t * geo.dims + d];
    if (!geo.in_bound(g)) return -1;
    const int64_t b = member != nullptr ? member[t] : 0;
    if (owned_only && cells.owner(b, g, geo) != t) return -1;
    return b * geo.bound_elems + geo.bound_offset(g);
  }
};

// tiles_halo: out row (tile t, point of the box [origin - radius, origin + tile + radius)) <- the
// owner's page row of that point (first wins), -1 outside the bound or where no tile is.
struct HaloFromOwner {
  TileGeometry geo;
  TileCells cells;
  const int64_t* member;
  int64_t radius[kMaxTileDims];
  int64_t box[kMaxTileDims];
  int64_t box_elems;
  C10_HOST_DEVICE int64_t operator()(int64_t row) const {
    const int64_t t = row / box_elems;
    int64_t g[kMaxTileDims], p[kMaxTileDims];
    TileGeometry::box_point(row % box_elems, box, geo.dims, g);
    for (int d = 0; d < geo.dims; ++d) g[d] += cells.origins[t * geo.dims + d] - radius[d];
    if (!geo.in_bound(g)) return -1;
    const int64_t owner = cells.owner(member != nullptr ? member[t] : 0, g, geo);
    if (owner < 0) return -1;
    for (int d = 0; d < geo.dims; ++d) p[d] = g[d] - cells.origins[owner * geo.dims + d];
    return owner * geo.tile_elems + TileGeometry::box_offset(p, geo.tile, geo.dims);
  }
};

// tiles_halo_backward (the adjoint of tiles_halo): page row (tile t, point p) of the point
// g = origin + p. Where t owns g (inside the bound), the boxes that read g (boxes: tile + 2 radius
// at origin - radius, with their own cell lists) are among `readers(row)`'s list; elsewhere the
// row's gradient is 0 and the list is empty.
struct HaloAdjoint {
  TileGeometry geo;      // the tiles'
  TileCells cells;       // the tiles'
  TileGeometry box_geo;  // the boxes' (same bound)
  TileCells box_cells;   // the boxes' (origins: the boxes')
  const int64_t* member;

  struct Readers {
    int64_t g[kMaxTileDims];  // the row's point
    TileCells::List boxes;    // the boxes of its cell (empty where the row is not an owner's)
  };
  C10_HOST_DEVICE Readers readers(int64_t row) const {
    Readers readers{};
    const int64_t t = row / geo.tile_elems;
    TileGeometry::box_point(row % geo.tile_elems, geo.tile, geo.dims, readers.g);
    for (int d = 0; d < geo.dims; ++d) readers.g[d] += cells.origins[t * geo.dims + d];
    if (!geo.in_bound(readers.g)) return readers;
    const int64_t b = member != nullptr ? member[t] : 0;
    if (cells.owner(b, readers.g, geo) != t) return readers;
    readers.boxes = box_cells.cell_list(b, readers.g, box_geo);
    return readers;
  }
  // add(halo row) for every box of `readers` reading its point, in ascending box order.
  template <typename Add>
  C10_HOST_DEVICE void for_each_reader(const Readers& readers, Add&& add) const {
    box_cells.for_each_cover_in(readers.boxes, readers.g, box_geo, [&](int64_t box) {
      int64_t q[kMaxTileDims];
      for (int d = 0; d < geo.dims; ++d) {
        q[d] = readers.g[d] - box_cells.origins[box * geo.dims + d];
      }
      add(box * box_geo.tile_elems + TileGeometry::box_offset(q, box_geo.tile, geo.dims));
      return true;
    });
  }
};

// tiles_halo_backward's kernel body, thread `thread`'s span of a page row of `width`: each column
// the sum of that column of the halo rows reading the row's point, in ascending box order (acc_t
// accumulates); 0 where none reads it. The owner and the box cell are looked up once per span.
template <typename scalar_t, typename acc_t>
C10_HOST_DEVICE void halo_adjoint_span(const HaloAdjoint& adjoint, const scalar_t* grad,
                                       scalar_t* out, int64_t thread, int64_t width) {
  const RowSpan span = row_span(thread, width);
  const HaloAdjoint::Readers readers = adjoint.readers(span.row);
  for (int64_t c = span.begin; c < span.end; ++c) {
    acc_t acc = acc_t(0);
    adjoint.for_each_reader(
        readers, [&](int64_t halo_row) { acc += static_cast<acc_t>(grad[halo_row * width + c]); });
    out[span.row * width + c] = static_cast<scalar_t>(acc);
  }
}

// tiles_lookup: coordinate i (member b) -> its owner (-1 if none or outside the bound) and the
// position inside it.
C10_HOST_DEVICE inline int64_t lookup_point(const TileGeometry& geo, const TileCells& cells,
                                            int64_t b, const int64_t* g, int64_t* local) {
  if (!geo.in_bound(g)) {
    for (int d = 0; d < geo.dims; ++d) local[d] = 0;
    return -1;
  }
  int64_t t = -1;
  if (cells.key_owners == nullptr) {
    t = cells.owner(b, g, geo);
  } else {
    int64_t cell = 0, inside[kMaxTileDims];
    for (int d = 0; d < geo.dims; ++d) {
      const int64_t rel = g[d] - geo.lo[d], q = divide_by_tile(rel, geo.tile[d]);
      inside[d] = rel - q * geo.tile[d];
      cell = cell * geo.cells[d] + q;
    }
    const int64_t owner = cells.key_owners[b * geo.num_cells + cell];
    if (owner >= 0) {  // aligned on the cell: the point's place in it is its place in the tile
      for (int d = 0; d < geo.dims; ++d) local[d] = inside[d];
      return owner;
    }
    if (owner < -1) {
      const int64_t slot = -2 - owner;
      cells.for_each_cover_in({cells.first[slot], cells.first[slot + 1]}, g, geo, [&](int64_t c) {
        t = c;
        return false;
      });
    }
  }
  for (int d = 0; d < geo.dims; ++d) {
    local[d] = t < 0 ? 0 : g[d] - cells.origins[t * geo.dims + d];
  }
  return t;
}

}  // namespace torch_ragged
