"""Fake (meta) kernels: output shapes for torch.compile / torch.export without running the op.

The segment core's fake kernels live beside its wrappers (segment.py). Sizes that depend on
index-tensor *values* (packed_to_padded without max_shape, padded_to_packed without num_rows) are
unbacked: ``ctx.new_dynamic_size()``. Callers that pass the size keep the graph static.
"""

import math

import torch
import torch._prims_common

from .segment import _check_index_devices, register_fake


def _dynamic_size():
    return torch.library.get_ctx().new_dynamic_size()


def _check_one_device(op: str, tensor_list) -> None:
    """A list mixing meta and real tensors reaches these fake kernels eagerly: refuse, as for any mixed devices."""
    first = tensor_list[0].device
    for i, t in enumerate(tensor_list):
        if t.device != first:
            raise ValueError(f"torch_ragged.{op}: tensors must share one device, tensor 0 is on {first} but "
                             f"tensor {i} is on {t.device}")


def _known(entry) -> bool:
    return entry is not None and not (isinstance(entry, int) and entry == -1)


@register_fake("torch_ragged::get_shape_per_tensor")
def _get_shape_per_tensor(tensor_list):
    _check_one_device("get_shape_per_tensor", tensor_list)
    return _list_shape_per_tensor(tensor_list)


@register_fake("torch_ragged::fill_max_shape")
def _fill_max_shape(shape_per_tensor, partial_max_shape=None):
    return shape_per_tensor.new_empty((shape_per_tensor.shape[1],), dtype=torch.long)


def _list_shape_per_tensor(tensor_list):
    """The members' shapes but the last dim, on the CPU. Eager calls with meta tensors get the true shapes (known
    from the tensors); under tracing (FakeTensors, maybe symbolic sizes) only the tensor's shape is known."""
    rank = tensor_list[0].dim() - 1
    if not any(isinstance(t, torch._subclasses.FakeTensor) for t in tensor_list):
        shapes = [list(t.shape[:-1]) for t in tensor_list]
        return torch.tensor(shapes, dtype=torch.long).view(len(tensor_list), rank)
    return torch.empty((len(tensor_list), rank), dtype=torch.long, device="cpu")


@register_fake("torch_ragged::list_to_packed")
def _list_to_packed(tensor_list):
    _check_one_device("list_to_packed", tensor_list)
    rows = sum(math.prod(t.shape[:-1]) for t in tensor_list)
    first = tensor_list[0]
    return first.new_empty((rows, first.shape[-1])), _list_shape_per_tensor(tensor_list)


@register_fake("torch_ragged::list_to_padded")
def _list_to_padded(tensor_list, padding_value, max_shape=None, padding_side="right"):
    _check_one_device("list_to_padded", tensor_list)
    first = tensor_list[0]
    dims = []
    for j in range(first.dim() - 1):
        if max_shape is not None and _known(max_shape[j]):
            dims.append(max_shape[j])
        else:
            size = tensor_list[0].shape[j]
            for t in tensor_list[1:]:
                size = torch.sym_max(size, t.shape[j])
            dims.append(size)
    padded = first.new_empty((len(tensor_list), *dims, first.shape[-1]))
    return padded, _list_shape_per_tensor(tensor_list)


@register_fake("torch_ragged::packed_to_padded")
def _packed_to_padded(packed_tensor, shape_per_tensor, first_idx, padding_value, max_shape=None,
                      padding_side="right"):
    _check_index_devices("packed_to_padded", packed_tensor, shape_per_tensor=shape_per_tensor, first_idx=first_idx)
    rank = shape_per_tensor.shape[1]
    dims = [max_shape[j] if max_shape is not None and _known(max_shape[j]) else _dynamic_size()
            for j in range(rank)]
    return packed_tensor.new_empty((shape_per_tensor.shape[0], *dims, packed_tensor.shape[-1]))


@register_fake("torch_ragged::padded_to_packed")
def _padded_to_packed(padded_tensor, shape_per_tensor, padding_side="right", num_rows=None):
    _check_index_devices("padded_to_packed", padded_tensor, shape_per_tensor=shape_per_tensor)
    rows = num_rows if num_rows is not None else _dynamic_size()
    return padded_tensor.new_empty((rows, padded_tensor.shape[-1]))


@register_fake("torch_ragged::pad_index")
def _pad_index(self, pad_width, mode, constant_values=None):
    torch._check(len(pad_width) == 2 * self.dim(), lambda: "torch_ragged.pad_index: pad_width needs 2 entries per axis")
    sizes = [self.shape[k] + pad_width[2 * k] + pad_width[2 * k + 1] for k in range(self.dim())]
    order = _dense_layout_order(self)
    if order is None:
        return self.new_empty(sizes)
    # The kernel keeps the input's memory layout (pad_plan.cpp, run_pad_index).
    return self.new_empty([sizes[k] for k in order]).permute(sorted(range(len(order)), key=order.__getitem__))


# Renamed in torch 2.14 (…_or_false: False where a symbolic size leaves it undecided); older torch (2.11 on the GPU
# machine) has the plain name.
_is_non_overlapping_and_dense = (getattr(torch._prims_common, "is_non_overlapping_and_dense_or_false", None)
                                 or torch._prims_common.is_non_overlapping_and_dense)


def _dense_layout_order(tensor):
    """dense_layout_order of pad_plan.cpp: the axes by decreasing stride (stable) for a dense, non-overlapping,
    non-contiguous tensor; None otherwise (contiguous, gapped or overlapping)."""
    if tensor.is_contiguous() or not _is_non_overlapping_and_dense(tensor):
        return None
    return sorted(range(tensor.dim()), key=lambda k: -tensor.stride(k))


@register_fake("torch_ragged::pad_index_backward")
def _pad_index_backward(grad_output, pad_width, mode):
    torch._check(len(pad_width) == 2 * grad_output.dim(),
                 lambda: "torch_ragged.pad_index_backward: pad_width needs 2 entries per axis")
    sizes = [grad_output.shape[k] - pad_width[2 * k] - pad_width[2 * k + 1] for k in range(grad_output.dim())]
    return grad_output.new_empty(sizes)
