"""torch_scatter's API on the segment core: the same names, signatures and conventions, deterministic.

Code written against torch_scatter (or PyG's ``torch_geometric.utils``) ports by changing one import::

    import torch_ragged.scatter_compat as torch_scatter

Every function takes torch_scatter's arguments in its order: ``out`` (written in place and returned, its values
combined with src's as torch_scatter combines them: added for sums, multiplied for ``mul``, the better of the two
for max / min), ``dim_size``, an ``index`` broadcast to ``src`` as torch_scatter broadcasts it (int64 or int32),
and its conventions: positions no element reaches are 0 (1 for ``mul``), their ``arg`` is ``src.size(dim)``, integer
means of ``scatter_mean`` round toward minus infinity and those of ``segment_*_csr`` toward zero. Where this
module differs: sums are deterministic on every device (torch_scatter's GPU atomics are not); NaN wins max / min
(torch's rule; torch_scatter's CPU skips NaN); ``scatter_logsumexp`` of a position holding only -inf is -inf
(torch.logsumexp's); ``gather_csr`` leaves rows no segment covers 0. The library's own functions
(`torch_ragged.segment_max`, ...) keep their conventions (``arg = -1`` for an empty segment).

Each function calls one registered op (``torch.ops.torch_ragged.compat_*``, functional: it returns what torch_scatter
leaves in ``out``; errors name it); the functions here only write that into ``out``. They compile with TorchScript,
torch.compile and torch.export, as torch_scatter's do.
"""


import torch

__all__ = [
    "gather_coo",
    "gather_csr",
    "scatter",
    "scatter_add",
    "scatter_log_softmax",
    "scatter_logsumexp",
    "scatter_max",
    "scatter_mean",
    "scatter_min",
    "scatter_mul",
    "scatter_softmax",
    "scatter_std",
    "scatter_sum",
    "segment_add_coo",
    "segment_add_csr",
    "segment_coo",
    "segment_csr",
    "segment_max_coo",
    "segment_max_csr",
    "segment_mean_coo",
    "segment_mean_csr",
    "segment_min_coo",
    "segment_min_csr",
    "segment_sum_coo",
    "segment_sum_csr",
    "softmax",
]


def _into(out: torch.Tensor | None, result: torch.Tensor) -> torch.Tensor:
    """torch_scatter writes its result into ``out`` when one is given, and returns it."""
    if out is None:
        return result
    return out.copy_(result)


