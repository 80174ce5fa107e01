"""torch_ragged.collate against torch's default_collate: the same structure and leaves, ragged fields as
RaggedTensors (compared with the per-sample tensors)."""

from collections import namedtuple

import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree
import torch_ragged
from torch.utils.data import DataLoader, default_collate
from torch_ragged import RaggedCollate, RaggedTensor

Pair = namedtuple("Pair", ["left", "right"])


def sample(i):
    """Nested: a dict in a dict, a namedtuple, a tuple; numbers, numpy, strings, fixed and ragged tensors."""
    return {
        "points": torch.full((i + 1, 3), float(i)),             # ragged
        "meta": {"id": i, "weight": 0.5 * i, "name": f"s{i}", "flag": i % 2 == 0,
                 "tokens": np.arange(i + 2)},                    # numpy, ragged
        "pair": Pair(torch.tensor(i), np.float32(i) / 2),       # 0-d tensor, numpy scalar
        "image": torch.full((2, 4, 4), float(i)),               # fixed size
        "label": (i, torch.tensor([i, -i])),                    # a tuple with a 1-D tensor
    }


def test_structure_and_leaves_match_default_collate():
    batch = [sample(i) for i in range(3)]
    got = RaggedCollate(ragged_dims={"image": 0})(batch)
    want = default_collate([{k: v for k, v in s.items() if k not in ("points",)} | {"meta": {
        k: v for k, v in s["meta"].items() if k != "tokens"}} for s in batch])
    # Leaves default_collate can collate (fixed shapes) agree exactly, with its dtypes.
    for path in (("meta", "id"), ("meta", "weight"), ("meta", "flag"), ("image",), ("label", 1)):
        g, w = got, want
        for p in path:
            g, w = g[p], w[p]
        assert torch.equal(g, w) and g.dtype == w.dtype, path
    assert got["meta"]["name"] == want["meta"]["name"] == ["s0", "s1", "s2"]
    assert isinstance(got["pair"], Pair)
    assert torch.equal(got["pair"].left, want["pair"].left) and torch.equal(got["pair"].right, want["pair"].right)
    assert got["label"][0].tolist() == [0, 1, 2]
    # Ragged leaves: RaggedTensors whose members are the samples' tensors (numpy converted as default_collate).
    for key, members in (("points", [s["points"] for s in batch]),
                         ("tokens", [torch.as_tensor(s["meta"]["tokens"]) for s in batch])):
        ragged = {"points": got["points"], "tokens": got["meta"]["tokens"]}[key]
        assert isinstance(ragged, RaggedTensor), key
        for b, m in enumerate(members):
            assert torch.equal(ragged[b], m), key


def test_ragged_dims_by_key_at_any_depth_and_zero_stacks():
    batch = [{"outer": {"grid": torch.zeros(i + 1, i + 2, 3)}, "image": torch.ones(3, 2)} for i in range(2)]
    got = RaggedCollate(ragged_dims={"grid": 2, "image": 0})(batch)
    assert got["outer"]["grid"].ragged_dims == 2 and got["outer"]["grid"].shape_per_tensor.tolist() == [[1, 2], [2, 3]]
    assert torch.equal(got["image"], torch.ones(2, 3, 2))


def test_equal_shapes_stack_by_default_and_either_way_can_be_forced():
    batch = [{"image": torch.full((3, 8, 8), float(i)), "points": torch.ones(i + 2, 3), "ids": torch.arange(4)}
             for i in range(3)]
    got = torch_ragged.collate(batch)
    assert torch.equal(got["image"], default_collate([s["image"] for s in batch]))  # as default_collate
    assert torch.equal(got["ids"], torch.arange(4).expand(3, 4))
    assert isinstance(got["points"], RaggedTensor) and got["points"].lengths.tolist() == [2, 3, 4]
    forced = RaggedCollate(ragged_dims={"ids": 1})(batch)  # ragged even where this batch's sizes agree
    assert isinstance(forced["ids"], RaggedTensor) and forced["ids"].lengths.tolist() == [4, 4, 4]
    assert isinstance(forced["image"], torch.Tensor)  # unnamed fields keep the default
    everything = RaggedCollate(ragged_dims=1)(batch)
    assert all(isinstance(everything[k], RaggedTensor) for k in ("image", "points", "ids"))
    with pytest.raises(ValueError, match="torch_ragged.RaggedCollate: ragged_dims must be None"):
        RaggedCollate(ragged_dims=-1)


