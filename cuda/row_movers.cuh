#pragma once

// The segment core's cooperative row mover (segment_index.h: move_segment_rows), as a kernel any
// family's CUDA file may launch: output row r of segment k is a copy of the row source(k, r)
// points at (segment_expand, segment_ids, ragged_index_select, list_to_packed, padded_to_packed).

#include <ATen/cuda/CUDAContext.h>

#include "common/block.h"
#include "common/parallel.h"
#include "segment/segment_index.h"

namespace torch_ragged::cuda {
namespace {

// Thin shell: one block per tile of kCudaThreads output rows, grid-stride over tiles.
template <typename Chunk, typename Source>
__global__ void __launch_bounds__(kCudaThreads)
    move_segment_rows_kernel(const int64_t* __restrict__ first_idx, int64_t num_segments,
                             int64_t rows, Chunk* __restrict__ out, int64_t chunks, Source source) {
  __shared__ int64_t row_segment[kCudaThreads];
  __shared__ int64_t warp_max[kCudaThreads / kWarpSize];
  move_segment_rows(CudaBlock{}, row_segment, warp_max, first_idx, num_segments, rows, out, chunks,
                    source);
}

// rows > 0 rows of `chunks` Chunks; first_idx (device) the output's offsets over num_segments.
template <typename Chunk, typename Source>
void launch_move_segment_rows(const int64_t* first_idx, int64_t num_segments, int64_t rows,
                              Chunk* out, int64_t chunks, const Source& source) {
  move_segment_rows_kernel<<<cuda_grid_for(rows), kCudaThreads, 0,
                             at::cuda::getCurrentCUDAStream()>>>(first_idx, num_segments, rows, out,
                                                                 chunks, source);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace
}  // namespace torch_ragged::cuda
