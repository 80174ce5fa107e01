// Schemas of the sparse family, its composite ops and its C++ API.
//
// The ops work on COO triplets — indices (sparse_dim, nnz) int32 or int64 (kept as given), values
// (nnz, *dense sizes), size — so C++ and TorchScript callers need no sparse layout; the Python
// wrappers (torch_ragged.sparse) take and return torch.sparse_coo_tensor. Two ops have kernels
// (sparse_flat_keys, sparse_coalesce: sparse_cpu.cpp, cuda/sparse_cuda.cu); the rest are
// compositions of them, the segment core and ATen, so they run on every device, differentiate, and
// trace for torch.compile through their parts.

#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch_ragged/sparse.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "segment/offsets.h"
#include "segment/segment_index.h"
#include "segment/segment_ops.h"
#include "sparse/sparse_args.h"
#include "sparse/sparse_index.h"
#include "sparse/sparse_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("sparse_flat_keys(Tensor indices, SymInt[] sparse_size, bool validate=True) -> Tensor",
        tags);
  m.def(
      "sparse_coalesce(Tensor indices, Tensor values, SymInt[] size, bool validate=True, "
      "bool return_order=True) -> "
      "(Tensor indices, Tensor values, Tensor permutation, Tensor first_idx)",
      tags);
  m.def(
      "sparse_sum(Tensor indices, Tensor values, SymInt[] size, int[]? dim=None, "
      "bool validate=True) -> (Tensor indices, Tensor values)",
      tags);
  m.def("sparse_mask(Tensor dense, Tensor indices, bool validate=True) -> Tensor", tags);
  m.def(
      "sparse_to_dense(Tensor indices, Tensor values, SymInt[] size, bool validate=True) -> "
      "Tensor",
      tags);
  m.def("sparse_from_dense(Tensor dense, int? sparse_dim=None) -> (Tensor indices, Tensor values)",
        tags);
  m.def(
      "sparse_index_select(Tensor indices, Tensor values, SymInt[] size, int dim, Tensor index) "
      "-> (Tensor indices, Tensor values)",
      tags);
  m.def(
      "sparse_softmax(Tensor indices, Tensor values, SymInt[] size, int dim, bool log=False) -> "
      "Tensor",
      tags);
  m.def("sparse_pool_sum(Tensor indices, Tensor values, SymInt[] size, int dim) -> Tensor", tags);
  m.def(
      "sparse_mm_plan(Tensor indices, SymInt[] size) -> (Tensor row_first_idx, "
      "Tensor col_first_idx, Tensor col_order, Tensor row_order)",
      tags);
  m.def(
      "sparse_mm(Tensor values, Tensor dense, Tensor indices, Tensor row_first_idx, "
      "Tensor col_first_idx, Tensor col_order, Tensor row_order, bool transpose=False, "
      "bool validate=True) -> Tensor",
      tags);
  m.def(
      "sparse_sddmm(Tensor a, Tensor b, Tensor indices, Tensor row_first_idx, "
      "Tensor col_first_idx, Tensor col_order, Tensor row_order, bool transpose=False, "
      "bool validate=True) -> Tensor",
      tags);
  m.def(
      "sparse_spgemm(Tensor a_indices, Tensor a_values, Tensor b_indices, Tensor b_values, "
      "SymInt[] a_size, SymInt[] b_size) -> (Tensor indices, Tensor values)",
      tags);
  // The same product of CSR operands, as CSR (the rows are the operands' offsets as stored; the
  // product's offsets and columns take a_crow_indices' dtype, int32 or int64). Offsets are checked
  // (from 0, never falling, to nnz) and columns in range; columns within a row need not be sorted.
  m.def(
      "sparse_spgemm_csr(Tensor a_crow_indices, Tensor a_col_indices, Tensor a_values, "
      "Tensor b_crow_indices, Tensor b_col_indices, Tensor b_values, SymInt[] a_size, "
      "SymInt[] b_size) -> (Tensor crow_indices, Tensor col_indices, Tensor values)",
      tags);
  // A CSR / CSC tensor's indices against torch's invariants (offsets from 0, never falling, to nnz;
  // plain indices in [0, plain_size), strictly rising in each slice): what breaks them first, as
  // (kind, position, value) on the CPU, kind 0 for none (CompressedViolation in sparse_index.h).
  m.def(
      "sparse_compressed_violation(Tensor compressed_indices, Tensor plain_indices, "
      "SymInt plain_size) -> Tensor",
      tags);
  // The CSR offsets (num_rows + 1, int64) of a coalesced matrix's row indices, checked sorted and
  // in range in the same pass (ValueError otherwise: torch's conversion would give wrong offsets or
  // write out of bounds).
  m.def("sparse_row_offsets(Tensor rows, SymInt num_rows) -> Tensor", tags);
  // The keys two coalesced tensors share: positions (n,) int64 in a_keys and in b_keys of the keys
  // found in both, rising. Both key lists must rise strictly (ValueError otherwise). The CPU walks
  // both lists once (a merge); other devices binary-search a's keys in b's.
  m.def(
      "sparse_intersect(Tensor a_keys, Tensor b_keys) -> (Tensor a_positions, Tensor b_positions)",
      tags);
}

