#pragma once

// torch sparse tensors in and out of the triplet ops: the layout checks with their errors by name,
// the values of a COO tensor connected to autograd, and the COO tensor a result is built as.
// Shared by the public sparse-tensor ops (sparse_tensor_ops.cpp) and accelerate.cpp.

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace torch_ragged {

// torch's name of a tensor's layout, as Python prints it ("torch.sparse_coo", "torch.strided").
std::string layout_name(const at::Tensor& tensor);

// TypeError "torch_ragged.sparse.<op>: expected a sparse COO tensor, got <layout>" unless s is one.
void check_coo(const char* op, const at::Tensor& s);

// A COO tensor of int64 indices (int32 ones widened, as torch requires), flagged coalesced as told:
// no check of the indices (the ops that built them checked them). Differentiable in values.
at::Tensor coo_tensor(const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef size,
                      bool coalesced);

// s's values, connected to the autograd graph when s requires grad: torch's values() refuses an
// uncoalesced tensor and _values() cuts the graph. For an uncoalesced s the gradient is a sparse
// tensor over its unique indices: the ops here are functions of the tensor's elements, so
// duplicates get equal gradients, and torch's sparse_coo_tensor backward hands each its own.
at::Tensor differentiable_values(const at::Tensor& s);

// A compressed (CSR / CSC / BSR / BSC) tensor's values, connected to autograd when s requires grad.
at::Tensor compressed_values(const at::Tensor& s);

// torch.sparse.sum's result from sparse_sum's (indices, values) of s summed over dim (absent: all):
// the dense tensor when every sparse dim was reduced, else a coalesced COO tensor of the kept dims.
at::Tensor sparse_sum_result(const at::Tensor& s, const at::Tensor& indices,
                             const at::Tensor& values, at::OptionalIntArrayRef dim);

// (indices, values) of the COO tensor s coalesced, given s's values (differentiable or not): s's
// own where torch flags it coalesced, sparse_coalesce's otherwise (its errors by name).
std::pair<at::Tensor, at::Tensor> coalesced_parts(const at::Tensor& s, const at::Tensor& values);

// A shape as Python prints a tuple: "(2, 3)", "(5,)", "()".
std::string python_shape(at::IntArrayRef sizes);

// TypeError "torch_ragged.sparse.<op>: expected a sparse COO, CSR or CSC tensor, got <layout>".
void check_coo_or_compressed(const char* op, const at::Tensor& s);

// A 2-D CSR or CSC matrix A (plus dense dims) as the coalesced COO triplet of the matrix whose rows
// are its compressed dim: A's own entries for CSR, A's transpose's for CSC (transposed). No sort:
// the rows are the segment ids of the compressed offsets, the columns the plain indices as stored
// (torch's invariant: strictly rising in each row).
struct CompressedView {
  at::Tensor plain;           // col_indices / row_indices as stored (int32 kept)
  at::Tensor values;          // (nnz, *dense), connected to autograd
  std::vector<int64_t> size;  // (rows, cols, *dense) of the row-major view
  at::Tensor compressed;      // crow_indices / ccol_indices: the view's first_idx
  bool transposed;

  // (2, nnz) in the plain indices' dtype: each entry's compressed index, then its plain one. Built
  // on each call: callers that need only the offsets and the plain indices never pay for it.
  at::Tensor indices() const;
};

// A 2-D BSR / BSC matrix's block indices, (2, nnz blocks) in the plain indices' dtype: each
// block's (block row, block column), in stored order (segment_ids checks the compressed offsets).
at::Tensor block_indices(const at::Tensor& s);

// validate: torch's invariants of the indices (what check_invariants=True checks), in one pass and
// one host read, ValueError / IndexError naming op, the index tensor and the first entry off.
CompressedView compressed_view(const char* op, const at::Tensor& s, bool validate);

// (indices, values) of a 2-D sparse matrix coalesced in row-major order: COO (coalesced_parts of
// differentiable values), CSR (no sort) or CSC (one sort of the transposed entries).
std::pair<at::Tensor, at::Tensor> row_major_parts(const char* op, const at::Tensor& s,
                                                  bool validate);

// A CSR / CSC tensor of like's layout from its parts, unchecked (they come from one that was).
at::Tensor compressed_like(const at::Tensor& like, const at::Tensor& compressed,
                           const at::Tensor& plain, const at::Tensor& values);

// The CSR offsets (num_rows + 1) of sorted row ids, int32 when out_int32. A COO tensor flagged
// coalesced without its invariants checked may hold rows out of order or out of range, which would
// make wrong offsets: refused by name, "torch_ragged.sparse.<op>: ..." (one pass, one host read; a
// runtime assertion while tracing).
at::Tensor row_offsets(const char* op, const at::Tensor& rows, int64_t num_rows, bool out_int32);

// The index dtype a conversion or product keeps: a CSR / CSC tensor's compressed indices', else
// int64.
at::ScalarType index_dtype(const at::Tensor& x);

}  // namespace torch_ragged
