"""TorchScript: a scripted module calling torch.ops.torch_ragged ops, saved and loaded back.

examples/cpp_app runs the same saved module from C++ (scripts/test.sh)."""

import os
import sys
import warnings

import torch
import torch_ragged

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torchscript"))
import ragged_module  # noqa: E402


def test_scripted_module_round_trips_through_a_file(tmp_path):
    path = str(tmp_path / "model.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        ragged_module.save(path)
        loaded = torch.jit.load(path)
    packed = torch.randn(6, 3)
    first_idx = torch.tensor([0, 1, 1, 6])
    sums, scaled = loaded(packed, first_idx)
    eager_sums, eager_scaled = ragged_module.RaggedSumAndScale()(packed, first_idx)
    # torch's sum over the zero-padded rows and segment_sum add in different orders: a sum that nearly cancels
    # (-0.001 from terms of ~1) differs in its last bits, so the tolerance is absolute, at the terms' scale.
    torch.testing.assert_close(sums, torch_ragged.segment_sum(packed, first_idx), rtol=1e-5, atol=1e-5)
    assert torch.equal(sums, eager_sums)
    assert torch.equal(scaled, packed * 2)
    assert torch.equal(scaled, eager_scaled)


def pad_reflect(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.torch_ragged.pad(x, [1, 2, 0, 3], "reflect", reflect_type="odd")


def test_scripted_function_calls_pad():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        scripted = torch.jit.script(pad_reflect)
    x = torch.randn(3, 4)
    torch.testing.assert_close(scripted(x), torch_ragged.pad(x, ((1, 2), (0, 3)), "reflect", reflect_type="odd"))


def batch_and_segment_by_public_names(packed: torch.Tensor, lengths: torch.Tensor, members: list[torch.Tensor]):
    """Every public batch and segment function, called by its public name with non-default arguments."""
    shape_per_tensor = torch_ragged.get_shape_per_tensor(members)
    first_idx = torch_ragged.get_first_idx(lengths, False)
    padded = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, -1.5, [5], "left")
    listed, _ = torch_ragged.list_to_padded(members, 2, None, "right")
    repacked, _ = torch_ragged.list_to_packed(members)
    back = torch_ragged.padded_to_packed(padded, shape_per_tensor, "left", 6)
    views = torch_ragged.packed_to_list(packed, shape_per_tensor, first_idx)
    unpadded = torch_ragged.padded_to_list(padded, shape_per_tensor, "left")
    tiled = torch_ragged.tile_to_packed(lengths.float(), lengths, 6)
    longest = torch_ragged.fill_max_shape(shape_per_tensor, [-1])
    columns = packed.t().contiguous()  # the rows along dim 1
    reductions = [torch_ragged.segment_sum(columns, first_idx, 1), torch_ragged.segment_mean(packed, first_idx),
                  torch_ragged.segment_max(columns, first_idx, -1).values,
                  torch_ragged.segment_min(packed, first_idx).arg.float(),
                  torch_ragged.segment_softmax(columns, first_idx, 1),
                  torch_ragged.segment_log_softmax(packed, first_idx),
                  torch_ragged.segment_cumsum(columns, first_idx, 1, True, True),
                  torch_ragged.segment_cumprod(packed, first_idx, 0, False, True),
                  torch_ragged.segment_cummax(columns, first_idx, 1, True).arg.float(),
                  torch_ragged.segment_cummin(packed, first_idx).values,
                  torch_ragged.segment_logcumsumexp(columns, first_idx, -1, False)]
    rows = [torch_ragged.segment_arange(first_idx, 6), torch_ragged.segment_ids(first_idx, None),
            torch_ragged.segment_expand(lengths, first_idx, 6)]
    picked, picked_first_idx = torch_ragged.ragged_index_select(packed, first_idx, torch.tensor([2, 0]), None)
    return (padded, listed, repacked, back, views, unpadded, tiled, longest, reductions, rows, picked,
            picked_first_idx)


def test_the_public_batch_and_segment_functions_script_and_match_eager():
    """A TorchScript user calls the public Python functions, as torch_scatter's users do; the scripted results are
    the eager ones (each compared element for element below)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        scripted = torch.jit.script(batch_and_segment_by_public_names)
    members = [torch.randn(n, 2) for n in (3, 1, 2)]
    packed, lengths = torch.cat(members), torch.tensor([3, 1, 2])
    eager = batch_and_segment_by_public_names(packed, lengths, members)
    compiled = scripted(packed, lengths, members)

    def flatten(value):
        return [t for v in value for t in flatten(v)] if isinstance(value, (list, tuple)) else [value]

    eager_tensors, scripted_tensors = flatten(eager), flatten(compiled)
    assert len(eager_tensors) == len(scripted_tensors) == 28
    for a, b in zip(eager_tensors, scripted_tensors, strict=True):
        assert torch.equal(a, b)
    # and the eager results are the functions' own, checked against plain torch on a few
    assert torch.equal(eager[0][0, -3:], members[0]) and bool((eager[0][0, :2] == -1.5).all())
    assert torch.equal(eager[8][0], torch.stack([m.sum(0) for m in members], 1))
    assert torch.equal(eager[10], torch.cat([members[2], members[0]]))


def tiles_by_public_names(pages: torch.Tensor, origins: torch.Tensor, coords: torch.Tensor):
    index = list(torch_ragged.tiles.tiles_index(origins, [4, 4], [0, 0], [12, 12], None))
    dense = torch_ragged.tiles.tiles_to_dense(pages, origins, [0, 0], [12, 12], -1.0, "first", None, index)
    summed = torch_ragged.tiles.tiles_to_dense(pages, origins, [0, 0], [12, 12], 0, "sum")
    back = torch_ragged.tiles.dense_to_tiles(dense, origins, [4, 4], [0, 0], 0.5, True, None, index)
    tile, local = torch_ragged.tiles.tiles_lookup(origins, [4, 4], coords, [0, 0], [12, 12], None, index)
    correlated = torch_ragged.tiles.tiles_correlate(pages, origins, torch.ones(3, 3), [0, 0], [12, 12], 0.0, "dense")
    boxed = torch_ragged.tiles.tiles_box_filter(pages, origins, [0, 0], [12, 12], 5, 1.0, "tiles")
    cut_pages, cut_origins = torch_ragged.tiles.tiles_from_dense(summed, [4, 4], 0, [0, 0])
    return [dense, summed, back, tile, local, correlated, boxed, cut_pages, cut_origins]


def test_the_public_tiles_functions_script_and_match_eager():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        scripted = torch.jit.script(tiles_by_public_names)
    pages, origins = torch.rand(3, 4, 4), torch.tensor([[0, 0], [2, 2], [8, 5]])  # tiles 0 and 1 overlap
    coords = torch.tensor([[3, 3], [11, 0], [9, 6]])
    eager = tiles_by_public_names(pages, origins, coords)
    for a, b in zip(eager, scripted(pages, origins, coords), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(eager[0][2:4, 2:4], pages[0, 2:4, 2:4])  # first wins where tiles 0 and 1 overlap
    assert eager[3].tolist() == [0, -1, 2]