// The ops with CPU / CUDA kernels (the rest are composites of them).
constexpr const char* kKernelOps[] = {"sparse_flat_keys",
                                      "sparse_coalesce",
                                      "sparse_softmax",
                                      "sparse_pool_sum",
                                      "sparse_spgemm",
                                      "sparse_spgemm_csr",
                                      "sparse_compressed_violation"};

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kKernelOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kKernelOps);
}

namespace {

using TensorPair = std::tuple<at::Tensor, at::Tensor>;

c10::SymDimVector as_symints(at::IntArrayRef sizes) {
  return c10::SymDimVector(sizes.begin(), sizes.end());
}

// The (prod(sparse sizes), *dense sizes) view of a dense tensor: one row per sparse position.
at::Tensor rows_of(const at::Tensor& dense, int64_t sparse_dim) {
  c10::SymInt rows = 1;
  for (int64_t d = 0; d < sparse_dim; ++d) rows = rows * dense.sym_size(d);
  c10::SymDimVector shape{rows};
  shape.insert(shape.end(), dense.sym_sizes().begin() + sparse_dim, dense.sym_sizes().end());
  return dense.reshape_symint(shape);
}

// Every index of every sparse dim lies in [0, size): IndexError naming op and the first entry out
// (one host read on a GPU). An entry of a dim that is reduced or selected must not be summed in.
// ---- sparse_sum: torch.sparse.sum over any dims ----

TensorPair sparse_sum_impl(const at::Tensor& indices, const at::Tensor& values,
                           c10::SymIntArrayRef size, at::OptionalIntArrayRef dim, bool validate) {
  constexpr std::string_view op = "sparse_sum";
  const SparseShape shape = check_sparse_args(op, indices, values, size);
  const int64_t ndim = static_cast<int64_t>(shape.size.size());
  std::vector<bool> reduced(ndim, !dim.has_value());
  if (dim.has_value()) {
    for (const int64_t d : *dim) {
      const int64_t k = normalized_dim(op, d, ndim);
      TORCH_CHECK_VALUE(!reduced[k], "torch_ragged.", op, ": dim ", k,
                        " appears more than once in dim ", *dim);
      reduced[k] = true;
    }
  }
  std::vector<int64_t> dense_dims, kept_sparse, out_size;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d >= shape.sparse_dim && reduced[d]) dense_dims.push_back(d - shape.sparse_dim + 1);
    if (d < shape.sparse_dim && !reduced[d]) kept_sparse.push_back(d);
    if (!reduced[d]) out_size.push_back(shape.size[d]);
  }
  at::Tensor summed = dense_dims.empty() ? values : values.sum(dense_dims);
  if (kept_sparse.empty()) {  // every sparse dim reduced: one entry, the dense result
    if (validate) check_every_sparse_dim(op, indices, shape);
    // A dense result: integers (bool included) sum to int64, as torch.sum and torch.sparse.sum.
    if (at::isIntegralType(summed.scalar_type(), /*includeBool=*/true))
      summed = summed.to(at::kLong);
    // first_idx [0, nnz]: built from the (possibly symbolic) nnz, on the CPU.
    const at::Tensor all_rows =
        at::cat({at::zeros({1}, at::kLong), at::full({1}, c10::Scalar(shape.nnz), at::kLong)});
    return {at::empty({0, 1}, indices.options()), ops::segment_sum(summed, all_rows)};
  }
  if (validate) check_every_sparse_dim(op, indices, shape);  // the reduced ones too
  std::vector<at::Tensor> kept_rows;  // (no index tensor from host data: it would not trace)
  for (const int64_t d : kept_sparse) kept_rows.push_back(indices.select(0, d));
  auto [out_indices, out_values, permutation, first_idx] = as_op(op, [&] {
    return ops::sparse_coalesce(at::stack(kept_rows), summed, as_symints(out_size),
                                /*validate=*/false, /*return_order=*/false);
  });
  return {out_indices, out_values};
}

// ---- sparse_mask: values of a dense tensor at indices ----

at::Tensor sparse_mask_impl(const at::Tensor& dense, const at::Tensor& indices, bool validate) {
  constexpr std::string_view op = "sparse_mask";
  check_defined(op, "dense", dense);
  check_defined(op, "indices", indices);
  check_index_device(op, "indices", indices, dense.device());
  TORCH_CHECK_VALUE(indices.dim() == 2 && indices.sym_size(0) <= dense.dim(), "torch_ragged.", op,
                    ": indices must be (sparse_dim, nnz) with sparse_dim <= dense.dim() = ",
                    dense.dim(), ", got shape ", indices.sym_sizes());
  const int64_t sparse_dim = indices.sym_size(0).guard_int(__FILE__, __LINE__);
  if (dense.is_cpu() && indices.is_cpu() && !is_symbolic(dense) && !is_symbolic(indices) &&
      !records_graph(dense)) {
    if (std::optional<at::Tensor> values = values_at_indices_cpu(dense, indices)) return *values;
  }
  const at::Tensor keys = as_op(op, [&] {
    return ops::sparse_flat_keys(indices, dense.sym_sizes().slice(0, sparse_dim), validate);
  });
  return rows_of(dense, sparse_dim).index_select(0, keys);
}

