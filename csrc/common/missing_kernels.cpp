#include "common/missing_kernels.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <set>
#include <sstream>

namespace torch_ragged {

namespace {

// "torch_ragged::segment_sum" -> "torch_ragged.segment_sum"
std::string public_name(const c10::OperatorHandle& op) {
  std::string name = op.schema().name();
  return name.replace(0, name.find("::") + 2, "torch_ragged.");
}

void no_cuda_kernel(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, public_name(op),
                              ": got CUDA tensors, but this is a CPU-only build of torch_ragged; "
                              "move the inputs to the CPU (tensor.cpu()) or rebuild with CUDA");
}

bool is_tensor_list(const c10::TypePtr& type) {
  const auto list = type->cast<c10::ListType>();
  return list != nullptr && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

// The first required tensor argument given as None, or tensor list given empty, named; otherwise
// the devices of the tensors that reached no kernel.
void no_kernel_for_arguments(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = public_name(op);
  const auto& arguments = op.schema().arguments();
  const auto values = torch::jit::last(*stack, arguments.size());
  std::set<std::string> devices;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& value = values[i];
    const c10::TypePtr& type = arguments[i].type();
    const std::string& arg = arguments[i].name();
    if (type->kind() == c10::TypeKind::TensorType) {
      TORCH_CHECK_TYPE(value.isTensor() && value.toTensor().defined(), name, ": ", arg,
                       " must be a tensor, got None");
    }
    if (is_tensor_list(type)) {
      TORCH_CHECK_VALUE(!value.toTensorList().empty(), name, ": ", arg,
                        " must hold at least one tensor, got an empty list");
    }
    if (value.isTensor() && value.toTensor().defined()) {
      devices.insert(value.toTensor().device().str());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) devices.insert(t.device().str());
    }
  }
  std::ostringstream seen;
  for (const std::string& device : devices) seen << (seen.tellp() > 0 ? ", " : "") << device;
  TORCH_CHECK_NOT_IMPLEMENTED(false, name, ": no kernel for tensors on ", seen.str(),
                              " (torch_ragged has CPU and CUDA kernels)");
}

}  // namespace

void register_missing_cuda(torch::Library& m, c10::ArrayRef<const char*> ops) {
  for (const char* op : ops) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}

void register_missing_tensor_errors(torch::Library& m, c10::ArrayRef<const char*> ops) {
  for (const char* op : ops) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&no_kernel_for_arguments>());
  }
}

}  // namespace torch_ragged
