#pragma once

// Index arithmetic between the packed and padded layouts, shared by the CPU and CUDA kernels
// (C10_HOST_DEVICE), so the CPU tests exercise the arithmetic the GPU runs.
//
// Vocabulary. A batch holds B sub-tensors of shape (s_1, ..., s_k, C); the padded tensor is
// (B, M_1, ..., M_k, C). A *line* is one run along the innermost ragged dim: s_k * C contiguous
// elements of a sub-tensor, which land contiguously (at column offset off_k * C) inside a padded
// line of M_k * C elements. For k = 0 (sub-tensors of shape (C,)) a line is one row of C elements.
// `offsets` hold, per sub-tensor and dim, where the sub-tensor starts in the padded dim: 0 for
// right padding, M_j - s_j for left padding.

#include <c10/macros/Macros.h>

#include <cstdint>
#include <vector>

#include "segment/segment_index.h"  // segment_of_row

namespace torch_ragged {

// Lines per padded batch item: prod(M_1..M_{k-1}).
C10_HOST_DEVICE inline int64_t padded_lines_per_item(const int64_t* max_shape, int64_t k) {
  int64_t lines = 1;
  for (int64_t j = 0; j + 1 < k; ++j) lines *= max_shape[j];
  return lines;
}

// Elements in one line of sub-tensor `shape` (s_k * C), or in one padded line (M_k * C).
C10_HOST_DEVICE inline int64_t line_elems(const int64_t* shape, int64_t k, int64_t elem) {
  return k > 0 ? shape[k - 1] * elem : elem;
}

// For padded line `line` (0 <= line < padded_lines_per_item) of an item whose sub-tensor has shape
// `shape` and starts at `offset` in each padded dim, returns the sub-tensor's line index that lands
// there, or -1 when the padded line lies entirely in padding.
C10_HOST_DEVICE inline int64_t source_line_of_padded_line(int64_t line, const int64_t* max_shape,
                                                          const int64_t* shape,
                                                          const int64_t* offset, int64_t k) {
  int64_t source_line = 0;
  int64_t stride = 1;
  for (int64_t j = k - 2; j >= 0; --j) {
    const int64_t coord = line % max_shape[j] - offset[j];
    line /= max_shape[j];
    if (coord < 0 || coord >= shape[j]) return -1;
    source_line += coord * stride;
    stride *= shape[j];
  }
  return source_line;
}

// The padded line (within its item) that holds line `source_line` of a sub-tensor: the inverse of
// source_line_of_padded_line.
C10_HOST_DEVICE inline int64_t padded_line_of_source_line(int64_t source_line,
                                                          const int64_t* max_shape,
                                                          const int64_t* shape,
                                                          const int64_t* offset, int64_t k) {
  int64_t padded_line = 0;
  int64_t stride = 1;
  for (int64_t j = k - 2; j >= 0; --j) {
    const int64_t coord = source_line % shape[j] + offset[j];
    source_line /= shape[j];
    padded_line += coord * stride;
    stride *= max_shape[j];
  }
  return padded_line;
}

// Column (in elements) where a sub-tensor's line starts inside its padded line.
C10_HOST_DEVICE inline int64_t line_column_offset(const int64_t* offset, int64_t k, int64_t elem) {
  return k > 0 ? offset[k - 1] * elem : 0;
}

// ---- The index tensors checked on the device (what batch/layout.cpp checks on the host) ----

enum class LayoutError : int {
  kNone,
  kSizeOutOfRange,   // a size below 0 or above max_shape
  kRowsNotShapes,    // first_row does not step by prod(shape) (or the product passes int64)
  kFirstRowNotZero,  // first_row[0] != 0
  kRowsNotTotal,     // first_row[batch] != the packed rows
};

// Entry b in [0, batch] of a layout: sub-tensor b's sizes (against max_shape when given) and its
// row step (b < batch), first_row[0] (b == 0), the total (b == batch). One GPU thread per entry;
// an empty batch still checks its single first_row entry.
C10_HOST_DEVICE inline LayoutError layout_entry_error(const int64_t* shapes,
                                                      const int64_t* max_shape,
                                                      const int64_t* first_row, int64_t batch,
                                                      int64_t rank, int64_t total_rows, int64_t b) {
  if (b == 0 && first_row[0] != 0) return LayoutError::kFirstRowNotZero;
  if (b == batch)
    return first_row[batch] == total_rows ? LayoutError::kNone : LayoutError::kRowsNotTotal;
  int64_t rows = 1;
  for (int64_t j = 0; j < rank; ++j) {
    const int64_t size = shapes[b * rank + j];
    if (size < 0 || (max_shape != nullptr && size > max_shape[j])) {
      return LayoutError::kSizeOutOfRange;
    }
    if (size != 0 && rows > INT64_MAX / size) return LayoutError::kRowsNotShapes;
    rows *= size;
  }
  return first_row[b + 1] - first_row[b] == rows ? LayoutError::kNone : LayoutError::kRowsNotShapes;
}

// ---- Kernel bodies (one thread per output element on the GPU; emulated on the host in tests/cpp)
// ----

// A batch's tables as the kernels read them (device pointers on the GPU, host ones in emulation).
struct BatchTables {
  int64_t batch, rank, elem;
  const int64_t* shapes;     // batch x rank
  const int64_t* offsets;    // batch x rank (empty unless padded)
  const int64_t* max_shape;  // rank (empty unless padded)
  const int64_t* first_row;  // batch + 1
  const int64_t* sources;    // batch: address of each sub-tensor's first element (list / packed)

