// The public functions of torch_ragged.sparse that take torch sparse tensors, as registered ops
// (torch_ragged::sparse_<name>): the layout checks, the values connected to autograd and the
// result's construction here in C++, the arithmetic in ATen and the triplet ops. So Python,
// TorchScript and C++ (torch_ragged::sparse::<name>) call one op, at one per-call cost.
//
// CompositeImplicitAutograd: the kernels run above autograd and differentiate through their parts
// (the values' ATen functions and torch's sparse constructor), on every device.

#include <ATen/ScalarOps.h>
#include <c10/util/safe_numerics.h>
#include <torch/library.h>
#include <torch_ragged/sparse.h>

#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/checks.h"
#include "common/op_handle.h"
#include "segment/segment_ops.h"
#include "sparse/sparse_args.h"
#include "sparse/sparse_ops.h"
#include "sparse/sparse_tensor.h"

namespace torch_ragged {
namespace {

// f of s's values on s's pattern. A linear f keeps the entries as they are (and the coalesced
// flag); any other is applied to the summed duplicates, so s is coalesced first, as torch does.
template <typename Function>
at::Tensor map_values(const char* op, const at::Tensor& s, bool linear, const Function& f) {
  check_coo(op, s);
  if (linear)
    return coo_tensor(s._indices(), f(differentiable_values(s)), s.sizes(), s.is_coalesced());
  auto [indices, values] = coalesced_parts(s, differentiable_values(s));
  return coo_tensor(indices, f(values), s.sizes(), true);
}

// The unary functions torch takes on sparse COO tensors, each mapping 0 to 0 (so the pattern
// stays): sparse_<name>(Tensor s) -> Tensor.
struct UnaryFunction {
  const char* name;
  at::Tensor (*apply)(const at::Tensor&);
  bool linear;
};

// clang-format off
#define TORCH_RAGGED_UNARY(name, linear) \
  UnaryFunction{#name, [](const at::Tensor& v) { return at::name(v); }, linear}
// clang-format on
constexpr UnaryFunction kUnaryFunctions[] = {
    TORCH_RAGGED_UNARY(neg, true),      TORCH_RAGGED_UNARY(abs, false),
    TORCH_RAGGED_UNARY(asin, false),    TORCH_RAGGED_UNARY(asinh, false),
    TORCH_RAGGED_UNARY(atan, false),    TORCH_RAGGED_UNARY(atanh, false),
    TORCH_RAGGED_UNARY(ceil, false),    TORCH_RAGGED_UNARY(deg2rad, false),
    TORCH_RAGGED_UNARY(erf, false),     TORCH_RAGGED_UNARY(erfinv, false),
    TORCH_RAGGED_UNARY(expm1, false),   TORCH_RAGGED_UNARY(floor, false),
    TORCH_RAGGED_UNARY(frac, false),    TORCH_RAGGED_UNARY(log1p, false),
    TORCH_RAGGED_UNARY(rad2deg, false), TORCH_RAGGED_UNARY(relu, false),
    TORCH_RAGGED_UNARY(round, false),   TORCH_RAGGED_UNARY(sgn, false),
    TORCH_RAGGED_UNARY(sign, false),    TORCH_RAGGED_UNARY(signbit, false),
    TORCH_RAGGED_UNARY(sin, false),     TORCH_RAGGED_UNARY(sinh, false),
    TORCH_RAGGED_UNARY(sqrt, false),    TORCH_RAGGED_UNARY(square, false),
    TORCH_RAGGED_UNARY(tan, false),     TORCH_RAGGED_UNARY(tanh, false),
    TORCH_RAGGED_UNARY(trunc, false)};
#undef TORCH_RAGGED_UNARY
constexpr size_t kNumUnary = sizeof(kUnaryFunctions) / sizeof(kUnaryFunctions[0]);

template <size_t kIndex>
at::Tensor unary_kernel(const at::Tensor& s) {
  constexpr UnaryFunction f = kUnaryFunctions[kIndex];
  return map_values(f.name, s, f.linear, f.apply);
}

std::string op_name(const char* name) { return std::string("sparse_") + name; }

template <size_t... kIndex>
void define_unary(torch::Library& m, const std::vector<at::Tag>& tags,
                  std::index_sequence<kIndex...>) {
  (m.def((op_name(kUnaryFunctions[kIndex].name) + "(Tensor s) -> Tensor").c_str(), tags), ...);
}

template <size_t... kIndex>
void implement_unary(torch::Library& m, std::index_sequence<kIndex...>) {
  (m.impl(op_name(kUnaryFunctions[kIndex].name).c_str(), TORCH_FN(unary_kernel<kIndex>)), ...);
}

// torch.pow(s, exponent) for a positive exponent: 0 ** exponent = 0 keeps the pattern (torch
// refuses exponent 0 too).
at::Tensor pow_kernel(const at::Tensor& s, const at::Scalar& exponent) {
  TORCH_CHECK_VALUE(
      !exponent.isComplex() && exponent.toDouble() > 0,
      "torch_ragged.sparse.pow: the exponent must be a positive number (0 ** exponent "
      "= 0 keeps the pattern), got ",
      exponent);
  return map_values("pow", s, false, [&](const at::Tensor& v) { return at::pow(v, exponent); });
}

int64_t checked_dim(const char* op, const at::Tensor& s, int64_t dim) {
  TORCH_CHECK_INDEX(-s.dim() <= dim && dim < s.dim(), "torch_ragged.sparse.", op, ": dim ", dim,
                    " is out of range for a ", s.dim(), "-D tensor");
  return dim < 0 ? dim + s.dim() : dim;
}

// s.coalesce(): unique, sorted indices, duplicates summed in a fixed order (sparse_coalesce).
at::Tensor coalesce_kernel(const at::Tensor& s, bool validate) {
  check_coo("coalesce", s);
  auto [indices, values, permutation, first_idx] =
      ops::sparse_coalesce(s._indices(), differentiable_values(s), s.sym_sizes(), validate, false);
  return coo_tensor(indices, values, s.sizes(), true);
}

// A 2-D BSR / BSC matrix's dense form: its blocks written at their (block row, block column), in
// any order (no duplicates: nothing to sort), then the block grid laid out as the matrix.
at::Tensor blocked_to_dense(const at::Tensor& s, bool validate) {
  TORCH_CHECK_VALUE(s.dim() == 2, "torch_ragged.sparse.to_dense: expected a 2-D ", layout_name(s),
                    " matrix, got shape ", python_shape(s.sizes()));
  const at::Tensor indices = block_indices(s);
  const at::Tensor blocks = compressed_values(s);
  const int64_t bh = blocks.size(1), bw = blocks.size(2);
  const c10::SymInt grid[] = {s.size(0) / bh, s.size(1) / bw, bh, bw};
  return ops::sparse_to_dense(indices, blocks, grid, validate)
      .permute({0, 2, 1, 3})
      .reshape(s.sizes());
}

// s.to_dense() of a COO (duplicates summed deterministically), CSR, CSC, BSR or BSC tensor.
at::Tensor to_dense_kernel(const at::Tensor& s, bool validate) {
  const at::Layout layout = s.layout();
  if (layout == at::kSparse) {
    return ops::sparse_to_dense(s._indices(), differentiable_values(s), s.sym_sizes(), validate);
  }
  if (layout == at::kSparseBsr || layout == at::kSparseBsc) return blocked_to_dense(s, validate);
  check_coo_or_compressed("to_dense", s);
  const CompressedView view = compressed_view("to_dense", s, validate);
  const at::Tensor dense = ops::sparse_to_dense(view.indices(), view.values,
                                                c10::fromIntArrayRefSlow(view.size), validate);
  return view.transposed ? dense.transpose(0, 1).contiguous() : dense;
}

// torch.sparse.sum(s, dim): a coalesced COO tensor over the kept dims, or a dense tensor when every
// sparse dim is reduced (dim absent: everything, a 0-d result). CSR / CSC are summed by COO's
// rules.
at::Tensor sum_kernel(const at::Tensor& s, at::OptionalIntArrayRef dim, bool validate) {
  check_coo_or_compressed("sum", s);
  // the sum takes a COO tensor's entries as they are (sparse_sum sorts what it must)
  auto [indices, values] = s.layout() == at::kSparse
                               ? std::pair(s._indices(), differentiable_values(s))
                               : row_major_parts("sum", s, validate);
  auto [kept_indices, sums] = ops::sparse_sum(indices, values, s.sym_sizes(), dim, validate);
  return sparse_sum_result(s, kept_indices, sums, dim);
}

// torch.sparse.softmax / log_softmax(s, dim, dtype) of a COO tensor (duplicates summed first, as
// torch does) or a CSR / CSC matrix (a result of its layout). Along the compressed dim the pools
// are the compressed offsets' segments: a segment softmax, no pool search.
template <bool kLog>
at::Tensor softmax_kernel(const at::Tensor& s, int64_t dim, std::optional<at::ScalarType> dtype) {
  const char* op = kLog ? "log_softmax" : "softmax";
  check_coo_or_compressed(op, s);
  if (s.layout() == at::kSparse) {
    at::Tensor values = differentiable_values(s);
    if (dtype.has_value()) values = values.to(*dtype);  // torch casts before computing
    auto [indices, summed] = coalesced_parts(s, values);
    return coo_tensor(indices, ops::sparse_softmax(indices, summed, s.sym_sizes(), dim, kLog),
                      s.sizes(), true);
  }
  dim = checked_dim(op, s, dim);
  const CompressedView view = compressed_view(op, s, true);
  const at::Tensor values = dtype.has_value() ? view.values.to(*dtype) : view.values;
  const int64_t view_dim = view.transposed && dim < 2 ? 1 - dim : dim;
  at::Tensor out;
  if (view_dim == 1 && s.dense_dim() == 0) {
    out = kLog ? ops::segment_log_softmax(values, view.compressed)
               : ops::segment_softmax(values, view.compressed);
  } else {
    out = ops::sparse_softmax(view.indices(), values, c10::fromIntArrayRefSlow(view.size), view_dim,
                              kLog);
  }
  return compressed_like(s, view.compressed, view.plain, out);
}

// ---- arithmetic between a sparse tensor and a scalar, a dense tensor or another sparse tensor
// ----

// A scalar operand of mul: a 0-d dense tensor (a number arrives as a Scalar overload).
bool is_scalar_tensor(const at::Tensor& x) { return x.layout() == at::kStrided && x.dim() == 0; }

// Two sparse COO tensors of one shape, sparse / dense split and device: their promoted dtype.
at::ScalarType same_layout(const char* op, const at::Tensor& a, const at::Tensor& b) {
  check_coo(op, a);
  check_coo(op, b);
  TORCH_CHECK_VALUE(a.sizes() == b.sizes() && a.sparse_dim() == b.sparse_dim(),
                    "torch_ragged.sparse.", op,
                    ": a and b must have the same shape and sparse dims, got ",
                    python_shape(a.sizes()), " (sparse_dim=", a.sparse_dim(), ") and ",
                    python_shape(b.sizes()), " (sparse_dim=", b.sparse_dim(), ")");
  TORCH_CHECK_VALUE(a.device() == b.device(), "torch_ragged.sparse.", op,
                    ": a and b must be on one device, got ", a.device(), " and ", b.device());
  return at::result_type(a, b);
}

// (sparse, dense) of a mixed pair of one shape and one device; the sparse one COO.
std::pair<at::Tensor, at::Tensor> sparse_and_dense(const char* op, const at::Tensor& a,
                                                   const at::Tensor& b) {
  const bool a_dense = a.layout() == at::kStrided;
  const at::Tensor& s = a_dense ? b : a;
  const at::Tensor& dense = a_dense ? a : b;
  check_coo(op, s);
  TORCH_CHECK_VALUE(dense.sizes() == s.sizes() && dense.device() == s.device(),
                    "torch_ragged.sparse.", op,
                    ": the dense operand must have the sparse one's shape and device, got ",
                    python_shape(dense.sizes()), " (", dense.device(), ") and ",
                    python_shape(s.sizes()), " (", s.device(), ")");
  return {s, dense};
}

// a + alpha * b with one dense operand: dense.
at::Tensor add_dense(const char* op, const at::Tensor& a, const at::Tensor& b,
                     const at::Scalar& alpha) {
  auto [s, dense] = sparse_and_dense(op, a, b);
  const at::ScalarType dtype = at::result_type(a, b);
  at::Tensor sparse_part = to_dense_kernel(s, true).to(dtype);
  at::Tensor dense_part = dense.to(dtype);
  const bool scale = !alpha.equal(1);  // x * 1 is x: skipped
  if (scale && b.is_same(s)) sparse_part = sparse_part * alpha;
  if (scale && b.is_same(dense)) dense_part = dense_part * alpha;
  return sparse_part + dense_part;
}

// Whether the (row, col) entries [1, n) of a matrix each come after the one before (row-major,
// strictly: a coalesced matrix's), without branches; entry i at row[i * step], col[i * step].
bool pairs_rise_strictly(const int64_t* row, const int64_t* col, int64_t step, int64_t n) {
  bool rising = true;
  for (int64_t i = 1; i < n; ++i) {
    const int64_t r = row[i * step], previous_r = row[(i - 1) * step];
    rising &= (r > previous_r) | ((r == previous_r) & (col[i * step] > col[(i - 1) * step]));
  }
  return rising;
}

// ValueError unless the (2, n) index tensor's entries rise strictly (pairs_rise_strictly).
void check_pairs_rise(const at::Tensor& indices) {
  const int64_t* row = indices.const_data_ptr<int64_t>();
  TORCH_CHECK_VALUE(
      pairs_rise_strictly(row, row + indices.stride(0), indices.stride(1), indices.size(1)),
      "torch_ragged.sparse.mul: the indices of a tensor flagged coalesced must rise strictly "
      "(row-major), and some do not");
}

// A (2, nnz) int64 CPU index tensor with concrete values, in any layout (torch's coalesce leaves
// its indices a narrowed view, or transposed in memory).
bool plain_matrix_indices(const at::Tensor& i) {
  return i.is_cpu() && !is_symbolic(i) && i.dim() == 2 && i.size(0) == 2 &&
         i.scalar_type() == at::kLong;
}

// Whether two matrices' entries of a sparse matrix s can be merged by their keys row * cols + col:
// concrete 2-D CPU int64 indices and a key space within int64 (the merges' shared preconditions).
bool mergeable_matrices(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b) {
  int64_t key_space = 0;
  return !is_symbolic(s) && s.sparse_dim() == 2 && plain_matrix_indices(a) &&
         plain_matrix_indices(b) && !c10::mul_overflows(s.size(0), s.size(1), &key_space);
}

// Whether the (2, n) index tensors a and b (plain_matrix_indices) hold the same values, by
// comparing memory (which stops at the first difference) where their layouts allow; false where
// they do not.
bool same_index_memory(const at::Tensor& a, const at::Tensor& b) {
  const int64_t n = a.size(1);
  const int64_t *a_data = a.const_data_ptr<int64_t>(), *b_data = b.const_data_ptr<int64_t>();
  if (a.stride(1) == 1 && b.stride(1) == 1) {  // two rows, each contiguous
    return (a_data == b_data && a.stride(0) == b.stride(0)) ||
           (std::memcmp(a_data, b_data, n * sizeof(int64_t)) == 0 &&
            std::memcmp(a_data + a.stride(0), b_data + b.stride(0), n * sizeof(int64_t)) == 0);
  }
  if (a.strides() == b.strides() && a.is_non_overlapping_and_dense()) {  // one span each
    return a_data == b_data || std::memcmp(a_data, b_data, 2 * n * sizeof(int64_t)) == 0;
  }
  return false;
}

// The positions (in_a, in_b) of the entries two coalesced 2-D CPU matrices share, by one merge
// over their (row, col) pairs read as keys row * cols + col: no key arrays (two (nnz,) int64
// tensors, most of a large product's time in first touches of fresh pages). nullopt where the
// flat-key route serves (other dims or devices, int32 indices, keys beyond int64). ValueError when
// either's entries do not rise strictly (a tensor flagged coalesced that is not).
std::optional<std::pair<at::Tensor, at::Tensor>> shared_entries_2d(const at::Tensor& s,
                                                                   const at::Tensor& a,
                                                                   const at::Tensor& b) {
  if (!mergeable_matrices(s, a, b)) return std::nullopt;
  const int64_t n = a.size(1), m = b.size(1), cols = s.size(1);
  const int64_t a_step = a.stride(1), b_step = b.stride(1);
  const int64_t *a_row = a.const_data_ptr<int64_t>(), *a_col = a_row + a.stride(0);
  const int64_t *b_row = b.const_data_ptr<int64_t>(), *b_col = b_row + b.stride(0);
  check_pairs_rise(a);
  check_pairs_rise(b);
  at::Tensor in_a = at::empty({std::min(n, m)}, a.options());
  at::Tensor in_b = at::empty({std::min(n, m)}, a.options());
  int64_t *to_a = in_a.mutable_data_ptr<int64_t>(), *to_b = in_b.mutable_data_ptr<int64_t>();
  int64_t i = 0, j = 0, shared = 0;
  while (i < n && j < m) {
    const int64_t x = a_row[i * a_step] * cols + a_col[i * a_step];
    const int64_t y = b_row[j * b_step] * cols + b_col[j * b_step];
    to_a[shared] = i;  // kept only where the keys match
    to_b[shared] = j;
    shared += x == y;
    i += x <= y;
    j += y <= x;
  }
  return std::pair{in_a.narrow(0, 0, shared), in_b.narrow(0, 0, shared)};
}

// The union of two coalesced 2-D CPU matrices' entries, by one merge over their (row, col) pairs
// read as keys row * cols + col: the output's indices (row-major, each entry once) and where each
// of a's and b's entries lands in them. nullopt where the coalesce route serves: other dims or
// devices, int32 indices, keys beyond int64, entries that do not rise strictly or lie out of range.
struct EntryUnion {
  at::Tensor indices, position_of_a, position_of_b;
};
std::optional<EntryUnion> union_entries_2d(const at::Tensor& s, const at::Tensor& a,
                                           const at::Tensor& b) {
  if (!mergeable_matrices(s, a, b)) return std::nullopt;
  const int64_t n = a.size(1), m = b.size(1), cols = s.size(1);
  const int64_t a_step = a.stride(1), b_step = b.stride(1);
  const int64_t *a_row = a.const_data_ptr<int64_t>(), *a_col = a_row + a.stride(0);
  const int64_t *b_row = b.const_data_ptr<int64_t>(), *b_col = b_row + b.stride(0);
  // a tensor flagged coalesced that is not (unsorted, repeated or out-of-range entries): the
  // coalesce route sorts it, and names an entry out of range
  if (!pairs_rise_strictly(a_row, a_col, a_step, n) ||
      !pairs_rise_strictly(b_row, b_col, b_step, m)) {
    return std::nullopt;
  }
  const auto in_range = [&](const int64_t* row, const int64_t* col, int64_t step, int64_t count) {
    bool fits = count == 0 || (row[0] >= 0 && row[(count - 1) * step] < s.size(0));  // rows rise
    for (int64_t e = 0; e < count; ++e) fits &= col[e * step] >= 0 && col[e * step] < cols;
    return fits;
  };
  if (!in_range(a_row, a_col, a_step, n) || !in_range(b_row, b_col, b_step, m)) {
    return std::nullopt;
  }
  at::Tensor indices = at::empty({2, n + m}, a.options());
  at::Tensor position_of_a = at::empty({n}, a.options()),
             position_of_b = at::empty({m}, a.options());
  int64_t *out_row = indices.mutable_data_ptr<int64_t>(), *out_col = out_row + (n + m);
  int64_t* to_a = position_of_a.mutable_data_ptr<int64_t>();
  int64_t* to_b = position_of_b.mutable_data_ptr<int64_t>();
  constexpr int64_t kPastEveryKey = std::numeric_limits<int64_t>::max();  // keys < key_space
  int64_t i = 0, j = 0, k = 0;
  for (; i < n || j < m; ++k) {
    const int64_t x = i < n ? a_row[i * a_step] * cols + a_col[i * a_step] : kPastEveryKey;
    const int64_t y = j < m ? b_row[j * b_step] * cols + b_col[j * b_step] : kPastEveryKey;
    out_row[k] = x <= y ? a_row[i * a_step] : b_row[j * b_step];
    out_col[k] = x <= y ? a_col[i * a_step] : b_col[j * b_step];
    if (x <= y) to_a[i++] = k;
    if (y <= x) to_b[j++] = k;
  }
  return EntryUnion{indices.narrow(1, 0, k), position_of_a, position_of_b};
}

// torch.add(a, b, alpha=alpha) of two sparse COO tensors: the union of their patterns, each index's
// values summed in a fixed order (a's entries, then b's): two coalesced CPU matrices by a merge of
// their entries, others by coalesce; one dense operand: dense.
at::Tensor add_kernel(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  if (a.layout() == at::kStrided || b.layout() == at::kStrided)
    return add_dense("add", a, b, alpha);
  const at::ScalarType dtype = same_layout("add", a, b);
  at::Tensor b_values = differentiable_values(b).to(dtype);
  if (!alpha.equal(1)) b_values = b_values * alpha;
  const at::Tensor a_values = differentiable_values(a).to(dtype);
  if (a.is_coalesced() && b.is_coalesced() && dtype != at::kBool) {
    // one serial merge beats the coalesce core's parallel radix sort at every census size (2 x 1e7
    // entries: 169 against 379 ms, 2 threads)
    if (std::optional<EntryUnion> merged = union_entries_2d(a, a._indices(), b._indices())) {
      // each position 0 + a's value + b's: the coalesce route's sums, bit for bit
      std::vector<int64_t> shape = a_values.sizes().vec();
      shape[0] = merged->indices.size(1);
      const at::Tensor values = at::zeros(shape, a_values.options())
                                    .index_add_(0, merged->position_of_a, a_values)
                                    .index_add_(0, merged->position_of_b, b_values);
      return coo_tensor(merged->indices, values, a.sizes(), true);
    }
  }
  const at::Tensor indices = at::cat({a._indices(), b._indices()}, 1);
  const at::Tensor values = at::cat({a_values, b_values});
  auto [out_indices, out_values, permutation, first_idx] =
      ops::sparse_coalesce(indices, values, a.sym_sizes(), true, false);
  return coo_tensor(out_indices, out_values, a.sizes(), true);
}

at::Tensor sub_kernel(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return add_kernel(a, b, -alpha);
}

// Whether two coalesced 2-D CPU matrices' int64 indices hold the same entries (one compare of the
// index arrays, which stops at the first difference): then every entry matches itself, and a
// product needs no merge and no gathers (masks, gradients on a shared pattern). ValueError as
// shared_entries_2d's where the entries do not rise strictly.
bool same_entries_2d(const at::Tensor& a, const at::Tensor& b) {
  if (!plain_matrix_indices(a) || !plain_matrix_indices(b) || a.size(1) != b.size(1) ||
      !same_index_memory(a, b)) {
    return false;
  }
  check_pairs_rise(a);
  return true;
}

// torch.mul: by a scalar (a 0-d tensor here; the entries as they are, scaled, the flag kept); by a
// dense tensor of the shape (the sparse one's coalesced pattern times the dense values there); or
// two sparse tensors (the intersection of their coalesced patterns).
at::Tensor mul_kernel(const at::Tensor& a, const at::Tensor& b) {
  if (is_scalar_tensor(a) || is_scalar_tensor(b)) {
    const at::Tensor& scalar = is_scalar_tensor(b) ? b : a;
    return map_values("mul", is_scalar_tensor(b) ? a : b, true,
                      [&](const at::Tensor& v) { return v * scalar; });
  }
  if (a.layout() == at::kStrided || b.layout() == at::kStrided) {
    auto [s, dense] = sparse_and_dense("mul", a, b);
    const at::ScalarType dtype = at::result_type(a, b);
    auto [indices, values] = coalesced_parts(s, differentiable_values(s));
    const at::Tensor at_entries = ops::sparse_mask(dense, indices, true);
    return coo_tensor(indices, values.to(dtype) * at_entries.to(dtype), s.sizes(), true);
  }
  const at::ScalarType dtype = same_layout("mul", a, b);
  auto [a_indices, a_values] = coalesced_parts(a, differentiable_values(a));
  auto [b_indices, b_values] = coalesced_parts(b, differentiable_values(b));
  if (a.sparse_dim() == 2 && same_entries_2d(a_indices, b_indices)) {
    return coo_tensor(a_indices, a_values.to(dtype) * b_values.to(dtype), a.sizes(), true);
  }
  at::Tensor in_a, in_b;
  if (auto shared = shared_entries_2d(a, a_indices, b_indices)) {
    std::tie(in_a, in_b) = *std::move(shared);
  } else {
    const c10::SymIntArrayRef sparse_size = a.sym_sizes().slice(0, a.sparse_dim());
    const at::Tensor a_keys = ops::sparse_flat_keys(a_indices, sparse_size, false);
    const at::Tensor b_keys = ops::sparse_flat_keys(b_indices, sparse_size, false);
    std::tie(in_a, in_b) = ops::sparse_intersect(a_keys, b_keys);  // both rise (coalesced)
  }
  const at::Tensor values =
      a_values.index_select(0, in_a).to(dtype) * b_values.index_select(0, in_b).to(dtype);
  return coo_tensor(columns_of(a_indices, in_a), values, a.sizes(), true);
}

at::Tensor mul_scalar_kernel(const at::Tensor& s, const at::Scalar& other) {
  return map_values("mul", s, true, [&](const at::Tensor& v) { return v * other; });
}

// s / divisor for a scalar divisor: the values divided, the pattern kept (a rounding mode makes it
// non-linear: duplicates summed first, as torch).
template <typename Divisor>
at::Tensor divided(const at::Tensor& s, const Divisor& divisor,
                   std::optional<c10::string_view> rounding_mode) {
  return map_values("div", s, !rounding_mode.has_value(),
                    [&](const at::Tensor& v) { return at::div(v, divisor, rounding_mode); });
}

at::Tensor div_kernel(const at::Tensor& s, const at::Tensor& divisor,
                      std::optional<c10::string_view> rounding_mode) {
  TORCH_CHECK_VALUE(divisor.dim() == 0,
                    "torch_ragged.sparse.div: the divisor must be a scalar, got shape ",
                    python_shape(divisor.sizes()));
  return divided(s, divisor, rounding_mode);
}

at::Tensor div_scalar_kernel(const at::Tensor& s, const at::Scalar& divisor,
                             std::optional<c10::string_view> rounding_mode) {
  return divided(s, divisor, rounding_mode);
}

// ---- the structure: dims added, selected, narrowed, reordered; entries selected ----

at::Tensor index_rows(const at::Tensor& indices, const std::vector<int64_t>& rows) {
  return indices.index_select(0, at::tensor(rows, indices.options().dtype(at::kLong)));
}

// s.unsqueeze(dim): a new sparse dim of size 1 (an index row of zeros) where dim falls among the
// sparse dims, or a new dense dim of the values after them. Keeps the coalesced flag.
at::Tensor unsqueeze_kernel(const at::Tensor& s, int64_t dim) {
  check_coo("unsqueeze", s);
  const int64_t ndim = s.dim();
  TORCH_CHECK_INDEX(-ndim - 1 <= dim && dim <= ndim, "torch_ragged.sparse.unsqueeze: dim ", dim,
                    " is out of range for a ", ndim, "-D tensor");
  if (dim < 0) dim += ndim + 1;
  std::vector<int64_t> shape = s.sizes().vec();
  shape.insert(shape.begin() + dim, 1);
  at::Tensor indices = s._indices();
  at::Tensor values = differentiable_values(s);
  if (dim <= s.sparse_dim()) {
    // the rows copied around a zeroed one (no zeros tensor to allocate and read back)
    at::Tensor widened = at::empty({indices.size(0) + 1, indices.size(1)}, indices.options());
    widened.slice(0, 0, dim).copy_(indices.slice(0, 0, dim));
    widened.select(0, dim).zero_();
    widened.slice(0, dim + 1).copy_(indices.slice(0, dim));
    indices = widened;
  } else {
    values = values.unsqueeze(dim - s.sparse_dim() + 1);
  }
  return coo_tensor(indices, values, shape, s.is_coalesced());
}

// s.select(dim, index): along a sparse dim the entries at index without that dim (a dense tensor,
// their sum in input order, when it was the only sparse dim); along a dense dim the values' slice.
// Keeps the coalesced flag (torch flags its result uncoalesced).
at::Tensor select_kernel(const at::Tensor& s, int64_t dim, int64_t index) {
  check_coo("select", s);
  dim = checked_dim("select", s, dim);
  const int64_t size = s.size(dim);
  TORCH_CHECK_INDEX(-size <= index && index < size, "torch_ragged.sparse.select: index ", index,
                    " is out of range for size ", size, " of dim ", dim);
  if (index < 0) index += size;
  std::vector<int64_t> shape = s.sizes().vec();
  shape.erase(shape.begin() + dim);
  const at::Tensor indices = s._indices();
  const at::Tensor values = differentiable_values(s);
  const int64_t sparse_dim = s.sparse_dim();
  if (dim >= sparse_dim) {
    return coo_tensor(indices, values.select(dim - sparse_dim + 1, index), shape, s.is_coalesced());
  }
  const at::Tensor kept = indices.select(0, dim).eq(index).nonzero().flatten();
  const at::Tensor kept_values = values.index_select(0, kept);
  if (sparse_dim == 1) {
    const std::vector<int64_t> bounds{0, kept.size(0)};
    return ops::segment_sum(kept_values, at::tensor(bounds, kept.options()))[0];
  }
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < sparse_dim; ++d) {
    if (d != dim) rest.push_back(d);
  }
  return coo_tensor(columns_of(index_rows(indices, rest), kept), kept_values, shape,
                    s.is_coalesced());
}

// s.narrow_copy(dim, start, length): the entries with start <= index < start + length along a
// sparse dim, renumbered from 0, or the values' slice along a dense dim. Keeps the coalesced flag.
at::Tensor narrow_copy_kernel(const at::Tensor& s, int64_t dim, int64_t start, int64_t length) {
  check_coo("narrow_copy", s);
  dim = checked_dim("narrow_copy", s, dim);
  const int64_t size = s.size(dim);
  if (start < 0) start += size;
  TORCH_CHECK_INDEX(0 <= start && start <= size && 0 <= length && length <= size - start,
                    "torch_ragged.sparse.narrow_copy: start ", start, " and length ", length,
                    " do not fit size ", size, " of dim ", dim);
  std::vector<int64_t> shape = s.sizes().vec();
  shape[dim] = length;
  const at::Tensor indices = s._indices();
  const at::Tensor values = differentiable_values(s);
  if (dim >= s.sparse_dim()) {
    return coo_tensor(indices, values.narrow(dim - s.sparse_dim() + 1, start, length), shape,
                      s.is_coalesced());
  }
  const at::Tensor position = indices.select(0, dim);
  const at::Tensor kept =
      position.ge(start).logical_and_(position.lt(start + length)).nonzero().flatten();
  at::Tensor kept_indices = columns_of(indices, kept);  // a copy: renumbered in place
  kept_indices.select(0, dim).sub_(start);
  return coo_tensor(kept_indices, values.index_select(0, kept), shape, s.is_coalesced());
}

// The dims of s in the order dims (checked: the sparse dims among themselves, the dense ones among
// themselves), relabelled as torch's permute does: no entry moves, so the order of the entries is
// no longer known when sparse dims move (flagged uncoalesced unless empty, as torch's).
at::Tensor permuted(const at::Tensor& s, const std::vector<int64_t>& dims) {
  const int64_t ndim = s.dim(), sparse_dim = s.sparse_dim();
  std::vector<int64_t> shape, value_order{0};
  for (int64_t d : dims) shape.push_back(s.size(d));
  for (int64_t i = sparse_dim; i < ndim; ++i) value_order.push_back(dims[i] - sparse_dim + 1);
  at::Tensor values = differentiable_values(s);
  if (sparse_dim < ndim) values = values.permute(value_order);
  bool sparse_kept = true, sparse_reversed = true;
  for (int64_t i = 0; i < sparse_dim; ++i) {
    sparse_kept = sparse_kept && dims[i] == i;
    sparse_reversed = sparse_reversed && dims[i] == sparse_dim - 1 - i;
  }
  if (sparse_kept) return coo_tensor(s._indices(), values, shape, s.is_coalesced());
  // a matrix's transpose by flip: faster than index_select of the rows
  const std::vector<int64_t> order(dims.begin(), dims.begin() + sparse_dim);
  const at::Tensor indices =
      sparse_reversed ? s._indices().flip(0) : index_rows(s._indices(), order);
  return coo_tensor(indices, values, shape, s.is_coalesced() && s._nnz() == 0);
}

at::Tensor permute_kernel(const at::Tensor& s, at::IntArrayRef given) {
  check_coo("permute", s);
  const int64_t ndim = s.dim(), sparse_dim = s.sparse_dim();
  bool is_permutation = static_cast<int64_t>(given.size()) == ndim;
  std::vector<bool> seen(ndim, false);
  std::vector<int64_t> dims;
  for (int64_t d : given) {
    if (d < -ndim || d >= ndim || seen[d < 0 ? d + ndim : d]) {
      is_permutation = false;
      break;
    }
    dims.push_back(d < 0 ? d + ndim : d);
    seen[dims.back()] = true;
  }
  TORCH_CHECK_INDEX(is_permutation, "torch_ragged.sparse.permute: dims ", given,
                    " are not a permutation of the ", ndim, " dims");
  for (int64_t i = 0; i < sparse_dim; ++i) {
    TORCH_CHECK_VALUE(dims[i] < sparse_dim, "torch_ragged.sparse.permute: dims ",
                      at::IntArrayRef(dims),
                      " move a sparse dim among the dense ones (sparse_dim=", sparse_dim,
                      "); permute the sparse and the dense dims separately");
  }
  return permuted(s, dims);
}

// s.transpose(dim0, dim1) of two sparse dims (relabelled as torch's) or two dense dims (the values
// transposed; torch refuses those); a sparse dim with a dense one is refused.
at::Tensor transpose_kernel(const at::Tensor& s, int64_t dim0, int64_t dim1) {
  check_coo("transpose", s);
  const int64_t ndim = s.dim();
  TORCH_CHECK_INDEX(-ndim <= dim0 && dim0 < ndim, "torch_ragged.sparse.transpose: dim0 = ", dim0,
                    " is out of range for a ", ndim, "-D tensor");
  TORCH_CHECK_INDEX(-ndim <= dim1 && dim1 < ndim, "torch_ragged.sparse.transpose: dim1 = ", dim1,
                    " is out of range for a ", ndim, "-D tensor");
  if (dim0 < 0) dim0 += ndim;
  if (dim1 < 0) dim1 += ndim;
  const int64_t sparse_dim = s.sparse_dim();
  TORCH_CHECK_VALUE((dim0 < sparse_dim) == (dim1 < sparse_dim),
                    "torch_ragged.sparse.transpose: dims ", dim0, " and ", dim1,
                    " are one sparse and one dense dim (sparse_dim=", sparse_dim,
                    "); transpose two sparse or two dense dims");
  std::vector<int64_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[dim0], order[dim1]);
  return permuted(s, order);
}

// s.t(): a matrix's transpose; a 1-D or 0-d tensor's entries as they are.
at::Tensor t_kernel(const at::Tensor& s) {
  check_coo("t", s);
  TORCH_CHECK_VALUE(s.dim() <= 2,
                    "torch_ragged.sparse.t: expected a tensor of at most 2 dims, got ", s.dim(),
                    "; use transpose");
  if (s.dim() == 2) return transpose_kernel(s, 0, 1);
  return coo_tensor(s._indices(), differentiable_values(s), s.sizes(), s.is_coalesced());
}

// s.index_select(dim, index) along a sparse or dense dim; repeated positions repeat entries
// (sparse_index_select; uncoalesced result).
at::Tensor index_select_kernel(const at::Tensor& s, int64_t dim, const at::Tensor& index) {
  check_coo("index_select", s);
  auto [indices, values] =
      ops::sparse_index_select(s._indices(), differentiable_values(s), s.sym_sizes(), dim, index);
  std::vector<int64_t> size = s.sizes().vec();
  size[at::maybe_wrap_dim(dim, s.dim())] = index.numel();  // dim checked by the triplet op
  return coo_tensor(indices, values, size, false);
}

// ---- conversions: to_sparse, to_sparse_coo / csr / csc ----

// dense.to_sparse(sparse_dim): the entries that are not exactly zero, coalesced.
at::Tensor to_sparse_kernel(const at::Tensor& dense, std::optional<int64_t> sparse_dim) {
  auto [indices, values] = ops::sparse_from_dense(dense, sparse_dim);
  return coo_tensor(indices, values, dense.sizes(), true);
}

// torch's invariants of a COO tensor flagged coalesced, which torch stops checking once the flag is
// set: every index in range (IndexError naming the entry) and the entries strictly rising in
// row-major order (ValueError naming the first that is not).
void check_coalesced_invariants(const char* op, const at::Tensor& s) {
  const at::Tensor indices = s._indices();
  const std::string name = std::string("sparse.") + op;
  const c10::SymIntArrayRef sizes = s.sym_sizes().slice(0, s.sparse_dim());
  if (!key_geometry(s.sizes().slice(0, s.sparse_dim())).has_value()) {
    // row-major positions past int64: the indices coalesced alone, compared
    std::vector<c10::SymInt> size(sizes.begin(), sizes.end());
    size.emplace_back(0);  // the values: (nnz, 0)
    const at::Tensor unique = std::get<0>(as_op(name, [&] {
      return ops::sparse_coalesce(indices, at::empty({indices.size(1), 0}, s._values().options()),
                                  size, true, false);
    }));
    TORCH_CHECK_VALUE(at::equal(unique, indices), "torch_ragged.sparse.", op,
                      ": the tensor is flagged coalesced but its indices are not unique and sorted "
                      "in row-major order");
    return;
  }
  const at::Tensor keys = as_op(name, [&] { return ops::sparse_flat_keys(indices, sizes, true); });
  const int64_t n = keys.numel();
  if (n < 2) return;
  const at::Tensor not_after = keys.narrow(0, 1, n - 1).le(keys.narrow(0, 0, n - 1));
  if (!not_after.any().item<bool>()) return;
  const int64_t first = not_after.nonzero()[0][0].item<int64_t>() + 1;
  TORCH_CHECK_VALUE(false, "torch_ragged.sparse.", op,
                    ": the tensor is flagged coalesced but its entry ", first,
                    " does not come after entry ", first - 1,
                    " in row-major order (unsorted or repeated indices)");
}

// A CSR (indices coalesced row-major) or CSC (indices coalesced in the transposed order, of the
// transposed size) tensor of these entries, of `size` and indices of index_dtype.
at::Tensor compress(const char* op, const at::Tensor& indices, const at::Tensor& values,
                    at::IntArrayRef size, at::Layout layout, at::ScalarType index_dtype) {
  const int64_t rows = layout == at::kSparseCsc ? size[1] : size[0];
  const at::Tensor compressed = row_offsets(op, indices[0], rows, index_dtype == at::kInt);
  return at::sparse_compressed_tensor(compressed, indices[1].to(index_dtype), values, size,
                                      values.options().layout(layout));
}

// x (dense, COO, CSR or CSC) in `layout`, coalesced; a tensor of that layout (COO: flagged
// coalesced) is returned as it is, checked first when validate (as ATen's to_sparse_csr returns
// self).
at::Tensor convert_kernel(const char* op, const at::Tensor& x, at::Layout layout, bool validate) {
  const at::Layout from = x.layout();
  TORCH_CHECK_TYPE(from == at::kStrided || from == at::kSparse || from == at::kSparseCsr ||
                       from == at::kSparseCsc,
                   "torch_ragged.sparse.", op,
                   ": expected a dense, sparse COO, CSR or CSC tensor, got ", layout_name(x));
  if (from == layout && (layout != at::kSparse || x.is_coalesced())) {
    if (validate && layout == at::kSparse) check_coalesced_invariants(op, x);
    if (validate && layout != at::kSparse) compressed_view(op, x, true);
    return x;
  }
  at::Tensor source = x;
  if (from == at::kStrided) {
    TORCH_CHECK_VALUE(x.dim() >= 2 || layout == at::kSparse, "torch_ragged.sparse.", op,
                      ": expected a matrix (at least 2 dims), got shape ", python_shape(x.sizes()));
    source = to_sparse_kernel(x, layout == at::kSparse ? std::nullopt : std::optional<int64_t>(2));
    if (layout == at::kSparse) return source;
  }
  if (layout == at::kSparse) {
    auto [indices, values] = row_major_parts(op, source, validate);
    return coo_tensor(indices, values, x.sizes(), true);
  }
  TORCH_CHECK_VALUE(
      source.layout() != at::kSparse || source.sparse_dim() == 2, "torch_ragged.sparse.", op,
      ": expected a sparse matrix (2 sparse dims), got sparse_dim=", source.sparse_dim(),
      " of shape ", python_shape(x.sizes()));
  auto [indices, values] = source.layout() == at::kSparse && layout == at::kSparseCsc
                               ? std::pair(source._indices(), differentiable_values(source))
                               : row_major_parts(op, source, validate);
  if (layout == at::kSparseCsc) {  // the entries sorted by (column, row)
    std::vector<c10::SymInt> size_t(x.sym_sizes().begin(), x.sym_sizes().end());
    std::swap(size_t[0], size_t[1]);
    auto [sorted, summed, permutation, first_idx] =
        ops::sparse_coalesce(indices.flip(0), values, size_t, validate, false);
    indices = sorted;
    values = summed;
  }
  return compress(op, indices, values, x.sizes(), layout, index_dtype(x));
}

// dense.sparse_mask(mask): dense's values at mask's indices (its values ignored), in mask's layout
// and structure (COO keeps its flag; CSR / CSC their offsets), as torch's.
at::Tensor sparse_mask_kernel(const at::Tensor& dense, const at::Tensor& mask, bool validate) {
  check_coo_or_compressed("sparse_mask", mask);
  TORCH_CHECK_VALUE(
      dense.sizes() == mask.sizes(), "torch_ragged.sparse.sparse_mask: dense has shape ",
      python_shape(dense.sizes()), " but mask has shape ", python_shape(mask.sizes()));
  if (mask.layout() != at::kSparse) {
    const CompressedView view = compressed_view("sparse_mask", mask, validate);
    const at::Tensor source = view.transposed ? dense.transpose(0, 1) : dense;
    const at::Tensor values = ops::sparse_mask(source, view.indices(), validate);
    return compressed_like(mask, view.compressed, view.plain, values);
  }
  const at::Tensor values = ops::sparse_mask(dense, mask._indices(), validate);
  return coo_tensor(mask._indices(), values, mask.sizes(), mask.is_coalesced());
}

at::Tensor to_sparse_coo_kernel(const at::Tensor& x, bool validate) {
  return convert_kernel("to_sparse_coo", x, at::kSparse, validate);
}
at::Tensor to_sparse_csr_kernel(const at::Tensor& x, bool validate) {
  return convert_kernel("to_sparse_csr", x, at::kSparseCsr, validate);
}
at::Tensor to_sparse_csc_kernel(const at::Tensor& x, bool validate) {
  return convert_kernel("to_sparse_csc", x, at::kSparseCsc, validate);
}

// ---- tensors joined: cat, stack ----

void check_coo_list(const char* op, at::TensorList tensors) {
  TORCH_CHECK_VALUE(!tensors.empty(), "torch_ragged.sparse.", op, ": expected at least one tensor");
  for (size_t k = 0; k < tensors.size(); ++k) {
    check_coo((std::string(op) + " (tensors[" + std::to_string(k) + "])").c_str(), tensors[k]);
  }
}

// The indices of the tensors' entries one after another (tensor k's in columns start_k ..), each
// row written in one pass: along sparse dim `dim`, for cat, that row shifted by offsets[k] (the
// sizes before k); for stack (new_row), a new row `dim` holding k before the others.
at::Tensor joined_indices(at::TensorList tensors, int64_t dim, bool new_row,
                          const std::vector<int64_t>& offsets) {
  const int64_t rows = tensors[0].sparse_dim() + (new_row ? 1 : 0);
  int64_t total = 0;
  for (const at::Tensor& x : tensors) total += x._nnz();
  at::Tensor out = at::empty({rows, total}, tensors[0]._indices().options().dtype(at::kLong));
  int64_t start = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const at::Tensor indices = tensors[k]._indices();
    const int64_t nnz = indices.size(1), offset = new_row ? 0 : offsets[k];
    for (int64_t r = 0; r < rows; ++r) {
      at::Tensor destination = out.select(0, r).narrow(0, start, nnz);
      if (new_row && r == dim) {
        destination.fill_(static_cast<int64_t>(k));
        continue;
      }
      const at::Tensor source = indices.select(0, new_row && r > dim ? r - 1 : r);
      if (r == dim && offset != 0) {
        at::add_out(destination, source, at::native::wrapped_scalar_tensor(offset));
      } else {
        destination.copy_(source);
      }
    }
    start += nnz;
  }
  return out;
}

