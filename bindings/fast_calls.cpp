// torch_ragged._fast: the ops as direct Python calls, the eager door of
// torch.ops.torch_ragged.<op>.
//
// A call through torch.ops converts its Python arguments to a stack of IValues against the
// schema, then dispatches boxed: ~1.5-2.5 us before the kernel starts, most of a small input's
// time (torch's own functions pay ~0.5 us through their generated bindings). Each binding here
// calls its op through the dispatcher, unboxed, with pybind11 converting the arguments, so every
// dispatch key (autograd, autocast, vmap, fake tensors, Python dispatch modes, the JIT tracer)
// sees the call as it sees a torch.ops one. torch_ragged/_fast_calls.py makes each binding the
// __call__ of its op's packet (torch.ops.torch_ragged.<op>): TorchScript, torch.compile and
// export see the packets as the ops they are and never run __call__.
//
// Each binding has two overloads. The first takes the schema's arguments (by position or name,
// defaults filled in), of exactly the types it converts without guessing: plain tensors
// (torch.Tensor or Parameter: a subclass, and any tensor while a torch function mode is active, may
// define
// __torch_function__, which torch.ops honours), Python ints / bools / floats / strings / lists.
// Any other call (a required argument left out, a subclass, an FX proxy, a 0-d tensor for an int)
// falls to the second, which hands the arguments to torch's own call of the op unchanged: its
// parsing, its errors. Not part of the C++ library: C++ callers call the ops directly.

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymIntArrayRef.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

// A torch.Tensor (or Parameter) whose call needs no __torch_function__ handling.
struct PlainTensor {
  at::Tensor tensor;
};

namespace pybind11::detail {
template <>
struct type_caster<PlainTensor> {
  PYBIND11_TYPE_CASTER(PlainTensor, _("torch.Tensor"));
  bool load(handle source, bool) {
    PyObject* object = source.ptr();
    if (!THPVariable_CheckExact(object) || at::impl::torch_function_mode_enabled()) return false;
    value.tensor = THPVariable_Unpack(object);
    return true;
  }
};
}  // namespace pybind11::detail

namespace {

namespace py = pybind11;

// The Python-side type of each argument type of an op's typed signature, and its conversion. Sizes
// arrive as Python ints (the wrappers call these only outside tracing: no symbolic sizes).
template <typename T>
struct FromPython {
  using type = T;
  static T to(T value) { return value; }
};
template <>
struct FromPython<const at::Tensor&> {
  using type = const PlainTensor&;
  static const at::Tensor& to(const PlainTensor& value) { return value.tensor; }
};
template <>
struct FromPython<c10::SymInt> {
  using type = int64_t;
  static c10::SymInt to(int64_t value) { return c10::SymInt(value); }
};
template <>
struct FromPython<c10::SymIntArrayRef> {
  using type = const std::vector<int64_t>&;
  static c10::SymIntArrayRef to(const std::vector<int64_t>& value) {
    return c10::fromIntArrayRefSlow(value);
  }
};
template <>
struct FromPython<at::IntArrayRef> {
  using type = const std::vector<int64_t>&;
  static at::IntArrayRef to(const std::vector<int64_t>& value) { return value; }
};
template <>
struct FromPython<c10::string_view> {
  using type = const std::string&;
  static c10::string_view to(const std::string& value) { return value; }
};
template <>
struct FromPython<at::TensorList> {
  using type = const std::vector<PlainTensor>&;
  static std::vector<at::Tensor> to(const std::vector<PlainTensor>& value) {
    std::vector<at::Tensor> tensors;
    tensors.reserve(value.size());
    for (const PlainTensor& plain : value) tensors.push_back(plain.tensor);
    return tensors;
  }
};
// An optional argument (std::optional, or an OptionalArrayRef): None, or what it holds as
// FromPython<Value> converts it.
template <typename Value>
struct FromPythonOptional {
  using type = const std::optional<std::decay_t<typename FromPython<Value>::type>>&;
  static auto to(type value)
      -> std::optional<std::decay_t<decltype(FromPython<Value>::to(*value))>> {
    if (!value.has_value()) return std::nullopt;
    return FromPython<Value>::to(*value);
  }
};
template <typename Value>
struct FromPython<std::optional<Value>> : FromPythonOptional<Value> {};
template <>
struct FromPython<const std::optional<at::Tensor>&> : FromPythonOptional<const at::Tensor&> {};
template <>
struct FromPython<at::OptionalSymIntArrayRef> : FromPythonOptional<c10::SymIntArrayRef> {};
template <>
struct FromPython<at::OptionalIntArrayRef> : FromPythonOptional<at::IntArrayRef> {};
// torch's pybind caster cannot load a Scalar: Python's bool, int and float, tried in that order.
template <>
struct FromPython<const at::Scalar&> {
  using type = const std::variant<bool, int64_t, double>&;
  static at::Scalar to(const std::variant<bool, int64_t, double>& value) {
    return std::visit([](auto number) { return at::Scalar(number); }, value);
  }
};

// A schema argument as a pybind11 keyword argument, with its default where the schema has one of
// a plain Python type. An argument without one gets a default no converter takes (`missing`): a
// call that leaves it out falls to torch's own call of the op, which names what is missing.
py::arg_v keyword_argument(const c10::Argument& argument, const py::object& missing) {
  const std::optional<c10::IValue>& value = argument.default_value();
  py::object default_value = missing;
  if (value.has_value() && value->isNone()) default_value = py::none();
  if (value.has_value() && value->isBool()) default_value = py::bool_(value->toBool());
  if (value.has_value() && value->isInt()) default_value = py::int_(value->toInt());
  if (value.has_value() && value->isDouble()) default_value = py::float_(value->toDouble());
  if (value.has_value() && value->isString()) default_value = py::str(value->toStringRef());
  return py::arg_v(argument.name().c_str(), default_value);
}

template <typename Signature>
struct Binder;

template <typename R, typename... Args>
struct Binder<R(Args...)> {
  // Binds torch_ragged::<name> (its default overload) as _fast.<name>, with the schema's argument
  // names and defaults: the op is looked up once, when the module loads (after the op library),
  // and its signature checked against the schema.
  static void bind(py::module_& m, const char* name, const py::object& missing) {
    bind_overload(m, name, "", missing);
    // Any other call: torch's own call of the op (the packet's _op), which parses what it is given.
    // Looked up on the first such call; never released (it lives as long as the op registry).
    m.def(name, [name = std::string(name), torch_call = static_cast<py::object*>(nullptr)](
                    const py::args& args, const py::kwargs& kwargs) mutable {
      if (torch_call == nullptr) {
        torch_call = new py::object(py::module_::import("torch")
                                        .attr("ops")
                                        .attr("torch_ragged")
                                        .attr(name.c_str())
                                        .attr("_op"));
      }
      return (*torch_call)(*args, **kwargs);
    });
  }

