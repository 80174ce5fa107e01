// segment_row: row `row` of every segment (a RaggedTensor's r[:, row]), and segment_slice: rows
// start:stop:step of every segment as Python slices them (r[:, a:b:c]): one op each where Python
// read the lengths, checked them and built the positions in 6-15 small calls. Composites of
// index_select / ragged_index_select (their autograd), so they differentiate, trace and export with
// no kernel of their own.

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <tuple>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/op_handle.h"
#include "segment/offsets.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  m.def("segment_row(Tensor values, Tensor first_idx, int row) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "segment_slice(Tensor values, Tensor first_idx, int? start=None, int? stop=None, int step=1) "
      "-> (Tensor values, Tensor first_idx)",
      {at::Tag::pt2_compliant_tag});
}

namespace {

constexpr std::string_view kOp = "segment_row";

// The checks both ops make of (values, first_idx); whether first_idx can be read on the host
// (a concrete CPU tensor) rather than through ATen ops (on a GPU, or symbolic while tracing).
bool checked_rows_arguments(std::string_view op, const at::Tensor& values,
                            const at::Tensor& first_idx) {
  check_defined(op, "values", values);
  TORCH_CHECK_VALUE(values.dim() >= 1, "torch_ragged.", op,
                    ": values must have a dim of rows, got a 0-d tensor");
  check_index_tensor(op, "first_idx", first_idx, 1);
  check_index_device(op, "first_idx", first_idx, values.device());
  TORCH_CHECK_VALUE(first_idx.sym_size(0) >= 1, "torch_ragged.", op,
                    ": first_idx needs at least 1 entry (num_segments + 1), got 0");
  return first_idx.is_cpu() && !is_symbolic(first_idx) && !is_symbolic(values);
}

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

// values.index_select(0, positions) for positions that are distinct (one row of a segment each, or
// rows of a segment a step apart), as the host paths build them: the backward then copies the
// gradient's rows into place (zeros + index_copy_) where index_select's adds them (index_add, ~2x
// the time on the CPU). Differentiable twice (the backward is itself a copy).
class DistinctRowsSelect : public torch::autograd::Function<DistinctRowsSelect> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& values,
                            const at::Tensor& positions) {
    keep_undefined_grads(ctx);
    ctx->save_for_backward({positions});
    ctx->saved_data["rows"] = values.size(0);
    at::AutoDispatchBelowADInplaceOrView guard;
    return values.index_select(0, positions);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (all_undefined(grads)) return undefined_grads<DistinctRowsSelect>();
    std::vector<int64_t> sizes = grads[0].sizes().vec();
    sizes[0] = ctx->saved_data["rows"].toInt();
    at::Tensor grad = at::zeros(sizes, grads[0].options());
    grad.index_copy_(0, ctx->get_saved_variables()[0], grads[0]);
    return {grad, at::Tensor()};
  }
};

at::Tensor select_distinct_rows(const at::Tensor& values, const at::Tensor& positions) {
  const at::Tensor on_device = positions.to(values.device());
  if (!values.is_cpu() || !records_graph(values)) return values.index_select(0, on_device);
  return DistinctRowsSelect::apply(values, on_device);
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
  const bool on_host = checked_rows_arguments(kOp, values, first_idx);
  if (on_host)
    return select_distinct_rows(values, positions_on_host(first_idx, values.size(0), row));
  return values.index_select(0, positions_by_ops(first_idx, row).to(values.device()));
}

// ---- segment_slice ----

constexpr std::string_view kSliceOp = "segment_slice";

// Python's bound of a slice over a sequence of `length` (0 <= result <= length).
int64_t slice_bound(std::optional<int64_t> value, int64_t length, int64_t fallback) {
  if (!value.has_value()) return fallback;
  if (*value < 0) return std::max<int64_t>(length + std::max<int64_t>(*value, -length), 0);
  return std::min(*value, length);
}

