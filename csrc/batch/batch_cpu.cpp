// CPU kernels of the batch family.
//
// Every kernel is dtype-agnostic: it moves bytes (memcpy of whole lines, see batch_index.h) and
// fills padding with the padding value's byte pattern, so one instantiation serves every dtype.
// Work is split by output *elements*, not by sub-tensor, so a few huge sub-tensors still spread
// evenly over the threads.

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>

#include "batch/batch_index.h"
#include "batch/layout.h"
#include "common/fill.h"
#include "common/parallel.h"
#include "segment/segment_index.h"

namespace torch_ragged {
namespace {

// Writes the padded tensor: every output element exactly once, copied from sub-tensor b (rows laid
// out contiguously from item_source[b]) or filled with `pad`.
void scatter_to_padded(char* dst, const RaggedLayout& layout,
                       const std::vector<const char*>& item_source, const std::vector<char>& pad) {
  const int64_t es = static_cast<int64_t>(pad.size()), k = layout.rank, C = layout.elem;
  const int64_t padded_line = line_elems(layout.max_shape.data(), k, C);
  const int64_t lines_per_item = padded_lines_per_item(layout.max_shape.data(), k);
  const int64_t total = layout.batch * lines_per_item * padded_line;
  at::parallel_for(0, total, kGrainElems, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin / padded_line; line * padded_line < end; ++line) {
      const int64_t line_start = line * padded_line;
      const int64_t lo = std::max(begin, line_start) - line_start;
      const int64_t hi = std::min(end, line_start + padded_line) - line_start;
      const int64_t b = line / lines_per_item;
      const int64_t* shape = layout.shape_of(b);
      const int64_t* offset = layout.offset_of(b);
      const int64_t src_line = source_line_of_padded_line(
          line % lines_per_item, layout.max_shape.data(), shape, offset, k);
      int64_t copy_lo = 0, copy_hi = 0;  // columns of this line holding data
      if (src_line >= 0) {
        copy_lo = line_column_offset(offset, k, C);
        copy_hi = copy_lo + line_elems(shape, k, C);
      }
      char* out = dst + line_start * es;
      const int64_t head_end = std::min(hi, copy_lo);
      if (lo < head_end) cpu::fill_pattern(out + lo * es, head_end - lo, pad.data(), es);
      const int64_t data_lo = std::max(lo, copy_lo), data_hi = std::min(hi, copy_hi);
      if (data_lo < data_hi) {
        const char* src =
            item_source[b] + (src_line * (copy_hi - copy_lo) + data_lo - copy_lo) * es;
        std::memcpy(out + data_lo * es, src, (data_hi - data_lo) * es);
      }
      const int64_t tail_lo = std::max(lo, copy_hi);
      if (tail_lo < hi) cpu::fill_pattern(out + tail_lo * es, hi - tail_lo, pad.data(), es);
    }
  });
}

// Writes the packed tensor (num_rows x C): line `l` of sub-tensor b comes from line_source(b, l).
template <typename LineSource>
void gather_to_packed(char* dst, const RaggedLayout& layout, int64_t es,
                      const LineSource& line_source) {
  const int64_t C = layout.elem;
  const int64_t total = layout.num_rows() * C;
  at::parallel_for(0, total, kGrainElems, [&](int64_t begin, int64_t end) {
    int64_t b = segment_of_row(layout.first_row.data(), layout.batch, begin / C);
    for (int64_t e = begin; e < end;) {
      while (layout.first_row[b + 1] * C <= e) ++b;  // skip empty sub-tensors
      const int64_t line_len = line_elems(layout.shape_of(b), layout.rank, C);
      const int64_t local = e - layout.first_row[b] * C;
      const int64_t line = local / line_len, column = local % line_len;
      const int64_t n = std::min(line_len - column, end - e);
      std::memcpy(dst + e * es, line_source(b, line) + column * es, n * es);
      e += n;
    }
  });
}

std::vector<const char*> list_sources(const std::vector<at::Tensor>& contiguous) {
  std::vector<const char*> sources;
  sources.reserve(contiguous.size());
  for (const auto& t : contiguous) sources.push_back(static_cast<const char*>(t.const_data_ptr()));
  return sources;
}

