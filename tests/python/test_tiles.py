"""The tiles family against numpy references written from the seed's rule (the first tile covering a point wins;
no tile or outside the bound -> the fill value), one tile at a time."""

import itertools

import numpy as np
import pytest
import torch
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck
from torch_ragged import tiles

ops = torch.ops.torch_ragged


# ---- references ----

def tile_boxes(origin, tile, lo, hi):
    """The part of a tile inside the bound: (slices into the dense bound, slices into the page), or None."""
    dense, page = [], []
    for o, s, a, b in zip(origin, tile, lo, hi, strict=True):
        start, stop = max(o, a), min(o + s, b)
        if start >= stop:
            return None
        dense.append(slice(start - a, stop - a))
        page.append(slice(start - o, stop - o))
    return tuple(dense), tuple(page)


def ref_to_dense(pages, origins, lo, hi, fill, reduce="first"):
    pages, origins = np.asarray(pages), np.asarray(origins)
    tile = pages.shape[1:1 + len(lo)]
    extent = [b - a for a, b in zip(lo, hi, strict=True)]
    out = np.zeros((*extent, *pages.shape[1 + len(lo):]), dtype=pages.dtype)
    covered = np.zeros(extent, dtype=bool)
    owner = np.full(extent, -1)
    for t in range(len(pages)):
        boxes = tile_boxes(origins[t], tile, lo, hi)
        if boxes is None:
            continue
        dense, page = boxes
        if reduce == "first":
            fresh = ~covered[dense]
            out[dense][fresh] = pages[t][page][fresh]
            region = out[dense]
            region[fresh] = pages[t][page][fresh]
            out[dense] = region
            own = owner[dense]
            own[fresh] = t
            owner[dense] = own
        else:
            out[dense] = out[dense] + pages[t][page]
        covered[dense] = True
    out[~covered] = fill
    return out, owner


def ref_to_tiles(dense, origins, tile, lo, fill, owned_only=False):
    dense, origins = np.asarray(dense), np.asarray(origins)
    hi = [a + n for a, n in zip(lo, dense.shape, strict=False)]
    feature = dense.shape[len(tile):]
    out = np.full((len(origins), *tile, *feature), fill, dtype=dense.dtype)
    _, owner = ref_to_dense(np.zeros((len(origins), *tile)), origins, lo, hi, 0.0)
    for t in range(len(origins)):
        boxes = tile_boxes(origins[t], tile, lo, hi)
        if boxes is None:
            continue
        d, p = boxes
        values = dense[d].copy()
        if owned_only:
            values[owner[d] != t] = fill
        out[t][p] = values
    return out


def ref_field_canvas(pages, origins, lo, hi, fill, margin):
    """The first-wins field on a canvas reaching `margin` beyond the bound and every tile (fill outside the bound)."""
    tile = np.asarray(pages).shape[1:1 + len(lo)]
    origins = np.asarray(origins).reshape(-1, len(lo))
    c_lo = [min([a, *(origins[:, d])]) - margin[d] for d, a in enumerate(lo)]
    c_hi = [max([b, *(origins[:, d] + tile[d])]) + margin[d] for d, b in enumerate(hi)]
    field, _ = ref_to_dense(pages, origins, lo, hi, fill)
    canvas = np.full((*[b - a for a, b in zip(c_lo, c_hi, strict=True)], *field.shape[len(lo):]), fill,
                     dtype=field.dtype)
    canvas[tuple(slice(a - c, b - c) for a, b, c in zip(lo, hi, c_lo, strict=True))] = field
    return canvas, c_lo


