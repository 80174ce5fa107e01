// CUDA kernels of the batch family. The host half is shared with the CPU kernels: batch/layout.cpp
// validates the index tensors (reading them on the host: one device-to-host copy when they live on
// the GPU, see docs/batch.md "CUDA and synchronisation") and builds the RaggedLayout; the index
// arithmetic is batch/batch_index.h, which the CPU tests exercise.
//
// Every kernel is a byte mover. Rank-1 batches (sub-tensors (s, C)) move rows: pad_rank1_rows and
// the segment core's cooperative row mover (row_movers.cuh), in chunks of up to 16 bytes. Other
// ranks: one thread per *output* element, instantiated per element size (grid-stride, 64-bit
// indices): consecutive threads write consecutive elements of a line, so stores and the loads of
// each line are coalesced. The per-sub-tensor tables (shapes, offsets,
// first rows, source addresses) travel to the device in one asynchronous copy from pinned memory;
// list_to_packed / list_to_padded read every input tensor through that address table, so a batch
// of any size is one launch.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstring>

#include "batch/batch_index.h"
#include "batch/layout.h"
#include "common/checks.h"
#include "common/element_type.h"
#include "common/fill.h"
#include "common/parallel.h"
#include "row_movers.cuh"
#include "segment/offsets.h"
#include "segment/segment_index.h"

namespace torch_ragged {
namespace {

// The layout's tables on the device (pointers into one int64 buffer that must outlive the launch).
using DeviceLayout = BatchTables;

// Copies the tables to `device` (one pinned, asynchronous copy); `keep_alive` holds the buffer.
DeviceLayout upload(const RaggedLayout& layout, const std::vector<int64_t>& sources,
                    at::Device device, at::Tensor& keep_alive) {
  std::vector<const std::vector<int64_t>*> parts{&layout.shapes, &layout.offsets, &layout.max_shape,
                                                 &layout.first_row, &sources};
  int64_t total = 0;
  for (const auto* part : parts) total += static_cast<int64_t>(part->size());
  at::Tensor host = at::empty({std::max<int64_t>(total, 1)},
                              at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  int64_t* cursor = host.mutable_data_ptr<int64_t>();
  for (const auto* part : parts) {
    std::memcpy(cursor, part->data(), part->size() * sizeof(int64_t));
    cursor += part->size();
  }
  keep_alive = host.to(device, /*non_blocking=*/true);
  const int64_t* base = keep_alive.const_data_ptr<int64_t>();
  DeviceLayout d{layout.batch, layout.rank, layout.elem};
  const int64_t** fields[] = {&d.shapes, &d.offsets, &d.max_shape, &d.first_row, &d.sources};
  for (size_t i = 0; i < parts.size(); ++i) {
    *fields[i] = base;
    base += parts[i]->size();
  }
  return d;
}

// Thin shells over batch_index.h's bodies, grid-stride.
template <typename Element>
__global__ void scatter_to_padded_kernel(DeviceLayout L, Element* __restrict__ out, Element pad,
                                         int64_t total, int64_t padded_line,
                                         int64_t lines_per_item) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    scatter_to_padded_element(L, out, pad, e, padded_line, lines_per_item);
  }
}

template <typename Element>
__global__ void gather_to_packed_kernel(DeviceLayout L, Element* __restrict__ out,
                                        const Element* __restrict__ padded_base, int64_t total,
                                        int64_t padded_line, int64_t item_elems) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    gather_to_packed_element(L, out, padded_base, e, padded_line, item_elems);
  }
}

// Rank-1 batches: a block per tile of padded rows (batch_index.h: pad_rank1_rows).
template <typename Chunk>
__global__ void __launch_bounds__(kCudaThreads)
    pad_rank1_rows_kernel(DeviceLayout L, int64_t max_len, Chunk* __restrict__ out, int64_t chunks,
                          Chunk pad) {
  pad_rank1_rows(CudaBlock{}, L, max_len, out, chunks, pad);
}

