// The products of torch_ragged.sparse as registered ops on torch sparse tensors: mm (sparse @
// dense, dense @ sparse, sparse @ sparse; COO, CSR, CSC, BSR, BSC), addmm, bmm, mv, matmul, hspmm,
// smm, sspaddmm. CompositeImplicitAutograd: they differentiate through the triplet ops they call
// (segment_gather_sum, sparse_mm and its SDDMM backward, sparse_spgemm) and torch's sparse
// constructors. A plan (Python's SparsePlan) is not a schema type: mm / addmm with a plan stay in
// Python, on the same triplet ops.

#include <torch/library.h>
#include <torch_ragged/sparse.h>

#include <string>
#include <utility>
#include <vector>

#include "common/checks.h"
#include "common/op_handle.h"
#include "segment/segment_ops.h"
#include "sparse/sparse_ops.h"
#include "sparse/sparse_tensor.h"

namespace torch_ragged {
namespace {

bool is_sparse(const at::Tensor& x) {
  const at::Layout layout = x.layout();
  return layout == at::kSparse || layout == at::kSparseCsr || layout == at::kSparseCsc ||
         layout == at::kSparseBsr || layout == at::kSparseBsc;
}

bool is_blocked(const at::Tensor& x) {
  return x.layout() == at::kSparseBsr || x.layout() == at::kSparseBsc;
}

// A sparse matrix for a product: COO, CSR or CSC with every dim sparse (a hybrid tensor's dense
// dims have no product rule).
void check_matrix(const char* op, const at::Tensor& s) {
  check_coo_or_compressed(op, s);
  TORCH_CHECK_VALUE(s.dense_dim() == 0, "torch_ragged.sparse.", op,
                    ": S must have only sparse dims, got a hybrid tensor of shape ",
                    python_shape(s.sizes()), " with ", s.dense_dim(),
                    " dense dim(s) (sparse_dim=", s.sparse_dim(), ")");
}

[[noreturn]] void refuse_operands(const at::Tensor& s, const at::Tensor& dense) {
  TORCH_CHECK_VALUE(false, "torch_ragged.sparse.mm: expected 2-D operands, got ",
                    python_shape(s.sizes()), " (", layout_name(s), ") and ",
                    python_shape(dense.sizes()));
}

// sparse_mm's checks of S's values against D, with its messages, for the route that gathers D's
// rows without it (segment_gather_sum would take mismatched dtypes, or read only the rows the
// indices name).
void check_gather_operands(const at::Tensor& values, const at::Tensor& operand, int64_t inner) {
  TORCH_CHECK_TYPE(values.scalar_type() == operand.scalar_type(),
                   "torch_ragged.sparse_mm: S and D must share a dtype, got ", values.scalar_type(),
                   " and ", operand.scalar_type(), " (cast one: there is no implicit promotion)");
  TORCH_CHECK_VALUE(operand.size(0) == inner,
                    "torch_ragged.sparse_mm: the inner dimensions differ: S has ", inner,
                    " columns but D has shape ", python_shape(operand.sizes()));
}

// A coalesced matrix M (size rows x cols) as the rows of its entries: the offsets of its rows
// (row_first_idx, or built from the indices' first row), its columns, and (2, nnz) indices built
// only when a plan needs them.
struct RowMajor {
  at::Tensor values, plain, row_first_idx;
  std::vector<int64_t> size;
  at::Tensor indices;                    // undefined for a compressed view: built on demand
  const CompressedView* view = nullptr;  // the compressed matrix M is, if any

