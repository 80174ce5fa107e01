"""torch_ragged.distributed on gloo, 127.0.0.1, world sizes 2 and 3 (issue 14). One spawn per world size runs every
check below on every rank (distributed_harness.py); each rank builds every rank's data from per-rank seeds, so the
references (plain concatenations, loops) are computed in one process without any collective."""

import pytest
import torch
import torch_ragged
from distributed_harness import run_on_ranks
from torch_ragged.distributed import ragged_all_gather, ragged_all_to_all, rebalance

CASES = {  # name: (feature shape, dtype, first_idx dtype, rank holding no member)
    "float_rows": ((3,), torch.float32, torch.long, None),
    "no_feature_int32_offsets": ((), torch.float64, torch.int32, None),
    "several_feature_dims_rank1_empty": ((2, 3), torch.float32, torch.long, 1),
    "int64": ((4,), torch.int64, torch.long, 0),
    "bool": ((2,), torch.bool, torch.long, None),
}


def rank_batch(rank, case, max_len=5):
    """Rank `rank`'s packed batch for `case`: seeded lengths (empty members included) and values."""
    feature, dtype, index_dtype, empty_rank = CASES[case]
    g = torch.Generator().manual_seed(1000 * list(CASES).index(case) + rank)
    members = 0 if rank == empty_rank else int(torch.randint(1, 6, (), generator=g))
    lengths = torch.randint(0, max_len + 1, (members,), generator=g)
    rows = int(lengths.sum())
    values = torch.randn(rows, *feature, generator=g, dtype=torch.float64)
    values = (values > 0) if dtype == torch.bool else (values * 10).to(dtype)
    first_idx = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(index_dtype)
    return values, first_idx


def members_of(values, first_idx):
    return [values[int(first_idx[i]):int(first_idx[i + 1])] for i in range(len(first_idx) - 1)]


def weights(rank, shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed * 97 + rank), dtype=torch.float64)


def assert_members_equal(got_values, got_first_idx, expected_members):
    got = members_of(got_values, got_first_idx)
    assert len(got) == len(expected_members)
    for g, e in zip(got, expected_members, strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e)


# ---- checks, run on every rank ----

def check_all_gather(rank, world):
    for case in CASES:
        values, first_idx = rank_batch(rank, case)
        got_values, got_first_idx = ragged_all_gather(values, first_idx)
        expected = [m for r in range(world) for m in members_of(*rank_batch(r, case))]
        assert_members_equal(got_values, got_first_idx, expected)
        assert got_first_idx[-1] == got_values.shape[0]


def check_all_gather_async(rank, world):
    values, first_idx = rank_batch(rank, "float_rows")
    work = ragged_all_gather(values, first_idx, async_op=True)
    got_values, got_first_idx = work.wait()
    assert work.is_completed()
    assert_members_equal(got_values, got_first_idx, [m for r in range(world) for m in
                                                     members_of(*rank_batch(r, "float_rows"))])


def check_all_gather_ragged_tensor_with_two_ragged_dims(rank, world):
    def images(r):
        g = torch.Generator().manual_seed(50 + r)
        return [torch.randn(int(torch.randint(0, 4, (), generator=g)), int(torch.randint(1, 4, (), generator=g)), 3,
                            generator=g) for _ in range(r + 1)]

    gathered = ragged_all_gather(torch_ragged.RaggedTensor.from_list(images(rank), ragged_dims=2))
    assert isinstance(gathered, torch_ragged.RaggedTensor)
    expected = [image for r in range(world) for image in images(r)]
    got = gathered.list()
    assert len(got) == len(expected) and all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def check_all_gather_backward(rank, world):
    values, first_idx = rank_batch(rank, "float_rows")
    values = values.double().requires_grad_()
    gathered, _ = ragged_all_gather(values, first_idx)
    (gathered * weights(rank, gathered.shape, seed=1)).sum().backward()
    # rank r's rows sit at the same place in every rank's gathered tensor; each rank weighs them with its own weights
    start = sum(rank_batch(r, "float_rows")[0].shape[0] for r in range(rank))
    expected = sum(weights(q, gathered.shape, seed=1)[start:start + values.shape[0]] for q in range(world))
    torch.testing.assert_close(values.grad, expected)


def destinations(rank, members, world, seed):
    return torch.randint(0, world, (members,), generator=torch.Generator().manual_seed(seed * 31 + rank))


