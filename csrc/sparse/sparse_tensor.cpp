// torch sparse tensors in and out of the triplet ops (sparse_tensor.h).

#include "sparse/sparse_tensor.h"

#include <ATen/Parallel.h>
#include <ATen/WrapDimUtils.h>
#include <torch/autograd.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/parallel.h"
#include "segment/segment_ops.h"
#include "sparse/sparse_args.h"
#include "sparse/sparse_ops.h"

namespace torch_ragged {

std::string layout_name(const at::Tensor& tensor) {
  switch (tensor.layout()) {
    case at::kStrided:
      return "torch.strided";
    case at::kSparse:
      return "torch.sparse_coo";
    case at::kSparseCsr:
      return "torch.sparse_csr";
    case at::kSparseCsc:
      return "torch.sparse_csc";
    case at::kSparseBsr:
      return "torch.sparse_bsr";
    case at::kSparseBsc:
      return "torch.sparse_bsc";
    case at::kJagged:
      return "torch.jagged";
    default:
      return "torch._mkldnn";
  }
}

void check_coo(const char* op, const at::Tensor& s) {
  TORCH_CHECK_TYPE(s.layout() == at::kSparse, "torch_ragged.sparse.", op,
                   ": expected a sparse COO tensor, got ", layout_name(s));
}

at::Tensor coo_tensor(const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef size,
                      bool coalesced) {
  return at::_sparse_coo_tensor_unsafe(indices.to(at::kLong), values, size,
                                       values.options().layout(at::kSparse), coalesced);
}

namespace {

// The values of an uncoalesced tensor, differentiably (differentiable_values).
struct UncoalescedValues : torch::autograd::Function<UncoalescedValues> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& s) {
    keep_undefined_grads(ctx);  // an undefined gradient stays None (not a sparse zero)
    ctx->save_for_backward({s._indices()});
    ctx->saved_data["size"] = s.sizes().vec();
    return s._values().clone();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (all_undefined(grads)) return {at::Tensor()};
    const at::Tensor& grad = grads[0];
    const std::vector<int64_t> size = ctx->saved_data["size"].toIntVector();
    auto [unique, summed, permutation, first_idx] = ops::sparse_coalesce(
        ctx->get_saved_variables()[0], grad, c10::fromIntArrayRefSlow(size), false, true);
    // every duplicate's gradient is the same: the first of each run stands for its index
    const at::Tensor first_of_run = permutation.index_select(0, first_idx.slice(0, 0, -1));
    return {coo_tensor(unique, grad.index_select(0, first_of_run), size, true)};
  }
};

}  // namespace

at::Tensor differentiable_values(const at::Tensor& s) {
  if (!(s.requires_grad() && at::GradMode::is_enabled())) return s._values();
  return s.is_coalesced() ? s.values() : UncoalescedValues::apply(s);
}

at::Tensor compressed_values(const at::Tensor& s) {
  const bool differentiable = s.requires_grad() && at::GradMode::is_enabled();
  return differentiable ? s.values() : s.values().detach();
}

at::Tensor sparse_sum_result(const at::Tensor& s, const at::Tensor& indices,
                             const at::Tensor& values, at::OptionalIntArrayRef dim) {
  if (indices.size(0) == 0) return values[0];  // every sparse dim reduced: dense
  std::vector<bool> reduced(s.dim(), !dim.has_value());
  if (dim.has_value()) {
    for (const int64_t d : *dim) reduced[at::maybe_wrap_dim(d, s.dim())] = true;
  }
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < s.dim(); ++d) {
    if (!reduced[d]) kept.push_back(s.size(d));
  }
  return coo_tensor(indices, values, kept, true);
}

std::pair<at::Tensor, at::Tensor> coalesced_parts(const at::Tensor& s, const at::Tensor& values) {
  if (s.is_coalesced()) return {s._indices(), values};
  auto [indices, summed, permutation, first_idx] =
      ops::sparse_coalesce(s._indices(), values, s.sym_sizes(), true, false);
  return {indices, summed};
}

std::string python_shape(at::IntArrayRef sizes) {
  std::string text = "(";
  for (size_t d = 0; d < sizes.size(); ++d) {
    text += (d ? ", " : "") + std::to_string(sizes[d]);
  }
  return text + (sizes.size() == 1 ? ",)" : ")");
}

void check_coo_or_compressed(const char* op, const at::Tensor& s) {
  const at::Layout layout = s.layout();
  TORCH_CHECK_TYPE(layout == at::kSparse || layout == at::kSparseCsr || layout == at::kSparseCsc,
                   "torch_ragged.sparse.", op, ": expected a sparse COO, CSR or CSC tensor, got ",
                   layout_name(s));
}

