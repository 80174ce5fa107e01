// A CPU-only build (no CUDA toolkit, or the CMake build) still sees CUDA tensors from a CUDA torch:
// every op then says so, instead of the dispatcher's generic "Could not run ... with arguments from
// the 'CUDA' backend". Builds with CUDA register the real kernels (cuda/*.cu) instead. A new op
// with a CUDA kernel joins the list below.

#ifndef TORCH_RAGGED_WITH_CUDA

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torch_ragged {
namespace {

void no_cuda_kernel(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  std::string name = op.schema().name();
  name.replace(0, name.find("::") + 2, "torch_ragged.");
  TORCH_CHECK_NOT_IMPLEMENTED(false, name,
                              ": got CUDA tensors, but this is a CPU-only build of torch_ragged; "
                              "move the inputs to the CPU (tensor.cpu()) or rebuild with CUDA");
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  for (const char* op :
       {"get_first_idx", "segment_sum", "list_to_packed", "list_to_padded", "packed_to_padded",
        "padded_to_packed", "tile_to_packed", "pad_index", "pad_index_backward"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}

}  // namespace torch_ragged

#endif  // TORCH_RAGGED_WITH_CUDA
