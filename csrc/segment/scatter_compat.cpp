// torch_scatter's functions with its signatures and conventions, for code written against
// torch_scatter / PyG (the Python module torch_ragged.scatter_compat): out=, reduce="mul",
// segment_csr / segment_coo, gather_csr / gather_coo and the composites std / logsumexp / softmax /
// log_softmax. Each is an op composed from the segment core's ops (scatter, scatter_max / min,
// segment_sum / mean / max / min, segment_expand), registered CompositeImplicitAutograd: autograd,
// fake tensors and every device come from the ops it calls, so results are deterministic where
// theirs are.
//
// The ops are functional: given `out`, they return what torch_scatter leaves in it (out's values
// combined with src's: added for sum, multiplied for mul, the better of the two for max / min,
// overwritten by segment_csr / gather_*), and the Python functions write that into `out` as
// torch_scatter does. Where torch_ragged differs from torch_scatter (documented in
// docs/segment.md): NaN wins max / min (torch's rule), empty positions of scatter_logsumexp are 0
// but a group of -inf gives -inf (torch.logsumexp's), and positions gather_csr reaches with no
// segment are 0.

#include <ATen/ATen.h>
#include <torch/library.h>
#include <torch_ragged/scatter_compat.h>

#include <string>
#include <vector>

#include "common/checks.h"
#include "common/op_handle.h"
#include "segment/scatter.h"
#include "segment/segment_ops.h"

