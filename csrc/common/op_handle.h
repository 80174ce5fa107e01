#pragma once

// Typed dispatcher handles. Every C++ entry point (the public API, autograd kernels, composite ops)
// calls an op through one of these, so each caller reaches the same registered op: autograd, the
// CPU and CUDA kernels, and the fake kernel under torch.compile.

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_ragged {

template <typename Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

}  // namespace torch_ragged
