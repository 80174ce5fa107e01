// Schemas of the pad family, the composite `pad` op (numpy.pad), and its C++ API.
//
// `pad` is CompositeImplicitAutograd: it checks numpy's arguments and then
//   - index modes (constant, empty, edge, wrap, even reflect / symmetric): one pad_index kernel;
//   - odd reflections: per axis, numpy's period-by-period iteration replayed on top of pad_index
//     (bit-identical to numpy), or a closed form when the axis length is a symbol;
//   - linear_ramp and the statistics: pad_index(mode="empty") copies the input, then one pass per
//     axis in numpy's order (0, 1, ..., N-1) fills that axis's padding from ATen ops over the
//     region numpy reads (earlier axes at full, padded extent; later axes at their original one).
// Autograd therefore comes from pad_index's (deterministic) backward and ATen's derivatives.

#include <ATen/OpMathType.h>
#include <torch/library.h>
#include <torch_ragged/pad.h>

#include <algorithm>
#include <limits>

#include "common/checks.h"
#include "common/missing_kernels.h"
#include "common/op_handle.h"
#include "pad/pad_ops.h"
#include "pad/pad_plan.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(
      "pad(Tensor self, SymInt[] pad_width, str mode=\"constant\", Tensor? constant_values=None, "
      "Tensor? end_values=None, int[]? stat_length=None, str? reflect_type=None) -> Tensor",
      tags);
  m.def(
      "pad_index(Tensor self, SymInt[] pad_width, str mode, Tensor? constant_values=None) "
      "-> Tensor",
      tags);
  m.def("pad_index_backward(Tensor grad_output, SymInt[] pad_width, str mode) -> Tensor", tags);
}

// The ops with CPU / CUDA kernels (the rest are composites of them).
constexpr const char* kKernelOps[] = {"pad_index", "pad_index_backward"};

#ifndef TORCH_RAGGED_WITH_CUDA
TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) { register_missing_cuda(m, kKernelOps); }
#endif

TORCH_LIBRARY_IMPL(torch_ragged, CompositeExplicitAutograd, m) {
  register_missing_tensor_errors(m, kKernelOps);
}

