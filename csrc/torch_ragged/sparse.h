#pragma once

// Sparse COO on the segment core. The functions take COO triplets — indices (sparse_dim, nnz)
// int32 or int64 (kept as given), values (nnz, *dense sizes), size (sparse sizes, then dense
// sizes) — so no sparse layout is needed; coalesce() also takes a torch sparse COO tensor.
// Everything is deterministic and differentiable with respect to the values.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/string_view.h>
#include <torch_ragged/export.h>

#include <optional>
#include <tuple>

namespace torch_ragged {

// (indices, values, permutation, first_idx): indices unique and sorted lexicographically,
// duplicates' values summed in a fixed order (input order within a chunk of the segment core's
// reduction tree, a long run's chunk partials merged left to right); permutation (nnz,) maps each
// sorted position to its input entry and first_idx (unique + 1,) cuts the sorted positions into the
// runs that were summed. Input already sorted costs no sort. validate: indices out of range raise
// IndexError. return_order = false: permutation and first_idx come back empty (input already
// coalesced then costs about a copy of its indices and values).
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_coalesce(
    const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef size, bool validate = true,
    bool return_order = true);

// A torch sparse COO tensor, coalesced by sparse_coalesce.
TORCH_RAGGED_API at::Tensor coalesce(const at::Tensor& sparse);

// torch.sparse.sum over `dim` (all dims when absent): a coalesced triplet over the kept dims; when
// every sparse dim is reduced, indices is (0, 1) and values (1, *kept dense sizes) holds the dense
// result.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> sparse_sum(
    const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef size,
    at::OptionalIntArrayRef dim = std::nullopt, bool validate = true);

// The values of `dense` at `indices`: (nnz, *dense.shape[sparse_dim:]).
TORCH_RAGGED_API at::Tensor sparse_mask(const at::Tensor& dense, const at::Tensor& indices,
                                        bool validate = true);

// The dense tensor of a triplet, duplicates summed.
TORCH_RAGGED_API at::Tensor sparse_to_dense(const at::Tensor& indices, const at::Tensor& values,
                                            at::IntArrayRef size, bool validate = true);

// The entries of `dense` that are not exactly zero (over the dense dims: any value), coalesced,
// int64 indices. sparse_dim: dense.dim() when absent.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> sparse_from_dense(
    const at::Tensor& dense, std::optional<int64_t> sparse_dim = std::nullopt);

// index_select along `dim` (sparse or dense); for a sparse dim, entries whose index appears k times
// in `index` appear k times, renumbered.
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor> sparse_index_select(const at::Tensor& indices,
                                                                        const at::Tensor& values,
                                                                        at::IntArrayRef size,
                                                                        int64_t dim,
                                                                        const at::Tensor& index);

// torch.sparse.softmax / log_softmax along `dim` (sparse or dense) of a *coalesced* triplet: the
// values, in the same order. Unspecified entries count as -inf; half / bfloat16 accumulate in
// float; deterministic; twice differentiable.
TORCH_RAGGED_API at::Tensor sparse_softmax(const at::Tensor& indices, const at::Tensor& values,
                                           at::IntArrayRef size, int64_t dim, bool log = false);

// The same for a torch sparse COO tensor (coalesced first, duplicates summed, as torch does).
TORCH_RAGGED_API at::Tensor softmax(const at::Tensor& sparse, int64_t dim, bool log = false);

// The reusable structure of a coalesced 2-D S (n, m) for products: (row_first_idx (n + 1),
// col_first_idx (m + 1), col_order (entries by column, stable), row_order (its inverse)).
TORCH_RAGGED_API std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_mm_plan(
    const at::Tensor& indices, at::IntArrayRef size);

// S @ dense (transpose: Sᵀ @ dense) for S's coalesced indices, values and plan. Backward to dense
// through the plan's column order, to values an SDDMM: never a dense n x m matrix. validate checks
// that the plan was built for these indices (O(nnz); a few host reads on a GPU).
TORCH_RAGGED_API at::Tensor sparse_mm(
    const at::Tensor& values, const at::Tensor& dense, const at::Tensor& indices,
    const std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>& plan, bool transpose = false,
    bool validate = true);

// A torch sparse COO matrix times a dense matrix (coalesced and planned on the way).
TORCH_RAGGED_API at::Tensor mm(const at::Tensor& sparse, const at::Tensor& dense);

