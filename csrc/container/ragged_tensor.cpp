// The C++ RaggedTensor: a thin layer over the batch and segment ops, reached through their public
// headers (the container owns no kernel; the dispatcher picks the CPU or CUDA one).

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch_ragged/batch.h>
#include <torch_ragged/ragged_tensor.h>
#include <torch_ragged/segment.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace torch_ragged {
namespace {

constexpr std::string_view kWhere = "torch_ragged.RaggedTensor";

at::Tensor first_idx_of(const at::Tensor& shape_per_tensor) {
  return get_first_idx(shape_per_tensor.prod(1));
}

// (-1, 1, ..., 1) of `dims` dims: a 1-D tensor viewed to broadcast along the feature dims.
std::vector<int64_t> column_shape(int64_t dims) {
  std::vector<int64_t> shape(dims, 1);
  shape[0] = -1;
  return shape;
}

int64_t product(at::IntArrayRef sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace

RaggedTensor::RaggedTensor(at::Tensor values, at::Tensor first_idx, at::Tensor shape_per_tensor,
                           bool /*trusted*/)
    : values_(std::move(values)),
      first_idx_(std::move(first_idx)),
      shape_per_tensor_(std::move(shape_per_tensor)) {}

RaggedTensor::RaggedTensor(at::Tensor values, at::Tensor first_idx, at::Tensor shape_per_tensor) {
  TORCH_CHECK_VALUE(values.defined() && values.dim() >= 1, kWhere,
                    ": values must be a tensor (rows, *feature)");
  TORCH_CHECK_VALUE(first_idx.defined() && first_idx.dim() == 1 && first_idx.numel() >= 1 &&
                        at::isIntegralType(first_idx.scalar_type(), /*includeBool=*/false),
                    kWhere, ": first_idx must be a 1-D integer tensor of B + 1 offsets");
  first_idx = first_idx.to(at::kCPU, at::kLong);
  const at::Tensor counts = first_idx.diff();
  TORCH_CHECK_VALUE(first_idx[0].item<int64_t>() == 0 && !(counts < 0).any().item<bool>() &&
                        first_idx[-1].item<int64_t>() == values.size(0),
                    kWhere, ": first_idx must rise from 0 to values.size(0) = ", values.size(0));
  if (!shape_per_tensor.defined()) {
    shape_per_tensor = counts.unsqueeze(1);
  }
  shape_per_tensor = shape_per_tensor.to(at::kCPU, at::kLong);
  TORCH_CHECK_VALUE(shape_per_tensor.dim() == 2 && shape_per_tensor.size(0) == counts.numel() &&
                        shape_per_tensor.size(1) >= 1 &&
                        !(shape_per_tensor < 0).any().item<bool>() &&
                        at::equal(shape_per_tensor.prod(1), counts),
                    kWhere, ": shape_per_tensor must be (B = ", counts.numel(),
                    ", k >= 1) sizes whose products are the members' row counts");
  values_ = std::move(values);
  first_idx_ = std::move(first_idx);
  shape_per_tensor_ = std::move(shape_per_tensor);
}

RaggedTensor RaggedTensor::from_list(at::TensorList tensors, int64_t ragged_dims) {
  TORCH_CHECK_VALUE(!tensors.empty(), kWhere, ".from_list: tensors must hold at least one tensor");
  TORCH_CHECK_VALUE(ragged_dims >= 1, kWhere, ".from_list: ragged_dims must be >= 1, got ",
                    ragged_dims);
  const at::Tensor& first = tensors[0];
  TORCH_CHECK_VALUE(first.dim() >= ragged_dims, kWhere,
                    ".from_list: tensors[0] must have at least ", ragged_dims, " dims, got shape ",
                    first.sizes());
  const at::IntArrayRef feature = first.sizes().slice(ragged_dims);
  std::vector<at::Tensor> rows;
  std::vector<int64_t> shapes;
  rows.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK_VALUE(t.dim() == first.dim() && t.sizes().slice(ragged_dims) == feature &&
                          t.dtype() == first.dtype() && t.device() == first.device(),
                      kWhere, ".from_list: tensors[", i, "] is ", t.scalar_type(), " of shape ",
                      t.sizes(), " on ", t.device(), "; tensors[0] is ", first.scalar_type(),
                      " of shape ", first.sizes(), " on ", first.device(),
                      " (members differ only in their ", ragged_dims, " ragged dims)");
    std::vector<int64_t> row_shape{-1};
    row_shape.insert(row_shape.end(), feature.begin(), feature.end());
    rows.push_back(t.reshape(row_shape));
    shapes.insert(shapes.end(), t.sizes().begin(), t.sizes().begin() + ragged_dims);
  }
  const at::Tensor shape_per_tensor =
      at::tensor(shapes, at::kLong).view({static_cast<int64_t>(tensors.size()), ragged_dims});
  return RaggedTensor(at::cat(rows), first_idx_of(shape_per_tensor), shape_per_tensor, true);
}

RaggedTensor RaggedTensor::from_padded(const at::Tensor& padded, const at::Tensor& shape_per_tensor,
                                       std::string_view padding_side) {
  at::Tensor shapes = shape_per_tensor.to(at::kCPU, at::kLong);
  if (shapes.dim() == 1) shapes = shapes.unsqueeze(1);
  TORCH_CHECK_VALUE(shapes.dim() == 2, kWhere,
                    ".from_padded: shape_per_tensor must be (B,) or (B, k), got shape ",
                    shapes.sizes());
  const int64_t k = shapes.size(1);
  TORCH_CHECK_VALUE(padded.defined() && padded.dim() >= 1 + k && padded.size(0) == shapes.size(0),
                    kWhere, ".from_padded: padded must be (B = ", shapes.size(0), ", *max_shape (",
                    k, " dims), *feature)");
  const at::IntArrayRef feature = padded.sizes().slice(1 + k);
  std::vector<int64_t> flat_shape(padded.sizes().begin(), padded.sizes().begin() + 1 + k);
  flat_shape.push_back(product(feature));
  const at::Tensor packed = padded_to_packed(padded.reshape(flat_shape), shapes, padding_side,
                                             shapes.prod(1).sum().item<int64_t>());
  std::vector<int64_t> row_shape{-1};
  row_shape.insert(row_shape.end(), feature.begin(), feature.end());
  return RaggedTensor(packed.view(row_shape), first_idx_of(shapes), shapes, true);
}

at::Tensor RaggedTensor::padded(const at::Scalar& padding_value, at::OptionalIntArrayRef max_shape,
                                std::string_view padding_side) const {
  const at::IntArrayRef feature = values_.sizes().slice(1);
  const at::Tensor out =
      packed_to_padded(values_.reshape({values_.size(0), product(feature)}), shape_per_tensor_,
                       first_idx_, padding_value, max_shape, padding_side);
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end() - 1);
  shape.insert(shape.end(), feature.begin(), feature.end());
  return out.view(shape);
}