// ---- sparse_to_dense: every dense position sums its entries, in a fixed order ----

// Each position's entries are added in the reduction tree's order over a stable sort by position,
// so the result is bitwise reproducible (index_put's accumulate alone is not, with several CPU
// threads), with O(nnz) scratch, never O(dense positions). Three routes, the same bits:
// - keys strictly rising (a coalesced tensor's; CPU, read on the host): one entry per position,
//   written where it lies;
// - eager: the coalesce core (radix sort, each run summed), one write per unique position;
// - traced: static sizes (coalescing makes nnz data-dependent, which static tracing refuses). The
//   runs are nnz slots, slot i owning the segment [next_head(i), next_head(i + 1)) of the sorted
//   entries -- its run when i is a run's first entry, empty otherwise -- so each position
//   receives its run's sum once and exact zeros from the other slots of its run (x + 0 is x, in
//   any order). (A running minimum would find the next heads in one pass, but cummin does not
//   trace with a data-dependent nnz.)
// Backward: the autograd of the ops each route calls.
// Whether CPU keys (int64) strictly rise: each dense position has at most one entry, written in
// place. Small inputs: one loop (torch's comparison + all() cost ~15 us of fixed cost, most of a
// tiny to_dense); large ones: torch's vectorised, parallel comparison.
bool strictly_rising(const at::Tensor& keys) {
  const int64_t n = keys.size(0);
  if (n < 2) return true;
  if (n >= at::internal::GRAIN_SIZE)
    return keys.slice(0, 1).gt(keys.slice(0, 0, -1)).all().item<bool>();
  const at::Tensor contiguous = keys.contiguous();
  const int64_t* k = contiguous.const_data_ptr<int64_t>();
  for (int64_t i = 1; i < n; ++i) {
    if (k[i] <= k[i - 1]) return false;
  }
  return true;
}

// Whether writing values' bytes is the whole result: the ATen route's ops would record no gradient
// (backward or forward). Below autograd (accelerate()'s kernels of torch's ops) they never do.
bool records_no_gradient(const at::Tensor& values) {
  if (c10::impl::tls_local_dispatch_key_set().excluded_.has(
          c10::DispatchKey::AutogradFunctionality)) {
    return true;
  }
  return !(at::GradMode::is_enabled() && values.requires_grad()) &&
         !values._fw_grad(/*level=*/0).defined();
}

// The dense rows of entries whose CPU keys strictly rise: each block of output rows (128 KiB,
// cache-resident) zeroed by one memset, then the entries landing in it written (bytes as they
// are, as index_copy_ writes them). Threads own disjoint ranges of positions; the entries of a
// range are one slice of the sorted keys (a binary search finds it). zeros + index_copy_ write the
// whole output, then scatter into it at random; a memset per gap between entries costs a call per
// entry (slower than both).
template <typename Row>
void write_rising_rows(const int64_t* keys, int64_t nnz, const char* source, char* target,
                       int64_t positions, int64_t row_bytes, int64_t grain) {
  constexpr int64_t kBlockBytes = 128 << 10;
  const int64_t block = std::max<int64_t>(1, kBlockBytes / row_bytes);
  at::parallel_for(0, positions, grain, [&](int64_t begin, int64_t end) {
    int64_t i = std::lower_bound(keys, keys + nnz, begin) - keys;
    for (int64_t first = begin; first < end; first += block) {
      const int64_t last = std::min(end, first + block);
      std::memset(target + first * row_bytes, 0, (last - first) * row_bytes);
      for (; i < nnz && keys[i] < last; ++i) {
        if constexpr (std::is_void_v<Row>) {
          std::memcpy(target + keys[i] * row_bytes, source + i * row_bytes, row_bytes);
        } else {  // one element per row: a typed copy (memcpy of a runtime size is a call)
          reinterpret_cast<Row*>(target)[keys[i]] = reinterpret_cast<const Row*>(source)[i];
        }
      }
    }
  });
}

// (rows_shape) rows: values' rows at the strictly rising host keys, zeros elsewhere, written in
// one pass (write_rising_rows).
at::Tensor write_rows_at_rising_keys(const int64_t* keys, int64_t nnz, const at::Tensor& values,
                                     at::IntArrayRef rows_shape) {
  at::Tensor out = at::empty(rows_shape, values.options());
  const int64_t positions = rows_shape[0];
  if (out.numel() == 0) return out;
  const at::Tensor contiguous_values = values.contiguous();
  const int64_t row_elements = out.numel() / positions;
  const int64_t row_bytes = row_elements * static_cast<int64_t>(values.dtype().itemsize());
  const auto* source = static_cast<const char*>(contiguous_values.const_data_ptr());
  auto* target = static_cast<char*>(out.mutable_data_ptr());
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE * 8 / row_elements);
  // One element per row of 1, 2, 4 or 8 bytes: a typed copy; other rows: memcpy (Row = void).
  const auto write = [&](auto row) {
    using Row = typename decltype(row)::type;
    write_rising_rows<Row>(keys, nnz, source, target, positions, row_bytes, grain);
  };
  if (row_bytes == 1)
    write(std::type_identity<uint8_t>{});
  else if (row_bytes == 2)
    write(std::type_identity<uint16_t>{});
  else if (row_bytes == 4)
    write(std::type_identity<uint32_t>{});
  else if (row_bytes == 8)
    write(std::type_identity<uint64_t>{});
  else
    write(std::type_identity<void>{});
  return out;
}

