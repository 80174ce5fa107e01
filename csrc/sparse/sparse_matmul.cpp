// Sparse x dense products on the segment core, with autograd that never densifies.
//
// A coalesced 2-D S (n, m) with a *plan*: row_first_idx (n + 1: its CSR row offsets),
// col_first_idx (m + 1) and col_order (nnz: entries sorted by column, stable, i.e. its CSC order),
// row_order (the inverse permutation). Then, with g = segment_gather_sum (weighted gathered rows)
// and d = segment_gather_dot (one dot product per entry), both from the segment core:
//   S @ D   = g(D, cols, values, row_first_idx)                                  (n, k)
//   Sᵀ @ D  = g(D, rows[col_order], values[col_order], col_first_idx)            (m, k)
//   dL/dvalues of S @ D  = d(G, D, cols, row_first_idx)            (an SDDMM: never a dense n x m)
//   dL/dD of S @ D       = Sᵀ @ G                                  (through the cached CSC order)
// sparse_mm(transpose) and sparse_sddmm(transpose) are each other's derivatives, so every order of
// derivative is available, deterministic (no atomics: fixed-order segment sums) on every device.

#include <torch/autograd.h>
#include <torch/library.h>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/op_handle.h"
#include "segment/offsets.h"
#include "segment/segment_ops.h"
#include "segment/sort.h"
#include "sparse/coalesce.h"
#include "sparse/sparse_args.h"
#include "sparse/sparse_ops.h"
#include "sparse/spgemm.h"

