"""Bad input to the sparse family: a clear exception naming the op and the argument."""

import pytest
import torch
import torch_ragged
from expect import raises

ops = torch.ops.torch_ragged
INDICES = torch.tensor([[0, 1, 2], [1, 0, 1]])
VALUES = torch.ones(3)


def test_out_of_range_indices_raise_index_error_naming_the_entry():
    for bad, where in (([[0, 3, 2], [1, 0, 1]], "indices[0][1] = 3"), ([[0, 1, 2], [1, -1, 1]], "indices[1][1] = -1")):
        with raises(IndexError, "torch_ragged.sparse_coalesce", where, "out of range for size"):
            ops.sparse_coalesce(torch.tensor(bad), VALUES, [3, 2])
    # sizes whose flattened index overflows int64 take the lexicographic path, checked too
    with raises(IndexError, "torch_ragged.sparse_coalesce", f"indices[1][0] = {2**40} is out of range"):
        ops.sparse_coalesce(torch.tensor([[0], [2**40], [0]]), torch.ones(1), [2**40, 2**40, 3])
    with raises(IndexError, "torch_ragged.sparse_to_dense", "indices[1][2] = 5"):
        ops.sparse_to_dense(torch.tensor([[0, 1, 2], [1, 0, 5]]), VALUES, [3, 2])
    with raises(IndexError, "torch_ragged.sparse_mask", "indices[0][0] = 7"):
        ops.sparse_mask(torch.zeros(3, 2), torch.tensor([[7], [0]]))
    with raises(IndexError, "torch_ragged.sparse_sum", "out of range"):
        ops.sparse_sum(torch.tensor([[0, 9]]), torch.ones(2), [3], None)


def test_validate_false_skips_the_check_without_touching_memory_out_of_bounds():
    # an out-of-range index gets a meaningless key inside the key's bits: the sort and sums stay in bounds
    indices, values, _, _ = ops.sparse_coalesce(torch.tensor([[5, 0, 5]]), torch.ones(3), [3], False)
    assert indices.shape[1] == values.shape[0] and values.sum() == 3


def test_argument_checks():
    with raises(TypeError, "torch_ragged.sparse_coalesce", "indices must be int64 or int32", "Float"):
        ops.sparse_coalesce(INDICES.float(), VALUES, [3, 2])
    with raises(ValueError, "torch_ragged.sparse_coalesce", "indices must be 2-D"):
        ops.sparse_coalesce(INDICES[0], VALUES, [3, 2])
    with raises(ValueError, "torch_ragged.sparse_coalesce", "values must have nnz = indices.size(1) = 3 rows"):
        ops.sparse_coalesce(INDICES, torch.ones(4), [3, 2])
    with raises(ValueError, "torch_ragged.sparse_coalesce", "size [3] is shorter than sparse_dim = 2"):
        ops.sparse_coalesce(INDICES, VALUES, [3])
    with raises(ValueError, "torch_ragged.sparse_coalesce", "values must have shape", "= (nnz, 4), got [3, 5]"):
        ops.sparse_coalesce(INDICES, torch.ones(3, 5), [3, 2, 4])
    with raises(ValueError, "torch_ragged.sparse_coalesce", "size must be non-negative"):
        ops.sparse_coalesce(INDICES, VALUES, [3, -2])
    with raises(TypeError, "torch_ragged.sparse_coalesce", "values must be a tensor, got None"):
        ops.sparse_coalesce(INDICES, None, [3, 2])
    with raises(IndexError, "torch_ragged.sparse_sum", "dim 2 is out of range for a 2-D tensor"):
        ops.sparse_sum(INDICES, VALUES, [3, 2], [2])
    with raises(ValueError, "torch_ragged.sparse_sum", "dim 1 appears more than once"):
        ops.sparse_sum(INDICES, VALUES, [3, 2], [1, -1])
    with raises(ValueError, "torch_ragged.sparse_from_dense", "sparse_dim must be in [1, dense.dim() = 2]"):
        ops.sparse_from_dense(torch.zeros(2, 2), 3)
    with raises(IndexError, "torch_ragged.sparse_index_select", "index must lie in [-3, 3) for sparse dim 0 of "
                "size 3"):
        ops.sparse_index_select(INDICES, VALUES, [3, 2], 0, torch.tensor([0, 3]))
    # along a dense dim torch's index_select refuses negative positions (found by a reliability fuzz)
    with raises(IndexError, "torch_ragged.sparse_index_select", "index must lie in [0, 2) for dense dim 2 of size 2"):
        ops.sparse_index_select(INDICES, torch.ones(3, 2), [3, 2, 2], 2, torch.tensor([-1]))
    with pytest.raises(RuntimeError, match="out of bounds"):  # torch's own refusal, beside
        torch.sparse_coo_tensor(INDICES, torch.ones(3, 2), (3, 2, 2)).index_select(2, torch.tensor([-1]))
    with raises(ValueError, "torch_ragged.sparse_flat_keys", "does not fit in int64"):
        ops.sparse_flat_keys(INDICES, [2**40, 2**40])


def test_wrapper_checks():
    with raises(TypeError, "torch_ragged.sparse.coalesce", "expected a sparse COO tensor", "strided"):
        torch_ragged.sparse.coalesce(torch.zeros(3))
    mask = torch.sparse_coo_tensor(INDICES, VALUES, (3, 2), check_invariants=True)
    with raises(ValueError, "torch_ragged.sparse.sparse_mask", "dense has shape (3, 3) but mask has shape (3, 2)"):
        torch_ragged.sparse.sparse_mask(torch.zeros(3, 3), mask)


