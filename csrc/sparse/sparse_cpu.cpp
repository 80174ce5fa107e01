// CPU kernels of the sparse family: flattened keys, and coalesce on the segment core's sort.

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>

#include "common/parallel.h"
#include "sparse/coalesce.h"
#include "sparse/softmax.h"
#include "sparse/sparse_args.h"

namespace torch_ragged {
namespace {

at::Tensor flat_keys_cpu(std::string_view op, const at::Tensor& indices, const KeyGeometry& g,
                         bool validate) {
  const at::Tensor src = indices.contiguous();
  const int64_t nnz = src.size(1);
  at::Tensor keys = at::empty({nnz}, src.options().dtype(at::kLong));
  int64_t* out = keys.mutable_data_ptr<int64_t>();
  std::atomic<bool> out_of_range{false};
  AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sparse_flat_keys_cpu", [&] {
    const index_t* idx = src.const_data_ptr<index_t>();
    at::parallel_for(0, nnz, kGrainElems / std::max(1, g.sparse_dim), [&](int64_t b, int64_t e) {
      const KeyGeometry local = g;  // a local copy: stores to `out` cannot alias it
      bool all_in_range = true;
      for (int64_t i = b; i < e; ++i) {
        bool in_range;
        out[i] = flat_key(local, idx, nnz, i, in_range);
        all_in_range = all_in_range && in_range;
      }
      if (!all_in_range) out_of_range = true;
    });
  });
  if (validate && out_of_range) {
    raise_out_of_range(op, indices, at::IntArrayRef(g.size, g.sparse_dim));
  }
  return keys;
}

}  // namespace

// Linkage outside the anonymous namespace: register_sparse_kernels takes it as a template argument.
extern const CoalesceBackend kCpuBackend;
const CoalesceBackend kCpuBackend{&flat_keys_cpu, &cpu::sort_keys, &cpu::run_offsets,
                                  &cpu::segment_gather_sum};

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) { register_sparse_kernels<kCpuBackend>(m); }

}  // namespace torch_ragged