  C10_HOST_DEVICE const int64_t* shape_of(int64_t b) const { return shapes + b * rank; }
  C10_HOST_DEVICE const int64_t* offset_of(int64_t b) const { return offsets + b * rank; }
};

// Padded element e (of lines of padded_line elements, lines_per_item lines per batch item): the
// sub-tensor's element that lands there, read from its storage (sources[b]), or `pad`.
template <typename Element>
C10_HOST_DEVICE void scatter_to_padded_element(const BatchTables& L, Element* out, Element pad,
                                               int64_t e, int64_t padded_line,
                                               int64_t lines_per_item) {
  const int64_t line = e / padded_line, column = e % padded_line;
  const int64_t b = line / lines_per_item;
  const int64_t* shape = L.shape_of(b);
  const int64_t* offset = L.offset_of(b);
  const int64_t src_line =
      source_line_of_padded_line(line % lines_per_item, L.max_shape, shape, offset, L.rank);
  Element value = pad;
  if (src_line >= 0) {
    const int64_t lo = line_column_offset(offset, L.rank, L.elem);
    const int64_t len = line_elems(shape, L.rank, L.elem);
    if (column >= lo && column < lo + len) {
      const Element* src = reinterpret_cast<const Element*>(L.sources[b]);
      value = src[src_line * len + column - lo];
    }
  }
  out[e] = value;
}

// Packed element e of sub-tensor b: from the sub-tensor's own storage (list: padded_base null) or
// from its place in the padded tensor (item_elems elements per batch item).
template <typename Element>
C10_HOST_DEVICE void gather_to_packed_element(const BatchTables& L, Element* out,
                                              const Element* padded_base, int64_t e,
                                              int64_t padded_line, int64_t item_elems) {
  const int64_t b = segment_of_row(L.first_row, L.batch, e / L.elem);
  const int64_t local = e - L.first_row[b] * L.elem;
  if (padded_base == nullptr) {
    out[e] = reinterpret_cast<const Element*>(L.sources[b])[local];
    return;
  }
  const int64_t* shape = L.shape_of(b);
  const int64_t* offset = L.offset_of(b);
  const int64_t line_len = line_elems(shape, L.rank, L.elem);
  const int64_t target =
      padded_line_of_source_line(local / line_len, L.max_shape, shape, offset, L.rank);
  out[e] = padded_base[b * item_elems + target * padded_line +
                       line_column_offset(offset, L.rank, L.elem) + local % line_len];
}

// ---- Rank-1 batches as row kernels (sub-tensors (s_b, C), padded (B, M, C)) ----
// The common case moves a row (C elements: `chunks` Chunks, see widest_chunk_bytes) at a time with
// the segment core's row lanes (RowLanes, copy_tile_rows), decoding each row once instead of each
// element; the per-element bodies above serve ranks 0 and 2+.

// Padded rows fit the rows' 32-bit decode (pad_rank1_rows) when a position within a tile's reach,
// max_len + the block's threads, fits 32 bits.
inline bool rank1_rows_fit(int64_t max_len) { return max_len < (int64_t{1} << 31); }

// Packed row `row` of item k (first_row: the packed rows' offsets): read from the padded tensor
// (row k * max_len + offset[k] + row - first_row[k]) or, padded null, from the item's storage.
template <typename Chunk>
struct PackedRowSource {
  BatchTables L;
  const Chunk* padded;
  int64_t chunks, max_len;
  C10_HOST_DEVICE const Chunk* operator()(int64_t k, int64_t row) const {
    const int64_t local = row - L.first_row[k];
    if (padded == nullptr) return reinterpret_cast<const Chunk*>(L.sources[k]) + local * chunks;
    return padded + (k * max_len + L.offsets[k] + local) * chunks;
  }
};

// Every padded row R = (b, p): row p - offset[b] of sub-tensor b (from sources[b]) when that lies
// in [0, s_b), else a row of `pad`. Grid-stride over tiles of block.threads() rows; a tile's first
// item costs one 64-bit division, its rows are decoded in 32-bit arithmetic (rank1_rows_fit).
template <typename Block, typename Chunk>
C10_HOST_DEVICE void pad_rank1_rows(const Block& block, const BatchTables& L, int64_t max_len,
                                    Chunk* out, int64_t chunks, Chunk pad) {
  const RowLanes lanes(block, chunks);
  const int64_t rows = L.batch * max_len;
  const auto len = static_cast<uint32_t>(max_len);
  for (int64_t tile_start = block.block() * block.threads(); tile_start < rows;
       tile_start += block.blocks() * block.threads()) {
    const int64_t tile_rows =
        rows - tile_start < block.threads() ? rows - tile_start : int64_t{block.threads()};
    const int64_t first_item = tile_start / max_len;
    const auto first_position = static_cast<uint32_t>(tile_start - first_item * max_len);
    const auto source_of = [&](int64_t r) -> const Chunk* {
      const uint32_t position = first_position + static_cast<uint32_t>(r);
      const uint32_t items_on = position / len;
      const int64_t b = first_item + items_on;
      const int64_t coord = static_cast<int64_t>(position - items_on * len) - L.offsets[b];
      if (coord < 0 || coord >= L.shapes[b]) return nullptr;
      return reinterpret_cast<const Chunk*>(L.sources[b]) + coord * chunks;
    };
    copy_tile_rows(lanes, tile_start, tile_rows, out, chunks, source_of, pad);
  }
}

// Addresses or'ed (host): what their alignment allows a row kernel's chunks (widest_chunk_bytes).
inline uint64_t address_bits(const void* address) { return reinterpret_cast<uintptr_t>(address); }

inline uint64_t address_bits(const std::vector<int64_t>& addresses) {
  uint64_t bits = 0;
  for (const int64_t address : addresses) bits |= static_cast<uint64_t>(address);
  return bits;
}

// A chunk of `pad` elements (a chunk holds whole elements: both are powers of two, and the chunk
// divides the row's bytes, a multiple of the element's).
template <typename Chunk>
Chunk repeated_element(const char* element, int64_t element_bytes) {
  Chunk chunk;
  auto* bytes = reinterpret_cast<char*>(&chunk);
  for (int64_t at = 0; at < static_cast<int64_t>(sizeof(Chunk)); ++at) {
    bytes[at] = element[at % element_bytes];
  }
  return chunk;
}

}  // namespace torch_ragged
