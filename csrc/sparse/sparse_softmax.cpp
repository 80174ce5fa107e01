// Sparse softmax / log_softmax along any dim, and the pool sums its gradients are made of.
//
// Along a sparse dim d, the entries that share every other sparse index form a *pool*; softmax
// normalises each pool (unspecified entries count as -inf, as torch.sparse.softmax) per dense
// position. Pools are runs of equal keys once d is dropped from the key: the coalesce backend's
// keys, stable sort and run offsets give their order, and the segment core normalises them. A
// coalesced tensor reduced along its last sparse dim is already in pool order: the sorted-input
// check sees it and nothing is sorted or moved (CPU; CUDA always sorts). Memory: O(nnz + pools).
// The kernels (softmax_with / pool_sum_with) are registered per backend in sparse_cpu.cpp and
// cuda/sparse_cuda.cu; the autograd is here.
//
// Both ops take coalesced triplets (the wrappers coalesce first, as torch sums duplicates first)
// and return values in the input's order, so their outputs have static sizes for torch.compile.
// Their autograd is written with sparse_pool_sum, which is linear and self-adjoint:
//   softmax:     dx = y * (g - P(g * y))        log_softmax: dx = g - exp(y) * P(g)
// with P = sparse_pool_sum (each entry gets its pool's sum).

#include <torch/autograd.h>
#include <torch/library.h>

#include "common/autograd.h"
#include "common/checks.h"
#include "segment/offsets.h"
#include "segment/segment_ops.h"
#include "sparse/softmax.h"
#include "sparse/sparse_args.h"
#include "sparse/sparse_ops.h"

