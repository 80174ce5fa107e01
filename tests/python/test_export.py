"""torch.export of every family's ops (issue 15): every registered op's sample exports, decomposes
(`run_decompositions()`) and runs equal to eager; with `Dim.DYNAMIC` shapes, exported programs take other sizes and
match independent references (numpy.pad, loops, torch.sparse, dense math). AOTInductor packages are exercised by
examples/cpp_app (C++) and test_examples.py (Python)."""

import numpy as np
import pytest
import torch
import torch_ragged
from test_batch_pt2 import samples as batch_samples
from test_pad_pt2 import pad_samples
from test_segment_autograd import segment_samples
from test_sparse_autograd import sparse_samples
from test_sparse_tensor_ops import sparse_tensor_samples
from test_tiles import tiles_samples
from torch.export import Dim, export
from torch.utils import _pytree as pytree

ops = torch.ops.torch_ragged


class CallOp(torch.nn.Module):
    """Calls `op` with the sample's non-tensor arguments fixed and its tensors (lists included) as inputs."""

    def __init__(self, op, args):
        super().__init__()
        self.op = op
        leaves, self.spec = pytree.tree_flatten(args)
        self.is_tensor = [isinstance(leaf, torch.Tensor) for leaf in leaves]
        self.constants = [None if t else leaf for t, leaf in zip(self.is_tensor, leaves, strict=True)]

    def forward(self, *tensors):
        given = iter(tensors)
        leaves = [next(given) if t else c for t, c in zip(self.is_tensor, self.constants, strict=True)]
        return self.op(*pytree.tree_unflatten(leaves, self.spec))


def all_samples():
    return [*batch_samples(), *pad_samples(), *segment_samples(), *sparse_samples(), *tiles_samples()]


def assert_same_outputs(got, expected):
    got_leaves, expected_leaves = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(g, e, equal_nan=True)
        else:
            assert g == e