  // Binds the overload torch_ragged::<name>.<overload> as one more Python overload of _fast.<name>,
  // without the fallback: bind it before the default overload's bind, which adds the fallback last.
  static void bind_overload(py::module_& m, const char* name, const char* overload,
                            const py::object& missing) {
    const c10::OperatorHandle handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        (std::string("torch_ragged::") + name).c_str(), overload);
    const auto op = handle.typed<R(Args...)>();
    const std::vector<c10::Argument>& arguments = handle.schema().arguments();
    TORCH_INTERNAL_ASSERT(arguments.size() == sizeof...(Args), name);
    bind_with_keywords(m, name, op, arguments, missing, std::index_sequence_for<Args...>{});
  }

  template <size_t... I>
  static void bind_with_keywords(py::module_& m, const char* name,
                                 const c10::TypedOperatorHandle<R(Args...)>& op,
                                 const std::vector<c10::Argument>& arguments,
                                 const py::object& missing, std::index_sequence<I...>) {
    m.def(
        name,
        [op](typename FromPython<Args>::type... args) -> R {
          return op.call(FromPython<Args>::to(args)...);
        },
        // as torch.ops calls: other threads run meanwhile
        py::call_guard<py::gil_scoped_release>(), keyword_argument(arguments[I], missing)...);
  }
};

using at::Tensor;
using TensorRef = const at::Tensor&;
using OptionalTensorRef = const std::optional<at::Tensor>&;
using OptionalSymInt = std::optional<c10::SymInt>;
using Pair = std::tuple<Tensor, Tensor>;
using Quad = std::tuple<Tensor, Tensor, Tensor, Tensor>;

}  // namespace

