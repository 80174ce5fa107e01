"""RaggedTensor against independent references: per-member loops, slices, torch.cat, hand-made padding."""

import io

import pytest
import torch
import torch.utils._pytree as pytree
import torch_ragged
from devices import DEVICES
from torch_ragged import RaggedTensor


def members(device="cpu", dtype=torch.float32, feature=(3,), ragged_dims=1, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shapes = [(3,), (0,), (5,), (1,)] if ragged_dims == 1 else [(2, 3), (4, 1), (0, 2), (1, 1)]
    return [(torch.randn(*s, *feature, generator=generator) * 10).to(dtype).to(device) for s in shapes]


def padded_reference(tensors, ragged_dims, padding_value, side):
    """Each member copied into a slot of the largest size, at the start ("right") or the end ("left")."""
    largest = [max(t.shape[d] for t in tensors) for d in range(ragged_dims)]
    feature = tensors[0].shape[ragged_dims:]
    out = torch.full((len(tensors), *largest, *feature), padding_value, dtype=tensors[0].dtype)
    for b, t in enumerate(tensors):
        slots = tuple(slice(0, n) if side == "right" else slice(m - n, m)
                      for n, m in zip(t.shape, largest, strict=False))
        out[(b, *slots)] = t.cpu()
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ragged_dims,feature", [(1, (3,)), (1, ()), (1, (2, 2)), (2, (4,)), (2, ())])
@pytest.mark.parametrize("side", ["right", "left"])
def test_views_match_members(device, ragged_dims, feature, side):
    tensors = members(device, feature=feature, ragged_dims=ragged_dims)
    r = RaggedTensor.from_list(tensors, ragged_dims=ragged_dims)
    assert len(r) == 4 and r.ragged_dims == ragged_dims and r.feature_shape == feature
    assert torch.equal(r.values.cpu(), torch.cat([t.cpu().reshape(-1, *feature) for t in tensors]))
    assert r.shape == torch.Size([4, *[-1] * ragged_dims, *feature])
    assert torch.equal(r.padded(-7.0, padding_side=side).cpu(), padded_reference(tensors, ragged_dims, -7.0, side))
    for b, t in enumerate(tensors):
        assert torch.equal(r[b], t) and torch.equal(r.list()[b], t)
    expected_mask = padded_reference([torch.ones(t.shape[:ragged_dims], dtype=torch.bool) for t in tensors],
                                     ragged_dims, False, side)
    assert torch.equal(r.mask(padding_side=side).cpu(), expected_mask)


def test_views_share_memory_and_shape_has_holes_only_where_sizes_differ():
    r = RaggedTensor.from_list([torch.randn(2, 3, 4), torch.randn(5, 3, 4)], ragged_dims=2)
    assert r.shape == torch.Size([2, -1, 3, 4])
    assert r[1].data_ptr() == r.values[6].data_ptr()
    assert r.list()[1].data_ptr() == r.values[6].data_ptr()
    r[1][0, 0, 0] = 123.0
    assert r.values[6, 0] == 123.0


@pytest.mark.parametrize("device", DEVICES)
def test_padded_with_max_shape_and_round_trip(device):
    tensors = members(device)
    r = RaggedTensor.from_list(tensors)
    padded = r.padded(0.0, max_shape=[7], padding_side="left")
    assert padded.shape == (4, 7, 3)
    back = RaggedTensor.from_padded(padded, r.lengths, padding_side="left")
    assert torch.equal(back.values, r.values) and torch.equal(back.first_idx, r.first_idx)
    images = RaggedTensor.from_list(members(device, ragged_dims=2), ragged_dims=2)
    back = RaggedTensor.from_padded(images.padded(), images.shape_per_tensor)
    assert torch.equal(back.values, images.values)


def test_from_packed_by_offsets_or_lengths():
    values = torch.arange(12.0).view(6, 2)
    by_offsets = RaggedTensor.from_packed(values, [0, 2, 2, 6])
    by_lengths = RaggedTensor.from_packed(values, lengths=[2, 0, 4])
    for r in (by_offsets, by_lengths):
        assert torch.equal(r[2], values[2:6]) and r[1].shape == (0, 2)
    grid = RaggedTensor.from_packed(values, [0, 6], shape_per_tensor=torch.tensor([[2, 3]]))
    assert torch.equal(grid[0], values.view(2, 3, 2))


def test_nested_round_trip_shares_values_and_sets_max_seqlen():
    r = RaggedTensor.from_list(members())
    nested = r.to_nested()
    assert nested.layout == torch.jagged and nested.values().data_ptr() == r.values.data_ptr()
    assert nested._max_seqlen == 5 and nested._min_seqlen == 0
    assert torch.equal(torch.nested.to_padded_tensor(nested, 0.0), r.padded(0.0))
    njt = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)], layout=torch.jagged)
    back = RaggedTensor.from_nested(njt)
    assert back.values.data_ptr() == njt.values().data_ptr()
    assert torch.equal(back[1], njt.unbind()[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("key", [[3, 0, -2, 0], torch.tensor([2, 2]), torch.tensor([True, False, True, True]),
                                 slice(None, None, 2), slice(3, 0, -1), [], slice(1, 3)])
def test_indexing_matches_a_loop(device, key):
    tensors = members(device)
    r = RaggedTensor.from_list(tensors)
    picked = r[key]
    if isinstance(key, torch.Tensor) and key.dtype == torch.bool:
        positions = key.nonzero().view(-1).tolist()
    elif isinstance(key, slice):
        positions = list(range(4))[key]
    else:
        positions = [int(i) for i in key]
    assert len(picked) == len(positions)
    for k, i in enumerate(positions):
        assert torch.equal(picked[k], tensors[i])
    assert picked.values.shape[0] == sum(tensors[i].shape[0] for i in positions)


def test_two_ragged_dims_index_and_member_tuple_key():
    tensors = members(ragged_dims=2)
    r = RaggedTensor.from_list(tensors, ragged_dims=2)
    picked = r[torch.tensor([1, 0])]
    assert torch.equal(picked[0], tensors[1]) and torch.equal(picked[1], tensors[0])
    assert torch.equal(r[0, 1], tensors[0][1])


def test_append_and_extend_pack_lazily_in_order():
    tensors = members()
    r = RaggedTensor.from_list(tensors[:2])
    r.append(tensors[2])
    r.extend([tensors[3], tensors[0]])
    assert len(r) == 5
    assert r.first_idx.tolist() == [0, 3, 3, 8, 9, 12]
    for b, t in enumerate(tensors + tensors[:1]):
        assert torch.equal(r[b], t)
    both = RaggedTensor.cat([r, RaggedTensor.from_list(tensors[2:])])
    assert len(both) == 7 and torch.equal(both[6], tensors[3])


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_math_acts_on_values(device):
    r = RaggedTensor.from_list(members(device))
    v = r.values
    assert torch.equal((r * 2 + 1).values, v * 2 + 1)
    assert torch.equal((1 - r).values, 1 - v)
    assert torch.equal(torch.sin(r).values, torch.sin(v))
    assert torch.equal(r.relu().values, v.relu())
    assert torch.equal((r > 0).values, v > 0)
    assert torch.equal(torch.where(r > 0, r, 0.0).values, torch.where(v > 0, v, 0.0))
    assert torch.equal((r + r.broadcast_members(torch.arange(4.0, device=device).view(4, 1))).values[3:8],
                       v[3:8] + 2)
    s = r.clone()
    s.mul_(3)
    assert torch.equal(s.values, v * 3) and torch.equal(r.values, v)


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_match_per_member_torch(device):
    tensors = members(device, dtype=torch.float64)
    r = RaggedTensor.from_list(tensors)
    zero = torch.zeros(3, dtype=torch.float64, device=device)
    for b, t in enumerate(tensors):
        empty = t.shape[0] == 0
        assert torch.allclose(r.sum()[b], t.sum(0))
        assert torch.allclose(r.mean()[b], zero if empty else t.mean(0))
        assert torch.equal(r.amax()[b], zero if empty else t.amax(0))
        assert torch.equal(r.amin()[b], zero if empty else t.amin(0))
        assert torch.equal(r.max().row_in_member[b], torch.full((3,), -1, device=device) if empty else t.argmax(0))
        assert torch.allclose(r.softmax()[b], torch.softmax(t, 0))
        assert torch.allclose(r.log_softmax()[b], torch.log_softmax(t, 0))


def test_autograd_end_to_end_and_grad_view():
    tensors = [t.double().requires_grad_() for t in members()]

    def loss(*ts):
        r = RaggedTensor.from_list(ts)
        picked = r[[2, 0, 2]]
        return (picked.softmax() * picked).padded(0.0).sum() + r.mean().pow(2).sum()

    assert torch.autograd.gradcheck(loss, tensors)
    values = torch.randn(4, 2, requires_grad=True)
    r = RaggedTensor.from_packed(values, [0, 1, 4])
    r.sum().sum().backward()
    assert torch.equal(r.grad.values, torch.ones(4, 2))


def test_matmul_compiles_as_torch_matmul_and_r_at_w_says_why_fullgraph_cannot_take_it():
    r = RaggedTensor.from_list(members()).double()
    w = torch.randn(3, 2, dtype=torch.float64)
    expected = torch.cat([m.double() @ w for m in members()])  # each member's rows times w
    for fn in (lambda r, w: torch.matmul(r, w), lambda r, w: torch.nn.functional.linear(r, w.t())):
        torch._dynamo.reset()
        assert torch.allclose(torch.compile(fn, fullgraph=True)(r, w).values, expected)
    # torch.compile hands `r @ w` over as w.matmul(r) (the call `w @ r` makes): fullgraph refuses it by name, a
    # plain compile breaks the graph there and runs it eagerly, right
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"under torch.compile, `r @ w` reaches RaggedTensor as w.matmul\(r\)"):
        torch.compile(lambda r, w: r @ w, fullgraph=True)(r, w)
    torch._dynamo.reset()
    assert torch.allclose(torch.compile(lambda r, w: r @ w)(r, w).values, expected)
    with pytest.raises(TypeError, match="dense @ RaggedTensor would mix the packed rows"):
        torch.compile(lambda r, w: w @ r)(r, torch.randn(2, 5, dtype=torch.float64))


def test_compile_common_paths_without_graph_breaks():
    r = RaggedTensor.from_list(members())

    def reduce(r):
        return (r.softmax() * 2).sum() + r.mean() + (1 + r).relu().amax() + torch.sin(r).sum()

    def pad(r):
        return r.padded(0.0), r.padded(-1.0, max_shape=[6], padding_side="left")

    def select(r, index):
        return r.index_select(index).padded(0.0, max_shape=[5])

    def build(values, first_idx):
        return RaggedTensor(values, first_idx, validate=False).mean()

    def build_validated(values, first_idx):  # validation on: an assertion in the graph
        return RaggedTensor(values, first_idx).mean() + RaggedTensor.from_packed(values, first_idx).amax()

    linear = torch.nn.Linear(3, 4).double()  # float64: inductor's fused float32 gelu rounds differently

    def model_code(r):  # a layer, a comparison, dim= reductions
        h = torch.nn.functional.gelu(linear(r))
        return h.sum(dim=-1).values, (h > 0).values, h.softmax(dim=2).mean(), h.norm()

    cases = [(reduce, (r,)), (pad, (r,)), (select, (r, torch.tensor([2, 0]))), (build, (r.values, r.first_idx)),
             (build_validated, (r.values, r.first_idx)), (model_code, (r.double(),))]
    for fn, args in cases:
        torch._dynamo.reset()
        got, want = torch.compile(fn, fullgraph=True)(*args), fn(*args)
        for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want), strict=False):
            assert torch.allclose(g, w)