// The same for keys in a tensor (a coalesced input's, or the coalesce core's unique keys): written
// directly on the CPU outside autograd, else by index_copy_ (its autograd; the GPU's kernel).
at::Tensor rows_at_rising_keys(const at::Tensor& keys, const at::Tensor& values,
                               at::IntArrayRef rows_shape) {
  if (keys.is_cpu() && values.is_cpu() && records_no_gradient(values)) {
    const at::Tensor contiguous_keys = keys.contiguous();
    return write_rows_at_rising_keys(contiguous_keys.const_data_ptr<int64_t>(), keys.numel(),
                                     values, rows_shape);
  }
  return at::zeros(rows_shape, values.options()).index_copy_(0, keys, values);
}

// Small CPU inputs outside autograd (kSmallToDense entries), without the ATen route's ~10 us of
// fixed work on a handful of entries (torch's to_dense ~4 us): the keys computed and checked in one
// host loop. Entries strictly after the one before (row-major; a coalesced tensor's): written as
// above. Else, where every entry lies in one chunk of the reduction tree (nnz <=
// 2^chunk_bits(width): 32 rows of up to 15 values) and the values are their own accumulator (float,
// double, complex: sum_acc_t), each position's entries folded onto its zero in input order: the
// tree sums a segment inside one chunk from the identity in order, so these are the coalesce
// route's bits (tested against it). nullopt for anything else (an index out of range included): the
// routes below then sum the entries or name the one out of range.
constexpr int64_t kSmallToDense = 256;

template <typename scalar_t>
void add_rows_in_order(const std::vector<int64_t>& keys, const at::Tensor& values, int64_t width,
                       at::Tensor& out) {
  const scalar_t* source = values.const_data_ptr<scalar_t>();
  scalar_t* target = out.mutable_data_ptr<scalar_t>();
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int64_t c = 0; c < width; ++c) target[keys[i] * width + c] += source[i * width + c];
  }
}

std::optional<at::Tensor> small_to_dense(const at::Tensor& indices, const at::Tensor& values,
                                         at::IntArrayRef sparse_sizes, at::IntArrayRef rows_shape) {
  const std::optional<KeyGeometry> geometry = key_geometry(sparse_sizes);
  if (!geometry.has_value()) return std::nullopt;  // keys past int64: refused by name below
  const int64_t nnz = indices.size(1);
  const at::Tensor index_rows =
      indices.contiguous();  // flat_key reads sparse dim d's row at d * nnz
  std::vector<int64_t> keys(nnz);
  bool fits = true, rising = true;
  AT_DISPATCH_INDEX_TYPES(index_rows.scalar_type(), "sparse_to_dense_small", [&] {
    const index_t* rows = index_rows.const_data_ptr<index_t>();
    for (int64_t i = 0; i < nnz && fits; ++i) {
      keys[i] = flat_key(*geometry, rows, nnz, i, fits);
      rising = rising && (i == 0 || keys[i] > keys[i - 1]);
    }
  });
  if (!fits) return std::nullopt;
  if (rising) return write_rows_at_rising_keys(keys.data(), nnz, values, rows_shape);
  const at::ScalarType dtype = values.scalar_type();
  const int64_t width = values.numel() / std::max<int64_t>(nnz, 1);
  if (nnz > (int64_t{1} << chunk_bits(width)) ||
      !(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kComplexFloat ||
        dtype == at::kComplexDouble)) {
    return std::nullopt;
  }
  at::Tensor out = at::zeros(rows_shape, values.options());
  const at::Tensor contiguous_values = values.contiguous();
  AT_DISPATCH_V2(dtype, "sparse_to_dense_small_sums",
                 AT_WRAP([&] { add_rows_in_order<scalar_t>(keys, contiguous_values, width, out); }),
                 at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble);
  return out;
}

bool takes_small_to_dense(const at::Tensor& indices, const at::Tensor& values) {
  return indices.is_cpu() && values.is_cpu() && !is_symbolic(indices) && !is_symbolic(values) &&
         indices.size(1) < kSmallToDense && records_no_gradient(values);
}