at::Tensor RaggedTensor::mask(at::OptionalIntArrayRef max_shape,
                              std::string_view padding_side) const {
  // one true per stored row, padded with false by the op (its checks of max_shape and side)
  const at::Tensor rows = at::ones({values_.size(0), 1}, values_.options().dtype(at::kBool));
  return packed_to_padded(rows, shape_per_tensor_, first_idx_, false, max_shape, padding_side)
      .squeeze(-1);
}
at::Tensor RaggedTensor::padding_mask(at::OptionalIntArrayRef max_shape,
                                      std::string_view padding_side) const {
  return mask(max_shape, padding_side).logical_not();
}

std::vector<int64_t> RaggedTensor::member_shape(int64_t b) const {
  const at::Tensor sizes = shape_per_tensor_[b].contiguous();
  std::vector<int64_t> shape(sizes.const_data_ptr<int64_t>(),
                             sizes.const_data_ptr<int64_t>() + sizes.numel());
  shape.insert(shape.end(), values_.sizes().begin() + 1, values_.sizes().end());
  return shape;
}

std::vector<at::Tensor> RaggedTensor::list() const {
  std::vector<at::Tensor> members;
  members.reserve(size());
  for (int64_t b = 0; b < size(); ++b) members.push_back((*this)[b]);
  return members;
}

at::Tensor RaggedTensor::operator[](int64_t b) const {
  TORCH_CHECK_INDEX(b >= -size() && b < size(), kWhere, "[]: index ", b, " is out of range for ",
                    size(), " members");
  if (b < 0) b += size();
  const int64_t* offsets = first_idx_.const_data_ptr<int64_t>();
  return values_.slice(0, offsets[b], offsets[b + 1]).view(member_shape(b));
}