def check_all_to_all(rank, world):
    for case in CASES:
        for seed in (0, 1):
            values, first_idx = rank_batch(rank, case)
            dest = destinations(rank, len(first_idx) - 1, world, seed) if seed else torch.zeros(len(first_idx) - 1,
                                                                                                 dtype=torch.long)
            result = ragged_all_to_all(values, first_idx, dest)
            expected, sources, indices = [], [], []
            for r in range(world):  # every rank's members bound for this one, source by source, in order
                r_values, r_first_idx = rank_batch(r, case)
                r_dest = destinations(r, len(r_first_idx) - 1, world, seed) if seed else torch.zeros(
                    len(r_first_idx) - 1, dtype=torch.long)
                for i, member in enumerate(members_of(r_values, r_first_idx)):
                    if int(r_dest[i]) == rank:
                        expected.append(member)
                        sources.append(r)
                        indices.append(i)
            assert_members_equal(result.packed, result.first_idx, expected)
            assert result.source_rank.tolist() == sources and result.source_index.tolist() == indices


def check_all_to_all_ragged_tensor_and_back(rank, world):
    values, first_idx = rank_batch(rank, "several_feature_dims_rank1_empty")
    r = torch_ragged.RaggedTensor.from_packed(values, first_idx)
    dest = destinations(rank, len(r), world, seed=5)
    there = ragged_all_to_all(r, dest=dest)
    back = ragged_all_to_all(there.packed, dest=there.source_rank)  # the mapping back
    # they return grouped by the rank they had gone to, each group in the original order
    original = torch.argsort(dest, stable=True)
    returned, members = back.packed.list(), r.list()
    assert len(returned) == len(members)
    for j, i in enumerate(original.tolist()):
        assert torch.equal(returned[j], members[i])


def check_all_to_all_backward(rank, world):
    def batch(r):
        v, f = rank_batch(r, "float_rows")
        return v.double(), f, destinations(r, len(f) - 1, world, seed=9)

    values, first_idx, dest = batch(rank)
    values.requires_grad_()
    result = ragged_all_to_all(values, first_idx, dest)
    (result.packed * weights(rank, result.packed.shape, seed=2)).sum().backward()
    expected = torch.zeros_like(values)
    for d in range(world):  # where each of this rank's members landed on rank d, and d's weights there
        received_rows = 0
        d_weights = None
        for r in range(world):
            r_values, r_first_idx, r_dest = batch(r)
            for i, member in enumerate(members_of(r_values, r_first_idx)):
                if int(r_dest[i]) != d:
                    continue
                if r == rank:
                    if d_weights is None:
                        total = sum(len(m) for q in range(world) for j, m in enumerate(members_of(*batch(q)[:2]))
                                    if int(batch(q)[2][j]) == d)
                        d_weights = weights(d, (total, *values.shape[1:]), seed=2)
                    rows = slice(int(first_idx[i]), int(first_idx[i + 1]))
                    expected[rows] = d_weights[received_rows:received_rows + len(member)]
                received_rows += len(member)
    torch.testing.assert_close(values.grad, expected)


def check_rebalance(rank, world):
    def batch(r):  # skewed: rank 0 holds most rows
        g = torch.Generator().manual_seed(70 + r)
        lengths = torch.randint(0, 9, (40 if r == 0 else 3,), generator=g)
        values = torch.randn(int(lengths.sum()), 2, generator=g)
        return values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])

    values, first_idx = batch(rank)
    got_values, got_first_idx = rebalance(values, first_idx)
    everyone = [m for r in range(world) for m in members_of(*batch(r))]
    total = sum(len(m) for m in everyone)
    # Reference: walk the global member list; a member belongs to the rank whose share holds its middle row.
    mine, seen = [], 0
    for member in everyone:
        middle = seen + len(member) / 2
        if min(int(middle * world / total), world - 1) == rank:
            mine.append(member)
        seen += len(member)
    assert_members_equal(got_values, got_first_idx, mine)
    longest = max(len(m) for m in everyone)
    assert abs(got_values.shape[0] - total / world) <= longest  # balanced, without splitting a member


def check_mismatched_dtypes_raise_on_every_rank(rank, world):
    values = torch.zeros(2, 3, dtype=torch.float32 if rank == 0 else torch.float64)
    with pytest.raises(ValueError, match="every rank must send the same dtype, feature shape and ragged dims"):
        ragged_all_gather(values, torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="rank 0 sends torch.float32 rows of shape"):
        ragged_all_to_all(values, torch.tensor([0, 2]), torch.tensor([0]))


def check_bad_arguments(rank, world):
    values, first_idx = torch.zeros(3, 2), torch.tensor([0, 1, 3])
    with pytest.raises(ValueError, match=r"ragged_all_to_all: dest must hold ranks in \[0, "):
        ragged_all_to_all(values, first_idx, torch.tensor([0, world]))
    with pytest.raises(ValueError, match="dest must be a 1-D integer tensor with one rank per member"):
        ragged_all_to_all(values, first_idx, torch.tensor([0]))
    with pytest.raises(ValueError, match=r"ragged_all_gather: first_idx must rise from 0 to packed.shape\[0\] = 3"):
        ragged_all_gather(values, torch.tensor([0, 2, 1]))
    with pytest.raises(TypeError, match="dest .* is required"):
        ragged_all_to_all(values, first_idx)


