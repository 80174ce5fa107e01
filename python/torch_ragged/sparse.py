"""Sparse COO tensors on the segment core: coalesce, sum, sparse_mask, to_dense / to_sparse, index_select.

The wrappers take and return ``torch.sparse_coo_tensor`` s (int64 indices, as torch requires) with
``is_coalesced()`` set truthfully. The ops underneath work on COO triplets — ``indices (sparse_dim, nnz)``
int64 **or int32** (kept as given), ``values (nnz, *dense sizes)``, ``size`` — and are reachable as
``torch.ops.torch_ragged.sparse_*`` (TorchScript, torch.compile) and from C++ (``torch_ragged/sparse.h``).
Duplicates are summed in input order, so every result is deterministic. See docs/sparse.md.
"""

from collections.abc import Sequence

import torch
from torch.library import register_fake

__all__ = ["coalesce", "index_select", "log_softmax", "softmax", "sparse_mask", "sum", "to_dense", "to_sparse"]

_ops = torch.ops.torch_ragged


def _check_sparse(op: str, s) -> None:
    if not isinstance(s, torch.Tensor) or s.layout != torch.sparse_coo:
        layout = s.layout if isinstance(s, torch.Tensor) else type(s).__name__
        raise TypeError(f"torch_ragged.sparse.{op}: expected a sparse COO tensor, got {layout}")


class _UncoalescedValues(torch.autograd.Function):
    """The values of an uncoalesced sparse tensor, differentiably: torch's ``values()`` refuses an uncoalesced
    tensor and ``_values()`` cuts the graph. The ops here are functions of the tensor's elements, so duplicates
    get equal gradients; backward returns them once per element (a sparse gradient over the unique indices),
    which torch's sparse_coo_tensor backward hands to every duplicate."""

    @staticmethod
    def forward(ctx, s):
        ctx.save_for_backward(s._indices())
        ctx.size = s.shape
        return s._values().clone()

    @staticmethod
    def backward(ctx, grad):
        (indices,) = ctx.saved_tensors
        unique, _, permutation, first_idx = _ops.sparse_coalesce(indices, grad, ctx.size, False)
        element_grad = grad.index_select(0, permutation.index_select(0, first_idx[:-1]))
        return torch.sparse_coo_tensor(unique, element_grad, ctx.size, is_coalesced=True, check_invariants=False)


def _values(s: torch.Tensor) -> torch.Tensor:
    """s's values, connected to the autograd graph when s requires grad."""
    if not (s.requires_grad and torch.is_grad_enabled()):
        return s._values()
    return s.values() if s.is_coalesced() else _UncoalescedValues.apply(s)


def _sparse(indices, values, size, coalesced: bool) -> torch.Tensor:
    return torch.sparse_coo_tensor(indices.long(), values, size, is_coalesced=coalesced, check_invariants=False)


def coalesce(s: torch.Tensor, *, validate: bool = True, return_order: bool = False):
    """``s.coalesce()``: unique, lexicographically sorted indices, duplicates summed in input order.

    An input that is already sorted costs no sort, one that is already coalesced no copy of its structure.
    With ``return_order=True`` also returns ``(permutation, first_idx)``: sorted position -> input entry, and the
    runs of equal indices that were summed (offsets over the sorted positions), for reuse.

    >>> s = torch.sparse_coo_tensor([[1, 0, 1]], [3.0, 4.0, 5.0], (3,))
    >>> coalesce(s)
    tensor(indices=tensor([[0, 1]]),
           values=tensor([4., 8.]),
           size=(3,), nnz=2, layout=torch.sparse_coo)
    """
    _check_sparse("coalesce", s)
    indices, values, permutation, first_idx = _ops.sparse_coalesce(s._indices(), _values(s), s.shape, validate)
    result = _sparse(indices, values, s.shape, True)
    return (result, permutation, first_idx) if return_order else result


def sum(s: torch.Tensor, dim=None, *, validate: bool = True) -> torch.Tensor:  # noqa: A001 (torch.sparse.sum)
    """``torch.sparse.sum(s, dim)``: a coalesced sparse tensor over the kept dims, or a dense tensor when every
    sparse dim is reduced (``dim=None`` reduces everything to a 0-d tensor).

    Reducing trailing sparse dims of a coalesced tensor needs no sort.

    >>> s = torch.sparse_coo_tensor([[0, 0, 1], [0, 2, 2]], [1.0, 2.0, 3.0], (2, 3))
    >>> sum(s, 1)
    tensor(indices=tensor([[0, 1]]),
           values=tensor([3., 3.]),
           size=(2,), nnz=2, layout=torch.sparse_coo)
    """
    _check_sparse("sum", s)
    dims = None
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
    indices, values = _ops.sparse_sum(s._indices(), _values(s), s.shape, dims, validate)
    reduced = set(range(s.dim())) if dims is None else {d % s.dim() for d in dims}
    kept = [size for d, size in enumerate(s.shape) if d not in reduced]
    if indices.shape[0] == 0:  # every sparse dim reduced: dense
        return values[0]
    return _sparse(indices, values, kept, True)


