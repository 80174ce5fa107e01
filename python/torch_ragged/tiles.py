"""Sparse tiles <-> dense: fixed-size tiles ("pages") of a field, each with an origin inside a bound.

``pages (T, *tile_size, *F)``, ``origins (T, d)`` integer (negative or unaligned allowed), ``d`` = 1, 2 or 3, and a
bound ``[full_min, full_max)``. Reading the field at a point takes the **first** tile covering it (lowest t) or
``fill_value`` where no tile does or outside the bound (a select chain over the tiles). ``tile_first_idx (B + 1,)``
splits the tiles into B members, one dense output each. ``index`` is the output of `tiles_index` for the
same tiles and bound: build it once and pass it to every call (otherwise each call builds it).
"""

import torch

from ._checks import int_list
from .segment import register_fake

__all__ = [
    "dense_to_tiles",
    "tiles_box_filter",
    "tiles_correlate",
    "tiles_from_dense",
    "tiles_index",
    "tiles_lookup",
    "tiles_to_dense",
]

_ops = torch.ops.torch_ragged


def _ints(op: str, **named) -> list[list[int]]:
    """Each keyword argument's value as a list of ints, in order, checked (a float or bool entry raises)."""
    return [int_list(op, arg, values) for arg, values in named.items()]


def _index(index: list[torch.Tensor] | None) -> list[torch.Tensor] | None:
    """``tiles_index``'s 4 tensors as the ops take them (eager calls pass the tuple it returns)."""
    if not torch.jit.is_scripting():
        return None if index is None else list(index)
    return index