namespace torch_ragged {

TORCH_LIBRARY_FRAGMENT(torch_ragged, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(
      "compat_scatter(Tensor src, Tensor index, int dim=-1, Tensor? out=None, "
      "SymInt? dim_size=None, str reduce=\"sum\") -> Tensor",
      tags);
  m.def(
      "compat_scatter_arg(Tensor src, Tensor index, int dim=-1, Tensor? out=None, "
      "SymInt? dim_size=None, str reduce=\"max\") -> (Tensor values, Tensor arg)",
      tags);
  m.def(
      "compat_segment_csr(Tensor src, Tensor indptr, Tensor? out=None, str reduce=\"sum\") "
      "-> Tensor",
      tags);
  m.def(
      "compat_segment_csr_arg(Tensor src, Tensor indptr, Tensor? out=None, str reduce=\"max\") "
      "-> (Tensor values, Tensor arg)",
      tags);
  m.def("compat_gather_csr(Tensor src, Tensor indptr, Tensor? out=None) -> Tensor", tags);
  m.def("compat_gather_coo(Tensor src, Tensor index, Tensor? out=None) -> Tensor", tags);
  m.def(
      "compat_scatter_std(Tensor src, Tensor index, int dim=-1, Tensor? out=None, "
      "SymInt? dim_size=None, bool unbiased=True) -> Tensor",
      tags);
  m.def(
      "compat_scatter_logsumexp(Tensor src, Tensor index, int dim=-1, Tensor? out=None, "
      "SymInt? dim_size=None, float eps=1e-12) -> Tensor",
      tags);
  m.def(
      "compat_scatter_softmax(Tensor src, Tensor index, int dim=-1, SymInt? dim_size=None) "
      "-> Tensor",
      tags);
  m.def(
      "compat_scatter_log_softmax(Tensor src, Tensor index, int dim=-1, SymInt? dim_size=None) "
      "-> Tensor",
      tags);
}

namespace {

using OptionalSize = std::optional<c10::SymInt>;
using OptionalTensor = std::optional<at::Tensor>;

// index defined and on src's device (checked here: a meta index would reach the inner ops' fake
// kernels, whose Python errors could not be named after this op).
void check_index(const std::string& op, const at::Tensor& src, const at::Tensor& index) {
  check_defined(op, "index", index);
  TORCH_CHECK_VALUE(index.device() == src.device(), "torch_ragged.", op,
                    ": index must be on src's device ", src.device(), ", got ", index.device());
}

int64_t wrapped_dim(const std::string& op, const at::Tensor& src, int64_t dim) {
  check_defined(op, "src", src);
  TORCH_CHECK_VALUE(src.dim() > 0, "torch_ragged.", op,
                    ": src must have at least one dim, got a 0-d tensor");
  TORCH_CHECK_INDEX(-src.dim() <= dim && dim < src.dim(), "torch_ragged.", op, ": dim ", dim,
                    " is out of range for a ", src.dim(), "-D src");
  return dim < 0 ? dim + src.dim() : dim;
}

// `out` checked against the result's sizes (src's, with dim_size rows along dim, or any count when
// rows is null), dtype and device.
void check_out(const std::string& op, const at::Tensor& src, const at::Tensor& out, int64_t dim,
               const OptionalSize& rows) {
  bool same = out.dim() == src.dim();
  for (int64_t d = 0; same && d < src.dim(); ++d) {
    if (d != dim) same = out.sym_size(d) == src.sym_size(d);
  }
  if (same && rows.has_value()) same = out.sym_size(dim) == *rows;
  TORCH_CHECK_VALUE(same, "torch_ragged.", op, ": out must have src's sizes ", src.sym_sizes(),
                    " except along dim ", dim, ", got ", out.sym_sizes());
  TORCH_CHECK_TYPE(out.scalar_type() == src.scalar_type(), "torch_ragged.", op,
                   ": out must have src's dtype ", src.scalar_type(), ", got ", out.scalar_type());
  TORCH_CHECK_VALUE(out.device() == src.device(), "torch_ragged.", op,
                    ": out must be on src's device ", src.device(), ", got ", out.device());
}

// The output's size along dim: out's when given (a dim_size that disagrees is refused, as
// torch_scatter's), else dim_size (None: the index's largest entry + 1).
OptionalSize size_along_dim(const std::string& op, const at::Tensor& src, const OptionalTensor& out,
                            int64_t dim, const OptionalSize& dim_size) {
  if (!out.has_value()) return dim_size;
  check_out(op, src, *out, dim, std::nullopt);
  if (dim_size.has_value()) {
    TORCH_CHECK_VALUE(*dim_size == out->sym_size(dim), "torch_ragged.", op, ": dim_size ",
                      *dim_size, " disagrees with out.size(", dim, ") = ", out->sym_size(dim));
  }
  return out->sym_size(dim);
}

void check_floating(const std::string& op, const at::Tensor& src) {
  TORCH_CHECK_TYPE(at::isFloatingType(src.scalar_type()), "torch_ragged.", op,
                   " needs a floating-point src, got ", src.scalar_type());
}

bool is_max_reduce(const std::string& op, c10::string_view reduce) {
  TORCH_CHECK_VALUE(reduce == "max" || reduce == "min", "torch_ragged.", op,
                    ": reduce must be max or min, got '", reduce, "'");
  return reduce == "max";
}

// ---- scatter with out ----

std::tuple<at::Tensor, at::Tensor> compat_scatter_arg_body(const at::Tensor& src,
                                                           const at::Tensor& index, int64_t dim,
                                                           const OptionalTensor& out,
                                                           OptionalSize dim_size,
                                                           c10::string_view reduce) {
  const std::string op = "compat_scatter_arg";
  const bool is_max = is_max_reduce(op, reduce);
  const int64_t d = wrapped_dim(op, src, dim);
  check_index(op, src, index);
  const OptionalSize size = size_along_dim(op, src, out, d, dim_size);
  auto [values, arg] = ops::scatter_extremum(is_max, src, index, d, size);
  if (!out.has_value()) return {values, arg};
  // torch_scatter starts from out's values: a row replaces one only when strictly better, and
  // arg stays src.size(dim) where out's value is kept
  const c10::Scalar rows(src.sym_size(d));
  const at::Tensor better = is_max ? values > *out : values < *out;
  const at::Tensor take = better.logical_and(arg.ne(rows));
  return {at::where(take, values, *out), at::where(take, arg, rows)};
}

at::Tensor compat_scatter_body(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                               const OptionalTensor& out, OptionalSize dim_size,
                               c10::string_view reduce) {
  const std::string op = "compat_scatter";
  if ((reduce == "max" || reduce == "min") && out.has_value()) {  // out's values: arg tells
    return std::get<0>(compat_scatter_arg_body(src, index, dim, out, std::move(dim_size), reduce));
  }
  TORCH_CHECK_VALUE(reduce == "max" || reduce == "min" || reduce == "sum" || reduce == "add" ||
                        reduce == "mean" || reduce == "mul",
                    "torch_ragged.", op,
                    ": reduce must be one of sum, add, mean, mul, max, min, got '", reduce, "'");
  const int64_t d = wrapped_dim(op, src, dim);
  check_index(op, src, index);
  const OptionalSize size = size_along_dim(op, src, out, d, dim_size);
  if (!out.has_value()) return ops::scatter(src, index, d, size, reduce);
  if (reduce == "mul") return out->mul(ops::scatter(src, index, d, size, "mul"));
  const at::Tensor sums = out->add(ops::scatter(src, index, d, size, "sum"));
  if (reduce != "mean") return sums;
  // torch_scatter's mean into out: (out + the sum) over the count of elements, at least 1
  const at::Tensor counts =
      ops::scatter(at::ones_like(src, at::kLong), index, d, size, "sum").clamp_min(1);
  if (at::isFloatingType(src.scalar_type()) || at::isComplexType(src.scalar_type())) {
    return sums / counts.to(src.scalar_type());
  }
  return sums.div(counts, "floor").to(src.scalar_type());
}

// ---- segment_csr ----

// src's rows along dim = indptr.dim() - 1 as (batches * length, width) and one first_idx over
// all of them: every batch's segments shifted by its first row, with the rows before, between and
// after them as segments of their own (dropped from the result), so indptr need not start at 0 or
// end at src.size(dim). Batch b's segment k is segment 1 + b * (segments + 1) + k.
struct CsrLayout {
  int64_t dim = 0, batches = 1, segments = 0, length = 0;
  bool direct = false;  // one batch whose indptr runs from 0 to length: first_idx is indptr
  at::Tensor rows, first_idx, indptr;
  at::Tensor batch_start;             // (batches, 1): b * length; undefined when direct
  std::vector<int64_t> result_sizes;  // src's sizes with `segments` along dim
};

// A (1, K + 1) int64 indptr whose entries can be read here (real, on the CPU), and its ends.
bool on_host(const at::Tensor& indptr) {
  return indptr.is_cpu() && !is_symbolic(indptr) && indptr.is_contiguous();
}
int64_t first_entry(const at::Tensor& indptr) { return indptr.const_data_ptr<int64_t>()[0]; }
int64_t last_entry(const at::Tensor& indptr) {
  return indptr.const_data_ptr<int64_t>()[indptr.numel() - 1];
}

CsrLayout csr_layout(const std::string& op, const at::Tensor& src, const at::Tensor& indptr) {
  check_defined(op, "src", src);
  check_defined(op, "indptr", indptr);
  TORCH_CHECK_TYPE(at::isIntegralType(indptr.scalar_type(), /*includeBool=*/false), "torch_ragged.",
                   op, ": indptr must hold integers, got ", indptr.scalar_type());
  TORCH_CHECK_VALUE(indptr.dim() >= 1 && indptr.dim() <= src.dim() && indptr.size(-1) >= 1,
                    "torch_ragged.", op,
                    ": indptr must have 1 to src.dim() dims and at least one entry, got shape ",
                    indptr.sizes(), " for a src of shape ", src.sizes());
  TORCH_CHECK_VALUE(indptr.device() == src.device(), "torch_ragged.", op,
                    ": indptr must be on src's device ", src.device(), ", got ", indptr.device());
  CsrLayout layout;
  layout.dim = indptr.dim() - 1;
  layout.segments = indptr.size(-1) - 1;
  layout.length = src.size(layout.dim);
  std::vector<int64_t> leading(src.sizes().begin(), src.sizes().begin() + layout.dim);
  for (int64_t d = 0; d < layout.dim; ++d) {
    TORCH_CHECK_VALUE(indptr.size(d) == 1 || indptr.size(d) == src.size(d), "torch_ragged.", op,
                      ": indptr's leading sizes ", indptr.sizes(),
                      " must match src's (or be 1), got src ", src.sizes());
    layout.batches *= src.size(d);
  }
  if (indptr.dim() == 1) {  // per-call cost: no expand / reshape for the common 1-D indptr
    layout.indptr = indptr.to(at::kLong).view({1, layout.segments + 1});
  } else {
    std::vector<int64_t> indptr_sizes = leading;
    indptr_sizes.push_back(layout.segments + 1);
    layout.indptr =
        indptr.expand(indptr_sizes).reshape({layout.batches, layout.segments + 1}).to(at::kLong);
  }
  layout.result_sizes.assign(src.sizes().begin(), src.sizes().end());
  layout.result_sizes[layout.dim] = layout.segments;
  return layout;
}

CsrLayout reduction_layout(const std::string& op, const at::Tensor& src, const at::Tensor& indptr) {
  CsrLayout layout = csr_layout(op, src, indptr);
  const int64_t rows = layout.batches * layout.length;
  if (layout.batches > 1) {  // one batch's indptr must not reach into another's rows
    at::_assert_async(layout.indptr.ge(0).logical_and(layout.indptr.le(layout.length)).all(),
                      "torch_ragged." + op + ": indptr's entries must lie in [0, src.size(" +
                          std::to_string(layout.dim) + ")]");
  }
  // per-call cost: a CPU indptr that is already a first_idx (read here, on the host) is used as it
  // is
  if (layout.batches == 1 && on_host(layout.indptr) && first_entry(layout.indptr) == 0 &&
      last_entry(layout.indptr) == layout.length) {
    layout.direct = true;
    layout.first_idx = layout.indptr.view(-1);
    layout.rows = src.reshape({layout.length, -1});
    return layout;
  }
  layout.batch_start =
      at::arange(layout.batches, layout.indptr.options()).mul_(layout.length).unsqueeze(1);
  layout.first_idx = at::cat({at::zeros({1}, layout.indptr.options()),
                              layout.indptr.add(layout.batch_start).reshape(-1),
                              at::full({1}, rows, layout.indptr.options())});
  layout.rows = src.reshape({rows, -1});
  return layout;
}

// The segments' rows of a per-segment result (first_idx's segments, width) in result_sizes.
at::Tensor batch_segments(const CsrLayout& layout, const at::Tensor& per_segment) {
  if (layout.direct) return per_segment.view({1, layout.segments, -1});
  return per_segment.narrow(0, 1, layout.batches * (layout.segments + 1))
      .view({layout.batches, layout.segments + 1, -1})
      .narrow(1, 0, layout.segments);
}

std::tuple<at::Tensor, at::Tensor> compat_segment_csr_arg_body(const at::Tensor& src,
                                                               const at::Tensor& indptr,
                                                               const OptionalTensor& out,
                                                               c10::string_view reduce) {
  const std::string op = "compat_segment_csr_arg";
  const bool is_max = is_max_reduce(op, reduce);
  const CsrLayout layout = reduction_layout(op, src, indptr);
  if (out.has_value()) check_out(op, src, *out, layout.dim, layout.segments);
  auto [values, arg] = is_max ? ops::segment_max(layout.rows, layout.first_idx)
                              : ops::segment_min(layout.rows, layout.first_idx);
  // arg: rows of the flattened batches back to rows of src along dim; empty segments (-1) hold
  // src.size(dim), as torch_scatter's. A small arg of one batch of rows on the host: a loop over
  // the fresh arg (per-call cost: the ATen form is ~5 small ops; large ones keep it, threaded).
  constexpr int64_t kSmall = 32768;  // torch's grain size
  if (layout.direct && arg.is_cpu() && !is_symbolic(arg) && arg.is_contiguous() &&
      arg.numel() < kSmall) {
    int64_t* row = arg.mutable_data_ptr<int64_t>();
    for (int64_t i = 0; i < arg.numel(); ++i) row[i] = row[i] < 0 ? layout.length : row[i];
    return {values.view(layout.result_sizes), arg.view(layout.result_sizes)};
  }
  const at::Tensor packed_arg = batch_segments(layout, arg);
  const at::Tensor row_arg =
      at::where(packed_arg.lt(0), layout.length,
                layout.direct ? packed_arg : packed_arg - layout.batch_start.unsqueeze(2));
  return {batch_segments(layout, values).reshape(layout.result_sizes),
          row_arg.reshape(layout.result_sizes)};
}

at::Tensor compat_segment_csr_body(const at::Tensor& src, const at::Tensor& indptr,
                                   const OptionalTensor& out, c10::string_view reduce) {
  const std::string op = "compat_segment_csr";
  if (reduce == "max" || reduce == "min") {
    return std::get<0>(compat_segment_csr_arg_body(src, indptr, out, reduce));
  }
  TORCH_CHECK_VALUE(reduce == "sum" || reduce == "add" || reduce == "mean", "torch_ragged.", op,
                    ": reduce must be one of sum, add, mean, max, min, got '", reduce, "'");
  const CsrLayout layout = reduction_layout(op, src, indptr);
  if (out.has_value()) check_out(op, src, *out, layout.dim, layout.segments);
  const at::Tensor per_segment = reduce == "mean" ? ops::segment_mean(layout.rows, layout.first_idx)
                                                  : ops::segment_sum(layout.rows, layout.first_idx);
  return batch_segments(layout, per_segment).reshape(layout.result_sizes);
}

// ---- gather_csr / gather_coo ----

// gather_csr: each segment's value repeated over its rows; rows of no segment (before indptr[0]
// or after a batch's last entry) are 0. The output's length along dim: out's, or indptr's last
// entry (read on the host when there are several batches, as torch_scatter reads it).
at::Tensor compat_gather_csr_body(const at::Tensor& src, const at::Tensor& indptr,
                                  const OptionalTensor& out) {
  const std::string op = "compat_gather_csr";
  const CsrLayout layout = csr_layout(op, src, indptr);
  TORCH_CHECK_VALUE(src.size(layout.dim) == layout.segments, "torch_ragged.", op, ": src.size(",
                    layout.dim, ") must be indptr.size(-1) - 1 = ", layout.segments, ", got ",
                    src.size(layout.dim));
  const at::Tensor values = src.reshape({layout.batches, layout.segments, -1});
  const at::Tensor gap = at::zeros({layout.batches, 1, values.size(2)}, src.options());
  std::vector<c10::SymInt> sizes(src.sym_sizes().begin(), src.sym_sizes().end());
  if (layout.batches == 1 && !out.has_value() && on_host(layout.indptr) &&
      first_entry(layout.indptr) == 0) {
    // per-call cost: a CPU indptr from 0 is the first_idx of the rows (read here, on the host)
    const at::Tensor expanded = ops::segment_expand(values.view({layout.segments, -1}),
                                                    layout.indptr.view(-1), std::nullopt);
    sizes[layout.dim] = expanded.sym_size(0);
    return expanded.view_symint(sizes);
  }
  if (layout.batches == 1 && !out.has_value()) {  // indptr's last entry ends the output
    const at::Tensor first_idx =
        at::cat({at::zeros({1}, layout.indptr.options()), layout.indptr.reshape(-1)});
    const at::Tensor expanded = ops::segment_expand(
        at::cat({gap, values}, 1).view({layout.segments + 1, -1}), first_idx, std::nullopt);
    sizes[layout.dim] = expanded.sym_size(0);
    return expanded.view_symint(sizes);
  }
  const int64_t length =
      out.has_value() ? out->size(layout.dim) : layout.indptr.reshape(-1)[-1].item<int64_t>();
  if (out.has_value()) check_out(op, src, *out, layout.dim, std::nullopt);
  const at::Tensor start =
      at::arange(layout.batches, layout.indptr.options()).mul_(length).unsqueeze(1);
  const at::Tensor first_idx =
      at::cat({at::cat({start, layout.indptr.add(start)}, 1).view(-1),
               at::full({1}, layout.batches * length, layout.indptr.options())});
  const at::Tensor expanded = ops::segment_expand(
      at::cat({gap, values, gap}, 1).view({layout.batches * (layout.segments + 2), -1}), first_idx,
      c10::SymInt(layout.batches * length));
  sizes[layout.dim] = length;
  return expanded.view_symint(sizes);
}

// gather_coo: out[..., i, ...] = src[..., index[..., i], ...] along dim = index.dim() - 1, index
// broadcast over src's leading dims and expanded over its trailing ones.
at::Tensor compat_gather_coo_body(const at::Tensor& src, const at::Tensor& index,
                                  const OptionalTensor& out) {
  const std::string op = "compat_gather_coo";
  check_defined(op, "src", src);
  check_index(op, src, index);
  TORCH_CHECK_TYPE(at::isIntegralType(index.scalar_type(), /*includeBool=*/false), "torch_ragged.",
                   op, ": index must hold integers, got ", index.scalar_type());
  TORCH_CHECK_VALUE(index.dim() >= 1 && index.dim() <= src.dim(), "torch_ragged.", op,
                    ": index must have 1 to src.dim() dims, got shape ", index.sizes(),
                    " for a src of shape ", src.sizes());
  const int64_t dim = index.dim() - 1;
  at::Tensor gathered;
  if (index.dim() == 1) {
    gathered = src.index_select(0, index);
  } else {
    std::vector<c10::SymInt> shape(index.sym_sizes().begin(), index.sym_sizes().end());
    shape.resize(src.dim(), c10::SymInt(1));
    std::vector<c10::SymInt> full(src.sym_sizes().begin(), src.sym_sizes().end());
    full[dim] = index.sym_size(dim);
    gathered = src.gather(dim, index.view_symint(shape).expand_symint(full).to(at::kLong));
  }
  if (out.has_value()) check_out(op, src, *out, dim, gathered.sym_size(dim));
  return gathered;
}

// ---- composites ----

at::Tensor compat_scatter_std_body(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                                   const OptionalTensor& out, OptionalSize dim_size,
                                   bool unbiased) {
  const std::string op = "compat_scatter_std";
  const int64_t d = wrapped_dim(op, src, dim);
  check_index(op, src, index);
  check_floating(op, src);
  const OptionalSize size = size_along_dim(op, src, out, d, dim_size);
  const at::Tensor sums = ops::scatter(src, index, d, size, "sum");
  const at::Tensor counts =
      ops::scatter(at::ones_like(src, at::kLong), index, d, sums.sym_size(d), "sum");
  const at::Tensor mean = sums / counts.clamp_min(1).to(src.scalar_type());
  const at::Tensor deviation = src - read_at_positions(mean, src, index, d);
  at::Tensor squares = ops::scatter(deviation * deviation, index, d, sums.sym_size(d), "sum");
  if (out.has_value()) squares = squares + *out;  // torch_scatter sums the squares into out
  const at::Tensor variance =
      squares / (unbiased ? counts - 1 : counts).clamp_min(1).to(src.scalar_type());
  // sqrt's derivative is infinite at 0: a position of one element (or of equal ones) would send NaN
  // (inf * 0) back; its std is 0 and so is the gradient sent here
  const at::Tensor positive = variance > 0;
  return at::where(positive, at::where(positive, variance, 1).sqrt(), 0);
}

// log(sum(exp(x)) + eps) per position, shifted by the position's maximum (detached, as
// torch.logsumexp's: its gradient cancels). With out, out's value joins its position's sum.
// Positions nothing reaches give 0 (torch_scatter's); a position of -inf only gives -inf.
at::Tensor compat_scatter_logsumexp_body(const at::Tensor& src, const at::Tensor& index,
                                         int64_t dim, const OptionalTensor& out,
                                         OptionalSize dim_size, double eps) {
  const std::string op = "compat_scatter_logsumexp";
  const int64_t d = wrapped_dim(op, src, dim);
  check_index(op, src, index);
  check_floating(op, src);
  const OptionalSize size = size_along_dim(op, src, out, d, dim_size);
  at::Tensor maxima;
  if (out.has_value()) {  // out's value joins its position's maximum where something reaches it
    auto [values, arg] = ops::scatter_extremum(true, src.detach(), index, d, size);
    const at::Tensor reached = arg.ne(c10::Scalar(src.sym_size(d)));
    maxima = at::where(reached, at::maximum(values, out->detach()), out->detach());
  } else {
    maxima = ops::scatter(src.detach(), index, d, size, "max");
  }
  const at::Tensor shift = at::where(maxima.isfinite(), maxima, 0);
  at::Tensor sums = ops::scatter((src - read_at_positions(shift, src, index, d)).exp(), index, d,
                                 maxima.sym_size(d), "sum");
  if (out.has_value()) sums = sums + (*out - shift).exp();
  const at::Tensor all_minus_infinity = maxima.isneginf();
  const at::Tensor exact = at::where(all_minus_infinity, maxima, (sums + eps).log() + shift);
  if (out.has_value()) return exact;
  // a position something reaches sums exp(0) = 1 for its maximum at least (or inf / NaN), unless
  // all its elements are -inf: a zero sum with a finite maximum is a position nothing reaches
  return at::where(sums.eq(0).logical_and(all_minus_infinity.logical_not()), 0, exact);
}

// softmax per position: exp(x - the position's max) over their sum (torch.softmax's values,
// NaN where a position holds only -inf, as torch's).
at::Tensor softmax_parts(const std::string& op, const at::Tensor& src, const at::Tensor& index,
                         int64_t dim, const OptionalSize& dim_size, bool log) {
  const int64_t d = wrapped_dim(op, src, dim);
  check_index(op, src, index);
  check_floating(op, src);
  const at::Tensor maxima = ops::scatter(src.detach(), index, d, dim_size, "max");
  const at::Tensor shifted = src - read_at_positions(maxima, src, index, d);
  const at::Tensor exps = shifted.exp();
  const at::Tensor sums = ops::scatter(exps, index, d, maxima.sym_size(d), "sum");
  if (log) return shifted - read_at_positions(sums.log(), src, index, d);
  return exps / read_at_positions(sums, src, index, d);
}

at::Tensor compat_scatter_softmax_body(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                                       OptionalSize dim_size) {
  return softmax_parts("compat_scatter_softmax", src, index, dim, dim_size, false);
}

at::Tensor compat_scatter_log_softmax_body(const at::Tensor& src, const at::Tensor& index,
                                           int64_t dim, OptionalSize dim_size) {
  return softmax_parts("compat_scatter_log_softmax", src, index, dim, dim_size, true);
}

// Each op is its body with the errors of the ops it calls named after it ("torch_ragged.<op>: ...
// (from torch_ragged.<inner op>)").
template <const char* kName, auto kBody>
struct NamedOp;
template <const char* kName, typename Result, typename... Args, Result (*kBody)(Args...)>
struct NamedOp<kName, kBody> {
  static Result call(Args... args) {
    return as_op(kName, [&] { return kBody(args...); });
  }
};

constexpr char kCompatScatter[] = "compat_scatter";
constexpr char kCompatScatterArg[] = "compat_scatter_arg";
constexpr char kCompatSegmentCsr[] = "compat_segment_csr";
constexpr char kCompatSegmentCsrArg[] = "compat_segment_csr_arg";
constexpr char kCompatGatherCsr[] = "compat_gather_csr";
constexpr char kCompatGatherCoo[] = "compat_gather_coo";
constexpr char kCompatScatterStd[] = "compat_scatter_std";
constexpr char kCompatScatterLogsumexp[] = "compat_scatter_logsumexp";
constexpr char kCompatScatterSoftmax[] = "compat_scatter_softmax";
constexpr char kCompatScatterLogSoftmax[] = "compat_scatter_log_softmax";

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CompositeImplicitAutograd, m) {
  m.impl("compat_scatter", &NamedOp<kCompatScatter, &compat_scatter_body>::call);
  m.impl("compat_scatter_arg", &NamedOp<kCompatScatterArg, &compat_scatter_arg_body>::call);
  m.impl("compat_segment_csr", &NamedOp<kCompatSegmentCsr, &compat_segment_csr_body>::call);
  m.impl("compat_segment_csr_arg",
         &NamedOp<kCompatSegmentCsrArg, &compat_segment_csr_arg_body>::call);
  m.impl("compat_gather_csr", &NamedOp<kCompatGatherCsr, &compat_gather_csr_body>::call);
  m.impl("compat_gather_coo", &NamedOp<kCompatGatherCoo, &compat_gather_coo_body>::call);
  m.impl("compat_scatter_std", &NamedOp<kCompatScatterStd, &compat_scatter_std_body>::call);
  m.impl("compat_scatter_logsumexp",
         &NamedOp<kCompatScatterLogsumexp, &compat_scatter_logsumexp_body>::call);
  m.impl("compat_scatter_softmax",
         &NamedOp<kCompatScatterSoftmax, &compat_scatter_softmax_body>::call);
  m.impl("compat_scatter_log_softmax",
         &NamedOp<kCompatScatterLogSoftmax, &compat_scatter_log_softmax_body>::call);
}

}  // namespace torch_ragged