namespace {

// The kinds of sparse_compressed_violation (docs/sparse.md): 1-3 the offsets, 4 a plain index out
// of range, 5 one not above the entry before it in its slice; 0 none.
void check_compressed_invariants(const char* op, const at::Tensor& s, const CompressedView& view) {
  const at::Tensor found =
      ops::sparse_compressed_violation(view.compressed, view.plain, view.size[1]);
  const at::Tensor host = found.cpu();
  const int64_t* violation = host.data_ptr<int64_t>();
  const int64_t kind = violation[0], where = violation[1], value = violation[2];
  if (kind == 0) return;
  const char* compressed_name = view.transposed ? "ccol_indices" : "crow_indices";
  const char* plain_name = view.transposed ? "row_indices" : "col_indices";
  const std::string of = "of a " + layout_name(s) + " tensor of shape " + python_shape(s.sizes());
  const std::string prefix = std::string("torch_ragged.sparse.") + op + ": ";
  TORCH_CHECK_INDEX(kind != 4, prefix, plain_name, "[", where, "] = ", value,
                    " is out of range for the ", view.size[1],
                    view.transposed ? " rows " : " columns ", of);
  TORCH_CHECK_VALUE(kind != 1, prefix, "the ", compressed_name, " ", of, " must start at 0, got ",
                    value);
  TORCH_CHECK_VALUE(kind != 2, prefix, "the ", compressed_name, " ", of,
                    " must not decrease: ", compressed_name, "[", where, "] = ", value,
                    " is below the offset before it");
  TORCH_CHECK_VALUE(kind != 3, prefix, "the ", compressed_name, " ", of,
                    " must end at nnz = ", view.plain.numel(), ", got ", value);
  TORCH_CHECK_VALUE(
      false, prefix, "the ", plain_name, " ", of,
      " must be strictly increasing within each compressed slice (torch's invariant): ", plain_name,
      "[", where, "] = ", value, " is not above the entry before it");
}

// The (2, nnz) int64 indices of a CPU compressed view with int64 offsets and plain indices, written
// in one pass with torch's invariants checked as they go (each entry's compressed index from the
// offsets, its plain index in range and above the one before it in its slice): no (nnz,) ids
// allocated and stacked, and no second read of the plain indices to check them. nullopt where the
// view does not qualify or an invariant breaks (callers then take the general route, which names
// the break).
std::optional<at::Tensor> checked_compressed_indices(const CompressedView& view) {
  const at::Tensor &compressed = view.compressed, &plain = view.plain;
  if (!compressed.is_cpu() || is_symbolic(compressed) || is_symbolic(plain) ||
      compressed.scalar_type() != at::kLong || plain.scalar_type() != at::kLong ||
      !compressed.is_contiguous() || !plain.is_contiguous()) {
    return std::nullopt;
  }
  const int64_t rows = compressed.numel() - 1, nnz = plain.numel(), cols = view.size[1];
  const int64_t* offset = compressed.const_data_ptr<int64_t>();
  bool offsets_ok = offset[0] == 0 && offset[rows] == nnz;
  for (int64_t r = 0; r < rows; ++r) offsets_ok &= offset[r + 1] >= offset[r];
  if (!offsets_ok) return std::nullopt;
  at::Tensor out = at::empty({2, nnz}, plain.options());
  int64_t *row_of = out.mutable_data_ptr<int64_t>(), *col_of = row_of + nnz;
  const int64_t* col = plain.const_data_ptr<int64_t>();
  std::atomic<bool> broken{false};
  at::parallel_for(0, nnz, kGrainElems, [&](int64_t begin, int64_t end) {
    int64_t r = std::upper_bound(offset, offset + rows + 1, begin) - offset - 1;  // begin's row
    bool ok = true;
    for (int64_t p = begin; p < end; ++p) {
      while (offset[r + 1] <= p) ++r;  // past empty rows
      const int64_t c = col[p];
      ok &= static_cast<uint64_t>(c) < static_cast<uint64_t>(cols);
      ok &= p == offset[r] || c > col[p - 1];
      row_of[p] = r;
      col_of[p] = c;
    }
    if (!ok) broken = true;
  });
  if (broken) return std::nullopt;
  return out;
}

}  // namespace