namespace torch_ragged {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- the plan ----

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_mm_plan_impl(
    const at::Tensor& indices, c10::SymIntArrayRef size) {
  constexpr std::string_view op = "sparse_mm_plan";
  const std::vector<int64_t> sizes = concrete_sizes(op, "size", size);
  TORCH_CHECK_VALUE(sizes.size() == 2, "torch_ragged.", op,
                    ": S must be a 2-D sparse matrix (size of 2 entries), got size ",
                    at::IntArrayRef(sizes));
  check_indices(op, indices, 2);
  as_op(op, [&] { ops::sparse_flat_keys(indices, size, /*validate=*/true); });  // in range
  const at::Tensor rows = indices.select(0, 0).to(at::kLong);
  const at::Tensor cols = indices.select(0, 1).to(at::kLong);
  // CSR / CSC offsets: one int64 per row and per column, (n + 1) + (m + 1) in all, with a count per
  // row or column on the way (a size that cannot be held is refused by name, before any of it).
  uint64_t offsets = 0;
  TORCH_CHECK_VALUE(!c10::add_overflows(static_cast<uint64_t>(sizes[0]),
                                        static_cast<uint64_t>(sizes[1]) + 3, &offsets) &&
                        !c10::mul_overflows(offsets, uint64_t{8}, &offsets),
                    "torch_ragged.", op, ": the plan of a ", at::IntArrayRef(sizes),
                    " matrix would need more than 2^64 bytes of offsets");
  check_fits_in_memory(op, "the plan's row and column offsets", offsets, indices.device());
  auto checked_offsets = [&](const at::Tensor& keys, int64_t count) {
    const at::Tensor per_key = empty_output(op, "the plan's offsets", {count}, keys.options())
                                   .zero_()
                                   .index_add(0, keys, at::ones_like(keys));
    return ops::get_first_idx(per_key, /*validate=*/false);
  };
  const bool on_host = cols.is_cpu() && !is_symbolic(cols);  // readable data (not traced)
  at::Tensor col_order, col_first_idx;
  if (std::optional<KeyGroups> by_column =
          on_host ? cpu::group_small_keys(cols, sizes[1]) : std::nullopt) {
    // one stable counting pass: the column order and the CSC offsets together (a sort costs ~10x)
    col_order = std::move(by_column->permutation);
    col_first_idx = std::move(by_column->first_idx);
  } else {
    col_order = std::get<1>(at::sort(cols, /*stable=*/true, 0, false));
    col_first_idx = checked_offsets(cols, sizes[1]);
  }
  const at::Tensor row_order =
      at::index_copy(at::empty_like(col_order), 0, col_order,
                     at::arange(c10::Scalar(col_order.sym_size(0)), col_order.options()));
  std::optional<at::Tensor> row_first_idx =
      on_host ? offsets_of_sorted_ids(rows, sizes[0]) : std::nullopt;
  return {row_first_idx.has_value() ? *row_first_idx : checked_offsets(rows, sizes[0]),
          col_first_idx, col_order, row_order};
}

// The CSR (transpose = false) or CSC (true) view of S: the gathered index, the weights and the
// segment offsets of segment_gather_sum / segment_gather_dot.
struct Direction {
  at::Tensor index, values, first_idx;
};

// entries[order[i]] = t[i]: t, given in one order of S's entries, put in the other (order is
// col_order to take column order back to S's, row_order to take S's order to column order). A
// scatter of sequential reads: half the time of gathering through the inverse order on the CPU
// (2M entries: 8 vs 14.5 ms for the rows and values together), the same tensor.
at::Tensor reordered(const at::Tensor& t, const at::Tensor& order) {
  return at::empty_like(t).index_copy_(0, order, t);
}

Direction direction(const at::Tensor& values, const at::Tensor& indices,
                    const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                    const at::Tensor& row_order, bool transpose) {
  if (!transpose) return {indices.select(0, 1).to(at::kLong), values, row_first_idx};
  return {reordered(indices.select(0, 0).to(at::kLong), row_order), reordered(values, row_order),
          col_first_idx};
}

// The plan's four tensors (sparse_mm_plan's outputs): 1-D integer tensors, orders of nnz entries,
// on the CPU or the data's device. Their values are checked by the segment ops that read them.
void check_mm_plan(std::string_view op, const at::Tensor& data, const at::Tensor& indices,
                   const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                   const at::Tensor& col_order, const at::Tensor& row_order) {
  check_indices(op, indices, 2);
  const std::pair<std::string_view, const at::Tensor*> plan[] = {{"row_first_idx", &row_first_idx},
                                                                 {"col_first_idx", &col_first_idx},
                                                                 {"col_order", &col_order},
                                                                 {"row_order", &row_order}};
  for (const auto& [name, tensor] : plan) {
    check_index_tensor(op, name, *tensor, 1);
    check_index_device(op, name, *tensor, data.device());
  }
  for (const auto& [name, tensor] : {plan[2], plan[3]}) {
    TORCH_CHECK_VALUE(tensor->sym_size(0) == indices.sym_size(1), "torch_ragged.", op, ": ", name,
                      " must hold nnz = indices.size(1) = ", indices.sym_size(1),
                      " entries (sparse_mm_plan's output), got ", tensor->sym_size(0));
  }
  TORCH_CHECK_VALUE(row_first_idx.sym_size(0) >= 1 && col_first_idx.sym_size(0) >= 1,
                    "torch_ragged.", op,
                    ": row_first_idx and col_first_idx need at least 1 entry (rows + 1, cols + 1)");
}

// The plan's values against the indices (validate=True): the CSR offsets count the rows of the
// entries, which come grouped by row; the CSC offsets count their columns; col_order sorts the
// entries by column, stably; row_order is its inverse. O(nnz) ATen ops (a few host reads on a
// GPU); a plan built for other indices would otherwise give a wrong product without complaint.
void check_plan_matches(std::string_view op, const at::Tensor& indices,
                        const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                        const at::Tensor& col_order, const at::Tensor& row_order) {
  const std::initializer_list<const at::Tensor*> all = {&indices, &row_first_idx, &col_first_idx,
                                                        &col_order, &row_order};
  if (std::any_of(all.begin(), all.end(), [](const at::Tensor* t) { return is_symbolic(*t); })) {
    return;  // traced: the values are not known here
  }
  const at::Device device = indices.device();
  const int64_t n = row_first_idx.size(0) - 1, m = col_first_idx.size(0) - 1;
  const int64_t nnz = indices.size(1);
  const at::Tensor rows = indices.select(0, 0).to(at::kLong);
  const at::Tensor cols = indices.select(0, 1).to(at::kLong);
  const at::Tensor by_col = col_order.to(device, at::kLong),
                   inverse = row_order.to(device, at::kLong);
  auto in_range = [](const at::Tensor& t, int64_t size) {
    return t.numel() == 0 || ((t >= 0) & (t < size)).all().item<bool>();
  };
  auto rising = [](const at::Tensor& t) {  // non-decreasing
    return t.numel() < 2 || (t.diff() >= 0).all().item<bool>();
  };
  bool fits = in_range(rows, n) && in_range(cols, m) && in_range(by_col, nnz) &&
              in_range(inverse, nnz) && rising(rows) &&
              at::equal(offsets_of(rows, n), row_first_idx.to(device, at::kLong)) &&
              at::equal(offsets_of(cols, m), col_first_idx.to(device, at::kLong));
  if (fits && nnz > 1) {  // by column, then by entry: strictly rising pairs make a permutation
    const at::Tensor col_step = cols.index_select(0, by_col).diff(), entry_step = by_col.diff();
    fits = ((col_step > 0) | ((col_step == 0) & (entry_step > 0))).all().item<bool>();
  }
  fits = fits && at::equal(inverse.index_select(0, by_col), at::arange(nnz, rows.options()));
  TORCH_CHECK_VALUE(fits, "torch_ragged.", op,
                    ": the plan (row_first_idx, col_first_idx, col_order, row_order) does not fit "
                    "these indices: pass what sparse_mm_plan(indices, size) returns for the same "
                    "coalesced indices (validate=False skips this O(nnz) check)");
}

void check_mm_args(std::string_view op, const at::Tensor& values, const at::Tensor& dense,
                   const at::Tensor& indices, const at::Tensor& row_first_idx,
                   const at::Tensor& col_first_idx, const at::Tensor& col_order,
                   const at::Tensor& row_order, bool transpose) {
  check_defined(op, "values", values);
  check_defined(op, "dense", dense);
  check_mm_plan(op, dense, indices, row_first_idx, col_first_idx, col_order, row_order);
  TORCH_CHECK_VALUE(values.dim() == 1 && values.sym_size(0) == indices.sym_size(1), "torch_ragged.",
                    op, ": values must be 1-D with nnz = indices.size(1) = ", indices.sym_size(1),
                    " entries, got shape ", values.sym_sizes());
  TORCH_CHECK_TYPE(values.scalar_type() == dense.scalar_type(), "torch_ragged.", op,
                   ": S and D must share a dtype, got ", values.scalar_type(), " and ",
                   dense.scalar_type(), " (cast one: there is no implicit promotion)");
  const c10::SymInt inner = (transpose ? row_first_idx : col_first_idx).sym_size(0) - 1;
  TORCH_CHECK_VALUE(dense.dim() >= 1 && dense.sym_size(0) == inner, "torch_ragged.", op,
                    ": the inner dimensions differ: S", transpose ? "ᵀ" : "", " has ", inner,
                    " columns but D has shape ", dense.sym_sizes());
}

at::Tensor sparse_mm_impl(const at::Tensor& values, const at::Tensor& dense,
                          const at::Tensor& indices, const at::Tensor& row_first_idx,
                          const at::Tensor& col_first_idx, const at::Tensor& col_order,
                          const at::Tensor& row_order, bool transpose, bool validate) {
  check_mm_args("sparse_mm", values, dense, indices, row_first_idx, col_first_idx, col_order,
                row_order, transpose);
  if (validate) {
    check_plan_matches("sparse_mm", indices, row_first_idx, col_first_idx, col_order, row_order);
  }
  const Direction d =
      direction(values, indices, row_first_idx, col_first_idx, row_order, transpose);
  return as_op("sparse_mm",
               [&] { return ops::segment_gather_sum(dense, d.index, d.values, d.first_idx); });
}

// t, conjugated in memory where it is complex (the kernels read memory, not a lazy conj flag).
at::Tensor conjugated(const at::Tensor& t) {
  return at::isComplexType(t.scalar_type()) ? at::conj_physical(t) : t;
}

// The dot products of complex rows (segment_gather_dot's kernels are real): each entry's pair of
// rows gathered and multiplied by ATen, O(nnz x width) scratch.
at::Tensor complex_entry_dots(const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_rows,
                              const at::Tensor& b_rows) {
  TORCH_CHECK_VALUE(
      a.dim() >= 1 && a.dim() == b.dim() && a.sizes().slice(1) == b.sizes().slice(1) &&
          a.scalar_type() == b.scalar_type() && a.device() == b.device(),
      "torch_ragged.sparse_sddmm: a (", a.sizes(), ", ", a.scalar_type(), ") and b (", b.sizes(),
      ", ", b.scalar_type(), ") must share dtype, device and the sizes after dim 0");
  const at::Tensor left = a.reshape({a.size(0), -1}).index_select(0, a_rows.to(at::kLong));
  const at::Tensor right = b.reshape({b.size(0), -1}).index_select(0, b_rows.to(at::kLong));
  return (left * right).sum(1);
}

// One dot product per stored entry, in S's entry order: dot(a[row], b[col]) (transpose: the roles
// of rows and columns swapped).
at::Tensor sparse_sddmm_impl(const at::Tensor& a, const at::Tensor& b, const at::Tensor& indices,
                             const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                             const at::Tensor& col_order, const at::Tensor& row_order,
                             bool transpose, bool validate) {
  constexpr std::string_view op = "sparse_sddmm";
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  check_mm_plan(op, a, indices, row_first_idx, col_first_idx, col_order, row_order);
  if (validate) {
    check_plan_matches(op, indices, row_first_idx, col_first_idx, col_order, row_order);
  }
  return as_op(op, [&] {
    if (at::isComplexType(a.scalar_type())) {
      return complex_entry_dots(a, b, indices.select(0, transpose ? 1 : 0),
                                indices.select(0, transpose ? 0 : 1));
    }
    if (!transpose) {
      return ops::segment_gather_dot(a, b, indices.select(0, 1).to(at::kLong), row_first_idx);
    }
    const at::Tensor by_col = ops::segment_gather_dot(
        a, b, reordered(indices.select(0, 0).to(at::kLong), row_order), col_first_idx);
    return reordered(by_col, col_order);  // back to S's entry order
  });
}

// ---- autograd: sparse_mm and sparse_sddmm differentiate into each other ----
// Complex operands take torch's convention (the gradient of a product is the other factor
// conjugated): S @ D gives S's values G Dᴴ on S's pattern and D Sᴴ G.

// S @ D's gradients to S's values (the SDDMM of G and D) and to D (Sᵀ @ G) from one
// segment_gather_sum_dot over Sᵀ @ G's segments (S @ G's for a transposed product), which reads
// each row of G that both need once. `saved`: SparseMm's saved tensors.
std::tuple<at::Tensor, at::Tensor> both_grads(const variable_list& saved, const at::Tensor& g,
                                              bool transpose) {
  const at::Tensor &values = saved[0], &dense = saved[1], &indices = saved[2];
  const at::Tensor &col_order = saved[5], &row_order = saved[6];
  const Direction d = direction(values, indices, saved[3], saved[4], row_order, !transpose);
  auto [grad_dense, dots] = ops::segment_gather_sum_dot(g, d.index, d.values, d.first_idx, dense);
  // dots follow the direction's entries: S's own order for S @ G, column order for Sᵀ @ G
  return {transpose ? dots : reordered(dots, col_order), grad_dense};
}

class SparseMm : public torch::autograd::Function<SparseMm> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& values, const at::Tensor& dense,
                            const at::Tensor& indices, const at::Tensor& row_first_idx,
                            const at::Tensor& col_first_idx, const at::Tensor& col_order,
                            const at::Tensor& row_order, bool transpose, bool validate) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward(
        {values, dense, indices, row_first_idx, col_first_idx, col_order, row_order});
    ctx->saved_data["transpose"] = transpose;
    return ops::sparse_mm(values, dense, indices, row_first_idx, col_first_idx, col_order,
                          row_order, transpose, validate);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SparseMm>();
    const variable_list s = ctx->get_saved_variables();
    const bool transpose = ctx->saved_data["transpose"].toBool();
    const at::Tensor& g = grads[0];
    at::Tensor grad_values, grad_dense;
    const bool complex = at::isComplexType(s[0].scalar_type());
    if (ctx->needs_input_grad(0) && ctx->needs_input_grad(1) && !at::GradMode::is_enabled() &&
        !complex) {
      // Both gradients read G's rows at S's entries: one pass gives both (same bits as the two
      // ops). With create_graph the two differentiable ops below run instead.
      std::tie(grad_values, grad_dense) = both_grads(s, g, transpose);
      return {grad_values, grad_dense, {}, {}, {}, {}, {}, {}, {}};
    }
    if (ctx->needs_input_grad(0)) {
      grad_values =
          ops::sparse_sddmm(g, conjugated(s[1]), s[2], s[3], s[4], s[5], s[6], transpose, false);
    }
    if (ctx->needs_input_grad(1)) {
      grad_dense =
          ops::sparse_mm(conjugated(s[0]), g, s[2], s[3], s[4], s[5], s[6], !transpose, false);
    }
    return {grad_values, grad_dense, {}, {}, {}, {}, {}, {}, {}};
  }
};

