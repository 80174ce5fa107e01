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
#include "common/cpu_clones.h"
#include "common/parallel.h"
#include "segment/offsets.h"
#include "segment/scan.h"

namespace torch_ragged {
namespace {

// Chunks are folded kLanes at a time where they can be: a chunk's fold is one dependent chain
// (each add waits for the one before), so a thread walking one chunk at a time runs at the
// latency of one add per row; kLanes chunks' chains interleaved run at its throughput. Only whole
// chunks (full size, inside one segment: no segment starts in them) go in groups; the arithmetic
// of each chunk is scan_chunk_tail's / scan_chunk_rows' own, so the bits are the same.
constexpr int kLanes = 8;

bool whole_chunks(const ScanLevel& level, int64_t first, int64_t count) {
  const int64_t rows = int64_t{1} << level.chunk_bits;
  if (level.end(first + count - 1) - level.begin(first + count - 1) != rows) return false;
  for (int64_t chunk = first; chunk < first + count; ++chunk) {
    if (level.chunk_first_segment[chunk] != level.chunk_last_segment[chunk]) return false;
  }
  return true;
}

// group(first, column) for kLanes whole chunks from `first`, one(chunk, column) for the others;
// chunks split across threads.
template <typename Group, typename One>
void for_each_chunk_column(const ScanLevel& level, int64_t width, const Group& group,
                           const One& one) {
  const int64_t chunk_elems = std::max<int64_t>(1, (int64_t{1} << level.chunk_bits) * width);
  const int64_t grain = std::max<int64_t>(kLanes, kGrainElems / chunk_elems);
  at::parallel_for(0, level.chunks(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end;) {
      if (chunk + kLanes <= end && whole_chunks(level, chunk, kLanes)) {
        for (int64_t column = 0; column < width; ++column) group(chunk, column);
        chunk += kLanes;
      } else {
        for (int64_t column = 0; column < width; ++column) one(chunk, column);
        ++chunk;
      }
    }
  });
}

// scan_chunk_tail of kLanes whole chunks from `first`, interleaved.
template <typename Scan, typename Load>
TORCH_RAGGED_CPU_CLONES void whole_chunk_tails(const ScanLevel& level, int64_t first,
                                               int64_t column, int64_t width, const Load& load,
                                               typename Scan::Acc* tails) {
  typename Scan::Acc acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = Scan::identity();
  const int64_t rows = int64_t{1} << level.chunk_bits, begin = level.begin(first);
  for (int64_t j = 0; j < rows; ++j) {
    for (int k = 0; k < kLanes; ++k)
      acc[k] = Scan::fold(acc[k], load(begin + k * rows + j, column));
  }
  for (int k = 0; k < kLanes; ++k) {
    tails[(first + k) * width + column] = level.continues(first + k) ? acc[k] : Scan::identity();
  }
}

// scan_chunk_rows of kLanes whole chunks from `first`, interleaved.
template <typename Scan, typename Load, typename Write>
TORCH_RAGGED_CPU_CLONES void whole_chunk_rows(const ScanLevel& level, int64_t first, int64_t column,
                                              int64_t width, const Load& load, const Write& write,
                                              const typename Scan::Acc* carries, bool exclusive) {
  using Acc = typename Scan::Acc;
  Acc acc[kLanes];
  const int64_t rows = int64_t{1} << level.chunk_bits, begin = level.begin(first);
  for (int k = 0; k < kLanes; ++k) {
    const int64_t chunk = first + k;
    const bool carried = carries != nullptr &&
                         level.first_idx[level.chunk_first_segment[chunk]] < level.begin(chunk);
    acc[k] = carried ? carries[(chunk - 1) * width + column] : Scan::identity();
  }
  for (int64_t j = 0; j < rows; ++j) {
    for (int k = 0; k < kLanes; ++k) {
      const int64_t item = begin + k * rows + j;
      const Acc value = load(item, column);
      if (exclusive) write(item, column, acc[k]);
      acc[k] = Scan::fold(acc[k], value);
      if (!exclusive) write(item, column, acc[k]);
    }
  }
}

// The tails of one level (its chunks' items of the level above).
template <typename Scan, typename Load>
void level_tails(const ScanLevel& level, int64_t width, const Load& load,
                 typename Scan::Acc* tails) {
  for_each_chunk_column(
      level, width,
      [&](int64_t first, int64_t column) {
        whole_chunk_tails<Scan>(level, first, column, width, load, tails);
      },
      [&](int64_t chunk, int64_t column) {
        scan_chunk_tail<Scan>(level, chunk, column, width, load, tails);
      });
}

// The rows (items) of one level.
template <typename Scan, typename Load, typename Write>
void level_rows(const ScanLevel& level, int64_t width, const Load& load, const Write& write,
                const typename Scan::Acc* carries, bool exclusive) {
  for_each_chunk_column(
      level, width,
      [&](int64_t first, int64_t column) {
        whole_chunk_rows<Scan>(level, first, column, width, load, write, carries, exclusive);
      },
      [&](int64_t chunk, int64_t column) {
        scan_chunk_rows<Scan>(level, chunk, column, width, load, write, carries, exclusive);
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
    if (l == 0) {
      level_tails<Scan>(level, width, load, tails[l].data());
    } else {
      level_tails<Scan>(level, width, ScanItems<Acc>{tails[l - 1].data(), width}, tails[l].data());
    }
  }
  std::vector<std::vector<Acc>> scanned(levels);  // scanned[l], l >= 1: level l's inclusive scan
  for (int l = levels - 1; l >= 1; --l) {
    const ScanLevel level = plan.view(l);
    scanned[l].resize(level.items * width);
    level_rows<Scan>(level, width, ScanItems<Acc>{tails[l - 1].data(), width},
                     WriteScanItems<Acc>{scanned[l].data(), width},
                     l + 1 < levels ? scanned[l + 1].data() : nullptr, false);
  }
  level_rows<Scan>(plan.view(0), width, load, write, levels > 1 ? scanned[1].data() : nullptr,
                   exclusive);
}

// cumsum / cumprod / logcumsumexp: the rule's scan of every column, same shape as data.
template <template <typename> class Rule>
at::Tensor value_scan_cpu(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                          SegmentDtypes dtypes, bool promote_integers, bool reverse,
                          bool exclusive) {
  const ScanInput in = scan_input(op, data, first_idx, dtypes, promote_integers);
  at::Tensor out = at::empty(in.data.sizes(), in.data.options());
  if (out.numel() == 0) return out;
  const ScanOrder order = ScanOrder::of(in.data.size(0), reverse);
  dispatch_value_scan<Rule<float>::kFloatingOnly>(in.data.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using Scan = Rule<scalar_t>;
    scan_on_cpu<Scan>(
        scan_plan(in.offsets, in.width, reverse), in.width,
        LoadScanRows<Scan, scalar_t>{in.data.const_data_ptr<scalar_t>(), in.width, order},
        WriteScanValues<Scan, scalar_t>{out.mutable_data_ptr<scalar_t>(), in.width, order},
        exclusive);
  });
  return out;
}

at::Tensor segment_cumsum_cpu(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                              bool exclusive) {
  return value_scan_cpu<SumScan>("segment_cumsum", data, first_idx, SegmentDtypes::kSummable, true,
                                 reverse, exclusive);
}

at::Tensor segment_cumprod_cpu(const at::Tensor& data, const at::Tensor& first_idx, bool reverse,
                               bool exclusive) {
  return value_scan_cpu<ProdScan>("segment_cumprod", data, first_idx, SegmentDtypes::kSummable,
                                  true, reverse, exclusive);
}

at::Tensor segment_logcumsumexp_cpu(const at::Tensor& data, const at::Tensor& first_idx,
                                    bool reverse) {
  return value_scan_cpu<LogAddExpScan>("segment_logcumsumexp", data, first_idx,
                                       SegmentDtypes::kFloating, false, reverse, false);
}

// cummax / cummin are exact: any grouping of the rows gives the same values and rows, so the CPU
// walks each segment in scan order (segments split across threads, by rows) instead of the plan's
// two passes: one read and one write per element (the plan's walk, with its Acc of value and row
// per step, ran at 0.3x a loop of torch.cummax over 8 long members). The GPU's bodies give the
// same result (tests/cpp/test_segment_scan_emulation.cpp).
template <typename scalar_t, bool kMax>
void cum_extremum_of_segments(const scalar_t* data, int64_t width,
                              const std::vector<int64_t>& offsets, bool reverse, scalar_t* values,
                              int64_t* arg) {
  using Scan = ExtremumScan<scalar_t, kMax>;
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  const int64_t elements = std::max<int64_t>(1, offsets.back() * width);
  const int64_t grain = std::max<int64_t>(1, kGrainElems * segments / elements);
  at::parallel_for(0, segments, grain, [&](int64_t begin, int64_t end) {
    std::vector<scalar_t> best(width);
    std::vector<int64_t> best_row(width);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t lo = offsets[b], hi = offsets[b + 1];
      if (lo == hi) continue;
      const int64_t step = reverse ? -1 : 1, first = reverse ? hi - 1 : lo;
      for (int64_t n = 0, row = first; n < hi - lo; ++n, row += step) {
        const scalar_t* x = data + row * width;
        for (int64_t c = 0; c < width; ++c) {
          if (n == 0 || Scan::takes(x[c], best[c])) {
            best[c] = x[c];
            best_row[c] = row;
          }
          values[row * width + c] = best[c];
          arg[row * width + c] = best_row[c];
        }
      }
    }
  });
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> cum_extremum_cpu(const at::Tensor& data,
                                                    const at::Tensor& first_idx, bool reverse) {
  const ScanInput in = scan_input(kMax ? "segment_cummax" : "segment_cummin", data, first_idx,
                                  SegmentDtypes::kOrdered, false);
  at::Tensor values = at::empty(in.data.sizes(), in.data.options());
  at::Tensor arg = at::empty(in.data.sizes(), in.data.options().dtype(at::kLong));
  if (values.numel() == 0) return {values, arg};
  AT_DISPATCH_V2(in.data.scalar_type(), "segment_cum_extremum_cpu", AT_WRAP([&] {
                   cum_extremum_of_segments<scalar_t, kMax>(
                       in.data.const_data_ptr<scalar_t>(), in.width, in.offsets, reverse,
                       values.mutable_data_ptr<scalar_t>(), arg.mutable_data_ptr<int64_t>());
                 }),
                 AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool,
                 at::kHalf, at::kBFloat16);
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
  RowsOutput rows = rows_output("segment_arange", first_idx, num_rows);
  const std::vector<int64_t>& offsets = rows.offsets;
  at::Tensor& out = rows.out;
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