def ref_correlate(pages, origins, weight, lo, hi, fill, out):
    pages, weight = np.asarray(pages, dtype=np.float64), np.asarray(weight, dtype=np.float64)
    dims = len(lo)
    radius = [k // 2 for k in weight.shape[:dims]]
    canvas, c_lo = ref_field_canvas(pages, origins, lo, hi, fill, radius)
    result = np.zeros(tuple(n - 2 * r for n, r in zip(canvas.shape[:dims], radius, strict=True)) + canvas.shape[dims:])
    for offset in itertools.product(*[range(k) for k in weight.shape[:dims]]):
        window = tuple(slice(o, o + n) for o, n in zip(offset, result.shape[:dims], strict=True))
        result += weight[offset] * canvas[window]
    base = [c + r for c, r in zip(c_lo, radius, strict=True)]  # global point of result[0, ...]
    if out == "dense":
        return result[tuple(slice(a - b0, c - b0) for a, c, b0 in zip(lo, hi, base, strict=True))]
    tile = pages.shape[1:1 + dims]
    return np.stack([result[tuple(slice(o - b0, o - b0 + s) for o, s, b0 in zip(origin, tile, base, strict=True))]
                     for origin in np.asarray(origins)]) if len(pages) else np.zeros(pages.shape)


# ---- tile sets: overlapping, unaligned, negative, partly / wholly outside, 1-D to 3-D ----

CASES = {
    "2d_seed": ([8, 8], [[2, 2], [10, 16], [0, 20]], [0, 0], [32, 32]),
    "2d_aligned_repeated": ([4, 4], [[0, 0], [4, 8], [8, 0], [4, 8], [8, 8]], [0, 0], [12, 10]),
    "2d_overlap_outside": ([3, 4], [[0, 0], [1, 2], [-2, -3], [5, 6], [40, 40], [1, 2]], [-1, 0], [6, 9]),
    "1d": ([4], [[-3], [2], [3], [9], [0]], [0], [11]),
    "3d": ([2, 3, 2], [[0, 0, 0], [1, 1, 1], [-1, 2, 0], [3, -2, 1]], [0, -1, 0], [4, 5, 3]),
    "2d_empty": ([2, 2], np.zeros((0, 2), dtype=np.int64), [0, 0], [3, 4]),
}


def make_pages(tile, count, feature, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(-50, 50, (count, *tile, *feature), generator=generator)
    return values.to(dtype) if dtype != torch.bool else values > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("feature", [(), (3,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_tiles_to_dense_first_wins(device, case, feature, dtype):
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(np.asarray(origins), dtype=torch.long).view(-1, len(lo))
    pages = make_pages(tile, len(origins), feature, dtype).to(device)
    fill = True if dtype == torch.bool else -7
    out = tiles.tiles_to_dense(pages, origins, lo, hi, fill)
    expected, _ = ref_to_dense(pages.cpu().numpy(), origins.numpy(), lo, hi, fill)
    assert out.dtype == dtype and out.shape == expected.shape
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_tiles_to_dense_sum_adds_in_tile_order(device, case):
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(np.asarray(origins), dtype=torch.long).view(-1, len(lo))
    pages = make_pages(tile, len(origins), (2,), torch.float64).to(device)
    out = tiles.tiles_to_dense(pages, origins, lo, hi, 0.5, reduce="sum")
    expected, _ = ref_to_dense(pages.cpu().numpy(), origins.numpy(), lo, hi, 0.5, "sum")
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("owned_only", [False, True])
def test_dense_to_tiles(device, case, owned_only):
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(np.asarray(origins), dtype=torch.int32).view(-1, len(lo))
    extent = [b - a for a, b in zip(lo, hi, strict=True)]
    dense = torch.arange(int(np.prod(extent)) * 2, dtype=torch.float32).view(*extent, 2).to(device)
    out = tiles.dense_to_tiles(dense, origins, tile, lo, -1.0, owned_only)
    expected = ref_to_tiles(dense.cpu().numpy(), origins.numpy(), tile, lo, -1.0, owned_only)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["2d_seed", "2d_aligned_repeated", "2d_overlap_outside", "3d", "1d"])
@pytest.mark.parametrize("points", [200, 3000])  # 3000: enough for the lookup's key -> owner table
def test_lookup_matches_a_scan_of_the_tiles(device, case, points):
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(origins)
    generator = torch.Generator().manual_seed(1)
    coords = torch.stack([torch.randint(a - 3, b + 3, (points,), generator=generator) for a, b in zip(lo, hi,
                                                                                                    strict=True)], 1)
    found, local = tiles.tiles_lookup(origins, tile, coords.to(device), lo, hi)
    for i, g in enumerate(coords.tolist()):
        inside = all(a <= x < b for x, a, b in zip(g, lo, hi, strict=True))
        owners = [t for t, o in enumerate(origins.tolist())
                  if all(oo <= x < oo + s for x, oo, s in zip(g, o, tile, strict=True))]
        expected = owners[0] if inside and owners else -1
        assert found[i].item() == expected
        if expected >= 0:
            assert local[i].tolist() == [x - o for x, o in zip(g, origins[expected].tolist(), strict=True)]


@pytest.mark.parametrize("device", DEVICES)
def test_lookup_of_many_points_in_members_matches_a_scan(device):
    """Members' tiles (aligned, one cell shared by two tiles, one unaligned, one outside), looked up at enough
    points for the key -> owner table: each point's lowest covering tile of its own member."""
    tile, lo, hi = [4, 4], [-4, 0], [12, 13]
    members = [[[-4, 0], [4, 8], [4, 8], [0, 4]], [], [[1, 2], [-4, 0], [8, 12], [40, 0]]]
    origins = torch.tensor([o for m in members for o in m], dtype=torch.long)
    first = [0]
    for m in members:
        first.append(first[-1] + len(m))
    generator = torch.Generator().manual_seed(3)
    points = 2000
    coords = torch.stack([torch.randint(0, len(members), (points,), generator=generator)]
                         + [torch.randint(a - 2, b + 2, (points,), generator=generator) for a, b in zip(lo, hi,
                                                                                                      strict=True)], 1)
    found, local = tiles.tiles_lookup(origins.to(device), tile, coords.to(device), lo, hi,
                                      tile_first_idx=torch.tensor(first).to(device))
    for i, (b, *g) in enumerate(coords.tolist()):
        inside = all(a <= x < e for x, a, e in zip(g, lo, hi, strict=True))
        owners = [t for t in range(first[b], first[b + 1])
                  if all(o <= x < o + s for x, o, s in zip(g, origins[t].tolist(), tile, strict=True))]
        expected = owners[0] if inside and owners else -1
        assert found[i].item() == expected
        offsets = [x - o for x, o in zip(g, origins[expected].tolist(), strict=True)] if expected >= 0 else [0, 0]
        assert local[i].tolist() == offsets


@pytest.mark.parametrize("device", DEVICES)
def test_batches_give_one_dense_output_per_member(device):
    tile, lo, hi = [2, 2], [0, 0], [4, 5]
    members = [torch.tensor([[0, 0], [1, 1]]), torch.zeros(0, 2, dtype=torch.long), torch.tensor([[2, 3], [-1, 0]])]
    origins = torch.cat(members)
    tile_first_idx = torch.tensor([0, 2, 2, 4])
    pages = make_pages(tile, 4, (3,), torch.float32).to(device)
    out = tiles.tiles_to_dense(pages, origins, lo, hi, 9.0, tile_first_idx=tile_first_idx)
    assert out.shape == (3, 4, 5, 3)
    for b, (start, stop) in enumerate([(0, 2), (2, 2), (2, 4)]):
        expected, _ = ref_to_dense(pages[start:stop].cpu().numpy(), origins[start:stop].numpy(), lo, hi, 9.0)
        np.testing.assert_array_equal(out[b].cpu().numpy(), expected)
        back = tiles.dense_to_tiles(out, origins, tile, lo, 0.0, True, tile_first_idx)[start:stop]
        np.testing.assert_array_equal(back.cpu().numpy(),
                                      ref_to_tiles(out[b].cpu().numpy(), origins[start:stop].numpy(), tile, lo, 0.0,
                                                   True))
    coords = torch.tensor([[0, 1, 1], [1, 1, 1], [2, 2, 3], [2, 0, 0]])
    found, _ = tiles.tiles_lookup(origins, tile, coords.to(device), lo, hi, tile_first_idx)
    assert found.tolist() == [0, -1, 2, 3]
    # many points (the lookup's key -> slot table): each member's own tiles, scanned
    generator = torch.Generator().manual_seed(3)
    many = torch.stack([torch.randint(0, 3, (2000,), generator=generator), torch.randint(-1, 5, (2000,),
                        generator=generator), torch.randint(-1, 6, (2000,), generator=generator)], 1)
    found, _ = tiles.tiles_lookup(origins, tile, many.to(device), lo, hi, tile_first_idx)
    for i, (b, y, x) in enumerate(many.tolist()):
        start, stop = tile_first_idx[b].item(), tile_first_idx[b + 1].item()
        owners = [t for t in range(start, stop) if all(
            o <= v < o + s for v, o, s in zip((y, x), origins[t].tolist(), tile, strict=True))]
        inside = lo[0] <= y < hi[0] and lo[1] <= x < hi[1]
        assert found[i].item() == (owners[0] if inside and owners else -1), (b, y, x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["2d_seed", "2d_overlap_outside", "1d", "3d", "2d_empty"])
@pytest.mark.parametrize("out", ["tiles", "dense"])
def test_correlate_matches_numpy(device, case, out):
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(np.asarray(origins), dtype=torch.long).view(-1, len(lo))
    pages = make_pages(tile, len(origins), (2,), torch.float64).to(device)
    kernel = [3, 5, 1][:len(lo)] if len(lo) > 1 else [5]
    weight = torch.randn(*kernel, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(device)
    result = tiles.tiles_correlate(pages, origins, weight, lo, hi, 0.25, out)
    expected = ref_correlate(pages.cpu().numpy(), origins.numpy(), weight.cpu().numpy(), lo, hi, 0.25, out)
    assert result.shape == expected.shape
    np.testing.assert_allclose(result.cpu().numpy(), expected, rtol=1e-12, atol=1e-9)


def test_seed_box_filter_and_half_precision():
    tile, origins, lo, hi = CASES["2d_seed"]
    origins = torch.tensor(origins)
    pages = torch.rand(3, 8, 8, generator=torch.Generator().manual_seed(0))
    box = np.full((3, 3), 1 / 9)
    dense = tiles.tiles_box_filter(pages, origins, lo, hi, out="dense")
    np.testing.assert_allclose(dense.numpy(), ref_correlate(pages.numpy(), origins.numpy(), box, lo, hi, 0.0, "dense"),
                               rtol=1e-6, atol=1e-6)
    half = tiles.tiles_box_filter(pages.half(), origins, lo, hi)
    assert half.dtype == torch.float16
    np.testing.assert_allclose(half.float().numpy(),
                               ref_correlate(pages.half().numpy(), origins.numpy(), box, lo, hi, 0.0, "tiles"),
                               atol=2e-3)


@pytest.mark.parametrize("fill", [0.0, float("nan")])
def test_from_dense_round_trips(fill):
    dense = torch.full((9, 13, 2), fill)
    dense[0, 0, 1] = 1.0
    dense[8, 12] = 2.0
    dense[4, 5, 0] = 3.0
    pages, origins = tiles.tiles_from_dense(dense, [4, 4], fill, full_min=[-2, 3])
    assert origins.tolist() == [[-2, 3], [2, 7], [6, 15]]
    back = tiles.tiles_to_dense(pages, origins, [-2, 3], [7, 16], fill)
    assert torch.equal(back.nan_to_num(-1), dense.nan_to_num(-1))
    empty_pages, empty_origins = tiles.tiles_from_dense(torch.zeros(5, 5), [2, 2])
    assert empty_pages.shape == (0, 2, 2) and empty_origins.shape == (0, 2)


def ref_cell_lists(origins, tile, lo, hi, members):
    """{member * cells + cell: [tiles overlapping it, ascending]} by a scan of every tile's cells."""
    cells = [-(-(b - a) // s) for a, b, s in zip(lo, hi, tile, strict=True)]
    lists = {}
    for t, (origin, b) in enumerate(zip(origins, members, strict=True)):
        spans = []
        for o, a, s, c in zip(origin, lo, tile, cells, strict=True):
            first, last = max((o - a) // s, 0), min((o - a + s - 1) // s, c - 1)
            spans.append(range(first, last + 1))
        for cell in itertools.product(*spans):
            key = b
            for x, c in zip(cell, cells, strict=True):
                key = key * c + x
            lists.setdefault(key, []).append(t)
    return lists


@pytest.mark.parametrize("bound", ["small", "huge sparse"])
def test_cell_lists_match_a_scan_of_the_tiles(bound):
    # A small bound takes the CPU's counting sort over a dense cell table, a huge sparse one the sort route (the
    # table would not fit); both must give every cell's tiles in ascending order.
    generator = torch.Generator().manual_seed(3)
    tile, lo = [3, 4], [-5, 2]
    hi = [20, 30] if bound == "small" else [2**30, 2**31]
    origins = torch.randint(-9, 28, (60, 2), generator=generator)
    origins[::7] += torch.tensor([2**29, 2**30]) if bound == "huge sparse" else 0
    tile_first_idx = torch.tensor([0, 25, 25, 60])
    members = torch.repeat_interleave(torch.arange(3), tile_first_idx.diff()).tolist()
    keys, first, listed, _ = tiles.tiles_index(origins, tile, lo, hi, tile_first_idx)
    lists = {k: listed[first[i]:first[i + 1]].tolist() for i, k in enumerate(keys.tolist())}
    assert lists == ref_cell_lists(origins.tolist(), tile, lo, hi, members)
    assert keys.tolist() == sorted(lists)


@pytest.mark.parametrize("tile", [[4, 8], [3, 5]], ids=["powers of two", "other sizes"])
@pytest.mark.parametrize("layout", ["one tile per cell", "shared cells"])
def test_cell_lists_of_aligned_and_overlapping_tiles_match_a_scan(tile, layout):
    # Aligned tiles that never share a cell take the one-sweep table; one tile moved onto another's cell sends the
    # same call to the counting sort; tile sizes of powers of two take shifts, others divisions (negative origins:
    # floor, not truncation); an origin 2^63 points below the bound's start takes 128-bit arithmetic.
    generator = torch.Generator().manual_seed(5)
    lo, hi = [-13, 7], [40, 90]
    cells = [-(-(b - a) // s) for a, b, s in zip(lo, hi, tile, strict=True)]
    chosen = torch.randperm(cells[0] * cells[1], generator=generator)[:50]
    origins = torch.stack([chosen // cells[1] * tile[0] + lo[0], chosen % cells[1] * tile[1] + lo[1]], 1)
    origins[3] = torch.tensor([0, -2**63 + 5])  # wholly outside the bound (origin - lo wraps in 64 bits)
    if layout == "shared cells":
        origins[7] = origins[11] + torch.tensor([1, 0])
    keys, first, listed, _ = tiles.tiles_index(origins, tile, lo, hi)
    lists = {k: listed[first[i]:first[i + 1]].tolist() for i, k in enumerate(keys.tolist())}
    assert lists == ref_cell_lists(origins.tolist(), tile, lo, hi, [0] * len(origins))
    assert keys.tolist() == sorted(lists)


def test_a_passed_index_gives_the_same_results():
    tile, origins, lo, hi = CASES["2d_overlap_outside"]
    origins = torch.tensor(origins)
    index = tiles.tiles_index(origins, tile, lo, hi)
    pages = make_pages(tile, len(origins), (), torch.float32)
    assert torch.equal(tiles.tiles_to_dense(pages, origins, lo, hi, -1, index=index),
                       tiles.tiles_to_dense(pages, origins, lo, hi, -1))
    weight = torch.rand(3, 3)
    assert torch.equal(tiles.tiles_correlate(pages, origins, weight, lo, hi, index=index),
                       tiles.tiles_correlate(pages, origins, weight, lo, hi))


# ---- autograd ----

def ref_halo_backward(grad_halo, origins, radius, lo, hi):
    """Loop form of the adjoint of tiles_halo: a point its tile owns (ref_to_dense's first-wins owner map) gets the sum
    of the halo entries that read it, in box order; every other page point gets 0."""
    grad_halo, origins = np.asarray(grad_halo), np.asarray(origins)
    dims = len(lo)
    box = grad_halo.shape[1:1 + dims]
    tile = [b - 2 * r for b, r in zip(box, radius, strict=True)]
    owners_of = ref_to_dense(np.zeros((len(origins), *tile)), origins, lo, hi, 0.0)[1]
    out = np.zeros((len(origins), *tile, *grad_halo.shape[1 + dims:]), dtype=grad_halo.dtype)
    for t in range(len(origins)):
        for p in np.ndindex(*tile):
            g = [origins[t][d] + p[d] for d in range(dims)]
            if not all(lo[d] <= g[d] < hi[d] for d in range(dims)):
                continue
            if owners_of[tuple(g[d] - lo[d] for d in range(dims))] != t:
                continue
            for reader in range(len(origins)):
                q = [g[d] - origins[reader][d] + radius[d] for d in range(dims)]
                if all(0 <= q[d] < box[d] for d in range(dims)):
                    out[t][p] += grad_halo[reader][tuple(q)]
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["2d_seed", "2d_aligned_repeated", "2d_overlap_outside", "1d", "3d", "2d_empty"])
def test_halo_backward_is_the_adjoint_of_the_halo(device, case):
    """tiles_halo_backward against the loop reference, and <halo(P), G> == <P, halo_backward(G)> (fill 0)."""
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(origins, dtype=torch.long)
    radius = [1] + [2] * (len(lo) - 1)
    generator = torch.Generator().manual_seed(3)
    box = [s + 2 * r for s, r in zip(tile, radius, strict=True)]
    grad_halo = torch.randn(len(origins), *box, 2, dtype=torch.float64, generator=generator).to(device)
    actual = ops.tiles_halo_backward(grad_halo, origins.to(device), radius, lo, hi)
    np.testing.assert_allclose(actual.cpu().numpy(), ref_halo_backward(grad_halo.cpu(), origins, radius, lo, hi),
                               rtol=1e-12, atol=1e-12)
    pages = torch.randn(len(origins), *tile, 2, dtype=torch.float64, generator=generator).to(device)
    halo = ops.tiles_halo(pages, origins.to(device), radius, lo, hi)
    torch.testing.assert_close((halo * grad_halo).sum(), (pages * actual).sum(), rtol=1e-12, atol=1e-12)


def test_halo_backward_of_batches_stays_within_each_member():
    lo, hi, radius = [0, 0], [4, 5], [1, 1]  # tiles of 2 x 2: boxes of 4 x 4
    origins = torch.tensor([[0, 0], [1, 1], [0, 0], [1, 2]])
    tile_first_idx = torch.tensor([0, 2, 4])
    grad_halo = torch.randn(4, 4, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    actual = ops.tiles_halo_backward(grad_halo, origins, radius, lo, hi, tile_first_idx)
    for start, stop in [(0, 2), (2, 4)]:
        np.testing.assert_allclose(actual[start:stop].numpy(),
                                   ref_halo_backward(grad_halo[start:stop], origins[start:stop], radius, lo, hi),
                                   rtol=1e-12, atol=1e-12)


def leaf(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(sum(shape))
                       ).requires_grad_()


@pytest.mark.parametrize("case", ["2d_overlap_outside", "1d", "3d"])
def test_gradients_of_the_movers_and_correlate(case):
    tile, origins, lo, hi = CASES[case]
    origins = torch.tensor(origins)
    extent = [b - a for a, b in zip(lo, hi, strict=True)]
    pages = leaf(len(origins), *tile, 2)
    dense = leaf(*extent, 2)
    weight = leaf(*([3] * len(lo)), 2)
    for reduce in ("first", "sum"):
        fn = lambda p, reduce=reduce: tiles.tiles_to_dense(p, origins, lo, hi, 1.5, reduce)  # noqa: E731
        assert gradcheck(fn, (pages,)) and gradgradcheck(fn, (pages,))
    for owned in (False, True):
        fn = lambda d, owned=owned: tiles.dense_to_tiles(d, origins, tile, lo, 1.5, owned)  # noqa: E731
        assert gradcheck(fn, (dense,)) and gradgradcheck(fn, (dense,))
    for out in ("tiles", "dense"):
        fn = lambda p, w, out=out: tiles.tiles_correlate(p, origins, w, lo, hi, 0.5, out)  # noqa: E731
        assert gradcheck(fn, (pages, weight)) and gradgradcheck(fn, (pages, weight))
    assert gradcheck(lambda d: tiles.tiles_from_dense(d, tile)[0], (leaf(*extent, 2),))


DEPTHWISE_CASES = {  # spatial size S, kernel K (padding 0 .. K - 1 each)
    "1d": ([11], [5]), "2d": ([9, 10], [3, 3]), "2d_wide_rows": ([4, 37], [3, 5]), "2d_1x1": ([6, 7], [1, 1]),
    "3d": ([5, 6, 7], [3, 1, 3]), "2d_kernel_as_large_as_input": ([3, 5], [3, 5]),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", DEPTHWISE_CASES)
def test_depthwise_correlate_matches_torch_convolution(device, case):
    """tiles_depthwise_correlate (channels last, the kernel inside tiles_correlate) against torch's depthwise
    convolution on channels-first copies, every padding 0 .. K - 1; its gradients by gradcheck."""
    size, taps = DEPTHWISE_CASES[case]
    dims, channels = len(size), 3
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[dims - 1]
    x = leaf(2, *size, channels).to(device)
    w = leaf(*taps, channels).to(device)
    kernel = w.detach().movedim(-1, 0).unsqueeze(1)  # (C, 1, *K)
    for pad in itertools.product(*[range(k) for k in taps]):
        got = ops.tiles_depthwise_correlate(x.detach(), w.detach(), list(pad))
        expected = conv(x.detach().movedim(-1, 1), kernel, padding=pad, groups=channels).movedim(1, -1)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    if device == "cpu":
        full = [k - 1 for k in taps]
        fn = lambda x, w: ops.tiles_depthwise_correlate(x, w, full)  # noqa: E731
        assert gradcheck(fn, (x, w)) and gradgradcheck(fn, (x, w))


@pytest.mark.parametrize("out_kind", ["tiles", "dense"])
def test_gradients_are_deterministic(out_kind):
    """Pages' and weight's gradients are bitwise identical across runs and thread counts (issue 13: the weight's is a
    fixed-order segment_sum per kernel tap, where torch's convolution backward reduces in a thread-dependent order)."""
    generator = torch.Generator().manual_seed(0)
    origins = torch.randint(-8, 120, (300, 2), generator=generator)
    pages = torch.randn(300, 8, 8, 3, generator=generator, requires_grad=True)
    weight = torch.randn(3, 3, 3, generator=generator, requires_grad=True)
    grads = []
    threads_before = torch.get_num_threads()
    try:
        for threads in (1, 2, 2, 3):
            torch.set_num_threads(threads)
            out = tiles.tiles_correlate(pages, origins, weight, [0, 0], [128, 128], out=out_kind)
            grads.append(torch.autograd.grad((out * out).sum(), (pages, weight)))
    finally:
        torch.set_num_threads(threads_before)
    for other in grads[1:]:
        assert torch.equal(grads[0][0], other[0]) and torch.equal(grads[0][1], other[1])


# ---- registration, compile ----

def tiles_samples():
    """(op, args) per tiles op, for opcheck and the every-op-has-a-sample check."""
    tile, origins, lo, hi = CASES["2d_overlap_outside"]
    origins = torch.tensor(origins)
    pages = leaf(len(origins), *tile, 2)
    index = list(tiles.tiles_index(origins, tile, lo, hi))
    return [
        (ops.tiles_to_dense, (pages, origins, lo, hi, 0.0, "first", None, None)),
        (ops.tiles_to_dense, (pages, origins, lo, hi, 0.0, "sum", None, index)),
        (ops.dense_to_tiles, (leaf(7, 9, 2), origins, tile, lo, 0.0, True, None, index)),
        (ops.tiles_halo, (pages, origins, [1, 2], lo, hi, 0.0, None, None)),
        (ops.tiles_halo_backward, (leaf(len(origins), 5, 8, 2), origins, [1, 2], lo, hi, None, index)),
        (ops.tiles_correlate, (pages, origins, leaf(3, 3, 2), lo, hi, 0.0, "tiles", None, index)),
        (ops.tiles_from_dense, (leaf(7, 9, 2), [4, 4], 0.0, None)),
        (ops.tiles_depthwise_correlate, (leaf(3, 6, 5, 2), leaf(3, 3, 2), [1, 2])),
    ]


@pytest.mark.parametrize("op,args", tiles_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_opcheck(op, args):
    if op is ops.tiles_from_dense:  # data-dependent T: the fake tensor checks, not the AOT ones
        opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
    else:
        opcheck(op, args)


def test_opcheck_integer_ops_and_compile():
    tile, origins, lo, hi = CASES["2d_overlap_outside"]
    origins = torch.tensor(origins)
    pages = leaf(len(origins), *tile, 2)
    index = list(tiles.tiles_index(origins, tile, lo, hi))
    opcheck(ops.tiles_lookup, (origins, tile, torch.tensor([[0, 1], [3, 3]]), lo, hi, None, None),
            test_utils=("test_schema", "test_faketensor"))
    opcheck(ops.tiles_index, (origins, tile, lo, hi, None), test_utils=("test_schema", "test_faketensor"))

    def box(pages, origins, index):
        return tiles.tiles_box_filter(pages, origins, lo, hi, index=index).relu().sum()

    for dynamic in (False, True):
        torch._dynamo.reset()
        got = torch.compile(box, fullgraph=True, dynamic=dynamic)(pages, origins, index)
        assert torch.allclose(got, box(pages, origins, index))


def test_compile_correlate_backward_matches_eager():
    """The weight gradient's C++ autograd Function (segment_sum per tap) and tiles_halo_backward trace under
    torch.compile with dynamic shapes."""
    tile, origins, lo, hi = CASES["2d_overlap_outside"]
    origins = torch.tensor(origins)
    pages, weight = leaf(len(origins), *tile, 2), leaf(3, 3, 2)

    def loss(p, w):
        return (tiles.tiles_correlate(p, origins, w, lo, hi) ** 2).sum()

    expected = torch.autograd.grad(loss(pages, weight), (pages, weight))
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(loss, fullgraph=True, dynamic=True)(pages, weight), (pages, weight))
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_compile_data_dependent_tiles_and_batches():
    """tiles_from_dense's tile count is data-dependent (an unbacked size) and flows into the other ops."""
    dense = torch.zeros(9, 13)
    dense[1, 1], dense[8, 12] = 1.0, 2.0

    def round_trip(d):
        pages, origins = tiles.tiles_from_dense(d, [4, 4])
        return tiles.tiles_to_dense(pages, origins, [0, 0], [9, 13]), origins.sum()

    tile_first_idx = torch.tensor([0, 1, 2])

    def batched(pages, origins):
        return tiles.tiles_to_dense(pages, origins, [0, 0], [4, 4], -1.0, tile_first_idx=tile_first_idx)

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        got = torch.compile(round_trip, fullgraph=True)(dense)
    assert torch.equal(got[0], dense) and got[1].item() == 8 + 12
    pages, origins = torch.randn(2, 2, 2), torch.tensor([[0, 0], [1, 1]])
    torch._dynamo.reset()
    assert torch.equal(torch.compile(batched, fullgraph=True)(pages, origins), batched(pages, origins))
