// accelerate_torch_sparse: this library's kernels as torch's own SparseCPU / SparseCUDA kernels of
// the aten ops they cover, registered on demand and removed again.
//
// The kernels sit below torch's autograd (its derivative formulas, which call these same ops, stay
// in charge of gradients) and compute the forward of each op from the tensor's COO triplet. Where
// an op receives arguments these kernels do not take (a hybrid or non-matrix operand of mm, a dtype
// the kernel has no product for), the kernel calls torch's own implementation of that op by its
// other name (aten::_sparse_mm is what torch registers for mm), so every input keeps torch's
// behaviour and errors.

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/sparse_mask_native.h>
#include <c10/util/safe_numerics.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "segment/offsets.h"
#include "segment/segment_ops.h"
#include "sparse/softmax.h"
#include "sparse/sparse_ops.h"
#include "torch_ragged/sparse.h"

namespace torch_ragged {
namespace {

at::Tensor sparse_tensor(const at::Tensor& indices, const at::Tensor& values,
                         at::IntArrayRef size) {
  return at::_sparse_coo_tensor_unsafe(indices.to(at::kLong), values, size,
                                       values.options().layout(at::kSparse), /*is_coalesced=*/true);
}

// (indices, values) of a sparse COO tensor, coalesced by this library when torch has not flagged
// them so.
std::pair<at::Tensor, at::Tensor> coalesced_parts(const at::Tensor& sparse) {
  if (sparse.is_coalesced()) return {sparse._indices(), sparse._values()};
  auto [indices, values, permutation, first_idx] =
      ops::sparse_coalesce(sparse._indices(), sparse._values(), sparse.sym_sizes(), true, false);
  return {indices, values};
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

// ---- the aten kernels ----

at::Tensor coalesce_kernel(const at::Tensor& self) {
  auto [indices, values, permutation, first_idx] =
      ops::sparse_coalesce(self._indices(), self._values(), self.sym_sizes(), true, false);
  return sparse_tensor(indices, values, self.sizes());
}

at::Tensor to_dense_kernel(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                           std::optional<bool> /*masked_grad: read by torch's autograd*/) {
  TORCH_CHECK(!dtype.has_value(), "dtype argument is not supported by sparse_to_dense");
  return ops::sparse_to_dense(self._indices(), self._values(), self.sym_sizes(), true);
}

template <bool kLog>
at::Tensor softmax_kernel(const at::Tensor& self, int64_t dim, bool half_to_float) {
  constexpr const char* name = kLog ? "log_softmax" : "softmax";
  TORCH_CHECK(!(half_to_float && self.is_cpu()),
              "softmax with half to float conversion is not supported on CPU");
  // torch's CPU kernels exist for float and double only; ours would accept more, torch's refusal is
  // kept
  const at::ScalarType dtype = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_cpu() || dtype == at::kFloat || dtype == at::kDouble, "\"",
                              name, "\" not implemented for '", dtype, "'");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  auto [indices, values] = coalesced_parts(self);
  if (half_to_float) values = values.to(at::kFloat);
  return sparse_tensor(indices, ops::sparse_softmax(indices, values, self.sym_sizes(), d, kLog),
                       self.sizes());
}

template <bool kLog>
at::Tensor softmax_backward_kernel(const at::Tensor& grad_output, const at::Tensor& output,
                                   int64_t dim, const at::Tensor& /*self*/) {
  const int64_t d = at::maybe_wrap_dim(dim, output.dim());
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
  return sparse_tensor(
      indices, sparse_softmax_backward(indices, out_values, grad, output.sym_sizes(), d, kLog),
      output.sizes());
}

at::Tensor sum_kernel(const at::Tensor& self, at::IntArrayRef dim) {
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
  if (indices.size(0) == 0) return values[0];  // every sparse dim reduced: dense
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!reduced[d]) kept.push_back(self.size(d));
  }
  return sparse_tensor(indices, values, kept);
}