// Runs torch's own sparse COO ops on this library's kernels while enabled, on the CPU and CUDA:
// coalesce (aten::_coalesce), to_dense, torch.sparse.softmax / log_softmax and their backwards,
// torch.sparse.sum over dims, mm / addmm / bmm with a sparse operand, index_select and sparse_mask.
// torch's autograd formulas stay in charge of gradients; inputs these kernels do not take go to
// torch's own kernel. Returns whether it was enabled before (to restore it). The first call with
// true registers the kernels once, for the life of the process (make it before other threads call
// torch's sparse ops); then on / off is a process-wide flag the kernels read: safe to toggle while
// other threads call these ops, and seen by every thread (autograd's backward threads included).
TORCH_RAGGED_API bool accelerate_torch_sparse(bool enabled = true);

// Whether accelerate_torch_sparse is in effect.
TORCH_RAGGED_API bool torch_sparse_accelerated();

// The functions of torch_ragged.sparse on torch sparse tensors, by their Python names. Each calls
// its registered op (torch_ragged::sparse_<name>) through the dispatcher: autograd, every device.
namespace sparse {

// torch.<name>(s) of a sparse COO tensor: the function of its values on its pattern (each maps 0 to
// 0). neg keeps the entries as they are (and the coalesced flag); the others sum duplicates first
// (the result is coalesced), as torch does.
TORCH_RAGGED_API at::Tensor neg(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor abs(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor asin(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor asinh(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor atan(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor atanh(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor ceil(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor deg2rad(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor erf(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor erfinv(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor expm1(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor floor(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor frac(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor log1p(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor rad2deg(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor relu(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor round(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor sgn(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor sign(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor signbit(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor sin(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor sinh(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor sqrt(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor square(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor tan(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor tanh(const at::Tensor& s);
TORCH_RAGGED_API at::Tensor trunc(const at::Tensor& s);

// torch.pow(s, exponent) for a positive exponent (ValueError otherwise), duplicates summed first.
TORCH_RAGGED_API at::Tensor pow(const at::Tensor& s, const at::Scalar& exponent);

// s.coalesce(): indices unique and sorted, duplicates summed in a fixed order (sparse_coalesce);
// differentiable in s's values, also from an uncoalesced s.
TORCH_RAGGED_API at::Tensor coalesce(const at::Tensor& s, bool validate = true);

// s.to_dense() of a COO (duplicates summed in a fixed order), CSR, CSC, BSR or BSC tensor.
TORCH_RAGGED_API at::Tensor to_dense(const at::Tensor& s, bool validate = true);

// torch.sparse.sum(s, dim) of a COO, CSR or CSC tensor: a coalesced COO tensor over the kept dims,
// or a dense one when every sparse dim is reduced (dim absent: all dims, a 0-d tensor).
TORCH_RAGGED_API at::Tensor sum(const at::Tensor& s, at::OptionalIntArrayRef dim = std::nullopt,
                                bool validate = true);

// torch.sparse.softmax / log_softmax(s, dim, dtype) of a COO tensor (coalesced first) or a CSR /
// CSC matrix (a result of its layout).
TORCH_RAGGED_API at::Tensor softmax(const at::Tensor& s, int64_t dim,
                                    std::optional<at::ScalarType> dtype = std::nullopt);
TORCH_RAGGED_API at::Tensor log_softmax(const at::Tensor& s, int64_t dim,
                                        std::optional<at::ScalarType> dtype = std::nullopt);

// s.unsqueeze(dim): a new sparse dim (an index row of zeros) or dense dim; the flag kept.
TORCH_RAGGED_API at::Tensor unsqueeze(const at::Tensor& s, int64_t dim);

// s.select(dim, index): along a sparse dim the entries there without that dim (the dense sum of
// them when it was the only sparse dim), along a dense dim the values' slice; the flag kept.
TORCH_RAGGED_API at::Tensor select(const at::Tensor& s, int64_t dim, int64_t index);

// s.narrow_copy(dim, start, length): the entries in [start, start + length) along a sparse dim,
// renumbered, or the values' slice along a dense dim; the flag kept.
TORCH_RAGGED_API at::Tensor narrow_copy(const at::Tensor& s, int64_t dim, int64_t start,
                                        int64_t length);

// s.permute(dims), s.transpose(dim0, dim1), s.t(): sparse dims relabelled as torch's (entries in
// place, flagged uncoalesced unless empty), dense dims moved in the values (flag kept); a sparse
// dim never moves among the dense ones.
TORCH_RAGGED_API at::Tensor permute(const at::Tensor& s, at::IntArrayRef dims);
TORCH_RAGGED_API at::Tensor transpose(const at::Tensor& s, int64_t dim0, int64_t dim1);
TORCH_RAGGED_API at::Tensor t(const at::Tensor& s);

// s.index_select(dim, index) along a sparse or dense dim; repeated positions repeat entries
// (uncoalesced result).
TORCH_RAGGED_API at::Tensor index_select(const at::Tensor& s, int64_t dim, const at::Tensor& index);

// dense.to_sparse(sparse_dim): the entries that are not exactly zero, a coalesced COO tensor
// (sparse_dim: the leading dims made sparse; absent: all of them).
TORCH_RAGGED_API at::Tensor to_sparse(const at::Tensor& dense,
                                      std::optional<int64_t> sparse_dim = std::nullopt);

// dense.sparse_mask(mask): dense's values at mask's indices (mask's values ignored), in mask's
// layout (COO, CSR or CSC) and structure. The op is torch_ragged::sparse_sparse_mask (sparse_mask
// names the triplet op).
TORCH_RAGGED_API at::Tensor sparse_mask(const at::Tensor& dense, const at::Tensor& mask,
                                        bool validate = true);

// x.to_sparse() / to_sparse_csr() / to_sparse_csc() of a dense matrix or a sparse COO / CSR / CSC
// tensor: duplicates summed in a fixed order; a tensor of the layout asked for (COO: coalesced) is
// returned as it is, its indices checked first when validate (torch's invariants of the layout).
TORCH_RAGGED_API at::Tensor to_sparse_coo(const at::Tensor& x, bool validate = true);
TORCH_RAGGED_API at::Tensor to_sparse_csr(const at::Tensor& x, bool validate = true);
TORCH_RAGGED_API at::Tensor to_sparse_csc(const at::Tensor& x, bool validate = true);

// torch.cat / torch.stack of sparse COO tensors, as torch's: the entries one after another, flagged
// uncoalesced -- except along dim 0 of coalesced tensors (sorted already: flagged coalesced).
TORCH_RAGGED_API at::Tensor cat(at::TensorList tensors, int64_t dim = 0);
TORCH_RAGGED_API at::Tensor stack(at::TensorList tensors, int64_t dim = 0);

// torch.add / sub(a, b, alpha) of two sparse COO tensors of one shape: the union of their patterns,
// each index's values summed in a fixed order (a's, then alpha * b's), coalesced; one operand
// dense: a dense result.
TORCH_RAGGED_API at::Tensor add(const at::Tensor& a, const at::Tensor& b,
                                const at::Scalar& alpha = 1);
TORCH_RAGGED_API at::Tensor sub(const at::Tensor& a, const at::Tensor& b,
                                const at::Scalar& alpha = 1);

// torch.mul: two sparse tensors (the intersection of their patterns), a sparse and a dense one of
// its shape (the sparse one's pattern), or a scalar (a 0-d tensor, or the Scalar overload: the
// entries scaled, the flag kept).
TORCH_RAGGED_API at::Tensor mul(const at::Tensor& a, const at::Tensor& b);
TORCH_RAGGED_API at::Tensor mul(const at::Tensor& s, const at::Scalar& other);

// s / divisor for a scalar divisor (rounding_mode: "trunc", "floor" or none, as torch.div).
TORCH_RAGGED_API at::Tensor div(const at::Tensor& s, const at::Scalar& divisor,
                                std::optional<c10::string_view> rounding_mode = std::nullopt);

// The products, as torch's: mm of sparse @ dense, dense @ sparse (COO, CSR, CSC, BSR, BSC) or
// sparse
// @ sparse (COO when both are COO, CSC when both are CSC, else CSR); addmm (beta * input + alpha *
// s @ dense, input dense); bmm of a 3-D COO or batched CSR; mv; matmul (either side sparse,
// vectors, batches); hspmm (a hybrid result, one dense row per row of s holding an entry); smm
// (those rows as a COO matrix); sspaddmm (a sparse input plus smm's, coalesced). validate: check
// the sparse operands' indices first.
TORCH_RAGGED_API at::Tensor mm(const at::Tensor& a, const at::Tensor& b, bool validate = true);
TORCH_RAGGED_API at::Tensor addmm(const at::Tensor& input, const at::Tensor& s,
                                  const at::Tensor& dense, const at::Scalar& beta = 1,
                                  const at::Scalar& alpha = 1);
TORCH_RAGGED_API at::Tensor bmm(const at::Tensor& s, const at::Tensor& dense);
TORCH_RAGGED_API at::Tensor mv(const at::Tensor& s, const at::Tensor& vector);
TORCH_RAGGED_API at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);
TORCH_RAGGED_API at::Tensor hspmm(const at::Tensor& s, const at::Tensor& dense);
TORCH_RAGGED_API at::Tensor smm(const at::Tensor& s, const at::Tensor& dense);
TORCH_RAGGED_API at::Tensor sspaddmm(const at::Tensor& input, const at::Tensor& s,
                                     const at::Tensor& dense, const at::Scalar& beta = 1,
                                     const at::Scalar& alpha = 1);

}  // namespace sparse

}  // namespace torch_ragged
