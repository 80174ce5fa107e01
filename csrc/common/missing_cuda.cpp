// Ops without a CUDA kernel yet get one that says so, instead of the dispatcher's generic
// "Could not run ... with arguments from the 'CUDA' backend". Registered in every build (the CUDA
// dispatch key exists in CPU-only builds too). Remove an op from the list when its kernel lands.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torch_ragged {
namespace {

void no_cuda_kernel(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  std::string name = op.schema().name();
  name.replace(0, name.find("::") + 2, "torch_ragged.");
#ifdef TORCH_RAGGED_WITH_CUDA
  const char* build = "this build has CUDA, but this op has no CUDA kernel yet";
#else
  const char* build = "this is a CPU-only build of torch_ragged";
#endif
  TORCH_CHECK_NOT_IMPLEMENTED(false, name, ": got CUDA tensors, but ", build,
                              "; move the inputs to the CPU (tensor.cpu()) or rebuild with CUDA");
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
#ifndef TORCH_RAGGED_WITH_CUDA
  for (const char* op : {"get_first_idx", "pad_index", "pad_index_backward"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
#endif
  for (const char* op : {"segment_sum", "list_to_packed", "list_to_padded", "packed_to_padded",
                         "padded_to_packed", "tile_to_packed"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}

}  // namespace torch_ragged
