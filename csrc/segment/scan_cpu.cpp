// CPU kernels of the segmented scans and segment_arange. The scans run segment_index.h's bodies
// chunk by chunk (at::parallel_for over chunks, so a huge segment uses every thread as well as
// many small ones do): the same values as the GPU's launches, bit for bit, whatever the thread
// count.

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "common/checks.h"
#include "common/parallel.h"
#include "segment/offsets.h"
#include "segment/scan.h"

namespace torch_ragged {
namespace {

// body(chunk, column) for every (chunk, column) of a level, chunks split across threads.
template <typename Body>
void for_each_chunk_column(const ScanLevel& level, int64_t width, const Body& body) {
  const int64_t chunk_elems = std::max<int64_t>(1, (int64_t{1} << level.chunk_bits) * width);
  const int64_t grain = std::max<int64_t>(1, kGrainElems / chunk_elems);
  at::parallel_for(0, level.chunks(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      for (int64_t column = 0; column < width; ++column) body(chunk, column);
    }
  });
}

// The whole scan: the tails level by level upwards, then each level's items downwards, level 0's
// through load(row, column) / write(row, column, value) (rows in scan order).
template <typename Scan, typename Load, typename Write>
void scan_on_cpu(const ScanPlan& plan, int64_t width, const Load& load, const Write& write,
                 bool exclusive) {
  using Acc = typename Scan::Acc;
  const int levels = static_cast<int>(plan.levels.size());
  std::vector<std::vector<Acc>> tails(levels);  // tails[l]: the items of level l + 1
  for (int l = 0; l + 1 < levels; ++l) {
    const ScanLevel level = plan.view(l);
    tails[l].resize(level.chunks() * width);
    Acc* out = tails[l].data();
    for_each_chunk_column(level, width, [&](int64_t chunk, int64_t column) {
      if (l == 0) {
        scan_chunk_tail<Scan>(level, chunk, column, width, load, out);
      } else {
        scan_chunk_tail<Scan>(level, chunk, column, width,
                              ScanItems<Acc>{tails[l - 1].data(), width}, out);
      }
    });
  }
  std::vector<std::vector<Acc>> scanned(levels);  // scanned[l], l >= 1: level l's inclusive scan
  for (int l = levels - 1; l >= 1; --l) {
    const ScanLevel level = plan.view(l);
    scanned[l].resize(level.items * width);
    const Acc* carries = l + 1 < levels ? scanned[l + 1].data() : nullptr;
    const ScanItems<Acc> items{tails[l - 1].data(), width};
    const WriteScanItems<Acc> write_items{scanned[l].data(), width};
    for_each_chunk_column(level, width, [&](int64_t chunk, int64_t column) {
      scan_chunk_rows<Scan>(level, chunk, column, width, items, write_items, carries, false);
    });
  }
  const Acc* carries = levels > 1 ? scanned[1].data() : nullptr;
  for_each_chunk_column(plan.view(0), width, [&](int64_t chunk, int64_t column) {
    scan_chunk_rows<Scan>(plan.view(0), chunk, column, width, load, write, carries, exclusive);
  });
}

// cumsum / cumprod / logcumsumexp: the rule's scan of every column, same shape as data.
template <template <typename> class Rule, typename Dispatch>
at::Tensor value_scan_cpu(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                          SegmentDtypes dtypes, bool promote_integers, bool reverse, bool exclusive,
                          const Dispatch& dispatch) {
  const ScanInput in = scan_input(op, data, first_idx, dtypes, promote_integers, reverse);
  at::Tensor out = at::empty(in.data.sizes(), in.data.options());
  if (out.numel() == 0) return out;
  const ScanOrder order = ScanOrder::of(in.data.size(0), reverse);
  dispatch(in.data.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using Scan = Rule<scalar_t>;
    scan_on_cpu<Scan>(
        in.plan, in.width,
        LoadScanRows<Scan, scalar_t>{in.data.const_data_ptr<scalar_t>(), in.width, order},
        WriteScanValues<Scan, scalar_t>{out.mutable_data_ptr<scalar_t>(), in.width, order},
        exclusive);
  });
  return out;
}

template <typename Body>
void dispatch_summable(at::ScalarType type, const Body& body) {
  AT_DISPATCH_V2(type, "segment_scan_cpu", AT_WRAP([&] { body(scalar_t{}); }),
                 AT_EXPAND(AT_FLOATING_TYPES), AT_EXPAND(AT_COMPLEX_TYPES), at::kLong, at::kHalf,
                 at::kBFloat16);
}

