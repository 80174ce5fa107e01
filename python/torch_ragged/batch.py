"""Ragged batching with Kaolin's ``kaolin.ops.batch`` signatures, plus ``padding_side``.

Code written for ``kaolin.ops.batch`` runs unchanged: every function takes the same arguments and
returns the same values. Additions: ``padding_side="left"`` aligns each sub-tensor to the end of
every padded dim, ``max_shape`` entries may be ``None`` or ``-1`` (the largest sub-tensor's size),
and a ``max_shape`` smaller than a sub-tensor raises ``ValueError`` instead of truncating.

Sequences as ``pad_sequence`` takes them: 1-D members of different lengths are sequences of scalars
(``list_to_padded([a, b])`` gives ``(B, longest)`` and ``(B, 1)`` lengths; Kaolin refuses such lists, and 1-D
members of one length keep its reading, one row each, with the same padded tensor), a 1-D packed tensor has one
scalar per row, ``shape_per_tensor`` may be the members' lengths ``(B,)``, and ``padding_value`` defaults to 0.
"""

from collections.abc import Sequence

import torch

from ._checks import index_tensor, integer_tensor
from .segment import get_first_idx

__all__ = [
    "fill_max_shape",
    "get_first_idx",
    "get_shape_per_tensor",
    "list_to_packed",
    "list_to_padded",
    "packed_to_list",
    "packed_to_padded",
    "padded_to_list",
    "padded_to_packed",
    "tile_to_packed",
]

_ops = torch.ops.torch_ragged


def _eager_max_shape(op: str, max_shape):
    """Kaolin's max_shape forms (None, list / tuple with None entries, LongTensor) -> list[int] or None."""
    if max_shape is None:
        return None
    if isinstance(max_shape, torch.Tensor):
        if max_shape.dim() != 1:
            raise ValueError(f"torch_ragged.{op}: max_shape must be 1-D, got shape {tuple(max_shape.shape)}")
        max_shape = integer_tensor(op, "max_shape", max_shape).tolist()
    if not isinstance(max_shape, Sequence):
        raise TypeError(f"torch_ragged.{op}: max_shape must be a sequence, tensor or None, got "
                        f"{type(max_shape).__name__}")
    return [-1 if entry is None else entry for entry in max_shape]



def _max_shape_arg(op: str, max_shape: list[int] | None) -> list[int] | None:
    """``max_shape`` as the op takes it; eager calls may also pass a tensor or None entries."""
    if not torch.jit.is_scripting():
        return _eager_max_shape(op, max_shape)
    return max_shape

def _eager_tensor_list(op: str, tensor_list) -> list:
    """The list an op gets; an empty one cannot reach a kernel (no tensor picks the device)."""
    tensors = list(tensor_list)
    if not tensors:
        raise ValueError(f"torch_ragged.{op}: tensor_list must hold at least one tensor (the dtype and "
                         "element size of an empty batch are unknown)")
    return tensors



def _tensor_list(op: str, tensor_list: list[torch.Tensor]) -> list[torch.Tensor]:
    """The members as a list; eager calls may pass any iterable (an empty one is refused by name here, and by the op
    under TorchScript)."""
    if not torch.jit.is_scripting():
        return _eager_tensor_list(op, tensor_list)
    return tensor_list

def _scalar_members(tensors: list[torch.Tensor]) -> bool:
    """1-D members of different lengths: sequences of scalars (pad_sequence's reading; Kaolin refuses them),
    carried through the ops as (n, 1) rows. 1-D members of one length keep Kaolin's reading (one row each)."""
    if len(tensors) < 2:
        return False
    for tensor in tensors:  # loops, not all() / a set: TorchScript compiles this
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 1:
            return False
    for tensor in tensors:
        if tensor.shape[0] != tensors[0].shape[0]:
            return True
    return False


def _scalar_padded(padded: torch.Tensor, shape_per_tensor: torch.Tensor) -> bool:
    """A padded tensor of scalar members: (B, *max_shape) with no element dim after the ragged dims."""
    return (isinstance(padded, torch.Tensor) and isinstance(shape_per_tensor, torch.Tensor)
            and shape_per_tensor.dim() == 2 and shape_per_tensor.shape[1] >= 1
            and padded.dim() == 1 + shape_per_tensor.shape[1])


