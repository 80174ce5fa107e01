// accelerate_torch_sparse: this library's kernels as torch's own SparseCPU / SparseCUDA kernels of
// the aten ops they cover.
//
// The kernels sit below torch's autograd (its derivative formulas, which call these same ops, stay
// in charge of gradients) and compute the forward of each op from the tensor's COO triplet. Where
// an op receives arguments these kernels do not take (a hybrid or non-matrix operand of mm, a dtype
// the kernels have no sum or product for), the kernel calls torch's own kernel of that op, so every
// input keeps torch's behaviour and errors.
//
// Registered once, for the life of the process: the first accelerate_torch_sparse(true) reads
// torch's kernels of these ops from the dispatcher, then registers ours in their place. From then
// on, on / off is one process-wide atomic flag that every kernel reads at each call: off, the
// kernel calls torch's kernel it replaced, with the same arguments. Nothing in the dispatcher
// changes after that first registration, so threads that dispatch through these ops while another
// toggles the flag never see a kernel being removed (torch locks registration, not calls: removing
// a kernel under a running call crashed). The flag is process-wide, not thread-local, because
// autograd runs backward passes on its own threads (one per device), which a thread-local switch
// set by the caller would not reach. Both implementations compute the same functions, and torch's
// derivative formulas are the same whichever kernel evaluates them, so a forward and its backward
// may run on different sides of a toggle and the gradient is still the gradient.

#include <ATen/ATen.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/safe_numerics.h>
#include <pthread.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <optional>
#include <tuple>
#include <vector>

#include "segment/offsets.h"
#include "segment/segment_args.h"
#include "segment/segment_ops.h"
#include "sparse/softmax.h"
#include "sparse/sparse_ops.h"
#include "sparse/sparse_tensor.h"
#include "torch_ragged/sparse.h"

namespace torch_ragged {
namespace {

std::atomic<bool> accelerated{false};

// The sparse backends whose kernels are replaced.
constexpr std::array<c10::DispatchKey, 2> kSparseKeys = {c10::DispatchKey::SparseCPU,
                                                         c10::DispatchKey::SparseCUDA};

// torch's own kernel of one aten op for each sparse backend, read from the dispatcher before ours
// replace it (a copy of the dispatch table's entry: it keeps the kernel's functor alive), and
// called with the arguments our kernel received.
template <typename Signature>
class TorchKernel;

template <typename R, typename... Args>
class TorchKernel<R(Args...)> {
 public:
  TorchKernel(const char* name, const char* overload) : name_(name), overload_(overload) {}

  void capture() {
    op_ = c10::Dispatcher::singleton().findSchemaOrThrow(name_, overload_);
    for (size_t i = 0; i < kSparseKeys.size(); ++i) {
      if (op_->hasComputedKernelForDispatchKey(kSparseKeys[i])) {
        kernels_[i] = op_->getComputedKernelForDispatchKey(kSparseKeys[i]).kernelFunction();
      }
    }
  }

  // ks: the keys this call was dispatched with (the dispatcher picked SparseCUDA over SparseCPU
  // when a CUDA tensor took part; so does this).
  R operator()(c10::DispatchKeySet ks, Args... args) const {
    const size_t i = ks.has_backend(c10::BackendComponent::CUDABit) ? 1 : 0;
    TORCH_INTERNAL_ASSERT(op_.has_value() && kernels_[i].has_value(),
                          "torch_ragged accelerate: no torch kernel of ", name_, " for ",
                          kSparseKeys[i]);
    return kernels_[i]->template call<R, Args...>(*op_, ks, args...);
  }

  const char* name() const { return name_; }
  const char* overload() const { return overload_; }

