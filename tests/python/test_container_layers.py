"""RaggedTensor in model code: layers act on each member's rows, comparisons are elementwise, ambiguity is refused.

References: each layer applied to each member on its own (a loop over plain tensors), gradients from that loop.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from devices import DEVICES
from torch_ragged import RaggedTensor


def members(device, feature=(4,), dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, *feature, generator=generator, dtype=dtype).to(device) for n in (3, 0, 5, 1)]


def layer_cases(device):
    torch.manual_seed(0)
    linear = nn.Linear(4, 6).double().to(device)
    norm = nn.LayerNorm(4).double().to(device)
    weight = torch.randn(4, 2, dtype=torch.float64, device=device)
    return {
        "nn.Linear": linear,
        "nn.LayerNorm": norm,
        "F.rms_norm": lambda x: F.rms_norm(x, (4,)),
        "F.gelu": F.gelu,
        "F.hardswish": F.hardswish,
        "F.glu": lambda x: F.glu(x, dim=-1),
        "matmul": lambda x: x @ weight,
        "torch.matmul": lambda x: torch.matmul(x, weight[:, 0]),
        "dropout p=0": lambda x: F.dropout(x, 0.0, training=True),
        "Linear, GELU, LayerNorm": nn.Sequential(linear, nn.GELU(), nn.LayerNorm(6).double().to(device)),
    }


@pytest.mark.parametrize("device", DEVICES)
def test_layers_apply_to_each_member_and_return_a_ragged_tensor(device):
    tensors = members(device)
    r = RaggedTensor.from_list(tensors)
    for name, layer in layer_cases(device).items():
        out = layer(r)
        assert isinstance(out, RaggedTensor), name
        assert torch.equal(out.first_idx, r.first_idx), name
        for b, t in enumerate(tensors):
            torch.testing.assert_close(out[b], layer(t), msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_weight_gradients_match_a_loop_over_members(device):
    tensors = members(device)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2)).double().to(device)
    r = RaggedTensor.from_list(tensors).requires_grad_()
    model(r).values.pow(2).sum().backward()
    ragged_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    looped = [t.clone().requires_grad_() for t in tensors]
    sum(model(t).pow(2).sum() for t in looped).backward()
    for got, want in zip(ragged_grads, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(r.grad.values, torch.cat([t.grad for t in looped]))


def test_gradcheck_through_linear_and_layer_norm():
    first_idx = torch.tensor([0, 2, 2, 5])
    weight = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    values = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)

    def f(values, weight):
        r = RaggedTensor(values, first_idx)
        return F.layer_norm(F.linear(r, weight), (3,)).values

    assert torch.autograd.gradcheck(f, (values, weight))


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_of_ragged_token_ids(device):
    ids = [torch.tensor(t, dtype=torch.long, device=device) for t in ([1, 2, 3], [], [4, 0, 0, 9])]
    r = RaggedTensor.from_list(ids)
    embedding = nn.Embedding(10, 5, padding_idx=0).to(device)
    out = embedding(r)
    assert isinstance(out, RaggedTensor) and out.feature_shape == (5,)
    for b, t in enumerate(ids):
        assert torch.equal(out[b], embedding(t))


def test_dropout_draws_as_on_the_values_and_in_place_keeps_the_object():
    r = RaggedTensor.from_list(members("cpu", dtype=torch.float32))
    torch.manual_seed(3)
    out = F.dropout(r, 0.5)
    torch.manual_seed(3)
    assert torch.equal(out.values, F.dropout(r.values, 0.5))
    s = r.clone()
    assert F.dropout(s, 0.5, inplace=True) is s
    assert F.dropout(r, 0.5, training=False).values.equal(r.values)


@pytest.mark.parametrize("device", DEVICES)
def test_comparisons_are_elementwise_ragged_bool_tensors(device):
    ids = [torch.tensor(t, dtype=torch.long, device=device) for t in ([5, 0, 0], [], [7, 1])]
    r = RaggedTensor.from_list(ids)
    other = RaggedTensor.from_list([t + 1 for t in ids])
    cases = {"r == 0": (r == 0, [t == 0 for t in ids]), "r != 0": (r != 0, [t != 0 for t in ids]),
             "r < 3": (r < 3, [t < 3 for t in ids]), "r >= other": (r >= other, [t >= t + 1 for t in ids]),
             "r == other - 1": (r == other - 1, [t == t for t in ids]), "0 == r": (0 == r, [t == 0 for t in ids])}
    for name, (got, want) in cases.items():
        assert isinstance(got, RaggedTensor) and got.dtype == torch.bool, name
        for b, w in enumerate(want):
            assert torch.equal(got[b], w), name


def test_truth_value_is_ambiguous_and_hashing_is_by_identity():
    r = RaggedTensor.from_list([torch.ones(2), torch.ones(1)])
    with pytest.raises(RuntimeError, match="torch_ragged.RaggedTensor: the truth value of a RaggedTensor is ambig"):
        bool(r)
    with pytest.raises(RuntimeError, match="ambiguous"):
        if r == 1:
            pass
    s = r.clone()
    table = {r: "r", s: "s"}
    assert table[r] == "r" and table[s] == "s" and len({r, s, r}) == 2


def test_dense_operands_reaching_the_rows_are_refused_with_the_way_out():
    r = RaggedTensor.from_list(members("cpu"))  # 4 members, 9 rows, feature (4,)
    with pytest.raises(ValueError, match="broadcast_members"):
        r + r.mean()  # (4, 4): per member, would pair with rows
    with pytest.raises(ValueError, match="broadcast_members"):
        r * torch.ones(9, 4, dtype=torch.float64)  # per row: use with_values
    with pytest.raises(ValueError, match="broadcast_members"):
        torch.add(r, torch.ones(2, 1, 4, dtype=torch.float64))  # would add a leading dim
    # Feature-dim and scalar operands broadcast as on the values; a per-member tensor through broadcast_members.
    assert torch.equal((r + torch.arange(4.0, dtype=torch.float64)).values, r.values + torch.arange(4.0))
    assert torch.equal((r * torch.full((1, 4), 2.0, dtype=torch.float64)).values, r.values * 2)
    centred = r - r.broadcast_members(r.mean())
    for b in (0, 2, 3):
        torch.testing.assert_close(centred[b], r[b] - r[b].mean(0))


def test_layer_errors_name_the_op_and_what_was_expected():
    r = RaggedTensor.from_list(members("cpu"))
    no_features = RaggedTensor.from_list([torch.randn(3), torch.randn(2)])
    with pytest.raises(ValueError, match=r"RaggedTensor \(linear\): linear acts on the feature dims"):
        F.linear(no_features, torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"RaggedTensor \(layer_norm\): normalized_shape"):
        F.layer_norm(r, (9, 4))
    with pytest.raises(ValueError, match=r"RaggedTensor \(matmul\): r @ w needs a dense right operand of 1 or 2"):
        r @ torch.randn(2, 4, 4, dtype=torch.float64)
    with pytest.raises(TypeError, match="the RaggedTensor goes on the left"):
        torch.randn(2, 9, dtype=torch.float64) @ r
    with pytest.raises(TypeError, match=r"RaggedTensor \(linear\): linear takes one RaggedTensor"):
        F.linear(r, r)
    with pytest.raises(TypeError, match="multi_head_attention_forward is not elementwise"):
        attention = nn.MultiheadAttention(4, 2).double()
        attention(r, r, r)


# ---- dim=: per member over the ragged dims, or over feature dims of every row ----

@pytest.mark.parametrize("device", DEVICES)
def test_reductions_with_dim_match_per_member_torch(device):
    tensors = members(device, feature=(3, 2))
    r = RaggedTensor.from_list(tensors)
    for b, t in enumerate(tensors):
        empty = t.shape[0] == 0
        for dim in (1, -3, (1,)):  # the ragged dim: each member whole
            torch.testing.assert_close(r.sum(dim=dim)[b], t.sum(0))
            torch.testing.assert_close(r.mean(dim)[b], torch.zeros(3, 2, dtype=t.dtype, device=device) if empty
                                       else t.mean(0))
            torch.testing.assert_close(r.softmax(dim)[b], torch.softmax(t, 0))
        for dim, torch_dim in ((2, 1), (-1, -1), ((2, 3), (1, 2))):  # feature dims: every row, still ragged
            torch.testing.assert_close(r.sum(dim=dim)[b], t.sum(torch_dim))
            torch.testing.assert_close(r.mean(dim=dim, keepdim=True)[b], t.mean(torch_dim, keepdim=True))
            torch.testing.assert_close(r.amax(dim=dim)[b], t.amax(torch_dim))
            torch.testing.assert_close(r.amin(dim=dim)[b], t.amin(torch_dim))
            torch.testing.assert_close(r.norm(dim=dim)[b], torch.linalg.vector_norm(t, 2, torch_dim))
        torch.testing.assert_close(r.softmax(dim=-1)[b], torch.softmax(t, -1))
        torch.testing.assert_close(r.log_softmax(dim=2)[b], torch.log_softmax(t, 1))
        values, indices = r.max(dim=-1)
        assert torch.equal(values[b], t.max(-1).values) and torch.equal(indices[b], t.max(-1).indices)


@pytest.mark.parametrize("p", [1, 2, 3.5, float("inf")])
def test_member_norm_matches_vector_norm_and_its_gradient_at_zero(p):
    tensors = [t.requires_grad_() for t in members("cpu")] + [torch.zeros(2, 4, dtype=torch.float64,
                                                                          requires_grad=True)]
    r = RaggedTensor.from_list(tensors)
    got = r.norm(p)
    # An empty member's norm is 0 (torch has no identity for the inf norm of nothing).
    want = torch.stack([torch.linalg.vector_norm(t, p, 0) if len(t) else t.new_zeros(4) for t in tensors])
    torch.testing.assert_close(got, want)
    grads = torch.autograd.grad(got.sum(), tensors)
    assert not any(g.isnan().any() for g in grads)
    if p != float("inf"):  # the inf norm's gradient at ties (the zero member) goes to one row, torch's is spread
        want_grads = torch.autograd.grad(want.sum(), tensors, allow_unused=True, materialize_grads=True)
        for g, w in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(g, w)


def test_member_extremum_rows_are_named_apart_from_segment_max_packed_rows():
    import torch_ragged

    tensors = [torch.tensor([[1.0], [5.0]]), torch.tensor([[7.0], [2.0], [9.0]])]
    r = RaggedTensor.from_list(tensors)
    per_member = r.max()
    assert isinstance(per_member, torch_ragged.MemberExtremum)
    assert per_member.row_in_member.flatten().tolist() == [1, 2]  # within each member
    assert torch_ragged.segment_max(r.values, r.first_idx).arg.flatten().tolist() == [1, 4]  # packed rows
    assert not hasattr(per_member, "arg")


def test_unsqueeze_adds_feature_dims_only_and_dim_errors_name_the_rule():
    r = RaggedTensor.from_list([torch.randn(3), torch.randn(2)])
    assert r.unsqueeze(-1).feature_shape == (1,) and r.unsqueeze(2).values.shape == (5, 1)
    linear = nn.Linear(1, 2)
    torch.testing.assert_close(linear(r.unsqueeze(-1))[1], linear(r[1].unsqueeze(-1)))
    with pytest.raises(IndexError, match="RaggedTensor.unsqueeze: dim 1 must insert a feature dim"):
        r.unsqueeze(1)
    with pytest.raises(ValueError, match="RaggedTensor.sum: dim 0 must name the ragged dims"):
        r.sum(dim=0)
    with pytest.raises(IndexError, match="RaggedTensor.mean: dim 4 is out of range"):
        r.mean(dim=4)
    s = RaggedTensor.from_list([torch.randn(3, 2), torch.randn(1, 2)])
    with pytest.raises(ValueError, match="RaggedTensor.amax: dim .1, 2. must name the ragged dims"):
        s.amax(dim=(1, 2))
    with pytest.raises(ValueError, match="RaggedTensor.norm: p must be a positive number"):
        s.norm(p=0)


def test_layers_that_need_a_rectangle_say_how_to_give_them_one():
    r = RaggedTensor.from_list([torch.randn(3, 4, dtype=torch.float64), torch.randn(1, 4, dtype=torch.float64)])
    attention = nn.MultiheadAttention(4, 2, batch_first=True).double()  # transposes its input first
    with pytest.raises(AttributeError, match=r"no attribute 'transpose'.*r\.padding_mask\(\)"):
        attention(r, r, r)
    # what the message says works: the padded batch with its padding mask gives each member's own attention
    padded, mask = r.padded(0.0), r.padding_mask()
    out, _ = attention(padded, padded, padded, key_padding_mask=mask)
    for b, member in enumerate(r):  # the members, one by one
        alone, _ = attention(member[None], member[None], member[None])
        torch.testing.assert_close(out[b, :len(member)], alone[0])
    assert not hasattr(r, "no_such_tensor_method") and hasattr(r, "values")