namespace {

bool has_symbolic_size(const at::Tensor& t) {
  const c10::SymIntArrayRef sizes = t.sym_sizes();
  return std::any_of(sizes.begin(), sizes.end(),
                     [](const c10::SymInt& s) { return s.is_symbolic(); });
}

// Sizes are SymInts from here on: under torch.export / torch.compile with dynamic shapes they stay
// symbols (no guard on a size), so an exported pad takes other input sizes. Size tests that a
// traced graph cannot decide are size-oblivious (a dynamic size is taken as >= 2), and the
// pad_index kernel re-checks every size when the graph runs.
bool size_is(const c10::SymInt& size, int64_t value) {
  return TORCH_GUARD_SIZE_OBLIVIOUS(size.sym_eq(value));
}

std::vector<c10::SymInt> as_sym(const std::vector<int64_t>& values) {
  return std::vector<c10::SymInt>(values.begin(), values.end());
}

// numpy.pad's rule: each keyword belongs to some modes only.
void check_keywords(PadMode mode, bool constant_values, bool end_values, bool stat_length,
                    bool reflect_type) {
  std::string unsupported;
  auto flag = [&](bool given, bool allowed, const char* name) {
    if (given && !allowed) unsupported += (unsupported.empty() ? "" : ", ") + std::string(name);
  };
  flag(constant_values, mode == PadMode::kConstant, "constant_values");
  flag(end_values, mode == PadMode::kLinearRamp, "end_values");
  flag(stat_length, is_statistic_mode(mode), "stat_length");
  flag(reflect_type, mode == PadMode::kReflect || mode == PadMode::kSymmetric, "reflect_type");
  TORCH_CHECK_VALUE(unsupported.empty(),
                    "torch_ragged.pad: unsupported keyword arguments for mode '",
                    pad_mode_name(mode), "': ", unsupported);
}

std::vector<int64_t> checked_stat_length(at::IntArrayRef stat_length, int64_t ndim, PadMode mode,
                                         bool input_is_empty) {
  TORCH_CHECK_VALUE(
      static_cast<int64_t>(stat_length.size()) == 2 * ndim,
      "torch_ragged.pad: stat_length must hold one (before, after) pair per axis, i.e. ", 2 * ndim,
      " entries, got ", stat_length.size());
  for (const int64_t length : stat_length) {
    TORCH_CHECK_VALUE(
        length >= 0,
        "torch_ragged.pad: index can't contain negative values: stat_length can't contain "
        "negative values, got ",
        stat_length);
    // numpy checks this only when it computes statistics, i.e. for a non-empty input.
    TORCH_CHECK_VALUE(
        length > 0 || input_is_empty || (mode != PadMode::kMaximum && mode != PadMode::kMinimum),
        "torch_ragged.pad: stat_length of 0 yields no value for padding (mode '",
        pad_mode_name(mode), "')");
  }
  return stat_length.vec();
}

// The region numpy reads and writes when it pads `axis`: axes after it narrowed to the input.
at::Tensor axis_region(const at::Tensor& padded, const std::vector<int64_t>& pad_width,
                       c10::SymIntArrayRef in_sizes, int64_t axis) {
  at::Tensor region = padded;
  for (int64_t k = axis + 1; k < padded.dim(); ++k) {
    region = region.narrow_symint(k, pad_width[2 * k], in_sizes[k]);
  }
  return region;
}

bool is_exact_float(at::ScalarType dtype) {
  return at::isFloatingType(dtype) || at::isComplexType(dtype);
}

// numpy casts statistics of integer arrays after rounding half to even; bools keep "nonzero".
at::Tensor cast_like_numpy(const at::Tensor& value, at::ScalarType dtype) {
  if (at::isIntegralType(dtype, /*includeBool=*/false)) return value.round().to(dtype);
  return value.to(dtype);
}

// ---- odd reflections ----

// numpy pads an odd reflection one period at a time: each chunk is 2 * edge - chunk, computed in
// the array's dtype from values it already wrote (bools: in int64, stored as nonzero), so later
// periods reflect about already-rounded values. Replaying that iteration on `padded`, whose
// interior along `axis` holds the input, gives numpy's values bit for bit (issue 16 item 7). Chunks
// span whole periods, so they never overlap and the loop runs O(log(width / n)) times (the span
// triples).
at::Tensor odd_reflect_axis_replay(at::Tensor padded, int64_t axis, int64_t before, int64_t after,
                                   int64_t n, PadMode mode) {
  const bool symmetric = mode == PadMode::kSymmetric;
  const int64_t total = before + n + after, edge_offset = symmetric ? 1 : 0;
  auto reflect_about = [](const at::Tensor& chunk, const at::Tensor& edge) {
    if (chunk.scalar_type() == at::kBool) {
      return (2 * edge.to(at::kLong) - chunk.to(at::kLong)) != 0;
    }
    return edge * 2 - chunk;  // 2 * edge is exact; one rounding, as numpy's
  };
  int64_t left = before, right = after;
  while (left > 0 || right > 0) {
    const int64_t filled = total - left - right;
    const int64_t period_span = symmetric ? filled / n * n : (filled - 1) / (n - 1) * (n - 1);
    if (left > 0) {
      const int64_t chunk = std::min(period_span, left);
      const at::Tensor source = padded.narrow(axis, left - edge_offset + 1, chunk).flip(axis);
      padded.narrow(axis, left - chunk, chunk)
          .copy_(reflect_about(source, padded.narrow(axis, left, 1)));
      left -= chunk;
    }
    if (right > 0) {
      const int64_t chunk = std::min(period_span, right);
      const int64_t first_read = total - right + edge_offset - 2;
      const at::Tensor source = padded.narrow(axis, first_read - chunk + 1, chunk).flip(axis);
      padded.narrow(axis, total - right, chunk)
          .copy_(reflect_about(source, padded.narrow(axis, total - right - 1, 1)));
      right -= chunk;
    }
  }
  return padded;
}

// The odd reflection of one axis whose length is a symbol (torch.export / dynamic shapes): the
// replay's trip count needs the length, so this computes the same values in closed form,
// value = sign * even + c_last * x[n-1] + c_first * x[0], with q = floor(t / P), r = t - q P:
//   r <  n:  x[r] + 2q (x[n-1] - x[0])
//   r >= n:  2 x[n-1] - x[s] + 2q (x[n-1] - x[0])      (s: the even mirror index of r)
// Exact for integers (int64, wrapped on the cast back as numpy's integers wrap); floats round
// differently from numpy's iteration (a few ulp).
at::Tensor odd_reflect_axis_closed_form(const at::Tensor& x, const at::Tensor& even, int64_t axis,
                                        int64_t before, int64_t after, PadMode mode) {
  const c10::SymInt n = x.sym_size(axis);
  const c10::SymInt period = pad_period(*index_mode_of(mode), n);
  const at::ScalarType dtype = x.scalar_type();
  const at::ScalarType compute = is_exact_float(dtype) ? dtype : at::kLong;
  const at::Tensor first = x.narrow(axis, 0, 1).to(compute);
  const at::Tensor last = x.narrow_symint(axis, n - 1, 1).to(compute);
  auto side = [&](const c10::SymInt& start, int64_t length) {
    if (length == 0) return even.narrow_symint(axis, start, 0);
    std::vector<int64_t> shape(x.dim(), 1);
    shape[axis] = length;
    // Coefficients per position along the axis, built on the device (no host data: this runs
    // under fake tensors when traced).
    const at::Tensor t =
        (at::arange(length, x.options().dtype(at::kLong)) + c10::Scalar(start - before))
            .view(shape);
    const at::Tensor q = t.div(c10::Scalar(period), "floor");
    const at::Tensor mirrored = (t - q * c10::Scalar(period)).ge(c10::Scalar(n)).to(at::kLong);
    const at::Tensor sign = (1 - 2 * mirrored).to(compute);
    const at::Tensor c_last = (2 * q + 2 * mirrored).to(compute);
    const at::Tensor c_first = (-2 * q).to(compute);
    const at::Tensor part = even.narrow_symint(axis, start, length).to(compute) * sign +
                            last * c_last + first * c_first;
    return part.to(dtype);
  };
  return at::cat({side(0, before), x, side(n + before, after)}, axis);
}

at::Tensor odd_reflect_axis(const at::Tensor& x, int64_t axis, int64_t before, int64_t after,
                            PadMode mode) {
  std::vector<int64_t> axis_width(2 * x.dim(), 0);
  axis_width[2 * axis] = before;
  axis_width[2 * axis + 1] = after;
  const c10::SymInt n = x.sym_size(axis);
  // numpy extends a single element as its edge, in both reflect types
  if (size_is(n, 1)) return ops::pad_index(x, as_sym(axis_width), "edge", std::nullopt);
  if (n.is_symbolic() && x.scalar_type() != at::kBool) {
    const at::Tensor even =
        ops::pad_index(x, as_sym(axis_width), pad_mode_name(mode), std::nullopt);
    return odd_reflect_axis_closed_form(x, even, axis, before, after, mode);
  }
  // Bools have no closed form (each period is cast to bool before the next reads it): their
  // padded axis specialises under tracing.
  const at::Tensor padded = ops::pad_index(x, as_sym(axis_width), "empty", std::nullopt);
  return odd_reflect_axis_replay(padded, axis, before, after, n.guard_int(__FILE__, __LINE__),
                                 mode);
}

at::Tensor pad_odd(const at::Tensor& self, const std::vector<int64_t>& pad_width, PadMode mode) {
  at::Tensor result = self;
  for (int64_t k = 0; k < self.dim(); ++k) {
    if (pad_width[2 * k] == 0 && pad_width[2 * k + 1] == 0) continue;
    result = odd_reflect_axis(result, k, pad_width[2 * k], pad_width[2 * k + 1], mode);
  }
  return result.is_same(self) ? self.clone() : result;  // numpy returns a new array
}

// ---- linear_ramp ----

// The type numpy's linspace computes a ramp in: numpy's promotion of the end value and the input,
// made inexact. numpy promotes an integer with a float to a float that holds it exactly (int64 with
// float32 is float64, where torch says float32), and integers alone compute in float64. Python
// end values reach here as float64 / int64, so float16 / float32 inputs ramp in float64 (numpy).
at::ScalarType numpy_ramp_type(at::ScalarType end, at::ScalarType input) {
  auto is_float = [](at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); };
  if (!is_float(end) && !is_float(input)) return at::kDouble;
  auto float_bits_to_hold = [&](at::ScalarType t) -> int {
    if (is_float(t)) return static_cast<int>(c10::elementSize(c10::toRealValueType(t))) * 8;
    if (t == at::kBool) return 0;
    const int bits = static_cast<int>(c10::elementSize(t)) * 8;
    return bits <= 8 ? 16 : bits <= 16 ? 32 : 64;
  };
  const int bits = std::max(float_bits_to_hold(end), float_bits_to_hold(input));
  const bool complex = at::isComplexType(end) || at::isComplexType(input);
  const bool mixed_halves = is_float(end) && is_float(input) && bits == 16 &&
                            c10::toRealValueType(end) != c10::toRealValueType(input);
  at::ScalarType real = bits == 64                   ? at::kDouble
                        : bits == 32 || mixed_halves ? at::kFloat
                                                     : at::kHalf;
  if (real == at::kHalf && (c10::toRealValueType(input) == at::kBFloat16 ||
                            c10::toRealValueType(end) == at::kBFloat16)) {
    real = at::kBFloat16;
  }
  return complex ? c10::toComplexType(real) : real;
}

