// Autograd of the segment core: segment_sum's backward is tile_to_packed (and vice versa), so
// double backward comes for free.

#include <torch/autograd.h>
#include <torch/library.h>

#include "batch/batch_ops.h"
#include "segment/segment_ops.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class SegmentSum : public torch::autograd::Function<SegmentSum> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& data,
                            const at::Tensor& first_idx) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({first_idx});
    ctx->saved_data["data_sizes"] = data.sym_sizes();
    return ops::segment_sum(data, first_idx);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor first_idx = ctx->get_saved_variables()[0];
    const std::vector<c10::SymInt> sizes = ctx->saved_data["data_sizes"].toSymIntVector();
    const at::Tensor counts = first_idx.diff();
    at::Tensor grad = ops::tile_to_packed(grads[0], counts, sizes[0]).reshape_symint(sizes);
    return {grad, at::Tensor()};
  }
};

at::Tensor segment_sum_autograd(const at::Tensor& data, const at::Tensor& first_idx) {
  return SegmentSum::apply(data, first_idx);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) { m.impl("segment_sum", &segment_sum_autograd); }

}  // namespace torch_ragged