def _arg_into(out: torch.Tensor | None, result: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return _into(out, result[0]), result[1]


# ---- scatter by an unsorted index ----

def scatter(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
            dim_size: int | None = None, reduce: str = "sum") -> torch.Tensor:
    """torch_scatter's ``scatter``: reduces the elements of ``src`` into the positions ``index`` names along ``dim``.

    ``reduce``: ``"sum"`` (``"add"``), ``"mul"``, ``"mean"``, ``"min"``, ``"max"``. ``index`` has ``src``'s shape or
    broadcasts to it (a 1-D index lines up with ``dim``); the output has ``src``'s shape with ``dim_size`` along ``dim``
    (``out``'s when given, else ``index.max() + 1``). Positions nothing reaches are 0 (1 for ``"mul"``).

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).
        reduce: ``"sum"`` (``"add"``), ``"mean"``, ``"mul"``, ``"max"`` or ``"min"`` (segment_csr / segment_coo: sum,
            add, mean, min, max).

    >>> scatter(torch.tensor([1.0, 3.0, 2.0, 4.0, 5.0, 6.0]), torch.tensor([0, 1, 0, 1, 1, 3]), reduce="mul")
    tensor([ 2., 60.,  1.,  6.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, dim, out, dim_size, reduce))


def scatter_sum(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``scatter_sum``: `scatter` with ``reduce="sum"`` (into ``out``: added to its values).

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_sum(torch.tensor([1.0, 3.0, 2.0, 4.0, 5.0, 6.0]), torch.tensor([0, 1, 0, 1, 1, 3]))
    tensor([ 3., 12.,  0.,  6.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, dim, out, dim_size, "sum"))


def scatter_add(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``scatter_add``: the same as `scatter_sum`.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_add(torch.tensor([1.0, 2.0]), torch.tensor([1, 1]))
    tensor([0., 3.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, dim, out, dim_size, "sum"))


def scatter_mul(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``scatter_mul``: each position's product (1 where nothing reaches; into ``out``: multiplied by
    its values). Differentiable with zeros in ``src``.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_mul(torch.tensor([2.0, 3.0, 4.0]), torch.tensor([0, 0, 2]))
    tensor([6., 1., 4.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, dim, out, dim_size, "mul"))


def scatter_mean(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                 dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``scatter_mean``: each position's mean (integers rounded toward minus infinity; into ``out``:
    ``(out + the sum) / the count``).

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_mean(torch.tensor([1.0, 2.0, 6.0]), torch.tensor([0, 0, 1]))
    tensor([1.5000, 6.0000])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, dim, out, dim_size, "mean"))


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``scatter_max``: ``(values, arg)``, ``arg`` the element along ``dim`` holding each maximum (the
    first on ties, NaN wins); positions nothing reaches give 0 and ``src.size(dim)``. Into ``out``: an element
    replaces out's value only when greater, and ``arg`` is ``src.size(dim)`` where out's value stays.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_max(torch.tensor([1.0, 7.0, 3.0]), torch.tensor([1, 1, 0]), dim_size=3)
    (tensor([3., 7., 0.]), tensor([2, 1, 3]))
    """
    return _arg_into(out, torch.ops.torch_ragged.compat_scatter_arg(src, index, dim, out, dim_size, "max"))


def scatter_min(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``scatter_min``: ``(values, arg)``; see `scatter_max`.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_min(torch.tensor([1.0, 7.0, 3.0]), torch.tensor([1, 1, 0]))
    (tensor([3., 1.]), tensor([2, 0]))
    """
    return _arg_into(out, torch.ops.torch_ragged.compat_scatter_arg(src, index, dim, out, dim_size, "min"))


# ---- composites ----

def scatter_std(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None, unbiased: bool = True) -> torch.Tensor:
    """torch_scatter's ``scatter_std``: each position's standard deviation (``unbiased``: over count - 1, at least 1);
    0 where one element or none reaches. Into ``out``: its values join the sum of squared deviations.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape: its values join the sum of squared deviations (torch_scatter's
            rule); it then holds the result, and is returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).
        unbiased: divide by ``count - 1`` (Bessel's correction) instead of ``count``.

    >>> scatter_std(torch.tensor([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), torch.zeros(8, dtype=torch.long),
    ...             unbiased=False)
    tensor([2.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter_std(src, index, dim, out, dim_size, unbiased))


def scatter_logsumexp(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                      dim_size: int | None = None, eps: float = 1e-12) -> torch.Tensor:
    """torch_scatter's ``scatter_logsumexp``: ``log(sum(exp(x)) + eps)`` per position, computed stably (shifted by
    the position's maximum: exact at magnitudes of 1e4-1e7); 0 where nothing reaches, -inf where only -inf does.
    Into ``out``: out's value joins its position's terms.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        out: optional tensor of the output's shape: its value joins its position's terms (torch_scatter's rule);
            it then holds the result, and is returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).
        eps: added to the sum of exponentials before the log (torch_scatter's ``eps``).

    >>> scatter_logsumexp(torch.tensor([0.0, 0.0, 5.0]), torch.tensor([0, 0, 2]))
    tensor([0.6931, 0.0000, 5.0000])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter_logsumexp(src, index, dim, out, dim_size, eps))


def scatter_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1, dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``scatter_softmax``: the softmax of the elements sharing a position, at each element (src's
    shape), computed stably (torch.softmax's values). Under torch.export pass ``dim_size``: the result does not show
    the number of positions, which would otherwise come from the data.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_softmax(torch.tensor([1.0, 1.0, 3.0]), torch.tensor([0, 0, 1]))
    tensor([0.5000, 0.5000, 1.0000])
    """
    return torch.ops.torch_ragged.compat_scatter_softmax(src, index, dim, dim_size)


def scatter_log_softmax(src: torch.Tensor, index: torch.Tensor, dim: int = -1,
                        dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``scatter_log_softmax``: the log of `scatter_softmax`, computed stably.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor: each element's position along ``dim``; broadcast to ``src`` as torch_scatter broadcasts
            it (a 1-D index lines up with ``dim``).
        dim: the dim of ``src`` to reduce along (default -1).
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> scatter_log_softmax(torch.tensor([1.0, 1.0, 3.0]), torch.tensor([0, 0, 1]))
    tensor([-0.6931, -0.6931,  0.0000])
    """
    return torch.ops.torch_ragged.compat_scatter_log_softmax(src, index, dim, dim_size)


# ---- segment_csr: sorted rows given by index pointers ----

def segment_csr(src: torch.Tensor, indptr: torch.Tensor, out: torch.Tensor | None = None,
                reduce: str = "sum") -> torch.Tensor:
    """torch_scatter's ``segment_csr``: reduces the rows ``indptr[k]:indptr[k + 1]`` of ``src`` along dim
    ``indptr.dim() - 1`` (``indptr`` broadcast over src's leading dims: one set of segments per batch); ``reduce``:
    ``"sum"`` (``"add"``), ``"mean"``, ``"min"``, ``"max"``; empty segments give 0. Into ``out``: overwritten.

    Args:
        src: the values to reduce (any shape).
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional tensor of the output's shape: overwritten with the result, and returned.
        reduce: ``"sum"`` (``"add"``), ``"mean"``, ``"mul"``, ``"max"`` or ``"min"`` (segment_csr / segment_coo: sum,
            add, mean, min, max).

    >>> segment_csr(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), torch.tensor([0, 2, 5, 5, 6]))
    tensor([ 3., 12.,  0.,  6.])
    """
    return _into(out, torch.ops.torch_ragged.compat_segment_csr(src, indptr, out, reduce))


def segment_sum_csr(src: torch.Tensor, indptr: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch_scatter's ``segment_sum_csr``: `segment_csr` with ``reduce="sum"``.

    Args:
        src: the values to reduce (any shape).
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional tensor of the output's shape: overwritten with the result, and returned.

    >>> segment_sum_csr(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 2, 3]))
    tensor([3., 3.])
    """
    return _into(out, torch.ops.torch_ragged.compat_segment_csr(src, indptr, out, "sum"))


def segment_add_csr(src: torch.Tensor, indptr: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch_scatter's ``segment_add_csr``: the same as `segment_sum_csr`.

    Args:
        src: the values to reduce (any shape).
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional tensor of the output's shape: overwritten with the result, and returned.

    >>> segment_add_csr(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 2, 3]))
    tensor([3., 3.])
    """
    return _into(out, torch.ops.torch_ragged.compat_segment_csr(src, indptr, out, "sum"))


def segment_mean_csr(src: torch.Tensor, indptr: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch_scatter's ``segment_mean_csr`` (integer means rounded toward zero, as torch_scatter's).

    Args:
        src: the values to reduce (any shape).
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional tensor of the output's shape: overwritten with the result, and returned.

    >>> segment_mean_csr(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 2, 3]))
    tensor([1.5000, 3.0000])
    """
    return _into(out, torch.ops.torch_ragged.compat_segment_csr(src, indptr, out, "mean"))


def segment_max_csr(src: torch.Tensor, indptr: torch.Tensor,
                    out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``segment_max_csr``: ``(values, arg)``, ``arg`` the row along the segmented dim (the first on
    ties, NaN wins); empty segments give 0 and ``src.size(dim)``.

    Args:
        src: the values to reduce (any shape).
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional tensor of the output's shape: overwritten with the result, and returned.

    >>> segment_max_csr(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 2, 2, 3]))
    (tensor([2., 0., 3.]), tensor([1, 3, 2]))
    """
    return _arg_into(out, torch.ops.torch_ragged.compat_segment_csr_arg(src, indptr, out, "max"))


def segment_min_csr(src: torch.Tensor, indptr: torch.Tensor,
                    out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``segment_min_csr``: ``(values, arg)``; see `segment_max_csr`.

    Args:
        src: the values to reduce (any shape).
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional tensor of the output's shape: overwritten with the result, and returned.

    >>> segment_min_csr(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 2, 2, 3]))
    (tensor([1., 0., 3.]), tensor([0, 3, 2]))
    """
    return _arg_into(out, torch.ops.torch_ragged.compat_segment_csr_arg(src, indptr, out, "min"))


def gather_csr(src: torch.Tensor, indptr: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch_scatter's ``gather_csr``: each segment's row of ``src`` repeated over the rows ``indptr[k]:indptr[k + 1]``
    (the inverse of `segment_csr`'s layout); the output has ``indptr[-1]`` rows (out's when given).

    Args:
        src: the per-segment values: K entries along ``indptr.dim() - 1``.
        indptr: integer tensor ``(..., K + 1)``: the segments' boundaries along the dim ``indptr.dim() - 1`` of ``src``,
            non-decreasing (leading dims broadcast against ``src``'s).
        out: optional output tensor (the expanded shape): overwritten with the result and returned.

    >>> gather_csr(torch.tensor([10.0, 20.0]), torch.tensor([0, 2, 3]))
    tensor([10., 10., 20.])
    """
    return _into(out, torch.ops.torch_ragged.compat_gather_csr(src, indptr, out))


# ---- segment_coo: a sorted index ----

def segment_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None,
                dim_size: int | None = None, reduce: str = "sum") -> torch.Tensor:
    """torch_scatter's ``segment_coo``: `scatter` along dim ``index.dim() - 1`` (torch_scatter asks for a sorted
    index; any order gives the same result here, a sorted one skips the sort on the CPU). Into ``out``: combined
    as `scatter` combines.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor of ``src``'s leading dims (sorted in torch_scatter; any order works here): each row's
            segment along ``index.dim() - 1``.
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).
        reduce: ``"sum"`` (``"add"``), ``"mean"``, ``"mul"``, ``"max"`` or ``"min"`` (segment_csr / segment_coo: sum,
            add, mean, min, max).

    >>> segment_coo(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), torch.tensor([0, 0, 1, 1, 1, 3]), reduce="max")
    tensor([2., 5., 0., 6.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, index.dim() - 1, out, dim_size, reduce))


def segment_sum_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None,
                    dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``segment_sum_coo``: `segment_coo` with ``reduce="sum"``.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor of ``src``'s leading dims: each row's segment along ``index.dim() - 1`` (any order).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> segment_sum_coo(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 1]))
    tensor([3., 3.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, index.dim() - 1, out, dim_size, "sum"))


