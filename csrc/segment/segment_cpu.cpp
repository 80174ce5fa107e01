// CPU kernels of the segment core. Reductions and row maps walk fixed blocks of rows
// (segment_index.h): at::parallel_for over blocks balances by rows, so one huge segment uses every
// thread, and the summation order is independent of the thread count.

#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "common/checks.h"
#include "common/fill.h"
#include "common/parallel.h"
#include "segment/offsets.h"
#include "segment/segment_args.h"
#include "segment/segment_index.h"

namespace torch_ragged {
namespace {

// A fixed function of the width (never of the thread count): results are bitwise reproducible.
int64_t cpu_rows_per_block(int64_t width) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, width));
}

// The checked segments of `data`: first_idx on the host, data contiguous.
struct CpuSegments {
  std::vector<int64_t> first_idx;
  at::Tensor data;
  int64_t width;

  int64_t num_segments() const { return static_cast<int64_t>(first_idx.size()) - 1; }
  RowBlocks blocks() const {
    return RowBlocks{first_idx.data(), num_segments(), first_idx.back(), cpu_rows_per_block(width)};
  }
};

CpuSegments cpu_segments(std::string_view op, const at::Tensor& data, const at::Tensor& first_idx,
                         SegmentDtypes dtypes) {
  check_segment_args(op, data, first_idx, dtypes);
  std::vector<int64_t> offsets = checked_first_idx(op, first_idx, std::nullopt);
  check_last_offset_is_rows(op, offsets.back(), data);
  return CpuSegments{std::move(offsets), data.contiguous(), row_width(data)};
}

// write(b, c, reduction of load(b, row, c) over the rows of segment b, rows in b) for every
// segment and column; empty segments get the reducer's identity and count 0.
template <typename Reducer, typename Load, typename Write>
void reduce_segments(const RowBlocks& blocks, int64_t width, const Load& load, const Write& write) {
  using Acc = typename Reducer::Acc;
  const int64_t num_blocks = blocks.count();
  std::vector<Acc> heads(num_blocks * width), tails(num_blocks * width);
  at::parallel_for(0, num_blocks, 1, [&](int64_t first_block, int64_t last_block) {
    std::vector<Acc> acc(width);
    for (int64_t k = first_block; k < last_block; ++k) {
      blocks.for_each_part(k, [&](int64_t b, int64_t lo, int64_t hi, SegmentPart part) {
        std::fill(acc.begin(), acc.end(), Reducer::identity());
        for (int64_t row = lo; row < hi; ++row) {
          for (int64_t c = 0; c < width; ++c) Reducer::add(acc[c], load(b, row, c), row);
        }
        if (part == SegmentPart::kWhole) {
          const int64_t count = hi - lo;
          for (int64_t c = 0; c < width; ++c) write(b, c, acc[c], count);
        } else {
          Acc* slot = (part == SegmentPart::kHead ? heads : tails).data() + k * width;
          std::copy(acc.begin(), acc.end(), slot);
        }
      });
    }
  });
  // Segments spanning blocks: the block holding the tail merges the later heads in block order.
  at::parallel_for(0, num_blocks, 64, [&](int64_t first_block, int64_t last_block) {
    for (int64_t k = first_block; k < last_block; ++k) {
      const int64_t b = blocks.tail_segment(k);
      if (b < 0) continue;
      const int64_t last = blocks.last_block_of(b);
      const int64_t count = blocks.first_idx[b + 1] - blocks.first_idx[b];
      for (int64_t c = 0; c < width; ++c) {
        Acc acc = tails[k * width + c];
        for (int64_t j = k + 1; j <= last; ++j) Reducer::merge(acc, heads[j * width + c]);
        write(b, c, acc, count);
      }
    }
  });
  at::parallel_for(0, blocks.num_segments, kGrainElems, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (blocks.first_idx[b] != blocks.first_idx[b + 1]) continue;
      for (int64_t c = 0; c < width; ++c) write(b, c, Reducer::identity(), 0);
    }
  });
}

// map(b, row, c) for every row and column, row b's segment.
template <typename Map>
void map_rows(const RowBlocks& blocks, int64_t width, const Map& map) {
  at::parallel_for(0, blocks.count(), 1, [&](int64_t first_block, int64_t last_block) {
    for (int64_t k = first_block; k < last_block; ++k) {
      blocks.for_each_part(k, [&](int64_t b, int64_t lo, int64_t hi, SegmentPart) {
        for (int64_t row = lo; row < hi; ++row) {
          for (int64_t c = 0; c < width; ++c) map(b, row, c);
        }
      });
    }
  });
}

// ---- reductions ----

