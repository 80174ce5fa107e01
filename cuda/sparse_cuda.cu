// CUDA kernels of the sparse family: flattened keys, and coalesce (sparse/coalesce.cpp) on the
// segment core's device sort. Host reads: the out-of-range flag when validating, and the number of
// runs (the output nnz, a data-dependent size). Sparse @ sparse: C's pattern from the products'
// keys (sorted, unique), then one thread per row of C sums its products (spgemm_row_numeric).

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "common/parallel.h"
#include "segment/segment_ops.h"
#include "sparse/coalesce.h"
#include "sparse/softmax.h"
#include "sparse/sparse_args.h"

namespace torch_ragged {
namespace {

template <typename index_t>
__global__ void flat_keys_kernel(KeyGeometry g, const index_t* __restrict__ indices, int64_t nnz,
                                 int64_t* __restrict__ keys, int32_t* __restrict__ out_of_range) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nnz;
       i += int64_t{gridDim.x} * blockDim.x) {
    bool in_range;
    keys[i] = flat_key(g, indices, nnz, i, in_range);
    if (!in_range) *out_of_range = 1;  // every writer writes 1: a benign race
  }
}

at::Tensor flat_keys_cuda(std::string_view op, const at::Tensor& indices, const KeyGeometry& g,
                          bool validate) {
  const c10::cuda::CUDAGuard guard(indices.device());
  const at::Tensor src = indices.contiguous();
  const int64_t nnz = src.size(1);
  at::Tensor keys = at::empty({nnz}, src.options().dtype(at::kLong));
  at::Tensor flag = at::zeros({1}, src.options().dtype(at::kInt));
  if (nnz > 0) {
    AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sparse_flat_keys_cuda", [&] {
      flat_keys_kernel<index_t>
          <<<cuda_grid_for(nnz), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
              g, src.const_data_ptr<index_t>(), nnz, keys.mutable_data_ptr<int64_t>(),
              flag.mutable_data_ptr<int32_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  if (validate && flag.item<int32_t>() != 0) {  // one host read (documented: validate=False skips)
    raise_out_of_range(op, indices, at::IntArrayRef(g.size, g.sparse_dim));
  }
  return keys;
}

template <typename index_t>
__global__ void run_indices_kernel(KeyGeometry g, const int64_t* __restrict__ sorted_keys,
                                   const int64_t* __restrict__ first_idx, int64_t runs,
                                   index_t* __restrict__ out) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < runs;
       r += int64_t{gridDim.x} * blockDim.x) {
    run_head_indices(g, sorted_keys, first_idx, runs, r, out);
  }
}

