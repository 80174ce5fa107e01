"""Bad input to the tiles family: clear errors naming the op and the argument; tiles outside the bound are legal."""

import pytest
import torch
from expect import raises
from torch_ragged import tiles

PAGES = torch.zeros(2, 4, 4)
ORIGINS = torch.tensor([[0, 0], [2, 2]])


def test_geometry_checks():
    name = "torch_ragged.tiles_to_dense"
    with raises(ValueError, name, "full_min < full_max in every dim"):
        tiles.tiles_to_dense(PAGES, ORIGINS, [0, 5], [8, 5])
    with raises(ValueError, name, "full_min must have one entry per tile dim (2)"):
        tiles.tiles_to_dense(PAGES, ORIGINS, [0], [8, 8])
    with raises(ValueError, "torch_ragged.dense_to_tiles", "tile sizes must be >= 1"):
        tiles.dense_to_tiles(torch.zeros(8, 8), ORIGINS, [4, 0], [0, 0])
    with raises(ValueError, "torch_ragged.tiles_index", "tiles have 1, 2 or 3 dims"):
        tiles.tiles_index(torch.zeros(1, 4, dtype=torch.long), [2, 2, 2, 2], [0] * 4, [4] * 4)


def test_pages_and_origins_must_agree():
    name = "torch_ragged.tiles_to_dense"
    with raises(ValueError, name, "pages and origins disagree: 3 pages, 2 origins"):
        tiles.tiles_to_dense(torch.zeros(3, 4, 4), ORIGINS, [0, 0], [8, 8])
    with raises(ValueError, name, "pages must be (T, *tile_size (2 dims), *F)"):
        tiles.tiles_to_dense(torch.zeros(2, 4), ORIGINS, [0, 0], [8, 8])
    with raises(TypeError, name, "origins must be an integer"):
        tiles.tiles_to_dense(PAGES, ORIGINS.float(), [0, 0], [8, 8])
    with raises(ValueError, name, 'reduce must be "first" or "sum"'):
        tiles.tiles_to_dense(PAGES, ORIGINS, [0, 0], [8, 8], reduce="max")
    with raises(TypeError, name, 'reduce="sum" needs numbers'):
        tiles.tiles_to_dense(PAGES.bool(), ORIGINS, [0, 0], [8, 8], reduce="sum")
    with raises(ValueError, name, "fill_value 300 does not fit dtype Byte"):
        tiles.tiles_to_dense(PAGES.byte(), ORIGINS, [0, 0], [8, 8], 300)
    with raises(ValueError, "torch_ragged.segment_ids", "first_idx"):
        tiles.tiles_to_dense(PAGES, ORIGINS, [0, 0], [8, 8], tile_first_idx=torch.tensor([0, 1]))


def test_correlate_weight_checks():
    name = "torch_ragged.tiles_correlate"
    with raises(ValueError, name, "odd size in every dim"):
        tiles.tiles_correlate(PAGES, ORIGINS, torch.ones(2, 3), [0, 0], [8, 8])
    with raises(ValueError, name, "weight must be (*kernel (2 dims), *F = [])"):
        tiles.tiles_correlate(PAGES, ORIGINS, torch.ones(3, 3, 3), [0, 0], [8, 8])
    with raises(TypeError, name, "share a floating dtype"):
        tiles.tiles_correlate(PAGES.long(), ORIGINS, torch.ones(3, 3), [0, 0], [8, 8])
    with raises(ValueError, name, 'out must be "tiles" or "dense"'):
        tiles.tiles_correlate(PAGES, ORIGINS, torch.ones(3, 3), [0, 0], [8, 8], out="both")
    with raises(ValueError, "torch_ragged.tiles_box_filter", "size must be an odd int"):
        tiles.tiles_box_filter(PAGES, ORIGINS, [0, 0], [8, 8], size=2)


def test_depthwise_correlate_checks():
    name, ops = "torch_ragged.tiles_depthwise_correlate", torch.ops.torch_ragged
    x, w = torch.zeros(2, 5, 6, 3), torch.ones(3, 3, 3)
    with raises(ValueError, name, "input must be (N, *S, C) and weight (*K, C) with 2 spatial dims"):
        ops.tiles_depthwise_correlate(x, torch.ones(3, 3, 4), [0, 0])
    with raises(ValueError, name, "padding must have 1, 2 or 3 entries"):
        ops.tiles_depthwise_correlate(x, w, [0, 0, 0, 0])
    with raises(ValueError, name, "padding must be 0 <= p < kernel size in every dim"):
        ops.tiles_depthwise_correlate(x, w, [3, 0])
    with raises(ValueError, name, "is smaller than the kernel"):
        ops.tiles_depthwise_correlate(torch.zeros(2, 1, 6, 3), w, [0, 0])
    with raises(TypeError, name, "float32 or float64"):
        ops.tiles_depthwise_correlate(x.half(), w.half(), [0, 0])


