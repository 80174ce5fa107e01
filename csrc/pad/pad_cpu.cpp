// CPU kernels of the index modes of pad (constant, empty, edge, wrap, even reflect / symmetric).
//
// pad_index is a gather: each output row (all axes but the last, after merging unpadded axes)
// memcpys its interior from one input row and fills its padding from the same row (or with a
// constant), so it moves bytes and one instantiation per element size serves every dtype.
// pad_index_backward is the adjoint: each input row sums the gradient rows of its preimage (the
// output rows whose source it is), each folded along the last axis in a fixed order. No atomics,
// and the result does not depend on the thread count. Constant / empty: the interior, copied.

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <cstring>
#include <optional>
#include <type_traits>

#include "common/element_type.h"
#include "common/parallel.h"
#include "pad/pad_plan.h"

namespace torch_ragged {
namespace {

// Per merged axis, the source index of every output position (kNoSource: a constant).
std::vector<std::vector<int64_t>> source_tables(const PadGeometry& g) {
  std::vector<std::vector<int64_t>> tables(g.ndim);
  for (int d = 0; d < g.ndim; ++d) {
    tables[d].resize(g.out_size[d]);
    for (int64_t i = 0; i < g.out_size[d]; ++i) {
      tables[d][i] =
          g.in_size[d] == 0 ? kNoSource : pad_source_index(g.mode, i, g.in_size[d], g.before[d]);
    }
  }
  return tables;
}

// Row-major strides (in elements) of `sizes`.
std::vector<int64_t> strides_of(const int64_t* sizes, int ndim) {
  std::vector<int64_t> strides(ndim, 1);
  for (int d = ndim - 2; d >= 0; --d) strides[d] = strides[d + 1] * sizes[d + 1];
  return strides;
}

// Mixed-radix counter over the leading `ndim` axes of `sizes`, starting at flat index `start`.
struct RowCounter {
  std::vector<int64_t> coord;
  const int64_t* sizes;

  RowCounter(const int64_t* sizes_, int ndim, int64_t start) : coord(ndim), sizes(sizes_) {
    for (int d = ndim - 1; d >= 0; --d) {
      coord[d] = start % sizes[d];
      start /= sizes[d];
    }
  }
  void next() {
    for (int d = static_cast<int>(coord.size()) - 1; d >= 0; --d) {
      if (++coord[d] < sizes[d]) return;
      coord[d] = 0;
    }
  }
};

// The last axis's padding as runs of the source row: a run reads `count` consecutive source
// elements forward (wrap, and any run of a mode that is a shifted copy), repeats one (edge), or
// reads them backward (reflect / symmetric). Built once per call; each row then copies its padding
// run by run (memcpy for forward runs) instead of element by element through the index table.
struct SourceRun {
  int64_t dst, src, count;
  int step;  // +1, 0 or -1
};

std::vector<SourceRun> padding_runs(const std::vector<int64_t>& sources, int64_t lo, int64_t hi) {
  std::vector<SourceRun> runs;
  for (int64_t i = lo; i < hi; ++i) {
    if (!runs.empty()) {
      SourceRun& run = runs.back();
      const int64_t next = sources[i] - sources[i - 1];
      const bool extends = run.dst + run.count == i && next >= -1 && next <= 1 &&
                           (run.count == 1 || next == run.step);
      if (extends) {
        run.step = static_cast<int>(next);
        ++run.count;
        continue;
      }
    }
    runs.push_back({i, sources[i], 1, 1});
  }
  return runs;
}

template <typename Element>
void copy_runs(const std::vector<SourceRun>& runs, const Element* in_row, Element* row) {
  for (const SourceRun& run : runs) {
    Element* dst = row + run.dst;
    const Element* src = in_row + run.src;
    if (run.step == 1) {
      std::memcpy(dst, src, run.count * sizeof(Element));
    } else if (run.step == 0) {
      std::fill_n(dst, run.count, *src);
    } else {
      for (int64_t k = 0; k < run.count; ++k) dst[k] = src[-k];
    }
  }
}

// Constant mode writes every output byte with memcpy from a prepared row (the values a row in the
// padding holds, the last axis's pads at its ends): memcpy's wide stores keep up with the interior
// copies, where the fill loops' 16-byte stores did not (160^3 float, width 10, one thread: 1.95 ms
// with fills against edge mode's 1.69 ms; 1.60 ms with the pattern).
template <typename Element>
class ConstantRowPattern {
 public:
  ConstantRowPattern(const PadGeometry& g, const Element* values)
      : g_(g), values_(values), pattern_(g.out_size[g.ndim - 1]) {}