template <typename Body>
void dispatch_floating(at::ScalarType type, const Body& body) {
  AT_DISPATCH_V2(type, "segment_scan_cpu", AT_WRAP([&] { body(scalar_t{}); }),
                 AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
}

at::Tensor segment_cumsum_cpu(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                              bool exclusive) {
  return value_scan_cpu<SumScan>(
      "segment_cumsum", data, first_idx, SegmentDtypes::kSummable, true, reverse, exclusive,
      [](auto type, const auto& body) { dispatch_summable(type, body); });
}

at::Tensor segment_cumprod_cpu(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                               bool exclusive) {
  return value_scan_cpu<ProdScan>(
      "segment_cumprod", data, first_idx, SegmentDtypes::kSummable, true, reverse, exclusive,
      [](auto type, const auto& body) { dispatch_summable(type, body); });
}

at::Tensor segment_logcumsumexp_cpu(const at::Tensor& data, const at::Tensor& first_idx,
                                    bool reverse) {
  return value_scan_cpu<LogAddExpScan>(
      "segment_logcumsumexp", data, first_idx, SegmentDtypes::kFloating, false, reverse, false,
      [](auto type, const auto& body) { dispatch_floating(type, body); });
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> cum_extremum_cpu(const at::Tensor& data,
                                                    const at::Tensor& first_idx, bool reverse) {
  const ScanInput in = scan_input(kMax ? "segment_cummax" : "segment_cummin", data, first_idx,
                                  SegmentDtypes::kOrdered, false, reverse);
  at::Tensor values = at::empty(in.data.sizes(), in.data.options());
  at::Tensor arg = at::empty(in.data.sizes(), in.data.options().dtype(at::kLong));
  if (values.numel() == 0) return {values, arg};
  const ScanOrder order = ScanOrder::of(in.data.size(0), reverse);
  AT_DISPATCH_V2(
      in.data.scalar_type(), "segment_cum_extremum_cpu", AT_WRAP([&] {
        using Scan = ExtremumScan<scalar_t, kMax>;
        scan_on_cpu<Scan>(
            in.plan, in.width,
            LoadScanRows<Scan, scalar_t>{in.data.const_data_ptr<scalar_t>(), in.width, order},
            WriteScanValueAndRow<scalar_t>{values.mutable_data_ptr<scalar_t>(),
                                           arg.mutable_data_ptr<int64_t>(), in.width, order},
            false);
      }),
      AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool, at::kHalf,
      at::kBFloat16);
  return {values, arg};
}

std::tuple<at::Tensor, at::Tensor> segment_cummax_cpu(const at::Tensor& data,
                                                      const at::Tensor& first_idx, bool reverse) {
  return cum_extremum_cpu<true>(data, first_idx, reverse);
}

std::tuple<at::Tensor, at::Tensor> segment_cummin_cpu(const at::Tensor& data,
                                                      const at::Tensor& first_idx, bool reverse) {
  return cum_extremum_cpu<false>(data, first_idx, reverse);
}

at::Tensor segment_arange_cpu(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_arange";
  check_index_tensor(op, "first_idx", first_idx, 1);
  const std::vector<int64_t> offsets =
      checked_first_idx(op, first_idx, concrete_num_rows(op, num_rows));
  at::Tensor out =
      empty_output(op, "the output", {offsets.back()}, first_idx.options().dtype(at::kLong));
  int64_t* position = out.mutable_data_ptr<int64_t>();
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  // grain in segments: about kGrainElems rows per task when segments are short
  const int64_t grain =
      std::max<int64_t>(1, kGrainElems * segments / std::max<int64_t>(1, offsets.back()));
  at::parallel_for(0, segments, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t row = offsets[b]; row < offsets[b + 1]; ++row) position[row] = row - offsets[b];
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("segment_cumsum", &segment_cumsum_cpu);
  m.impl("segment_cumprod", &segment_cumprod_cpu);
  m.impl("segment_cummax", &segment_cummax_cpu);
  m.impl("segment_cummin", &segment_cummin_cpu);
  m.impl("segment_logcumsumexp", &segment_logcumsumexp_cpu);
  m.impl("segment_arange", &segment_arange_cpu);
}

}  // namespace torch_ragged