PYBIND11_MODULE(_fast, m) {
  m.doc() = "torch_ragged's ops as direct Python calls (eager mode; see bindings/fast_calls.cpp)";
  // The default of the arguments the schemas require: an object no converter takes.
  const py::object missing = py::module_::import("builtins").attr("object")();
  m.attr("_missing") = missing;
  // segment core
  for (const char* name :
       {"segment_sum", "segment_mean", "segment_softmax", "segment_log_softmax"}) {
    Binder<Tensor(TensorRef, TensorRef)>::bind(m, name, missing);
  }
  for (const char* name : {"segment_max", "segment_min"}) {
    Binder<Pair(TensorRef, TensorRef)>::bind(m, name, missing);
  }
  for (const char* name : {"segment_cumsum", "segment_cumprod"}) {
    Binder<Tensor(TensorRef, TensorRef, bool, bool)>::bind(m, name, missing);
  }
  Binder<Tensor(TensorRef, TensorRef, bool)>::bind(m, "segment_logcumsumexp", missing);
  for (const char* name : {"segment_cummax", "segment_cummin"}) {
    Binder<Pair(TensorRef, TensorRef, bool)>::bind(m, name, missing);
  }
  Binder<Tensor(TensorRef, bool)>::bind(m, "get_first_idx", missing);
  Binder<Tensor(TensorRef, TensorRef, OptionalSymInt)>::bind(m, "segment_expand", missing);
  for (const char* name : {"segment_ids", "segment_arange"}) {
    Binder<Tensor(TensorRef, OptionalSymInt)>::bind(m, name, missing);
  }
  Binder<Pair(TensorRef, TensorRef, TensorRef, OptionalSymInt)>::bind(m, "ragged_index_select",
                                                                      missing);
  Binder<Tensor(TensorRef, TensorRef, OptionalTensorRef, TensorRef)>::bind(m, "segment_gather_sum",
                                                                           missing);
  Binder<Tensor(TensorRef, TensorRef, TensorRef, TensorRef)>::bind(m, "segment_gather_dot",
                                                                   missing);
  Binder<Tensor(TensorRef, TensorRef, int64_t, OptionalSymInt, c10::string_view)>::bind(
      m, "scatter", missing);
  for (const char* name : {"scatter_max", "scatter_min"}) {
    Binder<Pair(TensorRef, TensorRef, int64_t, OptionalSymInt)>::bind(m, name, missing);
  }
  // batch
  Binder<Tensor(at::TensorList)>::bind(m, "get_shape_per_tensor", missing);
  Binder<Tensor(TensorRef, at::OptionalSymIntArrayRef)>::bind(m, "fill_max_shape", missing);
  Binder<Pair(at::TensorList)>::bind(m, "list_to_packed", missing);
  Binder<Pair(at::TensorList, const at::Scalar&, at::OptionalSymIntArrayRef,
              c10::string_view)>::bind(m, "list_to_padded", missing);
  Binder<Tensor(TensorRef, TensorRef, TensorRef, const at::Scalar&, at::OptionalSymIntArrayRef,
                c10::string_view)>::bind(m, "packed_to_padded", missing);
  Binder<Tensor(TensorRef, TensorRef, c10::string_view, OptionalSymInt)>::bind(
      m, "padded_to_packed", missing);
  Binder<std::vector<Tensor>(TensorRef, TensorRef, TensorRef)>::bind(m, "packed_to_list", missing);
  Binder<std::vector<Tensor>(TensorRef, TensorRef, c10::string_view)>::bind(m, "padded_to_list",
                                                                            missing);
  Binder<Tensor(TensorRef, TensorRef, OptionalSymInt)>::bind(m, "tile_to_packed", missing);
  // torch_scatter's names
  Binder<Tensor(TensorRef, TensorRef, int64_t, OptionalTensorRef, OptionalSymInt,
                c10::string_view)>::bind(m, "compat_scatter", missing);
  Binder<Pair(TensorRef, TensorRef, int64_t, OptionalTensorRef, OptionalSymInt,
              c10::string_view)>::bind(m, "compat_scatter_arg", missing);
  Binder<Tensor(TensorRef, TensorRef, OptionalTensorRef, c10::string_view)>::bind(
      m, "compat_segment_csr", missing);
  Binder<Pair(TensorRef, TensorRef, OptionalTensorRef, c10::string_view)>::bind(
      m, "compat_segment_csr_arg", missing);
  for (const char* name : {"compat_gather_csr", "compat_gather_coo"}) {
    Binder<Tensor(TensorRef, TensorRef, OptionalTensorRef)>::bind(m, name, missing);
  }
  for (const char* name : {"compat_scatter_softmax", "compat_scatter_log_softmax"}) {
    Binder<Tensor(TensorRef, TensorRef, int64_t, OptionalSymInt)>::bind(m, name, missing);
  }
  Binder<Tensor(TensorRef, TensorRef, int64_t, OptionalTensorRef, OptionalSymInt, double)>::bind(
      m, "compat_scatter_logsumexp", missing);
  Binder<Tensor(TensorRef, TensorRef, int64_t, OptionalTensorRef, OptionalSymInt, bool)>::bind(
      m, "compat_scatter_std", missing);
  // sparse (torch sparse tensors)
  for (const char* name :
       {"sparse_neg",   "sparse_abs",   "sparse_asin",    "sparse_asinh",  "sparse_atan",
        "sparse_atanh", "sparse_ceil",  "sparse_deg2rad", "sparse_erf",    "sparse_erfinv",
        "sparse_expm1", "sparse_floor", "sparse_frac",    "sparse_log1p",  "sparse_rad2deg",
        "sparse_relu",  "sparse_round", "sparse_sgn",     "sparse_sign",   "sparse_signbit",
        "sparse_sin",   "sparse_sinh",  "sparse_sqrt",    "sparse_square", "sparse_tan",
        "sparse_tanh",  "sparse_trunc"}) {
    Binder<Tensor(TensorRef)>::bind(m, name, missing);
  }
  Binder<Tensor(TensorRef, const at::Scalar&)>::bind(m, "sparse_pow", missing);
  Binder<Tensor(TensorRef, int64_t, std::optional<at::ScalarType>)>::bind(m, "sparse_log_softmax",
                                                                          missing);
  // the sparse-tensor overloads ("tensor") of triplet ops' names, bound before those ops below
  for (const char* name : {"sparse_coalesce", "sparse_to_dense"}) {
    Binder<Tensor(TensorRef, bool)>::bind_overload(m, name, "tensor", missing);
  }
  Binder<Tensor(TensorRef, at::OptionalIntArrayRef, bool)>::bind_overload(m, "sparse_sum", "tensor",
                                                                          missing);
  Binder<Tensor(TensorRef, int64_t, std::optional<at::ScalarType>)>::bind_overload(
      m, "sparse_softmax", "tensor", missing);
  Binder<Tensor(TensorRef, int64_t, TensorRef)>::bind_overload(m, "sparse_index_select", "tensor",
                                                               missing);
  Binder<Tensor(TensorRef, int64_t)>::bind(m, "sparse_unsqueeze", missing);
  for (const char* name : {"sparse_select", "sparse_transpose"}) {
    Binder<Tensor(TensorRef, int64_t, int64_t)>::bind(m, name, missing);
  }
  Binder<Tensor(TensorRef, int64_t, int64_t, int64_t)>::bind(m, "sparse_narrow_copy", missing);
  Binder<Tensor(TensorRef, at::IntArrayRef)>::bind(m, "sparse_permute", missing);
  Binder<Tensor(TensorRef)>::bind(m, "sparse_t", missing);
  Binder<Tensor(TensorRef, std::optional<int64_t>)>::bind(m, "sparse_to_sparse", missing);
  Binder<Tensor(TensorRef, TensorRef, bool)>::bind(m, "sparse_sparse_mask", missing);
  for (const char* name :
       {"sparse_to_sparse_coo", "sparse_to_sparse_csr", "sparse_to_sparse_csc"}) {
    Binder<Tensor(TensorRef, bool)>::bind(m, name, missing);
  }
  // the products (sparse_mm's "tensor" overload is bound with the triplet op below)
  Binder<Tensor(TensorRef, TensorRef, TensorRef, const at::Scalar&, const at::Scalar&)>::bind(
      m, "sparse_addmm", missing);
  Binder<Tensor(TensorRef, TensorRef, TensorRef, const at::Scalar&, const at::Scalar&)>::bind(
      m, "sparse_sspaddmm", missing);
  for (const char* name :
       {"sparse_bmm", "sparse_mv", "sparse_matmul", "sparse_hspmm", "sparse_smm"}) {
    Binder<Tensor(TensorRef, TensorRef)>::bind(m, name, missing);
  }
  for (const char* name : {"sparse_cat", "sparse_stack"}) {
    Binder<Tensor(at::TensorList, int64_t)>::bind(m, name, missing);
  }
  for (const char* name : {"sparse_add", "sparse_sub"}) {
    Binder<Tensor(TensorRef, TensorRef, const at::Scalar&)>::bind(m, name, missing);
  }
  // the Scalar overloads first: a tensor argument goes to the Tensor one (pybind tries every
  // overload without conversions before any with)
  Binder<Tensor(TensorRef, const at::Scalar&)>::bind_overload(m, "sparse_mul", "Scalar", missing);
  Binder<Tensor(TensorRef, TensorRef)>::bind(m, "sparse_mul", missing);
  Binder<Tensor(TensorRef, const at::Scalar&, std::optional<c10::string_view>)>::bind_overload(
      m, "sparse_div", "Scalar", missing);
  Binder<Tensor(TensorRef, TensorRef, std::optional<c10::string_view>)>::bind(m, "sparse_div",
                                                                              missing);
  // sparse (COO triplets)
  Binder<Tensor(TensorRef, c10::SymIntArrayRef, bool)>::bind(m, "sparse_flat_keys", missing);
  Binder<Quad(TensorRef, TensorRef, c10::SymIntArrayRef, bool, bool)>::bind(m, "sparse_coalesce",
                                                                            missing);
  Binder<Pair(TensorRef, TensorRef, c10::SymIntArrayRef, at::OptionalIntArrayRef, bool)>::bind(
      m, "sparse_sum", missing);
  Binder<Tensor(TensorRef, TensorRef, bool)>::bind(m, "sparse_mask", missing);
  Binder<Tensor(TensorRef, TensorRef, c10::SymIntArrayRef, bool)>::bind(m, "sparse_to_dense",
                                                                        missing);
  Binder<Pair(TensorRef, std::optional<int64_t>)>::bind(m, "sparse_from_dense", missing);
  Binder<Pair(TensorRef, TensorRef, c10::SymIntArrayRef, int64_t, TensorRef)>::bind(
      m, "sparse_index_select", missing);
  Binder<Tensor(TensorRef, TensorRef, c10::SymIntArrayRef, int64_t, bool)>::bind(
      m, "sparse_softmax", missing);
  Binder<Tensor(TensorRef, TensorRef, c10::SymIntArrayRef, int64_t)>::bind(m, "sparse_pool_sum",
                                                                           missing);
  Binder<Quad(TensorRef, c10::SymIntArrayRef)>::bind(m, "sparse_mm_plan", missing);
  Binder<Tensor(TensorRef, TensorRef, bool)>::bind_overload(m, "sparse_mm", "tensor", missing);
  for (const char* name : {"sparse_mm", "sparse_sddmm"}) {
    Binder<Tensor(TensorRef, TensorRef, TensorRef, TensorRef, TensorRef, TensorRef, TensorRef, bool,
                  bool)>::bind(m, name, missing);
  }
  Binder<Pair(TensorRef, TensorRef, TensorRef, TensorRef, c10::SymIntArrayRef,
              c10::SymIntArrayRef)>::bind(m, "sparse_spgemm", missing);
  Binder<std::tuple<Tensor, Tensor, Tensor>(
      TensorRef, TensorRef, TensorRef, TensorRef, TensorRef, TensorRef, c10::SymIntArrayRef,
      c10::SymIntArrayRef)>::bind(m, "sparse_spgemm_csr", missing);
  Binder<Tensor(TensorRef, TensorRef, c10::SymInt)>::bind(m, "sparse_compressed_violation",
                                                          missing);
  Binder<Tensor(TensorRef, c10::SymInt)>::bind(m, "sparse_row_offsets", missing);
  Binder<Pair(TensorRef, TensorRef)>::bind(m, "sparse_intersect", missing);
  // tiles
  using OptionalTensors = std::optional<at::TensorList>;
  using Ints = at::IntArrayRef;
  Binder<Quad(TensorRef, Ints, Ints, Ints, OptionalTensorRef)>::bind(m, "tiles_index", missing);
  Binder<Tensor(TensorRef, TensorRef, Ints, Ints, const at::Scalar&, c10::string_view,
                OptionalTensorRef, OptionalTensors)>::bind(m, "tiles_to_dense", missing);
  Binder<Tensor(TensorRef, TensorRef, Ints, Ints, const at::Scalar&, bool, OptionalTensorRef,
                OptionalTensors)>::bind(m, "dense_to_tiles", missing);
  Binder<Pair(TensorRef, Ints, TensorRef, Ints, Ints, OptionalTensorRef, OptionalTensors)>::bind(
      m, "tiles_lookup", missing);
  Binder<Tensor(TensorRef, TensorRef, TensorRef, Ints, Ints, const at::Scalar&, c10::string_view,
                OptionalTensorRef, OptionalTensors)>::bind(m, "tiles_correlate", missing);
  Binder<Pair(TensorRef, Ints, const at::Scalar&, at::OptionalIntArrayRef)>::bind(
      m, "tiles_from_dense", missing);
  // pad
  Binder<Tensor(TensorRef, c10::SymIntArrayRef, c10::string_view, OptionalTensorRef,
                OptionalTensorRef, at::OptionalIntArrayRef,
                std::optional<c10::string_view>)>::bind(m, "pad", missing);
}