at::Tensor sparse_to_dense_impl(const at::Tensor& indices, const at::Tensor& values,
                                c10::SymIntArrayRef size, bool validate) {
  constexpr std::string_view op = "sparse_to_dense";
  const SparseShape shape = check_sparse_args(op, indices, values, size);
  const uint64_t bytes = check_bytes_fit(op, "the dense output", shape.size, values.dtype());
  check_fits_in_memory(op, "the dense output", bytes, values.device());
  return as_op(op, [&] {
    const c10::SymDimVector sparse_size = as_symints(shape.sparse_sizes());
    std::vector<int64_t> rows_shape = shape.dense_sizes();  // (positions, *dense sizes)
    rows_shape.insert(rows_shape.begin(), c10::multiply_integers(shape.sparse_sizes()));
    if (takes_small_to_dense(indices, values)) {
      if (std::optional<at::Tensor> dense =
              small_to_dense(indices, values, shape.sparse_sizes(), rows_shape)) {
        return dense->view(shape.size);
      }
    }
    if (!is_symbolic(indices) && !is_symbolic(values)) {
      bool unchecked = validate;
      if (indices.is_cpu()) {
        const at::Tensor keys = ops::sparse_flat_keys(indices, sparse_size, validate);
        if (strictly_rising(keys)) {
          return rows_at_rising_keys(keys, values, rows_shape).view(shape.size);
        }
        unchecked = false;
      }
      auto [unique, sums, permutation, first_idx] =
          ops::sparse_coalesce(indices, values, size, unchecked, /*return_order=*/false);
      const at::Tensor unique_keys = ops::sparse_flat_keys(unique, sparse_size, false);
      return rows_at_rising_keys(unique_keys, sums, rows_shape).view(shape.size);
    }
    // traced (nnz, data-dependent there, appears as a tensor below, never as an int)
    const at::Tensor keys = ops::sparse_flat_keys(indices, sparse_size, validate);
    auto [sorted_keys, by_position] = at::sort(keys, /*stable=*/true, 0, false);
    const at::Tensor ones = at::ones_like(keys);
    const at::Tensor nnz = ones.sum().view({1});
    at::Tensor run_head = at::ones_like(keys, keys.options().dtype(at::kBool));
    run_head.slice(0, 1).copy_(sorted_keys.slice(0, 1).ne(sorted_keys.slice(0, 0, -1)));
    // next_head(i): i at a run head, else the end of the slot's run (the next head, or nnz)
    const at::Tensor run_end = at::searchsorted(sorted_keys, sorted_keys, false, /*right=*/true);
    const at::Tensor next_head = at::where(run_head, ones.cumsum(0) - 1, run_end);
    const at::Tensor first_idx = at::cat({next_head, nnz});
    const at::Tensor sorted = values.index_select(0, by_position);
    const at::Tensor run_sums = values.scalar_type() == at::kBool  // duplicates or-ed, as torch's
                                    ? std::get<0>(ops::segment_max(sorted, first_idx))
                                    : ops::segment_sum(sorted, first_idx);
    return at::zeros(rows_shape, values.options())
        .index_put_({sorted_keys}, run_sums, /*accumulate=*/true)
        .view(shape.size);
  });
}

// ---- sparse_from_dense: the entries of a dense tensor that are not exactly zero ----

TensorPair sparse_from_dense_impl(const at::Tensor& dense, std::optional<int64_t> sparse_dim) {
  constexpr std::string_view op = "sparse_from_dense";
  check_defined(op, "dense", dense);
  const int64_t dims = sparse_dim.value_or(dense.dim());
  TORCH_CHECK_VALUE(dims >= 1 && dims <= dense.dim(), "torch_ragged.", op,
                    ": sparse_dim must be in [1, dense.dim() = ", dense.dim(), "], got ", dims);
  if (dense.is_cpu() && !is_symbolic(dense) &&
      nonzero_positions_cpu_supports(dense.scalar_type())) {
    auto [indices, positions] = nonzero_positions_cpu(dense, dims);
    return {indices, rows_of(dense, dims).index_select(0, positions)};  // differentiable
  }
  at::Tensor nonzero = dense.ne(0);
  if (dims < dense.dim()) nonzero = nonzero.flatten(dims).any(-1);  // any dense value
  const at::Tensor indices = nonzero.nonzero().t().contiguous();    // row-major: coalesced
  const at::Tensor keys = ops::sparse_flat_keys(indices, dense.sym_sizes().slice(0, dims), false);
  return {indices, rows_of(dense, dims).index_select(0, keys)};
}

// ---- sparse_index_select ----

