// Schemas of the segment core and its C++ API.

#include <torch/library.h>
#include <torch_ragged/segment.h>

#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("get_first_idx(Tensor numel_per_tensor) -> Tensor", tags);
  m.def("segment_sum(Tensor data, Tensor first_idx) -> Tensor", tags);
}

namespace ops {

at::Tensor get_first_idx(const at::Tensor& numel_per_tensor) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_ragged::get_first_idx", "")
                       .typed<at::Tensor(const at::Tensor&)>();
  return op.call(numel_per_tensor);
}

at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_ragged::segment_sum", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(data, first_idx);
}

}  // namespace ops

at::Tensor get_first_idx(const at::Tensor& numel_per_tensor) {
  return ops::get_first_idx(numel_per_tensor);
}

at::Tensor segment_sum(const at::Tensor& data, const at::Tensor& first_idx) {
  return ops::segment_sum(data, first_idx);
}

}  // namespace torch_ragged
