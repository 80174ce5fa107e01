#include "sparse/coalesce.h"

#include "sparse/sparse_args.h"

namespace torch_ragged {
namespace {

constexpr std::string_view kOp = "sparse_coalesce";

// Each run's values summed in the reduction tree's fixed order (input order within a chunk, chunk
// partials merged left to right); bool values are or-ed (a sum of counts, then != 0).
at::Tensor sum_runs(const CoalesceBackend& backend, const at::Tensor& values,
                    const at::Tensor& permutation, const at::Tensor& first_idx) {
  if (values.scalar_type() == at::kBool) {
    return backend.segment_gather_sum(values.to(at::kLong), permutation, {}, first_idx).ne(0);
  }
  return backend.segment_gather_sum(values, permutation, {}, first_idx);
}

// Sparse sizes whose flattened key would overflow int64: sort by each sparse dim in turn, last
// first (stable sorts compose into the lexicographic order), with torch's stable sort.
CoalesceResult coalesce_lexicographic(const CoalesceBackend& backend, const at::Tensor& indices,
                                      const at::Tensor& values, const SparseShape& shape,
                                      bool validate) {
  const int64_t nnz = indices.size(1);
  const at::Tensor longs = indices.to(at::kLong);
  if (validate) {
    const at::Tensor sizes = at::tensor(shape.sparse_sizes(), longs.options()).unsqueeze(1);
    if (longs.lt(0).logical_or(longs.ge(sizes)).any().item<bool>()) {
      raise_out_of_range(kOp, indices, shape.sparse_sizes());
    }
  }
  at::Tensor permutation = at::arange(nnz, longs.options());
  for (int64_t d = shape.sparse_dim - 1; d >= 0; --d) {
    const at::Tensor column = longs.select(0, d).index_select(0, permutation);
    permutation = permutation.index_select(
        0, std::get<1>(at::sort(column, /*stable=*/true, /*dim=*/0, /*descending=*/false)));
  }
  const at::Tensor sorted = columns_of(longs, permutation);
  at::Tensor heads = at::ones({nnz}, longs.options().dtype(at::kBool));
  if (nnz > 1) {
    heads.narrow(0, 1, nnz - 1)
        .copy_(sorted.narrow(1, 1, nnz - 1).ne(sorted.narrow(1, 0, nnz - 1)).any(0));
  }
  const at::Tensor starts = heads.nonzero().flatten();
  const at::Tensor first_idx = at::cat({starts, at::full({1}, nnz, longs.options())});
  return {columns_of(indices, permutation.index_select(0, starts)),
          sum_runs(backend, values, permutation, first_idx), permutation, first_idx};
}

// The order's tensors as the caller asked for them: themselves, or empty (return_order = false).
CoalesceResult with_order(at::Tensor indices, at::Tensor values, at::Tensor permutation,
                          at::Tensor first_idx, bool return_order) {
  if (!return_order) {
    permutation = at::empty({0}, indices.options().dtype(at::kLong));
    first_idx = at::empty({0}, indices.options().dtype(at::kLong));
  }
  return {std::move(indices), std::move(values), std::move(permutation), std::move(first_idx)};
}

// Input already coalesced: nothing moved or added; the identity order, one entry per run.
CoalesceResult in_identity_order(at::Tensor indices, at::Tensor values, bool return_order) {
  if (!return_order) return with_order(std::move(indices), std::move(values), {}, {}, false);
  const int64_t nnz = indices.size(1);
  const at::TensorOptions longs = indices.options().dtype(at::kLong);
  return {std::move(indices), std::move(values), at::arange(nnz, longs),
          at::arange(nnz + 1, longs)};
}

}  // namespace

CoalesceResult coalesce_with(const CoalesceBackend& backend, const at::Tensor& indices,
                             const at::Tensor& values, c10::SymIntArrayRef size, bool validate,
                             bool return_order) {
  const SparseShape shape = check_sparse_args(kOp, indices, values, size);
  const int64_t nnz = indices.size(1);
  const std::optional<KeyGeometry> geometry = key_geometry(shape.sparse_sizes());
  if (!geometry.has_value()) {
    auto [out_indices, out_values, permutation, first_idx] =
        coalesce_lexicographic(backend, indices, values, shape, validate);
    return with_order(out_indices, out_values, permutation, first_idx, return_order);
  }
  if (backend.copy_if_coalesced != nullptr) {
    if (at::Tensor copy = backend.copy_if_coalesced(indices, *geometry); copy.defined()) {
      return in_identity_order(copy, values.clone(), return_order);
    }
  }
  const at::Tensor keys = backend.flat_keys(kOp, indices, *geometry, validate);
  const KeyOrder order = backend.sort_keys(keys, geometry->key_bits);
  const at::Tensor first_idx = backend.run_offsets(order.sorted_keys);
  const int64_t runs = first_idx.numel() - 1;
  const bool sorted = !order.permutation.defined();
  if (sorted && runs == nnz)
    return in_identity_order(indices.clone(), values.clone(), return_order);
  // Validated keys decode to the indices; unvalidated ones may hold an out-of-range index's 0, so
  // those entries' own indices are gathered.
  const at::Tensor heads = first_idx.narrow(0, 0, runs);  // sorted positions
  const at::Tensor out_indices =
      validate ? backend.run_indices(order.sorted_keys, first_idx, *geometry, indices.scalar_type())
               : columns_of(indices, sorted ? heads : order.permutation.index_select(0, heads));
  const at::Tensor permutation =
      sorted && return_order ? at::arange(nnz, keys.options()) : order.permutation;
  return with_order(out_indices, sum_runs(backend, values, order.permutation, first_idx),
                    permutation, first_idx, return_order);
}

}  // namespace torch_ragged
