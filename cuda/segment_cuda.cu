// CUDA kernels of the segment core: thin shells over segment/segment_index.h's bodies (the
// reduction tree, its merges and row maps), which the host tests run over the same launch grid
// and compare with the CPU kernels bit for bit. One thread per (tree node, column): consecutive
// threads read consecutive columns of a row (coalesced when the width is large); no atomics,
// deterministic, the CPU's bits.
//
// first_idx on the CPU is checked there and uploaded asynchronously (pinned); first_idx on the GPU
// is checked by a device-side assert kernel (as torch's indexing kernels do), so reductions never
// synchronise with the host. segment_expand / segment_ids read first_idx[-1] on the host unless
// num_rows is given.

#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "common/checks.h"
#include "common/element_type.h"
#include "common/parallel.h"
#include "cub.cuh"
#include "row_movers.cuh"
#include "scratch.cuh"
#include "segment/offsets.h"
#include "segment/scatter.h"
#include "segment/segment_args.h"
#include "segment/segment_index.h"
#include "segment/sort.h"

namespace torch_ragged {

namespace cuda {

at::Tensor offsets_from_counts(const at::Tensor& counts) {
  const at::Tensor longs = counts.to(at::kLong).contiguous();
  at::Tensor first_idx = at::zeros({longs.numel() + 1}, longs.options());
  inclusive_sum(longs.const_data_ptr<int64_t>(), first_idx.mutable_data_ptr<int64_t>() + 1,
                longs.numel());
  return first_idx;
}

}  // namespace cuda

namespace {

cudaStream_t stream() { return at::cuda::getCurrentCUDAStream(); }

// first_idx = [0, cumsum(numel_per_tensor)...] as int64 on the input's device. Validation (no
// negative count, no overflow: either shows as a decrease) reads one flag on the host.
at::Tensor get_first_idx_cuda(const at::Tensor& numel_per_tensor, bool validate) {
  check_index_tensor("get_first_idx", "numel_per_tensor", numel_per_tensor, 1);
  const c10::cuda::CUDAGuard guard(numel_per_tensor.device());
  at::Tensor first_idx = cuda::offsets_from_counts(numel_per_tensor);
  if (validate && numel_per_tensor.numel() > 0) {
    TORCH_CHECK_VALUE(
        !first_idx.diff().lt(0).any().item<bool>(),
        "torch_ragged.get_first_idx: numel_per_tensor must be non-negative and add up "
        "to at most 2^63 - 1");
  }
  return first_idx;
}

// What checked_first_idx checks on the host, as device-side asserts: first_idx_entry_error over
// the num_segments + 1 entries, grid-stride (any number of segments is checked whole).
__global__ void check_first_idx_kernel(const int64_t* first_idx, int64_t num_segments,
                                       int64_t num_rows) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b <= num_segments;
       b += int64_t{gridDim.x} * blockDim.x) {
    const FirstIdxError error = first_idx_entry_error(first_idx, num_segments, num_rows, b);
    CUDA_KERNEL_ASSERT_MSG(error != FirstIdxError::kFirstNotZero,
                           "torch_ragged: first_idx[0] must be 0");
    CUDA_KERNEL_ASSERT_MSG(error != FirstIdxError::kLastNotRows,
                           "torch_ragged: first_idx[-1] must equal the row count");
    CUDA_KERNEL_ASSERT_MSG(error != FirstIdxError::kDecreasing,
                           "torch_ragged: first_idx must be non-decreasing");
  }
}