def tiles_index(origins: torch.Tensor, tile_size: list[int], full_min: list[int], full_max: list[int],
                tile_first_idx: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The per-cell tile lists ``(keys, first, tiles)`` every tiles op uses to find a point's owner, and the
    ``fingerprint`` of the tiles, tile size and bound they were built for: pass the 4-tuple as ``index=``; an index
    built for other tiles or another geometry is refused with a ValueError.

    Args:
        origins: (T, d) int64 / int32 tensor: each tile's first point (negative, unaligned, overlapping and outside the
            bound are legal).
        tile_size: d ints: each tile's extent.
        full_min: d ints: the bound's first point.
        full_max: d ints: the bound's end (exclusive).
        tile_first_idx: optional (B + 1,) int64: tiles ``tile_first_idx[b]:tile_first_idx[b + 1]`` belong to member b
            (one dense output per member).
    """
    if not torch.jit.is_scripting():  # eager calls may pass tuples or integer tensors
        tile_size, full_min, full_max = _ints("tiles_index", tile_size=tile_size, full_min=full_min,
                                              full_max=full_max)
    keys, first, tiles, fingerprint = _ops.tiles_index(origins, tile_size, full_min, full_max, tile_first_idx)
    return keys, first, tiles, fingerprint


def tiles_to_dense(pages: torch.Tensor, origins: torch.Tensor, full_min: list[int], full_max: list[int],
                   fill_value: int | float = 0, reduce: str = "first", tile_first_idx: torch.Tensor | None = None,
                   index: list[torch.Tensor] | None = None) -> torch.Tensor:
    """``[(B,) *extent, *F]``: each point from its first covering tile (``reduce="first"``) or the sum of all
    covering tiles in tile order (``"sum"``); ``fill_value`` elsewhere. Tile pixels outside the bound are dropped.

    Args:
        pages: ``(T, *tile_size, *F)`` tensor: the tiles' values (F: feature dims, may be empty).
        origins: (T, d) int64 / int32 tensor: each tile's first point (negative, unaligned, overlapping and outside the
            bound are legal).
        full_min: d ints: the bound's first point.
        full_max: d ints: the bound's end (exclusive).
        fill_value: the value of points no tile covers (and outside the bound).
        reduce: ``"first"`` (the first covering tile wins) or ``"sum"`` (every covering tile added, in tile order).
        tile_first_idx: optional (B + 1,) int64: tiles ``tile_first_idx[b]:tile_first_idx[b + 1]`` belong to member b
            (one dense output per member).
        index: optional ``tiles_index(...)`` of these origins, tile size, bound and members, built once and reused
            (checked by its fingerprint).

    >>> pages = torch.ones(2, 2, 2); pages[1] *= 2
    >>> tiles_to_dense(pages, torch.tensor([[0, 0], [1, 1]]), [0, 0], [3, 3], -1.0)
    tensor([[ 1.,  1., -1.],
            [ 1.,  1.,  2.],
            [-1.,  2.,  2.]])
    """
    if not torch.jit.is_scripting():
        full_min, full_max = _ints("tiles_to_dense", full_min=full_min, full_max=full_max)
    return _ops.tiles_to_dense(pages, origins, full_min, full_max, fill_value, reduce, tile_first_idx, _index(index))


def dense_to_tiles(dense: torch.Tensor, origins: torch.Tensor, tile_size: list[int], full_min: list[int],
                   fill_value: int | float = 0, owned_only: bool = False, tile_first_idx: torch.Tensor | None = None,
                   index: list[torch.Tensor] | None = None) -> torch.Tensor:
    """``pages (T, *tile_size, *F)`` read from ``dense [(B,) *extent, *F]`` (the bound is ``full_min + extent``);
    points outside the bound read ``fill_value``, and with ``owned_only`` so do points another tile owns. The
    adjoint of `tiles_to_dense` (``owned_only`` for ``"first"``).

    Args:
        dense: ``[(B,) *extent, *F]`` tensor: the dense field.
        origins: (T, d) int64 / int32 tensor: each tile's first point (negative, unaligned, overlapping and outside the
            bound are legal).
        tile_size: d ints: each tile's extent.
        full_min: d ints: the dense tensor's first point in the tiles' coordinates.
        fill_value: the value of points no tile covers (and outside the bound).
        owned_only: read only the points each tile owns (first-wins), ``fill_value`` where another tile wins: the
            adjoint of `tiles_to_dense` with ``reduce="first"``.
        tile_first_idx: optional (B + 1,) int64: tiles ``tile_first_idx[b]:tile_first_idx[b + 1]`` belong to member b
            (one dense output per member).
        index: optional ``tiles_index(...)`` of these origins, tile size, bound and members, built once and reused
            (checked by its fingerprint).
    """
    if not torch.jit.is_scripting():
        tile_size, full_min = _ints("dense_to_tiles", tile_size=tile_size, full_min=full_min)
    return _ops.dense_to_tiles(dense, origins, tile_size, full_min, fill_value, owned_only, tile_first_idx,
                               _index(index))


def tiles_lookup(origins: torch.Tensor, tile_size: list[int], coords: torch.Tensor, full_min: list[int],
                 full_max: list[int], tile_first_idx: torch.Tensor | None = None,
                 index: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tile (N,), local (N, d))``: the owner of each point (-1 where none, or outside the bound) and the
    point's position inside it. With ``tile_first_idx``, ``coords`` is ``(N, 1 + d)``: the member, then the point.

    Args:
        origins: (T, d) int64 / int32 tensor: each tile's first point (negative, unaligned, overlapping and outside the
            bound are legal).
        tile_size: d ints: each tile's extent.
        coords: (N, d) integer tensor: the points to look up; (N, 1 + d) with ``tile_first_idx`` (the member, then
            the point).
        full_min: d ints: the bound's first point.
        full_max: d ints: the bound's end (exclusive).
        tile_first_idx: optional (B + 1,) int64: tiles ``tile_first_idx[b]:tile_first_idx[b + 1]`` belong to member b
            (one dense output per member).
        index: optional ``tiles_index(...)`` of these origins, tile size, bound and members, built once and reused
            (checked by its fingerprint).
    """
    if not torch.jit.is_scripting():
        tile_size, full_min, full_max = _ints("tiles_lookup", tile_size=tile_size, full_min=full_min,
                                              full_max=full_max)
    tile, local = _ops.tiles_lookup(origins, tile_size, coords, full_min, full_max, tile_first_idx, _index(index))
    return tile, local