// torch.cat of sparse COO tensors, as torch's: the entries one after another (indices offset along
// a sparse dim; along a dense dim each tensor's values fill their slice of the joined dim, zeros
// around), flagged uncoalesced -- except along dim 0 of coalesced tensors, whose concatenation is
// sorted already (every key of a later part is above the earlier parts'): flagged coalesced.
at::Tensor cat_kernel(at::TensorList tensors, int64_t dim) {
  check_coo_list("cat", tensors);
  const at::Tensor& first = tensors[0];
  const int64_t ndim = first.dim(), sparse_dim = first.sparse_dim();
  TORCH_CHECK_INDEX(-ndim <= dim && dim < ndim, "torch_ragged.sparse.cat: dim ", dim,
                    " is out of range for ", ndim, "-D tensors");
  if (dim < 0) dim += ndim;
  at::ScalarType dtype = first.scalar_type();
  std::vector<int64_t> offsets{0};
  std::vector<at::Tensor> parts;
  bool all_coalesced = true;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const at::Tensor& x = tensors[k];
    bool same = x.dim() == ndim && x.sparse_dim() == sparse_dim && x.device() == first.device();
    for (int64_t d = 0; same && d < ndim; ++d) same = d == dim || x.size(d) == first.size(d);
    TORCH_CHECK_VALUE(same, "torch_ragged.sparse.cat: tensors[", k, "] has shape ",
                      python_shape(x.sizes()), " (sparse_dim=", x.sparse_dim(), ", ", x.device(),
                      "); expected ", python_shape(first.sizes()), " but for dim ", dim,
                      ", sparse_dim=", sparse_dim, ", ", first.device());
    dtype = at::promote_types(dtype, x.scalar_type());
    offsets.push_back(offsets.back() + x.size(dim));
    parts.push_back(x._indices());
    all_coalesced = all_coalesced && x.is_coalesced();
  }
  std::vector<int64_t> shape = first.sizes().vec();
  shape[dim] = offsets.back();
  const at::Tensor indices = at::cat(parts, 1);  // one copy; the offsets added in place below
  std::vector<at::Tensor> values;
  int64_t start = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    at::Tensor x_values = differentiable_values(tensors[k]).to(dtype);
    const int64_t offset = offsets[k], nnz = tensors[k]._nnz();
    if (dim < sparse_dim) {
      if (offset != 0) indices.select(0, dim).narrow(0, start, nnz).add_(offset);
      start += nnz;
    } else {  // this tensor's slice of the joined dense dim, zeros around it
      std::vector<int64_t> pad(2 * (x_values.dim() - (dim - sparse_dim + 1) - 1), 0);
      pad.push_back(offset);
      pad.push_back(offsets.back() - offset - tensors[k].size(dim));
      x_values = at::constant_pad_nd(x_values, pad);
    }
    values.push_back(x_values);
  }
  return coo_tensor(indices, at::cat(values), shape, dim == 0 && sparse_dim > 0 && all_coalesced);
}

