"""Sparse COO tensors on the segment core: coalesce, sum, sparse_mask, to_dense / to_sparse, index_select.

The wrappers take and return ``torch.sparse_coo_tensor`` s (int64 indices, as torch requires) with
``is_coalesced()`` set truthfully. The ops underneath work on COO triplets — ``indices (sparse_dim, nnz)``
int64 **or int32** (kept as given), ``values (nnz, *dense sizes)``, ``size`` — and are reachable as
``torch.ops.torch_ragged.sparse_*`` (TorchScript, torch.compile) and from C++ (``torch_ragged/sparse.h``).
Duplicates are summed in one fixed order (input order within a chunk of the segment core's reduction tree, chunk
partials merged left to right), so every result is deterministic.
"""

import warnings
from typing import NamedTuple

import torch

from ._checks import index_tensor
from .segment import register_fake

__all__ = ["SparsePlan", "abs", "accelerate", "add", "addmm", "asin", "asinh", "atan", "atanh", "bmm", "cat", "ceil",
           "coalesce", "deg2rad", "div", "erf", "erfinv", "expm1", "floor", "frac", "hspmm", "index_select",
           "is_accelerated", "log1p", "log_softmax", "matmul", "mm", "mul", "mv", "narrow_copy", "neg", "permute",
           "plan", "pow", "rad2deg", "relu", "round", "select", "sgn", "sign", "signbit", "sin", "sinh", "smm",
           "softmax", "sparse_mask", "sqrt", "square", "sspaddmm", "stack", "sub", "sum", "t", "tan", "tanh",
           "to_dense", "to_sparse", "to_sparse_coo", "to_sparse_csc", "to_sparse_csr", "transpose", "trunc",
           "unsqueeze"]

_ops = torch.ops.torch_ragged


_COMPRESSED = (torch.sparse_csr, torch.sparse_csc)


def _layout_name(s) -> str:
    return str(s.layout) if isinstance(s, torch.Tensor) else type(s).__name__


def _check_sparse(op: str, s, compressed: bool = False) -> None:
    """s is a sparse COO tensor (or, with ``compressed``, a CSR or CSC one); the error names the layout received."""
    layouts = (torch.sparse_coo, *_COMPRESSED) if compressed else (torch.sparse_coo,)
    if not isinstance(s, torch.Tensor) or s.layout not in layouts:
        expected = "a sparse COO, CSR or CSC tensor" if compressed else "a sparse COO tensor"
        raise TypeError(f"torch_ragged.sparse.{op}: expected {expected}, got {_layout_name(s)}")


def _check_matrix(op: str, s) -> None:
    """A sparse matrix for a product: every dim sparse (a hybrid tensor's dense dims have no product rule)."""
    _check_sparse(op, s, compressed=True)
    if s.dense_dim() != 0:
        raise ValueError(f"torch_ragged.sparse.{op}: S must have only sparse dims, got a hybrid tensor of shape "
                         f"{tuple(s.shape)} with {s.dense_dim()} dense dim(s) (sparse_dim={s.sparse_dim()})")


class _UncoalescedValues(torch.autograd.Function):
    """The values of an uncoalesced sparse tensor, differentiably: torch's ``values()`` refuses an uncoalesced
    tensor and ``_values()`` cuts the graph. The ops here are functions of the tensor's elements, so duplicates
    get equal gradients; backward returns them once per element (a sparse gradient over the unique indices),
    which torch's sparse_coo_tensor backward hands to every duplicate."""

    @staticmethod
    def forward(ctx, s):
        ctx.set_materialize_grads(False)  # an undefined gradient stays None (not a sparse zero)
        ctx.save_for_backward(s._indices())
        ctx.size = s.shape
        return s._values().clone()

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None
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


# ---- compressed layouts: a CSR matrix's crow_indices is a first_idx, a CSC matrix's ccol_indices too ----

class _Compressed(NamedTuple):
    """A 2-D CSR or CSC matrix A as the coalesced COO triplet of the matrix whose rows are its compressed dim: A's
    own entries for CSR, Aᵀ's for CSC (``transposed``). No sort: the rows are the segment ids of the compressed
    offsets, the columns the plain indices as stored (torch's invariant: strictly increasing in each row)."""

    plain: torch.Tensor  # col_indices / row_indices, as stored (int32 kept)
    values: torch.Tensor  # (nnz, *dense), connected to autograd
    size: tuple  # (rows, cols, *dense) of that row-major view
    compressed: torch.Tensor  # crow_indices / ccol_indices: the view's first_idx
    transposed: bool

    @property
    def indices(self) -> torch.Tensor:
        """(2, nnz) in the plain indices' dtype: each entry's compressed index (a segment id), then its plain one.
        Built on each access (2 x nnz integers): the callers that need only the offsets and the plain indices
        (a softmax along the compressed dim, a product without gradient) never pay for it."""
        rows = _ops.segment_ids(self.compressed, self.plain.numel())  # checks the offsets: from 0, rising, to nnz
        return torch.stack([rows.to(self.plain.dtype), self.plain])


def _compressed(op: str, s: torch.Tensor, validate: bool = True) -> _Compressed:
    layout = s.layout
    batch_dims = s.dim() - s.dense_dim() - 2
    if batch_dims:
        raise ValueError(f"torch_ragged.sparse.{op}: expected a 2-D {layout} matrix (plus dense dims), got shape "
                         f"{tuple(s.shape)} with {batch_dims} batch dim(s)")
    transposed = layout == torch.sparse_csc
    compressed, plain = (s.ccol_indices(), s.row_indices()) if transposed else (s.crow_indices(), s.col_indices())
    size = list(s.shape)
    if transposed:
        size[0], size[1] = size[1], size[0]
    if compressed.numel() != size[0] + 1:
        raise ValueError(f"torch_ragged.sparse.{op}: the compressed indices of a {layout} tensor of shape "
                         f"{tuple(s.shape)} must hold {size[0] + 1} offsets, got {compressed.numel()}")
    if validate:
        _check_compressed_invariants(op, s, compressed, plain, size[1])
    values = s.values() if s.requires_grad and torch.is_grad_enabled() else s.values().detach()
    return _Compressed(plain, values, tuple(size), compressed, transposed)