def tiles_correlate(pages: torch.Tensor, origins: torch.Tensor, weight: torch.Tensor, full_min: list[int],
                    full_max: list[int], fill_value: int | float = 0, out: str = "tiles",
                    tile_first_idx: torch.Tensor | None = None, index: list[torch.Tensor] | None = None
                    ) -> torch.Tensor:
    """Per-channel correlation of the first-wins field with an odd, centred ``weight (*K, *F)``, reading across
    tile boundaries (``fill_value`` outside the bound and where no tile is): ``out="tiles"`` at the tiles' points
    ``(T, *tile_size, *F)``, ``out="dense"`` over the whole bound ``[(B,) *extent, *F]``. Differentiable in pages
    and weight.

    Args:
        pages: ``(T, *tile_size, *F)`` tensor: the tiles' values (F: feature dims, may be empty).
        origins: (T, d) int64 / int32 tensor: each tile's first point (negative, unaligned, overlapping and outside the
            bound are legal).
        weight: ``(*K, *F)`` tensor, odd and centred: the per-channel correlation kernel (differentiable).
        full_min: d ints: the bound's first point.
        full_max: d ints: the bound's end (exclusive).
        fill_value: the value of points no tile covers (and outside the bound).
        out: ``"tiles"`` (the result at the tiles' points, ``(T, *tile_size, *F)``) or ``"dense"`` (over the whole
            bound).
        tile_first_idx: optional (B + 1,) int64: tiles ``tile_first_idx[b]:tile_first_idx[b + 1]`` belong to member b
            (one dense output per member).
        index: optional ``tiles_index(...)`` of these origins, tile size, bound and members, built once and reused
            (checked by its fingerprint).
    """
    if not torch.jit.is_scripting():
        full_min, full_max = _ints("tiles_correlate", full_min=full_min, full_max=full_max)
    return _ops.tiles_correlate(pages, origins, weight, full_min, full_max, fill_value, out, tile_first_idx,
                                _index(index))


def tiles_box_filter(pages: torch.Tensor, origins: torch.Tensor, full_min: list[int], full_max: list[int],
                     size: int = 3, fill_value: int | float = 0, out: str = "tiles",
                     tile_first_idx: torch.Tensor | None = None, index: list[torch.Tensor] | None = None
                     ) -> torch.Tensor:
    """The mean over a box of ``size`` points per side (size ** d points in d dims) around every point of the
    first-wins field, reading across tile boundaries: `tiles_correlate` with a box kernel of weight 1 / size ** d.

    ``pages (T, *tile_size, *F)`` and ``origins (T, d)``: the tiles; ``full_min`` / ``full_max``: the bound
    ``[full_min, full_max)`` (one int per dim); ``size``: an odd int >= 1; ``fill_value``: what points outside the
    bound or in no tile read; ``out``: ``"tiles"`` (the filtered tiles) or ``"dense"`` (the whole bound);
    ``tile_first_idx`` and ``index``: as in `tiles_correlate`. Differentiable in pages.

    Args:
        pages: ``(T, *tile_size, *F)`` tensor: the tiles' values (F: feature dims, may be empty).
        origins: (T, d) int64 / int32 tensor: each tile's first point (negative, unaligned, overlapping and outside the
            bound are legal).
        full_min: d ints: the bound's first point.
        full_max: d ints: the bound's end (exclusive).
        size: the box's side (an odd int >= 1).
        fill_value: the value of points no tile covers (and outside the bound).
        out: ``"tiles"`` (the result at the tiles' points, ``(T, *tile_size, *F)``) or ``"dense"`` (over the whole
            bound).
        tile_first_idx: optional (B + 1,) int64: tiles ``tile_first_idx[b]:tile_first_idx[b + 1]`` belong to member b
            (one dense output per member).
        index: optional ``tiles_index(...)`` of these origins, tile size, bound and members, built once and reused
            (checked by its fingerprint).

    >>> pages = torch.ones(1, 2, 2)
    >>> tiles_box_filter(pages, torch.tensor([[0, 0]]), [0, 0], [2, 2], size=3)  # 4 of each box's 9 points are 1
    tensor([[[0.4444, 0.4444],
             [0.4444, 0.4444]]])
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 1 or size % 2 == 0:
        raise ValueError("torch_ragged.tiles_box_filter: size must be an odd int >= 1, got " + str(size))
    dims = origins.shape[1] if isinstance(origins, torch.Tensor) and origins.dim() == 2 else 1
    box = [size] * dims + list(pages.shape[1 + dims:])  # lists, not tuples: TorchScript compiles this
    weight = torch.full(box, 1.0 / float(size**dims), dtype=pages.dtype, device=pages.device)
    return tiles_correlate(pages, origins, weight, full_min, full_max, fill_value, out, tile_first_idx, index)


def tiles_from_dense(dense: torch.Tensor, tile_size: list[int], fill_value: int | float = 0,
                     full_min: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pages, origins)`` of the ``tile_size``-aligned tiles of ``dense (*extent, *F)`` holding any value other
    than ``fill_value`` (origins from ``full_min``, default 0); `tiles_to_dense` gives ``dense`` back.

    Args:
        dense: ``(*extent, *F)`` tensor: the dense field to cut into aligned tiles.
        tile_size: d ints: each tile's extent.
        fill_value: the background value: a tile is kept where any of its points differs from it.
        full_min: d ints: the dense tensor's first point (default 0s).
    """
    if not torch.jit.is_scripting():
        (tile_size,) = _ints("tiles_from_dense", tile_size=tile_size)
        if full_min is not None:
            (full_min,) = _ints("tiles_from_dense", full_min=full_min)
    pages, origins = _ops.tiles_from_dense(dense, tile_size, fill_value, full_min)
    return pages, origins