// torch.stack of sparse COO tensors of one shape: unsqueeze, then cat along the new dim.
at::Tensor stack_kernel(at::TensorList tensors, int64_t dim) {
  check_coo_list("stack", tensors);
  const at::Tensor& first = tensors[0];
  for (size_t k = 0; k < tensors.size(); ++k) {
    TORCH_CHECK_VALUE(
        tensors[k].sizes() == first.sizes() && tensors[k].sparse_dim() == first.sparse_dim(),
        "torch_ragged.sparse.stack: tensors[", k, "] has shape ", python_shape(tensors[k].sizes()),
        " (sparse_dim=", tensors[k].sparse_dim(), "); expected ", python_shape(first.sizes()),
        " (sparse_dim=", first.sparse_dim(), ")");
  }
  const int64_t ndim = first.dim() + 1;
  TORCH_CHECK_INDEX(-ndim <= dim && dim < ndim, "torch_ragged.sparse.stack: dim ", dim,
                    " is out of range for ", ndim - 1, "-D tensors");
  if (dim < 0) dim += ndim;
  const int64_t sparse_dim = first.sparse_dim();
  if (dim > sparse_dim) {  // a new dense dim: the values unsqueezed, joined along it
    std::vector<at::Tensor> unsqueezed;
    for (const at::Tensor& x : tensors) unsqueezed.push_back(unsqueeze_kernel(x, dim));
    return cat_kernel(unsqueezed, dim);
  }
  // a new sparse dim: tensor k's entries at index k along it, written in one pass
  at::ScalarType dtype = first.scalar_type();
  bool all_coalesced = true;
  for (const at::Tensor& x : tensors) {
    dtype = at::promote_types(dtype, x.scalar_type());
    all_coalesced = all_coalesced && x.is_coalesced();
  }
  std::vector<at::Tensor> values;
  for (const at::Tensor& x : tensors) values.push_back(differentiable_values(x).to(dtype));
  std::vector<int64_t> shape = first.sizes().vec();
  shape.insert(shape.begin() + dim, static_cast<int64_t>(tensors.size()));
  return coo_tensor(joined_indices(tensors, dim, /*new_row=*/true, {}), at::cat(values), shape,
                    dim == 0 && all_coalesced);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  define_unary(m, tags, std::make_index_sequence<kNumUnary>());
  m.def("sparse_pow(Tensor s, Scalar exponent) -> Tensor", tags);
  // Where the triplet op holds the name, the sparse-tensor form is its overload "tensor":
  // torch.ops.torch_ragged.sparse_coalesce(s) picks it by its arguments.
  m.def("sparse_coalesce.tensor(Tensor s, bool validate=True) -> Tensor", tags);
  m.def("sparse_to_dense.tensor(Tensor s, bool validate=True) -> Tensor", tags);
  m.def("sparse_sum.tensor(Tensor s, int[]? dim=None, bool validate=True) -> Tensor", tags);
  m.def("sparse_softmax.tensor(Tensor s, int dim, ScalarType? dtype=None) -> Tensor", tags);
  m.def("sparse_log_softmax(Tensor s, int dim, ScalarType? dtype=None) -> Tensor", tags);
  m.def("sparse_unsqueeze(Tensor s, int dim) -> Tensor", tags);
  m.def("sparse_select(Tensor s, int dim, int index) -> Tensor", tags);
  m.def("sparse_narrow_copy(Tensor s, int dim, int start, int length) -> Tensor", tags);
  m.def("sparse_permute(Tensor s, int[] dims) -> Tensor", tags);
  m.def("sparse_transpose(Tensor s, int dim0, int dim1) -> Tensor", tags);
  m.def("sparse_t(Tensor s) -> Tensor", tags);
  m.def("sparse_index_select.tensor(Tensor s, int dim, Tensor index) -> Tensor", tags);
  m.def("sparse_to_sparse(Tensor dense, int? sparse_dim=None) -> Tensor", tags);
  // the public sparse_mask: the triplet op holds "sparse_mask" with the same argument types
  m.def("sparse_sparse_mask(Tensor dense, Tensor mask, bool validate=True) -> Tensor", tags);
  m.def("sparse_to_sparse_coo(Tensor x, bool validate=True) -> Tensor", tags);
  m.def("sparse_to_sparse_csr(Tensor x, bool validate=True) -> Tensor", tags);
  m.def("sparse_to_sparse_csc(Tensor x, bool validate=True) -> Tensor", tags);
  m.def("sparse_cat(Tensor[] tensors, int dim=0) -> Tensor", tags);
  m.def("sparse_stack(Tensor[] tensors, int dim=0) -> Tensor", tags);
  m.def("sparse_add(Tensor a, Tensor b, *, Scalar alpha=1) -> Tensor", tags);
  m.def("sparse_sub(Tensor a, Tensor b, *, Scalar alpha=1) -> Tensor", tags);
  m.def("sparse_mul(Tensor a, Tensor b) -> Tensor", tags);
  m.def("sparse_mul.Scalar(Tensor a, Scalar b) -> Tensor", tags);
  m.def("sparse_div(Tensor s, Tensor divisor, *, str? rounding_mode=None) -> Tensor", tags);
  m.def("sparse_div.Scalar(Tensor s, Scalar divisor, *, str? rounding_mode=None) -> Tensor", tags);
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  implement_unary(m, std::make_index_sequence<kNumUnary>());
  m.impl("sparse_pow", &pow_kernel);
  m.impl("sparse_coalesce.tensor", &coalesce_kernel);
  m.impl("sparse_to_dense.tensor", &to_dense_kernel);
  m.impl("sparse_sum.tensor", &sum_kernel);
  m.impl("sparse_softmax.tensor", &softmax_kernel<false>);
  m.impl("sparse_log_softmax", &softmax_kernel<true>);
  m.impl("sparse_unsqueeze", &unsqueeze_kernel);
  m.impl("sparse_select", &select_kernel);
  m.impl("sparse_narrow_copy", &narrow_copy_kernel);
  m.impl("sparse_permute", &permute_kernel);
  m.impl("sparse_transpose", &transpose_kernel);
  m.impl("sparse_t", &t_kernel);
  m.impl("sparse_index_select.tensor", &index_select_kernel);
  m.impl("sparse_to_sparse", &to_sparse_kernel);
  m.impl("sparse_sparse_mask", &sparse_mask_kernel);
  m.impl("sparse_to_sparse_coo", &to_sparse_coo_kernel);
  m.impl("sparse_to_sparse_csr", &to_sparse_csr_kernel);
  m.impl("sparse_to_sparse_csc", &to_sparse_csc_kernel);
  m.impl("sparse_cat", &cat_kernel);
  m.impl("sparse_stack", &stack_kernel);
  m.impl("sparse_add", &add_kernel);
  m.impl("sparse_sub", &sub_kernel);
  m.impl("sparse_mul", &mul_kernel);
  m.impl("sparse_mul.Scalar", &mul_scalar_kernel);
  m.impl("sparse_div", &div_kernel);
  m.impl("sparse_div.Scalar", &div_scalar_kernel);
}