RaggedTensor RaggedTensor::index_select(const at::Tensor& index) const {
  auto [values, first_idx] = ragged_index_select(values_, first_idx_, index);
  const at::Tensor picks = index.to(at::kCPU, at::kLong);
  const at::Tensor wrapped = at::where(picks < 0, picks + size(), picks);  // checked by the op
  return RaggedTensor(values, first_idx, shape_per_tensor_.index_select(0, wrapped), true);
}

RaggedTensor RaggedTensor::slice(std::optional<int64_t> start, std::optional<int64_t> stop) const {
  const int64_t n = size();
  const auto bound = [n](std::optional<int64_t> value, int64_t fallback) {  // Python's clipping
    if (!value.has_value()) return fallback;
    return std::clamp<int64_t>(*value < 0 ? *value + n : *value, 0, n);
  };
  const int64_t first = bound(start, 0), last = std::max(first, bound(stop, n));
  const int64_t* offsets = first_idx_.const_data_ptr<int64_t>();
  return RaggedTensor(values_.slice(0, offsets[first], offsets[last]),
                      first_idx_.slice(0, first, last + 1) - offsets[first],
                      shape_per_tensor_.slice(0, first, last), true);
}

at::Tensor RaggedTensor::lengths() const { return first_idx_.diff(); }

RaggedTensor RaggedTensor::cat(const std::vector<RaggedTensor>& ragged) {
  TORCH_CHECK_VALUE(!ragged.empty(), kWhere, ".cat: needs at least one RaggedTensor");
  const RaggedTensor& first = ragged[0];
  std::vector<at::Tensor> values, shapes;
  for (size_t i = 0; i < ragged.size(); ++i) {
    const RaggedTensor& r = ragged[i];
    TORCH_CHECK_VALUE(r.ragged_dims() == first.ragged_dims() &&
                          r.values_.sizes().slice(1) == first.values_.sizes().slice(1) &&
                          r.values_.dtype() == first.values_.dtype() &&
                          r.values_.device() == first.values_.device(),
                      kWhere, ".cat: ragged[", i, "] has ", r.ragged_dims(),
                      " ragged dims and values ", r.values_.scalar_type(), " ", r.values_.sizes(),
                      " on ", r.values_.device(), "; ragged[0] has ", first.ragged_dims(), " and ",
                      first.values_.scalar_type(), " ", first.values_.sizes(), " on ",
                      first.values_.device(), " (the feature dims, dtype and device must agree)");
    values.push_back(r.values_);
    shapes.push_back(r.shape_per_tensor_);
  }
  const at::Tensor shape_per_tensor = at::cat(shapes);
  return RaggedTensor(at::cat(values), first_idx_of(shape_per_tensor), shape_per_tensor, true);
}

at::Tensor RaggedTensor::row(int64_t k) const {
  TORCH_CHECK_VALUE(ragged_dims() == 1, kWhere,
                    ".row: r[:, k] indexes the one ragged dim; this RaggedTensor has ",
                    ragged_dims(), " ragged dims");
  return segment_row(values_, first_idx_, k);
}

RaggedTensor RaggedTensor::rows(std::optional<int64_t> start, std::optional<int64_t> stop,
                                int64_t step) const {
  TORCH_CHECK_VALUE(ragged_dims() == 1, kWhere,
                    ".rows: r[:, a:b] slices the one ragged dim; this RaggedTensor has ",
                    ragged_dims(), " ragged dims");
  auto [values, first_idx] = segment_slice(values_, first_idx_, start, stop, step);
  return RaggedTensor(values, first_idx.cpu());
}

std::vector<int64_t> RaggedTensor::feature_dims(std::string_view where, at::IntArrayRef dim) const {
  const int64_t ndim = this->dim(), ragged = ragged_dims();
  TORCH_CHECK_VALUE(!dim.empty(), kWhere, ".", where,
                    ": dim must name at least one feature dim (each member reduced whole is ",
                    where, "())");
  std::vector<int64_t> dims;
  for (const int64_t d : dim) {
    TORCH_CHECK_INDEX(d >= -ndim && d < ndim, kWhere, ".", where, ": dim ", d,
                      " is out of range for a RaggedTensor of ", ndim, " dims (B, ", ragged,
                      " ragged, ", ndim - 1 - ragged, " feature)");
    const int64_t wrapped = d < 0 ? d + ndim : d;
    TORCH_CHECK_VALUE(wrapped != 0, kWhere, ".", where, ": dim ", d,
                      " would mix members; dim must name feature dims (", ragged + 1, " and up)");
    TORCH_CHECK_VALUE(wrapped > ragged, kWhere, ".", where, ": dim ", d,
                      " is a ragged dim; dim must name feature dims (", ragged + 1,
                      " and up), and each member reduced whole is ", where, "()");
    dims.push_back(wrapped - ragged);  // the values' dim (rows first)
  }
  return dims;
}

