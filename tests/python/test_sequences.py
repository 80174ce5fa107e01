"""Sequences as NLP code holds them: 1-D members (pad_sequence's reading), lengths for shape_per_tensor, the
default padding value, PackedSequence for recurrent layers and the attention padding mask.

References: torch.nn.utils.rnn (pad_sequence, pack_padded_sequence, pad_packed_sequence), per-member loops.
"""

import pytest
import torch
import torch.nn as nn
import torch_ragged
from devices import DEVICES
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch_ragged import RaggedTensor


def sequences(device, lengths=(3, 5, 1, 5, 2), feature=(), dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, *feature, generator=generator, dtype=dtype).to(device) for n in lengths]


@pytest.mark.parametrize("device", DEVICES)
def test_one_dim_members_pad_as_pad_sequence(device):
    seqs = sequences(device)
    padded, shape_per_tensor = torch_ragged.list_to_padded(seqs)  # padding_value defaults to 0
    assert torch.equal(padded, pad_sequence(seqs, batch_first=True))
    assert shape_per_tensor.tolist() == [[3], [5], [1], [5], [2]]
    left, _ = torch_ragged.list_to_padded(seqs, -1.0, padding_side="left")
    for b, s in enumerate(seqs):
        assert torch.equal(left[b], torch.cat([torch.full((5 - len(s),), -1.0, device=device), s]))
    packed, _ = torch_ragged.list_to_packed(seqs)
    assert torch.equal(packed, torch.cat(seqs))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("feature", [(), (3,)])
def test_lengths_stand_for_shape_per_tensor_everywhere(device, feature):
    seqs = sequences(device, feature=feature)
    lengths = torch.tensor([len(s) for s in seqs])
    first_idx = torch.tensor([0, 3, 8, 9, 14, 16])
    packed = torch.cat(seqs)
    padded = pad_sequence(seqs, batch_first=True)
    assert torch.equal(torch_ragged.packed_to_padded(packed, lengths, first_idx), padded)
    assert torch.equal(torch_ragged.padded_to_packed(padded, lengths), packed)
    for got, want in zip(torch_ragged.padded_to_list(padded, lengths), seqs, strict=True):
        assert torch.equal(got, want)
    for got, want in zip(torch_ragged.packed_to_list(packed, lengths, first_idx), seqs, strict=True):
        assert torch.equal(got, want)


def test_kaolin_members_are_read_as_before():
    """Members with an element dim keep Kaolin's reading (the last dim is the element)."""
    members = [torch.arange(6).view(2, 3), torch.arange(3).view(1, 3)]
    padded, shape_per_tensor = torch_ragged.list_to_padded(members, -1)
    assert padded.shape == (2, 2, 3) and shape_per_tensor.tolist() == [[2], [1]]
    assert padded[1, 1].tolist() == [-1, -1, -1]
    same_length = [torch.arange(3.0), torch.arange(3.0) + 5]  # Kaolin: one row of 3 elements each
    padded, shape_per_tensor = torch_ragged.list_to_padded(same_length)
    assert torch.equal(padded, torch.stack(same_length)) and shape_per_tensor.shape == (2, 0)
    packed, shape_per_tensor = torch_ragged.list_to_packed(same_length)
    assert torch.equal(packed, torch.stack(same_length)) and shape_per_tensor.shape == (2, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_to_packed_sequence_equals_pack_padded_sequence(device):
    r = RaggedTensor.from_list(sequences(device, feature=(3,)))  # lengths with ties (5, 5)
    got = r.to_packed_sequence()
    want = pack_padded_sequence(r.padded(), r.lengths, batch_first=True, enforce_sorted=False)
    assert torch.equal(got.data, want.data)
    assert torch.equal(got.batch_sizes, want.batch_sizes)
    assert torch.equal(got.sorted_indices, want.sorted_indices)
    assert torch.equal(got.unsorted_indices, want.unsorted_indices)


@pytest.mark.parametrize("device", DEVICES)
def test_lstm_over_packed_members_matches_pad_packed_sequence(device):
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True).to(device)
    r = RaggedTensor.from_list(sequences(device, feature=(3,))).requires_grad_()
    out, _ = lstm(r.to_packed_sequence())
    members = RaggedTensor.from_packed_sequence(out)
    reference, lengths = pad_packed_sequence(lstm(pack_padded_sequence(r.padded(), r.lengths, batch_first=True,
                                                                        enforce_sorted=False))[0], batch_first=True)
    assert members.lengths.tolist() == r.lengths.tolist()
    for b in range(len(r)):
        torch.testing.assert_close(members[b], reference[b, :lengths[b]])
    members.values.sum().backward()
    assert r.grad is not None and r.grad.values.shape == r.values.shape