  // The row pattern for a row whose winning padded outer axis gives `row_value` (nullptr: the row
  // is not in the padding), rebuilt only when it changes (rows in the padding come in runs).
  const Element* row(const Element* row_value, int row_value_axis) {
    if (row_value == current_ && built_) return pattern_.data();
    const int last = g_.ndim - 1;
    const int64_t before = g_.before[last], n = g_.in_size[last];
    const bool row_wins = row_value != nullptr && row_value_axis > g_.value_axis[last];
    const Element* head = row_wins ? row_value : values_ + 2 * g_.value_axis[last];
    const Element* tail = row_wins ? row_value : values_ + 2 * g_.value_axis[last] + 1;
    std::fill_n(pattern_.begin(), before, *head);
    if (row_value != nullptr) std::fill_n(pattern_.begin() + before, n, *row_value);
    std::fill(pattern_.begin() + before + n, pattern_.end(), *tail);
    current_ = row_value;
    built_ = true;
    return pattern_.data();
  }

 private:
  const PadGeometry& g_;
  const Element* values_;
  std::vector<Element> pattern_;
  const Element* current_ = nullptr;
  bool built_ = false;
};

template <typename Element>
void gather_rows(const PadGeometry& g, const Element* in, Element* out, const Element* values) {
  const int last = g.ndim - 1;
  const auto tables = source_tables(g);
  const std::vector<int64_t> in_strides = strides_of(g.in_size, g.ndim);
  const int64_t row_len = g.out_size[last], n = g.in_size[last], before = g.before[last];
  const int64_t after = row_len - before - n;
  const int64_t rows = c10::multiply_integers(g.out_size, g.out_size + last);
  const bool constant = g.mode == IndexPadMode::kConstant, empty = g.mode == IndexPadMode::kEmpty;
  constexpr int64_t kElem = sizeof(Element);
  std::vector<SourceRun> runs;  // the index modes' last-axis padding (both sides)
  if (!constant && !empty) {
    runs = padding_runs(tables[last], 0, before);
    const std::vector<SourceRun> tail = padding_runs(tables[last], before + n, row_len);
    runs.insert(runs.end(), tail.begin(), tail.end());
  }
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(row_len, 1)),
                   [&](int64_t begin, int64_t end) {
                     std::optional<ConstantRowPattern<Element>> patterns;
                     if (constant) patterns.emplace(g, values);
                     RowCounter counter(g.out_size, last, begin);
                     for (int64_t r = begin; r < end; ++r, counter.next()) {
                       // Of the axes whose coordinate lies in their padding, the latest caller axis
                       // decides a constant's value (numpy pads axis 0 first, so later axes
                       // overwrite earlier ones).
                       bool row_in_padding = false;
                       const Element* row_value = nullptr;  // constant mode only
                       int row_value_axis = -1;
                       int64_t in_offset = 0;
                       for (int d = 0; d < last; ++d) {
                         const int64_t i = counter.coord[d];
                         const int64_t source = tables[d][i];
                         if (source == kNoSource) {
                           row_in_padding = true;
                           if (constant && g.value_axis[d] > row_value_axis) {
                             row_value_axis = g.value_axis[d];
                             row_value = values + 2 * row_value_axis + (i < g.before[d] ? 0 : 1);
                           }
                         } else {
                           in_offset += source * in_strides[d];
                         }
                       }
                       Element* row = out + r * row_len;
                       const Element* in_row =
                           in + in_offset;  // read only when the row is not in the padding
                       if (constant) {
                         const Element* pattern = patterns->row(row_value, row_value_axis);
                         if (row_in_padding) {
                           std::memcpy(row, pattern, row_len * kElem);
                         } else {
                           std::memcpy(row, pattern, before * kElem);
                           std::memcpy(row + before, in_row, n * kElem);
                           std::memcpy(row + before + n, pattern + before + n, after * kElem);
                         }
                         continue;
                       }
                       if (row_in_padding)
                         continue;  // empty mode (the other modes have no constant rows)
                       std::memcpy(row + before, in_row, n * kElem);
                       if (empty) continue;
                       copy_runs(runs, in_row, row);
                     }
                   });
}

// The preimage of every input index along an axis, as a flat list (CSR: offsets, positions).
struct PreimageTable {
  std::vector<int64_t> offsets, positions;
};