def test_matmul_plan_is_checked_and_inner_errors_carry_the_called_op():
    """Issue 16 items 14 / 17: the plan's tensors are checked (a float order was silently accepted), and an error
    from the segment op underneath names the op the caller called, then the inner one."""
    coalesced = torch.tensor([[0, 0, 1], [0, 1, 1]])
    values, dense = torch.ones(3), torch.ones(2, 4)
    plan = list(ops.sparse_mm_plan(coalesced, [2, 2]))
    with raises(TypeError, "torch_ragged.sparse_mm", "col_order must be an integer"):
        ops.sparse_mm(values, dense, coalesced, *plan[:2], plan[2].double(), plan[3], False)
    with raises(ValueError, "torch_ragged.sparse_sddmm", "row_order must hold nnz"):
        ops.sparse_sddmm(dense, dense, coalesced, *plan[:3], plan[3][:1], False)
    with raises(TypeError, "torch_ragged.sparse_mm", "row_first_idx must be a tensor, got None"):
        ops.sparse_mm(values, dense, coalesced, None, *plan[1:], False)
    with raises(ValueError, "torch_ragged.sparse_mm", "col_first_idx must be on the CPU or on the data's device"):
        ops.sparse_mm(values, dense, coalesced, plan[0], plan[1].to("meta"), *plan[2:], False)
    decreasing = torch.tensor([0, 3, 2])
    with raises(ValueError, "torch_ragged.sparse_sddmm", "the plan", "does not fit these indices"):
        ops.sparse_sddmm(dense, dense, coalesced, decreasing, *plan[1:], False)
    with raises(ValueError, "torch_ragged.sparse_sddmm: first_idx must be non-decreasing",
                "(from torch_ragged.segment_gather_dot)"):  # unvalidated: the segment op still checks
        ops.sparse_sddmm(dense, dense, coalesced, decreasing, *plan[1:], False, False)
    with raises(IndexError, "torch_ragged.sparse_mm_plan: indices", "(from torch_ragged.sparse_flat_keys)"):
        ops.sparse_mm_plan(torch.tensor([[0], [5]]), [2, 2])


def test_huge_shapes_are_refused_by_name_before_any_allocation():
    """to_dense / plan of huge matrices died in the allocator (or were killed filling an overcommitted buffer)."""
    entry = torch.sparse_coo_tensor([[0], [0]], [1.0], (2**31, 2**31))
    with pytest.raises(ValueError, match="torch_ragged.sparse_to_dense: the dense output would need more than "
                                         "2\\^63 - 1 bytes"):
        torch_ragged.sparse.to_dense(entry)
    wide = torch.sparse_coo_tensor([[0], [0]], [1.0], (2**40, 2**20))  # 8 TiB of CSR offsets: more than any RAM here
    with pytest.raises(ValueError, match="torch_ragged.sparse_mm_plan: the plan's row and column offsets would need "
                                         "8796101410840 bytes, more than this machine's"):
        torch_ragged.sparse.plan(wide)


def test_a_valid_matrix_whose_row_offsets_cannot_be_held_is_refused_as_that():
    """S of 1e11 rows is valid; its CSR offsets (800 GB) are what cannot be held. The refusal says so, under mm's
    name (it was rewritten as "row indices out of order or out of range")."""
    s = torch.sparse_coo_tensor([[0, 5], [1, 2]], [1.0, 2.0], (10**11, 3)).coalesce()
    with raises(ValueError, "torch_ragged.sparse.mm", "the row offsets would need", "bytes, more than this "
                "machine's"):
        torch_ragged.sparse.mm(s, torch.ones(3, 2))


@pytest.mark.parametrize("convert,layout", [("to_sparse_coo", torch.sparse_coo), ("to_sparse_csr", torch.sparse_csr),
                                            ("to_sparse_csc", torch.sparse_csc)])
def test_validate_checks_a_tensor_already_of_the_layout(convert, layout):
    """A tensor of the requested layout was returned unchecked (torch's own to_dense then segfaulted on it):
    validate=True checks it; validate=False returns it as it is."""
    fn = getattr(torch_ragged.sparse, convert)
    good = torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse(layout=layout)
    assert fn(good) is good
    if layout == torch.sparse_coo:
        for rows, error, fragment in (([0, 7], IndexError, "indices[0][1] = 7 is out of range"),
                                      ([1, 0], ValueError, "flagged coalesced but its entry 1 does not come after")):
            lying = torch.sparse_coo_tensor([rows, [0, 1]], [1.0, 2.0], (2, 2), is_coalesced=True,
                                            check_invariants=False)
            with raises(error, f"torch_ragged.sparse.{convert}", fragment):
                fn(lying)
            assert fn(lying, validate=False) is lying
        return
    compressed = torch.tensor([0, 1, 3]) if layout == torch.sparse_csr else torch.tensor([0, 2, 1])
    broken = torch.sparse_compressed_tensor(compressed, torch.tensor([1, 0, 9]), torch.ones(3), (2, 2),
                                            layout=layout, check_invariants=False)
    with pytest.raises((ValueError, IndexError), match=f"torch_ragged.sparse.{convert}"):
        fn(broken)
    assert fn(broken, validate=False) is broken