// first_idx as int64 on `device`, checked: on the host when it lives there (then uploaded without
// blocking), else on the device. num_rows: the row count first_idx must end at.
at::Tensor checked_first_idx_on_device(std::string_view op, const at::Tensor& first_idx,
                                       int64_t num_rows, at::Device device, bool rows_from_data) {
  if (first_idx.is_cpu()) {
    const std::vector<int64_t> offsets = checked_first_idx(
        op, first_idx, rows_from_data ? std::nullopt : std::optional<int64_t>(num_rows));
    if (rows_from_data) check_last_offset_is_rows(op, offsets.back(), num_rows);
    return at::tensor(offsets, at::kLong).pin_memory().to(device, /*non_blocking=*/true);
  }
  at::Tensor offsets = first_idx.to(at::kLong).contiguous();
  const int64_t segments = offsets.numel() - 1;
  check_first_idx_kernel<<<cuda_grid_for(segments + 1), kCudaThreads, 0, stream()>>>(
      offsets.const_data_ptr<int64_t>(), segments, num_rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return offsets;
}

// The checked segments of `data` on its device, with that device made current. The arguments are
// checked before the guard is built: CPU data with a CUDA index dispatches here, and a CUDAGuard
// on a CPU device would throw torch's raw error instead of the check's ValueError naming the op.
// (Members are initialised in declaration order: checked, guard, then the rest.)
struct CudaSegments {
  CudaSegments(std::string_view op, const at::Tensor& data_in, const at::Tensor& first_idx_in,
               SegmentDtypes dtypes)
      : checked((check_segment_args(op, data_in, first_idx_in, dtypes), true)),
        guard(data_in.device()),
        first_idx(
            checked_first_idx_on_device(op, first_idx_in, data_in.size(0), data_in.device(), true)),
        data(data_in.contiguous()),
        num_segments(first_idx_in.size(0) - 1),
        width(row_width(data_in)) {}

  bool checked;
  c10::cuda::CUDAGuard guard;
  at::Tensor first_idx;  // int64 on the device
  at::Tensor data;       // contiguous
  int64_t num_segments, width;

  ReductionTree tree() const {
    return ReductionTree::of(first_idx.const_data_ptr<int64_t>(), num_segments, data.size(0),
                             width);
  }
};

// ---- kernels: thin shells over segment_index.h's bodies, one thread per (node, column) ----

// One thread per entry of the tree tables (tree_table_entry), every level in one launch.
__global__ void tree_tables_kernel(ReductionTree tree, int64_t* chunk_first_segments,
                                   CrossingSegments* node_crossings) {
  const int64_t total = tree.table_entries();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    tree_table_entry(tree, i, chunk_first_segments, node_crossings);
  }
}

// `tree` with its tables filled on the device (held by `tables`): the chunks' first segments and
// every node's crossing segments, one launch for all of the tree's passes (softmax runs three) --
// one search per chunk or node, not one per (chunk, column) or per (child, column).
ReductionTree with_tree_tables(ReductionTree tree, const at::Tensor& like, at::Tensor& tables) {
  const int64_t chunks = tree.nodes(0), entries = tree.table_entries();
  if (chunks == 0) return tree;
  static_assert(sizeof(CrossingSegments) == 2 * sizeof(int64_t));
  tables = at::empty({chunks + 2 * entries}, like.options().dtype(at::kLong));
  int64_t* chunk_first = tables.mutable_data_ptr<int64_t>();
  auto* crossings = reinterpret_cast<CrossingSegments*>(chunk_first + chunks);
  tree_tables_kernel<<<cuda_grid_for(entries), kCudaThreads, 0, stream()>>>(tree, chunk_first,
                                                                            crossings);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  tree.chunk_first_segments = chunk_first;
  tree.node_crossings = crossings;
  return tree;
}

// A thread keeps kChunkLoads rows in flight, so fewer threads hide the latency: at most 48
// registers (5 blocks of 256 per SM) for accumulators of 4 bytes whose loads need no segment (at
// 56 registers, 4 blocks, benchmarks/gpu_model.py puts 100k segments of 64 columns in 4 waves of
// threads instead of 3); 64 for the others (their values or segments spilled at 48).
template <typename Reducer, typename Load>
constexpr int kChunkBlocksPerSm = sizeof(typename Reducer::Acc) <= 4 && !Load::kUsesSegment ? 5 : 4;

// kPiecesOnly: only the chunks' head and tail pieces (reduce_chunk_pieces; softmax_chunks_kernel
// computes the segments inside a chunk).
template <typename Reducer, bool kPiecesOnly, typename Load, typename Write>
__global__ void __launch_bounds__(kCudaThreads, kChunkBlocksPerSm<Reducer, Load>)
    reduce_chunks_kernel(ReductionTree tree, int64_t width, Load load, Write write,
                         typename Reducer::Acc* heads, typename Reducer::Acc* tails) {
  const int64_t total = tree.nodes(0) * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    if constexpr (kPiecesOnly) {
      reduce_chunk_pieces<Reducer>(tree, t / width, t % width, width, load, heads, tails);
    } else {
      reduce_chunk<Reducer>(tree, t / width, t % width, width, load, write, heads, tails);
    }
  }
}

template <typename Reducer, typename Write>
__global__ void merge_nodes_kernel(ReductionTree tree, int level, int64_t width, Write write,
                                   const CrossingSegments* child_crossing,
                                   const typename Reducer::Acc* child_heads,
                                   const typename Reducer::Acc* child_tails,
                                   typename Reducer::Acc* heads, typename Reducer::Acc* tails) {
  const int64_t total = tree.nodes(level) * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    merge_node<Reducer>(tree, level, t / width, t % width, width, child_crossing, child_heads,
                        child_tails, write, heads, tails);
  }
}

template <typename Reducer, typename Write>
__global__ void write_empty_segments_kernel(ReductionTree tree, int64_t width, Write write) {
  const int64_t total = tree.num_segments * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    write_if_empty<Reducer>(tree, t / width, t % width, write);
  }
}