def test_lookup_and_index_checks():
    with raises(ValueError, "torch_ragged.tiles_lookup", "coords must be (N, 2)"):
        tiles.tiles_lookup(ORIGINS, [4, 4], torch.zeros(3, 3, dtype=torch.long), [0, 0], [8, 8])
    with raises(IndexError, "torch_ragged.tiles_lookup", "coords[:, 0] (the member) must be in [0, 1)"):
        tiles.tiles_lookup(ORIGINS, [4, 4], torch.tensor([[1, 0, 0]]), [0, 0], [8, 8],
                           tile_first_idx=torch.tensor([0, 2]))
    keys, first, listed, fingerprint = tiles.tiles_index(ORIGINS, [4, 4], [0, 0], [8, 8])  # 4 cells, 5 entries
    assert keys.tolist() == [0, 1, 2, 3] and first.tolist() == [0, 2, 3, 4, 5]
    bad = [
        (torch.tensor([0, 5]), torch.tensor([0, 1, 2]), torch.tensor([0, 7])),  # a tile id out of range
        (torch.tensor([1, 0, 2, 3]), first, listed),  # keys not rising
        (torch.tensor([0, 1, 2, 4]), first, listed),  # a key beyond the 4 cells
        (torch.tensor([-1, 1, 2, 3]), first, listed),  # a negative key
        (keys, torch.tensor([1, 2, 3, 4, 5]), listed),  # first not starting at 0
        (keys, torch.tensor([0, 3, 2, 4, 5]), listed),  # first falling
        (keys, torch.tensor([0, 2, 3, 4, 4]), listed),  # first not ending at the entry count
        (keys, first[:-1], listed),  # first not one longer than keys
        (keys, first, torch.tensor([0, -1, 1, 1, 1])),  # a negative tile id
    ]
    for index in bad:  # damaged lists under the right fingerprint: the structure check catches them
        with raises(ValueError, "torch_ragged.tiles_to_dense", "index does not fit these tiles"):
            tiles.tiles_to_dense(PAGES, ORIGINS, [0, 0], [8, 8], index=(*index, fingerprint))
    with raises(ValueError, "torch_ragged.tiles_to_dense", "index must be the 4 tensors"):
        tiles.tiles_to_dense(PAGES, ORIGINS, [0, 0], [8, 8], index=bad[0][:2])


def test_an_index_built_for_other_tiles_or_geometry_is_refused():
    """An index of other origins, tile size, bound or members reads the wrong owners (a wrong field, no error):
    each op that takes index= refuses it by its fingerprint."""
    origins = torch.tensor([[0, 0], [1, 1]])
    pages = torch.arange(8.0).view(2, 2, 2)
    lo, hi = [0, 0], [3, 3]
    right = tiles.tiles_index(origins, [2, 2], lo, hi)
    wrong = {
        "other origins": tiles.tiles_index(torch.tensor([[1, 1], [0, 0]]), [2, 2], lo, hi),
        "other tile size": tiles.tiles_index(origins, [2, 3], lo, hi),
        "other bound": tiles.tiles_index(origins, [2, 2], lo, [3, 4]),
        "other members": tiles.tiles_index(origins, [2, 2], lo, hi, torch.tensor([0, 1, 2])),
        "fewer tiles": tiles.tiles_index(origins[:1], [2, 2], lo, hi),
    }
    dense = tiles.tiles_to_dense(pages, origins, lo, hi)
    calls = {
        "tiles_to_dense": lambda index: tiles.tiles_to_dense(pages, origins, lo, hi, index=index),
        "dense_to_tiles": lambda index: tiles.dense_to_tiles(dense, origins, [2, 2], lo, owned_only=True,
                                                             index=index),
        "tiles_lookup": lambda index: tiles.tiles_lookup(origins, [2, 2], torch.tensor([[1, 1]]), lo, hi,
                                                         index=index),
        "tiles_halo": lambda index: torch.ops.torch_ragged.tiles_halo(pages, origins, [1, 1], lo, hi, 0, None,
                                                                      list(index)),
        "tiles_correlate": lambda index: tiles.tiles_box_filter(pages, origins, lo, hi, index=index),
    }
    for name, call in calls.items():
        call(right)  # accepted
        for why, index in wrong.items():
            with raises(ValueError, f"torch_ragged.{name}", "index was built for other tiles"):
                call(index)
                pytest.fail(f"{name} accepted an index of {why}")