@pytest.mark.parametrize("op,args", all_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_every_op_exports_and_decomposes(op, args):
    args = pytree.tree_map(lambda v: v.detach() if isinstance(v, torch.Tensor) else v, args)
    module = CallOp(op, args)
    inputs = tuple(leaf for leaf in pytree.tree_leaves(args) if isinstance(leaf, torch.Tensor))
    program = export(module, inputs).run_decompositions()
    called = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    composite = torch._C._dispatch_has_kernel_for_dispatch_key(op._qualified_op_name, "CompositeImplicitAutograd")
    # the op is kept as one node (composites decompose into the ops they call)
    assert composite or any(name.startswith("torch_ragged.") for name in called), called
    assert_same_outputs(program.module()(*inputs), op(*args))


def test_every_sample_op_is_exported_above():
    exported = {str(op).split(".")[1] for op, _ in all_samples()}
    registered = {schema.name.split("::")[1] for schema in torch._C._jit_get_all_schemas()
                  if schema.name.startswith("torch_ragged::") and schema.overload_name == ""}
    # version queries and the accelerate switches take no tensors; tiles_lookup / tiles_index are exported in
    # test_tiles_index_exports; the ops on torch sparse tensors cannot be: torch.export takes no sparse inputs
    # (their triplet ops, which the same names' default overloads are, are exported above)
    sparse_tensor_only = {str(op).split(".")[1] for op, _ in sparse_tensor_samples() if str(op).endswith(".default")}
    assert registered - {"version", "cuda_version", "built_with_cuda", "built_with_torch", "tiles_lookup",
                         "tiles_index", "accelerate_torch_sparse", "torch_sparse_accelerated",
                         "accelerate_torch_sparse_from"} - sparse_tensor_only <= exported


# ---- Dim.DYNAMIC: one exported program, several input sizes ----

PAD_CASES = [
    ("constant", {"constant_values": 2.5}), ("empty", {}), ("edge", {}), ("wrap", {}), ("reflect", {}),
    ("symmetric", {}), ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"}),
    ("linear_ramp", {"end_values": (1, -2)}), ("maximum", {}), ("minimum", {"stat_length": 2}), ("mean", {}),
    ("median", {}), ("median", {"stat_length": 3}),
]


@pytest.mark.parametrize("mode,kwargs", PAD_CASES, ids=lambda v: str(v))
def test_pad_exports_with_dynamic_sizes(mode, kwargs):
    widths = ((1, 7), (3, 2))

    class Pad(torch.nn.Module):
        def forward(self, x):
            return torch_ragged.pad(x, widths, mode, **kwargs)

    dims = {0: Dim.DYNAMIC, 1: Dim.DYNAMIC}
    program = export(Pad(), (torch.randn(6, 8, dtype=torch.float64),), dynamic_shapes=(dims,)).run_decompositions()
    g = torch.Generator().manual_seed(0)
    # odd and even sizes (median), narrower than widths; float64: odd reflections differ from numpy by a few ulp
    # (issue 16 item 7), which float32 magnifies past the tolerance
    for shape in [(6, 8), (9, 11), (2, 3), (5, 4), (40, 2)]:
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        got = program.module()(x)
        expected = np.pad(x.numpy(), widths, mode, **kwargs)
        assert got.shape == expected.shape
        if mode != "empty":
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_pad_exported_with_dynamic_batch_keeps_integer_and_3d_inputs():
    class PadImages(torch.nn.Module):
        def forward(self, images):
            return torch_ragged.pad(images, ((0, 0), (2, 2), (1, 3)), "symmetric", reflect_type="odd")

    dims = {0: Dim.DYNAMIC, 1: Dim.DYNAMIC, 2: Dim.DYNAMIC}
    program = export(PadImages(), (torch.randint(-50, 50, (2, 5, 6)),), dynamic_shapes=(dims,))
    for shape in [(3, 4, 7), (2, 9, 2)]:
        x = torch.randint(-50, 50, shape)
        expected = np.pad(x.numpy(), ((0, 0), (2, 2), (1, 3)), "symmetric", reflect_type="odd")
        np.testing.assert_array_equal(program.module()(x).numpy(), expected)


def ragged_batch(lengths, features=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    first_idx = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.long)
    return torch.randn(int(first_idx[-1]), features, generator=g), first_idx


def test_batch_ops_export_with_dynamic_rows_and_members():
    class RoundTrip(torch.nn.Module):
        def forward(self, packed, first_idx):
            shape_per_tensor = (first_idx[1:] - first_idx[:-1]).unsqueeze(1)
            padded = ops.packed_to_padded(packed, shape_per_tensor, first_idx, -1.0, None, "right")
            return padded, ops.padded_to_packed(padded * 2, shape_per_tensor, "right", packed.shape[0])

    packed, first_idx = ragged_batch([2, 0, 3])
    shapes = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
    program = export(RoundTrip(), (packed, first_idx), dynamic_shapes=shapes)
    for lengths in [[4, 1], [0, 5, 2, 7, 1], [3, 0, 0]]:  # batch >= 2 (export's size-oblivious range)
        packed, first_idx = ragged_batch(lengths, seed=len(lengths))
        padded, scaled = program.module()(packed, first_idx)
        expected = torch.full((len(lengths), max(lengths), 3), -1.0)
        for i, n in enumerate(lengths):
            expected[i, :n] = packed[first_idx[i]:first_idx[i] + n]
        torch.testing.assert_close(padded, expected)
        torch.testing.assert_close(scaled, packed * 2)


def test_segment_ops_export_with_dynamic_rows_and_segments():
    class Pool(torch.nn.Module):
        def forward(self, values, first_idx):
            picked, picked_first = ops.ragged_index_select(values, first_idx, torch.tensor([-1, 0]), None)
            return ops.segment_sum(values, first_idx), ops.segment_softmax(values, first_idx), picked, picked_first

    values, first_idx = ragged_batch([2, 1, 3])
    program = export(Pool(), (values, first_idx), dynamic_shapes=({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}))
    for lengths in [[5, 0, 2, 1], [1, 6]]:
        values, first_idx = ragged_batch(lengths, seed=7)
        sums, softmax, picked, picked_first = program.module()(values, first_idx)
        members = [values[first_idx[i]:first_idx[i + 1]] for i in range(len(lengths))]
        torch.testing.assert_close(sums, torch.stack([m.sum(0) for m in members]))
        torch.testing.assert_close(softmax, torch.cat([torch.softmax(m, 0) for m in members]))
        torch.testing.assert_close(picked, torch.cat([members[-1], members[0]]))
        assert picked_first.tolist() == [0, lengths[-1], lengths[-1] + lengths[0]]


@pytest.mark.parametrize("start,stop,step", [(1, None, 1), (None, -1, 1), (-3, None, 2), (1, 5, 3), (7, 9, 1)])
def test_segment_slice_exports_with_dynamic_rows_and_segments(start, stop, step):
    """The exported segment_slice is its ATen decomposition (the route a GPU or a trace takes): each segment
    sliced as a Python list is, against a loop, for batches with empty and short segments."""
    class Rows(torch.nn.Module):
        def forward(self, values, first_idx):
            return ops.segment_slice(values, first_idx, start, stop, step)

    values, first_idx = ragged_batch([2, 1, 3])
    program = export(Rows(), (values, first_idx), dynamic_shapes=({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}))
    for lengths in [[5, 0, 2, 1], [1, 6], [0, 0, 3]]:
        values, first_idx = ragged_batch(lengths, seed=8)
        kept, kept_first = program.module()(values, first_idx)
        members = [values[first_idx[i]:first_idx[i + 1]][start:stop:step] for i in range(len(lengths))]
        assert torch.equal(kept, torch.cat(members))
        assert kept_first.tolist() == [0, *torch.tensor([len(m) for m in members]).cumsum(0).tolist()]


def test_sparse_ops_export_with_dynamic_nnz():
    size = [4, 5]

    class CoalesceSoftmaxMatmul(torch.nn.Module):
        def forward(self, indices, values, dense):
            s = torch.sparse_coo_tensor(indices, values, size)
            c = torch_ragged.sparse.coalesce(s)
            return torch_ragged.sparse.to_dense(torch_ragged.sparse.softmax(c, 1)), torch_ragged.sparse.mm(c, dense)

    def sample(nnz, seed):
        g = torch.Generator().manual_seed(seed)
        indices = torch.stack([torch.randint(0, n, (nnz,), generator=g) for n in size])
        return indices, torch.randn(nnz, generator=g), torch.randn(5, 2, generator=g)

    shapes = ({1: Dim.DYNAMIC}, {0: Dim.DYNAMIC}, None)
    program = export(CoalesceSoftmaxMatmul(), sample(6, 0), dynamic_shapes=shapes)
    for nnz in [3, 11, 17]:
        indices, values, dense = sample(nnz, nnz)
        softmax, product = program.module()(indices, values, dense)
        reference = torch.sparse_coo_tensor(indices, values, size).coalesce()
        torch.testing.assert_close(softmax, torch.sparse.softmax(reference, 1).to_dense())
        torch.testing.assert_close(product, reference.to_dense() @ dense)


def test_tiles_ops_export_with_dynamic_tile_count():
    lo, hi, tile = [-1, 0], [6, 9], [3, 4]

    class Scatter(torch.nn.Module):
        def forward(self, pages, origins):
            return ops.tiles_to_dense(pages, origins, lo, hi, 0.0, "sum", None, None)

    def sample(count, seed):
        g = torch.Generator().manual_seed(seed)
        origins = torch.stack([torch.randint(-3, 8, (count,), generator=g) for _ in range(2)], 1)
        return torch.randn(count, *tile, generator=g), origins

    program = export(Scatter(), sample(4, 0), dynamic_shapes=({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}))
    for count in [2, 7]:
        pages, origins = sample(count, count)
        expected = torch.zeros(hi[0] - lo[0], hi[1] - lo[1])
        for page, (r, c) in zip(pages, origins.tolist(), strict=True):  # a loop over every tile cell
            for i in range(tile[0]):
                for j in range(tile[1]):
                    y, x = r + i - lo[0], c + j - lo[1]
                    if 0 <= y < expected.shape[0] and 0 <= x < expected.shape[1]:
                        expected[y, x] += page[i, j]
        torch.testing.assert_close(program.module()(pages, origins), expected)


def test_tiles_index_exports():
    origins = torch.tensor([[0, 0], [1, 2], [-2, -3]])

    class Lookup(torch.nn.Module):
        def forward(self, origins, points):
            index = ops.tiles_index(origins, [3, 4], [-1, 0], [6, 9])
            return ops.tiles_lookup(origins, [3, 4], points, [-1, 0], [6, 9], None, index)

    points = torch.tensor([[0, 0], [2, 5], [5, 8], [-1, 1]])
    program = export(Lookup(), (origins, points))
    torch.testing.assert_close(program.module()(origins, points), Lookup()(origins, points))


def test_ragged_tensor_module_exports_with_dynamic_rows():
    class MemberStats(torch.nn.Module):
        """Builds a RaggedTensor from its packed parts inside forward: per-member means and the padded batch."""

        def forward(self, values, first_idx):
            r = torch_ragged.RaggedTensor.from_packed(values, first_idx)
            return r.mean(), (r * 2).padded(padding_value=-1.0)

    values, first_idx = ragged_batch([2, 1, 3])
    program = export(MemberStats(), (values, first_idx), dynamic_shapes=({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}))
    for lengths in [[5, 1, 2, 1], [1, 6]]:
        values, first_idx = ragged_batch(lengths, seed=3)
        means, padded = program.module()(values, first_idx)
        members = [values[first_idx[i]:first_idx[i + 1]] for i in range(len(lengths))]
        torch.testing.assert_close(means, torch.stack([m.mean(0) for m in members]))
        expected = torch.full((len(lengths), max(lengths), 3), -1.0)
        for i, m in enumerate(members):
            expected[i, :len(m)] = 2 * m
        torch.testing.assert_close(padded, expected)