class SparseSddmm : public torch::autograd::Function<SparseSddmm> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            const at::Tensor& indices, const at::Tensor& row_first_idx,
                            const at::Tensor& col_first_idx, const at::Tensor& col_order,
                            const at::Tensor& row_order, bool transpose, bool validate) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({a, b, indices, row_first_idx, col_first_idx, col_order, row_order});
    ctx->saved_data["transpose"] = transpose;
    return ops::sparse_sddmm(a, b, indices, row_first_idx, col_first_idx, col_order, row_order,
                             transpose, validate);
  }
  // out_e = dot(a[r_e], b[c_e]): da = S(u) @ b, db = S(u)ᵀ @ a, with S(u) the pattern carrying u.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SparseSddmm>();
    const variable_list s = ctx->get_saved_variables();
    const bool transpose = ctx->saved_data["transpose"].toBool();
    const at::Tensor& u = grads[0];
    at::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) {
      grad_a = ops::sparse_mm(u, conjugated(s[1]), s[2], s[3], s[4], s[5], s[6], transpose, false);
    }
    if (ctx->needs_input_grad(1)) {
      grad_b = ops::sparse_mm(u, conjugated(s[0]), s[2], s[3], s[4], s[5], s[6], !transpose, false);
    }
    return {grad_a, grad_b, {}, {}, {}, {}, {}, {}, {}};
  }
};

