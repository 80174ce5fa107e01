#include "sparse/sparse_args.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <atomic>
#include <sstream>

#include "common/checks.h"
#include "common/parallel.h"
#include "segment/offsets.h"
#include "segment/sort.h"

namespace torch_ragged {

std::vector<int64_t> SparseShape::sparse_sizes() const {
  return std::vector<int64_t>(size.begin(), size.begin() + sparse_dim);
}

std::vector<int64_t> SparseShape::dense_sizes() const {
  return std::vector<int64_t>(size.begin() + sparse_dim, size.end());
}

void check_indices(std::string_view op, const at::Tensor& indices, int64_t sparse_dim) {
  check_defined(op, "indices", indices);
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
                   "torch_ragged.", op, ": indices must be int64 or int32, got ",
                   indices.scalar_type());
  TORCH_CHECK_VALUE(indices.dim() == 2, "torch_ragged.", op,
                    ": indices must be 2-D (sparse_dim, nnz), got shape ", indices.sym_sizes());
  // sym_size: nnz may be symbolic under torch.compile, and size() would materialise it.
  TORCH_CHECK_VALUE(indices.sym_size(0) == sparse_dim, "torch_ragged.", op, ": indices must have ",
                    sparse_dim, " rows (one per sparse dim), got shape ", indices.sym_sizes());
}

SparseShape check_sparse_args(std::string_view op, const at::Tensor& indices,
                              const at::Tensor& values, c10::SymIntArrayRef size) {
  check_defined(op, "indices", indices);
  check_defined(op, "values", values);
  SparseShape shape;
  shape.size = nonnegative_sizes(op, "size", size);
  TORCH_CHECK_VALUE(indices.dim() == 2, "torch_ragged.", op,
                    ": indices must be 2-D (sparse_dim, nnz), got shape ", indices.sym_sizes());
  shape.sparse_dim = indices.sym_size(0).guard_int(__FILE__, __LINE__);
  shape.nnz = indices.sym_size(1);
  check_indices(op, indices, shape.sparse_dim);
  const int64_t ndim = static_cast<int64_t>(shape.size.size());
  TORCH_CHECK_VALUE(ndim >= shape.sparse_dim, "torch_ragged.", op, ": size ",
                    at::IntArrayRef(shape.size), " is shorter than sparse_dim = ", shape.sparse_dim,
                    " (indices.size(0))");
  TORCH_CHECK_VALUE(values.dim() >= 1, "torch_ragged.", op,
                    ": values must have at least 1 dim (nnz, ...), got a 0-D tensor");
  TORCH_CHECK_VALUE(values.sym_size(0).sym_eq(shape.nnz).expect_true(__FILE__, __LINE__),
                    "torch_ragged.", op, ": values must have nnz = indices.size(1) = ", shape.nnz,
                    " rows, got shape ", values.sym_sizes());
  const std::vector<int64_t> dense = shape.dense_sizes();
  bool dense_match = values.dim() == static_cast<int64_t>(dense.size()) + 1;
  for (size_t k = 0; dense_match && k < dense.size(); ++k) {
    dense_match = values.sym_size(static_cast<int64_t>(k) + 1) == dense[k];
  }
  std::ostringstream expected;  // "(nnz)" or "(nnz, 4, 2)"
  expected << "(nnz";
  for (const int64_t d : dense) expected << ", " << d;
  expected << ")";
  TORCH_CHECK_VALUE(dense_match, "torch_ragged.", op,
                    ": values must have shape (nnz, *size[sparse_dim:]) = ", expected.str(),
                    ", got ", values.sym_sizes());
  TORCH_CHECK(indices.device() == values.device(), "torch_ragged.", op,
              ": indices and values must be on one device, got ", indices.device(), " and ",
              values.device());
  return shape;
}

std::vector<int64_t> nonnegative_sizes(std::string_view op, std::string_view arg,
                                       c10::SymIntArrayRef sizes) {
  std::vector<int64_t> out = concrete_sizes(op, arg, sizes);
  TORCH_CHECK_VALUE(std::all_of(out.begin(), out.end(), [](int64_t s) { return s >= 0; }),
                    "torch_ragged.", op, ": ", arg, " must be non-negative, got ",
                    at::IntArrayRef(out));
  return out;
}