def _shape_per_tensor_arg(op: str, shape_per_tensor: torch.Tensor) -> torch.Tensor:
    """(B,) lengths -> (B, 1) shape_per_tensor (a list as a tensor); anything else is passed on (the op checks
    it)."""
    shape_per_tensor = index_tensor(op, "shape_per_tensor", shape_per_tensor)
    if isinstance(shape_per_tensor, torch.Tensor) and shape_per_tensor.dim() == 1:
        return shape_per_tensor.unsqueeze(1)
    return shape_per_tensor


def get_shape_per_tensor(tensor_list: list[torch.Tensor]) -> torch.Tensor:
    """Shape of each tensor except its last dim, as a (B, ndim - 1) LongTensor.

    Args:
        tensor_list: the members: a list of B tensors of shapes ``(*s_b, C)``, one dtype and device, the same last dim
            ``C`` (1-D members of different lengths are sequences of scalars).

    >>> get_shape_per_tensor([torch.zeros((1, 3, 4, 2)), torch.ones((2, 5, 3, 2))])
    tensor([[1, 3, 4],
            [2, 5, 3]])
    """
    return _ops.get_shape_per_tensor(_tensor_list("get_shape_per_tensor", tensor_list))


def fill_max_shape(shape_per_tensor: torch.Tensor, partial_max_shape: list[int] | None = None) -> torch.Tensor:
    """Replaces the -1 / None entries of partial_max_shape with the largest size in that dim.

    Args:
        shape_per_tensor: (B, k) int64 tensor on the CPU: each member's shape without the last dim (``(B,)`` lengths for
            one ragged dim).
        partial_max_shape: k sizes, ``None`` or -1 where the largest member size is wanted (``None``: all of them).

    >>> fill_max_shape(torch.LongTensor([[2, 3, 5], [3, 4, 2]]), (6, -1, -1))
    tensor([6, 4, 5])
    """
    return _ops.fill_max_shape(index_tensor("fill_max_shape", "shape_per_tensor", shape_per_tensor),
                               _max_shape_arg("fill_max_shape", partial_max_shape))