// ---- Public C++ API (torch_ragged/scatter_compat.h): each function calls its op ----

namespace torch_ragged::scatter_compat {

namespace {

using OptionalSize = std::optional<c10::SymInt>;
using OptionalTensor = std::optional<at::Tensor>;
using Pair = std::tuple<at::Tensor, at::Tensor>;

OptionalSize sym(std::optional<int64_t> n) {
  if (!n.has_value()) return std::nullopt;
  return c10::SymInt(*n);
}
c10::string_view view(std::string_view s) { return c10::string_view(s.data(), s.size()); }

// torch_scatter writes its result into `out` when one is given, and returns it.
at::Tensor into(const OptionalTensor& out, const at::Tensor& result) {
  return out.has_value() ? out->copy_(result) : result;
}
Pair into(const OptionalTensor& out, const Pair& result) {
  return {into(out, std::get<0>(result)), std::get<1>(result)};
}

Pair scatter_arg(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                 const OptionalTensor& out, std::optional<int64_t> dim_size,
                 std::string_view reduce) {
  static auto op =
      op_handle<Pair(const at::Tensor&, const at::Tensor&, int64_t, const OptionalTensor&,
                     OptionalSize, c10::string_view)>("torch_ragged::compat_scatter_arg");
  return into(out, op.call(src, index, dim, out, sym(dim_size), view(reduce)));
}

Pair segment_csr_arg(const at::Tensor& src, const at::Tensor& indptr, const OptionalTensor& out,
                     std::string_view reduce) {
  static auto op = op_handle<Pair(const at::Tensor&, const at::Tensor&, const OptionalTensor&,
                                  c10::string_view)>("torch_ragged::compat_segment_csr_arg");
  return into(out, op.call(src, indptr, out, view(reduce)));
}

}  // namespace

at::Tensor scatter(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                   const OptionalTensor& out, std::optional<int64_t> dim_size,
                   std::string_view reduce) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, const OptionalTensor&,
                           OptionalSize, c10::string_view)>("torch_ragged::compat_scatter");
  return into(out, op.call(src, index, dim, out, sym(dim_size), view(reduce)));
}