// The kept rows from first_idx on the host: for step 1, each segment's kept rows are one run, the
// runs between them skipped, so one ragged_index_select copies them (whole runs, memcpy); for a
// larger step, the rows' positions and one index_select.
std::tuple<at::Tensor, at::Tensor> slice_on_host(const at::Tensor& values,
                                                 const at::Tensor& first_idx,
                                                 std::optional<int64_t> start,
                                                 std::optional<int64_t> stop, int64_t step) {
  const at::Tensor offsets = checked_first_idx_on_host(kSliceOp, first_idx, values.size(0));
  const int64_t* f = offsets.const_data_ptr<int64_t>();
  const int64_t segments = offsets.numel() - 1;
  at::Tensor out_first_idx = at::empty({segments + 1}, at::kLong);
  int64_t* out_first = out_first_idx.mutable_data_ptr<int64_t>();
  at::Tensor runs =
      at::empty({2 * segments + 2}, at::kLong);  // step 1: 0, a_0, b_0, a_1, ..., rows
  int64_t* run = runs.mutable_data_ptr<int64_t>();
  run[0] = 0;
  out_first[0] = 0;
  for (int64_t b = 0; b < segments; ++b) {
    const int64_t length = f[b + 1] - f[b];
    const int64_t a = slice_bound(start, length, 0);
    const int64_t e = std::max(a, slice_bound(stop, length, length));
    run[2 * b + 1] = f[b] + a;
    run[2 * b + 2] = f[b] + e;
    out_first[b + 1] = out_first[b] + (e - a + step - 1) / step;
  }
  run[2 * segments + 1] = f[segments];
  const int64_t kept = out_first[segments];
  if (step == 1) {
    // the selected runs' offsets are the kept rows' first_idx (on values' device)
    return ops::ragged_index_select(values, runs, at::arange(1, 2 * segments + 1, 2, at::kLong),
                                    c10::SymInt(kept));
  }
  at::Tensor positions = at::empty({kept}, at::kLong);
  int64_t* position = positions.mutable_data_ptr<int64_t>();
  for (int64_t b = 0; b < segments; ++b) {
    for (int64_t k = 0, row = run[2 * b + 1]; k < out_first[b + 1] - out_first[b];
         ++k, row += step) {
      position[out_first[b] + k] = row;
    }
  }
  return {select_distinct_rows(values, positions), out_first_idx.to(values.device())};
}

// The same in ATen ops (first_idx on a GPU: one host read of the kept rows' count; symbolic while
// tracing: an unbacked count).
std::tuple<at::Tensor, at::Tensor> slice_by_ops(const at::Tensor& values,
                                                const at::Tensor& first_idx,
                                                std::optional<int64_t> start,
                                                std::optional<int64_t> stop, int64_t step) {
  const c10::SymInt segments = first_idx.sym_size(0) - 1;
  const at::Tensor starts = first_idx.narrow_symint(0, 0, segments).to(at::kLong);
  const at::Tensor lengths = first_idx.narrow_symint(0, 1, segments).to(at::kLong) - starts;
  const auto bound = [&](std::optional<int64_t> value, const at::Tensor& fallback) {
    if (!value.has_value()) return fallback;
    return *value < 0 ? (lengths + *value).clamp_min(0) : lengths.clamp_max(*value);
  };
  const at::Tensor begin = bound(start, at::zeros_like(lengths));
  const at::Tensor end = at::maximum(bound(stop, lengths), begin);
  const at::Tensor counts = (end - begin + (step - 1)).div(step, "floor");
  const at::Tensor out_first_idx = at::cat({at::zeros({1}, counts.options()), counts.cumsum(0)});
  const c10::SymInt kept = out_first_idx.select(0, -1).item().toSymInt();
  const at::Tensor rows = ops::segment_expand(starts + begin, out_first_idx, kept) +
                          ops::segment_arange(out_first_idx, kept) * step;
  return {values.index_select(0, rows.to(values.device())), out_first_idx.to(values.device())};
}

std::tuple<at::Tensor, at::Tensor> segment_slice_composite(const at::Tensor& values,
                                                           const at::Tensor& first_idx,
                                                           std::optional<int64_t> start,
                                                           std::optional<int64_t> stop,
                                                           int64_t step) {
  const bool on_host = checked_rows_arguments(kSliceOp, values, first_idx);
  TORCH_CHECK_VALUE(step >= 1, "torch_ragged.", kSliceOp, ": step must be >= 1, got ", step);
  return on_host ? slice_on_host(values, first_idx, start, stop, step)
                 : slice_by_ops(values, first_idx, start, stop, step);
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("segment_row", &segment_row_composite);
  m.impl("segment_slice", &segment_slice_composite);
}

namespace ops {

at::Tensor segment_row(const at::Tensor& values, const at::Tensor& first_idx, int64_t row) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t)>(
      "torch_ragged::segment_row");
  return op.call(values, first_idx, row);
}

std::tuple<at::Tensor, at::Tensor> segment_slice(const at::Tensor& values,
                                                 const at::Tensor& first_idx,
                                                 std::optional<int64_t> start,
                                                 std::optional<int64_t> stop, int64_t step) {
  static auto op = op_handle<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, std::optional<int64_t>, std::optional<int64_t>,
      int64_t)>("torch_ragged::segment_slice");
  return op.call(values, first_idx, start, stop, step);
}

}  // namespace ops

}  // namespace torch_ragged