def _check_compressed_invariants(op: str, s: torch.Tensor, compressed, plain, plain_size: int) -> None:
    """torch's invariants of a CSR / CSC tensor's indices (what ``check_invariants=True`` checks), in one pass
    (sparse_compressed_violation): ValueError / IndexError naming op, the index tensor and the first entry off."""
    # kinds (sparse_compressed_violation, docs/sparse.md): 1-3 the offsets, 4 a plain index out of range, 5 one not
    # above the entry before it in its slice; 0 none
    kind, where, value = _ops.sparse_compressed_violation(compressed, plain, plain_size).tolist()
    if kind == 0:
        return
    transposed = s.layout == torch.sparse_csc
    compressed_name, plain_name = ("ccol_indices", "row_indices") if transposed else ("crow_indices", "col_indices")
    of = f"of a {s.layout} tensor of shape {tuple(s.shape)}"
    prefix = f"torch_ragged.sparse.{op}: "
    if kind == 4:
        raise IndexError(f"{prefix}{plain_name}[{where}] = {value} is out of range for the {plain_size} "
                         f"{'rows' if transposed else 'columns'} {of}")
    raise ValueError(prefix + {
        1: f"the {compressed_name} {of} must start at 0, got {value}",
        2: f"the {compressed_name} {of} must not decrease: {compressed_name}[{where}] = {value} is below the "
           "offset before it",
        3: f"the {compressed_name} {of} must end at nnz = {plain.numel()}, got {value}",
        5: f"the {plain_name} {of} must be strictly increasing within each compressed slice (torch's invariant): "
           f"{plain_name}[{where}] = {value} is not above the entry before it",
    }[kind])


def _row_major(op: str, s: torch.Tensor, validate: bool = True):
    """(indices, values) of the sparse matrix s, coalesced in row-major order, for COO, CSR (no sort) or CSC (one
    sort of the transposed entries)."""
    if s.layout == torch.sparse_coo:
        return _coalesced(op, s)
    c = _compressed(op, s, validate)
    if not c.transposed:
        return c.indices, c.values
    indices, values, _, _ = _ops.sparse_coalesce(c.indices.flip(0), c.values, s.shape, False, return_order=False)
    return indices, values


_BLOCKED = (torch.sparse_bsr, torch.sparse_bsc)