// Entry e with index j along `dim` yields one output entry per position p with index[p] == j, in
// the order of e, then p; values are copied with segment_expand (its backward, a segment sum, is
// deterministic).
TensorPair sparse_index_select_impl(const at::Tensor& indices, const at::Tensor& values,
                                    c10::SymIntArrayRef size, int64_t dim,
                                    const at::Tensor& index) {
  constexpr std::string_view op = "sparse_index_select";
  const SparseShape shape = check_sparse_args(op, indices, values, size);
  const int64_t d = normalized_dim(op, dim, static_cast<int64_t>(shape.size.size()));
  check_index_tensor(op, "index", index, 1);
  check_index_device(op, "index", index, indices.device());
  const at::Tensor given = index.to(indices.device(), at::kLong);
  const bool sparse_dim = d < shape.sparse_dim;
  if (sparse_dim && indices.is_cpu() && indices.scalar_type() == at::kLong &&
      !is_symbolic(indices) && !is_symbolic(values) && !is_symbolic(given)) {
    // one kernel for the indices (it checks the index and wraps negative positions); the values
    // gathered by index_select (on the CPU its backward, index_add, sums in input order:
    // deterministic)
    check_every_sparse_dim(op, indices, shape);
    auto [out_indices, source] = index_select_entries_cpu(op, indices, d, given, shape.size[d]);
    return {out_indices, values.index_select(0, source)};
  }
  check_index_values(op, given, d, shape.size[d], /*negative_allowed=*/sparse_dim);
  check_every_sparse_dim(op, indices, shape);
  const at::Tensor positions = at::where(given < 0, given + shape.size[d], given);
  if (!sparse_dim) {
    return {indices.clone(), values.index_select(d - shape.sparse_dim + 1, positions)};
  }
  const at::Tensor by_value = std::get<1>(at::sort(positions, /*stable=*/true, 0, false));
  // One count per position along `dim` (dim's size in memory: a size too large to allocate
  // raises here, under this op's name).
  const at::Tensor counts = as_op(op, [&] {
    return at::zeros({shape.size[d]}, positions.options())
        .index_add(0, positions, at::ones_like(positions));
  });
  const at::Tensor value_first = ops::get_first_idx(counts);
  const at::Tensor entry_index = indices.select(0, d).to(at::kLong);
  const at::Tensor entry_first = ops::get_first_idx(counts.index_select(0, entry_index));
  const at::Tensor entry_of = ops::segment_ids(entry_first, std::nullopt);
  const c10::SymInt total = entry_of.sym_size(0);
  const at::Tensor rank =
      at::arange(c10::Scalar(total), entry_of.options()) - entry_first.index_select(0, entry_of);
  const at::Tensor slot = value_first.index_select(0, entry_index.index_select(0, entry_of)) + rank;
  at::Tensor out_indices = columns_of(indices, entry_of);
  out_indices.select(0, d).copy_(by_value.index_select(0, slot));
  return {out_indices, ops::segment_expand(values, entry_first, total)};
}

at::Tensor sparse_row_offsets_impl(const at::Tensor& rows, c10::SymInt num_rows) {
  constexpr std::string_view op = "sparse_row_offsets";
  check_index_tensor(op, "rows", rows, 1);
  const int64_t count = num_rows.expect_int();
  TORCH_CHECK_VALUE(count >= 0, "torch_ragged.", op, ": num_rows must be >= 0, got ", count);
  std::optional<at::Tensor> offsets = checked_row_offsets(op, rows, count);
  TORCH_CHECK_VALUE(offsets.has_value(), "torch_ragged.", op,
                    ": the row indices must be sorted and in [0, ", count,
                    ") (a coalesced matrix's); some are out of order or out of range");
  return *std::move(offsets);
}

// ---- sparse_intersect ----

// Whether keys[0..n) rise strictly.
bool rises_strictly(const int64_t* keys, int64_t n) {
  bool rising = true;
  for (int64_t i = 1; i < n; ++i) rising &= keys[i] > keys[i - 1];  // no branch: vectorises
  return rising;
}

// The merge of two strictly rising lists, calling found(i, j) for each a[i] == b[j] in order.
template <typename Found>
void merge_matches(const int64_t* a, int64_t n, const int64_t* b, int64_t m, const Found& found) {
  int64_t i = 0, j = 0;
  while (i < n && j < m) {
    const int64_t x = a[i], y = b[j];
    if (x == y) found(i, j);
    i += x <= y;
    j += y <= x;
  }
}

std::tuple<at::Tensor, at::Tensor> sparse_intersect_impl(const at::Tensor& a_keys,
                                                         const at::Tensor& b_keys) {
  constexpr std::string_view op = "sparse_intersect";
  check_index_tensor(op, "a_keys", a_keys, 1);
  check_index_tensor(op, "b_keys", b_keys, 1);
  check_index_device(op, "b_keys", b_keys, a_keys.device());
  const at::Tensor a = a_keys.to(at::kLong).contiguous(), b = b_keys.to(at::kLong).contiguous();
  const auto not_rising = [&] {
    TORCH_CHECK_VALUE(
        false, "torch_ragged.", op,
        ": a_keys and b_keys must each rise strictly (the keys of coalesced tensors)");
  };
  if (a.is_cpu()) {  // one merge into outputs sized for the most matches, then narrowed
    const int64_t *a_data = a.const_data_ptr<int64_t>(), *b_data = b.const_data_ptr<int64_t>();
    const int64_t n = a.numel(), m = b.numel();
    if (!rises_strictly(a_data, n) || !rises_strictly(b_data, m)) not_rising();
    at::Tensor in_a = at::empty({std::min(n, m)}, a.options());
    at::Tensor in_b = at::empty({std::min(n, m)}, a.options());
    int64_t *to_a = in_a.mutable_data_ptr<int64_t>(), *to_b = in_b.mutable_data_ptr<int64_t>();
    int64_t shared = 0;
    merge_matches(a_data, n, b_data, m, [&](int64_t i, int64_t j) {
      to_a[shared] = i;
      to_b[shared++] = j;
    });
    return {in_a.narrow(0, 0, shared), in_b.narrow(0, 0, shared)};
  }
  const auto rises = [](const at::Tensor& k) {
    return k.numel() < 2 ||
           k.narrow(0, 1, k.numel() - 1).gt(k.narrow(0, 0, k.numel() - 1)).all().item<bool>();
  };
  if (!(rises(a) && rises(b))) not_rising();  // one host read per list
  if (b.numel() == 0) return {a.new_empty({0}), a.new_empty({0})};
  const at::Tensor position = at::searchsorted(b, a).clamp_max_(b.numel() - 1);
  const at::Tensor in_a = b.index_select(0, position).eq(a).nonzero().flatten();
  return {in_a, position.index_select(0, in_a)};
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  m.impl("sparse_row_offsets", &sparse_row_offsets_impl);
  m.impl("sparse_intersect", &sparse_intersect_impl);
}

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("sparse_sum", &sparse_sum_impl);
  m.impl("sparse_mask", &sparse_mask_impl);
  m.impl("sparse_to_dense", &sparse_to_dense_impl);
  m.impl("sparse_from_dense", &sparse_from_dense_impl);
  m.impl("sparse_index_select", &sparse_index_select_impl);
}

