"""LazyStack (tensordict's lazy-stack semantics, seed 003) and RaggedCollate, against loops and hand-made
references; the tensordict round trips run where tensordict is installed (CI installs it)."""

import pytest
import torch
from torch.utils.data import DataLoader
from torch_ragged import LazyStack, RaggedCollate, RaggedTensor, collate


def records():
    return [{"a": torch.zeros(3), "pos": torch.randn(3, 2), "label": torch.tensor(0)},
            {"a": torch.ones(4), "pos": torch.randn(1, 2), "label": torch.tensor(1), "extra": torch.ones(2)}]


def test_seed_example_members_kept_and_padded():
    recs = records()
    stack = LazyStack(*recs)
    assert stack.batch_size == torch.Size([2])
    assert stack[0] is recs[0] and stack[1] is recs[1]
    assert torch.equal(stack.get("a", as_padded_tensor=True), torch.tensor([[0.0, 0, 0, 0], [1, 1, 1, 1]]))
    assert torch.equal(stack.get("a", as_padded_tensor=True, padding_side="left", padding_value=-1.0),
                       torch.tensor([[-1.0, 0, 0, 0], [1, 1, 1, 1]]))
    assert stack.get("a", as_list=True)[1] is recs[1]["a"]


def test_keys_exclusive_keys_and_item_shapes():
    stack = LazyStack(*records())
    assert stack.keys() == ["a", "pos", "label"]
    assert stack.exclusive_keys == [[], ["extra"]]
    assert stack.get_item_shape("a") == torch.Size([2, -1])
    assert stack.get_item_shape("pos") == torch.Size([2, -1, 2])
    assert stack.get_item_shape("label") == torch.Size([2])


def test_stacking_agrees_or_raises():
    stack = LazyStack(*records())
    assert torch.equal(stack["label"], torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="different shapes"):
        stack["a"]


def test_padded_nested_ragged_and_default():
    recs = records()
    stack = LazyStack(*recs)
    padded = stack.get("pos", as_padded_tensor=True)
    assert padded.shape == (2, 3, 2)
    assert torch.equal(padded[1, :1], recs[1]["pos"]) and torch.equal(padded[1, 1:], torch.zeros(2, 2))
    nested = stack.get("pos", as_nested_tensor=True)
    assert nested.layout == torch.jagged and torch.equal(nested.unbind()[0], recs[0]["pos"])
    strided = stack.get("pos", as_nested_tensor=True, layout=torch.strided)
    assert strided.layout == torch.strided and torch.equal(strided.unbind()[1], recs[1]["pos"])
    ragged = stack.get("pos", as_ragged=True)
    assert isinstance(ragged, RaggedTensor) and torch.equal(ragged[0], recs[0]["pos"])
    filled = stack.get("extra", default=torch.zeros(1), as_padded_tensor=True)
    assert torch.equal(filled, torch.tensor([[0.0, 0.0], [1.0, 1.0]]))


def test_every_dim_may_differ_when_padding():
    grids = [torch.randn(2, 5, 3), torch.randn(4, 1, 3), torch.randn(3, 2, 3)]
    stack = LazyStack(*({"g": g} for g in grids))
    padded = stack.get("g", as_padded_tensor=True, padding_value=9.0)
    assert padded.shape == (3, 4, 5, 3)
    for b, g in enumerate(grids):
        expected = torch.full((4, 5, 3), 9.0)
        expected[:g.shape[0], :g.shape[1]] = g
        assert torch.equal(padded[b], expected)
    with pytest.raises(ValueError, match="torch.jagged cannot hold"):
        stack.get("g", as_nested_tensor=True)
    tokens = LazyStack({"t": torch.arange(3)}, {"t": torch.arange(5)})
    assert torch.equal(tokens.get("t", as_padded_tensor=True, padding_value=-1),
                       torch.tensor([[0, 1, 2, -1, -1], [0, 1, 2, 3, 4]]))