template <bool kMean>
at::Tensor sum_or_mean_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  constexpr std::string_view op = kMean ? "segment_mean" : "segment_sum";
  const CpuSegments s = cpu_segments(op, data, first_idx,
                                     kMean ? SegmentDtypes::kAveraging : SegmentDtypes::kSummable);
  at::Tensor out = at::empty(per_segment_sizes(data, s.num_segments()), data.options());
  AT_DISPATCH_V2(data.scalar_type(), "segment_sum_cpu", AT_WRAP([&] {
                   using acc_t = at::opmath_type<scalar_t>;
                   reduce_segments<SumReducer<acc_t>>(
                       s.blocks(), s.width,
                       LoadRows<scalar_t>{s.data.const_data_ptr<scalar_t>(), s.width},
                       WriteSum<scalar_t, kMean>{out.mutable_data_ptr<scalar_t>(), s.width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor segment_sum_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return sum_or_mean_cpu<false>(data, first_idx);
}

at::Tensor segment_mean_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return sum_or_mean_cpu<true>(data, first_idx);
}

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> extremum_cpu(const at::Tensor& data,
                                                const at::Tensor& first_idx) {
  const CpuSegments s =
      cpu_segments(kMax ? "segment_max" : "segment_min", data, first_idx, SegmentDtypes::kOrdered);
  const std::vector<int64_t> sizes = per_segment_sizes(data, s.num_segments());
  at::Tensor values = at::empty(sizes, data.options());
  at::Tensor arg = at::empty(sizes, data.options().dtype(at::kLong));
  AT_DISPATCH_V2(data.scalar_type(), "segment_extremum_cpu", AT_WRAP([&] {
                   using acc_t = at::opmath_type<scalar_t>;
                   reduce_segments<ExtremumReducer<acc_t, kMax>>(
                       s.blocks(), s.width,
                       LoadRows<scalar_t>{s.data.const_data_ptr<scalar_t>(), s.width},
                       WriteExtremum<scalar_t>{values.mutable_data_ptr<scalar_t>(),
                                               arg.mutable_data_ptr<int64_t>(), s.width});
                 }),
                 AT_EXPAND(AT_ALL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES), at::kBool,
                 at::kHalf, at::kBFloat16);
  return {values, arg};
}

std::tuple<at::Tensor, at::Tensor> segment_max_cpu(const at::Tensor& data,
                                                   const at::Tensor& first_idx) {
  return extremum_cpu<true>(data, first_idx);
}

std::tuple<at::Tensor, at::Tensor> segment_min_cpu(const at::Tensor& data,
                                                   const at::Tensor& first_idx) {
  return extremum_cpu<false>(data, first_idx);
}

// ---- softmax: segment max, sum of exp(x - max), normalise ----

template <bool kLog>
at::Tensor softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  const CpuSegments s = cpu_segments(kLog ? "segment_log_softmax" : "segment_softmax", data,
                                     first_idx, SegmentDtypes::kFloating);
  at::Tensor out = at::empty_like(s.data);
  AT_DISPATCH_V2(
      data.scalar_type(), "segment_softmax_cpu", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        const auto acc_options = data.options().dtype(c10::CppTypeToScalarType<acc_t>::value);
        at::Tensor max = at::empty({s.num_segments(), s.width}, acc_options);
        at::Tensor sum = at::empty({s.num_segments(), s.width}, acc_options);
        const scalar_t* in = s.data.const_data_ptr<scalar_t>();
        scalar_t* o = out.mutable_data_ptr<scalar_t>();
        const RowBlocks blocks = s.blocks();
        reduce_segments<ExtremumReducer<acc_t, true>>(
            blocks, s.width, LoadRows<scalar_t>{in, s.width},
            WriteAcc<acc_t>{max.mutable_data_ptr<acc_t>(), s.width});
        using Output = SoftmaxOutput<scalar_t, kLog>;
        reduce_segments<SumReducer<acc_t>>(
            blocks, s.width,
            LoadShiftedExp<scalar_t>{in, max.const_data_ptr<acc_t>(),
                                     Output::kTermsKept ? o : nullptr, s.width},
            WriteAcc<acc_t>{sum.mutable_data_ptr<acc_t>(), s.width});
        if (kLog) sum.log_();
        map_rows(blocks, s.width,
                 Output{in, max.const_data_ptr<acc_t>(), sum.const_data_ptr<acc_t>(), o, s.width});
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out.view(data.sizes());
}

at::Tensor segment_softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return softmax_cpu<false>(data, first_idx);
}

at::Tensor segment_log_softmax_cpu(const at::Tensor& data, const at::Tensor& first_idx) {
  return softmax_cpu<true>(data, first_idx);
}

at::Tensor segment_softmax_backward_cpu(const at::Tensor& grad_output, const at::Tensor& output,
                                        const at::Tensor& first_idx, bool log) {
  constexpr std::string_view op = "segment_softmax_backward";
  const CpuSegments s = cpu_segments(op, output, first_idx, SegmentDtypes::kFloating);
  TORCH_CHECK_VALUE(
      grad_output.sizes() == output.sizes() && grad_output.scalar_type() == output.scalar_type(),
      "torch_ragged.", op, ": grad_output must match output (shape ", output.sizes(), ", dtype ",
      output.scalar_type(), "), got shape ", grad_output.sizes(), " and dtype ",
      grad_output.scalar_type());
  const at::Tensor grad = grad_output.contiguous();
  at::Tensor grad_input = at::empty_like(s.data);
  AT_DISPATCH_V2(
      output.scalar_type(), "segment_softmax_backward_cpu", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        at::Tensor sum = at::empty({s.num_segments(), s.width},
                                   output.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
        const scalar_t* g = grad.const_data_ptr<scalar_t>();
        const scalar_t* y = s.data.const_data_ptr<scalar_t>();
        const RowBlocks blocks = s.blocks();
        reduce_segments<SumReducer<acc_t>>(blocks, s.width,
                                           LoadGradTerm<scalar_t>{g, log ? nullptr : y, s.width},
                                           WriteAcc<acc_t>{sum.mutable_data_ptr<acc_t>(), s.width});
        scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
        if (log) {
          map_rows(
              blocks, s.width,
              SoftmaxGradInput<scalar_t, true>{g, y, sum.const_data_ptr<acc_t>(), gi, s.width});
        } else {
          map_rows(
              blocks, s.width,
              SoftmaxGradInput<scalar_t, false>{g, y, sum.const_data_ptr<acc_t>(), gi, s.width});
        }
      }),
      AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return grad_input.view(output.sizes());
}

// ---- expand, ids, offsets ----

// Row r of out is row b of `values` for the segment b holding r (values contiguous).
void expand_rows(const at::Tensor& values, at::Tensor& out, const std::vector<int64_t>& first_idx) {
  const int64_t batch = static_cast<int64_t>(first_idx.size()) - 1, rows = first_idx.back();
  if (out.numel() == 0) return;  // also zero-width rows: no work per row
  const int64_t row_bytes = out.nbytes() / rows;
  const char* in = static_cast<const char*>(values.const_data_ptr());
  char* dst = static_cast<char*>(out.mutable_data_ptr());
  const int64_t grain = std::max<int64_t>(1, kGrainElems * 4 / row_bytes);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    int64_t b = segment_of_row(first_idx.data(), batch, begin);
    for (int64_t row = begin; row < end;) {
      while (first_idx[b + 1] <= row) ++b;  // skip empty segments
      const int64_t n = std::min(end, first_idx[b + 1]) - row;
      cpu::fill_pattern(dst + row * row_bytes, n, in + b * row_bytes, row_bytes);
      row += n;
    }
  });
}