# ---- torch_ragged.pad on a DTensor ----

PAD_MODES = [("constant", {"constant_values": ((1.5, -2.0), (3.0, 4.0))}), ("edge", {}), ("wrap", {}),
             ("reflect", {}), ("symmetric", {}), ("reflect", {"reflect_type": "odd"}),
             ("linear_ramp", {"end_values": (5, -5)}), ("maximum", {}), ("mean", {"stat_length": 2}),
             ("median", {}), ("minimum", {"stat_length": (1, 3)})]


def check_pad_dtensor_every_mode_and_placement(rank, world):
    import numpy as np
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor, init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    full = torch.randn(5, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    placements = [Shard(0), Shard(1), Replicate()]
    for widths in [((2, 7), (1, 0)), ((0, 0), (3, 9)), ((1, 1), (0, 0))]:  # wider than a shard, one axis only
        for mode, kwargs in PAD_MODES:
            expected = np.pad(full.numpy(), widths, mode, **kwargs)
            for placement in placements:
                x = distribute_tensor(full, mesh, [placement])
                out = torch_ragged.pad(x, widths, mode, **kwargs)
                assert isinstance(out, DTensor) and list(out.placements) == [placement], (mode, placement)
                np.testing.assert_allclose(out.full_tensor().numpy(), expected, rtol=1e-12, atol=1e-12,
                                           err_msg=f"{mode} {kwargs} {placement} {widths}")
                if isinstance(placement, Shard):  # torch.chunk's layout, as DTensor expects
                    chunks = torch.from_numpy(expected).chunk(world, placement.dim)
                    expected_local = chunks[rank] if rank < len(chunks) else None
                    if expected_local is not None:
                        torch.testing.assert_close(out.to_local(), expected_local)
    # Partial (pending sum) is reduced first; the result is replicated
    partial = DTensor.from_local(full / world, mesh, [Partial()])
    out = torch_ragged.pad(partial, ((1, 2), (0, 1)), "reflect")
    np.testing.assert_allclose(out.full_tensor().numpy(), np.pad(full.numpy(), ((1, 2), (0, 1)), "reflect"))


def check_pad_dtensor_second_call_with_other_widths_is_not_a_cached_strategy(rank, world):
    import numpy as np
    from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    full = torch.arange(24.0).view(6, 4)
    x = distribute_tensor(full, mesh, [Shard(0)])
    for widths in [((1, 1), (0, 0)), ((4, 0), (2, 2)), ((1, 1), (0, 0))]:  # same shapes of args, other values
        out = torch_ragged.pad(x, widths, "symmetric")
        assert tuple(out.shape) == np.pad(full.numpy(), widths).shape
        np.testing.assert_array_equal(out.full_tensor().numpy(), np.pad(full.numpy(), widths, "symmetric"))


def check_pad_dtensor_backward(rank, world):
    import numpy as np
    from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    full = torch.randn(5, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    widths = ((4, 6), (1, 2))
    x = distribute_tensor(full, mesh, [Shard(0)]).requires_grad_()
    out = torch_ragged.pad(x, widths, "reflect")
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    (out.full_tensor() * weight).sum().backward()
    # reference: each output element adds its weight to the input element numpy's index rule copies
    source = np.pad(np.arange(full.numel()).reshape(full.shape), widths, "reflect")
    expected = torch.zeros(full.numel(), dtype=torch.float64).index_add_(0, torch.from_numpy(source).flatten(),
                                                                          weight.flatten())
    torch.testing.assert_close(x.grad.full_tensor(), expected.view(full.shape))


CHECKS = [check_all_gather, check_all_gather_async, check_all_gather_ragged_tensor_with_two_ragged_dims,
          check_all_gather_backward, check_all_to_all, check_all_to_all_ragged_tensor_and_back,
          check_all_to_all_backward, check_rebalance, check_mismatched_dtypes_raise_on_every_rank,
          check_bad_arguments, check_pad_dtensor_every_mode_and_placement,
          check_pad_dtensor_second_call_with_other_widths_is_not_a_cached_strategy, check_pad_dtensor_backward]


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_on_gloo(world):
    failures = run_on_ranks(CHECKS, world)
    assert not failures, "\n\n".join(failures)


def planted_failure(rank, world):
    raise AssertionError(f"planted failure on rank {rank} of {world}")


def test_harness_reports_a_failing_check():  # the harness itself can fail, so the test above can
    failures = run_on_ranks([planted_failure], 2)
    assert len(failures) == 2 and "planted failure on rank 1 of 2" in failures[1]