def test_packed_sequence_round_trip_is_differentiable():
    first_idx = torch.tensor([0, 2, 5, 6])
    values = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)

    def round_trip(values):
        r = RaggedTensor(values, first_idx)
        return RaggedTensor.from_packed_sequence(r.to_packed_sequence()).values * 2

    assert torch.autograd.gradcheck(round_trip, (values,))
    assert torch.equal(round_trip(values).detach(), values.detach() * 2)


def test_from_packed_sequence_follows_the_sequence_own_order():
    """Members rebuilt from the PackedSequence's sorted_indices, not from a sort of their lengths: ties in another
    order (a hand-made sort) and enforce_sorted=True (no sorted_indices) both come back right."""
    members = [torch.full((n, 2), float(b)) for b, n in enumerate((3, 3, 1, 3))]
    padded = pad_sequence(members, batch_first=True)
    presorted = pack_padded_sequence(padded[[3, 1, 0, 2]], torch.tensor([3, 3, 3, 1]), batch_first=True)
    back = RaggedTensor.from_packed_sequence(presorted)  # enforce_sorted=True: the order given
    for b, m in enumerate([members[i] for i in (3, 1, 0, 2)]):
        assert torch.equal(back[b], m)
    order = torch.tensor([3, 0, 1, 2])  # the three ties in an order torch.sort need not give
    data = torch.cat([torch.stack([members[i][t] for i in order[:n]]) for t, n in enumerate((4, 3, 3))])
    custom = torch.nn.utils.rnn.PackedSequence(data, torch.tensor([4, 3, 3]), order, torch.argsort(order))
    back = RaggedTensor.from_packed_sequence(custom)
    for b, m in enumerate(members):
        assert torch.equal(back[b], m), b


def test_packed_sequence_errors_name_the_rule():
    with pytest.raises(ValueError, match="RaggedTensor.to_packed_sequence: every member needs at least one row"):
        RaggedTensor.from_list([torch.randn(2, 3), torch.randn(0, 3)]).to_packed_sequence()
    with pytest.raises(ValueError, match="RaggedTensor.to_packed_sequence: a PackedSequence has one ragged dim"):
        RaggedTensor.from_list([torch.randn(2, 2, 3), torch.randn(1, 1, 3)], ragged_dims=2).to_packed_sequence()
    with pytest.raises(TypeError, match="RaggedTensor.from_packed_sequence: sequence must be a PackedSequence"):
        RaggedTensor.from_packed_sequence(torch.randn(3, 2))


@pytest.mark.parametrize("device", DEVICES)
def test_padding_mask_is_what_attention_wants(device):
    """True on padding: with it, a transformer encoder gives every member what it gives the member alone."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).to(device).eval()
    r = RaggedTensor.from_list(sequences(device, feature=(8,)))
    padding = r.padding_mask()
    assert torch.equal(padding, ~r.mask()) and padding.dtype == torch.bool
    assert padding[2].tolist() == [False, True, True, True, True]  # member 2: one element, then padding
    with torch.no_grad():
        out = layer(r.padded(), src_key_padding_mask=padding)
        for b in range(len(r)):
            alone = layer(r[b].unsqueeze(0))[0]
            torch.testing.assert_close(out[b, :len(r[b])], alone, rtol=1e-4, atol=1e-5)