 private:
  const char* name_;
  const char* overload_;
  std::optional<c10::OperatorHandle> op_;
  std::array<std::optional<c10::KernelFunction>, kSparseKeys.size()> kernels_;
};

using UnaryFn = at::Tensor(const at::Tensor&);
using ToDenseFn = at::Tensor(const at::Tensor&, std::optional<at::ScalarType>, std::optional<bool>);
using SoftmaxFn = at::Tensor(const at::Tensor&, int64_t, bool);
using SoftmaxBackwardFn = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t,
                                     const at::Tensor&);
using SumFn = at::Tensor(const at::Tensor&, at::IntArrayRef);
using BinaryFn = at::Tensor(const at::Tensor&, const at::Tensor&);
using AddmmFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Scalar&, const at::Scalar&);
using IndexSelectFn = at::Tensor(const at::Tensor&, int64_t, const at::Tensor&);

TorchKernel<UnaryFn> torch_coalesce("aten::_coalesce", "");
TorchKernel<ToDenseFn> torch_to_dense("aten::_to_dense", "");
TorchKernel<SoftmaxFn> torch_softmax("aten::_sparse_softmax", "");
TorchKernel<SoftmaxFn> torch_log_softmax("aten::_sparse_log_softmax", "");
TorchKernel<SoftmaxBackwardFn> torch_softmax_backward("aten::_sparse_softmax_backward_data", "");
TorchKernel<SoftmaxBackwardFn> torch_log_softmax_backward("aten::_sparse_log_softmax_backward_data",
                                                          "");
TorchKernel<SumFn> torch_sum("aten::_sparse_sum", "dim");
TorchKernel<BinaryFn> torch_mm("aten::mm", "");
TorchKernel<AddmmFn> torch_addmm("aten::addmm", "");
TorchKernel<BinaryFn> torch_bmm("aten::bmm", "");
TorchKernel<IndexSelectFn> torch_index_select("aten::index_select", "");
TorchKernel<BinaryFn> torch_sparse_mask("aten::sparse_mask", "");

bool is_on() { return accelerated.load(std::memory_order_acquire); }

// accelerate() takes over only what it makes faster. On the CPU, torch's own kernels beat ours
// below about 128 entries (the default of ours_from_entries): the fixed work of a call (offsets,
// the reduction tree's set-up, a few allocations) is most of it there. Measured 2026-12-07, 2
// threads, accelerated / torch: mm at 16 entries 0.72x, 64 0.85-0.91x, 256 1.15-1.35x; sparse
// softmax at 16 0.79x, 64 0.96-1.06x, 256 1.43x; sparse sum at 4-128 entries 0.58-0.99x,
// 256 1.01-1.15x. torch's CPU kernels of these ops are deterministic, so results stay reproducible.
// The tests set it to 0 (accelerate_torch_sparse_from) so that small inputs exercise these kernels.
std::atomic<int64_t> ours_from_entries{128};

// Whether torch's own kernel is the faster one here and may be trusted with the tensor: a CPU COO
// tensor of fewer entries, whose indices are each in range and, where it is flagged coalesced,
// strictly rising (row-major). One that is not goes to this library's kernels, which refuse it by
// name where torch would read or write out of bounds. The check is one loop over the few entries.
// A COO tensor's parts read from its SparseTensorImpl: Tensor::_nnz() / _indices() /
// is_coalesced() / dense_dim() are each a dispatcher call, and these checks run on every call
// (mm's kernel reaches them twice, through addmm).
const at::SparseTensorImpl& coo_impl(const at::Tensor& sparse) {
  return *static_cast<const at::SparseTensorImpl*>(sparse.unsafeGetTensorImpl());
}

bool torch_is_faster_here(const at::Tensor& sparse) {
  if (!sparse.is_cpu() || sparse.layout() != at::kSparse) return false;
  const at::SparseTensorImpl* impl = &coo_impl(sparse);
  if (impl->nnz() >= ours_from_entries.load(std::memory_order_relaxed)) return false;
  const at::Tensor& indices = impl->indices();
  if (indices.scalar_type() != at::kLong) return false;
  const auto index = indices.accessor<int64_t, 2>();
  const bool flagged = impl->coalesced();
  for (int64_t i = 0; i < index.size(1); ++i) {
    int order = i == 0 ? 1 : 0;  // against the entry before: 1 above, -1 below, 0 equal
    for (int64_t d = 0; d < index.size(0); ++d) {
      const int64_t at = index[d][i];
      if (at < 0 || at >= sparse.size(d)) return false;
      if (order == 0) order = at > index[d][i - 1] ? 1 : (at < index[d][i - 1] ? -1 : 0);
    }
    if (flagged && order != 1) return false;
  }
  return true;
}