// ---- the C++ API: each function calls its op through the dispatcher ----

namespace sparse {

#define TORCH_RAGGED_UNARY(name)                                                 \
  at::Tensor name(const at::Tensor& s) {                                         \
    static const auto op =                                                       \
        op_handle<at::Tensor(const at::Tensor&)>("torch_ragged::sparse_" #name); \
    return op.call(s);                                                           \
  }
TORCH_RAGGED_UNARY(neg)
TORCH_RAGGED_UNARY(abs)
TORCH_RAGGED_UNARY(asin)
TORCH_RAGGED_UNARY(asinh)
TORCH_RAGGED_UNARY(atan)
TORCH_RAGGED_UNARY(atanh)
TORCH_RAGGED_UNARY(ceil)
TORCH_RAGGED_UNARY(deg2rad)
TORCH_RAGGED_UNARY(erf)
TORCH_RAGGED_UNARY(erfinv)
TORCH_RAGGED_UNARY(expm1)
TORCH_RAGGED_UNARY(floor)
TORCH_RAGGED_UNARY(frac)
TORCH_RAGGED_UNARY(log1p)
TORCH_RAGGED_UNARY(rad2deg)
TORCH_RAGGED_UNARY(relu)
TORCH_RAGGED_UNARY(round)
TORCH_RAGGED_UNARY(sgn)
TORCH_RAGGED_UNARY(sign)
TORCH_RAGGED_UNARY(signbit)
TORCH_RAGGED_UNARY(sin)
TORCH_RAGGED_UNARY(sinh)
TORCH_RAGGED_UNARY(sqrt)
TORCH_RAGGED_UNARY(square)
TORCH_RAGGED_UNARY(tan)
TORCH_RAGGED_UNARY(tanh)
TORCH_RAGGED_UNARY(trunc)
#undef TORCH_RAGGED_UNARY

at::Tensor pow(const at::Tensor& s, const at::Scalar& exponent) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Scalar&)>("torch_ragged::sparse_pow");
  return op.call(s, exponent);
}