at::Tensor sparse_mm_autograd(const at::Tensor& values, const at::Tensor& dense,
                              const at::Tensor& indices, const at::Tensor& row_first_idx,
                              const at::Tensor& col_first_idx, const at::Tensor& col_order,
                              const at::Tensor& row_order, bool transpose, bool validate) {
  check_mm_args("sparse_mm", values, dense, indices, row_first_idx, col_first_idx, col_order,
                row_order, transpose);
  return SparseMm::apply(values, dense, indices, row_first_idx, col_first_idx, col_order, row_order,
                         transpose, validate);
}

at::Tensor sparse_sddmm_autograd(const at::Tensor& a, const at::Tensor& b,
                                 const at::Tensor& indices, const at::Tensor& row_first_idx,
                                 const at::Tensor& col_first_idx, const at::Tensor& col_order,
                                 const at::Tensor& row_order, bool transpose, bool validate) {
  check_defined("sparse_sddmm", "a", a);
  check_defined("sparse_sddmm", "b", b);
  check_mm_plan("sparse_sddmm", a, indices, row_first_idx, col_first_idx, col_order, row_order);
  return SparseSddmm::apply(a, b, indices, row_first_idx, col_first_idx, col_order, row_order,
                            transpose, validate);
}

// ---- sparse x sparse: by rows (Gustavson), each backend's spgemm_rows ----