// Only the outer axes: the last axis is folded by scattering each row's padding into its interior.
std::vector<PreimageTable> outer_preimage_tables(const PadGeometry& g) {
  std::vector<PreimageTable> tables(g.ndim - 1);
  for (int d = 0; d + 1 < g.ndim; ++d) {
    PreimageTable& t = tables[d];
    t.offsets.push_back(0);
    for (int64_t j = 0; j < g.in_size[d]; ++j) {
      AxisPreimage preimage;  // the walk the CUDA backward kernel does, so these tests cover it
      preimage.start(g.mode, j, g.in_size[d], g.before[d], g.out_size[d]);
      do {
        t.positions.push_back(preimage.position());
      } while (preimage.next());
      t.offsets.push_back(static_cast<int64_t>(t.positions.size()));
    }
  }
  return tables;
}

template <typename scalar_t>
void fold_rows(const PadGeometry& g, const scalar_t* grad, scalar_t* grad_in) {
  using acc_t = at::opmath_type<scalar_t>;
  const int last = g.ndim - 1;
  const auto preimages = outer_preimage_tables(g);
  const auto sources = source_tables(g);
  const std::vector<int64_t> out_strides = strides_of(g.out_size, g.ndim);
  const int64_t row_len = g.out_size[last], n = g.in_size[last], before = g.before[last];
  const int64_t rows = c10::multiply_integers(g.in_size, g.in_size + last);
  const std::vector<int64_t>& last_sources = sources[last];
  at::parallel_for(
      0, rows, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(row_len, 1)),
      [&](int64_t begin, int64_t end) {
        // float / double accumulate straight into the output row; half / bfloat16 in a float
        // buffer.
        constexpr bool in_place = std::is_same_v<acc_t, scalar_t>;
        std::vector<acc_t> buffer(in_place ? 0 : n);
        RowCounter counter(g.in_size, last, begin);
        std::vector<int64_t> pick(last);  // which preimage position of each outer axis
        for (int64_t r = begin; r < end; ++r, counter.next()) {
          scalar_t* out_row = grad_in + r * n;
          acc_t* acc = in_place ? reinterpret_cast<acc_t*>(out_row) : buffer.data();
          std::fill(pick.begin(), pick.end(), 0);
          for (bool first = true;; first = false) {  // every combination of the preimage positions
            int64_t offset = 0;
            for (int d = 0; d < last; ++d) {
              const PreimageTable& t = preimages[d];
              offset += t.positions[t.offsets[counter.coord[d]] + pick[d]] * out_strides[d];
            }
            const scalar_t* row = grad + offset;
            if (first) {
              for (int64_t j = 0; j < n; ++j) acc[j] = static_cast<acc_t>(row[before + j]);
            } else {
              for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<acc_t>(row[before + j]);
            }
            for (int64_t i = 0; i < before; ++i) acc[last_sources[i]] += row[i];
            for (int64_t i = before + n; i < row_len; ++i) acc[last_sources[i]] += row[i];
            int d = last - 1;
            for (; d >= 0; --d) {
              const PreimageTable& t = preimages[d];
              const int64_t size = t.offsets[counter.coord[d] + 1] - t.offsets[counter.coord[d]];
              if (++pick[d] < size) break;
              pick[d] = 0;
            }
            if (d < 0) break;
          }
          if (!in_place) {
            for (int64_t j = 0; j < n; ++j) out_row[j] = static_cast<scalar_t>(acc[j]);
          }
        }
      });
}

void launch_gather(const PadGeometry& g, const at::Tensor& in, at::Tensor& out,
                   const at::Tensor& values) {
  with_element_type("pad", in.element_size(), [&](auto element) {
    using Element = decltype(element);
    gather_rows<Element>(
        g, static_cast<const Element*>(in.const_data_ptr()),
        static_cast<Element*>(out.mutable_data_ptr()),
        values.defined() ? static_cast<const Element*>(values.const_data_ptr()) : nullptr);
  });
}

void launch_fold(const PadGeometry& g, const at::Tensor& grad, at::Tensor& grad_in) {
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "pad_index_backward", [&] {
        fold_rows<scalar_t>(g, grad.const_data_ptr<scalar_t>(),
                            grad_in.mutable_data_ptr<scalar_t>());
      });
}

at::Tensor pad_index_cpu(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                         c10::string_view mode, const std::optional<at::Tensor>& constant_values) {
  return run_pad_index(self, pad_width, mode, constant_values, &launch_gather);
}

at::Tensor pad_index_backward_cpu(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                                  c10::string_view mode) {
  return run_pad_index_backward(grad_output, pad_width, mode, &launch_fold);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("pad_index", &pad_index_cpu);
  m.impl("pad_index_backward", &pad_index_backward_cpu);
}

}  // namespace torch_ragged