at::Tensor coalesce(const at::Tensor& s, bool validate) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, bool)>("torch_ragged::sparse_coalesce", "tensor");
  return op.call(s, validate);
}

at::Tensor to_dense(const at::Tensor& s, bool validate) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, bool)>("torch_ragged::sparse_to_dense", "tensor");
  return op.call(s, validate);
}

at::Tensor sum(const at::Tensor& s, at::OptionalIntArrayRef dim, bool validate) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool)>(
      "torch_ragged::sparse_sum", "tensor");
  return op.call(s, dim, validate);
}

at::Tensor softmax(const at::Tensor& s, int64_t dim, std::optional<at::ScalarType> dtype) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>)>(
          "torch_ragged::sparse_softmax", "tensor");
  return op.call(s, dim, dtype);
}

at::Tensor log_softmax(const at::Tensor& s, int64_t dim, std::optional<at::ScalarType> dtype) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>)>(
          "torch_ragged::sparse_log_softmax");
  return op.call(s, dim, dtype);
}

at::Tensor unsqueeze(const at::Tensor& s, int64_t dim) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, int64_t)>("torch_ragged::sparse_unsqueeze");
  return op.call(s, dim);
}

at::Tensor select(const at::Tensor& s, int64_t dim, int64_t index) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, int64_t, int64_t)>("torch_ragged::sparse_select");
  return op.call(s, dim, index);
}