// The products behind C = A @ B (list_products) and the C entry each lands in; the backward
// recomputes them (O(products) memory, only while it runs); the forward never lists them.
struct Products {
  ProductList list;
  at::Tensor c_entry;
  at::Tensor b_first, by_b_entry;  // the products sorted by B entry (stably) and their offsets
};

Products products_of(const at::Tensor& a_indices, const at::Tensor& b_indices,
                     const at::Tensor& c_indices, int64_t k, int64_t m) {
  const at::Tensor a_rows = a_indices.select(0, 0).to(at::kLong);
  const at::Tensor a_cols = a_indices.select(0, 1).to(at::kLong);
  const at::Tensor b_cols = b_indices.select(0, 1).to(at::kLong);
  const int64_t nnz_b = b_indices.size(1);
  Products p;
  p.list = list_products(a_cols, offsets_of(b_indices.select(0, 0).to(at::kLong), k), nnz_b);
  // C is coalesced: its keys row * m + col rise, and every product's key is among them.
  const at::Tensor c_keys = c_indices.select(0, 0).to(at::kLong) * m + c_indices.select(0, 1);
  const at::Tensor product_keys =
      a_rows.index_select(0, p.list.a_entry) * m + b_cols.index_select(0, p.list.b_entry);
  p.c_entry = at::searchsorted(c_keys, product_keys);
  // Products of B entry (l, j): one per A entry in column l, in A's order (stable sort).
  p.b_first = offsets_of(p.list.b_entry, nnz_b);
  p.by_b_entry = std::get<1>(at::sort(p.list.b_entry, /*stable=*/true, 0, false));
  return p;
}

// dA_il = sum_j G_ij conj(B_lj) and dB_lj = sum_i conj(A_il) G_ij (each where needed; dA = G Bᴴ,
// dB = Aᴴ G, torch's convention for complex gradients, conj a no-op for real values), from the
// coalesced COO indices of A, B and C and g = dL/dC's values: each a segment sum over the products
// of one entry (fixed order, no atomics), written with differentiable ops, so it differentiates
// again.
std::pair<at::Tensor, at::Tensor> spgemm_value_grads(
    const at::Tensor& a_indices, const at::Tensor& a_values, const at::Tensor& b_indices,
    const at::Tensor& b_values, const at::Tensor& c_indices, const at::Tensor& g, int64_t k,
    int64_t m, bool grad_a_needed, bool grad_b_needed) {
  const Products p = products_of(a_indices, b_indices, c_indices, k, m);
  const at::Tensor g_of_product = g.index_select(0, p.c_entry);
  at::Tensor grad_a, grad_b;
  if (grad_a_needed) {
    grad_a = ops::segment_sum(g_of_product * b_values.index_select(0, p.list.b_entry).conj(),
                              p.list.a_first);
  }
  if (grad_b_needed) {
    const at::Tensor terms = g_of_product * a_values.index_select(0, p.list.a_entry).conj();
    grad_b = ops::segment_sum(terms.index_select(0, p.by_b_entry), p.b_first);
  }
  return {grad_a, grad_b};
}

class SparseSpgemm : public torch::autograd::Function<SparseSpgemm> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a_indices,
                               const at::Tensor& a_values, const at::Tensor& b_indices,
                               const at::Tensor& b_values, c10::SymIntArrayRef a_size,
                               c10::SymIntArrayRef b_size) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [c_indices, c_values] =
        ops::sparse_spgemm(a_indices, a_values, b_indices, b_values, a_size, b_size);
    ctx->save_for_backward({a_indices, a_values, b_indices, b_values, c_indices});
    ctx->saved_data["k"] = b_size[0].expect_int();
    ctx->saved_data["m"] = b_size[1].expect_int();
    ctx->mark_non_differentiable({c_indices});
    return {c_indices, c_values};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[1].defined()) return undefined_grads<SparseSpgemm>();
    const variable_list s = ctx->get_saved_variables();
    auto [grad_a, grad_b] = spgemm_value_grads(
        s[0], s[1], s[2], s[3], s[4], grads[1], ctx->saved_data["k"].toInt(),
        ctx->saved_data["m"].toInt(), ctx->needs_input_grad(1), ctx->needs_input_grad(3));
    return {at::Tensor(), grad_a, at::Tensor(), grad_b, at::Tensor(), at::Tensor()};
  }
};