# ---- fake kernels (torch.compile / torch.export) ----

def _members(tile_first_idx):
    return [] if tile_first_idx is None else [tile_first_idx.shape[0] - 1]


@register_fake("torch_ragged::tiles_index")
def _tiles_index_fake(origins, tile_size, full_min, full_max, tile_first_idx=None):
    ctx = torch.library.get_ctx()
    keys, entries = ctx.new_dynamic_size(), ctx.new_dynamic_size()
    longs = dict(dtype=torch.long, device=origins.device)
    return (torch.empty(keys, **longs), torch.empty(keys + 1, **longs), torch.empty(entries, **longs),
            torch.empty(2, **longs))


@register_fake("torch_ragged::tiles_to_dense")
def _tiles_to_dense_fake(pages, origins, full_min, full_max, fill_value=0, reduce="first", tile_first_idx=None,
                         index=None):
    dims = origins.shape[1]
    extent = [hi - lo for lo, hi in zip(full_min, full_max, strict=True)]
    return pages.new_empty((*_members(tile_first_idx), *extent, *pages.shape[1 + dims:]))


@register_fake("torch_ragged::dense_to_tiles")
def _dense_to_tiles_fake(dense, origins, tile_size, full_min, fill_value=0, owned_only=False, tile_first_idx=None,
                         index=None):
    lead = 0 if tile_first_idx is None else 1
    return dense.new_empty((origins.shape[0], *tile_size, *dense.shape[lead + len(tile_size):]))


def _check_radius(op: str, radius, dims) -> None:
    if len(radius) != dims:  # as the kernels' check (a ValueError, not an IndexError from radius[d] below)
        raise ValueError(f"torch_ragged.{op}: radius must have one entry per tile dim ({dims}), got {list(radius)}")


@register_fake("torch_ragged::tiles_halo")
def _tiles_halo_fake(pages, origins, radius, full_min, full_max, fill_value=0, tile_first_idx=None, index=None):
    dims = origins.shape[1]
    _check_radius("tiles_halo", radius, dims)
    box = [pages.shape[1 + d] + 2 * radius[d] for d in range(dims)]
    return pages.new_empty((pages.shape[0], *box, *pages.shape[1 + dims:]))


@register_fake("torch_ragged::tiles_halo_backward")
def _tiles_halo_backward_fake(grad_halo, origins, radius, full_min, full_max, tile_first_idx=None, index=None):
    dims = origins.shape[1]
    _check_radius("tiles_halo_backward", radius, dims)
    tile = [grad_halo.shape[1 + d] - 2 * radius[d] for d in range(dims)]
    return grad_halo.new_empty((grad_halo.shape[0], *tile, *grad_halo.shape[1 + dims:]))


@register_fake("torch_ragged::tiles_depthwise_correlate")
def _tiles_depthwise_correlate_fake(input, weight, padding):
    dims = len(padding)
    if input.dim() != dims + 2 or weight.dim() != dims + 1 or weight.shape[-1] != input.shape[-1]:
        raise ValueError(f"torch_ragged.tiles_depthwise_correlate: input must be (N, *S, C) and weight (*K, C) with "
                         f"{dims} spatial dims, got shapes {tuple(input.shape)} and {tuple(weight.shape)}")
    out = [input.shape[1 + d] + 2 * padding[d] - weight.shape[d] + 1 for d in range(dims)]
    return input.new_empty((input.shape[0], *out, input.shape[-1]))


@register_fake("torch_ragged::tiles_lookup")
def _tiles_lookup_fake(origins, tile_size, coords, full_min, full_max, tile_first_idx=None, index=None):
    n = coords.shape[0]
    return coords.new_empty((n,), dtype=torch.long), coords.new_empty((n, len(tile_size)), dtype=torch.long)