std::optional<KeyGeometry> key_geometry(at::IntArrayRef sparse_sizes) {
  const int64_t dims = static_cast<int64_t>(sparse_sizes.size());
  if (dims > kMaxKeyDims) return std::nullopt;
  KeyGeometry g;
  g.sparse_dim = static_cast<int>(dims);
  uint64_t product = 1;
  for (int64_t d = dims - 1; d >= 0; --d) {
    g.size[d] = sparse_sizes[d];
    g.stride[d] = static_cast<int64_t>(product);
    if (c10::mul_overflows(product, static_cast<uint64_t>(sparse_sizes[d]), &product) ||
        product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
  }
  g.key_bits = key_bits_for(product);
  return g;
}

int64_t normalized_dim(std::string_view op, int64_t dim, int64_t ndim) {
  TORCH_CHECK_INDEX(dim >= -ndim && dim < ndim, "torch_ragged.", op, ": dim ", dim,
                    " is out of range for a ", ndim, "-D tensor (expected [", -ndim, ", ", ndim - 1,
                    "])");
  return dim < 0 ? dim + ndim : dim;
}

KeyGeometry checked_key_geometry(std::string_view op, const at::Tensor& indices,
                                 c10::SymIntArrayRef sparse_size) {
  const std::vector<int64_t> sizes = nonnegative_sizes(op, "sparse_size", sparse_size);
  check_indices(op, indices, static_cast<int64_t>(sizes.size()));
  const std::optional<KeyGeometry> g = key_geometry(sizes);
  TORCH_CHECK_VALUE(g.has_value(), "torch_ragged.", op, ": the flattened index of sparse sizes ",
                    at::IntArrayRef(sizes), " does not fit in int64 (or there are more than ",
                    kMaxKeyDims, " sparse dims)");
  return *g;
}

void raise_out_of_range(std::string_view op, const at::Tensor& indices,
                        at::IntArrayRef sparse_sizes) {
  const at::Tensor host = indices.to(at::kCPU, at::kLong).contiguous();
  const int64_t dims = host.size(0), nnz = host.size(1);
  const int64_t* idx = host.const_data_ptr<int64_t>();
  for (int64_t entry = 0; entry < nnz; ++entry) {
    for (int64_t d = 0; d < dims; ++d) {
      const int64_t i = idx[d * nnz + entry];
      TORCH_CHECK_INDEX(i >= 0 && i < sparse_sizes[d], "torch_ragged.", op, ": indices[", d, "][",
                        entry, "] = ", i, " is out of range for size[", d, "] = ", sparse_sizes[d]);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "torch_ragged.", op, ": no index out of range after all");
}

void check_every_sparse_dim(std::string_view op, const at::Tensor& indices,
                            const SparseShape& shape) {
  if (is_symbolic(indices) || shape.sparse_dim == 0 || indices.size(1) == 0) return;
  // CPU: one branch-free pass per dim (an unsigned compare catches negatives too; it vectorises),
  // in parallel -- two reductions cost twice the reads and ~7 us of fixed work for a few entries
  if (indices.is_cpu()) {
    AT_DISPATCH_INDEX_TYPES(indices.scalar_type(), "check_every_sparse_dim", [&] {
      const index_t* data = indices.const_data_ptr<index_t>();
      const int64_t nnz = indices.size(1), row_stride = indices.stride(0),
                    stride = indices.stride(1);
      std::atomic<bool> in_range{true};
      for (int64_t d = 0; d < shape.sparse_dim; ++d) {
        const index_t* row = data + d * row_stride;
        const auto bound = static_cast<uint64_t>(shape.size[d]);
        at::parallel_for(0, nnz, kGrainElems, [&](int64_t begin, int64_t end) {
          bool ok = true;
          for (int64_t i = begin; i < end; ++i) {
            // sign-extended first: a negative index becomes a huge unsigned one
            ok &= static_cast<uint64_t>(static_cast<int64_t>(row[i * stride])) < bound;
          }
          if (!ok) in_range = false;
        });
      }
      if (!in_range) raise_out_of_range(op, indices, shape.sparse_sizes());
    });
    return;
  }
  // each dim's smallest and largest index, read on the host (amin / amax: aminmax(dim) enters a
  // parallel region even for a few entries)
  const at::Tensor lows = indices.amin(1).to(at::kCPU, at::kLong);
  const at::Tensor highs = indices.amax(1).to(at::kCPU, at::kLong);
  const int64_t* lo = lows.const_data_ptr<int64_t>();
  const int64_t* hi = highs.const_data_ptr<int64_t>();
  for (int64_t d = 0; d < shape.sparse_dim; ++d) {
    if (lo[d] < 0 || hi[d] >= shape.size[d]) raise_out_of_range(op, indices, shape.sparse_sizes());
  }
}

void check_index_values(std::string_view op, const at::Tensor& index, int64_t dim, int64_t size,
                        bool negative_allowed) {
  const int64_t lowest = negative_allowed ? -size : 0;
  if (is_symbolic(index)) {
    at::_assert_async(index.ge(lowest).logical_and(index.lt(size)).all(),
                      "torch_ragged.sparse_index_select: index out of range");
    return;
  }
  if (index.numel() == 0) return;
  const auto [low, high] = at::aminmax(index);
  TORCH_CHECK_INDEX(low.item<int64_t>() >= lowest && high.item<int64_t>() < size, "torch_ragged.",
                    op, ": index must lie in [", lowest, ", ", size, ") for ",
                    negative_allowed ? "sparse" : "dense", " dim ", dim, " of size ", size,
                    ", got values from ", low.item<int64_t>(), " to ", high.item<int64_t>());
}

std::optional<at::Tensor> checked_row_offsets(std::string_view op, const at::Tensor& rows,
                                              int64_t num_rows) {
  // num_rows + 1 int64 offsets (the + 1 cannot overflow what check_bytes_fit lets through)
  const uint64_t bytes =
      check_bytes_fit(op, "the row offsets", {num_rows}, caffe2::TypeMeta::Make<int64_t>()) + 8;
  check_fits_in_memory(op, "the row offsets", bytes, rows.device());
  return offsets_of_sorted_ids(rows.to(at::kLong), num_rows);
}

at::Tensor CompressedFinding::as_tensor() const {
  return at::tensor({kind, position, value}, at::kLong);
}

int64_t check_compressed_args(const at::Tensor& compressed, const at::Tensor& plain,
                              const c10::SymInt& plain_size) {
  constexpr std::string_view op = "sparse_compressed_violation";
  check_index_tensor(op, "compressed_indices", compressed, 1);
  check_index_tensor(op, "plain_indices", plain, 1);
  TORCH_CHECK_VALUE(compressed.size(0) >= 1, "torch_ragged.", op,
                    ": compressed_indices needs at least 1 offset (slices + 1), got none");
  TORCH_CHECK_VALUE(plain.device() == compressed.device(), "torch_ragged.", op,
                    ": plain_indices must be on compressed_indices' device ", compressed.device(),
                    ", got ", plain.device());
  const int64_t size = plain_size.expect_int();
  TORCH_CHECK_VALUE(size >= 0, "torch_ragged.", op, ": plain_size must be >= 0, got ", size);
  return size;
}

CompressedFinding offsets_violation(const at::Tensor& compressed_on_cpu, int64_t nnz) {
  const at::Tensor offsets = compressed_on_cpu.to(at::kLong).contiguous();
  const int64_t* c = offsets.const_data_ptr<int64_t>();
  const int64_t slices = offsets.numel() - 1;
  if (c[0] != 0) return {kOffsetsStartAboveZero, 0, c[0]};
  for (int64_t s = 1; s <= slices; ++s) {
    if (c[s] < c[s - 1]) return {kOffsetsFall, s, c[s]};
  }
  if (c[slices] != nnz) return {kOffsetsEndOffNnz, slices, c[slices]};
  return {};
}

CompressedFinding entry_finding(const at::Tensor& plain, int64_t plain_size, int64_t p) {
  const int64_t index = plain.select(0, p).item<int64_t>();
  const bool in_range = index >= 0 && index < plain_size;
  return {in_range ? kPlainNotRising : kPlainOutOfRange, p, index};
}

at::Tensor columns_of(const at::Tensor& indices, const at::Tensor& columns) {
  if (!indices.is_cpu() || is_symbolic(indices) || is_symbolic(columns) || indices.dim() != 2 ||
      columns.scalar_type() != at::kLong) {
    return indices.gather(1, columns.unsqueeze(0).expand_symint({indices.sym_size(0), -1}));
  }
  const at::Tensor wanted = columns.contiguous();
  const int64_t rows = indices.size(0), nnz = indices.size(1), count = wanted.numel();
  const int64_t row_stride = indices.stride(0), column_stride = indices.stride(1);
  at::Tensor out = at::empty({rows, count}, indices.options());
  const int64_t* column = wanted.const_data_ptr<int64_t>();
  std::atomic<bool> out_of_range{false};
  AT_DISPATCH_INDEX_TYPES(indices.scalar_type(), "columns_of", [&] {
    const index_t* in = indices.const_data_ptr<index_t>();
    index_t* to = out.mutable_data_ptr<index_t>();
    at::parallel_for(0, count, kGrainElems / std::max<int64_t>(rows, 1), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t c = column[p];
        if (static_cast<uint64_t>(c) >= static_cast<uint64_t>(nnz)) {
          out_of_range = true;
          continue;
        }
        for (int64_t d = 0; d < rows; ++d)
          to[d * count + p] = in[d * row_stride + c * column_stride];
      }
    });
  });
  TORCH_CHECK_INDEX(!out_of_range, "torch_ragged: a column index is outside [0, ", nnz,
                    ") in columns_of (an internal error: please report it)");
  return out;
}

}  // namespace torch_ragged