def test_halo_boxes_beyond_int64_are_refused():
    """origin - radius of an origin near -2**63 wrapped around and the halo read uninitialised memory."""
    pages = torch.ones(1, 2, 2)
    for origins in (torch.tensor([[-2**63, 0]]), torch.tensor([[2**63 - 3, 0]])):
        with raises(ValueError, "torch_ragged.tiles_halo", "put a box outside the int64 range"):
            torch.ops.torch_ragged.tiles_halo(pages, origins, [1, 1], [0, 0], [4, 4])
        with raises(ValueError, "torch_ragged.tiles_correlate", "put a box outside the int64 range"):
            tiles.tiles_box_filter(pages, origins, [0, 0], [4, 4])
        with raises(ValueError, "torch_ragged.tiles_halo_backward", "put a box outside the int64 range"):
            torch.ops.torch_ragged.tiles_halo_backward(torch.ones(1, 4, 4), origins, [1, 1], [0, 0], [4, 4])
    # tiles_to_dense of the same tiles (no halo) stays legal: they are simply outside the bound
    assert tiles.tiles_to_dense(pages, torch.tensor([[-2**63, 0]]), [0, 0], [4, 4], -1.0).eq(-1).all()


def test_tiles_outside_the_bound_are_legal():
    origins = torch.tensor([[-100, -100], [6, 6], [2**40, 0]])
    pages = torch.ones(3, 4, 4)
    dense = tiles.tiles_to_dense(pages, origins, [0, 0], [8, 8], -1.0)
    assert dense[6:, 6:].eq(1).all() and dense[:6].eq(-1).all()
    back = tiles.dense_to_tiles(dense, origins, [4, 4], [0, 0], 5.0)
    assert back[0].eq(5).all() and back[2].eq(5).all() and back[1, :2, :2].eq(1).all()
    found, _ = tiles.tiles_lookup(origins, [4, 4], torch.tensor([[7, 7], [-99, -99]]), [0, 0], [8, 8])
    assert found.tolist() == [1, -1]


def test_huge_halo_radius_and_bound_origin_are_overflow_checked():
    # Found by the fuzz under UBSan: 2 * radius and full_min + extent overflowed int64 (undefined behaviour).
    halo = torch.ops.torch_ragged.tiles_halo
    with raises(ValueError, "torch_ragged.tiles_halo", "would have more than 2^63 - 1 points"):
        halo(PAGES, ORIGINS, [2**62, 1], [0, 0], [8, 8])
    with raises(ValueError, "torch_ragged.tiles_halo", "one halo page would have more than 2^63 - 1 elements"):
        halo(torch.zeros(0, 4, 4, 8), ORIGINS[:0], [2**30, 2**30], [0, 0], [8, 8])  # 2^62 points x 8
    with raises(ValueError, "torch_ragged.dense_to_tiles", "plus the extent of dense"):
        tiles.dense_to_tiles(torch.zeros(8, 8), ORIGINS, [4, 4], [2**63 - 4, 0])


def test_shape_queries_with_a_radius_of_the_wrong_length_name_the_argument():
    pages, origins = torch.zeros(1, 2, 2, device="meta"), torch.zeros(1, 2, dtype=torch.long, device="meta")
    with raises(ValueError, "torch_ragged.tiles_halo", "radius must have one entry per tile dim (2), got [1]"):
        torch.ops.torch_ragged.tiles_halo(pages, origins, [1], [0, 0], [4, 4])
    with raises(ValueError, "torch_ragged.tiles_halo_backward", "radius must have one entry per tile dim (2)"):
        torch.ops.torch_ragged.tiles_halo_backward(torch.zeros(1, 4, 4, device="meta"), origins, [1, 1, 1], [0, 0],
                                                   [4, 4])


def test_tiles_whose_box_passes_int64_are_refused_and_far_negative_ones_work():
    """Found by the family fuzz under UBSan: origin + p wrapped for an origin near 2^63 - 1, and lo - (origin + p)
    overflowed for an origin of -2^63 (dense_to_tiles)."""
    dense = torch.arange(5.0)
    for op, call in {
        "dense_to_tiles": lambda o: tiles.dense_to_tiles(dense, o, [2], [-3], -1.0, owned_only=True),
        "tiles_to_dense": lambda o: tiles.tiles_to_dense(torch.ones(len(o), 2), o, [-3], [2]),
        "tiles_lookup": lambda o: tiles.tiles_lookup(o, [2], torch.tensor([[0]]), [-3], [2]),
        "tiles_index": lambda o: tiles.tiles_index(o, [2], [-3], [2]),
    }.items():
        with raises(ValueError, f"torch_ragged.{op}", "put a box outside the int64 range"):
            call(torch.tensor([[2**63 - 2], [0]]))
    far = tiles.dense_to_tiles(dense, torch.tensor([[-2**63], [-3]]), [1], [-1], -1.0)
    assert far.flatten().tolist() == [-1.0, -1.0]  # both outside the bound [-1, 4): the fill value