Pair scatter_max(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                 const OptionalTensor& out, std::optional<int64_t> dim_size) {
  return scatter_arg(src, index, dim, out, dim_size, "max");
}

Pair scatter_min(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                 const OptionalTensor& out, std::optional<int64_t> dim_size) {
  return scatter_arg(src, index, dim, out, dim_size, "min");
}

at::Tensor segment_csr(const at::Tensor& src, const at::Tensor& indptr, const OptionalTensor& out,
                       std::string_view reduce) {
  static auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const OptionalTensor&,
                                        c10::string_view)>("torch_ragged::compat_segment_csr");
  return into(out, op.call(src, indptr, out, view(reduce)));
}

Pair segment_max_csr(const at::Tensor& src, const at::Tensor& indptr, const OptionalTensor& out) {
  return segment_csr_arg(src, indptr, out, "max");
}

Pair segment_min_csr(const at::Tensor& src, const at::Tensor& indptr, const OptionalTensor& out) {
  return segment_csr_arg(src, indptr, out, "min");
}

at::Tensor segment_coo(const at::Tensor& src, const at::Tensor& index, const OptionalTensor& out,
                       std::optional<int64_t> dim_size, std::string_view reduce) {
  return scatter(src, index, index.dim() - 1, out, dim_size, reduce);
}