def test_default_collate_fields_in_a_dataloader_with_workers():
    loader = DataLoader([sample(i) for i in range(6)], batch_size=3, num_workers=2,
                        collate_fn=RaggedCollate(ragged_dims={"image": 0}))
    batches = list(loader)
    assert len(batches) == 2
    second = batches[1]
    assert second["meta"]["id"].tolist() == [3, 4, 5] and second["image"].shape == (3, 2, 4, 4)
    assert second["points"].lengths.tolist() == [4, 5, 6]
    assert pytree.tree_leaves(second)  # the batch flattens (RaggedTensor is a pytree node)


def test_collate_structure_errors_name_the_rule():
    with pytest.raises(KeyError, match=r"torch_ragged.RaggedCollate: sample 1 has keys \['b'\]"):
        torch_ragged.collate([{"a": {"x": 1}}, {"a": {"b": 1}}])
    with pytest.raises(ValueError, match="torch_ragged.RaggedCollate: the samples have different numbers of fields"):
        torch_ragged.collate([(1, 2), (1,)])


@pytest.mark.parametrize("batch", [
    [(1, 2.0), (3, 4.0)],                                                    # tuples of numbers
    [(torch.tensor(1), ("a", (2, 3.5))), (torch.tensor(2), ("b", (4, 5.5)))],  # nested tuples, 0-d tensors
    [[1, 2], [3, 4]],                                                        # lists
    [{"x": (1, 2), "y": [torch.tensor(0.5)]}, {"x": (3, 4), "y": [torch.tensor(1.5)]}],
    [Pair(1, (2, 3)), Pair(4, (5, 6))],                                      # a namedtuple holding a tuple
    [np.float64(1.5), np.float64(2.5)],
])
def test_without_ragged_fields_the_result_is_default_collates(batch):
    """Nothing ragged: exactly default_collate's result, container types included (a tuple sample gives a list;
    a namedtuple stays one)."""
    got, want = torch_ragged.collate(batch), default_collate(batch)

    def same(g, w):
        assert type(g) is type(w), (type(g), type(w))
        if isinstance(w, torch.Tensor):
            assert torch.equal(g, w) and g.dtype == w.dtype
        elif isinstance(w, dict):
            assert g.keys() == w.keys()
            for k in w:
                same(g[k], w[k])
        elif isinstance(w, (list, tuple)):
            assert len(g) == len(w)
            for a, b in zip(g, w, strict=True):
                same(a, b)
        else:
            assert g == w

    same(got, want)


def test_tuple_samples_with_ragged_fields_give_lists_as_default_collate():
    batch = [(torch.ones(2, 3), 1), (torch.ones(4, 3), 2)]
    got = torch_ragged.collate(batch)
    assert type(got) is list and isinstance(got[0], RaggedTensor) and got[1].tolist() == [1, 2]


def test_ragged_tensor_and_lazy_stack_samples_are_joined():
    """RaggedTensor samples become one RaggedTensor of all their members (as graph batching concatenates graphs);
    LazyStack samples one LazyStack of all their records."""
    r1 = RaggedTensor.from_list([torch.ones(2, 3), torch.zeros(1, 3)])
    r2 = RaggedTensor.from_list([torch.full((3, 3), 2.0)])
    got = torch_ragged.collate([r1, r2])
    assert isinstance(got, RaggedTensor) and got.lengths.tolist() == [2, 1, 3]
    assert torch.equal(got[2], r2[0]) and torch.equal(got[0], r1[0])
    s1 = torch_ragged.LazyStack({"a": torch.ones(2)}, {"a": torch.ones(3)})
    s2 = torch_ragged.LazyStack({"a": torch.zeros(1)})
    joined = torch_ragged.collate([s1, s2])
    assert isinstance(joined, torch_ragged.LazyStack) and len(joined) == 3 and joined[2] is s2[0]
    with pytest.raises(TypeError, match="torch_ragged.RaggedCollate: sample 1 is a LazyStack; sample 0 is a "
                                        "RaggedTensor"):
        torch_ragged.collate([r1, s2])