bool has_products(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
         dtype == at::kBFloat16;
}

bool is_plain_matrix(const at::Tensor& t) {
  return t.layout() == at::kSparse && t.dim() == 2 && t.dense_dim() == 0;
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

at::Tensor mm_kernel(const at::Tensor& self, const at::Tensor& mat2) {
  const bool same_kind = multipliable(self, mat2);
  if (same_kind && is_plain_matrix(self) && is_plain_matrix(mat2)) {
    auto [a_indices, a_values] = coalesced_parts(self);
    auto [b_indices, b_values] = coalesced_parts(mat2);
    auto [indices, values] = ops::sparse_spgemm(a_indices, a_values, b_indices, b_values,
                                                self.sym_sizes(), mat2.sym_sizes());
    return sparse_tensor(indices, values, {self.size(0), mat2.size(1)});
  }
  if (same_kind && is_plain_matrix(self) && mat2.layout() == at::kStrided) {
    return sparse_times_dense("mm", self, mat2);
  }
  return at::_sparse_mm(self, mat2);  // torch's own kernel for everything else
}

// beta * self + alpha * (mat1 @ mat2) for a dense self that broadcasts to the product; beta = 0
// ignores self (NaN included), as torch.
at::Tensor addmm_kernel(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                        const at::Scalar& beta, const at::Scalar& alpha) {
  const bool ours = self.layout() == at::kStrided && mat2.layout() == at::kStrided &&
                    is_plain_matrix(mat1) && multipliable(mat1, mat2) &&
                    self.scalar_type() == mat1.scalar_type() && self.device() == mat1.device() &&
                    at::is_expandable_to(self.sizes(), {mat1.size(0), mat2.size(1)});
  if (!ours) {
    if (self.is_cpu()) return at::native::addmm_sparse_dense_cpu(self, mat1, mat2, beta, alpha);
    // torch's CUDA kernel is not linked here (a CPU-only torch has none): the same sum, densely
    return at::addmm(self, mat1.to_dense(), mat2, beta, alpha);
  }
  at::Tensor out = sparse_times_dense("addmm", mat1, mat2).mul_(alpha);
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
at::Tensor bmm_kernel(const at::Tensor& self, const at::Tensor& mat2) {
  const bool ours = self.layout() == at::kSparse && mat2.layout() == at::kStrided &&
                    self.dim() == 3 && self.sparse_dim() == 3 && mat2.dim() == 3 &&
                    self.scalar_type() == mat2.scalar_type() && has_products(self.scalar_type()) &&
                    self.device() == mat2.device() && self.size(0) == mat2.size(0) &&
                    self.size(2) == mat2.size(1);
  if (!ours) {
    if (self.is_cpu()) return at::native::bmm_sparse_cpu(self, mat2);
    return at::bmm(self.to_dense(), mat2);  // torch's CUDA kernel is not linked here (see addmm)
  }
  const int64_t batch = self.size(0), n = self.size(1), m = self.size(2), k = mat2.size(2);
  auto [indices, values] = coalesced_parts(self);
  const at::Tensor rows = indices.select(0, 0) * n + indices.select(0, 1);
  const at::Tensor cols = indices.select(0, 0) * m + indices.select(0, 2);
  return row_products("bmm", mat2.reshape({batch * m, k}), rows, cols, values, batch * n)
      .view({batch, n, k});
}

// Along a sparse dim: each entry once per occurrence of its index (the sparse family's op); along a
// dense dim: the values' columns. The result is flagged uncoalesced unless it holds under two
// entries, as torch's.
at::Tensor index_select_kernel(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
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
  const int64_t extent = self.size(d);
  TORCH_CHECK_INDEX(index.numel() == 0 || (index.min().item<int64_t>() >= -extent &&
                                           index.max().item<int64_t>() < extent),
                    "index_select(): index contains a value out of range for tensor of size ",
                    self.sizes(), " at dimension ", d);
  auto [indices, values] =
      ops::sparse_index_select(self._indices(), self._values(), self.sym_sizes(), d, index);
  return at::_sparse_coo_tensor_unsafe(indices.to(at::kLong), values, size,
                                       values.options().layout(at::kSparse), values.size(0) < 2);
}

at::Tensor sparse_mask_kernel(const at::Tensor& self, const at::Tensor& mask) {
  const bool same_frame = mask.layout() == at::kSparse && self.sizes() == mask.sizes() &&
                          self.device() == mask.device();
  at::Tensor values;
  if (same_frame && self.layout() == at::kStrided) {
    values = ops::sparse_mask(self, mask._indices(), true);
  } else if (same_frame && self.layout() == at::kSparse && self.sparse_dim() == mask.sparse_dim() &&
             has_flat_keys(mask.sizes().slice(0, mask.sparse_dim()))) {
    // self's (summed) values read at the mask's entries, zero where self has none: what torch's
    // autograd asks for the gradient of a sparse tensor's construction
    auto [indices, self_values] = coalesced_parts(self);
    values = values_on_pattern(indices, self_values, mask._indices(),
                               mask.sizes().slice(0, mask.sparse_dim()));
  } else {
    return at::native::sparse_mask(self, mask);  // torch's own kernel: its checks, its errors
  }
  // the mask's entries as they are (an uncoalesced mask gives an uncoalesced result, as torch)
  return at::_sparse_coo_tensor_unsafe(mask._indices(), values, mask.sizes(),
                                       values.options().layout(at::kSparse), mask.is_coalesced());
}

// ---- registration ----

struct Registration {
  std::vector<std::unique_ptr<torch::Library>> libraries;
};

void register_kernels(torch::Library& m) {
  m.impl("_coalesce", &coalesce_kernel);
  m.impl("_to_dense", &to_dense_kernel);
  m.impl("_sparse_softmax", &softmax_kernel<false>);
  m.impl("_sparse_log_softmax", &softmax_kernel<true>);
  m.impl("_sparse_softmax_backward_data", &softmax_backward_kernel<false>);
  m.impl("_sparse_log_softmax_backward_data", &softmax_backward_kernel<true>);
  m.impl("_sparse_sum.dim", &sum_kernel);
  m.impl("mm", &mm_kernel);
  m.impl("addmm", &addmm_kernel);
  m.impl("bmm", &bmm_kernel);
  m.impl("index_select", &index_select_kernel);
  m.impl("sparse_mask", &sparse_mask_kernel);
}

std::mutex registration_mutex;
std::unique_ptr<Registration> registration;  // present while accelerated

}  // namespace

bool accelerate_torch_sparse(bool enabled) {
  const std::lock_guard<std::mutex> lock(registration_mutex);
  const bool was_enabled = registration != nullptr;
  if (enabled && !was_enabled) {
    auto fresh = std::make_unique<Registration>();
    for (const c10::DispatchKey key : {c10::DispatchKey::SparseCPU, c10::DispatchKey::SparseCUDA}) {
      fresh->libraries.push_back(std::make_unique<torch::Library>(
          torch::Library::IMPL, "aten", key, __FILE__, static_cast<uint32_t>(__LINE__)));
      register_kernels(*fresh->libraries.back());
    }
    registration = std::move(fresh);
  } else if (!enabled) {
    registration.reset();  // the libraries' destructors remove the kernels: torch's come back
  }
  return was_enabled;
}

bool torch_sparse_accelerated() {
  const std::lock_guard<std::mutex> lock(registration_mutex);
  return registration != nullptr;
}

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  m.def("accelerate_torch_sparse(bool enabled) -> bool",
        [](bool enabled) { return accelerate_torch_sparse(enabled); });
  m.def("torch_sparse_accelerated() -> bool", [] { return torch_sparse_accelerated(); });
}

}  // namespace torch_ragged