// numpy casts float64 to float16 in one rounding; torch's cast goes through float32, a double
// rounding one ulp off near ties. Rounding to float32 with round-to-odd first makes the second
// rounding exact (float32 has more than 2 * 11 + 1 bits). Differentiable: the nudge is detached.
at::Tensor round_to_half_once(const at::Tensor& value, at::ScalarType half_type) {
  const at::Tensor nearest = value.to(at::kFloat);
  at::Tensor nudge;
  {
    at::NoGradGuard no_grad;
    const at::Tensor inexact = nearest.to(at::kDouble).ne(value).logical_and(nearest.isfinite());
    const at::Tensor even = nearest.view(at::kInt).bitwise_and(1).eq(0);
    const at::Tensor toward =
        at::where(value.gt(nearest.to(at::kDouble)), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity())
            .to(at::kFloat);
    nudge = at::where(inexact.logical_and(even), at::nextafter(nearest, toward) - nearest, 0.0f);
  }
  return (nearest + nudge).to(half_type);
}

// numpy's linspace(end, edge, width, endpoint=False) along `axis` (descending: reversed), in
// numpy's type (numpy_ramp_type), floored for integer dtypes, cast to the input's dtype.
at::Tensor linear_ramp(const at::Tensor& end, const at::Tensor& edge, int64_t width, int64_t axis,
                       bool descending) {
  const at::ScalarType dtype = edge.scalar_type();
  const at::ScalarType dt = numpy_ramp_type(end.scalar_type(), dtype);
  const at::Tensor start = end.to(edge.device(), dt);
  const at::Tensor delta = edge.to(dt) - start;
  const at::Tensor step = delta / static_cast<double>(width);
  std::vector<int64_t> shape(edge.dim(), 1);
  shape[axis] = width;
  at::Tensor t =
      at::arange(width, edge.options().dtype(c10::toRealValueType(dt))).to(dt).view(shape);
  if (descending) t = t.flip(axis);
  // numpy switches to (t / width) * delta for the whole axis when any step underflows to 0.
  const at::Tensor any_zero_step = (step == 0).any();
  at::Tensor ramp =
      at::where(any_zero_step, t / static_cast<double>(width) * delta + start, t * step + start);
  if (at::isIntegralType(dtype, /*includeBool=*/false)) ramp = ramp.floor();
  if ((dtype == at::kHalf || dtype == at::kBFloat16) && dt == at::kDouble) {
    return round_to_half_once(ramp, dtype);
  }
  return ramp.to(dtype);
}

