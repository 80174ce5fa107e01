#pragma once

// Argument checks shared by every op family. Messages start with "torch_ragged.<op>: " and name the
// argument and what was expected (DESIGN.md, Errors). TORCH_CHECK_VALUE / _TYPE / _INDEX surface in
// Python as ValueError / TypeError / IndexError.

#include <ATen/ATen.h>
#include <c10/util/irange.h>
#include <c10/util/safe_numerics.h>
#include <unistd.h>

#include <limits>
#include <string_view>
#include <vector>

namespace torch_ragged {

// A required tensor argument given as None arrives undefined: say so before anything reads it
// (torch's autograd would report "tensor does not have a device").
inline void check_defined(std::string_view op, std::string_view arg, const at::Tensor& t) {
  TORCH_CHECK_TYPE(t.defined(), "torch_ragged.", op, ": ", arg, " must be a tensor, got None");
}

// Runs the ops a composite `op` is built from: an error one of them raises is re-raised, with the
// same Python type, under the name of the op the caller called, e.g. "torch_ragged.sparse_mm:
// first_idx must be 1-D, got shape [] (from torch_ragged.segment_gather_sum)" instead of naming
// only an op the caller never called.
template <typename F>
auto as_op(std::string_view op, F&& inner) {
  auto renamed = [op](const c10::Error& e) {
    const std::string& message = e.msg();
    const std::string prefix = "torch_ragged.";
    const size_t colon = message.find(": ");
    if (message.rfind(prefix, 0) != 0 || colon == std::string::npos) {
      return prefix + std::string(op) + ": " + message;
    }
    const std::string inner_op = message.substr(prefix.size(), colon - prefix.size());
    if (inner_op == op) return message;
    return prefix + std::string(op) + message.substr(colon) + " (from " + prefix + inner_op + ")";
  };
  try {
    return inner();
  } catch (const c10::IndexError& e) {
    TORCH_CHECK_INDEX(false, renamed(e));
  } catch (const c10::ValueError& e) {
    TORCH_CHECK_VALUE(false, renamed(e));
  } catch (const c10::TypeError& e) {
    TORCH_CHECK_TYPE(false, renamed(e));
  } catch (const c10::NotImplementedError& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, renamed(e));
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, renamed(e));
  }
}

// Whether a tensor has no readable data (fake / meta / functional tensors under torch.compile):
// composite ops then keep sizes symbolic and check values on the device instead of reading them.
inline bool is_symbolic(const at::Tensor& t) {
  return t.is_meta() || t.key_set().has(c10::DispatchKey::Python) ||
         t.key_set().has(c10::DispatchKey::Functionalize);
}

// Checks that an index argument is a defined integer tensor with `expected_dim` dims.
inline void check_index_tensor(std::string_view op, std::string_view arg, const at::Tensor& t,
                               int64_t expected_dim) {
  check_defined(op, arg, t);
  TORCH_CHECK_TYPE(at::isIntegralType(t.scalar_type(), /*includeBool=*/false), "torch_ragged.", op,
                   ": ", arg, " must be an integer tensor, got dtype ", t.scalar_type());
  TORCH_CHECK_VALUE(t.dim() == expected_dim, "torch_ragged.", op, ": ", arg, " must be ",
                    expected_dim, "-D, got shape ", t.sizes());
}

// Index tensors may live on the CPU or on the data's device (read there or copied over); a meta one
// beside real data has no values to read.
inline void check_index_device(std::string_view op, std::string_view arg, const at::Tensor& t,
                               const at::Device& data_device) {
  check_defined(op, arg, t);
  TORCH_CHECK_VALUE(t.device() == data_device || t.is_cpu(), "torch_ragged.", op, ": ", arg,
                    " must be on the CPU or on the data's device ", data_device, ", got ",
                    t.device());
}