at::Tensor RaggedTensor::sum() const { return segment_sum(values_, first_idx_); }
at::Tensor RaggedTensor::mean() const { return segment_mean(values_, first_idx_); }
at::Tensor RaggedTensor::amax() const { return std::get<0>(segment_max(values_, first_idx_)); }
at::Tensor RaggedTensor::amin() const { return std::get<0>(segment_min(values_, first_idx_)); }
RaggedTensor RaggedTensor::softmax() const {
  return with_values(segment_softmax(values_, first_idx_));
}
RaggedTensor RaggedTensor::log_softmax() const {
  return with_values(segment_log_softmax(values_, first_idx_));
}

RaggedTensor RaggedTensor::sum(at::IntArrayRef dim, bool keepdim) const {
  return with_values(values_.sum(feature_dims("sum", dim), keepdim));
}
RaggedTensor RaggedTensor::mean(at::IntArrayRef dim, bool keepdim) const {
  return with_values(values_.mean(feature_dims("mean", dim), keepdim));
}
RaggedTensor RaggedTensor::amax(at::IntArrayRef dim, bool keepdim) const {
  return with_values(values_.amax(feature_dims("amax", dim), keepdim));
}
RaggedTensor RaggedTensor::amin(at::IntArrayRef dim, bool keepdim) const {
  return with_values(values_.amin(feature_dims("amin", dim), keepdim));
}

std::tuple<at::Tensor, at::Tensor> RaggedTensor::member_extremum(bool is_max) const {
  auto [values, packed_row] =
      is_max ? segment_max(values_, first_idx_) : segment_min(values_, first_idx_);
  const at::Tensor starts =
      first_idx_.slice(0, 0, -1).to(packed_row.device()).view(column_shape(packed_row.dim()));
  return {values, at::where(packed_row >= 0, packed_row - starts, packed_row)};  // -1: empty
}
std::tuple<at::Tensor, at::Tensor> RaggedTensor::max() const { return member_extremum(true); }
std::tuple<at::Tensor, at::Tensor> RaggedTensor::min() const { return member_extremum(false); }

std::tuple<RaggedTensor, RaggedTensor> RaggedTensor::max(int64_t dim, bool keepdim) const {
  auto [values, indices] = at::max(values_, feature_dims("max", {dim})[0], keepdim);
  return {with_values(values), with_values(indices)};
}
std::tuple<RaggedTensor, RaggedTensor> RaggedTensor::min(int64_t dim, bool keepdim) const {
  auto [values, indices] = at::min(values_, feature_dims("min", {dim})[0], keepdim);
  return {with_values(values), with_values(indices)};
}

at::Tensor RaggedTensor::norm(double p) const {
  const at::Tensor magnitude = values_.abs();
  if (std::isinf(p) && p > 0) return std::get<0>(segment_max(magnitude, first_idx_));
  TORCH_CHECK_VALUE(p > 0, kWhere, ".norm: p must be a positive number or inf, got ", p);
  if (p == 1) return segment_sum(magnitude, first_idx_);
  const at::Tensor powered = segment_sum(magnitude.pow(p), first_idx_);
  // the root's gradient is infinite at 0: that branch is cut (gradient 0, as vector_norm's)
  const at::Tensor positive = powered > 0;
  return at::where(positive, at::where(positive, powered, 1).pow(1 / p), 0);
}
RaggedTensor RaggedTensor::norm(double p, at::IntArrayRef dim, bool keepdim) const {
  return with_values(at::linalg_vector_norm(values_, p, feature_dims("norm", dim), keepdim));
}

// The ragged dim (one of them) normalises within each member; a feature dim, every row alone.
RaggedTensor RaggedTensor::normalise(std::string_view where, int64_t dim, bool log) const {
  const int64_t wrapped = dim < 0 ? dim + this->dim() : dim;
  if (ragged_dims() == 1 && wrapped == 1) return log ? log_softmax() : softmax();
  const int64_t along = feature_dims(where, {dim})[0];
  return with_values(log ? values_.log_softmax(along) : values_.softmax(along));
}
RaggedTensor RaggedTensor::softmax(int64_t dim) const { return normalise("softmax", dim, false); }
RaggedTensor RaggedTensor::log_softmax(int64_t dim) const {
  return normalise("log_softmax", dim, true);
}

