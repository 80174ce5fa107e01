"""Bad input to the containers: clear errors naming the method and the argument."""

import warnings

import torch
from expect import raises
from torch_ragged import LazyStack, RaggedCollate, RaggedTensor


def ragged():
    return RaggedTensor.from_list([torch.randn(3, 2), torch.randn(1, 2)])


def test_from_list_mismatched_members():
    where = "torch_ragged.RaggedTensor.from_list"
    with raises(ValueError, where, "tensors[1] has shape (3, 5)", "feature shape must be (2,)"):
        RaggedTensor.from_list([torch.randn(3, 2), torch.randn(3, 5)])
    with raises(ValueError, where, "tensors[1] has shape (3,)"):
        RaggedTensor.from_list([torch.randn(3, 2), torch.randn(3)])
    with raises(ValueError, where, "tensors[1] is torch.float64", "torch.float32"):
        RaggedTensor.from_list([torch.randn(3, 2), torch.randn(3, 2, dtype=torch.float64)])
    with raises(TypeError, where, "tensors[0] must be a tensor, got list"):
        RaggedTensor.from_list([[1.0, 2.0]])
    with raises(ValueError, where, "at least one tensor"):
        RaggedTensor.from_list([])
    with raises(ValueError, where, "tensors[0] must have at least ragged_dims = 2 dims"):
        RaggedTensor.from_list([torch.randn(3)], ragged_dims=2)
    with raises(ValueError, where, "ragged_dims must be an int >= 1, got 0"):
        RaggedTensor.from_list([torch.randn(3)], ragged_dims=0)


def test_constructor_checks_structure():
    with raises(ValueError, "torch_ragged.RaggedTensor", "first_idx must rise from 0 to values.shape[0] = 4"):
        RaggedTensor(torch.randn(4, 2), torch.tensor([0, 3]))
    with raises(ValueError, "torch_ragged.RaggedTensor", "first_idx must rise"):
        RaggedTensor(torch.randn(4, 2), torch.tensor([0, 3, 2, 4]))
    with raises(ValueError, "torch_ragged.RaggedTensor", "first_idx must be a 1-D integer tensor"):
        RaggedTensor(torch.randn(4, 2), torch.tensor([0.0, 4.0]))
    with raises(ValueError, "torch_ragged.RaggedTensor", "shape_per_tensor must be (B = 2"):
        RaggedTensor(torch.randn(4, 2), torch.tensor([0, 3, 4]), torch.tensor([[2], [1]]))
    with raises(ValueError, "torch_ragged.RaggedTensor.from_packed", "exactly one of first_idx and lengths"):
        RaggedTensor.from_packed(torch.randn(4, 2))
    with raises(ValueError, "torch_ragged.get_first_idx", "non-negative"):
        RaggedTensor.from_packed(torch.randn(4, 2), lengths=[5, -1])
    with raises(ValueError, "torch_ragged.RaggedTensor.from_padded", "padded must be a tensor (B = 3"):
        RaggedTensor.from_padded(torch.randn(2, 4), [1, 2, 3])
    with raises(TypeError, "torch_ragged.RaggedTensor.from_nested", "torch.jagged nested tensor"):
        RaggedTensor.from_nested(torch.randn(2, 3))


def test_indexing_out_of_range_and_bad_keys():
    r = ragged()
    with raises(IndexError, "torch_ragged.RaggedTensor.__getitem__", "index 2 is out of range for 2 members"):
        r[2]
    with raises(IndexError, "torch_ragged.ragged_index_select", "index[1] = 5 is out of range for 2 segments"):
        r[[0, 5]]
    with raises(IndexError, "torch_ragged.RaggedTensor.__getitem__", "boolean mask must have shape (2,)"):
        r[torch.tensor([True])]
    with raises(IndexError, "torch_ragged.RaggedTensor.__getitem__", "index must be an int"):
        r[torch.tensor([0.5])]
    with raises(TypeError, "torch_ragged.RaggedTensor.__getitem__", "tuple key must start with a member index"):
        r[(0.5, 0)]
    with raises(TypeError, "torch_ragged.RaggedTensor.__getitem__", "the ragged dim takes an int or a slice"):
        r[:, [0, 1]]


def test_growing_and_math_mismatches():
    r = ragged()
    with raises(ValueError, "torch_ragged.RaggedTensor.extend", "members[0] has shape (2, 3)"):
        r.append(torch.randn(2, 3))
    with raises(ValueError, "torch_ragged.RaggedTensor.extend", "members[1] is torch.int64"):
        r.extend([torch.randn(1, 2), torch.zeros(1, 2, dtype=torch.long)])
    assert len(r) == 2  # nothing was appended
    other = RaggedTensor.from_list([torch.randn(2, 2), torch.randn(2, 2)])
    with raises(ValueError, "torch_ragged.RaggedTensor", "one structure"):
        r + other
    with raises(TypeError, "torch_ragged.RaggedTensor", "sort is not elementwise"):
        torch.sort(r)
    with raises(ValueError, "torch_ragged.RaggedTensor.cumsum", "dim 0 would mix members"):
        torch.cumsum(r, 0)
    with raises(TypeError, "torch_ragged.RaggedTensor (max)", "torch.max(a, b) of two operands is elementwise"):
        torch.max(r, r)
    with raises(ValueError, "torch_ragged.RaggedTensor.cat", "ragged[1] has ragged_dims=1, feature shape (3,)"):
        RaggedTensor.cat([r, RaggedTensor.from_list([torch.randn(1, 3)])])
    with raises(ValueError, "torch_ragged.RaggedTensor.to_nested", "one ragged dim"):
        RaggedTensor.from_list([torch.randn(2, 2)], ragged_dims=2).to_nested()
    with raises(ValueError, "torch_ragged.RaggedTensor.mask", "each >= the largest member's size [3]"):
        r.mask(max_shape=[2])
    with raises(ValueError, "torch_ragged.packed_to_padded", "max_shape"):
        r.padded(max_shape=[2])
    with raises(ValueError, "torch_ragged.RaggedTensor.with_values", "values must have 4 rows"):
        r.with_values(torch.randn(3))