def list_to_packed(tensor_list: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Reshapes each tensor to (-1, last_dim) and concatenates: returns (packed, shape_per_tensor).

    Args:
        tensor_list: the members: a list of B tensors of shapes ``(*s_b, C)``, one dtype and device, the same last dim
            ``C`` (1-D members of different lengths are sequences of scalars).

    >>> packed, shape_per_tensor = list_to_packed([torch.LongTensor([[0, 1, 2], [1, 2, 3]]),
    ...                                            torch.LongTensor([[2, 4, 5]])])
    >>> packed
    tensor([[0, 1, 2],
            [1, 2, 3],
            [2, 4, 5]])
    """
    tensors = _tensor_list("list_to_packed", tensor_list)
    if _scalar_members(tensors):
        packed, shape_per_tensor = _ops.list_to_packed([t.unsqueeze(1) for t in tensors])
        return packed.squeeze(1), shape_per_tensor
    return _ops.list_to_packed(tensors)


def list_to_padded(tensor_list: list[torch.Tensor], padding_value: int | float = 0, max_shape: list[int] | None = None,
                   padding_side: str = "right") -> tuple[torch.Tensor, torch.Tensor]:
    """Pads each tensor to max_shape and stacks them: returns (padded, shape_per_tensor).

    Args:
        tensor_list: the members: a list of B tensors of shapes ``(*s_b, C)``, one dtype and device, the same last dim
            ``C`` (1-D members of different lengths are sequences of scalars).
        padding_value: the value written where no member is (a number the dtype can hold; NaN / inf for floating
            dtypes).
        max_shape: sizes of the padded ragged dims (a list of ints, one per ragged dim; None / -1 entries take the
            largest member size); ``None``: the largest member sizes. Never smaller than a member.
        padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members end
            at the last index).

    >>> padded, _ = list_to_padded([torch.LongTensor([[0, 1, 2], [1, 2, 3]]),
    ...                             torch.LongTensor([[2, 4, 5]])], -1, [3])
    >>> padded[1]
    tensor([[ 2,  4,  5],
            [-1, -1, -1],
            [-1, -1, -1]])
    """
    tensors = _tensor_list("list_to_padded", tensor_list)
    if _scalar_members(tensors):  # (B, longest), as pad_sequence(batch_first=True)
        padded, shape_per_tensor = _ops.list_to_padded([t.unsqueeze(1) for t in tensors], padding_value,
                                                       _max_shape_arg("list_to_padded", max_shape), padding_side)
        return padded.squeeze(-1), shape_per_tensor
    return _ops.list_to_padded(tensors, padding_value, _max_shape_arg("list_to_padded", max_shape), padding_side)


def packed_to_list(packed_tensor: torch.Tensor, shape_per_tensor: torch.Tensor,
                   first_idx: torch.Tensor) -> list[torch.Tensor]:
    """Views of the packed tensor, one per sub-tensor, each shaped ``(*shape, last_dim)``.

    Args:
        packed_tensor: (rows, C) tensor, or (rows,) for scalar rows: the members reshaped to ``(-1, C)`` and
            concatenated.
        shape_per_tensor: (B, k) int64 tensor on the CPU: each member's shape without the last dim (``(B,)`` lengths for
            one ragged dim).
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.

    >>> [t.shape for t in packed_to_list(torch.arange(16).reshape(8, 2), torch.LongTensor([[3], [4], [1]]),
    ...                                  torch.LongTensor([0, 3, 7, 8]))]
    [torch.Size([3, 2]), torch.Size([4, 2]), torch.Size([1, 2])]
    """
    shape_per_tensor = _shape_per_tensor_arg("packed_to_list", shape_per_tensor)
    first_idx = index_tensor("packed_to_list", "first_idx", first_idx)
    if isinstance(packed_tensor, torch.Tensor) and packed_tensor.dim() == 1:
        return [t.squeeze(-1) for t in _ops.packed_to_list(packed_tensor.unsqueeze(1), shape_per_tensor, first_idx)]
    return _ops.packed_to_list(packed_tensor, shape_per_tensor, first_idx)


def packed_to_padded(packed_tensor: torch.Tensor, shape_per_tensor: torch.Tensor, first_idx: torch.Tensor,
                     padding_value: int | float = 0, max_shape: list[int] | None = None,
                     padding_side: str = "right") -> torch.Tensor:
    """Converts a packed tensor into a padded one ``(B, *max_shape, last_dim)``.

    Args:
        packed_tensor: (rows, C) tensor, or (rows,) for scalar rows: the members reshaped to ``(-1, C)`` and
            concatenated.
        shape_per_tensor: (B, k) int64 tensor on the CPU: each member's shape without the last dim (``(B,)`` lengths for
            one ragged dim).
        first_idx: (B + 1,) int64 (int32 accepted) tensor or list: segment b is rows ``first_idx[b]:first_idx[b + 1]``;
            starts at 0, never decreases, ends at the row count.
        padding_value: the value written where no member is (a number the dtype can hold; NaN / inf for floating
            dtypes).
        max_shape: sizes of the padded ragged dims (a list of ints, one per ragged dim; None / -1 entries take the
            largest member size); ``None``: the largest member sizes. Never smaller than a member.
        padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members end
            at the last index).

    >>> packed_to_padded(torch.arange(6.).reshape(3, 2), torch.LongTensor([[2], [1]]),
    ...                  torch.LongTensor([0, 2, 3]), 0., padding_side="left")[1]
    tensor([[0., 0.],
            [4., 5.]])
    """
    shape_per_tensor = _shape_per_tensor_arg("packed_to_padded", shape_per_tensor)
    first_idx = index_tensor("packed_to_padded", "first_idx", first_idx)
    if isinstance(packed_tensor, torch.Tensor) and packed_tensor.dim() == 1:  # scalar rows: (B, *max_shape)
        return _ops.packed_to_padded(packed_tensor.unsqueeze(1), shape_per_tensor, first_idx, padding_value,
                                     _max_shape_arg("packed_to_padded", max_shape), padding_side).squeeze(-1)
    return _ops.packed_to_padded(packed_tensor, shape_per_tensor, first_idx, padding_value,
                                 _max_shape_arg("packed_to_padded", max_shape), padding_side)


def padded_to_list(padded_tensor: torch.Tensor, shape_per_tensor: torch.Tensor,
                   padding_side: str = "right") -> list[torch.Tensor]:
    """Views of the padded tensor, one per sub-tensor, padding cut off.

    Args:
        padded_tensor: (B, M_1, ..., M_k, C) tensor (or without ``C`` for scalar rows): the members padded to a common
            shape.
        shape_per_tensor: (B, k) int64 tensor on the CPU: each member's shape without the last dim (``(B,)`` lengths for
            one ragged dim).
        padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members end
            at the last index).

    >>> padded_to_list(torch.LongTensor([[[0, 1], [-1, -1]]]), torch.LongTensor([[1]]))
    [tensor([[0, 1]])]
    """
    shape_per_tensor = _shape_per_tensor_arg("padded_to_list", shape_per_tensor)
    if _scalar_padded(padded_tensor, shape_per_tensor):
        return [t.squeeze(-1) for t in _ops.padded_to_list(padded_tensor.unsqueeze(-1), shape_per_tensor,
                                                           padding_side)]
    return _ops.padded_to_list(padded_tensor, shape_per_tensor, padding_side)


def padded_to_packed(padded_tensor: torch.Tensor, shape_per_tensor: torch.Tensor, padding_side: str = "right",
                     num_rows: int | None = None) -> torch.Tensor:
    """Converts a padded tensor into a packed one; ``num_rows`` (the packed row count) is optional.

    Args:
        padded_tensor: (B, M_1, ..., M_k, C) tensor (or without ``C`` for scalar rows): the members padded to a common
            shape.
        shape_per_tensor: (B, k) int64 tensor on the CPU: each member's shape without the last dim (``(B,)`` lengths for
            one ragged dim).
        padding_side: ``"right"`` (members start at index 0 of each ragged dim, the default) or ``"left"`` (members end
            at the last index).
        num_rows: the packed row count when known (an int): keeps torch.compile graphs static; checked against
            ``shape_per_tensor``.

    >>> padded_to_packed(torch.LongTensor([[[0, 1], [-1, -1]], [[2, 3], [4, 5]]]), torch.LongTensor([[1], [2]]))
    tensor([[0, 1],
            [2, 3],
            [4, 5]])
    """
    shape_per_tensor = _shape_per_tensor_arg("padded_to_packed", shape_per_tensor)
    if _scalar_padded(padded_tensor, shape_per_tensor):  # (B, *max_shape) of scalars -> (rows,)
        return _ops.padded_to_packed(padded_tensor.unsqueeze(-1), shape_per_tensor, padding_side,
                                     num_rows).squeeze(-1)
    return _ops.padded_to_packed(padded_tensor, shape_per_tensor, padding_side, num_rows)


def tile_to_packed(values: torch.Tensor, numel_per_tensor: torch.Tensor, num_rows: int | None = None) -> torch.Tensor:
    """Repeats values[b] numel_per_tensor[b] times: (B,) -> (sum, 1) as Kaolin, (B, D...) -> (sum, D...).

    Args:
        values: (B,) or ``(B, *D)`` tensor: one value (or one row) per member.
        numel_per_tensor: (B,) integer tensor or list of ints: the row count of each member.
        num_rows: the total row count ``sum(numel_per_tensor)`` when known (an int): keeps torch.compile graphs static
            and skips a host read on a GPU.

    >>> tile_to_packed(torch.tensor([0., 6.]), torch.LongTensor([1, 2]))
    tensor([[0.],
            [6.],
            [6.]])
    """
    return _ops.tile_to_packed(values, numel_per_tensor, num_rows)
