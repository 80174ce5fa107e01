// CUDA kernels of the segmented scans and segment_arange: thin shells over segment_index.h's scan
// bodies (one thread per (chunk, column): consecutive threads take consecutive columns of a
// chunk), which the host tests run over the same launch grids and compare with the CPU kernels bit
// for bit. The plan of levels is built on the host (first_idx read there: one synchronisation
// when it lives on the GPU) and uploaded in one copy.

#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <vector>

#include "common/checks.h"
#include "common/parallel.h"
#include "scratch.cuh"
#include "segment/offsets.h"
#include "segment/scan.h"
#include "segment/segment_ops.h"

namespace torch_ragged {
namespace {

cudaStream_t stream() { return at::cuda::getCurrentCUDAStream(); }

template <typename Scan, typename Load>
__global__ void scan_tails_kernel(ScanLevel level, int64_t width, Load load,
                                  typename Scan::Acc* tails) {
  const int64_t total = level.chunks() * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    scan_chunk_tail<Scan>(level, t / width, t % width, width, load, tails);
  }
}

template <typename Scan, typename Load, typename Write>
__global__ void scan_rows_kernel(ScanLevel level, int64_t width, Load load, Write write,
                                 const typename Scan::Acc* carries, bool exclusive) {
  const int64_t total = level.chunks() * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    scan_chunk_rows<Scan>(level, t / width, t % width, width, load, write, carries, exclusive);
  }
}

// scan_on_cpu's launches: the tails level by level upwards, then each level's items downwards.
template <typename Scan, typename Load, typename Write>
void scan_on_gpu(const ScanPlan& plan, const int64_t* plan_on_device, int64_t width,
                 const at::Tensor& like, const Load& load, const Write& write, bool exclusive) {
  using Acc = typename Scan::Acc;
  const int levels = static_cast<int>(plan.levels.size());
  std::vector<std::pair<at::Tensor, Acc*>> tails(levels), scanned(levels);
  for (int l = 0; l + 1 < levels; ++l) {
    const ScanLevel level = plan.view(l, plan_on_device);
    const int64_t threads = level.chunks() * width;
    tails[l] = cuda::scratch_buffer<Acc>(like, threads);
    if (l == 0) {
      scan_tails_kernel<Scan><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
          level, width, load, tails[l].second);
    } else {
      scan_tails_kernel<Scan><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
          level, width, ScanItems<Acc>{tails[l - 1].second, width}, tails[l].second);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  for (int l = levels - 1; l >= 1; --l) {
    const ScanLevel level = plan.view(l, plan_on_device);
    const int64_t threads = level.chunks() * width;
    scanned[l] = cuda::scratch_buffer<Acc>(like, level.items * width);
    const Acc* carries = l + 1 < levels ? scanned[l + 1].second : nullptr;
    scan_rows_kernel<Scan><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
        level, width, ScanItems<Acc>{tails[l - 1].second, width},
        WriteScanItems<Acc>{scanned[l].second, width}, carries, false);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const ScanLevel level = plan.view(0, plan_on_device);
  const int64_t threads = level.chunks() * width;
  scan_rows_kernel<Scan><<<cuda_grid_for(threads), kCudaThreads, 0, stream()>>>(
      level, width, load, write, levels > 1 ? scanned[1].second : nullptr, exclusive);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor upload_plan(const ScanPlan& plan, at::Device device) {
  return at::tensor(plan.packed(), at::kLong).pin_memory().to(device, /*non_blocking=*/true);
}

template <template <typename> class Rule>
at::Tensor value_scan_cuda(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                           SegmentDtypes dtypes, bool promote_integers, bool reverse,
                           bool exclusive) {
  const ScanInput in = scan_input(op, data, first_idx, dtypes, promote_integers);
  const c10::cuda::CUDAGuard guard(in.data.device());
  at::Tensor out = at::empty(in.data.sizes(), in.data.options());
  if (out.numel() == 0) return out;
  const ScanPlan plan = scan_plan(in.offsets, in.width, reverse);
  const at::Tensor on_device = upload_plan(plan, in.data.device());
  const ScanOrder order = ScanOrder::of(in.data.size(0), reverse);
  dispatch_value_scan<Rule<float>::kFloatingOnly>(in.data.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using Scan = Rule<scalar_t>;
    scan_on_gpu<Scan>(
        plan, on_device.const_data_ptr<int64_t>(), in.width, in.data,
        LoadScanRows<Scan, scalar_t>{in.data.const_data_ptr<scalar_t>(), in.width, order},
        WriteScanValues<Scan, scalar_t>{out.mutable_data_ptr<scalar_t>(), in.width, order},
        exclusive);
  });
  return out;
}

