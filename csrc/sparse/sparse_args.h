#pragma once

// Argument checks of the sparse ops (COO triplets: indices (sparse_dim, nnz) int32 / int64, values
// (nnz, *dense sizes), size = sparse sizes + dense sizes), shared by their CPU and CUDA kernels.

#include <ATen/ATen.h>

#include <optional>
#include <string_view>
#include <vector>

#include "sparse/sparse_index.h"

namespace torch_ragged {

// The checked shape of a COO triplet.
struct SparseShape {
  int64_t sparse_dim = 0;
  c10::SymInt nnz;  // symbolic under torch.compile (a coalesced tensor's nnz is data-dependent)
  std::vector<int64_t> size;  // sparse sizes, then dense sizes
  std::vector<int64_t> sparse_sizes() const;
  std::vector<int64_t> dense_sizes() const;
};

// indices: 2-D int32 / int64; size: non-negative, at least sparse_dim entries; values: nnz rows
// and size[sparse_dim:] as its other dims. ValueError / TypeError naming op and argument.
SparseShape check_sparse_args(std::string_view op, const at::Tensor& indices,
                              const at::Tensor& values, c10::SymIntArrayRef size);

// indices alone (2-D, int32 / int64) against its sparse sizes.
void check_indices(std::string_view op, const at::Tensor& indices, int64_t sparse_dim);

// The key geometry of sparse sizes, or nullopt when a flattened key would not fit in int64 (or
// there are more than kMaxKeyDims sparse dims).
std::optional<KeyGeometry> key_geometry(at::IntArrayRef sparse_sizes);

// The concrete sizes of argument `arg`, each checked >= 0 (ValueError naming op and arg).
std::vector<int64_t> nonnegative_sizes(std::string_view op, std::string_view arg,
                                       c10::SymIntArrayRef sizes);

// dim in [-ndim, ndim) (IndexError naming op), as a non-negative index.
int64_t normalized_dim(std::string_view op, int64_t dim, int64_t ndim);

// sparse_flat_keys' arguments checked: indices (len(sparse_size), nnz), a key that fits int64.
KeyGeometry checked_key_geometry(std::string_view op, const at::Tensor& indices,
                                 c10::SymIntArrayRef sparse_size);

// sparse_compressed_violation's answer: what breaks a compressed tensor's invariants first (a
// CompressedViolation kind, kCompressedValid for none), where (the offset's or the entry's
// position) and the value found there; as a (3,) int64 CPU tensor for the op.
struct CompressedFinding {
  int64_t kind = kCompressedValid, position = 0, value = 0;
  at::Tensor as_tensor() const;
};

// sparse_compressed_violation's arguments: compressed 1-D integer with at least one offset, plain
// 1-D integer on its device, plain_size >= 0. Returns plain_size as an int.
int64_t check_compressed_args(const at::Tensor& compressed, const at::Tensor& plain,
                              const c10::SymInt& plain_size);

// The offsets' kinds (start at 0, never fall, end at nnz), read from a CPU copy of them.
CompressedFinding offsets_violation(const at::Tensor& compressed_on_cpu, int64_t nnz);

// The finding at entry p, which compressed_entry_violation flagged: out of range, or else not
// rising (plain[p] read on the host).
CompressedFinding entry_finding(const at::Tensor& plain, int64_t plain_size, int64_t p);

// IndexError for the first entry (smallest column) of indices with an index outside its size.
// Every index of every sparse dim in [0, size): IndexError naming the first entry out of range
// (a min and a max pass and a host read; skipped while tracing).
void check_every_sparse_dim(std::string_view op, const at::Tensor& indices,
                            const SparseShape& shape);

// index values must lie in [-size, size) along a sparse dim (negative ones count from the end, as
// torch's sparse index_select) and in [0, size) along a dense dim (torch's dense index_select
// refuses negative ones): read on the host, or asserted on the device while tracing. IndexError
// naming op, dim and the values found.
void check_index_values(std::string_view op, const at::Tensor& index, int64_t dim, int64_t size,
                        bool negative_allowed);

[[noreturn]] void raise_out_of_range(std::string_view op, const at::Tensor& indices,
                                     at::IntArrayRef sparse_sizes);

// sparse_index_select's index work on the CPU, for int64 indices (sparse_dim, nnz) and positions
// along sparse dim `dim` (int64, each in [0, size)): entry e yields one output entry per position p
// with positions[p] == indices[dim, e], in the order of e, then p. Returns the output's indices and
// each output entry's source entry (a counting sort of the positions; two passes over the entries).
std::pair<at::Tensor, at::Tensor> index_select_entries_cpu(std::string_view op,
                                                           const at::Tensor& indices, int64_t dim,
                                                           const at::Tensor& positions,
                                                           int64_t size);

// dense's values at each entry's index tuple of a CPU int64 (sparse_dim, nnz) index tensor:
// (nnz, *dense.sizes()[sparse_dim:]), read in place at dense's strides in one parallel pass (no
// key array, no gather). nullopt where the dense dims are not one block in memory or an index lies
// outside its size (nothing is read there): the caller's checked route takes over. Not
// differentiable: for inputs that record no graph.
std::optional<at::Tensor> values_at_indices_cpu(const at::Tensor& dense, const at::Tensor& indices);

// Tensor.to_sparse's entries on the CPU, in one parallel pass that counts and one that writes
// (no bool tensor, no nonzero over it): the (dims, nnz) int64 indices of the positions over the
// first `dims` dims of dense holding a value that is not exactly zero (any of its dense values,
// NaN included), in row-major order, and those positions (nnz, int64) in the flattened
// (prod(sizes[:dims]), ...) view. dtype: one nonzero_positions_cpu_supports.
std::pair<at::Tensor, at::Tensor> nonzero_positions_cpu(const at::Tensor& dense, int64_t dims);
bool nonzero_positions_cpu_supports(at::ScalarType dtype);

// The CSR offsets (num_rows + 1, int64) of sorted row ids, or nullopt where some are out of order
// or outside [0, num_rows): one pass (the op sparse_row_offsets without the dispatcher). Offsets
// too large to hold raise ValueError naming op.
std::optional<at::Tensor> checked_row_offsets(std::string_view op, const at::Tensor& rows,
                                              int64_t num_rows);

// indices[:, columns] of a (d, nnz) index tensor, columns int64 (each in [0, nnz): IndexError
// otherwise). On the CPU one parallel loop reading each column's d indices together (torch's
// gather along dim 1 took 75-260 ms for 1e7 columns of a 2-row tensor, in order or not); elsewhere
// a gather along dim 1 (index_select along it copies element by element; one index_select per row
// is ~3x slower than the gather).
at::Tensor columns_of(const at::Tensor& indices, const at::Tensor& columns);

}  // namespace torch_ragged
