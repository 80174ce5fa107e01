"""Benchmarks of the tiles family against the plain-torch routes a user writes today, same data, same run.

Cases: 4096 tiles of 8x8 (x4 channels, float32) in a 1024^2 bound, aligned (distinct cells) and unaligned
(random origins, overlapping); 4096 tiles of 8^3 x4 in a 256^3 bound (3-D). Baselines:
- tiles -> dense: index_put_ of every tile pixel (aligned: correct; overlapping: first-wins needs a scatter_reduce
  amin of tile ids, then the index_put_ of the winners), into a fresh dense tensor;
- dense -> tiles: advanced indexing of every tile pixel, fill where outside the bound;
- box filter: the dense route (tiles -> dense, depthwise conv in channels-last, then the tile pixels gathered for
  out="tiles"), forward and forward + backward.
"GB/s" counts pages read + dense written (or the reverse); "memcpy GB/s" a plain copy in the same run.
"""

import torch
import torch.nn.functional as F
from bench_batch import paired_medians
from bench_sparse import copy_gbs, row
from torch_ragged import tiles

CASES = {
    "2-D aligned (4096 tiles 8x8x4, 1024^2)": dict(dims=2, bound=1024, tile=8, count=4096, aligned=True),
    "2-D unaligned overlapping (4096 tiles 8x8x4, 1024^2)": dict(dims=2, bound=1024, tile=8, count=4096,
                                                                 aligned=False),
    "3-D aligned (4096 tiles 8^3x4, 256^3)": dict(dims=3, bound=256, tile=8, count=4096, aligned=True),
}
CHANNELS = 4


def make_tiles(dims, bound, tile, count, aligned, seed=0):
    g = torch.Generator().manual_seed(seed)
    if aligned:
        cells = torch.randperm((bound // tile) ** dims, generator=g)[:count]
        origins = torch.stack(torch.unravel_index(cells, (bound // tile,) * dims), 1) * tile
    else:
        origins = torch.randint(0, bound - tile + 1, (count, dims), generator=g)
    pages = torch.rand(count, *(tile,) * dims, CHANNELS, generator=g)
    return pages, origins


def pixel_coords(origins, tile, dims):
    """Global coordinates of every tile pixel: (count * tile^dims, dims)."""
    local = torch.stack(torch.meshgrid(*[torch.arange(tile)] * dims, indexing="ij"), -1).reshape(-1, dims)
    return (origins[:, None, :] + local[None]).reshape(-1, dims)


def torch_to_dense(pages, origins, bound, tile, dims, first_wins):
    coords = pixel_coords(origins, tile, dims)
    index = tuple(coords.unbind(1))
    dense = torch.zeros((bound,) * dims + (CHANNELS,))
    values = pages.reshape(-1, CHANNELS)
    if first_wins:  # the lowest tile id per pixel, then only the winners write
        ids = torch.arange(len(origins)).repeat_interleave(tile**dims)
        flat = torch.zeros(0)
        linear = coords[:, 0]
        for d in range(1, dims):
            linear = linear * bound + coords[:, d]
        owner = torch.full((bound**dims,), len(origins)).scatter_reduce(0, linear, ids, "amin")
        winners = owner[linear] == ids
        index = tuple(c[winners] for c in index)
        values = values[winners]
        del flat
    dense.index_put_(index, values)
    return dense


def torch_to_tiles(dense, origins, tile, dims):
    coords = pixel_coords(origins, tile, dims)
    return dense[tuple(coords.unbind(1))].view(len(origins), *(tile,) * dims, CHANNELS)


def dense_route_box(pages, origins, bound, tile, dims, first_wins, out):
    dense = torch_to_dense(pages, origins, bound, tile, dims, first_wins)
    x = dense.unsqueeze(0).movedim(-1, 1)  # channels-last strides: the conv's fast path
    conv = F.conv2d if dims == 2 else F.conv3d
    weight = torch.full((CHANNELS, 1) + (3,) * dims, 1.0 / 3**dims)
    y = conv(x, weight, padding=1, groups=CHANNELS)[0].movedim(0, -1)
    return torch_to_tiles(y, origins, tile, dims) if out == "tiles" else y


def case_rows(name, dims, bound, tile, count, aligned, min_run_time):
    pages, origins = make_tiles(dims, bound, tile, count, aligned)
    lo, hi = [0] * dims, [bound] * dims
    index = tiles.tiles_index(origins, [tile] * dims, lo, hi)
    first_wins = not aligned
    dense_bytes = bound**dims * CHANNELS * 4
    nbytes = dense_bytes + pages.nbytes
    memcpy = copy_gbs(dense_bytes, "cpu", min_run_time)
    rows = []

    def add(op, baseline, baseline_fn, ours_fn, moved=nbytes):
        base_s, ours_s = paired_medians(baseline_fn, ours_fn, min_run_time)
        rows.append(row(name, op, baseline, base_s, ours_s, moved, memcpy))

    add("tiles_to_dense", "index_put_" + (" + scatter_reduce first-wins" if first_wins else ""),
        lambda: torch_to_dense(pages, origins, bound, tile, dims, first_wins),
        lambda: tiles.tiles_to_dense(pages, origins, lo, hi, index=index))
    extent = (bound,) * dims + (CHANNELS,)
    add("tiles_to_dense", "torch.full of the dense output alone (the fresh-output floor)",
        lambda: torch.full(extent, 0.0), lambda: tiles.tiles_to_dense(pages, origins, lo, hi, index=index))
    dense = tiles.tiles_to_dense(pages, origins, lo, hi, index=index)
    add("dense_to_tiles", "advanced indexing", lambda: torch_to_tiles(dense, origins, tile, dims),
        lambda: tiles.dense_to_tiles(dense, origins, [tile] * dims, lo, index=index), 2 * pages.nbytes)
    if dims == 2:
        add("box filter out=tiles", "dense route (scatter + conv + gather)",
            lambda: dense_route_box(pages, origins, bound, tile, dims, first_wins, "tiles"),
            lambda: tiles.tiles_box_filter(pages, origins, lo, hi, index=index))
        leaf = pages.clone().requires_grad_()

        def ours_both():
            tiles.tiles_box_filter(leaf, origins, lo, hi, index=index).sum().backward()

        def theirs_both():
            dense_route_box(leaf, origins, bound, tile, dims, first_wins, "tiles").sum().backward()

        add("box filter out=tiles fwd+bwd", "dense route fwd+bwd", theirs_both, ours_both)
    return rows


def settle_allocator(seconds=2.0):
    """Fresh 16-256 MB outputs under THP_MEM_ALLOC_ENABLE=1 cost up to 10x more in the first seconds of a process
    (huge-page compaction); allocate until that settles so the first case is not penalised (measured here:
    torch.empty(16 MB).fill_ 18 ms at first, 2.5 ms later)."""
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        torch.empty(64 << 20, dtype=torch.uint8).fill_(1)


def run_all(device, min_run_time):
    if device != "cpu":
        raise SystemExit("bench_tiles: the baselines here are CPU routes; the GPU run uses the CUDA tests")
    settle_allocator()
    rows = []
    for name, params in CASES.items():
        rows += case_rows(name, min_run_time=min_run_time, **params)
    return rows