// An index tensor, checked, copied to the host as contiguous int64 (a device sync on a GPU).
inline at::Tensor index_tensor_on_host(std::string_view op, std::string_view arg,
                                       const at::Tensor& t, int64_t expected_dim) {
  check_index_tensor(op, arg, t, expected_dim);
  return t.to(at::kCPU, at::kLong).contiguous();
}

// "right" aligns each sub-tensor to the start of every padded dim, "left" to its end.
inline bool is_left_padding(std::string_view op, std::string_view padding_side) {
  TORCH_CHECK_VALUE(padding_side == "right" || padding_side == "left", "torch_ragged.", op,
                    ": padding_side must be \"right\" or \"left\", got \"", padding_side, "\"");
  return padding_side == "left";
}

inline std::vector<int64_t> concrete_sizes(std::string_view op, std::string_view arg,
                                           c10::SymIntArrayRef sizes) {
  std::vector<int64_t> out;
  out.reserve(sizes.size());
  for (const auto& s : sizes) {
    auto v = s.maybe_as_int();
    TORCH_CHECK(v.has_value(), "torch_ragged.", op, ": ", arg, " must be concrete integers here");
    out.push_back(*v);
  }
  return out;
}

// An output of `sizes` must have at most 2^63 - 1 elements (torch's own message would not name the
// op): ValueError naming op and what.
inline void check_numel_fits(std::string_view op, std::string_view what, at::IntArrayRef sizes) {
  uint64_t numel = 1;
  TORCH_CHECK_VALUE(!c10::safe_multiplies_u64(sizes, &numel) &&
                        numel <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                    "torch_ragged.", op, ": ", what,
                    " would have more than 2^63 - 1 elements (shape ", sizes, ")");
}

// An output of `sizes` and `dtype` must fit in 2^63 - 1 elements and bytes (where torch would say
// "Storage size calculation overflowed"): ValueError naming op and what. Returns the bytes.
inline uint64_t check_bytes_fit(std::string_view op, std::string_view what, at::IntArrayRef sizes,
                                caffe2::TypeMeta dtype) {
  check_numel_fits(op, what, sizes);
  uint64_t bytes = 0;
  TORCH_CHECK_VALUE(!c10::mul_overflows(static_cast<uint64_t>(c10::multiply_integers(sizes)),
                                        static_cast<uint64_t>(dtype.itemsize()), &bytes) &&
                        bytes <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                    "torch_ragged.", op, ": ", what, " would need more than 2^63 - 1 bytes (shape ",
                    sizes, ", ", dtype, ")");
  return bytes;
}

// `bytes` of CPU memory that will all be written must fit in the machine's physical memory: Linux
// grants a larger allocation (overcommit) and then kills the process while it is filled, so this
// is the last point where a size that cannot work is an error (ValueError naming op and what).
inline void check_fits_in_memory(std::string_view op, std::string_view what, uint64_t bytes,
                                 const at::Device& device) {
  if (!device.is_cpu()) return;  // device allocators refuse with an error of their own
  // read once: a system call per output is a good part of a small op's cost
  static const uint64_t memory = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return std::numeric_limits<uint64_t>::max();
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }();
  TORCH_CHECK_VALUE(bytes <= memory, "torch_ragged.", op, ": ", what, " would need ", bytes,
                    " bytes, more than this machine's ", memory, " bytes of memory");
}

// A fresh output whose size comes from the caller's data (offsets, counts), checked as above; an
// allocation the machine refuses is re-raised under the op's name.
inline at::Tensor empty_output(std::string_view op, std::string_view what, at::IntArrayRef sizes,
                               const at::TensorOptions& options) {
  const uint64_t bytes = check_bytes_fit(op, what, sizes, options.dtype());
  check_fits_in_memory(op, what, bytes, options.device());
  try {
    return at::empty(sizes, options);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "torch_ragged.", op, ": cannot allocate ", what, " (shape ", sizes, ", ",
                bytes, " bytes): ", e.what_without_backtrace());
  }
}

}  // namespace torch_ragged
