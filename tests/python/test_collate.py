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
    for path in (("meta", "id"), ("meta", "weight"), ("meta", "flag"), ("image",)):
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
                         ("tokens", [torch.as_tensor(s["meta"]["tokens"]) for s in batch]),
                         ("label", [s["label"][1] for s in batch])):
        ragged = {"points": got["points"], "tokens": got["meta"]["tokens"], "label": got["label"][1]}[key]
        assert isinstance(ragged, RaggedTensor), key
        for b, m in enumerate(members):
            assert torch.equal(ragged[b], m), key


def test_ragged_dims_by_key_at_any_depth_and_zero_stacks():
    batch = [{"outer": {"grid": torch.zeros(i + 1, i + 2, 3)}, "image": torch.ones(3, 2)} for i in range(2)]
    got = RaggedCollate(ragged_dims={"grid": 2, "image": 0})(batch)
    assert got["outer"]["grid"].ragged_dims == 2 and got["outer"]["grid"].shape_per_tensor.tolist() == [[1, 2], [2, 3]]
    assert torch.equal(got["image"], torch.ones(2, 3, 2))


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