def segment_add_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None,
                    dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``segment_add_coo``: the same as `segment_sum_coo`.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor of ``src``'s leading dims: each row's segment along ``index.dim() - 1`` (any order).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> segment_add_coo(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 1]))
    tensor([3., 3.])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, index.dim() - 1, out, dim_size, "sum"))


def segment_mean_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None,
                     dim_size: int | None = None) -> torch.Tensor:
    """torch_scatter's ``segment_mean_coo``: `segment_coo` with ``reduce="mean"``.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor of ``src``'s leading dims: each row's segment along ``index.dim() - 1`` (any order).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> segment_mean_coo(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 1]))
    tensor([1.5000, 3.0000])
    """
    return _into(out, torch.ops.torch_ragged.compat_scatter(src, index, index.dim() - 1, out, dim_size, "mean"))


def segment_max_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None,
                    dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``segment_max_coo``: ``(values, arg)`` as `scatter_max` along dim ``index.dim() - 1``.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor of ``src``'s leading dims: each row's segment along ``index.dim() - 1`` (any order).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> segment_max_coo(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 2]))
    (tensor([2., 0., 3.]), tensor([1, 3, 2]))
    """
    return _arg_into(out, torch.ops.torch_ragged.compat_scatter_arg(src, index, index.dim() - 1, out, dim_size,
                                                                    "max"))


def segment_min_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None,
                    dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter's ``segment_min_coo``: ``(values, arg)`` as `scatter_min` along dim ``index.dim() - 1``.

    Args:
        src: the values to reduce (any shape).
        index: integer tensor of ``src``'s leading dims: each row's segment along ``index.dim() - 1`` (any order).
        out: optional tensor of the output's shape, combined with the reduction as torch_scatter combines them
            (added, multiplied, ``(out + sum) / count``, or the better of the two for max / min), then returned.
        dim_size: the output's size along ``dim`` (``None``: ``index.max() + 1``, or ``out``'s size when given).

    >>> segment_min_coo(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 2]))
    (tensor([1., 0., 3.]), tensor([0, 3, 2]))
    """
    return _arg_into(out, torch.ops.torch_ragged.compat_scatter_arg(src, index, index.dim() - 1, out, dim_size,
                                                                    "min"))