template <typename Element>
Element element_from_bytes(const std::vector<char>& bytes) {
  Element value;
  std::memcpy(&value, bytes.data(), sizeof(Element));
  return value;
}

// Writes every element of `padded` from the sub-tensors at L.sources (their addresses or'ed:
// source_bits): rank-1 batches a row at a time, others an element at a time.
void launch_scatter_to_padded(std::string_view op, const DeviceLayout& L,
                              const std::vector<int64_t>& max_shape, at::Tensor& padded,
                              const std::vector<char>& pad, uint64_t source_bits) {
  const int64_t total = padded.numel();
  if (total == 0) return;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t element_bytes = padded.element_size(), row_bytes = L.elem * element_bytes;
  const int chunk_bytes = widest_chunk_bytes(static_cast<uint64_t>(row_bytes) | source_bits |
                                             address_bits(padded.data_ptr()));
  if (L.rank == 1 && rank1_rows_fit(max_shape[0]) && chunk_bytes >= element_bytes) {
    with_element_type(op, chunk_bytes, [&](auto chunk) {
      using Chunk = decltype(chunk);
      pad_rank1_rows_kernel<<<cuda_grid_for(total / L.elem), kCudaThreads, 0, stream>>>(
          L, max_shape[0], static_cast<Chunk*>(padded.mutable_data_ptr()), row_bytes / chunk_bytes,
          repeated_element<Chunk>(pad.data(), element_bytes));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return;
  }
  const int64_t padded_line = line_elems(max_shape.data(), L.rank, L.elem);
  const int64_t lines_per_item = padded_lines_per_item(max_shape.data(), L.rank);
  with_element_type(op, element_bytes, [&](auto element) {
    using Element = decltype(element);
    scatter_to_padded_kernel<Element><<<cuda_grid_for(total), kCudaThreads, 0, stream>>>(
        L, static_cast<Element*>(padded.mutable_data_ptr()), element_from_bytes<Element>(pad),
        total, padded_line, lines_per_item);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// Writes every element of `packed` from `padded` or, padded undefined, from the sub-tensors at
// L.sources (their addresses or'ed: source_bits): rank-1 batches with the segment core's row mover
// over L.first_row, others an element at a time.
void launch_gather_to_packed(std::string_view op, const DeviceLayout& L,
                             const std::vector<int64_t>& max_shape, at::Tensor& packed,
                             const at::Tensor& padded, uint64_t source_bits) {
  const int64_t total = packed.numel();
  if (total == 0) return;
  const void* padded_base = padded.defined() ? padded.const_data_ptr() : nullptr;
  if (L.rank == 1) {
    const int64_t row_bytes = L.elem * packed.element_size();
    const int chunk_bytes =
        widest_chunk_bytes(static_cast<uint64_t>(row_bytes) | source_bits |
                           address_bits(packed.data_ptr()) | address_bits(padded_base));
    with_element_type(op, chunk_bytes, [&](auto chunk) {
      using Chunk = decltype(chunk);
      const int64_t chunks = row_bytes / chunk_bytes;
      cuda::launch_move_segment_rows(
          L.first_row, L.batch, packed.size(0), static_cast<Chunk*>(packed.mutable_data_ptr()),
          chunks,
          PackedRowSource<Chunk>{L, static_cast<const Chunk*>(padded_base), chunks,
                                 padded.defined() ? max_shape[0] : 0});
    });
    return;
  }
  int64_t padded_line = 0, item_elems = 0;
  if (padded.defined()) {
    padded_line = line_elems(max_shape.data(), L.rank, L.elem);
    item_elems = padded_lines_per_item(max_shape.data(), L.rank) * padded_line;
  }
  with_element_type(op, packed.element_size(), [&](auto element) {
    using Element = decltype(element);
    gather_to_packed_kernel<Element>
        <<<cuda_grid_for(total), kCudaThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            L, static_cast<Element*>(packed.mutable_data_ptr()),
            static_cast<const Element*>(padded_base), total, padded_line, item_elems);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void scatter_to_padded(std::string_view op, at::Tensor& padded, const RaggedLayout& layout,
                       const std::vector<int64_t>& sources, const at::Scalar& padding_value) {
  const std::vector<char> pad =
      fill_value_bytes(op, "padding_value", padding_value, padded.scalar_type());
  if (padded.numel() == 0) return;
  at::Tensor tables;
  const DeviceLayout d = upload(layout, sources, padded.device(), tables);
  launch_scatter_to_padded(op, d, layout.max_shape, padded, pad, address_bits(sources));
}

void gather_to_packed(std::string_view op, at::Tensor& packed, const RaggedLayout& layout,
                      const std::vector<int64_t>& sources, const at::Tensor& padded) {
  if (packed.numel() == 0) return;
  at::Tensor tables;
  const DeviceLayout d = upload(layout, sources, packed.device(), tables);
  launch_gather_to_packed(op, d, layout.max_shape, packed, padded, address_bits(sources));
}

std::vector<int64_t> addresses_of(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> out;
  for (const auto& t : tensors) out.push_back(reinterpret_cast<int64_t>(t.const_data_ptr()));
  return out;
}

std::vector<int64_t> packed_item_addresses(const at::Tensor& packed, const RaggedLayout& layout) {
  std::vector<int64_t> out(layout.batch);
  const int64_t base = reinterpret_cast<int64_t>(packed.const_data_ptr());
  for (int64_t b = 0; b < layout.batch; ++b) {
    out[b] = base + layout.first_row[b] * layout.elem * packed.element_size();
  }
  return out;
}

void check_same_device(std::string_view op, at::TensorList tensors) {
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.device() == tensors[0].device(), "torch_ragged.", op,
                      ": every tensor of tensor_list must be on one device, got ", t.device(),
                      " and ", tensors[0].device());
  }
}

std::tuple<at::Tensor, at::Tensor> list_to_packed_cuda(at::TensorList tensor_list) {
  const RaggedLayout layout = layout_from_tensor_list("list_to_packed", tensor_list);
  check_same_device("list_to_packed", tensor_list);
  const c10::cuda::CUDAGuard guard(tensor_list[0].device());
  const std::vector<at::Tensor> inputs = contiguous_all(tensor_list);
  at::Tensor packed = at::empty({layout.num_rows(), layout.elem}, inputs[0].options());
  gather_to_packed("list_to_packed", packed, layout, addresses_of(inputs), at::Tensor());
  return {packed, layout.shape_per_tensor()};
}

std::tuple<at::Tensor, at::Tensor> list_to_padded_cuda(at::TensorList tensor_list,
                                                       const at::Scalar& padding_value,
                                                       at::OptionalSymIntArrayRef max_shape,
                                                       c10::string_view padding_side) {
  const RaggedLayout layout = list_to_padded_layout(tensor_list, max_shape, padding_side);
  check_same_device("list_to_padded", tensor_list);
  const c10::cuda::CUDAGuard guard(tensor_list[0].device());
  const std::vector<at::Tensor> inputs = contiguous_all(tensor_list);
  at::Tensor padded = at::empty(layout.padded_sizes(), inputs[0].options());
  scatter_to_padded("list_to_padded", padded, layout, addresses_of(inputs), padding_value);
  return {padded, layout.shape_per_tensor()};
}

// ---- Paths without host synchronisation (index tensors on the GPU, output sizes known) ----
//
// The layout is built from the index tensors on the device, and checked there: a failed check is
// a device-side assert (reported at the next synchronisation, as torch's own indexing kernels do),
// raised before the copy kernel, which would otherwise read out of bounds, runs.

// The device layout and the tensors that back it (alive until the launches are enqueued).
struct LayoutOnDevice {
  at::Tensor shapes, max_sizes, offsets, first_rows, sources;
  DeviceLayout view;
};

// shapes: (B, k) integers; max_shape: the padded dims (empty: none); first_idx: given, or (when
// undefined) the exclusive scan of prod(shape), computed on the device.
LayoutOnDevice layout_on_device(const at::Tensor& shapes, const std::vector<int64_t>& max_shape,
                                bool left, const at::Tensor& first_idx, int64_t elem,
                                at::Device device) {
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  LayoutOnDevice l;
  l.shapes = shapes.to(longs).contiguous();
  if (!max_shape.empty()) {
    l.max_sizes = at::tensor(max_shape, at::kLong).pin_memory().to(device, /*non_blocking=*/true);
  }
  l.offsets = left && !max_shape.empty() ? (l.max_sizes.unsqueeze(0) - l.shapes).contiguous()
                                         : at::zeros_like(l.shapes);
  l.first_rows = first_idx.defined() ? first_idx.to(longs).contiguous()
                                     : cuda::offsets_from_counts(l.shapes.prod(1));
  l.view = DeviceLayout{l.shapes.size(0),
                        l.shapes.size(1),
                        elem,
                        l.shapes.const_data_ptr<int64_t>(),
                        l.offsets.const_data_ptr<int64_t>(),
                        max_shape.empty() ? nullptr : l.max_sizes.const_data_ptr<int64_t>(),
                        l.first_rows.const_data_ptr<int64_t>(),
                        nullptr};
  return l;
}

// What the host path checks from host copies of the index tensors: layout_entry_error over the
// batch + 1 entries, grid-stride (a batch of any size is checked whole).
__global__ void check_layout_kernel(DeviceLayout L, int64_t total_rows) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b <= L.batch;
       b += int64_t{gridDim.x} * blockDim.x) {
    const LayoutError error =
        layout_entry_error(L.shapes, L.max_shape, L.first_row, L.batch, L.rank, total_rows, b);
    CUDA_KERNEL_ASSERT_MSG(error != LayoutError::kSizeOutOfRange,
                           "torch_ragged: sub-tensor sizes must lie in [0, max_shape]");
    CUDA_KERNEL_ASSERT_MSG(error != LayoutError::kRowsNotShapes,
                           "torch_ragged: first_idx must step by prod(shape_per_tensor)");
    CUDA_KERNEL_ASSERT_MSG(error != LayoutError::kFirstRowNotZero,
                           "torch_ragged: first_idx[0] must be 0");
    CUDA_KERNEL_ASSERT_MSG(error != LayoutError::kRowsNotTotal,
                           "torch_ragged: the sub-tensors' rows must add up to the packed rows");
  }
}

// The device check of a layout against the packed rows. An empty batch is checked on the host
// (no index data to read: its packed tensor must be empty), so it fails with the CPU's ValueError.
void check_on_device(std::string_view op, const DeviceLayout& layout, int64_t total_rows) {
  TORCH_CHECK_VALUE(layout.batch > 0 || total_rows == 0, "torch_ragged.", op, ": the batch is ",
                    "empty but the packed tensor has ", total_rows, " rows");
  check_layout_kernel<<<cuda_grid_for(layout.batch + 1), kCudaThreads, 0,
                        at::cuda::getCurrentCUDAStream()>>>(layout, total_rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// max_shape fully given (no None / -1 entries) and index tensors on the GPU: no host reads needed.
std::optional<std::vector<int64_t>> device_only_max_shape(const at::Tensor& shape_per_tensor,
                                                          const at::Tensor& first_idx,
                                                          at::OptionalSymIntArrayRef max_shape) {
  if (!shape_per_tensor.is_cuda() || !first_idx.is_cuda() || !max_shape.has_value()) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes;
  for (const c10::SymInt& entry : *max_shape) {
    const std::optional<int64_t> size = entry.maybe_as_int();
    if (!size.has_value() || *size < 0) return std::nullopt;
    sizes.push_back(*size);
  }
  return sizes;
}

// num_rows given and the index tensor on the GPU: no host reads needed (padded_to_packed).
std::optional<int64_t> device_only_num_rows(const at::Tensor& index,
                                            const std::optional<c10::SymInt>& num_rows) {
  if (!index.is_cuda() || !num_rows.has_value()) return std::nullopt;
  const std::optional<int64_t> rows = num_rows->maybe_as_int();
  if (!rows.has_value() || *rows < 0) return std::nullopt;
  return rows;
}

at::Tensor packed_to_padded_on_device(const at::Tensor& packed_tensor,
                                      const at::Tensor& shape_per_tensor,
                                      const at::Tensor& first_idx, const at::Scalar& padding_value,
                                      const std::vector<int64_t>& max_shape, bool left) {
  constexpr std::string_view op = "packed_to_padded";
  check_index_tensor(op, "shape_per_tensor", shape_per_tensor, 2);
  check_index_tensor(op, "first_idx", first_idx, 1);
  const int64_t batch = shape_per_tensor.size(0), rank = shape_per_tensor.size(1);
  TORCH_CHECK_VALUE(packed_tensor.dim() == 2, "torch_ragged.packed_to_padded: packed_tensor must ",
                    "be 2-D (rows, element), got shape ", packed_tensor.sizes());
  TORCH_CHECK_VALUE(first_idx.size(0) == batch + 1, "torch_ragged.packed_to_padded: first_idx ",
                    "must have shape_per_tensor.size(0) + 1 = ", batch + 1, " entries, got shape ",
                    first_idx.sizes());
  TORCH_CHECK_VALUE(static_cast<int64_t>(max_shape.size()) == rank, "torch_ragged.",
                    "packed_to_padded: max_shape must have ", rank, " entries, got ",
                    max_shape.size());
  // Devices before the guard (a CUDAGuard on CPU data would throw torch's raw error), and an index
  // on another GPU is refused as the fake kernel refuses it, not silently copied over.
  check_index_device(op, "shape_per_tensor", shape_per_tensor, packed_tensor.device());
  check_index_device(op, "first_idx", first_idx, packed_tensor.device());
  const c10::cuda::CUDAGuard guard(packed_tensor.device());
  const at::Tensor packed = packed_tensor.contiguous();
  const int64_t elem = packed.size(1);
  std::vector<int64_t> padded_sizes{batch};
  padded_sizes.insert(padded_sizes.end(), max_shape.begin(), max_shape.end());
  padded_sizes.push_back(elem);
  at::Tensor padded = at::empty(padded_sizes, packed.options());
  check_fill_value(op, "padding_value", padding_value, padded.scalar_type());
  LayoutOnDevice l =
      layout_on_device(shape_per_tensor, max_shape, left, first_idx, elem, packed.device());
  // Checked even when nothing is written: a 0 in max_shape below a member's size, or rows with
  // an empty batch, are errors as on the CPU.
  check_on_device(op, l.view, packed.size(0));
  if (padded.numel() == 0) return padded;
  l.sources = l.first_rows.narrow(0, 0, batch) * (elem * packed.element_size()) +
              reinterpret_cast<int64_t>(packed.const_data_ptr());
  l.view.sources = l.sources.const_data_ptr<int64_t>();
  const std::vector<char> pad =
      fill_value_bytes(op, "padding_value", padding_value, padded.scalar_type());
  // Every source lies a multiple of the row's bytes after the packed tensor's start.
  launch_scatter_to_padded(op, l.view, max_shape, padded, pad,
                           address_bits(packed.const_data_ptr()));
  return padded;
}

at::Tensor padded_to_packed_on_device(const at::Tensor& padded_tensor,
                                      const at::Tensor& shape_per_tensor, bool left,
                                      int64_t num_rows) {
  constexpr std::string_view op = "padded_to_packed";
  check_index_tensor(op, "shape_per_tensor", shape_per_tensor, 2);
  const int64_t batch = shape_per_tensor.size(0), rank = shape_per_tensor.size(1);
  TORCH_CHECK_VALUE(padded_tensor.dim() == rank + 2 && padded_tensor.size(0) == batch,
                    "torch_ragged.padded_to_packed: padded_tensor must have shape (", batch,
                    ", M_1..M_", rank, ", C), got ", padded_tensor.sizes());
  check_index_device(op, "shape_per_tensor", shape_per_tensor,
                     padded_tensor.device());  // see above
  const c10::cuda::CUDAGuard guard(padded_tensor.device());
  const at::Tensor padded = padded_tensor.contiguous();
  const int64_t elem = padded.size(-1);
  at::Tensor packed = at::empty({num_rows, elem}, padded.options());
  const std::vector<int64_t> max_shape(padded.sizes().begin() + 1, padded.sizes().end() - 1);
  const LayoutOnDevice l =
      layout_on_device(shape_per_tensor, max_shape, left, at::Tensor(), elem, padded.device());
  check_on_device(op, l.view, num_rows);
  if (packed.numel() == 0) return packed;
  launch_gather_to_packed(op, l.view, max_shape, packed, padded, 0);
  return packed;
}

at::Tensor packed_to_padded_cuda(const at::Tensor& packed_tensor,
                                 const at::Tensor& shape_per_tensor, const at::Tensor& first_idx,
                                 const at::Scalar& padding_value,
                                 at::OptionalSymIntArrayRef max_shape,
                                 c10::string_view padding_side) {
  const bool left = is_left_padding("packed_to_padded", padding_side);
  if (auto sizes = device_only_max_shape(shape_per_tensor, first_idx, max_shape)) {
    return packed_to_padded_on_device(packed_tensor, shape_per_tensor, first_idx, padding_value,
                                      *sizes, left);
  }
  const RaggedLayout layout =
      packed_to_padded_layout(packed_tensor, shape_per_tensor, first_idx, max_shape, padding_side);
  const c10::cuda::CUDAGuard guard(packed_tensor.device());
  const at::Tensor packed = packed_tensor.contiguous();
  at::Tensor padded = at::empty(layout.padded_sizes(), packed.options());
  scatter_to_padded("packed_to_padded", padded, layout, packed_item_addresses(packed, layout),
                    padding_value);
  return padded;
}

at::Tensor padded_to_packed_cuda(const at::Tensor& padded_tensor,
                                 const at::Tensor& shape_per_tensor, c10::string_view padding_side,
                                 std::optional<c10::SymInt> num_rows) {
  if (const auto rows = device_only_num_rows(shape_per_tensor, num_rows)) {
    return padded_to_packed_on_device(padded_tensor, shape_per_tensor,
                                      is_left_padding("padded_to_packed", padding_side), *rows);
  }
  const RaggedLayout layout =
      padded_to_packed_layout(padded_tensor, shape_per_tensor, padding_side, num_rows);
  const c10::cuda::CUDAGuard guard(padded_tensor.device());
  const at::Tensor padded = padded_tensor.contiguous();
  at::Tensor packed = at::empty({layout.num_rows(), layout.elem}, padded.options());
  gather_to_packed("padded_to_packed", packed, layout, {}, padded);
  return packed;
}

}  // namespace

TORCH_LIBRARY_IMPL(torch_ragged, CUDA, m) {
  m.impl("list_to_packed", &list_to_packed_cuda);
  m.impl("list_to_padded", &list_to_padded_cuda);
  m.impl("packed_to_padded", &packed_to_padded_cuda);
  m.impl("padded_to_packed", &padded_to_packed_cuda);
}

}  // namespace torch_ragged