// ---- Typed dispatcher calls ----

namespace ops {

using Tensor = at::Tensor;
using Quad = std::tuple<Tensor, Tensor, Tensor, Tensor>;
using SymSizes = c10::SymIntArrayRef;

at::Tensor sparse_flat_keys(const Tensor& indices, SymSizes sparse_size, bool validate) {
  static auto op =
      op_handle<Tensor(const Tensor&, SymSizes, bool)>("torch_ragged::sparse_flat_keys");
  return op.call(indices, sparse_size, validate);
}

Quad sparse_coalesce(const Tensor& indices, const Tensor& values, SymSizes size, bool validate,
                     bool return_order) {
  static auto op = op_handle<Quad(const Tensor&, const Tensor&, SymSizes, bool, bool)>(
      "torch_ragged::sparse_coalesce");
  return op.call(indices, values, size, validate, return_order);
}

TensorPair sparse_sum(const Tensor& indices, const Tensor& values, SymSizes size,
                      at::OptionalIntArrayRef dim, bool validate) {
  static auto op =
      op_handle<TensorPair(const Tensor&, const Tensor&, SymSizes, at::OptionalIntArrayRef, bool)>(
          "torch_ragged::sparse_sum");
  return op.call(indices, values, size, dim, validate);
}

at::Tensor sparse_mask(const Tensor& dense, const Tensor& indices, bool validate) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, bool)>("torch_ragged::sparse_mask");
  return op.call(dense, indices, validate);
}

at::Tensor sparse_row_offsets(const Tensor& rows, c10::SymInt num_rows) {
  static auto op =
      op_handle<Tensor(const Tensor&, c10::SymInt)>("torch_ragged::sparse_row_offsets");
  return op.call(rows, std::move(num_rows));
}

at::Tensor sparse_to_dense(const Tensor& indices, const Tensor& values, SymSizes size,
                           bool validate) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, SymSizes, bool)>(
      "torch_ragged::sparse_to_dense");
  return op.call(indices, values, size, validate);
}

TensorPair sparse_from_dense(const Tensor& dense, std::optional<int64_t> sparse_dim) {
  static auto op = op_handle<TensorPair(const Tensor&, std::optional<int64_t>)>(
      "torch_ragged::sparse_from_dense");
  return op.call(dense, sparse_dim);
}

at::Tensor sparse_softmax(const Tensor& indices, const Tensor& values, SymSizes size, int64_t dim,
                          bool log) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, SymSizes, int64_t, bool)>(
      "torch_ragged::sparse_softmax");
  return op.call(indices, values, size, dim, log);
}

at::Tensor sparse_pool_sum(const Tensor& indices, const Tensor& values, SymSizes size,
                           int64_t dim) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, SymSizes, int64_t)>(
      "torch_ragged::sparse_pool_sum");
  return op.call(indices, values, size, dim);
}

std::tuple<at::Tensor, at::Tensor> sparse_spgemm(const Tensor& a_indices, const Tensor& a_values,
                                                 const Tensor& b_indices, const Tensor& b_values,
                                                 SymSizes a_size, SymSizes b_size) {
  static auto op = op_handle<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                        const Tensor&, SymSizes, SymSizes)>(
      "torch_ragged::sparse_spgemm");
  return op.call(a_indices, a_values, b_indices, b_values, a_size, b_size);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sparse_spgemm_csr(
    const Tensor& a_crow, const Tensor& a_col, const Tensor& a_values, const Tensor& b_crow,
    const Tensor& b_col, const Tensor& b_values, SymSizes a_size, SymSizes b_size) {
  static auto op = op_handle<std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
      SymSizes, SymSizes)>("torch_ragged::sparse_spgemm_csr");
  return op.call(a_crow, a_col, a_values, b_crow, b_col, b_values, a_size, b_size);
}

at::Tensor sparse_mm(const Tensor& values, const Tensor& dense, const Tensor& indices,
                     const Tensor& row_first_idx, const Tensor& col_first_idx,
                     const Tensor& col_order, const Tensor& row_order, bool transpose,
                     bool validate) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, const Tensor&, bool, bool)>("torch_ragged::sparse_mm");
  return op.call(values, dense, indices, row_first_idx, col_first_idx, col_order, row_order,
                 transpose, validate);
}

at::Tensor sparse_sddmm(const Tensor& a, const Tensor& b, const Tensor& indices,
                        const Tensor& row_first_idx, const Tensor& col_first_idx,
                        const Tensor& col_order, const Tensor& row_order, bool transpose,
                        bool validate) {
  static auto op =
      op_handle<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, const Tensor&, bool, bool)>("torch_ragged::sparse_sddmm");
  return op.call(a, b, indices, row_first_idx, col_first_idx, col_order, row_order, transpose,
                 validate);
}