at::Tensor narrow_copy(const at::Tensor& s, int64_t dim, int64_t start, int64_t length) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, int64_t, int64_t, int64_t)>(
      "torch_ragged::sparse_narrow_copy");
  return op.call(s, dim, start, length);
}

at::Tensor permute(const at::Tensor& s, at::IntArrayRef dims) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, at::IntArrayRef)>("torch_ragged::sparse_permute");
  return op.call(s, dims);
}

at::Tensor transpose(const at::Tensor& s, int64_t dim0, int64_t dim1) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, int64_t, int64_t)>("torch_ragged::sparse_transpose");
  return op.call(s, dim0, dim1);
}

at::Tensor t(const at::Tensor& s) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&)>("torch_ragged::sparse_t");
  return op.call(s);
}

at::Tensor index_select(const at::Tensor& s, int64_t dim, const at::Tensor& index) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, int64_t, const at::Tensor&)>(
      "torch_ragged::sparse_index_select", "tensor");
  return op.call(s, dim, index);
}

at::Tensor cat(at::TensorList tensors, int64_t dim) {
  static const auto op = op_handle<at::Tensor(at::TensorList, int64_t)>("torch_ragged::sparse_cat");
  return op.call(tensors, dim);
}

at::Tensor stack(at::TensorList tensors, int64_t dim) {
  static const auto op =
      op_handle<at::Tensor(at::TensorList, int64_t)>("torch_ragged::sparse_stack");
  return op.call(tensors, dim);
}

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>(
          "torch_ragged::sparse_add");
  return op.call(a, b, alpha);
}