at::Tensor pad_linear_ramp(const at::Tensor& self, const std::vector<int64_t>& pad_width,
                           const std::optional<at::Tensor>& end_values) {
  const c10::SymIntArrayRef sizes = self.sym_sizes();
  const at::Tensor ends = end_values.has_value()
                              ? value_pairs("pad", "end_values", *end_values, self.dim())
                              : at::zeros({self.dim(), 2}, at::kDouble);
  at::Tensor out = ops::pad_index(self, as_sym(pad_width), "empty", std::nullopt);
  for (int64_t k = 0; k < self.dim(); ++k) {
    const int64_t before = pad_width[2 * k], after = pad_width[2 * k + 1];
    const c10::SymInt& n = sizes[k];
    const at::Tensor region = axis_region(out, pad_width, sizes, k);
    if (before > 0) {
      region.narrow(k, 0, before)
          .copy_(linear_ramp(ends[k][0], region.narrow(k, before, 1), before, k, false));
    }
    if (after > 0) {
      const at::Tensor edge = region.narrow_symint(k, n + before - 1, 1);
      region.narrow_symint(k, n + before, after)
          .copy_(linear_ramp(ends[k][1], edge, after, k, true));
    }
  }
  return out;
}

// ---- maximum, minimum, mean, median ----

at::Tensor numpy_mean(const at::Tensor& chunk, int64_t axis) {
  if (is_exact_float(chunk.scalar_type())) return chunk.mean(axis, /*keepdim=*/true);
  return cast_like_numpy(chunk.to(at::kDouble).mean(axis, /*keepdim=*/true), chunk.scalar_type());
}