at::Tensor run_indices_cuda(const at::Tensor& sorted_keys, const at::Tensor& first_idx,
                            const KeyGeometry& g, at::ScalarType dtype) {
  const c10::cuda::CUDAGuard guard(sorted_keys.device());
  const int64_t runs = first_idx.numel() - 1;
  at::Tensor out = at::empty({g.sparse_dim, runs}, sorted_keys.options().dtype(dtype));
  if (runs > 0) {
    AT_DISPATCH_INDEX_TYPES(dtype, "sparse_coalesce_cuda", [&] {
      run_indices_kernel<index_t>
          <<<cuda_grid_for(runs), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
              g, sorted_keys.const_data_ptr<int64_t>(), first_idx.const_data_ptr<int64_t>(), runs,
              out.mutable_data_ptr<index_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  return out;
}

template <typename scalar_t, typename acc_t>
__global__ void spgemm_numeric_kernel(int64_t n, SpgemmRowTables<scalar_t> tables,
                                      acc_t* __restrict__ acc) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const bool found = spgemm_row_numeric<scalar_t, acc_t>(i, tables, acc);
    CUDA_KERNEL_ASSERT_MSG(found,
                           "torch_ragged.sparse_spgemm: internal error: a product's column "
                           "is missing from C's pattern");
  }
}

// C's pattern, (indices (2, nnz), row offsets (n + 1)): every product's key row * m + col
// (spgemm_with checked that it fits), sorted and made unique. O(products) memory on the device, for
// the symbolic step only.
std::pair<at::Tensor, at::Tensor> spgemm_pattern_cuda(const SpgemmOperands& s) {
  const ProductList products = list_products(s.a_cols, s.b_first, s.b_cols.size(0));
  const at::Tensor a_rows = ops::segment_ids(s.a_first, s.a_cols.size(0));
  const at::Tensor keys =
      a_rows.index_select(0, products.a_entry) * s.m + s.b_cols.index_select(0, products.b_entry);
  const at::Tensor unique = std::get<0>(at::unique_consecutive(std::get<0>(at::sort(keys))));
  const at::Tensor rows = at::div(unique, s.m, "floor");
  return {at::stack({rows, unique - rows * s.m}), offsets_of(rows, s.n)};
}

SpgemmResult spgemm_rows_cuda(const SpgemmOperands& s) {
  const c10::cuda::CUDAGuard guard(s.a_values.device());
  const auto [indices, c_first] = spgemm_pattern_cuda(s);
  const at::Tensor c_cols = indices.select(0, 1);  // contiguous: a row of indices
  SpgemmResult c;
  if (s.csr_output) {
    c.first = csr_offsets_of_product(s, c_first);
    c.cols = c_cols.to(s.csr_index_dtype, /*non_blocking=*/false,
                       /*copy=*/true);  // not a view of the rows
  } else {
    c.indices = indices;
  }
  AT_DISPATCH_V2(
      s.a_values.scalar_type(), "sparse_spgemm_cuda", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
        at::Tensor acc = at::empty({c_cols.size(0)}, s.a_values.options().dtype(acc_dtype));
        if (s.n > 0) {
          spgemm_numeric_kernel<scalar_t, acc_t>
              <<<cuda_grid_for(s.n), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                  s.n,
                  SpgemmRowTables<scalar_t>{
                      s.a_first.const_data_ptr<int64_t>(), s.a_cols.const_data_ptr<int64_t>(),
                      s.a_values.const_data_ptr<scalar_t>(), s.b_first.const_data_ptr<int64_t>(),
                      s.b_cols.const_data_ptr<int64_t>(), s.b_values.const_data_ptr<scalar_t>(),
                      c_first.const_data_ptr<int64_t>(), c_cols.const_data_ptr<int64_t>()},
                  acc.mutable_data_ptr<acc_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        c.values = acc.to(s.a_values.scalar_type());
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16);
  return c;
}

// ---- compressed layouts: the first break of torch's invariants ----

// The smallest entry that compressed_entry_violation flags, into *first (nnz when none): each
// thread finds its entry's slice by binary search (the offsets were checked on the host).
template <typename offset_t, typename index_t>
__global__ void first_flagged_entry_kernel(const offset_t* __restrict__ compressed, int64_t slices,
                                           const index_t* __restrict__ plain, int64_t plain_size,
                                           int64_t nnz, unsigned long long* first) {
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < nnz;
       p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slice = slice_of_entry(compressed, slices, p);
    if (compressed_entry_violation(compressed, slice, plain, plain_size, p) != kCompressedValid) {
      atomicMin(first, static_cast<unsigned long long>(p));
    }
  }
}

// The CPU kernel's answer: the offsets checked on the host (one copy of slices + 1 of them), the
// entries on the device, then the first flagged entry read back (three host reads in all).
at::Tensor sparse_compressed_violation_cuda(const at::Tensor& compressed_indices,
                                            const at::Tensor& plain_indices,
                                            c10::SymInt plain_size) {
  const int64_t size = check_compressed_args(compressed_indices, plain_indices, plain_size);
  const c10::cuda::CUDAGuard guard(compressed_indices.device());
  const at::Tensor compressed = compressed_indices.contiguous(), plain = plain_indices.contiguous();
  const int64_t nnz = plain.numel(), slices = compressed.numel() - 1;
  const at::Tensor offsets = compressed.cpu();
  if (const CompressedFinding found = offsets_violation(offsets, nnz); found.kind != 0) {
    return found.as_tensor();
  }
  if (nnz == 0) return CompressedFinding{}.as_tensor();
  at::Tensor first = at::full({1}, nnz, compressed.options().dtype(at::kLong));
  AT_DISPATCH_INDEX_TYPES(compressed.scalar_type(), "sparse_compressed_violation_cuda", [&] {
    using offset_t = index_t;
    const offset_t* c = compressed.const_data_ptr<offset_t>();
    AT_DISPATCH_INDEX_TYPES(plain.scalar_type(), "sparse_compressed_violation_cuda", [&] {
      first_flagged_entry_kernel<offset_t, index_t>
          <<<cuda_grid_for(nnz), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
              c, slices, plain.const_data_ptr<index_t>(), size, nnz,
              reinterpret_cast<unsigned long long*>(first.mutable_data_ptr<int64_t>()));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  const int64_t p = first.item<int64_t>();
  if (p == nnz) return CompressedFinding{}.as_tensor();
  return entry_finding(plain, size, p).as_tensor();
}

}  // namespace

// Linkage outside the anonymous namespace: register_sparse_kernels takes it as a template argument.
extern const CoalesceBackend kCudaBackend;
const CoalesceBackend kCudaBackend{&flat_keys_cuda,    nullptr,           &cuda::sort_keys,
                                   &cuda::run_offsets, &run_indices_cuda, &cuda::segment_gather_sum,
                                   &spgemm_rows_cuda};

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  register_sparse_kernels<kCudaBackend>(m);
  m.impl("sparse_compressed_violation", &sparse_compressed_violation_cuda);
}

}  // namespace torch_ragged