def to_sparse_csr(x: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """``x.to_sparse_csr()`` for a dense matrix or a sparse COO / CSC one (a CSR one is returned as it is).

    COO is coalesced first (duplicates summed in a fixed order, deterministically); CSC is re-sorted by rows on the
    coalesce core. Dense dims of a hybrid COO tensor stay dense dims of the CSR one; int32 CSC indices stay int32.

    Args:
        x: a dense matrix or a sparse COO / CSR / CSC tensor.
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> to_sparse_csr(torch.sparse_coo_tensor([[1, 0, 1], [2, 1, 2]], [1.0, 2.0, 3.0], (2, 3))).crow_indices()
    tensor([0, 1, 2])
    """
    return _ops.sparse_to_sparse_csr(x, validate)


def to_sparse_csc(x: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """``x.to_sparse_csc()`` for a dense matrix or a sparse COO / CSR one (see `to_sparse_csr`).

    Args:
        x: a dense matrix or a sparse COO / CSR / CSC tensor.
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> to_sparse_csc(torch.tensor([[0.0, 2.0], [3.0, 4.0]])).row_indices()
    tensor([1, 0, 1])
    """
    return _ops.sparse_to_sparse_csc(x, validate)


def to_sparse_coo(x: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """``x.to_sparse()``: a coalesced sparse COO tensor of a dense, CSR, CSC or uncoalesced COO one (CSR needs no
    sort).

    Args:
        x: a dense matrix or a sparse COO / CSR / CSC tensor.
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> to_sparse_coo(torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csc()).indices()
    tensor([[0, 1],
            [1, 0]])
    """
    return _ops.sparse_to_sparse_coo(x, validate)


def coalesce(s: torch.Tensor, *, validate: bool = True, return_order: bool = False):
    """``s.coalesce()``: unique, lexicographically sorted indices, duplicates summed in a fixed order (input order
    within a chunk of the segment core's reduction tree, a long run's chunk partials merged left to right).

    An input that is already sorted costs no sort, one that is already coalesced no copy of its structure.
    With ``return_order=True`` also returns ``(permutation, first_idx)``: sorted position -> input entry, and the
    runs of equal indices that were summed (offsets over the sorted positions), for reuse.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).
        return_order: also return the permutation (int64, nnz) that sorted the entries and the ``first_idx`` of the runs
            of equal indices (what was summed).

    >>> s = torch.sparse_coo_tensor([[1, 0, 1]], [3.0, 4.0, 5.0], (3,))
    >>> coalesce(s)
    tensor(indices=tensor([[0, 1]]),
           values=tensor([4., 8.]),
           size=(3,), nnz=2, layout=torch.sparse_coo)
    """
    if not (return_order or torch.compiler.is_compiling() or torch.compiler.is_exporting()):
        return _ops.sparse_coalesce(s, validate)
    # the triplet op here: a traced graph tracks an unbacked size (the unique count) only on dense tensors, so an op
    # returning a sparse tensor of unbacked nnz cannot be traced (torch.export refuses it); this one returns triplets
    _check_sparse("coalesce", s)
    indices, values, permutation, first_idx = _ops.sparse_coalesce(s._indices(), _values(s), s.shape, validate,
                                                                   return_order)
    result = _sparse(indices, values, s.shape, True)
    return (result, permutation, first_idx) if return_order else result


def sum(s: torch.Tensor, dim: int | list[int] | None = None,  # noqa: A001 (torch.sparse.sum)
        validate: bool = True) -> torch.Tensor:
    """``torch.sparse.sum(s, dim)``: a coalesced sparse COO tensor over the kept dims, or a dense tensor when every
    sparse dim is reduced (``dim=None`` reduces everything to a 0-d tensor). ``s`` may be CSR or CSC (torch's own
    sum takes those only with ``dim=None``).

    Reducing trailing sparse dims of a coalesced tensor needs no sort.

    Args:
        s: a sparse COO, CSR or CSC tensor.
        dim: the dims to reduce (an int or a list of ints; ``None``: all of them, a 0-d result).
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> s = torch.sparse_coo_tensor([[0, 0, 1], [0, 2, 2]], [1.0, 2.0, 3.0], (2, 3))
    >>> sum(s, 1)
    tensor(indices=tensor([[0, 1]]),
           values=tensor([3., 3.]),
           size=(2,), nnz=2, layout=torch.sparse_coo)
    """
    dims: list[int] | None = None
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
    return _ops.sparse_sum(s, dims, validate)


def sparse_mask(dense: torch.Tensor, mask: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """``dense.sparse_mask(mask)``: the values of ``dense`` at ``mask``'s indices (``mask``'s values are ignored),
    in the mask's layout (COO, CSR or CSC).

    Args:
        dense: dense tensor of the mask's shape: the values to read.
        mask: sparse COO / CSR / CSC tensor: where to read (its values are ignored).
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> mask = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 1.0], (2, 2))
    >>> sparse_mask(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), mask).to_dense()
    tensor([[0., 2.],
            [3., 0.]])
    """
    return _ops.sparse_sparse_mask(dense, mask, validate)


def to_dense(s: torch.Tensor, validate: bool = True) -> torch.Tensor:
    """``s.to_dense()`` of a COO (duplicates summed deterministically), CSR, CSC, BSR or BSC tensor.

    Args:
        s: a sparse COO, CSR, CSC, BSR or BSC tensor.
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> to_dense(torch.sparse_coo_tensor([[1, 1]], [3, 4], (3,)))
    tensor([0, 7, 0])
    """
    return _ops.sparse_to_dense(s, validate)


def to_sparse(dense: torch.Tensor, sparse_dim: int | None = None) -> torch.Tensor:
    """``dense.to_sparse(sparse_dim)``: the entries that are not exactly zero, coalesced.

    Args:
        dense: dense tensor to convert.
        sparse_dim: the number of leading dims to make sparse (``None``: all of them).

    >>> to_sparse(torch.tensor([[0.0, 2.0], [0.0, 0.0]]))
    tensor(indices=tensor([[0],
                           [1]]),
           values=tensor([2.]),
           size=(2, 2), nnz=1, layout=torch.sparse_coo)
    """
    return _ops.sparse_to_sparse(dense, sparse_dim)


def index_select(s: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``s.index_select(dim, index)`` for a sparse or dense dim; repeated positions repeat entries.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        dim: the dim to select along (sparse or dense).
        index: 1-D integer tensor of positions along ``dim``.

    >>> s = torch.sparse_coo_tensor([[0, 2]], [5.0, 6.0], (3,))
    >>> index_select(s, 0, torch.tensor([2, 2, 0])).to_dense()
    tensor([6., 6., 5.])
    """
    return _ops.sparse_index_select(s, dim, index_tensor("torch_ragged.sparse.index_select", "index", index))


def softmax(s: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.sparse.softmax(s, dim, dtype)``: each slice along ``dim`` normalised over its specified entries
    (unspecified entries count as -inf); the result keeps the (coalesced) sparsity pattern.

    Along a sparse dim the pools are found by a sort of the other indices (none for the last sparse dim of a
    coalesced tensor); along a dense dim it is a dense softmax of the values. Half and bfloat16 accumulate in float.
    A CSR or CSC ``s`` (which torch refuses) gives a result of its layout; along its compressed dim the pools are
    its segments.

    Args:
        s: a sparse COO tensor, or a CSR / CSC matrix (a result of its layout).
        dim: the dim to normalise along (sparse or dense).
        dtype: the dtype to compute and return in (``None``: ``s``'s).

    >>> s = torch.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [1.0, 1.0, 5.0], (2, 3))
    >>> softmax(s, 1).to_dense()
    tensor([[0.5000, 0.0000, 0.5000],
            [0.0000, 1.0000, 0.0000]])
    """
    return _ops.sparse_softmax(s, dim, dtype)


def log_softmax(s: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.sparse.log_softmax(s, dim, dtype)`` (see `softmax`).

    Args:
        s: a sparse COO tensor, or a CSR / CSC matrix (a result of its layout).
        dim: the dim to normalise along (sparse or dense).
        dtype: the dtype to compute and return in (``None``: ``s``'s).

    >>> s = torch.sparse_coo_tensor([[0, 1]], [0.0, 0.0], (3,))
    >>> log_softmax(s, 0).values()
    tensor([-0.6931, -0.6931])
    """
    return _ops.sparse_log_softmax(s, dim, dtype)


# ---- elementwise between sparse tensors, transpose, cat: on the coalesce core ----

def add(a: torch.Tensor, b: torch.Tensor, alpha: int | float = 1) -> torch.Tensor:
    """``torch.add(a, b, alpha=alpha)`` of two sparse COO tensors of one shape: the union of their patterns; with
    one dense operand (either side; torch takes only a dense ``a``) the result is dense.

    The entries of both are concatenated (b's scaled by ``alpha``) and coalesced: each index's values are summed in
    a fixed order (a's entries, then b's), so the result is deterministic, and it comes back coalesced (torch's
    own result is an uncoalesced concatenation with the same values). dtypes promote as torch's do. Differentiable
    in both values.

    Args:
        a: sparse COO or dense tensor (at least one of ``a`` and ``b`` sparse).
        b: sparse COO or dense tensor of ``a``'s shape.
        alpha: the multiplier of ``b`` (a number).

    >>> a = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (3,))
    >>> b = torch.sparse_coo_tensor([[2, 1]], [10.0, 20.0], (3,))
    >>> add(a, b, alpha=2).to_dense()
    tensor([ 1., 40., 22.])
    """
    return _ops.sparse_add(a, b, alpha=alpha)


def sub(a: torch.Tensor, b: torch.Tensor, alpha: int | float = 1) -> torch.Tensor:
    """``torch.sub(a, b, alpha=alpha)`` of two sparse COO tensors: `add` of ``-alpha * b``.

    Args:
        a: sparse COO or dense tensor (at least one of ``a`` and ``b`` sparse).
        b: sparse COO or dense tensor of ``a``'s shape.
        alpha: the multiplier of ``b`` (a number).

    >>> a = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (3,))
    >>> sub(a, a).to_dense()
    tensor([0., 0., 0.])
    """
    return _ops.sparse_sub(a, b, alpha=alpha)


def mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.mul(a, b)`` of two sparse COO tensors of one shape: the intersection of their patterns; with one
    dense operand of the same shape (either side), the sparse one's (coalesced) pattern times the dense values there;
    with a scalar (number or 0-d tensor), the values scaled, the entries and the coalesced flag kept.

    Both are coalesced; an index stored in both keeps ``a_value * b_value``, every other index is dropped (as
    torch's result). Coalesced, deterministic, differentiable in both values.

    Args:
        a: sparse COO tensor, or a dense tensor of ``b``'s shape when ``b`` is sparse.
        b: a sparse COO tensor or a dense tensor of ``a``'s shape, or a scalar (number or 0-d tensor).

    >>> a = torch.sparse_coo_tensor([[0, 2]], [3.0, 2.0], (3,))
    >>> b = torch.sparse_coo_tensor([[2, 1]], [10.0, 20.0], (3,))
    >>> mul(a, b).to_dense()
    tensor([ 0.,  0., 20.])
    """
    if not torch.jit.is_scripting():
        if not isinstance(a, torch.Tensor):  # a number times a sparse tensor: the op takes the number second
            return _ops.sparse_mul(b, a)
    return _ops.sparse_mul(a, b)


# ---- elementwise functions of the values that keep the pattern (f(0) = 0) ----

def _pattern_keeping(name: str, linear: bool):
    packet = getattr(_ops, "sparse_" + name)  # the op: checks, coalescing and autograd in C++

    def op(s: torch.Tensor) -> torch.Tensor:
        return packet(s)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"``torch.{name}(s)`` of a sparse COO tensor: {name} of its values on its pattern (``{name}(0) = "
                  f"0``){'' if linear else ', duplicates summed first (the result is coalesced)'}.\n\n"
                  f"Args:\n    s: a sparse COO tensor (any sparse and dense dims) of a dtype torch.{name} takes.")
    return op


# the unary functions torch takes on sparse COO tensors, each mapping 0 to 0
neg = _pattern_keeping("neg", True)
abs = _pattern_keeping("abs", False)  # noqa: A001 (torch's name)
asin = _pattern_keeping("asin", False)
asinh = _pattern_keeping("asinh", False)
atan = _pattern_keeping("atan", False)
atanh = _pattern_keeping("atanh", False)
ceil = _pattern_keeping("ceil", False)
deg2rad = _pattern_keeping("deg2rad", False)
erf = _pattern_keeping("erf", False)
erfinv = _pattern_keeping("erfinv", False)
expm1 = _pattern_keeping("expm1", False)
floor = _pattern_keeping("floor", False)
frac = _pattern_keeping("frac", False)
log1p = _pattern_keeping("log1p", False)
rad2deg = _pattern_keeping("rad2deg", False)
relu = _pattern_keeping("relu", False)
round = _pattern_keeping("round", False)  # noqa: A001 (torch's name)
sgn = _pattern_keeping("sgn", False)
sign = _pattern_keeping("sign", False)
signbit = _pattern_keeping("signbit", False)
sin = _pattern_keeping("sin", False)
sinh = _pattern_keeping("sinh", False)
sqrt = _pattern_keeping("sqrt", False)
square = _pattern_keeping("square", False)
tan = _pattern_keeping("tan", False)
tanh = _pattern_keeping("tanh", False)
trunc = _pattern_keeping("trunc", False)


def pow(s: torch.Tensor, exponent: int | float) -> torch.Tensor:  # noqa: A001 (torch.pow)
    """``torch.pow(s, exponent)`` for a positive scalar exponent (0 ** exponent = 0 keeps the pattern; torch refuses
    exponent 0 too), duplicates summed first.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        exponent: a positive number.

    >>> pow(torch.sparse_coo_tensor([[1, 0, 1]], [1.0, 3.0, 2.0], (3,)), 2).values()
    tensor([9., 9.])
    """
    return _ops.sparse_pow(s, exponent)


def div(s: torch.Tensor, divisor: torch.Tensor, rounding_mode: str | None = None) -> torch.Tensor:
    """``s / divisor`` for a scalar (number or 0-d tensor) divisor: the values divided, the pattern kept (a
    rounding mode makes it non-linear: duplicates summed first, as torch).

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        divisor: a number or a 0-d tensor.
        rounding_mode: ``None`` (true division), ``"trunc"`` or ``"floor"``, as torch.div.

    >>> div(torch.sparse_coo_tensor([[1, 0]], [4.0, 6.0], (3,)), 2).to_dense()
    tensor([3., 2., 0.])
    """
    return _ops.sparse_div(s, divisor, rounding_mode=rounding_mode)


def unsqueeze(s: torch.Tensor, dim: int) -> torch.Tensor:
    """``s.unsqueeze(dim)``: a new sparse dim of size 1 (an index row of zeros) where ``dim`` falls among the
    sparse dims, or a new dense dim of the values after them. Keeps the coalesced flag.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        dim: where the new dim of size 1 goes (0 to ``s.dim()``; negative counts from the end).

    >>> unsqueeze(torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (3,)), 0)._indices()
    tensor([[0, 0],
            [0, 2]])
    """
    return _ops.sparse_unsqueeze(s, dim)


def stack(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
    """``torch.stack`` of sparse COO tensors of one shape: `unsqueeze` then `cat` along the new dim (a sparse dim,
    or a dense one when ``dim`` is past the sparse dims). Flagged as `cat` flags it (coalesced along dim 0 of
    coalesced tensors, uncoalesced otherwise, as torch's).

    Args:
        tensors: a sequence of sparse COO tensors with the same sparse / dense dims and dtype.
        dim: where the new dim goes.

    >>> a = torch.sparse_coo_tensor([[1]], [5.0], (2,))
    >>> stack([a, a]).to_dense()
    tensor([[0., 5.],
            [0., 5.]])
    """
    return _ops.sparse_stack(tensors, dim)


def select(s: torch.Tensor, dim: int, index: int) -> torch.Tensor:
    """``s.select(dim, index)`` (``s[index]`` for dim 0): along a sparse dim, the entries at ``index`` without that
    dim (a dense tensor, their sum, when it was the only sparse dim); along a dense dim, the values' slice. A
    coalesced input gives a coalesced result (torch's is flagged uncoalesced).

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        dim: the dim to select along.
        index: the position along ``dim`` (an int; negative counts from the end).

    >>> s = torch.sparse_coo_tensor([[0, 2, 2], [1, 0, 1]], [1.0, 2.0, 3.0], (3, 2))
    >>> select(s, 0, 2).to_dense()
    tensor([2., 3.])
    """
    return _ops.sparse_select(s, dim, index)


def narrow_copy(s: torch.Tensor, dim: int, start: int, length: int) -> torch.Tensor:
    """``s.narrow_copy(dim, start, length)``: the entries with ``start <= index < start + length`` along a sparse
    dim, renumbered from 0, or the values' slice along a dense dim. Keeps the coalesced flag.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        dim: the dim to narrow.
        start: the first position kept (an int; negative counts from the end).
        length: how many positions to keep (an int >= 0).

    >>> s = torch.sparse_coo_tensor([[0, 2, 2], [1, 0, 1]], [1.0, 2.0, 3.0], (3, 2))
    >>> narrow_copy(s, 0, 1, 2).to_dense()
    tensor([[0., 0.],
            [2., 3.]])
    """
    return _ops.sparse_narrow_copy(s, dim, start, length)


def transpose(s: torch.Tensor, dim0: int, dim1: int) -> torch.Tensor:
    """``s.transpose(dim0, dim1)``: two sparse dims (their index rows swapped, the entries left in their order, as
    torch's: flagged uncoalesced unless empty) or two dense dims (the values transposed; torch refuses those). A
    sparse dim with a dense one is refused. `coalesce` the result where sorted entries are needed.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        dim0: one of the two dims to swap.
        dim1: the other.

    >>> s = torch.sparse_coo_tensor([[0, 1], [2, 0]], [1.0, 2.0], (2, 3))
    >>> transpose(s, 0, 1)._indices()
    tensor([[2, 0],
            [0, 1]])
    """
    return _ops.sparse_transpose(s, dim0, dim1)


def permute(s: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """``s.permute(dims)``: the sparse dims among themselves (their index rows reordered, the entries left in their
    order, as torch's: flagged uncoalesced unless empty) and the dense dims among themselves (the values permuted;
    the flag kept). `coalesce` the result where sorted entries are needed.

    Args:
        s: a sparse COO tensor (any sparse and dense dims).
        dims: the new order of the dims (a permutation of ``range(s.dim())``); sparse dims stay before dense ones.

    >>> s = torch.sparse_coo_tensor([[0, 1], [2, 0], [1, 1]], [1.0, 2.0], (2, 3, 2))
    >>> permute(s, (2, 0, 1)).coalesce().indices()
    tensor([[1, 1],
            [0, 1],
            [2, 0]])
    """
    return _ops.sparse_permute(s, dims)


def t(s: torch.Tensor) -> torch.Tensor:
    """``s.t()``: the transpose of a sparse matrix (see `transpose`; a 1-D or 0-d tensor as it is).

    Args:
        s: a sparse COO tensor of at most 2 dims.

    >>> t(torch.sparse_coo_tensor([[0], [1]], [5.0], (2, 3)))._indices()
    tensor([[1],
            [0]])
    """
    return _ops.sparse_t(s)


def cat(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
    """``torch.cat`` of sparse COO tensors. Along a sparse dim each tensor's indices are offset by the sizes before
    it; along a dense dim each tensor's values fill their own slice of the joined dim, zeros elsewhere (a position
    two tensors hold appears twice: `coalesce` sums it into the union). As torch's, the result is the tensors'
    entries one after another, flagged uncoalesced -- except along dim 0 (a sparse dim) of coalesced tensors, whose
    concatenation is already sorted and is flagged coalesced. The other dims must agree.

    Args:
        tensors: a sequence of sparse COO tensors with the same sparse / dense dims and dtype.
        dim: the dim to join along; the other dims must agree.

    >>> a = torch.sparse_coo_tensor([[0], [1]], [1.0], (1, 2))
    >>> cat([a, a], 0).to_dense()
    tensor([[0., 1.],
            [0., 1.]])
    """
    return _ops.sparse_cat(tensors, dim)


# ---- matrix products ----

class SparsePlan:
    """The structure of a 2-D sparse matrix S, built once for products with it (`plan`).

    ``indices`` are S's coalesced indices; ``row_first_idx`` / ``col_first_idx`` its CSR row and CSC column
    offsets; ``col_order`` sorts its entries by column (stable), ``row_order`` is the inverse permutation. The plan
    holds no values: multiply by the same pattern with new values every step and the sort is paid once.

    Args:
        indices: (2, nnz) int64 / int32 coalesced indices of the pattern.
        size: the matrix's size ``(n, m)``.
        row_first_idx: (n + 1,) int64: the CSR offsets of the rows.
        col_first_idx: (m + 1,) int64: the CSC offsets of the columns.
        col_order: (nnz,) int64: the entries in column order (a permutation).
        row_order: (nnz,) int64: the inverse permutation of ``col_order``.
    """

    def __init__(self, indices, size, row_first_idx, col_first_idx, col_order, row_order):
        self.indices, self.size = indices, tuple(size)
        self.row_first_idx, self.col_first_idx = row_first_idx, col_first_idx
        self.col_order, self.row_order = col_order, row_order

    def tensors(self):
        """``(indices, row_first_idx, col_first_idx, col_order, row_order)``: the plan's tensors, in the order
        ``SparsePlan(indices, size, *rest)`` takes them after the size."""
        return self.indices, self.row_first_idx, self.col_first_idx, self.col_order, self.row_order

    def mm(self, values: torch.Tensor, dense: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        """S @ dense (Sᵀ @ dense with ``transpose``) for S = this pattern with these ``values`` (coalesced order).

        The values' gradient comes straight from the op (an SDDMM); a torch sparse tensor built from values that
        require grad would add torch's own sparse autograd (it coalesces the sparse gradient it builds).

        Args:
            values: ``(nnz, *dense)`` tensor: the values, in the pattern's (coalesced) order.
            dense: dense matrix (m, k), or (n, k) with ``transpose``.
            transpose: multiply by the transposed matrix instead.

        >>> s = torch.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
        >>> plan(s).mm(torch.tensor([2.0, 3.0]), torch.eye(2))
        tensor([[0., 2.],
                [3., 0.]])
        """
        return _ops.sparse_mm(values, dense, *self.tensors(), transpose, False)  # built by plan(): consistent

    def to(self, device) -> "SparsePlan":
        """The plan with its tensors on ``device``.

        Args:
            device: where to move the plan's tensors.
        """
        indices, *rest = (t.to(device) for t in self.tensors())
        return SparsePlan(indices, self.size, *rest)

    def __repr__(self):
        return f"SparsePlan(size={self.size}, nnz={self.indices.shape[1]}, device={self.indices.device})"

    def __getstate__(self):
        return {"indices": self.indices, "size": self.size, "rest": self.tensors()[1:]}

    def __setstate__(self, state):
        """A loaded plan is checked against its indices before `mm` trusts it (the op's validate=True check:
        offsets, orders and ranges, O(nnz) once)."""
        where = "torch_ragged.SparsePlan"
        if not isinstance(state, dict) or set(state) != {"indices", "size", "rest"} or len(state["rest"]) != 4:
            raise TypeError(f"{where}: a pickled SparsePlan holds {{'indices', 'size', 'rest'}} (4 tensors)")
        size, indices, rest = state["size"], state["indices"], state["rest"]
        if not (isinstance(size, tuple) and len(size) == 2 and all(isinstance(n, int) and n >= 0 for n in size)):
            raise ValueError(f"{where}: size must be (rows, cols), got {size!r}")
        if not all(isinstance(t, torch.Tensor) for t in (indices, *rest)):
            raise TypeError(f"{where}: the plan's parts must be tensors")
        if indices.dim() != 2 or indices.shape[0] != 2 or rest[0].numel() != size[0] + 1 or \
                rest[1].numel() != size[1] + 1:
            raise ValueError(f"{where}: indices (2, nnz) and offsets of {size[0] + 1} and {size[1] + 1} entries "
                             f"expected for size {size}")
        try:  # the product op's own check of a plan against its indices, on empty operands
            _ops.sparse_mm(indices.new_zeros(indices.shape[1], dtype=torch.float32),
                           indices.new_zeros(size[1], 0, dtype=torch.float32), indices, *rest, False, True)
        except (ValueError, TypeError, IndexError) as error:
            raise ValueError(f"{where}: the loaded plan does not fit its indices: {error}") from None
        self.__init__(indices, size, *rest)


torch.serialization.add_safe_globals([SparsePlan])


def _coalesced(op: str, s: torch.Tensor):
    """(indices, values) of s coalesced; values connected to autograd."""
    _check_sparse(op, s)
    if s.is_coalesced():
        return s._indices(), _values(s)
    indices, values, _, _ = _ops.sparse_coalesce(s._indices(), _values(s), s.shape, return_order=False)
    return indices, values


def plan(s: torch.Tensor) -> SparsePlan:
    """The reusable structure of a 2-D sparse matrix (COO, CSR or CSC) for `mm` / `addmm` (its CSR and CSC orders).

    Args:
        s: a 2-D sparse matrix (COO, CSR or CSC).

    >>> s = torch.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [1.0, 2.0, 3.0], (2, 3))
    >>> p = plan(s)
    >>> mm(s, torch.eye(3), plan=p)
    tensor([[0., 0., 1.],
            [2., 0., 3.]])
    """
    _check_matrix("plan", s)
    if s.dim() != 2:
        raise ValueError(f"torch_ragged.sparse.plan: S must be a 2-D sparse matrix, got shape {tuple(s.shape)}")
    indices, _ = _row_major("plan", s.detach())
    return SparsePlan(indices, s.shape, *_ops.sparse_mm_plan(indices, s.shape))


def _check_plan_fits(op: str, s: torch.Tensor, indices, given: SparsePlan, validate: bool) -> None:
    if tuple(given.size) != tuple(s.shape) or given.indices.shape != indices.shape or (
            validate and not torch.equal(given.indices, indices)):
        raise ValueError(f"torch_ragged.sparse.{op}: the plan was built for another sparse matrix "
                         f"({given!r}; S has size {tuple(s.shape)} and {indices.shape[1]} stored entries)")


def _is_sparse(x) -> bool:
    return isinstance(x, torch.Tensor) and x.layout in (torch.sparse_coo, *_COMPRESSED, *_BLOCKED)


def mm(a: torch.Tensor, b: torch.Tensor, *, plan: SparsePlan | None = None, validate: bool = True) -> torch.Tensor:
    """``torch.sparse.mm``: sparse @ dense, dense @ sparse (through the transposed plan), or sparse @ sparse.

    Sparse x dense is a row-parallel weighted gather-sum on the segment core; its backward to the dense operand
    multiplies by Sᵀ through the plan's column order (no sort, no atomics) and to S's values is an SDDMM (one dot
    product per stored entry) -- never a dense n x m matrix. ``plan`` (from `plan`) skips the sort; with
    ``validate`` it is checked against S (an O(nnz) comparison). Sparse x sparse returns a coalesced sparse matrix.

    The sparse operands may be COO, CSR or CSC. A CSR matrix's ``crow_indices`` are the row segments as stored; a
    CSC matrix is the transpose of the CSR matrix its ``ccol_indices`` describe, multiplied through the transposed
    product (no conversion). A BSR / BSC matrix times a dense one multiplies each block by its slice of the dense
    operand and sums each block row on the segment core (BSC and dense @ BSR re-sort the blocks first). Sparse x
    sparse is COO when both are COO, CSC when both are CSC (as torch.sparse.mm), else CSR (torch refuses a COO with
    a compressed one).

    Args:
        a: sparse (COO / CSR / CSC) or dense matrix.
        b: dense or sparse matrix, at least one of the two sparse.
        plan: a `SparsePlan` of the sparse operand's pattern (from `plan`), reused across calls; ``None``: built for
            this call.
        validate: check the indices first (in range; sorted where the input is flagged coalesced); ``False`` trusts them
            and skips the check (and its host read on a GPU).

    >>> s = torch.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> mm(s, torch.tensor([[1.0], [10.0]]))
    tensor([[20.],
            [ 3.]])
    """
    if plan is None or (_is_sparse(a) and _is_sparse(b)):  # sparse @ sparse takes no plan
        return _ops.sparse_mm(a, b, validate)
    s, dense = (a, b) if _is_sparse(a) else (b, a)
    _check_matrix("mm", s)
    if s.dim() != 2 or not isinstance(dense, torch.Tensor) or dense.dim() != 2:
        shape = tuple(dense.shape) if isinstance(dense, torch.Tensor) else type(dense).__name__
        raise ValueError(f"torch_ragged.sparse.mm: expected 2-D operands, got {tuple(s.shape)} ({s.layout}) and "
                         f"{shape}")
    dense_on_left = s is b
    indices, values = _row_major("mm", s, validate)
    _check_plan_fits("mm", s, indices, plan, validate)
    operand = dense.t().contiguous() if dense_on_left else dense
    product = _ops.sparse_mm(values, operand, *plan.tensors(), dense_on_left, False)
    return product.t() if dense_on_left else product


def addmm(input: torch.Tensor, s: torch.Tensor, dense: torch.Tensor, *, beta=1, alpha=1,  # noqa: A002 (torch's name)
          plan: SparsePlan | None = None) -> torch.Tensor:
    """``torch.sparse.addmm``: ``beta * input + alpha * (s @ dense)``.

    Args:
        input: the tensor added, of the product's shape (dense for addmm, sparse COO for sspaddmm).
        s: sparse matrix (COO, CSR or CSC), (n, m).
        dense: dense matrix (m, k).
        beta: the multiplier of ``input``.
        alpha: the multiplier of the product.
        plan: a `SparsePlan` of the sparse operand's pattern (from `plan`), reused across calls; ``None``: built for
            this call.

    >>> s = torch.sparse_coo_tensor([[0], [0]], [2.0], (1, 1))
    >>> addmm(torch.ones(1, 1), s, torch.ones(1, 1), beta=0.5, alpha=3)
    tensor([[6.5000]])
    """
    if plan is None:
        return _ops.sparse_addmm(input, s, dense, beta=beta, alpha=alpha)
    product = mm(s, dense, plan=plan)
    if not isinstance(input, torch.Tensor) or not _broadcasts_to(input.shape, product.shape):
        shape = tuple(input.shape) if isinstance(input, torch.Tensor) else type(input).__name__
        raise ValueError(f"torch_ragged.sparse.addmm: input must broadcast to the product's shape "
                         f"{tuple(product.shape)}, got {shape}")
    if alpha != 1:  # x * 1 is x, bit for bit: the pass is skipped, not the rounding
        product = product * alpha
    if beta == 0:  # torch ignores input then (NaN and inf included), and gives it a zero gradient
        return product + torch.where(torch.zeros((), dtype=torch.bool, device=input.device), input, 0)
    return product + (input if beta == 1 else input * beta)


def _broadcasts_to(shape, target) -> bool:
    """Whether ``shape`` broadcasts to ``target`` (torch's rule), without torch.broadcast_shapes' symbolic-shape
    machinery (~20 us a call: most of a tiny addmm)."""
    if len(shape) > len(target):
        return False
    return all(size == 1 or size == wanted for size, wanted in
               zip(reversed(shape), reversed(target), strict=False))  # target may have more leading dims


def bmm(s: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """``torch.bmm`` of a 3-D sparse (batch, n, m) and a dense (batch, m, k): a COO tensor with the batch as its
    first sparse dim, or a batched CSR tensor (``crow_indices`` (batch, n + 1), the same nnz per matrix; torch's
    own bmm refuses CSR on the CPU).

    The batch is a block-diagonal 2-D matrix (batch * n, batch * m): one product, balanced over all entries.

    Args:
        s: 3-D sparse tensor (batch, n, m): COO with the batch as its first sparse dim, or batched CSR.
        dense: dense tensor (batch, m, k).

    >>> s = torch.sparse_coo_tensor([[0, 1], [0, 1], [1, 0]], [2.0, 3.0], (2, 2, 2))
    >>> bmm(s, torch.ones(2, 2, 1)).squeeze(-1)
    tensor([[2., 0.],
            [0., 3.]])
    """
    return _ops.sparse_bmm(s, dense)


def mv(s: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
    """``torch.mv``: a sparse matrix (COO, CSR or CSC) times a dense vector.

    Args:
        s: sparse matrix (COO, CSR or CSC), (n, m).
        vector: dense vector (m,).

    >>> mv(torch.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2)), torch.tensor([1.0, 10.0]))
    tensor([20.,  3.])
    """
    return _ops.sparse_mv(s, vector)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul`` with a sparse operand: matrix @ vector (`mv`), vector @ matrix, matrix @ matrix (`mm`,
    either side sparse, or both), and a 3-D sparse batch @ a 3-D dense one (`bmm`).

    Args:
        a: vector, matrix or 3-D batch (either operand sparse).
        b: vector, matrix or 3-D batch.

    >>> s = torch.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> matmul(torch.tensor([1.0, 10.0]), s)
    tensor([30.,  2.])
    """
    return _ops.sparse_matmul(a, b)


def hspmm(s: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """``torch.hspmm``: S @ D as a hybrid sparse tensor (sparse_dim 1): one dense row of the product for every row
    of S that holds an entry, coalesced.

    Args:
        s: sparse COO matrix (n, m).
        dense: dense matrix (m, k).

    >>> s = torch.sparse_coo_tensor([[0, 2], [1, 0]], [1.0, 2.0], (4, 2))
    >>> hspmm(s, torch.ones(2, 3)).indices()
    tensor([[0, 2]])
    """
    return _ops.sparse_hspmm(s, dense)


def smm(s: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """``torch.smm``: S @ D as a sparse COO matrix holding every column of each row of S that has an entry
    (`hspmm`'s rows spread over their columns), coalesced.

    Args:
        s: sparse COO matrix (n, m).
        dense: dense matrix (m, k).

    >>> s = torch.sparse_coo_tensor([[0, 2], [1, 0]], [1.0, 2.0], (4, 2))
    >>> smm(s, torch.ones(2, 3)).to_dense()
    tensor([[1., 1., 1.],
            [0., 0., 0.],
            [2., 2., 2.],
            [0., 0., 0.]])
    """
    return _ops.sparse_smm(s, dense)


def sspaddmm(input: torch.Tensor, s: torch.Tensor, dense: torch.Tensor,  # noqa: A002 (torch's name)
             beta: int | float = 1, alpha: int | float = 1) -> torch.Tensor:
    """``torch.sspaddmm``: ``beta * input + alpha * (s @ dense)`` with a sparse ``input``, as a sparse matrix (the
    union of input's pattern and `smm`'s), coalesced.

    Args:
        input: the tensor added, of the product's shape (dense for addmm, sparse COO for sspaddmm).
        s: sparse COO matrix (n, m).
        dense: dense matrix (m, k).
        beta: the multiplier of ``input``.
        alpha: the multiplier of the product.

    >>> s = torch.sparse_coo_tensor([[0], [1]], [2.0], (2, 2))
    >>> sspaddmm(torch.sparse_coo_tensor([[1], [0]], [5.0], (2, 1)), s, torch.ones(2, 1), beta=2).to_dense()
    tensor([[ 2.],
            [10.]])
    """
    return _ops.sparse_sspaddmm(input, s, dense, beta=beta, alpha=alpha)


# ---- torch's own sparse ops on these kernels ----

class accelerate:  # noqa: N801 (used like torch.set_grad_enabled: a call and a context manager)
    """Runs torch's own sparse COO ops on this library's kernels: ``x.coalesce()``, ``x.to_dense()``,
    ``torch.sparse.softmax`` / ``log_softmax`` (and their backwards), ``torch.sparse.sum`` over dims,
    ``torch.mm`` / ``torch.sparse.mm`` / ``@`` of a sparse matrix with a dense or a sparse one, ``torch.addmm``,
    ``torch.bmm``, ``x.index_select`` and ``x.sparse_mask(mask)``, on the CPU and CUDA.

    ``accelerate()`` turns it on for the process, ``accelerate(False)`` off; as a context manager it restores the
    previous state on exit. The first call registers the kernels once, for the life of the process (make it before
    starting threads that use torch's sparse ops); switching is then a process-wide flag the kernels read, safe
    while other threads call them, and seen by every thread (autograd's backward threads included). The kernels
    replace torch's below its autograd, so gradients are torch's formulas (which call these ops again); arguments
    these kernels do not take (a hybrid operand of mm, complex or integer products, complex32) go to the torch
    kernel they replaced. Results are torch's in layout, flags and dtype; duplicates are summed in a fixed order
    (deterministic). C++: ``torch_ragged::accelerate_torch_sparse(bool)``.

    Args:
        enabled: ``True`` turns the switch on for the block (or from now on when not used as a context manager),
            ``False`` off.

    >>> s = torch.sparse_coo_tensor([[1, 0, 1]], [1.0, 2.0, 3.0], (2,))
    >>> with accelerate():
    ...     s.coalesce().values()
    tensor([2., 4.])
    >>> is_accelerated()
    False
    """

    def __init__(self, enabled: bool = True):
        with warnings.catch_warnings():  # torch warns once that a kernel of an aten op is overridden: intended
            warnings.filterwarnings("ignore", message=".*Overriding a previously registered kernel")
            self._previous = _ops.accelerate_torch_sparse(bool(enabled))

    def __enter__(self) -> "accelerate":
        return self

    def __exit__(self, *exc_info) -> None:
        _ops.accelerate_torch_sparse(self._previous)


def is_accelerated() -> bool:
    """Whether `accelerate` is in effect.

    >>> is_accelerated()
    False
    """
    return _ops.torch_sparse_accelerated()


# ---- fake kernels (torch.compile / torch.export): the number of unique entries is data-dependent ----

@register_fake("torch_ragged::sparse_compressed_violation")
def _sparse_compressed_violation_fake(compressed_indices, plain_indices, plain_size):
    return torch.empty(3, dtype=torch.long)  # (kind, position, value), on the CPU


@register_fake("torch_ragged::sparse_row_offsets")
def _sparse_row_offsets_fake(rows, num_rows):
    return rows.new_empty((num_rows + 1,), dtype=torch.long)


@register_fake("torch_ragged::sparse_intersect")
def _sparse_intersect_fake(a_keys, b_keys):
    torch._check(a_keys.dim() == 1 and b_keys.dim() == 1,
                 lambda: "torch_ragged.sparse_intersect: a_keys and b_keys must be 1-D")
    shared = torch.library.get_ctx().new_dynamic_size()
    return a_keys.new_empty((shared,), dtype=torch.long), a_keys.new_empty((shared,), dtype=torch.long)


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


@register_fake("torch_ragged::sparse_mm")
def _sparse_mm_fake(values, dense, indices, row_first_idx, col_first_idx, col_order, row_order, transpose=False,
                    validate=True):
    rows = (col_first_idx if transpose else row_first_idx).shape[0] - 1
    return dense.new_empty((rows, *dense.shape[1:]))


@register_fake("torch_ragged::sparse_sddmm")
def _sparse_sddmm_fake(a, b, indices, row_first_idx, col_first_idx, col_order, row_order, transpose=False,
                       validate=True):
    return a.new_empty((indices.shape[1],))


@register_fake("torch_ragged::sparse_spgemm")
def _sparse_spgemm_fake(a_indices, a_values, b_indices, b_values, a_size, b_size):
    torch._check(len(a_size) == 2 and len(b_size) == 2,
                 lambda: "torch_ragged.sparse_spgemm: A and B must be 2-D sparse matrices")
    nnz = torch.library.get_ctx().new_dynamic_size()
    return a_indices.new_empty((2, nnz), dtype=torch.long), a_values.new_empty((nnz, *a_values.shape[1:]))


@register_fake("torch_ragged::sparse_spgemm_csr")
def _sparse_spgemm_csr_fake(a_crow_indices, a_col_indices, a_values, b_crow_indices, b_col_indices, b_values,
                            a_size, b_size):
    torch._check(len(a_size) == 2 and len(b_size) == 2,
                 lambda: "torch_ragged.sparse_spgemm_csr: A and B must be 2-D sparse matrices")
    nnz = torch.library.get_ctx().new_dynamic_size()
    return (a_crow_indices.new_empty((a_size[0] + 1,)), a_crow_indices.new_empty((nnz,)),
            a_values.new_empty((nnz,)))


@register_fake("torch_ragged::sparse_coalesce")
def _sparse_coalesce_fake(indices, values, size, validate=True, return_order=True):
    unique = torch.library.get_ctx().new_dynamic_size()
    return (indices.new_empty((indices.shape[0], unique)), values.new_empty((unique, *values.shape[1:])),
            indices.new_empty((indices.shape[1] if return_order else 0,), dtype=torch.long),
            indices.new_empty((unique + 1 if return_order else 0,), dtype=torch.long))