at::Tensor gather_csr(const at::Tensor& src, const at::Tensor& indptr, const OptionalTensor& out) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const OptionalTensor&)>(
          "torch_ragged::compat_gather_csr");
  return into(out, op.call(src, indptr, out));
}

at::Tensor gather_coo(const at::Tensor& src, const at::Tensor& index, const OptionalTensor& out) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const OptionalTensor&)>(
          "torch_ragged::compat_gather_coo");
  return into(out, op.call(src, index, out));
}

at::Tensor scatter_std(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                       const OptionalTensor& out, std::optional<int64_t> dim_size, bool unbiased) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, const OptionalTensor&,
                           OptionalSize, bool)>("torch_ragged::compat_scatter_std");
  return into(out, op.call(src, index, dim, out, sym(dim_size), unbiased));
}

at::Tensor scatter_logsumexp(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                             const OptionalTensor& out, std::optional<int64_t> dim_size,
                             double eps) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, const OptionalTensor&,
                           OptionalSize, double)>("torch_ragged::compat_scatter_logsumexp");
  return into(out, op.call(src, index, dim, out, sym(dim_size), eps));
}

at::Tensor scatter_softmax(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                           std::optional<int64_t> dim_size) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, OptionalSize)>(
          "torch_ragged::compat_scatter_softmax");
  return op.call(src, index, dim, sym(dim_size));
}

at::Tensor scatter_log_softmax(const at::Tensor& src, const at::Tensor& index, int64_t dim,
                               std::optional<int64_t> dim_size) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, OptionalSize)>(
          "torch_ragged::compat_scatter_log_softmax");
  return op.call(src, index, dim, sym(dim_size));
}

}  // namespace torch_ragged::scatter_compat