// The CSR form of the same product: its backward is sparse_spgemm's, on the COO indices of A, B
// and C (each row's segment ids beside its columns), built only when a gradient is asked for.
class SparseSpgemmCsr : public torch::autograd::Function<SparseSpgemmCsr> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a_crow,
                               const at::Tensor& a_col, const at::Tensor& a_values,
                               const at::Tensor& b_crow, const at::Tensor& b_col,
                               const at::Tensor& b_values, c10::SymIntArrayRef a_size,
                               c10::SymIntArrayRef b_size) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [c_crow, c_col, c_values] =
        ops::sparse_spgemm_csr(a_crow, a_col, a_values, b_crow, b_col, b_values, a_size, b_size);
    ctx->save_for_backward({a_crow, a_col, a_values, b_crow, b_col, b_values, c_crow, c_col});
    ctx->saved_data["k"] = b_size[0].expect_int();
    ctx->saved_data["m"] = b_size[1].expect_int();
    ctx->mark_non_differentiable({c_crow, c_col});
    return {c_crow, c_col, c_values};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[2].defined()) return undefined_grads<SparseSpgemmCsr>();
    const variable_list s = ctx->get_saved_variables();
    auto coo = [](const at::Tensor& crow, const at::Tensor& col) {
      return at::stack({ops::segment_ids(crow.to(at::kLong), col.numel()), col.to(at::kLong)});
    };
    auto [grad_a, grad_b] =
        spgemm_value_grads(coo(s[0], s[1]), s[2], coo(s[3], s[4]), s[5], coo(s[6], s[7]), grads[2],
                           ctx->saved_data["k"].toInt(), ctx->saved_data["m"].toInt(),
                           ctx->needs_input_grad(2), ctx->needs_input_grad(5));
    return {at::Tensor(), at::Tensor(), grad_a,       at::Tensor(),
            at::Tensor(), grad_b,       at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> sparse_spgemm_autograd(
    const at::Tensor& a_indices, const at::Tensor& a_values, const at::Tensor& b_indices,
    const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
  check_defined("sparse_spgemm", "a_indices", a_indices);
  check_defined("sparse_spgemm", "a_values", a_values);
  check_defined("sparse_spgemm", "b_indices", b_indices);
  check_defined("sparse_spgemm", "b_values", b_values);
  TORCH_CHECK_VALUE(a_size.size() == 2 && b_size.size() == 2,
                    "torch_ragged.sparse_spgemm: A and B ",
                    "must be 2-D sparse matrices, got sizes ", a_size, " and ", b_size);
  const variable_list out =
      SparseSpgemm::apply(a_indices, a_values, b_indices, b_values, a_size, b_size);
  return {out[0], out[1]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sparse_spgemm_csr_autograd(
    const at::Tensor& a_crow, const at::Tensor& a_col, const at::Tensor& a_values,
    const at::Tensor& b_crow, const at::Tensor& b_col, const at::Tensor& b_values,
    c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
  constexpr std::string_view op = "sparse_spgemm_csr";
  check_defined(op, "a_crow_indices", a_crow);
  check_defined(op, "a_col_indices", a_col);
  check_defined(op, "a_values", a_values);
  check_defined(op, "b_crow_indices", b_crow);
  check_defined(op, "b_col_indices", b_col);
  check_defined(op, "b_values", b_values);
  TORCH_CHECK_VALUE(a_size.size() == 2 && b_size.size() == 2, "torch_ragged.", op,
                    ": A and B must be 2-D sparse matrices, got sizes ", a_size, " and ", b_size);
  const variable_list out =
      SparseSpgemmCsr::apply(a_crow, a_col, a_values, b_crow, b_col, b_values, a_size, b_size);
  return {out[0], out[1], out[2]};
}

}  // namespace

at::Tensor offsets_of(const at::Tensor& keys, int64_t count) {
  return ops::get_first_idx(
      at::zeros({count}, keys.options()).index_add(0, keys, at::ones_like(keys)), false);
}

ProductList list_products(const at::Tensor& a_cols, const at::Tensor& b_first, int64_t nnz_b) {
  auto [b_entry, a_first] =
      ops::ragged_index_select(at::arange(nnz_b, b_first.options()), b_first, a_cols, std::nullopt);
  return {a_first, ops::segment_ids(a_first, b_entry.size(0)), b_entry};
}

// ---- sparse @ sparse, written once (coalesce.h): the operands checked and put in CSR form, the
// backend's rows as coalesced COO (int64 indices, as torch's sparse tensors hold) or as CSR ----

namespace {

// What both products check of A (n, k) and B (k, m): 2-D, a common inner dimension, one dtype that
// has a product, every tensor on a_values' device, and C's positions row * m + col countable in an
// int64 (the backward and the CUDA kernel key C's entries so).
void check_spgemm_pair(
    std::string_view op, at::IntArrayRef a_size, at::IntArrayRef b_size, const at::Tensor& a_values,
    const at::Tensor& b_values,
    std::initializer_list<std::pair<std::string_view, const at::Tensor*>> others) {
  TORCH_CHECK_VALUE(a_size.size() == 2 && b_size.size() == 2, "torch_ragged.", op,
                    ": A and B must be 2-D sparse matrices, got sizes ", a_size, " and ", b_size);
  TORCH_CHECK_VALUE(a_size[1] == b_size[0], "torch_ragged.", op,
                    ": the inner dimensions differ: A is ", a_size, ", B is ", b_size);
  TORCH_CHECK_TYPE(a_values.scalar_type() == b_values.scalar_type(), "torch_ragged.", op,
                   ": A and B must share a dtype, got ", a_values.scalar_type(), " and ",
                   b_values.scalar_type());
  TORCH_CHECK_TYPE(a_values.scalar_type() != at::kBool, "torch_ragged.", op,
                   ": bool values have no product; cast them to a number type");
  for (const auto& [name, t] : others) {
    TORCH_CHECK_VALUE(t->device() == a_values.device(), "torch_ragged.", op, ": ", name,
                      " must be on a_values' device ", a_values.device(), ", got ", t->device());
  }
  uint64_t keys = 0;
  TORCH_CHECK_VALUE(!c10::mul_overflows(static_cast<uint64_t>(a_size[0]),
                                        static_cast<uint64_t>(b_size[1]), &keys) &&
                        keys <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                    "torch_ragged.", op, ": C = A @ B of size (", a_size[0], ", ", b_size[1],
                    ") has more than 2^63 positions; split it into blocks of rows");
}

// Whether every column index lies in [0, cols) (one pass: the minimum and the maximum).
bool columns_in_range(const at::Tensor& col, int64_t cols) {
  if (col.numel() == 0) return true;
  const auto [lowest, highest] = at::aminmax(col);
  return lowest.item<int64_t>() >= 0 && highest.item<int64_t>() < cols;
}

// A CSR operand's offsets (int64) and columns (int64), checked: offsets from 0, never falling, to
// nnz, and columns in range, so no kernel reads out of bounds (columns unsorted within a row are
// summed all the same, in their order). `name`: "a" or "b".
std::pair<at::Tensor, at::Tensor> checked_csr_operand(std::string_view op, std::string_view name,
                                                      const at::Tensor& crow, const at::Tensor& col,
                                                      const at::Tensor& values, int64_t rows,
                                                      int64_t cols) {
  const std::string crow_name = std::string(name) + "_crow_indices";
  const std::string col_name = std::string(name) + "_col_indices";
  check_index_tensor(op, crow_name, crow, 1);
  check_index_tensor(op, col_name, col, 1);
  TORCH_CHECK_VALUE(values.dim() == 1 && values.size(0) == col.size(0), "torch_ragged.", op, ": ",
                    name, "_values must be 1-D with one value per entry (", col.size(0),
                    "), got shape ", values.sizes());
  TORCH_CHECK_VALUE(crow.size(0) == rows + 1, "torch_ragged.", op, ": ", crow_name, " of ", rows,
                    " rows must hold ", rows + 1, " offsets, got ", crow.size(0));
  const at::Tensor first = crow.to(at::kLong).contiguous();
  const CompressedFinding offsets = offsets_violation(first.cpu(), col.size(0));
  TORCH_CHECK_VALUE(offsets.kind == 0, "torch_ragged.", op, ": ", crow_name,
                    " must rise from 0 to nnz = ", col.size(0), ", got ", crow_name, "[",
                    offsets.position, "] = ", offsets.value);
  at::Tensor col_long = col.to(at::kLong).contiguous();
  if (!columns_in_range(col_long, cols)) {
    const int64_t p = ((col_long < 0) | (col_long >= cols)).nonzero().select(0, 0).item<int64_t>();
    TORCH_CHECK_INDEX(false, "torch_ragged.", op, ": ", col_name, "[", p,
                      "] = ", col_long.select(0, p).item<int64_t>(), " is out of range for the ",
                      cols, " columns of ", name == "a" ? "A" : "B");
  }
  return {first, std::move(col_long)};
}

}  // namespace

at::Tensor csr_offsets_of_product(const SpgemmOperands& s, const at::Tensor& first) {
  const int64_t nnz = first.select(0, s.n).item<int64_t>();
  TORCH_CHECK_VALUE(s.csr_index_dtype == at::kLong || nnz <= std::numeric_limits<int32_t>::max(),
                    "torch_ragged.sparse_spgemm_csr: C = A @ B has ", nnz,
                    " entries, more than int32 crow_indices can count; give A int64 indices");
  return first.to(s.csr_index_dtype, /*non_blocking=*/false, /*copy=*/true);
}

std::tuple<at::Tensor, at::Tensor> spgemm_with(
    const CoalesceBackend& backend, const at::Tensor& a_indices, const at::Tensor& a_values,
    const at::Tensor& b_indices, const at::Tensor& b_values, c10::SymIntArrayRef a_size,
    c10::SymIntArrayRef b_size) {
  constexpr std::string_view op = "sparse_spgemm";
  const SparseShape a = check_sparse_args(op, a_indices, a_values, a_size);
  const SparseShape b = check_sparse_args(op, b_indices, b_values, b_size);
  check_spgemm_pair(
      op, a.size, b.size, a_values, b_values,
      {{"a_indices", &a_indices}, {"b_indices", &b_indices}, {"b_values", &b_values}});
  TORCH_CHECK_VALUE(a.sparse_dim == 2 && b.sparse_dim == 2, "torch_ragged.", op,
                    ": A and B must be 2-D sparse matrices (no dense dims), got sizes ",
                    at::IntArrayRef(a.size), " and ", at::IntArrayRef(b.size));
  SpgemmOperands s;
  s.n = a.size[0], s.k = a.size[1], s.m = b.size[1];
  // CSR form: the row offsets (rows checked sorted and in range in the same pass) and the columns.
  auto csr = [&](const at::Tensor& indices, c10::SymIntArrayRef size, std::string_view name) {
    const int64_t rows = size[0].expect_int(), cols = size[1].expect_int();
    at::Tensor col = indices.select(0, 1).to(at::kLong).contiguous();
    std::optional<at::Tensor> first =
        offsets_of_sorted_ids(indices.select(0, 0).to(at::kLong), rows);
    if (!first.has_value() || !columns_in_range(col, cols)) {
      as_op(op,
            [&] { ops::sparse_flat_keys(indices, size, true); });  // IndexError naming the entry
      TORCH_CHECK_VALUE(false, "torch_ragged.", op, ": ", name,
                        "'s entries must come in row order (coalesce it first)");
    }
    return std::pair{std::move(*first), std::move(col)};
  };
  std::tie(s.a_first, s.a_cols) = csr(a_indices, a_size, "A");
  std::tie(s.b_first, s.b_cols) = csr(b_indices, b_size, "B");
  s.a_values = a_values.contiguous();
  s.b_values = b_values.contiguous();
  SpgemmResult c = backend.spgemm_rows(s);
  return {std::move(c.indices), std::move(c.values)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> spgemm_csr_with(
    const CoalesceBackend& backend, const at::Tensor& a_crow, const at::Tensor& a_col,
    const at::Tensor& a_values, const at::Tensor& b_crow, const at::Tensor& b_col,
    const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
  constexpr std::string_view op = "sparse_spgemm_csr";
  const std::vector<int64_t> a = nonnegative_sizes(op, "a_size", a_size);
  const std::vector<int64_t> b = nonnegative_sizes(op, "b_size", b_size);
  check_spgemm_pair(op, a, b, a_values, b_values,
                    {{"a_crow_indices", &a_crow},
                     {"a_col_indices", &a_col},
                     {"b_crow_indices", &b_crow},
                     {"b_col_indices", &b_col},
                     {"b_values", &b_values}});
  SpgemmOperands s;
  s.n = a[0], s.k = a[1], s.m = b[1];
  s.csr_output = true;
  s.csr_index_dtype = a_crow.scalar_type();
  std::tie(s.a_first, s.a_cols) = checked_csr_operand(op, "a", a_crow, a_col, a_values, s.n, s.k);
  std::tie(s.b_first, s.b_cols) = checked_csr_operand(op, "b", b_crow, b_col, b_values, s.k, s.m);
  TORCH_CHECK_VALUE(
      s.csr_index_dtype == at::kLong || (s.csr_index_dtype == at::kInt &&
                                         std::max(s.n, s.m) <= std::numeric_limits<int32_t>::max()),
      "torch_ragged.", op,
      ": C's indices take a_crow_indices' dtype, which must be int64, or int32 "
      "for a C of at most 2^31 - 1 rows and columns; got ",
      s.csr_index_dtype, " for C of size (", s.n, ", ", s.m, ")");
  s.a_values = a_values.contiguous();
  s.b_values = b_values.contiguous();
  SpgemmResult c = backend.spgemm_rows(s);
  return {std::move(c.first), std::move(c.cols), std::move(c.values)};
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("sparse_mm_plan", &sparse_mm_plan_impl);
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  m.impl("sparse_mm", &sparse_mm_impl);
  m.impl("sparse_sddmm", &sparse_sddmm_impl);
}

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("sparse_mm", &sparse_mm_autograd);
  m.impl("sparse_sddmm", &sparse_sddmm_autograd);
  m.impl("sparse_spgemm", &sparse_spgemm_autograd);
  m.impl("sparse_spgemm_csr", &sparse_spgemm_csr_autograd);
}

}  // namespace torch_ragged