def test_lazy_stack_errors():
    stack = LazyStack({"a": torch.zeros(3)}, {"a": torch.zeros(2, 2)}, {"b": torch.zeros(1)})
    with raises(KeyError, "torch_ragged.LazyStack.get", "member 2 has no key 'a'"):
        stack.get("a", as_padded_tensor=True)
    two = LazyStack({"a": torch.zeros(3)}, {"a": torch.zeros(2, 2)})
    with raises(ValueError, "torch_ragged.LazyStack.get", "entry 'a' of member 1", "one rank, dtype and device"):
        two.get("a", as_padded_tensor=True)
    with raises(ValueError, "torch_ragged.LazyStack.__setitem__", "one entry per member (2)", "with 3 entries"):
        two["c"] = [torch.zeros(1)] * 3
    with raises(TypeError, "torch_ragged.LazyStack.append", "record must be a dict of tensors"):
        two.append(torch.zeros(2))
    with raises(ValueError, "torch_ragged.LazyStack", "stack_dim must be 0"):
        LazyStack({"a": torch.zeros(1)}, stack_dim=1)
    with raises(ValueError, "torch_ragged.LazyStack.get", "exclusive"):
        two.get("a", as_list=True, as_padded_tensor=True)
    with raises(TypeError, "torch_ragged.LazyStack.get", "entry 'n' of member 0 is a int"):
        LazyStack({"n": 1}, {"n": 2}).get("n", as_padded_tensor=True)


def test_collate_errors():
    with raises(KeyError, "torch_ragged.RaggedCollate", "sample 1 has keys ['b']"):
        RaggedCollate()([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])
    with raises(ValueError, "torch_ragged.RaggedCollate", "rebase needs dict samples"):
        RaggedCollate(rebase={"f": "v"})([torch.zeros(1)])
    with raises(TypeError, "torch_ragged.RaggedCollate", "'f' must hold integer indices"):
        RaggedCollate(rebase={"f": "v"})([{"f": torch.zeros(1, 3), "v": torch.zeros(2, 3)}])
    with raises(ValueError, "torch_ragged.RaggedTensor.from_list", "tensors[1]"):
        RaggedCollate()([{"p": torch.zeros(2, 3)}, {"p": torch.zeros(2, 4)}])


def test_lengths_and_sizes_that_are_not_integers_are_refused_not_truncated():
    """torch.as_tensor([2.5, 0, 1.7], dtype=torch.long) read [2, 0, 1]; a bool tensor read 0 / 1."""
    padded = torch.zeros(3, 4, 2)
    with raises(TypeError, "torch_ragged.RaggedTensor.from_padded", "lengths must hold integers"):
        RaggedTensor.from_padded(padded, [2.5, 0, 1.7])
    with raises(TypeError, "torch_ragged.RaggedTensor.from_padded", "lengths must hold integers"):
        RaggedTensor.from_padded(padded, torch.tensor([True, False, True]))
    with raises(TypeError, "torch_ragged.RaggedTensor.from_packed", "lengths must hold integers"):
        RaggedTensor.from_packed(torch.zeros(3, 2), lengths=[1.5, 1.5])
    r = RaggedTensor.from_padded(padded, [2, 0, 1])
    with raises(ValueError, "torch_ragged.RaggedTensor.mask", "one entry per ragged dim (1), got [4, 4]"):
        r.mask([4, 4])
    with raises(TypeError, "torch_ragged.RaggedTensor.padded", "max_shape must hold integers"):
        r.padded(max_shape=[2.5])
    assert r.padded(max_shape=[None]).shape == (3, 2, 2) and r.mask([3]).shape == (3, 3)


def test_keys_that_are_not_member_indices_are_named():
    r = RaggedTensor.from_list([torch.zeros(2, 3), torch.zeros(1, 3)])
    for key in (None, Ellipsis, "a", 1.5):
        with raises(TypeError, "torch_ragged.RaggedTensor.__getitem__", "index must be an int, a slice"):
            r[key]


def test_from_nested_of_a_strided_nested_tensor_names_the_layout():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype warning for the strided layout
        nested = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(1, 3)])
    with raises(TypeError, "torch_ragged.RaggedTensor.from_nested", "must be a torch.jagged nested tensor",
                "layout torch.strided with 2 members"):
        RaggedTensor.from_nested(nested)


def test_kaolin_shaped_members_get_a_ragged_dims_hint():
    """Kaolin's layout makes every dim but the last ragged; from_list's default is one ragged dim, so say how."""
    with raises(ValueError, "torch_ragged.RaggedTensor.from_list", "pass ragged_dims=2"):
        RaggedTensor.from_list([torch.zeros(2, 2, 3), torch.zeros(3, 4, 3)])
    assert RaggedTensor.from_list([torch.zeros(2, 2, 3), torch.zeros(3, 4, 3)], ragged_dims=2).shape == (2, -1, -1, 3)