std::optional<int64_t> RaggedTensor::scan_dim(std::string_view where, int64_t dim) const {
  const int64_t wrapped = dim < 0 ? dim + this->dim() : dim;
  if (wrapped >= 1 && wrapped <= ragged_dims()) {
    TORCH_CHECK_VALUE(ragged_dims() == 1, kWhere, ".", where,
                      ": a scan runs along one ragged dim; this RaggedTensor has ", ragged_dims(),
                      " (flatten them first, or scan a feature dim)");
    return std::nullopt;
  }
  return feature_dims(where, {dim})[0];
}

RaggedTensor RaggedTensor::cumsum(int64_t dim) const {
  const std::optional<int64_t> along = scan_dim("cumsum", dim);
  return with_values(along ? values_.cumsum(*along) : segment_cumsum(values_, first_idx_));
}
RaggedTensor RaggedTensor::cumprod(int64_t dim) const {
  const std::optional<int64_t> along = scan_dim("cumprod", dim);
  return with_values(along ? values_.cumprod(*along) : segment_cumprod(values_, first_idx_));
}
RaggedTensor RaggedTensor::logcumsumexp(int64_t dim) const {
  const std::optional<int64_t> along = scan_dim("logcumsumexp", dim);
  return with_values(along ? values_.logcumsumexp(*along)
                           : segment_logcumsumexp(values_, first_idx_));
}

std::tuple<RaggedTensor, RaggedTensor> RaggedTensor::cum_extremum(std::string_view where,
                                                                  int64_t dim, bool is_max) const {
  if (const std::optional<int64_t> along = scan_dim(where, dim)) {
    auto [values, indices] = is_max ? at::cummax(values_, *along) : at::cummin(values_, *along);
    return {with_values(values), with_values(indices)};
  }
  auto [values, packed_row] =
      is_max ? segment_cummax(values_, first_idx_) : segment_cummin(values_, first_idx_);
  const at::Tensor offsets = first_idx_.to(packed_row.device());
  const at::Tensor member_start =  // each row's member's first row
      segment_expand(offsets.slice(0, 0, -1), offsets, values_.size(0))
          .view(column_shape(packed_row.dim()));
  return {with_values(values), with_values(packed_row - member_start)};
}
std::tuple<RaggedTensor, RaggedTensor> RaggedTensor::cummax(int64_t dim) const {
  return cum_extremum("cummax", dim, true);
}
std::tuple<RaggedTensor, RaggedTensor> RaggedTensor::cummin(int64_t dim) const {
  return cum_extremum("cummin", dim, false);
}

RaggedTensor RaggedTensor::unsqueeze(int64_t dim) const {
  const int64_t ndim = this->dim(), ragged = ragged_dims();
  const int64_t wrapped = dim < 0 ? dim + ndim + 1 : dim;
  TORCH_CHECK_INDEX(wrapped > ragged && wrapped <= ndim, kWhere, ".unsqueeze: dim ", dim,
                    " must insert a feature dim: after the batch and ", ragged, " ragged dims, in ",
                    ragged + 1, "..", ndim, " (or ", ragged - ndim, "..-1)");
  return with_values(values_.unsqueeze(wrapped - ragged));
}

RaggedTensor RaggedTensor::broadcast_members(const at::Tensor& per_member) const {
  return with_values(segment_expand(per_member, first_idx_, values_.size(0)));
}

RaggedTensor RaggedTensor::matmul(const at::Tensor& weight) const {
  TORCH_CHECK_VALUE(values_.dim() >= 2, kWhere,
                    ".matmul: acts on the feature dims, but the members have none (shape "
                    "(*ragged)); give them a feature dim, e.g. values().unsqueeze(-1)");
  TORCH_CHECK_VALUE(
      weight.defined() && weight.dim() >= 1 && weight.dim() <= 2, kWhere,
      ".matmul: r @ w needs a dense right operand of 1 or 2 dims (a batch of matrices "
      "would broadcast against the packed rows), got ",
      weight.defined() ? weight.dim() : 0, " dims");
  return RaggedTensor(values_.matmul(weight), first_idx_, shape_per_tensor_, true);
}

RaggedTensor RaggedTensor::pow(const at::Scalar& exponent) const {
  return RaggedTensor(values_.pow(exponent), first_idx_, shape_per_tensor_, true);
}

