#pragma once

// Typed dispatcher calls of the tiles ops with their schema's types (common/op_handle.h).

#include <ATen/ATen.h>

#include <optional>
#include <string_view>
#include <tuple>

namespace torch_ragged::ops {

using OptionalTensor = std::optional<at::Tensor>;
using OptionalTensors = std::optional<at::TensorList>;

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tiles_index(
    const at::Tensor& origins, at::IntArrayRef tile_size, at::IntArrayRef full_min,
    at::IntArrayRef full_max, const OptionalTensor& tile_first_idx);
at::Tensor tiles_to_dense(const at::Tensor& pages, const at::Tensor& origins,
                          at::IntArrayRef full_min, at::IntArrayRef full_max,
                          const at::Scalar& fill_value, c10::string_view reduce,
                          const OptionalTensor& tile_first_idx, OptionalTensors index);
at::Tensor dense_to_tiles(const at::Tensor& dense, const at::Tensor& origins,
                          at::IntArrayRef tile_size, at::IntArrayRef full_min,
                          const at::Scalar& fill_value, bool owned_only,
                          const OptionalTensor& tile_first_idx, OptionalTensors index);
at::Tensor tiles_halo(const at::Tensor& pages, const at::Tensor& origins, at::IntArrayRef radius,
                      at::IntArrayRef full_min, at::IntArrayRef full_max,
                      const at::Scalar& fill_value, const OptionalTensor& tile_first_idx,
                      OptionalTensors index);
// The adjoint of tiles_halo (fill 0): each page point a tile owns sums the halo entries that read
// it; points the tile does not own (or outside the bound) get 0.
at::Tensor tiles_halo_backward(const at::Tensor& grad_halo, const at::Tensor& origins,
                               at::IntArrayRef radius, at::IntArrayRef full_min,
                               at::IntArrayRef full_max, const OptionalTensor& tile_first_idx,
                               OptionalTensors index);
std::tuple<at::Tensor, at::Tensor> tiles_lookup(const at::Tensor& origins,
                                                at::IntArrayRef tile_size, const at::Tensor& coords,
                                                at::IntArrayRef full_min, at::IntArrayRef full_max,
                                                const OptionalTensor& tile_first_idx,
                                                OptionalTensors index);
at::Tensor tiles_correlate(const at::Tensor& pages, const at::Tensor& origins,
                           const at::Tensor& weight, at::IntArrayRef full_min,
                           at::IntArrayRef full_max, const at::Scalar& fill_value,
                           c10::string_view out, const OptionalTensor& tile_first_idx,
                           OptionalTensors index);
// Depthwise correlation, channels last: input (N, *S, C), weight (*K, C), zero padding
// 0 <= p < K per dim -> (N, *(S + 2p - K + 1), C).
at::Tensor tiles_depthwise_correlate(const at::Tensor& input, const at::Tensor& weight,
                                     at::IntArrayRef padding);
std::tuple<at::Tensor, at::Tensor> tiles_from_dense(const at::Tensor& dense,
                                                    at::IntArrayRef tile_size,
                                                    const at::Scalar& fill_value,
                                                    at::OptionalIntArrayRef full_min);

}  // namespace torch_ragged::ops