def test_compiled_validation_fails_at_run_time_with_the_message():
    """Under torch.compile the constructor's checks run in the graph (RuntimeError; eagerly: ValueError)."""
    values = torch.randn(8, 3)

    def build(values, first_idx, shape_per_tensor=None):
        return RaggedTensor(values, first_idx, shape_per_tensor).sum()

    torch._dynamo.reset()
    compiled = torch.compile(build, fullgraph=True)
    assert torch.allclose(compiled(values, torch.tensor([0, 3, 3, 8])), build(values, torch.tensor([0, 3, 3, 8])))
    with pytest.raises(RuntimeError, match="torch_ragged.RaggedTensor: first_idx must rise from 0 to values"):
        compiled(values, torch.tensor([0, 5, 3, 8]))
    with pytest.raises(RuntimeError, match="torch_ragged.RaggedTensor: shape_per_tensor must be"):
        compiled(values, torch.tensor([0, 3, 3, 8]), torch.tensor([[3], [1], [5]]))
    with pytest.raises(ValueError, match="torch_ragged.RaggedTensor: first_idx must rise"):
        build(values, torch.tensor([0, 5, 3, 8]))


def test_save_load_and_pytree():
    r = RaggedTensor.from_list(members(ragged_dims=2), ragged_dims=2)
    buffer = io.BytesIO()
    torch.save({"batch": r}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["batch"]  # weights_only (the default) accepts RaggedTensor
    assert torch.equal(loaded.values, r.values) and torch.equal(loaded.shape_per_tensor, r.shape_per_tensor)
    leaves, spec = pytree.tree_flatten({"r": r})
    assert len(leaves) == 3
    again = pytree.tree_unflatten(leaves, spec)["r"]
    assert torch.equal(again[1], r[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")
def test_to_device_and_pin_memory():
    r = RaggedTensor.from_list(members())
    pinned = r.pin_memory()
    assert pinned.values.is_pinned()
    on_gpu = pinned.to("cuda", non_blocking=True)
    assert on_gpu.device.type == "cuda" and on_gpu.first_idx.device.type == "cpu"
    assert torch.equal(on_gpu[2].cpu(), r[2])


def test_dtype_conversions():
    r = RaggedTensor.from_list(members())
    assert r.double().dtype == torch.float64 and r.long().dtype == torch.int64
    assert r.to(torch.float16).values.dtype == torch.float16


def round_trip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)  # torch's default


def test_every_saved_object_loads_with_weights_only_and_is_checked():
    """LazyStack, SparsePlan, RaggedCollate, MemberExtremum and SegmentExtremum load under weights_only=True (they
    were "Unsupported global"), each checked as its constructor checks; a SparsePlan that does not fit its indices
    is refused before plan.mm could trust it."""
    r = RaggedTensor.from_list([torch.ones(2, 3), torch.zeros(1, 3)])
    stack = torch_ragged.LazyStack({"a": torch.ones(2)}, {"a": torch.zeros(3)})
    s = torch.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [1.0, 2.0, 3.0], (2, 3))
    plan = torch_ragged.sparse.plan(s)
    loaded = round_trip({"r": r, "stack": stack, "plan": plan, "collate": torch_ragged.RaggedCollate({"x": 2}),
                         "member_max": r.max(), "segment_max": torch_ragged.segment_max(torch.arange(4.0), [0, 2, 4])})
    assert torch.equal(loaded["r"].values, r.values)
    assert [torch.equal(a["a"], b["a"]) for a, b in zip(loaded["stack"], stack, strict=True)] == [True, True]
    assert torch.equal(loaded["plan"].mm(s.coalesce().values(), torch.eye(3)), s.to_dense())
    assert loaded["collate"].ragged_dims == {"x": 2}
    assert isinstance(loaded["member_max"], torch_ragged.MemberExtremum)
    assert loaded["segment_max"].arg.tolist() == [1, 3]
    broken = torch_ragged.sparse.plan(s)
    broken.col_order = torch.tensor([2, 1, 0])
    with pytest.raises(ValueError, match="torch_ragged.SparsePlan: the loaded plan does not fit its indices"):
        round_trip(broken)
    bad_extremum = torch_ragged.segment.SegmentExtremum(torch.ones(2), torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="torch_ragged.SegmentExtremum: arg must be int64 of values' shape"):
        round_trip(bad_extremum)
    bad_stack = torch_ragged.LazyStack({"a": torch.ones(2)})
    bad_stack._records.append(torch.ones(2))  # not a record
    with pytest.raises(TypeError, match="torch_ragged.LazyStack.extend: records\\[1\\] must be a dict"):
        round_trip(bad_stack)


def test_import_leaves_torch_dynamo_unloaded_and_the_constant_marks_are_torchs():
    """`import torch_ragged` cost ~1.5 s over `import torch` when a decorator imported torch._dynamo; the functions
    torch.compile must treat as constants carry the mark torch's own decorator sets (torch.compile then reads it)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import sys, torch_ragged; print('torch._dynamo' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    from torch_ragged import container

    def probe():
        return 0

    marked = torch.compiler.assume_constant_result(probe)
    mark = set(vars(marked)) - set(vars(lambda: 0))
    assert mark == {"_dynamo_marked_constant"}
    for fn in (container._function_kind, container._is_elementwise_method):
        assert all(getattr(fn, name) == getattr(marked, name) for name in mark)


def test_dir_of_the_op_namespace_lists_every_op():
    """Users discover ops with dir(torch.ops.torch_ragged); torch lists only the ops looked up so far (3 of 56)."""
    import subprocess
    import sys

    script = ("import torch, torch_ragged\n"
              "ops = {n.split('::')[1].split('.')[0] for n in torch._C._dispatch_get_all_op_names() "
              "if n.startswith('torch_ragged::')}\n"
              "print(len(ops), sorted(ops - set(dir(torch.ops.torch_ragged))))")
    count, missing = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                    check=True).stdout.split(" ", 1)
    assert int(count) > 50 and missing.strip() == "[]"


def test_torch_reductions_and_softmax_of_a_ragged_tensor_are_its_methods():
    """torch.mean(r, 1) is r.mean(1) (as for tensors), checked against a loop over the members."""
    r = RaggedTensor.from_list(members(dtype=torch.float64))
    per_member = members(dtype=torch.float64)
    assert torch.equal(torch.mean(r, 1), torch.stack([m.mean(0) if len(m) else torch.zeros(3, dtype=torch.float64)
                                                      for m in per_member]))
    assert torch.allclose(torch.sum(r), torch.stack([m.sum(0) for m in per_member]))
    assert torch.sum(r, 1, dtype=torch.float32).dtype == torch.float32  # dtype casts first, as torch.sum's
    softmax = torch.nn.functional.softmax(r, dim=1)  # F.softmax passes _stacklevel and dtype along
    assert torch.allclose(softmax.values, torch.cat([torch.softmax(m, 0) for m in per_member]))
    assert torch.equal(torch.log_softmax(r, 1).values, r.log_softmax(1).values)
    assert torch.equal(torch.amax(r, dim=2).values, torch.cat([m.amax(1) for m in per_member]))
    assert torch.equal(torch.max(r, 1).values, r.max(1).values)
    torch._dynamo.reset()
    compiled = torch.compile(lambda r: torch.mean(r, 1) + torch.amin(r, 1), fullgraph=True)
    assert torch.allclose(compiled(r), r.mean(1) + r.amin(1))


@pytest.mark.parametrize("device", DEVICES)
def test_indexing_along_the_ragged_dim_matches_each_member_sliced(device):
    members = [torch.randn(n, 3, device=device) for n in (4, 1, 6, 2)]
    r = RaggedTensor.from_list(members)
    for i in (0, -1):
        assert torch.equal(r[:, i], torch.stack([m[i] for m in members]))
    assert torch.equal(r[:, -1, 2], torch.stack([m[-1, 2] for m in members]))
    assert torch.equal(r[1:3, 0], torch.stack([m[0] for m in members[1:3]]))
    for key in (slice(1, None), slice(None, -1), slice(None, None, 2), slice(-3, None), slice(1, 5, 3),
                slice(7, 9), slice(-10, 2), slice(2, 1)):
        sliced = r[:, key]
        assert isinstance(sliced, RaggedTensor)
        for got, member in zip(sliced.list(), members, strict=True):
            assert torch.equal(got, member[key])
    assert torch.equal(r[:, 1:, 0].values, torch.cat([m[1:, 0] for m in members]))
    leaf = r.values.detach().requires_grad_(True)
    RaggedTensor.from_packed(leaf, r.first_idx)[:, -1].sum().backward()
    expected = torch.zeros_like(leaf)
    expected[r.first_idx[1:].cpu() - 1] = 1  # the last row of each member
    assert torch.equal(leaf.grad, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("key", [slice(1, None), slice(-2, None), slice(None, None, 2), slice(1, -1, 3),
                                 slice(5, 2)])
def test_a_slice_of_the_ragged_dim_matches_each_member_sliced_and_its_gradient_lands_on_the_kept_rows(device, key):
    """r[:, a:b:c] (the op segment_slice) with empty and long members: each member sliced as a Python list is, and
    the gradient 1 on exactly the kept rows; the op alone gives the same with int32 offsets."""
    lengths = [3, 0, 7, 1, 40]
    leaf = torch.randn(sum(lengths), 2, dtype=torch.float64).to(device).requires_grad_()
    r = RaggedTensor(leaf, torch_ragged.get_first_idx(torch.tensor(lengths)).to(device))
    members = leaf.split(lengths)
    sliced = r[:, key]
    assert torch.equal(sliced.values, torch.cat([m[key] for m in members]))
    assert sliced.shape_per_tensor.view(-1).tolist() == [len(range(n)[key]) for n in lengths]
    sliced.values.sum().backward()
    kept = torch.cat([torch.zeros(n, dtype=torch.bool).index_fill_(0, torch.arange(n)[key], True) for n in lengths])
    assert torch.equal(leaf.grad.cpu(), kept.view(-1, 1).expand(-1, 2).double())
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32).to(device)
    values, first_idx = torch.ops.torch_ragged.segment_slice(leaf.detach(), offsets, key.start, key.stop,
                                                            key.step or 1)
    assert torch.equal(values, sliced.values.detach()) and torch.equal(first_idx.cpu(), sliced.first_idx.cpu())


def _sliced_values(values, first_idx, *args):
    return torch.ops.torch_ragged.segment_slice(values, first_idx, *args)[0]


@pytest.mark.parametrize("op,args", [(torch.ops.torch_ragged.segment_row, (-1,)),
                                     (torch.ops.torch_ragged.segment_row, (1,)), (_sliced_values, (1, None, 2))])
def test_rows_along_the_ragged_dim_gradcheck_and_gradgradcheck(op, args):
    # the CPU backward copies the gradient's rows into place (distinct rows) rather than adding them
    first_idx = torch.tensor([0, 3, 5, 9, 11])
    values = torch.randn(11, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: op(v, first_idx, *args), (values,))
    assert torch.autograd.gradgradcheck(lambda v: op(v, first_idx, *args), (values,))


def test_indexing_along_the_ragged_dim_errors_name_the_short_member():
    r = RaggedTensor.from_list([torch.randn(3, 2), torch.randn(1, 2), torch.randn(5, 2)])
    # the op segment_row checks the rows, in the segment core's words (a member is a segment of the packed rows)
    with pytest.raises(IndexError, match=r"torch_ragged.segment_row: row 2 is out of range for segment 1 of 1 rows "
                                         r"\(1 of 3 segments are too short\)"):
        r[:, 2]
    with pytest.raises(IndexError, match=r"row -4 is out of range for segment 0 of 3 rows \(2 of 3"):
        r[:, -4]
    with pytest.raises(ValueError, match=r"a slice of the ragged dim needs a step >= 1, got -1"):
        r[:, ::-1]
    with pytest.raises(ValueError, match=r"r\[:, \.\.\.\] indexes the one ragged dim"):
        RaggedTensor.from_list([torch.randn(2, 3)], ragged_dims=2)[:, 0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("row", [0, 1, -1, -2])
def test_a_row_of_every_member_matches_a_loop_and_its_gradient_lands_on_that_row(device, row):
    """r[:, row] (the op segment_row): member b's row `row` (from its end when negative), against a loop over the
    members; the gradient is 1 on exactly those rows. Long members, feature dims, int32 offsets."""
    g = torch.Generator().manual_seed(11)
    lengths = [3, 2, 7, 2, 40]
    leaf = torch.randn(sum(lengths), 2, 3, generator=g, dtype=torch.float64).to(device).requires_grad_()
    r = RaggedTensor(leaf, torch_ragged.get_first_idx(torch.tensor(lengths)).to(device))
    expected = torch.stack([member[row] for member in leaf.split(lengths)])
    got = r[:, row]
    assert torch.equal(got, expected)
    got.sum().backward()
    picked = torch.zeros(sum(lengths), dtype=torch.bool)
    starts = [sum(lengths[:b]) for b in range(len(lengths))]
    picked[[s + (row if row >= 0 else n + row) for s, n in zip(starts, lengths, strict=True)]] = True
    assert torch.equal(leaf.grad.cpu(), picked.view(-1, 1, 1).expand(-1, 2, 3).double())
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    assert torch.equal(torch.ops.torch_ragged.segment_row(leaf.detach(), offsets.to(device), row), expected)
