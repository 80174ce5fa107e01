#pragma once

// Clear errors where the dispatcher finds no kernel. Each family registers both for the ops it
// has backend (CPU / CUDA) kernels for:
//
// - A CPU-only build (no CUDA toolkit, or the CMake build) still sees CUDA tensors from a CUDA
//   torch: a NotImplementedError naming the op instead of "Could not run ... 'CUDA' backend".
//
//     #ifndef TORCH_RAGGED_WITH_CUDA
//     TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kOps); }
//     #endif
//
// - A call with no tensor to dispatch on (None for every tensor argument, an empty tensor list)
//   or tensors of a backend without kernels: the CompositeExplicitAutograd kernel is also the
//   dispatcher's choice for such calls, so this one raises TypeError / ValueError naming the op and
//   the argument (NotImplementedError naming the device for other backends) instead of the
//   dispatcher's "There were no tensor arguments to this function ..." and its table of keys.
//
//     TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
//       register_missing_tensor_errors(m, kOps);
//     }

#include <c10/util/ArrayRef.h>
#include <torch/library.h>

namespace torch_ragged {

void register_missing_cuda(torch::Library& m, c10::ArrayRef<const char*> ops);

void register_missing_tensor_errors(torch::Library& m, c10::ArrayRef<const char*> ops);

}  // namespace torch_ragged