at::Tensor coalesced_tensor(const at::Tensor& indices, const at::Tensor& values,
                            at::IntArrayRef size) {
  return coo_tensor(indices, values, size, /*coalesced=*/true);
}

// Whether this library sums values of this dtype (duplicates of bool values are or-ed).
bool sums_values_of(const at::Tensor& sparse) {
  const at::ScalarType dtype = sparse.scalar_type();
  return dtype == at::kBool || has_kernels_for(SegmentDtypes::kSummable, dtype);
}

// (indices, values) of a sparse COO tensor, coalesced by this library when torch has not flagged
// them so. Below autograd (these are backend kernels): the values as stored.
std::pair<at::Tensor, at::Tensor> coalesced_parts(const at::Tensor& sparse) {
  return torch_ragged::coalesced_parts(sparse, sparse._values());
}

// from_values (on the coalesced from_indices) read at the coalesced to_indices; zero where from has
// no entry. Both key lists rise, so one binary search per target entry finds its source.
at::Tensor values_on_pattern(const at::Tensor& from_indices, const at::Tensor& from_values,
                             const at::Tensor& to_indices, at::IntArrayRef sparse_size) {
  if (from_indices.sizes() == to_indices.sizes() && at::equal(from_indices, to_indices)) {
    return from_values;
  }
  std::vector<int64_t> value_shape = from_values.sizes().vec();
  value_shape[0] = to_indices.size(1);
  if (from_indices.size(1) == 0) return at::zeros(value_shape, from_values.options());
  const c10::SymIntArrayRef size = c10::fromIntArrayRefSlow(sparse_size);
  const at::Tensor from_keys = ops::sparse_flat_keys(from_indices, size, false);
  const at::Tensor to_keys = ops::sparse_flat_keys(to_indices, size, false);
  const at::Tensor position = at::searchsorted(from_keys, to_keys).clamp_max(from_keys.size(0) - 1);
  std::vector<int64_t> found_shape(value_shape.size(), 1);
  found_shape[0] = value_shape[0];
  const at::Tensor found = from_keys.index_select(0, position).eq(to_keys).view(found_shape);
  return at::where(found, from_values.index_select(0, position),
                   at::zeros({}, from_values.options()));
}

// ---- the aten kernels: torch's own when off, or for arguments these kernels do not take ----

at::Tensor coalesce_kernel(c10::DispatchKeySet ks, const at::Tensor& self) {
  if (!is_on() || !sums_values_of(self)) return torch_coalesce(ks, self);
  auto [indices, values, permutation, first_idx] =
      ops::sparse_coalesce(self._indices(), self._values(), self.sym_sizes(), true, false);
  return coalesced_tensor(indices, values, self.sizes());
}

at::Tensor to_dense_kernel(c10::DispatchKeySet ks, const at::Tensor& self,
                           std::optional<at::ScalarType> dtype, std::optional<bool> masked_grad) {
  // a dtype argument: torch's refusal ("dtype argument is not supported by sparse_to_dense"). Small
  // CPU inputs torch can trust: its kernel (too few entries to thread: duplicates added in order).
  if (!is_on() || dtype.has_value() || !sums_values_of(self) || torch_is_faster_here(self)) {
    return torch_to_dense(ks, self, dtype, masked_grad);
  }
  return ops::sparse_to_dense(self._indices(), self._values(), self.sym_sizes(), true);
}