// numpy's median: the middle element, or the mean of the two middle ones (not torch.median's
// lower one); NaN if the chunk holds a NaN. The gradient flows to the middle element(s).
at::Tensor numpy_median(const at::Tensor& chunk, int64_t axis) {
  const at::ScalarType dtype = chunk.scalar_type();
  const c10::SymInt length = chunk.sym_size(axis);
  if (size_is(length, 0)) {  // numpy: NaN (mean of an empty slice)
    std::vector<c10::SymInt> shape = chunk.sym_sizes().vec();
    shape[axis] = 1;
    return cast_like_numpy(at::full_symint(shape, std::numeric_limits<double>::quiet_NaN(),
                                           chunk.options().dtype(at::kDouble)),
                           dtype);
  }
  const at::Tensor keys = dtype == at::kBool ? chunk.to(at::kByte) : chunk;
  // The middle element(s) by selection where the length is known and the dtype is taken: the lower
  // one is torch.median's (NaN where the line holds one, as numpy's), the upper one kthvalue's (NaN
  // orders last there: a line with a NaN has a NaN lower one already). A sort orders and moves
  // every element (1.0 s -> 0.2 s for 4 x 1581 x 1581 floats); it stays while tracing (a symbolic
  // length) and for uint16 / 32 / 64, which median / kthvalue do not take.
  const bool selectable =
      !length.is_symbolic() && dtype != at::kUInt16 && dtype != at::kUInt32 && dtype != at::kUInt64;
  if (selectable) {
    const int64_t n = length.as_int_unchecked();
    const at::Tensor lower = std::get<0>(keys.median(axis, /*keepdim=*/true));
    const at::Tensor upper =
        n % 2 == 1 ? lower : std::get<0>(keys.kthvalue(n / 2 + 1, axis, /*keepdim=*/true));
    if (!at::isFloatingType(dtype)) {
      return cast_like_numpy((lower.to(at::kDouble) + upper.to(at::kDouble)) / 2, dtype);
    }
    if (n % 2 == 1) return lower;
    const at::ScalarType compute = at::toOpMathType(dtype);
    return ((lower.to(compute) + upper.to(compute)) / 2).to(dtype);
  }
  const at::Tensor sorted = std::get<0>(keys.sort(axis));
  const at::Tensor lower = sorted.narrow_symint(axis, (length - 1) / 2, 1);
  const at::Tensor upper = sorted.narrow_symint(axis, length / 2, 1);
  if (!at::isFloatingType(dtype)) {
    return cast_like_numpy((lower.to(at::kDouble) + upper.to(at::kDouble)) / 2, dtype);
  }
  at::Tensor median = lower;
  const c10::SymInt parity = length % 2;
  if (parity.is_symbolic()) {  // chosen when the graph runs: a guard would fix the parity
    const at::ScalarType compute = at::toOpMathType(dtype);
    const at::Tensor mean_of_two = ((lower.to(compute) + upper.to(compute)) / 2).to(dtype);
    const at::Tensor odd =
        at::scalar_tensor(c10::Scalar(parity), sorted.options().dtype(at::kLong));
    median = at::where(odd.eq(1), lower, mean_of_two);
  } else if (parity.as_int_unchecked() == 0) {
    const at::ScalarType compute = at::toOpMathType(dtype);
    median = ((lower.to(compute) + upper.to(compute)) / 2).to(dtype);
  }
  const at::Tensor has_nan = sorted.narrow_symint(axis, length - 1, 1).isnan();  // NaN sorts last
  return at::where(
      has_nan, at::full({}, std::numeric_limits<double>::quiet_NaN(), sorted.options()), median);
}