at::Tensor CompressedView::indices() const {
  if (std::optional<at::Tensor> written = checked_compressed_indices(*this)) return *written;
  // segment_ids checks the offsets: from 0, rising, to nnz
  const at::Tensor rows = ops::segment_ids(compressed, plain.sym_numel());
  return at::stack({rows.to(plain.scalar_type()), plain});
}

at::Tensor block_indices(const at::Tensor& s) {
  const bool row_compressed = s.layout() == at::kSparseBsr;
  const at::Tensor compressed = row_compressed ? s.crow_indices() : s.ccol_indices();
  const at::Tensor plain = row_compressed ? s.col_indices() : s.row_indices();
  const at::Tensor segments =
      ops::segment_ids(compressed, plain.sym_numel()).to(plain.scalar_type());
  return row_compressed ? at::stack({segments, plain}) : at::stack({plain, segments});
}

CompressedView compressed_view(const char* op, const at::Tensor& s, bool validate) {
  const int64_t batch_dims = s.dim() - s.dense_dim() - 2;
  TORCH_CHECK_VALUE(batch_dims == 0, "torch_ragged.sparse.", op, ": expected a 2-D ",
                    layout_name(s), " matrix (plus dense dims), got shape ",
                    python_shape(s.sizes()), " with ", batch_dims, " batch dim(s)");
  CompressedView view;
  view.transposed = s.layout() == at::kSparseCsc;
  view.compressed = view.transposed ? s.ccol_indices() : s.crow_indices();
  view.plain = view.transposed ? s.row_indices() : s.col_indices();
  view.size = s.sizes().vec();
  if (view.transposed) std::swap(view.size[0], view.size[1]);
  TORCH_CHECK_VALUE(view.compressed.numel() == view.size[0] + 1, "torch_ragged.sparse.", op,
                    ": the compressed indices of a ", layout_name(s), " tensor of shape ",
                    python_shape(s.sizes()), " must hold ", view.size[0] + 1, " offsets, got ",
                    view.compressed.numel());
  if (validate) check_compressed_invariants(op, s, view);
  view.values = compressed_values(s);
  return view;
}

std::pair<at::Tensor, at::Tensor> row_major_parts(const char* op, const at::Tensor& s,
                                                  bool validate) {
  if (s.layout() == at::kSparse) return coalesced_parts(s, differentiable_values(s));
  if (validate && s.layout() == at::kSparseCsr) {  // checked as the indices are written
    const CompressedView view = compressed_view(op, s, false);
    if (std::optional<at::Tensor> indices = checked_compressed_indices(view)) {
      return {*indices, view.values};
    }
  }
  const CompressedView view = compressed_view(op, s, validate);
  if (!view.transposed) return {view.indices(), view.values};
  auto [indices, values, permutation, first_idx] =
      ops::sparse_coalesce(view.indices().flip(0), view.values, s.sym_sizes(), false, false);
  return {indices, values};
}

at::Tensor compressed_like(const at::Tensor& like, const at::Tensor& compressed,
                           const at::Tensor& plain, const at::Tensor& values) {
  return at::sparse_compressed_tensor(compressed, plain, values, like.sizes(),
                                      values.options().layout(like.layout()));
}

at::Tensor row_offsets(const char* op, const at::Tensor& rows, int64_t num_rows, bool out_int32) {
  // built only where needed: a string costs a good part of a small product's call
  const auto message = [&] {
    return std::string("torch_ragged.sparse.") + op +
           ": the sparse operand's row indices are out of order or out of range for " +
           std::to_string(num_rows) + " rows (a tensor flagged coalesced that is not?)";
  };
  if (is_symbolic(rows)) {
    // no branch on the (unbacked) number of rows: slices, not narrow
    const at::Tensor fits = rows.ge(0)
                                .logical_and(rows.lt(num_rows))
                                .all()
                                .logical_and(rows.slice(0, 1).ge(rows.slice(0, 0, -1)).all());
    at::_assert_async(fits, message());
    return at::_convert_indices_from_coo_to_csr(rows, num_rows, out_int32);
  }
  // the op's kernel called directly: a dispatch costs a good part of a small product
  const std::optional<at::Tensor> offsets =
      checked_row_offsets(std::string("sparse.") + op, rows, num_rows);
  TORCH_CHECK_VALUE(offsets.has_value(), message());
  return out_int32 ? offsets->to(at::kInt) : *offsets;
}

at::ScalarType index_dtype(const at::Tensor& x) {
  if (x.layout() == at::kSparseCsr) return x.crow_indices().scalar_type();
  if (x.layout() == at::kSparseCsc) return x.ccol_indices().scalar_type();
  return at::kLong;
}

}  // namespace torch_ragged