TensorPair sparse_index_select(const Tensor& indices, const Tensor& values, SymSizes size,
                               int64_t dim, const Tensor& index) {
  static auto op =
      op_handle<TensorPair(const Tensor&, const Tensor&, SymSizes, int64_t, const Tensor&)>(
          "torch_ragged::sparse_index_select");
  return op.call(indices, values, size, dim, index);
}

TensorPair sparse_intersect(const Tensor& a_keys, const Tensor& b_keys) {
  static auto op =
      op_handle<TensorPair(const Tensor&, const Tensor&)>("torch_ragged::sparse_intersect");
  return op.call(a_keys, b_keys);
}

Tensor sparse_compressed_violation(const Tensor& compressed_indices, const Tensor& plain_indices,
                                   c10::SymInt plain_size) {
  static auto op = op_handle<Tensor(const Tensor&, const Tensor&, c10::SymInt)>(
      "torch_ragged::sparse_compressed_violation");
  return op.call(compressed_indices, plain_indices, std::move(plain_size));
}

}  // namespace ops

// ---- Public C++ API (int sizes; torch sparse tensors in the convenience overloads) ----

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_coalesce(
    const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef size, bool validate,
    bool return_order) {
  return ops::sparse_coalesce(indices, values, c10::fromIntArrayRefSlow(size), validate,
                              return_order);
}

std::tuple<at::Tensor, at::Tensor> sparse_sum(const at::Tensor& indices, const at::Tensor& values,
                                              at::IntArrayRef size, at::OptionalIntArrayRef dim,
                                              bool validate) {
  return ops::sparse_sum(indices, values, c10::fromIntArrayRefSlow(size), dim, validate);
}

at::Tensor sparse_mask(const at::Tensor& dense, const at::Tensor& indices, bool validate) {
  return ops::sparse_mask(dense, indices, validate);
}

at::Tensor sparse_to_dense(const at::Tensor& indices, const at::Tensor& values,
                           at::IntArrayRef size, bool validate) {
  return ops::sparse_to_dense(indices, values, c10::fromIntArrayRefSlow(size), validate);
}

std::tuple<at::Tensor, at::Tensor> sparse_from_dense(const at::Tensor& dense,
                                                     std::optional<int64_t> sparse_dim) {
  return ops::sparse_from_dense(dense, sparse_dim);
}

std::tuple<at::Tensor, at::Tensor> sparse_index_select(const at::Tensor& indices,
                                                       const at::Tensor& values,
                                                       at::IntArrayRef size, int64_t dim,
                                                       const at::Tensor& index) {
  return ops::sparse_index_select(indices, values, c10::fromIntArrayRefSlow(size), dim, index);
}

at::Tensor sparse_softmax(const at::Tensor& indices, const at::Tensor& values, at::IntArrayRef size,
                          int64_t dim, bool log) {
  return ops::sparse_softmax(indices, values, c10::fromIntArrayRefSlow(size), dim, log);
}

at::Tensor softmax(const at::Tensor& sparse, int64_t dim, bool log) {
  const at::Tensor s = coalesce(sparse);
  return at::_sparse_coo_tensor_unsafe(
      s._indices(), sparse_softmax(s._indices(), s._values(), s.sizes(), dim, log), s.sizes(),
      s._values().options().layout(at::kSparse), /*is_coalesced=*/true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sparse_mm_plan(const at::Tensor& indices,
                                                                          at::IntArrayRef size) {
  static auto op = op_handle<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, c10::SymIntArrayRef)>("torch_ragged::sparse_mm_plan");
  return op.call(indices, c10::fromIntArrayRefSlow(size));
}

at::Tensor sparse_mm(const at::Tensor& values, const at::Tensor& dense, const at::Tensor& indices,
                     const std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>& plan,
                     bool transpose, bool validate) {
  const auto& [row_first_idx, col_first_idx, col_order, row_order] = plan;
  return ops::sparse_mm(values, dense, indices, row_first_idx, col_first_idx, col_order, row_order,
                        transpose, validate);
}

at::Tensor mm(const at::Tensor& sparse, const at::Tensor& dense) {
  const at::Tensor s = sparse.is_coalesced() ? sparse : coalesce(sparse);
  return sparse_mm(s._values(), dense, s._indices(), sparse_mm_plan(s._indices(), s.sizes()),
                   /*transpose=*/false, /*validate=*/false);  // the plan was built right here
}

at::Tensor coalesce(const at::Tensor& sparse) {
  TORCH_CHECK_TYPE(sparse.layout() == at::kSparse, "torch_ragged.coalesce: expected a sparse COO ",
                   "tensor, got layout ", sparse.layout());
  auto [indices, values, permutation, first_idx] =
      sparse_coalesce(sparse._indices(), sparse._values(), sparse.sizes(), true, false);
  return at::_sparse_coo_tensor_unsafe(indices.to(at::kLong), values, sparse.sizes(),
                                       values.options().layout(at::kSparse), /*is_coalesced=*/true);
}

}  // namespace torch_ragged