// torch has no max / min kernels for uint16 / uint32 / uint64: reduce an order-preserving int64
// image of them (a widening for 16 / 32 bits; for 64 bits, the top bit flipped) and map back.
at::Tensor unsigned_extremum(const at::Tensor& chunk, int64_t axis, bool largest) {
  const bool wide = chunk.scalar_type() == at::kUInt64;
  const at::Tensor flip = at::scalar_tensor(std::numeric_limits<int64_t>::min(), at::kLong);
  const at::Tensor image = wide ? chunk.view(at::kLong).bitwise_xor(flip) : chunk.to(at::kLong);
  const at::Tensor best =
      largest ? image.amax(axis, /*keepdim=*/true) : image.amin(axis, /*keepdim=*/true);
  return wide ? best.bitwise_xor(flip).view(at::kUInt64) : best.to(chunk.scalar_type());
}

// max(dim) / min(dim)'s values: the gradient goes to the first extremum (NaN first). torch's
// max(dim) / min(dim) enter a parallel region even for a few elements (~12 ms a call measured on
// two busy cores), so a small chunk reads its values at argmax / argmin instead (the same
// elements; argmax runs inline). gather keeps its input for the backward, and the padded output
// that `chunk` views is written again later: a chunk in the graph is copied first.
at::Tensor first_extremum(const at::Tensor& chunk, int64_t axis, bool largest) {
  constexpr int64_t kSmall = 32768;  // torch's own grain size (at::internal::GRAIN_SIZE)
  if (!is_symbolic(chunk) && !chunk.requires_grad() && chunk.scalar_type() != at::kBool) {
    // no gradient to place: the values alone (amax / amin find no indices: ~1.5x faster)
    return largest ? chunk.amax(axis, /*keepdim=*/true) : chunk.amin(axis, /*keepdim=*/true);
  }
  if (is_symbolic(chunk) || chunk.numel() >= kSmall) {  // traced: the graph keeps max(dim)
    return std::get<0>(largest ? chunk.max(axis, /*keepdim=*/true) : chunk.min(axis, true));
  }
  const at::Tensor keys = chunk.scalar_type() == at::kBool ? chunk.to(at::kByte) : chunk;
  const at::Tensor at =
      largest ? keys.argmax(axis, /*keepdim=*/true) : keys.argmin(axis, /*keepdim=*/true);
  return (chunk.requires_grad() ? chunk.clone() : chunk).gather(axis, at);
}