std::optional<int64_t> concrete_num_rows(std::string_view op,
                                         const std::optional<c10::SymInt>& num_rows) {
  if (!num_rows.has_value()) return std::nullopt;
  const std::optional<int64_t> rows = num_rows->maybe_as_int();
  TORCH_CHECK(rows.has_value(), "torch_ragged.", op, ": num_rows must be concrete here");
  return rows;
}

at::Tensor segment_expand_cpu(const at::Tensor& values, const at::Tensor& first_idx,
                              std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_expand";
  TORCH_CHECK_TYPE(values.defined(), "torch_ragged.", op, ": values must be a tensor, got None");
  check_first_idx_tensor(op, first_idx, values);
  const std::vector<int64_t> offsets =
      checked_first_idx(op, first_idx, concrete_num_rows(op, num_rows));
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  at::Tensor out =
      at::empty(expanded_sizes(op, values, segments, offsets.back()), values.options());
  expand_rows(values.contiguous(), out, offsets);
  return out;
}

at::Tensor segment_ids_cpu(const at::Tensor& first_idx, std::optional<c10::SymInt> num_rows) {
  constexpr std::string_view op = "segment_ids";
  check_index_tensor(op, "first_idx", first_idx, 1);
  const std::vector<int64_t> offsets =
      checked_first_idx(op, first_idx, concrete_num_rows(op, num_rows));
  const int64_t segments = static_cast<int64_t>(offsets.size()) - 1;
  at::Tensor out = at::empty({offsets.back()}, first_idx.options().dtype(at::kLong));
  expand_rows(at::arange(segments, out.options()), out, offsets);
  return out;
}

at::Tensor get_first_idx_cpu(const at::Tensor& numel_per_tensor, bool validate) {
  // The scan checks as it goes; on the CPU that costs nothing, so validate=False changes nothing.
  (void)validate;
  return at::tensor(offsets_from_counts("get_first_idx", "numel_per_tensor", numel_per_tensor),
                    at::kLong);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("get_first_idx", &get_first_idx_cpu);
  m.impl("segment_sum", &segment_sum_cpu);
  m.impl("segment_mean", &segment_mean_cpu);
  m.impl("segment_max", &segment_max_cpu);
  m.impl("segment_min", &segment_min_cpu);
  m.impl("segment_softmax", &segment_softmax_cpu);
  m.impl("segment_log_softmax", &segment_log_softmax_cpu);
  m.impl("segment_softmax_backward", &segment_softmax_backward_cpu);
  m.impl("segment_expand", &segment_expand_cpu);
  m.impl("segment_ids", &segment_ids_cpu);
}

}  // namespace torch_ragged