std::tuple<at::Tensor, at::Tensor> list_to_packed_cpu(at::TensorList tensor_list) {
  const RaggedLayout layout = layout_from_tensor_list("list_to_packed", tensor_list);
  const std::vector<at::Tensor> inputs = contiguous_all(tensor_list);
  at::Tensor packed = at::empty({layout.num_rows(), layout.elem}, inputs[0].options());
  const std::vector<const char*> sources = list_sources(inputs);
  const int64_t es = packed.element_size();
  gather_to_packed(
      static_cast<char*>(packed.mutable_data_ptr()), layout, es, [&](int64_t b, int64_t line) {
        return sources[b] + line * line_elems(layout.shape_of(b), layout.rank, layout.elem) * es;
      });
  return {packed, layout.shape_per_tensor()};
}

std::tuple<at::Tensor, at::Tensor> list_to_padded_cpu(at::TensorList tensor_list,
                                                      const at::Scalar& padding_value,
                                                      at::OptionalSymIntArrayRef max_shape,
                                                      c10::string_view padding_side) {
  const RaggedLayout layout = list_to_padded_layout(tensor_list, max_shape, padding_side);
  const std::vector<at::Tensor> inputs = contiguous_all(tensor_list);
  at::Tensor padded = at::empty(layout.padded_sizes(), inputs[0].options());
  scatter_to_padded(
      static_cast<char*>(padded.mutable_data_ptr()), layout, list_sources(inputs),
      fill_value_bytes("list_to_padded", "padding_value", padding_value, padded.scalar_type()));
  return {padded, layout.shape_per_tensor()};
}

at::Tensor packed_to_padded_cpu(const at::Tensor& packed_tensor, const at::Tensor& shape_per_tensor,
                                const at::Tensor& first_idx, const at::Scalar& padding_value,
                                at::OptionalSymIntArrayRef max_shape,
                                c10::string_view padding_side) {
  const RaggedLayout layout =
      packed_to_padded_layout(packed_tensor, shape_per_tensor, first_idx, max_shape, padding_side);
  const at::Tensor packed = packed_tensor.contiguous();
  at::Tensor padded = at::empty(layout.padded_sizes(), packed.options());
  const char* base = static_cast<const char*>(packed.const_data_ptr());
  std::vector<const char*> sources(layout.batch);
  for (int64_t b = 0; b < layout.batch; ++b) {
    sources[b] = base + layout.first_row[b] * layout.elem * packed.element_size();
  }
  scatter_to_padded(
      static_cast<char*>(padded.mutable_data_ptr()), layout, sources,
      fill_value_bytes("packed_to_padded", "padding_value", padding_value, padded.scalar_type()));
  return padded;
}

at::Tensor padded_to_packed_cpu(const at::Tensor& padded_tensor, const at::Tensor& shape_per_tensor,
                                c10::string_view padding_side,
                                std::optional<c10::SymInt> num_rows) {
  const RaggedLayout layout =
      padded_to_packed_layout(padded_tensor, shape_per_tensor, padding_side, num_rows);
  const at::Tensor padded = padded_tensor.contiguous();
  at::Tensor packed = at::empty({layout.num_rows(), layout.elem}, padded.options());
  const int64_t es = padded.element_size(), k = layout.rank, C = layout.elem;
  const int64_t padded_line = line_elems(layout.max_shape.data(), k, C);
  const int64_t item_elems = padded_lines_per_item(layout.max_shape.data(), k) * padded_line;
  const char* base = static_cast<const char*>(padded.const_data_ptr());
  gather_to_packed(
      static_cast<char*>(packed.mutable_data_ptr()), layout, es, [&](int64_t b, int64_t line) {
        const int64_t* offset = layout.offset_of(b);
        const int64_t target = padded_line_of_source_line(line, layout.max_shape.data(),
                                                          layout.shape_of(b), offset, k);
        return base +
               (b * item_elems + target * padded_line + line_column_offset(offset, k, C)) * es;
      });
  return packed;
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  m.impl("list_to_packed", &list_to_packed_cpu);
  m.impl("list_to_padded", &list_to_padded_cpu);
  m.impl("packed_to_padded", &packed_to_padded_cpu);
  m.impl("padded_to_packed", &padded_to_packed_cpu);
}

}  // namespace torch_ragged