def sparse_mask(dense: torch.Tensor, mask: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """``dense.sparse_mask(mask)``: the values of ``dense`` at ``mask``'s indices (``mask``'s values are ignored).

    >>> mask = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 1.0], (2, 2))
    >>> sparse_mask(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), mask).to_dense()
    tensor([[0., 2.],
            [3., 0.]])
    """
    _check_sparse("sparse_mask", mask)
    if tuple(dense.shape) != tuple(mask.shape):
        raise ValueError(f"torch_ragged.sparse.sparse_mask: dense has shape {tuple(dense.shape)} but mask has "
                         f"shape {tuple(mask.shape)}")
    values = _ops.sparse_mask(dense, mask._indices(), validate)
    return _sparse(mask._indices(), values, mask.shape, mask.is_coalesced())


def to_dense(s: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """``s.to_dense()``, duplicates summed deterministically (coalesced first).

    >>> to_dense(torch.sparse_coo_tensor([[1, 1]], [3, 4], (3,)))
    tensor([0, 7, 0])
    """
    _check_sparse("to_dense", s)
    return _ops.sparse_to_dense(s._indices(), _values(s), s.shape, validate)


def to_sparse(dense: torch.Tensor, sparse_dim: int | None = None) -> torch.Tensor:
    """``dense.to_sparse(sparse_dim)``: the entries that are not exactly zero, coalesced.

    >>> to_sparse(torch.tensor([[0.0, 2.0], [0.0, 0.0]]))
    tensor(indices=tensor([[0],
                           [1]]),
           values=tensor([2.]),
           size=(2, 2), nnz=1, layout=torch.sparse_coo)
    """
    indices, values = _ops.sparse_from_dense(dense, sparse_dim)
    return _sparse(indices, values, dense.shape, True)


def index_select(s: torch.Tensor, dim: int, index) -> torch.Tensor:
    """``s.index_select(dim, index)`` for a sparse or dense dim; repeated positions repeat entries.

    >>> s = torch.sparse_coo_tensor([[0, 2]], [5.0, 6.0], (3,))
    >>> index_select(s, 0, torch.tensor([2, 2, 0])).to_dense()
    tensor([6., 6., 5.])
    """
    _check_sparse("index_select", s)
    if isinstance(index, Sequence):
        index = torch.tensor(index, dtype=torch.long)
    indices, values = _ops.sparse_index_select(s._indices(), _values(s), s.shape, dim, index)
    size = list(s.shape)
    size[dim] = index.numel()
    return _sparse(indices, values, size, False)


def _softmax(op: str, s: torch.Tensor, dim: int, dtype, log: bool) -> torch.Tensor:
    _check_sparse(op, s)
    values = _values(s)
    if dtype is not None:
        values = values.to(dtype)  # torch casts before computing
    indices = s._indices()
    if not s.is_coalesced():  # duplicates are summed first, as torch does
        indices, values, _, _ = _ops.sparse_coalesce(indices, values, s.shape)
    out = _ops.sparse_softmax(indices, values, s.shape, dim, log)
    return _sparse(indices, out, s.shape, True)


def softmax(s: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.sparse.softmax(s, dim, dtype)``: each slice along ``dim`` normalised over its specified entries
    (unspecified entries count as -inf); the result keeps the (coalesced) sparsity pattern.

    Along a sparse dim the pools are found by a sort of the other indices (none for the last sparse dim of a
    coalesced tensor); along a dense dim it is a dense softmax of the values. Half and bfloat16 accumulate in float.

    >>> s = torch.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [1.0, 1.0, 5.0], (2, 3))
    >>> softmax(s, 1).to_dense()
    tensor([[0.5000, 0.0000, 0.5000],
            [0.0000, 1.0000, 0.0000]])
    """
    return _softmax("softmax", s, dim, dtype, False)


def log_softmax(s: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.sparse.log_softmax(s, dim, dtype)`` (see :func:`softmax`).

    >>> s = torch.sparse_coo_tensor([[0, 1]], [0.0, 0.0], (3,))
    >>> log_softmax(s, 0).values()
    tensor([-0.6931, -0.6931])
    """
    return _softmax("log_softmax", s, dim, dtype, True)


# ---- fake kernels (torch.compile / torch.export): the number of unique entries is data-dependent ----

@register_fake("torch_ragged::sparse_flat_keys")
def _sparse_flat_keys_fake(indices, sparse_size, validate=True):
    torch._check(indices.dim() == 2 and indices.shape[0] == len(sparse_size),
                 lambda: "torch_ragged.sparse_flat_keys: indices must be (len(sparse_size), nnz)")
    return indices.new_empty((indices.shape[1],), dtype=torch.long)


@register_fake("torch_ragged::sparse_softmax")
def _sparse_softmax_fake(indices, values, size, dim, log=False):
    return torch.empty_like(values, memory_format=torch.contiguous_format)


@register_fake("torch_ragged::sparse_pool_sum")
def _sparse_pool_sum_fake(indices, values, size, dim):
    return torch.empty_like(values, memory_format=torch.contiguous_format)


@register_fake("torch_ragged::sparse_coalesce")
def _sparse_coalesce_fake(indices, values, size, validate=True):
    unique = torch.library.get_ctx().new_dynamic_size()
    return (indices.new_empty((indices.shape[0], unique)), values.new_empty((unique, *values.shape[1:])),
            indices.new_empty((indices.shape[1],), dtype=torch.long),
            indices.new_empty((unique + 1,), dtype=torch.long))
