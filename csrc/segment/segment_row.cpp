// segment_row: row `row` of every segment (a RaggedTensor's r[:, row]): one op where Python read
// the lengths, checked them and built the positions in ~6 small calls. A composite of
// index_select (its autograd: index_add of the gradient onto the rows read), so it differentiates,
// traces and exports with no kernel of its own.

#include <ATen/ATen.h>
#include <torch/library.h>

#include <string_view>

#include "common/checks.h"
#include "common/op_handle.h"
#include "segment/offsets.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  m.def("segment_row(Tensor values, Tensor first_idx, int row) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

namespace {

constexpr std::string_view kOp = "segment_row";

[[noreturn]] void raise_too_short(const int64_t* first_idx, int64_t segments, int64_t row) {
  int64_t too_short = 0, first_short = -1;
  for (int64_t b = 0; b < segments; ++b) {
    const int64_t length = first_idx[b + 1] - first_idx[b];
    if (row >= 0 ? length <= row : length < -row) {
      too_short += 1;
      if (first_short < 0) first_short = b;
    }
  }
  TORCH_CHECK_INDEX(false, "torch_ragged.", kOp, ": row ", row, " is out of range for segment ",
                    first_short, " of ", first_idx[first_short + 1] - first_idx[first_short],
                    " rows (", too_short, " of ", segments, " segments are too short)");
}

// The rows' positions from first_idx on the host: one loop, checked as it goes.
at::Tensor positions_on_host(const at::Tensor& first_idx, int64_t num_rows, int64_t row) {
  const at::Tensor offsets = checked_first_idx_on_host(kOp, first_idx, num_rows);
  const int64_t* f = offsets.const_data_ptr<int64_t>();
  const int64_t segments = offsets.numel() - 1;
  at::Tensor positions = at::empty({segments}, at::kLong);
  int64_t* out = positions.mutable_data_ptr<int64_t>();
  bool fits = true;
  for (int64_t b = 0; b < segments; ++b) {
    const int64_t length = f[b + 1] - f[b];
    fits &= row >= 0 ? row < length : -row <= length;
    out[b] = (row >= 0 ? f[b] : f[b + 1]) + row;
  }
  if (!fits) raise_too_short(f, segments, row);
  return positions;
}

// The same in ATen ops (first_idx on a GPU, or symbolic while tracing: checked on the device).
at::Tensor positions_by_ops(const at::Tensor& first_idx, int64_t row) {
  const c10::SymInt segments = first_idx.sym_size(0) - 1;
  const at::Tensor starts = first_idx.narrow_symint(0, 0, segments).to(at::kLong);
  const at::Tensor ends = first_idx.narrow_symint(0, 1, segments).to(at::kLong);
  const at::Tensor fits = row >= 0 ? (ends - starts).gt(row) : (ends - starts).ge(-row);
  if (is_symbolic(first_idx)) {
    at::_assert_async(fits.all(), "torch_ragged.segment_row: row out of range for a segment");
  } else if (!fits.all().item<bool>()) {
    const at::Tensor host = first_idx.to(at::kCPU, at::kLong).contiguous();
    raise_too_short(host.const_data_ptr<int64_t>(), host.numel() - 1, row);
  }
  return row >= 0 ? starts + row : ends + row;
}

at::Tensor segment_row_composite(const at::Tensor& values, const at::Tensor& first_idx,
                                 int64_t row) {
  check_defined(kOp, "values", values);
  TORCH_CHECK_VALUE(values.dim() >= 1, "torch_ragged.", kOp,
                    ": values must have a dim of rows, got a 0-d tensor");
  check_index_tensor(kOp, "first_idx", first_idx, 1);
  check_index_device(kOp, "first_idx", first_idx, values.device());
  TORCH_CHECK_VALUE(first_idx.sym_size(0) >= 1, "torch_ragged.", kOp,
                    ": first_idx needs at least 1 entry (num_segments + 1), got 0");
  const bool on_host = first_idx.is_cpu() && !is_symbolic(first_idx) && !is_symbolic(values);
  const at::Tensor positions = on_host ? positions_on_host(first_idx, values.size(0), row)
                                       : positions_by_ops(first_idx, row);
  return values.index_select(0, positions.to(values.device()));
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("segment_row", &segment_row_composite);
}

namespace ops {

at::Tensor segment_row(const at::Tensor& values, const at::Tensor& first_idx, int64_t row) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t)>(
      "torch_ragged::segment_row");
  return op.call(values, first_idx, row);
}

}  // namespace ops

}  // namespace torch_ragged