at::Tensor statistic(const at::Tensor& chunk, int64_t axis, PadMode mode) {
  const at::ScalarType t = chunk.scalar_type();
  const bool barebones_unsigned = t == at::kUInt16 || t == at::kUInt32 || t == at::kUInt64;
  switch (mode) {
    case PadMode::kMaximum:
      if (barebones_unsigned) return unsigned_extremum(chunk, axis, true);
      return first_extremum(chunk, axis, true);
    case PadMode::kMinimum:
      if (barebones_unsigned) return unsigned_extremum(chunk, axis, false);
      return first_extremum(chunk, axis, false);
    case PadMode::kMean:
      return numpy_mean(chunk, axis);
    default:
      return numpy_median(chunk, axis);
  }
}

at::Tensor pad_statistic(const at::Tensor& self, const std::vector<int64_t>& pad_width,
                         PadMode mode, const std::optional<std::vector<int64_t>>& stat_length) {
  TORCH_CHECK_TYPE(!at::isComplexType(self.scalar_type()) || mode == PadMode::kMean,
                   "torch_ragged.pad: mode '", pad_mode_name(mode),
                   "' orders values, which complex inputs can't; got dtype ", self.scalar_type());
  const c10::SymIntArrayRef sizes = self.sym_sizes();
  at::Tensor out = ops::pad_index(self, as_sym(pad_width), "empty", std::nullopt);
  for (int64_t k = 0; k < self.dim(); ++k) {
    const int64_t before = pad_width[2 * k], after = pad_width[2 * k + 1];
    const c10::SymInt& n = sizes[k];
    if (before == 0 && after == 0) continue;
    auto window = [&](int64_t side) {
      return stat_length ? n.min(c10::SymInt((*stat_length)[2 * k + side])) : n;
    };
    const c10::SymInt length_before = window(0), length_after = window(1);
    const at::Tensor region = axis_region(out, pad_width, sizes, k);
    // Both statistics are taken before either side is written (they read only the interior).
    // Without stat_length both sides reduce the whole axis: one statistic serves both.
    at::Tensor stat_before, stat_after;
    if (before > 0) {
      stat_before = statistic(region.narrow_symint(k, before, length_before), k, mode);
    }
    if (after > 0) {
      stat_after = !stat_length && before > 0
                       ? stat_before
                       : statistic(region.narrow_symint(k, n + before - length_after, length_after),
                                   k, mode);
    }
    if (before > 0) {
      at::Tensor target = region.narrow(k, 0, before);
      target.copy_(stat_before.expand_as(target));
    }
    if (after > 0) {
      at::Tensor target = region.narrow_symint(k, n + before, after);
      target.copy_(stat_after.expand_as(target));
    }
  }
  return out;
}

// A value tensor on the CPU or the input's device; a meta one with a real input (or the reverse)
// would reach a kernel that cannot read it.
void check_value_device(std::string_view arg, const std::optional<at::Tensor>& values,
                        const at::Tensor& self) {
  if (!values.has_value() || !values->defined()) return;
  TORCH_CHECK_VALUE(values->device() == self.device() || (values->is_cpu() && !self.is_meta()),
                    "torch_ragged.pad: ", arg, " must be on the CPU or on the input's device ",
                    self.device(), ", got ", values->device());
}