def test_writes_reach_the_members_and_growing():
    recs = records()
    stack = LazyStack(*recs)
    stack["w"] = [torch.ones(1), torch.ones(5)]
    assert recs[1]["w"].shape == (5,)
    stack["w"] = RaggedTensor.from_list([torch.zeros(2), torch.zeros(3)])
    assert torch.equal(recs[0]["w"], torch.zeros(2))
    stack["label"] = torch.tensor([7, 8])
    assert recs[1]["label"] == 8
    stack.append({"a": torch.ones(1), "pos": torch.zeros(0, 2), "label": torch.tensor(2)})
    stack.insert(0, {"a": torch.ones(2), "pos": torch.zeros(2, 2), "label": torch.tensor(3)})
    stack.extend([{"a": torch.ones(6), "pos": torch.zeros(1, 2), "label": torch.tensor(4)}])
    assert len(stack) == 5 and stack[1] is recs[0]
    assert stack.get("a", as_padded_tensor=True).shape == (5, 6)
    assert len(stack[1:3]) == 2 and stack[[4, 0]][1] is stack[0]


def test_tensordict_members_and_round_trip():
    tensordict = pytest.importorskip("tensordict")
    tds = [tensordict.TensorDict(a=torch.zeros(3)), tensordict.TensorDict(a=torch.ones(4))]
    stack = LazyStack(*tds)
    assert stack[0] is tds[0]
    theirs = tensordict.LazyStackedTensorDict(*tds, stack_dim=0)
    assert torch.equal(stack.get("a", as_padded_tensor=True), theirs.get("a", as_padded_tensor=True))
    assert stack.get_item_shape("a") == theirs.get_item_shape("a")
    back = LazyStack.from_tensordict(stack.to_tensordict())
    assert back[1] is tds[1]
    from_dicts = LazyStack(*records()).to_tensordict()
    ours = LazyStack(*records()).get("a", as_padded_tensor=True)
    assert torch.equal(from_dicts.get("a", as_padded_tensor=True), ours)
    stack["b"] = [torch.ones(2), torch.ones(3)]
    assert torch.equal(tds[1]["b"], torch.ones(3))


def test_collate_in_a_dataloader_with_workers():
    samples = [{"points": torch.randn(n, 3), "label": n % 2, "name": f"cloud{n}"} for n in (4, 1, 7, 2, 5)]
    loader = DataLoader(samples, batch_size=2, collate_fn=collate, num_workers=2)
    batches = list(loader)
    assert len(batches) == 3
    first = batches[0]
    assert isinstance(first["points"], RaggedTensor) and torch.equal(first["points"][1], samples[1]["points"])
    assert torch.equal(first["label"], torch.tensor([0, 1])) and first["name"] == ["cloud4", "cloud1"]
    assert torch.equal(batches[2]["points"][0], samples[4]["points"])


def test_collate_tuples_and_meshes_rebased():
    pairs = [(torch.arange(3), torch.tensor(1.0)), (torch.arange(5), torch.tensor(2.0))]
    tokens, weights = collate(pairs)
    assert torch.equal(tokens.padded(-1), torch.tensor([[0, 1, 2, -1, -1], [0, 1, 2, 3, 4]]))
    assert torch.equal(weights, torch.tensor([1.0, 2.0]))
    meshes = [{"vertices": torch.randn(3, 3), "faces": torch.tensor([[0, 1, 2]])},
              {"vertices": torch.randn(4, 3), "faces": torch.tensor([[0, 1, 2], [1, 2, 3]])},
              {"vertices": torch.randn(2, 3), "faces": torch.tensor([[1, 0, 1]])}]
    batch = RaggedCollate(rebase={"faces": "vertices"})(meshes)
    assert batch["faces"].values.tolist() == [[0, 1, 2], [3, 4, 5], [4, 5, 6], [8, 7, 8]]
    for b, mesh in enumerate(meshes):  # every face addresses its own mesh's vertices in the packed buffer
        faces = batch["faces"][b]
        assert torch.equal(batch["vertices"].values[faces], mesh["vertices"][mesh["faces"]])
    images = RaggedCollate(ragged_dims={"img": 2})([{"img": torch.randn(2, 3)}, {"img": torch.randn(4, 1)}])
    assert images["img"].shape == torch.Size([2, -1, -1])
