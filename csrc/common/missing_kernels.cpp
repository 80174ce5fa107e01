#include "common/missing_cuda.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_ragged {

static void no_cuda_kernel(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  std::string name = op.schema().name();
  name.replace(0, name.find("::") + 2, "torch_ragged.");
  TORCH_CHECK_NOT_IMPLEMENTED(false, name,
                              ": got CUDA tensors, but this is a CPU-only build of torch_ragged; "
                              "move the inputs to the CPU (tensor.cpu()) or rebuild with CUDA");
}

void register_missing_cuda(torch::Library& m, std::initializer_list<const char*> ops) {
  for (const char* op : ops) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}

}  // namespace torch_ragged