at::Tensor pad_composite(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                         c10::string_view mode_name,
                         const std::optional<at::Tensor>& constant_values,
                         const std::optional<at::Tensor>& end_values,
                         at::OptionalIntArrayRef stat_length,
                         std::optional<c10::string_view> reflect_type) {
  check_defined("pad", "self", self);
  const PadMode mode = parse_pad_mode("pad", mode_name);
  check_keywords(mode, constant_values.has_value(), end_values.has_value(), stat_length.has_value(),
                 reflect_type.has_value());
  check_value_device("constant_values", constant_values, self);
  check_value_device("end_values", end_values, self);
  const bool symbolic = has_symbolic_size(self);
  const std::vector<int64_t> widths =
      symbolic ? checked_widths("pad", self.dim(), pad_width)
               : checked_pad_width("pad", c10::asIntArrayRefUnchecked(self.sym_sizes()), pad_width,
                                   mode);
  const bool input_is_empty = size_is(self.sym_numel(), 0);
  std::optional<std::vector<int64_t>> stat_lengths;
  if (stat_length.has_value()) {
    stat_lengths = checked_stat_length(*stat_length, self.dim(), mode, input_is_empty);
  }
  // Any reflect_type other than "odd" acts as "even" (numpy).
  const bool odd = reflect_type.has_value() && *reflect_type == "odd";
  if (self.dim() == 0) return self.clone();
  const std::optional<IndexPadMode> index_mode = index_mode_of(mode);
  if (index_mode.has_value() && !odd) {
    return ops::pad_index(self, pad_width, pad_mode_name(mode), constant_values);
  }
  // Padded axes are non-empty (checked), so an empty input has an empty output.
  if (input_is_empty) return ops::pad_index(self, pad_width, "empty", std::nullopt);
  if (index_mode.has_value()) return pad_odd(self, widths, mode);
  if (mode == PadMode::kLinearRamp) return pad_linear_ramp(self, widths, end_values);
  return pad_statistic(self, widths, mode, stat_lengths);
}

// Errors of the pad_index kernel it runs carry pad's name (DESIGN.md, Errors).
at::Tensor pad_named(const at::Tensor& self, c10::SymIntArrayRef pad_width,
                     c10::string_view mode_name, const std::optional<at::Tensor>& constant_values,
                     const std::optional<at::Tensor>& end_values,
                     at::OptionalIntArrayRef stat_length,
                     std::optional<c10::string_view> reflect_type) {
  return as_op("pad", [&] {
    return pad_composite(self, pad_width, mode_name, constant_values, end_values, stat_length,
                         reflect_type);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) { m.impl("pad", &pad_named); }

namespace ops {

at::Tensor pad(const at::Tensor& self, c10::SymIntArrayRef pad_width, c10::string_view mode,
               const std::optional<at::Tensor>& constant_values,
               const std::optional<at::Tensor>& end_values, at::OptionalIntArrayRef stat_length,
               std::optional<c10::string_view> reflect_type) {
  static auto op = op_handle<at::Tensor(
      const at::Tensor&, c10::SymIntArrayRef, c10::string_view, const std::optional<at::Tensor>&,
      const std::optional<at::Tensor>&, at::OptionalIntArrayRef, std::optional<c10::string_view>)>(
      "torch_ragged::pad");
  return op.call(self, pad_width, mode, constant_values, end_values, stat_length, reflect_type);
}

at::Tensor pad_index(const at::Tensor& self, c10::SymIntArrayRef pad_width, c10::string_view mode,
                     const std::optional<at::Tensor>& constant_values) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view,
                           const std::optional<at::Tensor>&)>("torch_ragged::pad_index");
  return op.call(self, pad_width, mode, constant_values);
}

at::Tensor pad_index_backward(const at::Tensor& grad_output, c10::SymIntArrayRef pad_width,
                              c10::string_view mode) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view)>(
      "torch_ragged::pad_index_backward");
  return op.call(grad_output, pad_width, mode);
}

}  // namespace ops

at::Tensor pad(const at::Tensor& input, at::IntArrayRef pad_width, std::string_view mode,
               const std::optional<at::Tensor>& constant_values,
               const std::optional<at::Tensor>& end_values, at::OptionalIntArrayRef stat_length,
               std::optional<std::string_view> reflect_type) {
  std::optional<c10::string_view> reflect;
  if (reflect_type.has_value())
    reflect = c10::string_view(reflect_type->data(), reflect_type->size());
  return ops::pad(input, c10::fromIntArrayRefSlow(pad_width),
                  c10::string_view(mode.data(), mode.size()), constant_values, end_values,
                  stat_length, reflect);
}

}  // namespace torch_ragged