// torch's CPU kernels exist for float and double only and refuse half_to_float; ours would take
// more, but torch's refusals (and their exception types) are kept by calling its kernel.
bool softmax_here(const at::Tensor& values, bool half_to_float) {
  const at::ScalarType dtype = values.scalar_type();
  if (values.is_cpu()) return !half_to_float && (dtype == at::kFloat || dtype == at::kDouble);
  return has_kernels_for(SegmentDtypes::kFloating, dtype);
}

template <bool kLog>
at::Tensor softmax_kernel(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                          bool half_to_float) {
  if (!is_on() || !softmax_here(self, half_to_float) || torch_is_faster_here(self)) {
    return (kLog ? torch_log_softmax : torch_softmax)(ks, self, dim, half_to_float);
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  auto [indices, values] = coalesced_parts(self);
  if (half_to_float) values = values.to(at::kFloat);
  return coalesced_tensor(indices, ops::sparse_softmax(indices, values, self.sym_sizes(), d, kLog),
                          self.sizes());
}

template <bool kLog>
at::Tensor softmax_backward_kernel(c10::DispatchKeySet ks, const at::Tensor& grad_output,
                                   const at::Tensor& output, int64_t dim, const at::Tensor& self) {
  if (!is_on() || !softmax_here(output, false) ||
      grad_output.scalar_type() != output.scalar_type()) {
    return (kLog ? torch_log_softmax_backward : torch_softmax_backward)(ks, grad_output, output,
                                                                        dim, self);
  }
  const int64_t d = at::maybe_wrap_dim(dim, output.dim());
  if (torch_is_faster_here(output)) {  // the dim wrapped: torch's own backward does not wrap it
    return (kLog ? torch_log_softmax_backward : torch_softmax_backward)(ks, grad_output, output, d,
                                                                        self);
  }
  auto [indices, out_values] = coalesced_parts(output);
  const at::Tensor& given = grad_output._indices();
  at::Tensor grad;
  if (given.sizes() == indices.sizes() && at::equal(given, indices)) {
    grad = grad_output._values();  // the output's own pattern (autograd's usual case): no sort
  } else {
    auto [grad_indices, grad_values] = coalesced_parts(grad_output);
    grad = values_on_pattern(grad_indices, grad_values, indices,
                             output.sizes().slice(0, output.sparse_dim()));
  }
  return coalesced_tensor(
      indices, sparse_softmax_backward(indices, out_values, grad, output.sym_sizes(), d, kLog),
      output.sizes());
}

at::Tensor sum_kernel(c10::DispatchKeySet ks, const at::Tensor& self, at::IntArrayRef dim) {
  if (!is_on() || !has_kernels_for(SegmentDtypes::kSummable, self.scalar_type()) ||
      torch_is_faster_here(self)) {
    return torch_sum(ks, self, dim);
  }
  // torch's errors for the dims: IndexError out of range, RuntimeError repeated (the op's own would
  // be a ValueError)
  std::vector<bool> reduced(self.dim(), false);
  for (const int64_t d : dim) {
    const int64_t wrapped = at::maybe_wrap_dim(d, self.dim());
    TORCH_CHECK(!reduced[wrapped], "dim ", wrapped, " appears multiple times in the list of dims");
    reduced[wrapped] = true;
  }
  auto [indices, values] =
      ops::sparse_sum(self._indices(), self._values(), self.sym_sizes(), dim, true);
  return sparse_sum_result(self, indices, values, dim);
}

bool has_products(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
         dtype == at::kBFloat16;
}

bool is_plain_matrix(const at::Tensor& t) {
  return t.layout() == at::kSparse && t.dim() == 2 && coo_impl(t).dense_dim() == 0;
}

// Operands of one device and one dtype with a product here, of a 2-D product's shapes.
bool multipliable(const at::Tensor& self, const at::Tensor& mat2) {
  return self.scalar_type() == mat2.scalar_type() && has_products(self.scalar_type()) &&
         self.device() == mat2.device() && self.dim() == 2 && mat2.dim() == 2 &&
         self.size(1) == mat2.size(0);
}

// out[r] = sum of values[i] * dense[cols[i]] over the entries i of row r, for entries sorted by
// row: the rows are segments of the entries, one weighted gather-sum. A tensor torch flags
// coalesced without checking (is_coalesced=True, no invariant checks) may hold rows out of order or
// out of range: refused by name, never read out of bounds.
at::Tensor row_products(std::string_view op, const at::Tensor& dense, const at::Tensor& rows,
                        const at::Tensor& cols, const at::Tensor& values, int64_t num_rows) {
  const std::optional<at::Tensor> row_first_idx = offsets_of_sorted_ids(rows, num_rows);
  TORCH_CHECK_VALUE(
      row_first_idx.has_value(), "torch_ragged accelerate (aten::", op,
      "): the sparse operand is flagged coalesced but its indices are out of order or "
      "out of range");
  return ops::segment_gather_sum(dense.contiguous(), cols, values, *row_first_idx);
}

// A coalesced matrix times a dense one.
at::Tensor sparse_times_dense(std::string_view op, const at::Tensor& sparse,
                              const at::Tensor& dense) {
  auto [indices, values] = coalesced_parts(sparse);
  return row_products(op, dense, indices.select(0, 0), indices.select(0, 1), values,
                      sparse.size(0));
}

at::Tensor mm_kernel(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2) {
  const bool same_kind =
      is_on() && !torch_is_faster_here(self) && multipliable(self, mat2) && is_plain_matrix(self);
  if (same_kind && is_plain_matrix(mat2)) {
    auto [a_indices, a_values] = coalesced_parts(self);
    auto [b_indices, b_values] = coalesced_parts(mat2);
    auto [indices, values] = ops::sparse_spgemm(a_indices, a_values, b_indices, b_values,
                                                self.sym_sizes(), mat2.sym_sizes());
    return coalesced_tensor(indices, values, {self.size(0), mat2.size(1)});
  }
  if (same_kind && mat2.layout() == at::kStrided) return sparse_times_dense("mm", self, mat2);
  return torch_mm(ks, self, mat2);
}

// beta * self + alpha * (mat1 @ mat2) for a dense self that broadcasts to the product; beta = 0
// ignores self (NaN included), as torch.
at::Tensor addmm_kernel(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat1,
                        const at::Tensor& mat2, const at::Scalar& beta, const at::Scalar& alpha) {
  const bool ours = is_on() && !torch_is_faster_here(mat1) && self.layout() == at::kStrided &&
                    mat2.layout() == at::kStrided && is_plain_matrix(mat1) &&
                    multipliable(mat1, mat2) && self.scalar_type() == mat1.scalar_type() &&
                    self.device() == mat1.device() &&
                    at::is_expandable_to(self.sizes(), {mat1.size(0), mat2.size(1)});
  if (!ours) return torch_addmm(ks, self, mat1, mat2, beta, alpha);
  at::Tensor out = sparse_times_dense("addmm", mat1, mat2);
  if (alpha.toComplexDouble() != 1.0) out.mul_(alpha);  // a pass over the output saved when 1
  if (beta.toComplexDouble() != 0.0) out.add_(self.expand_as(out), beta);
  return out;
}

// Whether the row-major flat index of every position of these sparse sizes fits in an int64.
bool has_flat_keys(at::IntArrayRef sparse_size) {
  uint64_t positions = 1;
  for (const int64_t size : sparse_size) {
    if (c10::mul_overflows(positions, static_cast<uint64_t>(std::max<int64_t>(size, 1)),
                           &positions) ||
        positions > (uint64_t{1} << 62)) {
      return false;
    }
  }
  return true;
}

// A batch of sparse matrices (batch, n, m) times a dense (batch, m, k): the batch is one
// block-diagonal (batch * n, batch * m) matrix, whose coalesced entries are the batch's in order.
at::Tensor bmm_kernel(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2) {
  const bool ours = is_on() && self.layout() == at::kSparse && mat2.layout() == at::kStrided &&
                    self.dim() == 3 && self.sparse_dim() == 3 && mat2.dim() == 3 &&
                    self.scalar_type() == mat2.scalar_type() && has_products(self.scalar_type()) &&
                    self.device() == mat2.device() && self.size(0) == mat2.size(0) &&
                    self.size(2) == mat2.size(1) && !torch_is_faster_here(self);
  if (!ours) return torch_bmm(ks, self, mat2);
  const int64_t batch = self.size(0), n = self.size(1), m = self.size(2), k = mat2.size(2);
  auto [indices, values] = coalesced_parts(self);
  const at::Tensor rows = indices.select(0, 0) * n + indices.select(0, 1);
  const at::Tensor cols = indices.select(0, 0) * m + indices.select(0, 2);
  return row_products("bmm", mat2.reshape({batch * m, k}), rows, cols, values, batch * n)
      .view({batch, n, k});
}

// Along a sparse dim: each entry once per occurrence of its index (the sparse family's op); along a
// dense dim: the values' columns. The result is flagged uncoalesced unless it holds under two
// entries, as torch's. On the CPU a small tensor keeps torch's kernel (torch_is_faster_here);
// from ours_from_entries on, the op's CPU kernel (one counting sort of the positions, two passes
// over the entries) runs.
at::Tensor index_select_kernel(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                               const at::Tensor& index) {
  if (!is_on() || torch_is_faster_here(self)) return torch_index_select(ks, self, dim, index);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  // torch's checks and messages (IndexError) for the index
  TORCH_CHECK_INDEX(
      index.dim() == 1 && index.layout() == at::kStrided && index.scalar_type() == at::kLong,
      "index_select() argument index must be 1-D strided (non-sparse) long-tensor.");
  std::vector<int64_t> size = self.sizes().vec();
  size[d] = index.size(0);
  if (d >= self.sparse_dim()) {
    const at::Tensor values = self._values().index_select(d - self.sparse_dim() + 1, index);
    return at::_sparse_coo_tensor_unsafe(self._indices(), values, size,
                                         values.options().layout(at::kSparse), values.size(0) < 2);
  }
  // The op checks the index range in its own pass; only when it raises is the index read again,
  // to tell torch's IndexError (the index out of range) from one about self's own indices.
  at::Tensor indices, values;
  try {
    std::tie(indices, values) =
        ops::sparse_index_select(self._indices(), self._values(), self.sym_sizes(), d, index);
  } catch (const c10::IndexError&) {
    const int64_t extent = self.size(d);
    const at::Tensor host = index.to(at::kCPU).contiguous();
    const int64_t* position = host.const_data_ptr<int64_t>();
    for (int64_t i = 0; i < host.numel(); ++i) {
      TORCH_CHECK_INDEX(position[i] >= -extent && position[i] < extent,
                        "index_select(): index contains ", position[i],
                        " that is out of range for tensor of size ", self.sizes(), " at dimension ",
                        d);
    }
    throw;
  }
  return at::_sparse_coo_tensor_unsafe(indices.to(at::kLong), values, size,
                                       values.options().layout(at::kSparse), values.size(0) < 2);
}

at::Tensor sparse_mask_kernel(c10::DispatchKeySet ks, const at::Tensor& self,
                              const at::Tensor& mask) {
  const bool same_frame = is_on() && mask.layout() == at::kSparse && self.sizes() == mask.sizes() &&
                          self.device() == mask.device();
  at::Tensor values;
  if (same_frame && self.layout() == at::kStrided) {
    values = ops::sparse_mask(self, mask._indices(), true);
  } else if (same_frame && self.layout() == at::kSparse && self.sparse_dim() == mask.sparse_dim() &&
             sums_values_of(self) && has_flat_keys(mask.sizes().slice(0, mask.sparse_dim()))) {
    // self's (summed) values read at the mask's entries, zero where self has none: what torch's
    // autograd asks for the gradient of a sparse tensor's construction
    auto [indices, self_values] = coalesced_parts(self);
    values = values_on_pattern(indices, self_values, mask._indices(),
                               mask.sizes().slice(0, mask.sparse_dim()));
  } else {
    return torch_sparse_mask(ks, self, mask);  // torch's own kernel: its checks, its errors
  }
  // the mask's entries as they are (an uncoalesced mask gives an uncoalesced result, as torch)
  return at::_sparse_coo_tensor_unsafe(mask._indices(), values, mask.sizes(),
                                       values.options().layout(at::kSparse), mask.is_coalesced());
}

// ---- registration, once ----

template <typename Signature, typename Kernel>
void replace(std::vector<torch::Library>& libraries, TorchKernel<Signature>& theirs, Kernel* ours) {
  theirs.capture();
  std::string name = std::string(theirs.name()).substr(6);  // without "aten::"
  if (*theirs.overload() != '\0') name += std::string(".") + theirs.overload();
  for (torch::Library& m : libraries) m.impl(name.c_str(), ours);
}

// Held only while the kernels are first registered. A fork() taken meanwhile waits for it (the
// atfork handlers below), so a child never inherits it locked.
pthread_mutex_t registration_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> registered{false};

void lock_registration() { pthread_mutex_lock(&registration_mutex); }
void unlock_registration() { pthread_mutex_unlock(&registration_mutex); }

[[maybe_unused]] const int atfork_installed =
    pthread_atfork(&lock_registration, &unlock_registration, &unlock_registration);

void register_kernels_once() {
  if (registered.load(std::memory_order_acquire)) return;
  lock_registration();
  try {
    if (!registered.load(std::memory_order_relaxed)) {
      // Kept for the life of the process (never destroyed: removing kernels is what must not
      // happen while other threads dispatch, and at exit the dispatcher may be gone first).
      auto* libraries = new std::vector<torch::Library>();
      libraries->reserve(kSparseKeys.size());
      for (const c10::DispatchKey key : kSparseKeys) {
        libraries->emplace_back(torch::Library::IMPL, "aten", key, __FILE__,
                                static_cast<uint32_t>(__LINE__));
      }
      replace(*libraries, torch_coalesce, &coalesce_kernel);
      replace(*libraries, torch_to_dense, &to_dense_kernel);
      replace(*libraries, torch_softmax, &softmax_kernel<false>);
      replace(*libraries, torch_log_softmax, &softmax_kernel<true>);
      replace(*libraries, torch_softmax_backward, &softmax_backward_kernel<false>);
      replace(*libraries, torch_log_softmax_backward, &softmax_backward_kernel<true>);
      replace(*libraries, torch_sum, &sum_kernel);
      replace(*libraries, torch_mm, &mm_kernel);
      replace(*libraries, torch_addmm, &addmm_kernel);
      replace(*libraries, torch_bmm, &bmm_kernel);
      replace(*libraries, torch_index_select, &index_select_kernel);
      replace(*libraries, torch_sparse_mask, &sparse_mask_kernel);
      registered.store(true, std::memory_order_release);
    }
  } catch (...) {
    unlock_registration();
    throw;
  }
  unlock_registration();
}

}  // namespace

bool accelerate_torch_sparse(bool enabled) {
  if (enabled) register_kernels_once();
  return accelerated.exchange(enabled, std::memory_order_acq_rel);
}

bool torch_sparse_accelerated() { return is_on(); }

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  m.def("accelerate_torch_sparse(bool enabled) -> bool",
        [](bool enabled) { return accelerate_torch_sparse(enabled); });
  m.def("torch_sparse_accelerated() -> bool", [] { return torch_sparse_accelerated(); });
  // CPU calls with fewer entries keep torch's own kernels (faster there); returns the previous
  // count. 0 sends every call to this library's kernels: what the tests do, to test them.
  m.def("accelerate_torch_sparse_from(int entries) -> int", [](int64_t entries) {
    TORCH_CHECK_VALUE(entries >= 0,
                      "torch_ragged.accelerate_torch_sparse_from: entries must be >= 0, got ",
                      entries);
    return ours_from_entries.exchange(entries);
  });
}

}  // namespace torch_ragged
