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
#include "segment/segment_ops.h"
#include "sparse/sparse_args.h"
#include "sparse/sparse_ops.h"

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
  auto offsets_of = [&](const at::Tensor& keys, int64_t count) {
    const at::Tensor per_key = empty_output(op, "the plan's offsets", {count}, keys.options())
                                   .zero_()
                                   .index_add(0, keys, at::ones_like(keys));
    return ops::get_first_idx(per_key, /*validate=*/false);
  };
  const at::Tensor col_order = std::get<1>(at::sort(cols, /*stable=*/true, 0, false));
  const at::Tensor row_order =
      at::index_copy(at::empty_like(col_order), 0, col_order,
                     at::arange(c10::Scalar(col_order.sym_size(0)), col_order.options()));
  return {offsets_of(rows, sizes[0]), offsets_of(cols, sizes[1]), col_order, row_order};
}

// The CSR (transpose = false) or CSC (true) view of S: the gathered index, the weights and the
// segment offsets of segment_gather_sum / segment_gather_dot.
struct Direction {
  at::Tensor index, values, first_idx;
};

Direction direction(const at::Tensor& values, const at::Tensor& indices,
                    const at::Tensor& row_first_idx, const at::Tensor& col_first_idx,
                    const at::Tensor& col_order, bool transpose) {
  if (!transpose) return {indices.select(0, 1).to(at::kLong), values, row_first_idx};
  return {indices.select(0, 0).to(at::kLong).index_select(0, col_order),
          values.index_select(0, col_order), col_first_idx};
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
  auto offsets_of = [](const at::Tensor& keys, int64_t count) {
    return ops::get_first_idx(
        at::zeros({count}, keys.options()).index_add(0, keys, at::ones_like(keys)), false);
  };
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
  // Refused up front: the forward would run, but the gradients (conjugated products) do not exist.
  TORCH_CHECK_TYPE(!at::isComplexType(values.scalar_type()), "torch_ragged.", op,
                   ": complex S @ D is not supported (values are ", values.scalar_type(),
                   "); use torch.sparse.mm");
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
      direction(values, indices, row_first_idx, col_first_idx, col_order, transpose);
  return as_op("sparse_mm",
               [&] { return ops::segment_gather_sum(dense, d.index, d.values, d.first_idx); });
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
    if (!transpose) {
      return ops::segment_gather_dot(a, b, indices.select(0, 1).to(at::kLong), row_first_idx);
    }
    const at::Tensor by_col = ops::segment_gather_dot(
        a, b, indices.select(0, 0).to(at::kLong).index_select(0, col_order), col_first_idx);
    return by_col.index_select(0, row_order);  // back to S's entry order
  });
}