// The tree's launches (tree_launches: the chunks, a merge per level, the empty segments), each
// reading the partials of the one before.
template <typename Reducer, bool kPiecesOnly = false, typename Load, typename Write>
void reduce_tree(const ReductionTree& tree, int64_t width, const at::Tensor& like, const Load& load,
                 const Write& write) {
  using Acc = typename Reducer::Acc;
  TORCH_INTERNAL_ASSERT(tree.num_rows == 0 || tree.node_crossings != nullptr,
                        "reduce_tree: the tree's tables are not filled (with_tree_tables)");
  // Partials of the level below and of the current one; the caching allocator keeps a freed
  // buffer from reuse until the stream's earlier work on it is done.
  std::pair<at::Tensor, Acc*> heads, tails, below_heads, below_tails;
  for (const TreeLaunch& launch : tree_launches(tree, width)) {
    const int64_t threads = launch.threads;
    // A pieces-only tree's statistics serve its rows' map, and an empty segment has no row.
    if (kPiecesOnly && launch.kind == TreeLaunch::kEmptySegments) continue;
    if (launch.kind == TreeLaunch::kEmptySegments) {
      write_empty_segments_kernel<Reducer>
          <<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(tree, width, write);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      continue;
    }
    below_heads = std::move(heads);
    below_tails = std::move(tails);
    heads = cuda::scratch_buffer<Acc>(like, threads);
    tails = cuda::scratch_buffer<Acc>(like, threads);
    if (launch.kind == TreeLaunch::kChunks) {
      reduce_chunks_kernel<Reducer, kPiecesOnly>
          <<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(tree, width, load, write,
                                                                  heads.second, tails.second);
    } else {
      merge_nodes_kernel<Reducer><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
          tree, launch.level, width, write, tree.crossings_of(launch.level - 1), below_heads.second,
          below_tails.second, heads.second, tails.second);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// Map: SoftmaxOutput (the forward) or SoftmaxGradInput (the backward); softmax_chunk's overloads.
template <typename Map>
__global__ void softmax_chunks_kernel(ReductionTree tree, int64_t width, Map map) {
  const int64_t total = tree.nodes(0) * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    softmax_chunk(tree, t / width, t % width, map);
  }
}

// After the pieces-only trees of `tree`: one thread per (chunk, column).
template <typename Map>
void softmax_chunks(const ReductionTree& tree, int64_t width, const Map& map) {
  const int64_t threads = tree.nodes(0) * width;
  if (threads == 0) return;
  softmax_chunks_kernel<<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(tree, width, map);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- reductions ----

template <bool kMean>
at::Tensor sum_or_mean_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  constexpr std::string_view op = kMean ? "segment_mean" : "segment_sum";
  const CudaSegments s(op, data, first_idx, SegmentDtypes::kSummable);
  at::Tensor out = at::empty(per_segment_sizes(data, s.num_segments), data.options());
  at::Tensor tables;
  const ReductionTree tree = with_tree_tables(s.tree(), data, tables);
  AT_DISPATCH_V2(data.scalar_type(), "segment_sum_cuda", AT_WRAP([&] {
                   using acc_t = sum_acc_t<scalar_t>;
                   reduce_tree<SumReducer<acc_t>>(
                       tree, s.width, data,
                       LoadRows<scalar_t, acc_t>{s.data.const_data_ptr<scalar_t>(), s.width},
                       WriteSum<scalar_t, kMean>{out.mutable_data_ptr<scalar_t>(), s.width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor segment_sum_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  return sum_or_mean_cuda<false>(data, first_idx);
}

at::Tensor segment_mean_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  return sum_or_mean_cuda<true>(data, first_idx);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> extremum_cuda(const at::Tensor& data,
                                                 const at::Tensor& first_idx) {
  const CudaSegments s(kMax ? "segment_max" : "segment_min", data, first_idx,
                       SegmentDtypes::kOrdered);
  const std::vector<int64_t> sizes = per_segment_sizes(data, s.num_segments);
  at::Tensor values = at::empty(sizes, data.options());
  at::Tensor arg = at::empty(sizes, data.options().dtype(at::kLong));
  at::Tensor tables;
  const ReductionTree tree = with_tree_tables(s.tree(), data, tables);
  AT_DISPATCH_V2(data.scalar_type(), "segment_extremum_cuda", AT_WRAP([&] {
                   using acc_t = at::opmath_type<scalar_t>;
                   reduce_tree<ExtremumReducer<acc_t, kMax>>(
                       tree, s.width, data,
                       LoadRows<scalar_t>{s.data.const_data_ptr<scalar_t>(), s.width},
                       WriteExtremum<scalar_t>{values.mutable_data_ptr<scalar_t>(),
                                               arg.mutable_data_ptr<int64_t>(), s.width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool,
                 at::kHalf, at::kBFloat16);
  return {values, arg};
}

std::tuple<at::Tensor, at::Tensor> segment_max_cuda(const at::Tensor& data,
                                                    const at::Tensor& first_idx) {
  return extremum_cuda<true>(data, first_idx);
}

std::tuple<at::Tensor, at::Tensor> segment_min_cuda(const at::Tensor& data,
                                                    const at::Tensor& first_idx) {
  return extremum_cuda<false>(data, first_idx);
}

// ---- softmax: the segments' maxima (exact), the sums of exp(x - shift) by the tree, one map ----
// The trees fold only the chunks' head and tail pieces (the segments crossing chunk edges); a
// segment inside a chunk is computed whole by softmax_chunks_kernel, which also maps the crossing
// segments' rows with the trees' statistics: the data read once from memory, not three times.

template <bool kLog>
at::Tensor softmax_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  const CudaSegments s(kLog ? "segment_log_softmax" : "segment_softmax", data, first_idx,
                       SegmentDtypes::kFloating);
  at::Tensor out = at::empty_like(s.data);
  AT_DISPATCH_V2(
      data.scalar_type(), "segment_softmax_cuda", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        const auto acc_options = data.options().dtype(c10::CppTypeToScalarType<acc_t>::value);
        at::Tensor shifts = at::empty({s.num_segments, s.width}, acc_options);
        at::Tensor divisors = at::empty({s.num_segments, s.width}, acc_options);
        const scalar_t* in = s.data.const_data_ptr<scalar_t>();
        at::Tensor tables;
        const ReductionTree tree = with_tree_tables(s.tree(), data, tables);
        reduce_tree<ExtremumReducer<acc_t, true>, /*kPiecesOnly=*/true>(
            tree, s.width, data, LoadRows<scalar_t>{in, s.width},
            WriteShift<acc_t>{shifts.mutable_data_ptr<acc_t>(), s.width});
        reduce_tree<SumReducer<acc_t>, /*kPiecesOnly=*/true>(
            tree, s.width, data,
            LoadShiftedExp<scalar_t>{in, shifts.const_data_ptr<acc_t>(), s.width},
            WriteSoftmaxDivisor<acc_t, kLog>{divisors.mutable_data_ptr<acc_t>(), s.width});
        softmax_chunks(tree, s.width,
                       SoftmaxOutput<scalar_t, kLog>{in, shifts.const_data_ptr<acc_t>(),
                                                     divisors.const_data_ptr<acc_t>(),
                                                     out.mutable_data_ptr<scalar_t>(), s.width});
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out.view(data.sizes());
}

at::Tensor segment_softmax_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  return softmax_cuda<false>(data, first_idx);
}

at::Tensor segment_log_softmax_cuda(const at::Tensor& data, const at::Tensor& first_idx) {
  return softmax_cuda<true>(data, first_idx);
}

at::Tensor segment_softmax_backward_cuda(const at::Tensor& grad_output, const at::Tensor& output,
                                         const at::Tensor& first_idx, bool log) {
  constexpr std::string_view op = "segment_softmax_backward";
  const CudaSegments s(op, output, first_idx, SegmentDtypes::kFloating);
  TORCH_CHECK_VALUE(grad_output.sizes() == output.sizes() &&
                        grad_output.scalar_type() == output.scalar_type() &&
                        grad_output.device() == output.device(),
                    "torch_ragged.", op, ": grad_output must match output (shape ", output.sizes(),
                    ", dtype ", output.scalar_type(), ", device ", output.device(), ")");
  const at::Tensor grad = grad_output.contiguous();
  at::Tensor grad_input = at::empty_like(s.data);
  AT_DISPATCH_V2(
      output.scalar_type(), "segment_softmax_backward_cuda", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        at::Tensor sum = at::empty({s.num_segments, s.width},
                                   output.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
        const scalar_t* g = grad.const_data_ptr<scalar_t>();
        const scalar_t* y = s.data.const_data_ptr<scalar_t>();
        at::Tensor tables;
        const ReductionTree tree = with_tree_tables(s.tree(), output, tables);
        // As the forward: the tree over the chunks' head and tail pieces, then one kernel for
        // every segment inside a chunk and the crossing pieces' rows.
        reduce_tree<SumReducer<acc_t>, /*kPiecesOnly=*/true>(
            tree, s.width, output, LoadGradTerm<scalar_t>{g, log ? nullptr : y, s.width},
            WriteAcc<acc_t>{sum.mutable_data_ptr<acc_t>(), s.width});
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        if (log) {
          softmax_chunks(
              tree, s.width,
              SoftmaxGradInput<scalar_t, true>{g, y, sum.const_data_ptr<acc_t>(), gi, s.width});
        } else {
          softmax_chunks(
              tree, s.width,
              SoftmaxGradInput<scalar_t, false>{g, y, sum.const_data_ptr<acc_t>(), gi, s.width});
        }
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return grad_input.view(output.sizes());
}

// ---- expand, ids ----

// Output row r of segment k (first_idx: the output's offsets, on the device) is the input row
// Source<Chunk>{in, chunks, tables...}(k, r) of `values`.
template <template <typename> class Source, typename... Tables>
void move_segment_rows_on_gpu(std::string_view op, const at::Tensor& values, at::Tensor& out,
                              const at::Tensor& first_idx, Tables... tables) {
  const int64_t rows = out.size(0);
  const int64_t row_bytes = rows == 0 ? 0 : out.numel() / rows * out.element_size();
  if (row_bytes == 0) return;  // no rows, or zero-width rows
  const at::Tensor in = values.contiguous();
  const int chunk_bytes = widest_chunk_bytes(row_bytes, {in.const_data_ptr(), out.data_ptr()});
  with_element_type(op, chunk_bytes, [&](auto chunk) {
    using Chunk = decltype(chunk);
    const int64_t chunks = row_bytes / chunk_bytes;
    cuda::launch_move_segment_rows(
        first_idx.const_data_ptr<int64_t>(), first_idx.numel() - 1, rows,
        static_cast<Chunk*>(out.mutable_data_ptr()), chunks,
        Source<Chunk>{static_cast<const Chunk*>(in.const_data_ptr()), chunks, tables...});
  });
}

void expand_rows(const at::Tensor& values, at::Tensor& out, const at::Tensor& first_idx) {
  move_segment_rows_on_gpu<SegmentRow>("segment_expand", values, out, first_idx);
}

// first_idx on `device` and the row count: given (checked on the device when first_idx lives
// there), or read with first_idx on the host (one device-to-host copy).
std::pair<at::Tensor, int64_t> expand_offsets(std::string_view op, const at::Tensor& first_idx,
                                              const std::optional<c10::SymInt>& num_rows,
                                              at::Device device) {
  const std::optional<int64_t> rows = concrete_num_rows(op, num_rows);
  if (first_idx.is_cpu() || !rows.has_value()) {
    const std::vector<int64_t> offsets = checked_first_idx(op, first_idx, rows);
    return {at::tensor(offsets, at::kLong).pin_memory().to(device, /*non_blocking=*/true),
            offsets.back()};
  }
  return {checked_first_idx_on_device(op, first_idx, *rows, device, false), *rows};
}

at::Tensor segment_expand_cuda(const at::Tensor& values, const at::Tensor& first_idx,
                               std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_expand";
  check_defined(op, "values", values);
  check_first_idx_tensor(op, first_idx, values);
  TORCH_CHECK_VALUE(values.is_cuda(), "torch_ragged.", op,
                    ": values must be on the GPU when first_idx is, got ", values.device());
  const c10::cuda::CUDAGuard guard(values.device());
  const auto [offsets, rows] = expand_offsets(op, first_idx, num_rows, values.device());
  at::Tensor out = empty_output(
      op, "the output", expanded_sizes(op, values, first_idx.size(0) - 1, rows), values.options());
  expand_rows(values.contiguous(), out, offsets);
  return out;
}

at::Tensor segment_ids_cuda(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_ids";
  check_index_tensor(op, "first_idx", first_idx, 1);
  TORCH_CHECK_VALUE(first_idx.size(0) >= 1, "torch_ragged.", op,
                    ": first_idx needs at least 1 entry (num_segments + 1), got 0");
  const c10::cuda::CUDAGuard guard(first_idx.device());
  const auto [offsets, rows] = expand_offsets(op, first_idx, num_rows, first_idx.device());
  const auto longs = first_idx.options().dtype(at::kLong);
  at::Tensor out = empty_output(op, "the output", {rows}, longs);
  expand_rows(at::arange(first_idx.size(0) - 1, longs), out, offsets);
  return out;
}

// ---- index select ----

// rows x row_elems elements: output row r of selected segment k is row source_row[k] + r -
// out_first_idx[k] of `in` (device tables).
void copy_selected_rows(const at::Tensor& values, at::Tensor& out, const at::Tensor& out_first_idx,
                        const at::Tensor& source_row) {
  move_segment_rows_on_gpu<SelectedRow>("ragged_index_select", values, out, out_first_idx,
                                        out_first_idx.const_data_ptr<int64_t>(),
                                        source_row.const_data_ptr<int64_t>());
}

at::Tensor upload_longs(const std::vector<int64_t>& host, at::Device device) {
  return at::tensor(host, at::kLong).pin_memory().to(device, /*non_blocking=*/true);
}

// Host reads: none when first_idx and index are both on the CPU (the selection is computed there,
// as by the CPU kernel, and its two tables uploaded in one copy, without blocking); otherwise one,
// which fetches the count of out-of-range index entries with the output's offsets (first_idx on the
// CPU: all of them, returned there) or its row count (first_idx on the GPU). A CPU index beside a
// GPU first_idx is uploaded without blocking.
std::tuple<at::Tensor, at::Tensor> ragged_index_select_cuda(const at::Tensor& values,
                                                            const at::Tensor& first_idx,
                                                            const at::Tensor& index,
                                                            std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "ragged_index_select";
  const std::optional<int64_t> rows_given =
      check_index_select_args(op, values, first_idx, index, num_rows);
  TORCH_CHECK_VALUE(values.is_cuda(), "torch_ragged.", op,
                    ": values must be on the GPU when first_idx or index is, got ",
                    values.device());
  const c10::cuda::CUDAGuard guard(values.device());
  if (first_idx.is_cpu() && index.is_cpu()) {
    const auto [source_row, out_first_idx] =
        select_segments_on_host(op, first_idx, index, values.size(0));
    check_num_rows_matches(op, rows_given, out_first_idx.back());
    at::Tensor out = empty_output(op, "the output", per_segment_sizes(values, out_first_idx.back()),
                                  values.options());
    // One staging copy for both tables: [out_first_idx..., source_row...].
    std::vector<int64_t> tables(out_first_idx);
    tables.insert(tables.end(), source_row.begin(), source_row.end());
    const at::Tensor on_device = upload_longs(tables, values.device());
    const auto offsets_count = static_cast<int64_t>(out_first_idx.size());
    copy_selected_rows(values, out, on_device.narrow(0, 0, offsets_count),
                       on_device.narrow(0, offsets_count, on_device.numel() - offsets_count));
    return {out, at::tensor(out_first_idx, at::kLong)};
  }
  const int64_t segments = first_idx.size(0) - 1;
  const at::Tensor offsets =
      checked_first_idx_on_device(op, first_idx, values.size(0), values.device(), true);
  const at::Tensor picks = index.is_cpu()
                               ? index.to(at::kLong).pin_memory().to(values.device(), true)
                               : index.to(at::kLong);
  const at::Tensor out_of_range = (picks < -segments).logical_or_(picks >= segments).sum();
  // Clamped so out-of-range entries read valid offsets until the check below reports them.
  const at::Tensor wrapped = at::where(picks < 0, picks + segments, picks).clamp_(0, segments);
  const at::Tensor source_row = offsets.index_select(0, wrapped);
  const at::Tensor counts = offsets.index_select(0, (wrapped + 1).clamp_max(segments)) - source_row;
  const at::Tensor out_first_idx = cuda::offsets_from_counts(counts);
  // The one host read: [bad, offsets...] when they are returned on the CPU, else [bad, rows].
  const at::Tensor facts = first_idx.is_cpu()
                               ? at::cat({out_of_range.view({1}), out_first_idx}).cpu()
                               : at::stack({out_of_range, out_first_idx[-1]}).cpu();
  const int64_t bad = facts[0].item<int64_t>(), rows = facts[-1].item<int64_t>();
  TORCH_CHECK_INDEX(bad == 0, "torch_ragged.", op, ": ", bad,
                    " entries of index are out of range for ", segments, " segments (expected -",
                    segments, " <= index < ", segments, ")");
  check_num_rows_matches(op, rows_given, rows);
  at::Tensor out =
      empty_output(op, "the output", per_segment_sizes(values, rows), values.options());
  copy_selected_rows(values, out, out_first_idx, source_row);
  return {out, first_idx.is_cpu() ? facts.narrow(0, 1, facts.numel() - 1) : out_first_idx};
}

// ---- gathered sums and dots ----

__global__ void check_gather_range_kernel(const int64_t* index, int64_t n, int64_t rows) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    CUDA_KERNEL_ASSERT_MSG(gather_index_in_range(index, rows, i),
                           "torch_ragged: segment_gather index out of range");
  }
}

// index's values checked on the device (an assert, no host read), as torch's index_select does.
void check_gather_range_on_device(const at::Tensor& index, int64_t rows) {
  if (index.numel() == 0) return;
  check_gather_range_kernel<<<cuda_grid_for(index.numel()), kCudaThreads, 0, stream()>>>(
      index.const_data_ptr<int64_t>(), index.numel(), rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The gathered ops' index (int64, each entry a row of `data`) and first_idx (ending at the index's
// length), checked on the device: values by asserts, no host read.
struct CheckedGather {
  at::Tensor rows, offsets;
};

CheckedGather checked_gather(std::string_view op, const at::Tensor& data, const at::Tensor& index,
                             const std::optional<at::Tensor>& weight, const at::Tensor& first_idx) {
  at::Tensor rows = checked_gather_index(op, data, index, weight);
  at::Tensor offsets =
      checked_first_idx_on_device(op, first_idx, rows.numel(), data.device(), false);
  check_gather_range_on_device(rows, data.size(0));
  return {std::move(rows), std::move(offsets)};
}

at::Tensor segment_gather_sum_cuda(const at::Tensor& data, const at::Tensor& index,
                                   const std::optional<at::Tensor>& weight,
                                   const at::Tensor& first_idx) {
  constexpr std::string_view op = "segment_gather_sum";
  check_segment_args(op, data, first_idx, SegmentDtypes::kSummable);
  const c10::cuda::CUDAGuard guard(data.device());
  const auto [rows, offsets] = checked_gather(op, data, index, weight, first_idx);
  return cuda::segment_gather_sum(data, rows, weight.value_or(at::Tensor()), offsets);
}

template <typename scalar_t>
__global__ void gather_dot_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                                  const int64_t* __restrict__ index,
                                  const int64_t* __restrict__ first_idx, int64_t segments,
                                  int64_t n, int64_t width, scalar_t* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    gather_dot_entry(a, b, index, first_idx, segments, width, i, out);
  }
}

// dot(a[segment], b[rows[i]]) per entry: rows and offsets checked by the caller.
at::Tensor gather_dot(const at::Tensor& a, const at::Tensor& b, const at::Tensor& rows,
                      const at::Tensor& offsets) {
  const at::Tensor left = a.contiguous(), right = b.contiguous();
  const int64_t n = rows.numel(), width = row_width(b);
  at::Tensor out = at::empty({n}, a.options());
  if (n == 0) return out;
  AT_DISPATCH_V2(a.scalar_type(), "segment_gather_dot_cuda", AT_WRAP([&] {
                   gather_dot_kernel<scalar_t><<<cuda_grid_for(n), kCudaThreads, 0, stream()>>>(
                       left.const_data_ptr<scalar_t>(), right.const_data_ptr<scalar_t>(),
                       rows.const_data_ptr<int64_t>(), offsets.const_data_ptr<int64_t>(), a.size(0),
                       n, width, out.mutable_data_ptr<scalar_t>());
                   C10_CUDA_KERNEL_LAUNCH_CHECK();
                 }),
                 AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor segment_gather_dot_cuda(const at::Tensor& a, const at::Tensor& b,
                                   const at::Tensor& index, const at::Tensor& first_idx) {
  constexpr std::string_view op = "segment_gather_dot";
  check_dot_operands(op, "a", a, "b", b, first_idx);
  const c10::cuda::CUDAGuard guard(b.device());
  const auto [rows, offsets] = checked_gather(op, b, index, std::nullopt, first_idx);
  return gather_dot(a, b, rows, offsets);
}

// The CPU's one pass, as the two kernels in turn (the same bits as each op alone): whether a fused
// kernel pays on a GPU is for a GPU to measure.
std::tuple<at::Tensor, at::Tensor> segment_gather_sum_dot_cuda(
    const at::Tensor& data, const at::Tensor& index, const std::optional<at::Tensor>& weight,
    const at::Tensor& first_idx, const at::Tensor& other) {
  constexpr std::string_view op = "segment_gather_sum_dot";
  check_dot_operands(op, "other", other, "data", data, first_idx);
  const c10::cuda::CUDAGuard guard(data.device());
  const auto [rows, offsets] = checked_gather(op, data, index, weight, first_idx);
  return {cuda::segment_gather_sum(data, rows, weight.value_or(at::Tensor()), offsets),
          gather_dot(other, data, rows, offsets)};
}

// ---- sort by key, runs of equal keys ----

__global__ void iota_kernel(int64_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = i;
  }
}

__global__ void run_heads_kernel(const int64_t* keys, int64_t n, int64_t* heads) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    heads[i] = run_head(keys, i);
  }
}

// first_idx[slot[i]] = i at every run head; first_idx[runs] = n.
__global__ void scatter_run_starts_kernel(const int64_t* heads, const int64_t* slots, int64_t n,
                                          int64_t runs, int64_t* first_idx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    scatter_run_start(heads, slots, n, runs, first_idx, i);
  }
}

}  // namespace

namespace cuda {

KeyOrder sort_keys(const at::Tensor& keys, int key_bits) {
  const int64_t n = keys.numel();
  at::Tensor sorted = at::empty_like(keys), permutation = at::empty_like(keys);
  if (n == 0) return {sorted, permutation};
  at::Tensor identity = at::empty_like(keys);
  iota_kernel<<<cuda_grid_for(n), kCudaThreads, 0, stream()>>>(identity.mutable_data_ptr<int64_t>(),
                                                               n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // Non-negative keys: sorting their bits as unsigned is their order.
  sort_pairs(reinterpret_cast<const uint64_t*>(keys.const_data_ptr<int64_t>()),
             reinterpret_cast<uint64_t*>(sorted.mutable_data_ptr<int64_t>()),
             identity.const_data_ptr<int64_t>(), permutation.mutable_data_ptr<int64_t>(), n,
             std::max(key_bits, 1));
  return {sorted, permutation};
}

at::Tensor run_offsets(const at::Tensor& sorted_keys) {
  const int64_t n = sorted_keys.numel();
  if (n == 0) return at::zeros({1}, sorted_keys.options());
  at::Tensor heads = at::empty_like(sorted_keys), slots = at::empty_like(sorted_keys);
  run_heads_kernel<<<cuda_grid_for(n), kCudaThreads, 0, stream()>>>(
      sorted_keys.const_data_ptr<int64_t>(), n, heads.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  exclusive_sum(heads.const_data_ptr<int64_t>(), slots.mutable_data_ptr<int64_t>(), n);
  const int64_t runs = (slots[n - 1] + heads[n - 1]).item<int64_t>();  // the one host read
  at::Tensor first_idx = at::empty({runs + 1}, sorted_keys.options());
  scatter_run_starts_kernel<<<cuda_grid_for(n), kCudaThreads, 0, stream()>>>(
      heads.const_data_ptr<int64_t>(), slots.const_data_ptr<int64_t>(), n, runs,
      first_idx.mutable_data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return first_idx;
}

at::Tensor segment_gather_sum(const at::Tensor& data, const at::Tensor& index,
                              const at::Tensor& weight, const at::Tensor& first_idx) {
  const at::Tensor src = data.contiguous();
  const at::Tensor weights = weight.defined() ? weight.contiguous() : weight;
  const int64_t runs = first_idx.numel() - 1, width = row_width(data);
  const int64_t rows = index.defined() ? index.numel() : data.size(0);
  at::Tensor tables;
  const ReductionTree tree = with_tree_tables(
      ReductionTree::of(first_idx.const_data_ptr<int64_t>(), runs, rows, width), data, tables);
  at::Tensor out = at::empty(per_segment_sizes(data, runs), data.options());
  AT_DISPATCH_V2(data.scalar_type(), "segment_gather_sum_cuda", AT_WRAP([&] {
                   using acc_t = sum_acc_t<scalar_t>;
                   reduce_tree<SumReducer<acc_t>>(
                       tree, width, data,
                       LoadRows<scalar_t, acc_t>{
                           src.const_data_ptr<scalar_t>(), width,
                           index.defined() ? index.const_data_ptr<int64_t>() : nullptr,
                           weights.defined() ? weights.const_data_ptr<scalar_t>() : nullptr},
                       WriteSum<scalar_t, false>{out.mutable_data_ptr<scalar_t>(), width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
  return out;
}

}  // namespace cuda

namespace {

const GroupingBackend kCudaGrouping{&cuda::sort_keys, &cuda::run_offsets,
                                    &cuda::segment_gather_sum};

at::Tensor scatter_cuda(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                        std::optional<c10::SymInt> dim_size, c10::string_view reduce) {
  const c10::cuda::CUDAGuard guard(src.device());
  return scatter_with(kCudaGrouping, src, index, dim, dim_size, reduce);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> scatter_extremum_cuda(const at::Tensor& src,
                                                         const at::Tensor& index, int64_t dim,
                                                         std::optional<c10::SymInt> dim_size) {
  const c10::cuda::CUDAGuard guard(src.device());
  return scatter_extremum_with(kCudaGrouping, kMax, src, index, dim, dim_size);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  m.impl("get_first_idx", &get_first_idx_cuda);
  m.impl("segment_sum", &segment_sum_cuda);
  m.impl("segment_mean", &segment_mean_cuda);
  m.impl("segment_max", &segment_max_cuda);
  m.impl("segment_min", &segment_min_cuda);
  m.impl("segment_softmax", &segment_softmax_cuda);
  m.impl("segment_log_softmax", &segment_log_softmax_cuda);
  m.impl("segment_softmax_backward", &segment_softmax_backward_cuda);
  m.impl("segment_expand", &segment_expand_cuda);
  m.impl("segment_ids", &segment_ids_cuda);
  m.impl("ragged_index_select", &ragged_index_select_cuda);
  m.impl("segment_gather_sum", &segment_gather_sum_cuda);
  m.impl("segment_gather_dot", &segment_gather_dot_cuda);
  m.impl("segment_gather_sum_dot", &segment_gather_sum_dot_cuda);
  m.impl("scatter", &scatter_cuda);
  m.impl("scatter_max", &scatter_extremum_cuda<true>);
  m.impl("scatter_min", &scatter_extremum_cuda<false>);
}

}  // namespace torch_ragged