def gather_coo(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch_scatter's ``gather_coo``: ``src``'s rows along dim ``index.dim() - 1`` read at ``index`` (the inverse of
    `segment_coo`'s layout).

    Args:
        src: the per-segment values along ``index.dim() - 1``.
        index: integer tensor of ``src``'s leading dims: the segment whose value each output row takes, along
            ``index.dim() - 1``.
        out: optional output tensor (the expanded shape): overwritten with the result and returned.

    >>> gather_coo(torch.tensor([10.0, 20.0]), torch.tensor([0, 0, 1]))
    tensor([10., 10., 20.])
    """
    return _into(out, torch.ops.torch_ragged.compat_gather_coo(src, index, out))


# ---- PyG ----

def softmax(src: torch.Tensor, index: torch.Tensor | None = None, ptr: torch.Tensor | None = None,
            num_nodes: int | None = None, dim: int = 0) -> torch.Tensor:
    """PyG's ``torch_geometric.utils.softmax``: the softmax of the entries of ``src`` along ``dim`` that share a
    group, given by ``ptr`` (sorted groups: offsets from 0 to ``src.size(dim)``, the segment core's ``first_idx``)
    or by ``index`` (any order; ``num_nodes`` groups).

    Args:
        src: the values to reduce (any shape).
        index: integer tensor (E,): each element's group along ``dim`` (None when ``ptr`` is given).
        ptr: optional (N + 1,) int64 CSR offsets along ``dim``: the groups as segments (then ``index`` is ignored and
            may be None).
        num_nodes: the number of groups (``None``: ``index.max() + 1``).
        dim: the dim of ``src`` the groups cut (default 0).

    >>> softmax(torch.tensor([1.0, 1.0, 3.0]), ptr=torch.tensor([0, 2, 3]))
    tensor([0.5000, 0.5000, 1.0000])
    """
    if ptr is not None:
        if dim == 0 or dim == -src.dim():
            return torch.ops.torch_ragged.segment_softmax(src, ptr)
        return torch.ops.torch_ragged.segment_softmax(src.movedim(dim, 0), ptr).movedim(0, dim)
    if index is None:
        raise ValueError("torch_ragged.scatter_compat.softmax: give index or ptr")
    return torch.ops.torch_ragged.compat_scatter_softmax(src, index, dim, num_nodes)