  at::Tensor all_indices() const { return view != nullptr ? view->indices() : indices; }
};

// M @ D (M^T @ D with transpose; of D^T, transposed back, with dense_on_left). Without gradients
// and transpose, the rows are segments: one weighted gather-sum, no column order read. Otherwise
// sparse_mm through a plan built here (its backward to D reads M^T through the plan's column order,
// to M's values is an SDDMM).
at::Tensor plan_product(const RowMajor& m, const at::Tensor& dense, bool transpose,
                        bool dense_on_left) {
  const at::Tensor operand = dense_on_left ? dense.t().contiguous() : dense;
  const bool needs_grad =
      at::GradMode::is_enabled() && (m.values.requires_grad() || operand.requires_grad());
  at::Tensor product;
  if (!transpose && !needs_grad) {
    check_gather_operands(m.values, operand, m.size[1]);
    const at::Tensor first_idx = m.row_first_idx.defined()
                                     ? m.row_first_idx
                                     : row_offsets("mm", m.indices.select(0, 0), m.size[0], false);
    product = ops::segment_gather_sum(operand, m.plain, m.values, first_idx);
  } else {
    const at::Tensor indices = m.all_indices();
    product = sparse_mm(m.values, operand, indices, sparse_mm_plan(indices, m.size), transpose,
                        /*validate=*/false);  // the plan was built right here
  }
  return dense_on_left ? product.t() : product;
}

// A 2-D BSR / BSC matrix (or its transpose) as block rows: (block_first_idx, block_cols, blocks
// (nnz, bh, bw) in row-major block order, (block_rows, block_cols_count, bh, bw)). A BSR matrix is
// that as stored; BSC, or a transpose, costs one sort of the block indices on the coalesce core.
struct BlockRows {
  at::Tensor first_idx, cols, blocks;
  std::vector<int64_t> size;
};

BlockRows block_rows(const at::Tensor& s, bool transpose, bool validate) {
  TORCH_CHECK_VALUE(s.dim() == 2, "torch_ragged.sparse.mm: expected a 2-D ", layout_name(s),
                    " matrix, got shape ", python_shape(s.sizes()));
  BlockRows b;
  b.blocks = compressed_values(s);
  const int64_t bh = b.blocks.size(1), bw = b.blocks.size(2);
  const bool row_compressed = s.layout() == at::kSparseBsr;
  const at::Tensor compressed = row_compressed ? s.crow_indices() : s.ccol_indices();
  const at::Tensor plain = row_compressed ? s.col_indices() : s.row_indices();
  at::Tensor indices = block_indices(s);
  b.size = {s.size(0) / bh, s.size(1) / bw, bh, bw};
  const std::vector<c10::SymInt> grid{b.size[0], b.size[1]};
  as_op("sparse.mm", [&] { return ops::sparse_flat_keys(indices, grid, validate); });  // in range
  if (transpose) {
    indices = indices.flip(0);
    b.blocks = b.blocks.transpose(1, 2);
    b.size = {b.size[1], b.size[0], bw, bh};
  }
  if (row_compressed && !transpose) {
    b.first_idx = compressed;
    b.cols = plain;
    return b;
  }
  auto [sorted, blocks, permutation, first_idx] =
      ops::sparse_coalesce(indices, b.blocks, c10::fromIntArrayRefSlow(b.size), false, false);
  b.first_idx = row_offsets("mm", sorted[0], b.size[0], sorted.scalar_type() == at::kInt);
  b.cols = sorted[1];
  b.blocks = blocks;
  return b;
}

// S @ D (D @ S = (S^T @ D^T)^T) for a blocked S: each block times its slice of D, summed over each
// block row by the segment core (in block order: deterministic).
at::Tensor blocked_mm(const at::Tensor& s, const at::Tensor& dense, bool dense_on_left,
                      bool validate) {
  if (s.dim() != 2 || dense.dim() != 2) refuse_operands(s, dense);
  const BlockRows b = block_rows(s, dense_on_left, validate);
  const at::Tensor operand = dense_on_left ? dense.t() : dense;
  const int64_t block_rows = b.size[0], block_cols = b.size[1], bh = b.size[2], bw = b.size[3];
  const at::Tensor gathered =
      operand.reshape({block_cols, bw, operand.size(1)}).index_select(0, b.cols.to(at::kLong));
  const at::Tensor out = ops::segment_sum(at::bmm(b.blocks, gathered), b.first_idx)
                             .reshape({block_rows * bh, operand.size(1)});
  return dense_on_left ? out.t() : out;
}

// (crow_indices, col_indices, values) of s in row-major CSR form: a CSR matrix's own (checked with
// validate), a COO one's rows compressed (coalesced first), a CSC one's entries sorted by row.
std::tuple<at::Tensor, at::Tensor, at::Tensor> csr_parts(const at::Tensor& s, bool validate) {
  if (s.layout() == at::kSparseCsr) {
    const CompressedView view = compressed_view("mm", s, validate);
    return {view.compressed, view.plain, view.values};
  }
  auto [indices, values] = row_major_parts("mm", s, validate);
  return {row_offsets("mm", indices[0], s.size(0), false), indices[1], values};
}

// sparse @ sparse: COO when both are COO, CSC when both are CSC (as torch.sparse.mm), else CSR
// (torch refuses a COO with a compressed one).
at::Tensor spgemm(const at::Tensor& a, const at::Tensor& b, bool validate) {
  check_matrix("mm", a);
  check_matrix("mm", b);
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2,
                    "torch_ragged.sparse.mm: expected 2-D operands, got ", python_shape(a.sizes()),
                    " and ", python_shape(b.sizes()));
  const std::vector<int64_t> size{a.size(0), b.size(1)};
  if (a.layout() == at::kSparse && b.layout() == at::kSparse) {
    auto [a_indices, a_values] = row_major_parts("mm", a, validate);
    auto [b_indices, b_values] = row_major_parts("mm", b, validate);
    auto [indices, values] =
        ops::sparse_spgemm(a_indices, a_values, b_indices, b_values, a.sym_sizes(), b.sym_sizes());
    return coo_tensor(indices, values, size, true);
  }
  if (a.layout() == at::kSparseCsc && b.layout() == at::kSparseCsc) {
    // C = A @ B is the transpose of B^T @ A^T, whose CSR operands are B's and A's CSC arrays as
    // they are; the CSR product of those is C's CSC (each entry the same products, in the same
    // order)
    const CompressedView bt = compressed_view("mm", b, validate);
    const CompressedView at_ = compressed_view("mm", a, validate);
    auto [ccol, row, values] = ops::sparse_spgemm_csr(
        bt.compressed, bt.plain, bt.values, at_.compressed, at_.plain, at_.values,
        c10::fromIntArrayRefSlow(bt.size), c10::fromIntArrayRefSlow(at_.size));
    return at::sparse_compressed_tensor(ccol, row, values, size,
                                        values.options().layout(at::kSparseCsc));
  }
  // CSR out: offsets and columns of the index dtype, no row per entry
  const at::ScalarType dtype = a.layout() != at::kSparse ? index_dtype(a) : index_dtype(b);
  auto [a_crow, a_col, a_values] = csr_parts(a, validate);
  auto [b_crow, b_col, b_values] = csr_parts(b, validate);
  auto [crow, col, values] = ops::sparse_spgemm_csr(a_crow.to(dtype), a_col, a_values, b_crow,
                                                    b_col, b_values, a.sym_sizes(), b.sym_sizes());
  return at::sparse_compressed_tensor(crow, col, values, size,
                                      values.options().layout(at::kSparseCsr));
}

at::Tensor mm_kernel(const at::Tensor& a, const at::Tensor& b, bool validate) {
  if (is_sparse(a) && is_sparse(b)) return spgemm(a, b, validate);
  const bool dense_on_left = !is_sparse(a);
  const at::Tensor& s = dense_on_left ? b : a;
  const at::Tensor& dense = dense_on_left ? a : b;
  if (is_blocked(s)) return blocked_mm(s, dense, dense_on_left, validate);
  check_matrix("mm", s);
  if (s.dim() != 2 || dense.dim() != 2) refuse_operands(s, dense);
  RowMajor m;
  if (s.layout() != at::kSparse) {
    const CompressedView view = compressed_view("mm", s, validate);
    m.values = view.values;
    m.plain = view.plain;
    m.row_first_idx = view.compressed;
    m.size = view.size;
    m.view = &view;
    // the stored matrix is S (CSR) or S^T (CSC); D @ S = (S^T @ D^T)^T
    return plan_product(m, dense, view.transposed != dense_on_left, dense_on_left);
  }
  std::tie(m.indices, m.values) = row_major_parts("mm", s, validate);
  m.plain = m.indices.select(0, 1);
  m.size = s.sizes().vec();
  return plan_product(m, dense, dense_on_left, dense_on_left);
}

// Whether `shape` broadcasts to `target` (torch's rule).
bool broadcasts_to(at::IntArrayRef shape, at::IntArrayRef target) {
  if (shape.size() > target.size()) return false;
  for (size_t k = 1; k <= shape.size(); ++k) {
    const int64_t size = shape[shape.size() - k];
    if (size != 1 && size != target[target.size() - k]) return false;
  }
  return true;
}

// beta * input + alpha * (s @ dense) for a dense input broadcasting to the product.
at::Tensor addmm_kernel(const at::Tensor& input, const at::Tensor& s, const at::Tensor& dense,
                        const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor product = mm_kernel(s, dense, true);
  TORCH_CHECK_VALUE(broadcasts_to(input.sizes(), product.sizes()),
                    "torch_ragged.sparse.addmm: input must broadcast to the product's shape ",
                    python_shape(product.sizes()), ", got ", python_shape(input.sizes()));
  if (!alpha.equal(1)) product = product * alpha;  // x * 1 is x, bit for bit: the pass is skipped
  if (beta.equal(0)) {
    // torch ignores input then (NaN and inf included), and gives it a zero gradient
    return product + at::where(at::zeros({}, input.options().dtype(at::kBool)), input, 0);
  }
  return product + (beta.equal(1) ? input : input * beta);
}

// The coalesced entries (indices, values) of a batched CSR tensor's block-diagonal 2-D matrix.
std::pair<at::Tensor, at::Tensor> block_diagonal_csr(const at::Tensor& s) {
  const int64_t batch = s.size(0), n = s.size(1), m = s.size(2);
  const at::Tensor crow = s.crow_indices(), col = s.col_indices();
  const int64_t nnz = col.size(-1);
  const at::Tensor offsets = at::arange(batch, crow.options()).unsqueeze(1);
  TORCH_CHECK_VALUE(batch == 0 || crow.select(1, n).eq(nnz).all().item<bool>(),
                    "torch_ragged.sparse.bmm: crow_indices[:, -1] must be nnz = ", nnz,
                    " for every matrix");
  const at::Tensor flat_crow = at::cat({(crow.narrow(1, 0, n) + offsets * nnz).flatten(),
                                        at::full({1}, batch * nnz, crow.options())});
  const at::Tensor flat = at::sparse_compressed_tensor(
      flat_crow, (col + offsets * m).flatten(), compressed_values(s).flatten(),
      {batch * n, batch * m}, s.values().options().layout(at::kSparseCsr));
  const CompressedView view = compressed_view("bmm", flat, true);
  return {view.indices(), view.values};
}

// torch.bmm of a 3-D sparse (batch, n, m) -- COO with the batch as its first sparse dim, or
// batched CSR -- and a dense (batch, m, k): the batch as one block-diagonal 2-D matrix.
at::Tensor bmm_kernel(const at::Tensor& s, const at::Tensor& dense) {
  check_coo_or_compressed("bmm", s);
  const bool shapes_fit = s.dim() == 3 && s.dense_dim() == 0 && s.layout() != at::kSparseCsc &&
                          dense.dim() == 3 && dense.size(0) == s.size(0) &&
                          dense.size(1) == s.size(2);
  TORCH_CHECK_VALUE(shapes_fit,
                    "torch_ragged.sparse.bmm: expected a 3-D sparse COO or CSR (batch, n, m) "
                    "without dense dims and a dense (batch, m, k), got ",
                    python_shape(s.sizes()), " (", layout_name(s), ", dense_dim=", s.dense_dim(),
                    ") and dense ", python_shape(dense.sizes()));
  const int64_t batch = s.size(0), n = s.size(1), m = s.size(2), k = dense.size(2);
  RowMajor flat;
  if (s.layout() == at::kSparseCsr) {
    std::tie(flat.indices, flat.values) = block_diagonal_csr(s);
  } else {
    auto [indices, values] = coalesced_parts(s, differentiable_values(s));
    // still in row order
    flat.indices = at::stack({indices[0] * n + indices[1], indices[0] * m + indices[2]});
    flat.values = values;
  }
  flat.plain = flat.indices.select(0, 1);
  flat.size = {batch * n, batch * m};
  return plan_product(flat, dense.reshape({batch * m, k}), false, false).view({batch, n, k});
}

at::Tensor mv_kernel(const at::Tensor& s, const at::Tensor& vector) {
  TORCH_CHECK_VALUE(vector.dim() == 1, "torch_ragged.sparse.mv: expected a 1-D dense vector, got ",
                    python_shape(vector.sizes()));
  return mm_kernel(s, vector.unsqueeze(1), true).squeeze(1);
}

// torch.matmul with a sparse operand: matrix @ vector, vector @ matrix, matrix @ matrix (either
// side sparse, or both), a 3-D sparse batch @ a 3-D dense one.
at::Tensor matmul_kernel(const at::Tensor& a, const at::Tensor& b) {
  if (is_sparse(a) && a.dim() == 3) return bmm_kernel(a, b);
  if (b.dim() == 1 && is_sparse(a)) return mv_kernel(a, b);
  if (a.dim() == 1 && is_sparse(b)) return mm_kernel(a.unsqueeze(0), b, true).squeeze(0);
  return mm_kernel(a, b, true);
}

// torch.hspmm: S @ D as a hybrid sparse tensor (sparse_dim 1), one dense row of the product for
// every row of S holding an entry, coalesced.
at::Tensor hspmm_kernel(const at::Tensor& s, const at::Tensor& dense) {
  const at::Tensor product = mm_kernel(s, dense, true);
  const at::Tensor indices = row_major_parts("hspmm", s.detach(), true).first;
  // coalesced: the rows come sorted
  const at::Tensor rows = std::get<0>(at::unique_consecutive(indices[0].to(at::kLong)));
  return coo_tensor(rows.unsqueeze(0), product.index_select(0, rows), product.sizes(), true);
}

// torch.smm: S @ D as a sparse COO matrix holding every column of each row of S that has an entry
// (hspmm's rows spread over their columns), coalesced.
at::Tensor smm_kernel(const at::Tensor& s, const at::Tensor& dense) {
  const at::Tensor rows = hspmm_kernel(s, dense);
  const at::Tensor row_index = rows._indices()[0];
  const at::Tensor values = rows.values();  // coalesced: differentiable
  const int64_t columns = values.size(1);
  const at::Tensor indices =
      at::stack({row_index.repeat_interleave(columns),
                 at::arange(columns, row_index.options()).repeat({row_index.numel()})});
  return coo_tensor(indices, values.reshape({-1}), rows.sizes(), true);
}

// torch.sspaddmm: beta * input + alpha * (s @ dense) with a sparse input, as a sparse matrix (the
// union of input's pattern and smm's), coalesced.
at::Tensor sspaddmm_kernel(const at::Tensor& input, const at::Tensor& s, const at::Tensor& dense,
                           const at::Scalar& beta, const at::Scalar& alpha) {
  check_coo("sspaddmm", input);
  auto [indices, values] = coalesced_parts(input, differentiable_values(input));
  const at::Tensor scaled = coo_tensor(indices, values * beta, input.sizes(), true);
  return torch_ragged::sparse::add(scaled, smm_kernel(s, dense), alpha);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("sparse_mm.tensor(Tensor a, Tensor b, bool validate=True) -> Tensor", tags);
  m.def(
      "sparse_addmm(Tensor input, Tensor s, Tensor dense, *, Scalar beta=1, Scalar alpha=1) -> "
      "Tensor",
      tags);
  m.def("sparse_bmm(Tensor s, Tensor dense) -> Tensor", tags);
  m.def("sparse_mv(Tensor s, Tensor vector) -> Tensor", tags);
  m.def("sparse_matmul(Tensor a, Tensor b) -> Tensor", tags);
  m.def("sparse_hspmm(Tensor s, Tensor dense) -> Tensor", tags);
  m.def("sparse_smm(Tensor s, Tensor dense) -> Tensor", tags);
  m.def(
      "sparse_sspaddmm(Tensor input, Tensor s, Tensor dense, *, Scalar beta=1, Scalar alpha=1) -> "
      "Tensor",
      tags);
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("sparse_mm.tensor", &mm_kernel);
  m.impl("sparse_addmm", &addmm_kernel);
  m.impl("sparse_bmm", &bmm_kernel);
  m.impl("sparse_mv", &mv_kernel);
  m.impl("sparse_matmul", &matmul_kernel);
  m.impl("sparse_hspmm", &hspmm_kernel);
  m.impl("sparse_smm", &smm_kernel);
  m.impl("sparse_sspaddmm", &sspaddmm_kernel);
}

// ---- the C++ API ----

namespace sparse {

at::Tensor mm(const at::Tensor& a, const at::Tensor& b, bool validate) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, bool)>(
      "torch_ragged::sparse_mm", "tensor");
  return op.call(a, b, validate);
}

at::Tensor addmm(const at::Tensor& input, const at::Tensor& s, const at::Tensor& dense,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Scalar&, const at::Scalar&)>("torch_ragged::sparse_addmm");
  return op.call(input, s, dense, beta, alpha);
}

at::Tensor sspaddmm(const at::Tensor& input, const at::Tensor& s, const at::Tensor& dense,
                    const at::Scalar& beta, const at::Scalar& alpha) {
  static const auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Scalar&, const at::Scalar&)>("torch_ragged::sparse_sspaddmm");
  return op.call(input, s, dense, beta, alpha);
}

#define TORCH_RAGGED_PRODUCT(name)                                                      \
  at::Tensor name(const at::Tensor& a, const at::Tensor& b) {                           \
    static const auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&)>( \
        "torch_ragged::sparse_" #name);                                                 \
    return op.call(a, b);                                                               \
  }
TORCH_RAGGED_PRODUCT(bmm)
TORCH_RAGGED_PRODUCT(mv)
TORCH_RAGGED_PRODUCT(matmul)
TORCH_RAGGED_PRODUCT(hspmm)
TORCH_RAGGED_PRODUCT(smm)
#undef TORCH_RAGGED_PRODUCT

}  // namespace sparse

}  // namespace torch_ragged