// ---- autograd: sparse_mm and sparse_sddmm differentiate into each other ----

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
    if (ctx->needs_input_grad(0)) {
      grad_values = ops::sparse_sddmm(g, s[1], s[2], s[3], s[4], s[5], s[6], transpose, false);
    }
    if (ctx->needs_input_grad(1)) {
      grad_dense = ops::sparse_mm(s[0], g, s[2], s[3], s[4], s[5], s[6], !transpose, false);
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
      grad_a = ops::sparse_mm(u, s[1], s[2], s[3], s[4], s[5], s[6], transpose, false);
    }
    if (ctx->needs_input_grad(1)) {
      grad_b = ops::sparse_mm(u, s[0], s[2], s[3], s[4], s[5], s[6], !transpose, false);
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

// ---- sparse x sparse: expand the products, then coalesce (ESC) ----

// C = A @ B for coalesced A (n, k) and B (k, m): every stored a_il meets every stored b_lj of row l
// of B; the products are expanded (one per pair, grouped by A's entry) and coalesced by (i, j),
// which sums each C entry's products in a fixed order. Gradients reach both values through
// segment_expand (a segment sum back) and index_select.
std::tuple<at::Tensor, at::Tensor> sparse_spgemm_impl(
    const at::Tensor& a_indices, const at::Tensor& a_values, const at::Tensor& b_indices,
    const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
  constexpr std::string_view op = "sparse_spgemm";
  const SparseShape a = check_sparse_args(op, a_indices, a_values, a_size);
  const SparseShape b = check_sparse_args(op, b_indices, b_values, b_size);
  TORCH_CHECK_VALUE(
      a.size.size() == 2 && b.size.size() == 2 && a.sparse_dim == 2 && b.sparse_dim == 2,
      "torch_ragged.", op, ": A and B must be 2-D sparse matrices, got sizes ",
      at::IntArrayRef(a.size), " and ", at::IntArrayRef(b.size));
  TORCH_CHECK_VALUE(a.size[1] == b.size[0], "torch_ragged.", op,
                    ": the inner dimensions differ: A is ", at::IntArrayRef(a.size), ", B is ",
                    at::IntArrayRef(b.size));
  TORCH_CHECK_TYPE(a_values.scalar_type() == b_values.scalar_type(), "torch_ragged.", op,
                   ": A and B must share a dtype, got ", a_values.scalar_type(), " and ",
                   b_values.scalar_type());
  as_op(op, [&] {
    ops::sparse_flat_keys(a_indices, a_size, true);
    ops::sparse_flat_keys(b_indices, b_size, true);
  });
  const at::Tensor a_rows = a_indices.select(0, 0).to(at::kLong);
  const at::Tensor a_cols = a_indices.select(0, 1).to(at::kLong);
  const at::Tensor b_rows = b_indices.select(0, 0).to(at::kLong);
  const at::Tensor b_cols = b_indices.select(0, 1).to(at::kLong);
  // B's entries grouped by row (B coalesced: already in row order).
  const at::Tensor b_row_counts =
      at::zeros({b.size[0]}, b_rows.options()).index_add(0, b_rows, at::ones_like(b_rows));
  const at::Tensor b_row_first = ops::get_first_idx(b_row_counts, false);
  // One product per (A entry, entry of B's matching row), grouped by A entry.
  const at::Tensor products_first = ops::get_first_idx(b_row_counts.index_select(0, a_cols), false);
  const at::Tensor a_entry = ops::segment_ids(products_first, std::nullopt);
  const c10::SymInt products = a_entry.sym_size(0);
  const at::Tensor rank = at::arange(c10::Scalar(products), a_entry.options()) -
                          products_first.index_select(0, a_entry);
  const at::Tensor b_entry = b_row_first.index_select(0, a_cols.index_select(0, a_entry)) + rank;
  const at::Tensor values =
      ops::segment_expand(a_values, products_first, products) * b_values.index_select(0, b_entry);
  const at::Tensor keys =
      at::stack({a_rows.index_select(0, a_entry), b_cols.index_select(0, b_entry)});
  auto [c_indices, c_values, permutation, first_idx] = ops::sparse_coalesce(
      keys, values, c10::SymDimVector{a.size[0], b.size[1]}, /*validate=*/false);
  return {c_indices, c_values};
}

// Without a gradient to record, the explicit kernel below autograd (or, traced, the fake kernel)
// runs; with one, the composite runs here and the ops it calls record the gradients.
std::tuple<at::Tensor, at::Tensor> sparse_spgemm_autograd(
    const at::Tensor& a_indices, const at::Tensor& a_values, const at::Tensor& b_indices,
    const at::Tensor& b_values, c10::SymIntArrayRef a_size, c10::SymIntArrayRef b_size) {
  const bool needs_grad =
      at::GradMode::is_enabled() && (a_values.requires_grad() || b_values.requires_grad());
  if (needs_grad) {
    return sparse_spgemm_impl(a_indices, a_values, b_indices, b_values, a_size, b_size);
  }
  static auto op = op_handle<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      c10::SymIntArrayRef, c10::SymIntArrayRef)>("torch_ragged::sparse_spgemm");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(a_indices, a_values, b_indices, b_values, a_size, b_size);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("sparse_mm_plan", &sparse_mm_plan_impl);
}

// sparse_spgemm is a composite registered as an explicit kernel (and, for Autograd, run as a
// composite when gradients are needed): torch.export keeps implicit composites as graph nodes and
// traces them, and this one's intermediate product count is a size symbol its outputs do not
// carry, which export rejects. As an explicit op it has a fake kernel (sparse.py) with one fresh
// size, its output nnz. (Exporting it with inputs that require grad still traces the composite.)
TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  m.impl("sparse_mm", &sparse_mm_impl);
  m.impl("sparse_sddmm", &sparse_sddmm_impl);
  m.impl("sparse_spgemm", &sparse_spgemm_impl);
}

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("sparse_mm", &sparse_mm_autograd);
  m.impl("sparse_sddmm", &sparse_sddmm_autograd);
  m.impl("sparse_spgemm", &sparse_spgemm_autograd);
}

}  // namespace torch_ragged