at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>(
          "torch_ragged::sparse_sub");
  return op.call(a, b, alpha);
}

at::Tensor mul(const at::Tensor& a, const at::Tensor& b) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&)>("torch_ragged::sparse_mul");
  return op.call(a, b);
}

at::Tensor mul(const at::Tensor& s, const at::Scalar& other) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, const at::Scalar&)>(
      "torch_ragged::sparse_mul", "Scalar");
  return op.call(s, other);
}

at::Tensor div(const at::Tensor& s, const at::Scalar& divisor,
               std::optional<c10::string_view> rounding_mode) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Scalar&, std::optional<c10::string_view>)>(
          "torch_ragged::sparse_div", "Scalar");
  return op.call(s, divisor, rounding_mode);
}

at::Tensor to_sparse(const at::Tensor& dense, std::optional<int64_t> sparse_dim) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, std::optional<int64_t>)>(
      "torch_ragged::sparse_to_sparse");
  return op.call(dense, sparse_dim);
}

#define TORCH_RAGGED_CONVERSION(name)                                                  \
  at::Tensor name(const at::Tensor& x, bool validate) {                                \
    static const auto op =                                                             \
        op_handle<at::Tensor(const at::Tensor&, bool)>("torch_ragged::sparse_" #name); \
    return op.call(x, validate);                                                       \
  }
TORCH_RAGGED_CONVERSION(to_sparse_coo)
TORCH_RAGGED_CONVERSION(to_sparse_csr)
TORCH_RAGGED_CONVERSION(to_sparse_csc)
#undef TORCH_RAGGED_CONVERSION

at::Tensor sparse_mask(const at::Tensor& dense, const at::Tensor& mask, bool validate) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, bool)>(
      "torch_ragged::sparse_sparse_mask");
  return op.call(dense, mask, validate);
}

}  // namespace sparse
}  // namespace torch_ragged