at::Tensor segment_cumsum_cuda(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                               bool exclusive) {
  return value_scan_cuda<SumScan>("segment_cumsum", data, first_idx, SegmentDtypes::kSummable, true,
                                  reverse, exclusive);
}

at::Tensor segment_cumprod_cuda(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                                bool exclusive) {
  return value_scan_cuda<ProdScan>("segment_cumprod", data, first_idx, SegmentDtypes::kSummable,
                                   true, reverse, exclusive);
}

at::Tensor segment_logcumsumexp_cuda(const at::Tensor& data, const at::Tensor& first_idx,
                                     bool reverse) {
  return value_scan_cuda<LogAddExpScan>("segment_logcumsumexp", data, first_idx,
                                        SegmentDtypes::kFloating, false, reverse, false);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> cum_extremum_cuda(const at::Tensor& data,
                                                     const at::Tensor& first_idx, bool reverse) {
  const ScanInput in = scan_input(kMax ? "segment_cummax" : "segment_cummin", data, first_idx,
                                  SegmentDtypes::kOrdered, false);
  const c10::cuda::CUDAGuard guard(in.data.device());
  at::Tensor values = at::empty(in.data.sizes(), in.data.options());
  at::Tensor arg = at::empty(in.data.sizes(), in.data.options().dtype(at::kLong));
  if (values.numel() == 0) return {values, arg};
  const ScanPlan plan = scan_plan(in.offsets, in.width, reverse);
  const at::Tensor on_device = upload_plan(plan, in.data.device());
  const ScanOrder order = ScanOrder::of(in.data.size(0), reverse);
  AT_DISPATCH_V2(
      in.data.scalar_type(), "segment_cum_extremum_cuda", AT_WRAP([&] {
        using Scan = ExtremumScan<scalar_t, kMax>;
        scan_on_gpu<Scan>(
            plan, on_device.const_data_ptr<int64_t>(), in.width, in.data,
            LoadScanRows<Scan, scalar_t>{in.data.const_data_ptr<scalar_t>(), in.width, order},
            WriteScanValueAndRow<scalar_t>{values.mutable_data_ptr<scalar_t>(),
                                           arg.mutable_data_ptr<int64_t>(), in.width, order},
            false);
      }),
      AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool, at::kHalf,
      at::kBFloat16);
  return {values, arg};
}

std::tuple<at::Tensor, at::Tensor> segment_cummax_cuda(const at::Tensor& data,
                                                       const at::Tensor& first_idx, bool reverse) {
  return cum_extremum_cuda<true>(data, first_idx, reverse);
}

std::tuple<at::Tensor, at::Tensor> segment_cummin_cuda(const at::Tensor& data,
                                                       const at::Tensor& first_idx, bool reverse) {
  return cum_extremum_cuda<false>(data, first_idx, reverse);
}

// Each row minus its segment's first row: arange minus the segment starts expanded (the row
// mover), on the device of first_idx.
at::Tensor segment_arange_cuda(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  check_index_tensor("segment_arange", "first_idx", first_idx, 1);
  TORCH_CHECK_VALUE(first_idx.numel() >= 1,
                    "torch_ragged.segment_arange: first_idx must have at least 1 entry (0)");
  const c10::cuda::CUDAGuard guard(first_idx.device());
  const at::Tensor offsets = first_idx.to(at::kLong);
  const at::Tensor starts =
      ops::segment_expand(offsets.narrow(0, 0, offsets.numel() - 1), offsets, num_rows);
  return at::arange(starts.numel(), starts.options()) - starts;
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  m.impl("segment_cumsum", &segment_cumsum_cuda);
  m.impl("segment_cumprod", &segment_cumprod_cuda);
  m.impl("segment_cummax", &segment_cummax_cuda);
  m.impl("segment_cummin", &segment_cummin_cuda);
  m.impl("segment_logcumsumexp", &segment_logcumsumexp_cuda);
  m.impl("segment_arange", &segment_arange_cuda);
}

}  // namespace torch_ragged