namespace torch_ragged {

namespace {

// The pools along sparse dim d: `permutation` (undefined: the entries are already in pool order)
// and `first_idx` cutting the (permuted) entries into pools. The key without d is the flattened
// index with size 1 along d (its index then counts as 0).
struct Pools {
  at::Tensor permutation, first_idx;
};

// Whether per-position pool offsets ((positions + 1) of them) cost no more than the entries do: a
// huge, nearly empty tensor keeps the keyed path, which allocates nothing per position.
bool offsets_cost_fits(int64_t positions, int64_t nnz) {
  return nnz > 0 && positions <= 4 * nnz + 1024;
}

// A CPU matrix along dim 1 whose rows come sorted (always, when it is coalesced): the pools are its
// rows, in order, and their offsets are the whole answer (no keys, no sorted-key check). Rows out
// of range or out of order leave it to the general path, which checks and sorts.
std::optional<at::Tensor> row_offsets_of_a_matrix(const at::Tensor& indices,
                                                  const std::vector<int64_t>& sparse_sizes,
                                                  int64_t d) {
  if (!indices.is_cpu() || sparse_sizes.size() != 2 || d != 1 ||
      !offsets_cost_fits(sparse_sizes[0], indices.size(1))) {
    return std::nullopt;
  }
  return offsets_of_sorted_ids(indices.select(0, 0), sparse_sizes[0]);
}

// The keys of a CPU tensor's pools along a dim whose other dims hold few positions (a matrix along
// dim 0: its columns), with the count of key positions: only where a count per key position
// costs no more than the entries (as the row offsets above). `sizes`: the sparse sizes with 1
// along the dim.
struct SmallKeys {
  at::Tensor keys;
  int64_t positions;
};

std::optional<SmallKeys> small_keys_of(const CoalesceBackend& backend, const at::Tensor& indices,
                                       const std::vector<int64_t>& sizes) {
  const std::optional<KeyGeometry> geometry = key_geometry(sizes);
  if (!geometry.has_value() || !indices.is_cpu()) return std::nullopt;
  const int64_t positions = geometry->size[0] * geometry->stride[0];  // every key lies below it
  if (!offsets_cost_fits(positions, indices.size(1))) return std::nullopt;
  // A matrix along dim 0 (its row dim has size 1 in the geometry): the keys are its int64 column
  // indices as they are. One out of range is refused by the counting pass, and the general path
  // then keys it as flat_keys does.
  const bool columns_are_keys =
      geometry->sparse_dim == 2 && geometry->size[0] == 1 && indices.scalar_type() == at::kLong;
  const at::Tensor keys = columns_are_keys
                              ? indices.select(0, 1).contiguous()
                              : backend.flat_keys("sparse_softmax", indices, *geometry, false);
  return SmallKeys{keys, positions};
}

Pools pools_along(const CoalesceBackend& backend, const at::Tensor& indices,
                  const SparseShape& shape, int64_t d) {
  const int64_t nnz = indices.size(1);
  if (shape.sparse_dim == 1) {  // one pool: every entry
    return {at::Tensor(), at::tensor({int64_t{0}, nnz}, at::kLong).to(indices.device())};
  }
  std::vector<int64_t> sizes = shape.sparse_sizes();
  if (const std::optional<at::Tensor> rows = row_offsets_of_a_matrix(indices, sizes, d)) {
    return {at::Tensor(), *rows};
  }
  sizes[d] = 1;
  // By one counting pass over small keys, in the order sort_keys would give (stable), with the
  // pools' offsets read off the counts: no sort, no run detection.
  if (const std::optional<SmallKeys> small = small_keys_of(backend, indices, sizes)) {
    if (const std::optional<KeyGroups> groups =
            cpu::group_small_keys(small->keys, small->positions)) {
      return {groups->permutation, groups->first_idx};
    }
  }
  const std::optional<KeyGeometry> geometry = key_geometry(sizes);
  if (!geometry.has_value()) {  // huge sizes: sort the other dims' indices lexicographically
    std::vector<at::Tensor> others;
    c10::SymDimVector other_sizes;
    for (int64_t k = 0; k < shape.sparse_dim; ++k) {
      if (k == d) continue;
      others.push_back(indices.select(0, k));
      other_sizes.push_back(shape.size[k]);
    }
    other_sizes.push_back(0);  // zero-width values: only the order and the runs are wanted
    auto [unique, sums, permutation, first_idx] = ops::sparse_coalesce(
        at::stack(others), at::empty({nnz, 0}, indices.options().dtype(at::kFloat)), other_sizes,
        /*validate=*/false);
    return {permutation, first_idx};
  }
  const at::Tensor keys = backend.flat_keys("sparse_softmax", indices, *geometry, false);
  KeyOrder order = backend.sort_keys(keys, geometry->key_bits);
  return {order.permutation, backend.run_offsets(order.sorted_keys)};
}

// Runs f on the values in pool order and puts the result back in entry order.
template <typename F>
at::Tensor in_pool_order(const CoalesceBackend& backend, const at::Tensor& indices,
                         const at::Tensor& values, const SparseShape& shape, int64_t d,
                         const F& f) {
  const Pools pools = pools_along(backend, indices, shape, d);
  if (!pools.permutation.defined()) return f(values, pools.first_idx);
  const at::Tensor pooled = f(values.index_select(0, pools.permutation), pools.first_idx);
  return at::index_copy(at::empty_like(pooled), 0, pools.permutation, pooled);
}

// Scalar values of a CPU tensor pooled by small keys (a matrix along dim 0, say), normalised where
// they lie: the same bits as the pools in order would give, without gathering the values into
// that order and scattering them back (segment core: softmax_of_small_key_groups). Along dim 1 of
// a matrix the pools already lie in order (row_offsets_of_a_matrix).
std::optional<at::Tensor> softmax_in_place(const CoalesceBackend& backend,
                                           const at::Tensor& indices, const at::Tensor& values,
                                           const SparseShape& shape, int64_t d, bool log) {
  if (values.dim() != 1 || shape.sparse_dim < 2 || (shape.sparse_dim == 2 && d == 1)) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes = shape.sparse_sizes();
  sizes[d] = 1;
  const std::optional<SmallKeys> small = small_keys_of(backend, indices, sizes);
  if (!small.has_value()) return std::nullopt;
  return cpu::softmax_of_small_key_groups(values, small->keys, small->positions, log);
}

}  // namespace

at::Tensor softmax_with(const CoalesceBackend& backend, const at::Tensor& indices,
                        const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim, bool log) {
  constexpr std::string_view op = "sparse_softmax";
  const SparseShape shape = check_sparse_args(op, indices, values, size);
  // Pools are read off some dims only (a matrix along dim 0: its columns); an index out of range in
  // another (a tensor flagged coalesced that is not) would join a real pool: refused by name.
  check_every_sparse_dim(op, indices, shape);
  const int64_t d = normalized_dim(op, dim, static_cast<int64_t>(shape.size.size()));
  TORCH_CHECK_TYPE(at::isFloatingType(values.scalar_type()), "torch_ragged.", op,
                   ": values must be floating (pass dtype= to cast), got ", values.scalar_type());
  if (d >= shape.sparse_dim) {  // a dense dim: a dense softmax of the values
    const int64_t value_dim = d - shape.sparse_dim + 1;
    return log ? at::log_softmax(values, value_dim) : at::softmax(values, value_dim);
  }
  if (const std::optional<at::Tensor> in_place =
          softmax_in_place(backend, indices, values, shape, d, log)) {
    return *in_place;
  }
  return in_pool_order(
      backend, indices, values, shape, d, [&](const at::Tensor& v, const at::Tensor& first_idx) {
        return log ? ops::segment_log_softmax(v, first_idx) : ops::segment_softmax(v, first_idx);
      });
}

at::Tensor pool_sum_with(const CoalesceBackend& backend, const at::Tensor& indices,
                         const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim) {
  constexpr std::string_view op = "sparse_pool_sum";
  const SparseShape shape = check_sparse_args(op, indices, values, size);
  const int64_t d = normalized_dim(op, dim, static_cast<int64_t>(shape.size.size()));
  if (d >= shape.sparse_dim) {
    return values.sum(d - shape.sparse_dim + 1, /*keepdim=*/true).expand_as(values).contiguous();
  }
  return in_pool_order(
      backend, indices, values, shape, d, [&](const at::Tensor& v, const at::Tensor& first_idx) {
        return ops::segment_expand(ops::segment_sum(v, first_idx), first_idx, v.sym_size(0));
      });
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- autograd ----

class SparsePoolSum : public torch::autograd::Function<SparsePoolSum> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& indices,
                            const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({indices});
    ctx->saved_data["size"] = size.vec();
    ctx->saved_data["dim"] = dim;
    return ops::sparse_pool_sum(indices, values, size, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SparsePoolSum>();
    const std::vector<c10::SymInt> size = ctx->saved_data["size"].toSymIntVector();
    return {at::Tensor(),
            ops::sparse_pool_sum(ctx->get_saved_variables()[0], grads[0], size,
                                 ctx->saved_data["dim"].toInt()),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor sparse_softmax_backward(const at::Tensor& indices, const at::Tensor& output,
                                   const at::Tensor& grad, c10::SymIntArrayRef size, int64_t dim,
                                   bool log) {
  auto pool_sum = [&](const at::Tensor& t) { return ops::sparse_pool_sum(indices, t, size, dim); };
  return log ? grad - output.exp() * pool_sum(grad) : output * (grad - pool_sum(grad * output));
}

namespace {

class SparseSoftmax : public torch::autograd::Function<SparseSoftmax> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& indices,
                            const at::Tensor& values, c10::SymIntArrayRef size, int64_t dim,
                            bool log) {
    keep_undefined_grads(ctx);
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = ops::sparse_softmax(indices, values, size, dim, log);
    ctx->save_for_backward({indices, out});
    ctx->saved_data["size"] = size.vec();
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["log"] = log;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<SparseSoftmax>();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &indices = saved[0], &y = saved[1], &g = grads[0];
    const std::vector<c10::SymInt> size = ctx->saved_data["size"].toSymIntVector();
    const at::Tensor grad = sparse_softmax_backward(
        indices, y, g, size, ctx->saved_data["dim"].toInt(), ctx->saved_data["log"].toBool());
    return {at::Tensor(), grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sparse_softmax_autograd(const at::Tensor& indices, const at::Tensor& values,
                                   c10::SymIntArrayRef size, int64_t dim, bool log) {
  check_defined("sparse_softmax", "indices", indices);
  check_defined("sparse_softmax", "values", values);
  return SparseSoftmax::apply(indices, values, size, dim, log);
}

at::Tensor sparse_pool_sum_autograd(const at::Tensor& indices, const at::Tensor& values,
                                    c10::SymIntArrayRef size, int64_t dim) {
  check_defined("sparse_pool_sum", "indices", indices);
  check_defined("sparse_pool_sum", "values", values);
  return SparsePoolSum::apply(indices, values, size, dim);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, Autograd, m) {
  m.impl("sparse_softmax", &sparse_softmax_autograd);
  m.impl("sparse_pool_sum", &sparse_pool_sum_autograd);
}

}  // namespace torch_ragged