RaggedTensor RaggedTensor::with_values(at::Tensor values) const {
  TORCH_CHECK_VALUE(values.defined() && values.dim() >= 1 && values.size(0) == values_.size(0),
                    kWhere, ".with_values: values must have ", values_.size(0), " rows");
  return RaggedTensor(std::move(values), first_idx_, shape_per_tensor_, true);
}

RaggedTensor RaggedTensor::to(const at::TensorOptions& options) const {
  return with_values(values_.to(options));
}
RaggedTensor RaggedTensor::detach() const { return with_values(values_.detach()); }
RaggedTensor RaggedTensor::clone() const { return with_values(values_.clone()); }

namespace {

// Two RaggedTensors of one structure: the same members' shapes (hence the same rows).
const RaggedTensor& same_structure(const RaggedTensor& a, const RaggedTensor& b) {
  const bool same = (a.first_idx().is_same(b.first_idx()) &&
                     a.shape_per_tensor().is_same(b.shape_per_tensor())) ||
                    (a.shape_per_tensor().sizes() == b.shape_per_tensor().sizes() &&
                     at::equal(a.first_idx(), b.first_idx()) &&
                     at::equal(a.shape_per_tensor(), b.shape_per_tensor()));
  TORCH_CHECK_VALUE(same, kWhere,
                    ": elementwise math needs RaggedTensors of one structure (the same members' "
                    "shapes)");
  return a;
}

// A dense operand broadcasts over the feature dims only (or is one row, (1, *feature)).
const at::Tensor& dense_operand(const RaggedTensor& r, const at::Tensor& t) {
  const at::Tensor& values = r.values();
  TORCH_CHECK_VALUE(t.dim() < values.dim() || (t.dim() == values.dim() && t.size(0) == 1), kWhere,
                    ": a dense operand of shape ", t.sizes(), " reaches the packed rows ",
                    values.sizes(),
                    ", so it would not broadcast per member; per-row data goes through "
                    "with_values(...)");
  return t;
}

// A number on the left, as torch's own `2 - t` takes it (a wrapped number: no type promotion
// past the tensor's category).
at::Tensor number(const at::Scalar& s) { return at::native::wrapped_scalar_tensor(s); }

}  // namespace

#define TORCH_RAGGED_ELEMENTWISE_OPERATOR(op, fn)                            \
  RaggedTensor operator op(const RaggedTensor& a, const RaggedTensor& b) {   \
    return same_structure(a, b).with_values(at::fn(a.values(), b.values())); \
  }                                                                          \
  RaggedTensor operator op(const RaggedTensor& a, const at::Tensor& b) {     \
    return a.with_values(at::fn(a.values(), dense_operand(a, b)));           \
  }                                                                          \
  RaggedTensor operator op(const at::Tensor& a, const RaggedTensor& b) {     \
    return b.with_values(at::fn(dense_operand(b, a), b.values()));           \
  }                                                                          \
  RaggedTensor operator op(const RaggedTensor& a, const at::Scalar& b) {     \
    return a.with_values(at::fn(a.values(), number(b)));                     \
  }                                                                          \
  RaggedTensor operator op(const at::Scalar& a, const RaggedTensor& b) {     \
    return b.with_values(at::fn(number(a), b.values()));                     \
  }
TORCH_RAGGED_ELEMENTWISE_OPERATOR(+, add)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(-, sub)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(*, mul)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(/, div)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(%, remainder)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(&, bitwise_and)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(|, bitwise_or)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(^, bitwise_xor)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(==, eq)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(!=, ne)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(<, lt)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(<=, le)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(>, gt)
TORCH_RAGGED_ELEMENTWISE_OPERATOR(>=, ge)
#undef TORCH_RAGGED_ELEMENTWISE_OPERATOR

RaggedTensor operator-(const RaggedTensor& r) { return r.with_values(at::neg(r.values())); }
RaggedTensor operator~(const RaggedTensor& r) { return r.with_values(at::bitwise_not(r.values())); }

RaggedTensor RaggedTensor::floor_divide(const RaggedTensor& other) const {
  return same_structure(*this, other).with_values(at::floor_divide(values_, other.values_));
}
RaggedTensor RaggedTensor::floor_divide(const at::Tensor& other) const {
  return with_values(at::floor_divide(values_, dense_operand(*this, other)));
}
RaggedTensor RaggedTensor::floor_divide(const at::Scalar& other) const {
  return with_values(at::floor_divide(values_, number(other)));
}

}  // namespace torch_ragged
