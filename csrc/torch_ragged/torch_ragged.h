#pragma once

// Umbrella header of the torch_ragged C++ API.
//
// Every function here calls its op through the ATen dispatcher, so C++ callers get autograd and the
// CPU / CUDA kernels exactly as Python callers of torch.ops.torch_ragged.* do.

#include <torch_ragged/batch.h>
#include <torch_ragged/export.h>
#include <torch_ragged/pad.h>
#include <torch_ragged/ragged_tensor.h>
#include <torch_ragged/scatter_compat.h>
#include <torch_ragged/segment.h>
#include <torch_ragged/sparse.h>
#include <torch_ragged/tiles.h>

#include <cstdint>
#include <string>

namespace torch_ragged {

// Version of torch_ragged, e.g. "0.1.0".
TORCH_RAGGED_API std::string version();

// CUDA version the library was built with (e.g. 13000), or -1 for a CPU-only build.
TORCH_RAGGED_API int64_t cuda_version();
// Whether the library holds CUDA kernels (a CPU-only build raises NotImplementedError for CUDA
// tensors).
TORCH_RAGGED_API bool built_with_cuda();

namespace detail {
// A program that reaches the ops only through TorchScript references no symbol of the library, and
// `--as-needed` linking would drop it (its ops would then never be registered). Taking the address
// of an exported function in every translation unit that includes this header keeps the library
// linked.
inline const auto link_anchor = &cuda_version;
}  // namespace detail

}  // namespace torch_ragged
