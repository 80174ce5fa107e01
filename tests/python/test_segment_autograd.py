"""The segment core's autograd (gradcheck / gradgradcheck in float64), registration (opcheck), torch.compile
and TorchScript."""

import warnings

import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

ops = torch.ops.torch_ragged
FIRST_IDX = [0, 2, 2, 5, 6]  # an empty segment and a single-row one


def leaf(*shape, device="cpu"):
    generator = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(device).requires_grad_(True)


def compat_samples():
    """torch_ragged.scatter_compat's ops (composites of the segment core's): torch_scatter's argument order."""
    index = torch.tensor([2, 0, 2, 4, 0, 2])
    per_element = torch.tensor([[0, 1, 0, 1, 2], [2, 2, 0, 1, 0]])
    indptr = torch.tensor([[0, 2, 2, 5], [1, 1, 3, 4]])
    return [
        (ops.compat_scatter, (leaf(6, 3), index, 0, None, None, "mean")),
        (ops.compat_scatter, (leaf(2, 5), per_element, -1, leaf(2, 3), None, "mul")),
        (ops.compat_scatter_arg, (leaf(6, 3), index, 0, leaf(5, 3), 5, "max")),
        (ops.compat_scatter_arg, (leaf(2, 5), per_element, 1, None, 4, "min")),
        (ops.compat_segment_csr, (leaf(2, 5, 3), indptr, None, "sum")),
        (ops.compat_segment_csr, (leaf(6), torch.tensor(FIRST_IDX), None, "mean")),
        (ops.compat_segment_csr_arg, (leaf(2, 5, 3), indptr, None, "max")),
        (ops.compat_gather_csr, (leaf(4, 2), torch.tensor(FIRST_IDX), None)),
        (ops.compat_gather_csr, (leaf(2, 3), indptr, leaf(2, 5))),
        (ops.compat_gather_coo, (leaf(5, 2), torch.tensor([0, 0, 3, 4, 4, 1]), None)),
        (ops.compat_gather_coo, (leaf(2, 5, 2), per_element, None)),
        (ops.compat_scatter_std, (leaf(6, 3), index, 0, None, None, True)),
        (ops.compat_scatter_logsumexp, (leaf(6, 3), index, 0, None, 6, 1e-12)),
        (ops.compat_scatter_logsumexp, (leaf(2, 5), per_element, 1, leaf(2, 3), None, 0.0)),
        # softmax's result does not show the positions' count: without dim_size it is data-dependent and
        # torch.export refuses the unbacked size it cannot return (eager takes None: test_scatter_compat.py)
        (ops.compat_scatter_softmax, (leaf(6, 3), index, 0, 5)),
        (ops.compat_scatter_log_softmax, (leaf(2, 5), per_element, -1, 3)),
    ]


def segment_samples():
    first_idx = torch.tensor(FIRST_IDX)
    data = leaf(6, 3)
    return [
        (ops.get_first_idx, (torch.tensor([2, 0, 3]), True)),
        (ops.segment_sum, (data, first_idx)),
        (ops.segment_mean, (data, first_idx.to(torch.int32))),
        (ops.segment_max, (data, first_idx)),
        (ops.segment_min, (leaf(6), first_idx)),
        (ops.segment_softmax, (data, first_idx)),
        (ops.segment_log_softmax, (leaf(6, 2, 2), first_idx)),
        (ops.segment_softmax_backward, (leaf(6, 3), leaf(6, 3), first_idx, False)),
        (ops.segment_softmax_backward, (leaf(6, 3), leaf(6, 3), first_idx, True)),
        (ops.segment_expand, (leaf(4, 3), first_idx, None)),
        (ops.segment_expand, (leaf(4), first_idx, 6)),
        (ops.segment_ids, (first_idx, None)),
        (ops.segment_ids, (first_idx, 6)),
        (ops.ragged_index_select, (data, first_idx, torch.tensor([3, 0, -1, 0]), None)),
        (ops.ragged_index_select, (leaf(6), first_idx, torch.tensor([2, 1]), 3)),
        (ops.scatter, (data, torch.tensor([2, 0, 2, 4, 0, 2]), 0, None, "sum")),
        (ops.scatter, (leaf(3, 5), torch.tensor([1, 0, 1, 1, 3], dtype=torch.int32), 1, 6, "mean")),
        (ops.scatter, (data, torch.tensor([1, 1, 0, 1, 3, 0]), 0, 4, "max")),
        (ops.scatter_max, (data, torch.tensor([2, 0, 2, 4, 0, 2]), 0, None)),
        (ops.scatter_min, (leaf(6), torch.tensor([1, 1, 0, 1, 3, 0]), -1, 5)),
        (ops.scatter, (data, torch.tensor([2, 0, 2, 4, 0, 2]), 0, 5, "mul")),
        (ops.scatter, (leaf(2, 5), torch.tensor([[0, 1, 0, 1, 2], [2, 2, 0, 1, 0]]), 1, 3, "sum")),  # per element
        (ops.scatter_max, (leaf(2, 5), torch.tensor([[0, 1, 0, 1, 2], [2, 2, 0, 1, 0]]), 1, 4)),
        *compat_samples(),
        (ops.segment_cumsum, (data, first_idx, False, False)),
        (ops.segment_cumsum, (data, first_idx, True, True)),
        (ops.segment_cumprod, (data, first_idx, True, False)),
        (ops.segment_cumprod, (leaf(6), first_idx, False, True)),
        (ops.segment_cummax, (data, first_idx, False)),
        (ops.segment_cummin, (leaf(6, 2), first_idx, True)),
        (ops.segment_logcumsumexp, (data, first_idx, False)),
        (ops.segment_arange, (first_idx, None)),
        (ops.segment_arange, (first_idx, 6)),
        (ops.segment_row, (data, torch.tensor([0, 2, 3, 5, 6]), -1)),  # every segment holds a row
        (ops.segment_row, (leaf(6, 2, 2), torch.tensor([0, 2, 3, 5, 6], dtype=torch.int32), 0)),
        (ops.segment_slice, (data, first_idx, 1, None, 1)),
        (ops.segment_slice, (leaf(6, 2, 2), torch.tensor([0, 2, 3, 5, 6], dtype=torch.int32), -2, None, 2)),
    ]


@pytest.mark.parametrize("op,args", segment_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_opcheck(op, args):
    opcheck(op, args)


def differentiable_ops():
    return {
        "sum": torch_ragged.segment_sum,
        "mean": torch_ragged.segment_mean,
        "max": lambda d, f: torch_ragged.segment_max(d, f).values,
        "min": lambda d, f: torch_ragged.segment_min(d, f).values,
        "softmax": torch_ragged.segment_softmax,
        "log_softmax": torch_ragged.segment_log_softmax,
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(differentiable_ops()))
@pytest.mark.parametrize("feature", [(), (3,)])
def test_gradcheck_and_gradgradcheck(device, name, feature):
    op = differentiable_ops()[name]
    first_idx = torch.tensor(FIRST_IDX)
    data = leaf(6, *feature, device=device)
    assert gradcheck(lambda d: op(d, first_idx), (data,))
    assert gradgradcheck(lambda d: op(d, first_idx), (data,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", [[2, -4, 4], [3, 0, -1, 0], [1, 1]])  # distinct (an empty segment among them)
def test_ragged_index_select_gradient_adds_each_picked_row_back_where_it_came_from(device, index):
    """The backward copies the gradient's rows back where each segment pick took them (distinct picks: a copy; a
    segment picked twice: its rows' gradients added), against a loop; gradcheck and gradgradcheck."""
    first_idx = torch.tensor([0, 2, 2, 5, 6, 9])  # segment 1 is empty
    values = leaf(9, 2, device=device)
    picks = torch.tensor(index)
    out, _ = torch.ops.torch_ragged.ragged_index_select(values, first_idx, picks, None)
    weights = torch.arange(out.numel(), dtype=torch.float64, device=device).view_as(out)
    (grad,) = torch.autograd.grad(out, values, weights)
    expected = torch.zeros(9, 2, dtype=torch.float64)
    row = 0
    for pick in index:
        b = pick % 5
        for source in range(first_idx[b], first_idx[b + 1]):
            expected[source] += weights[row].cpu()
            row += 1
    assert torch.equal(grad.cpu(), expected)
    select = lambda v: torch.ops.torch_ragged.ragged_index_select(v, first_idx, picks, None)[0]  # noqa: E731
    assert gradcheck(select, (values,)) and gradgradcheck(select, (values,))


@pytest.mark.parametrize("device", DEVICES)
def test_expand_gradients(device):
    first_idx = torch.tensor(FIRST_IDX, device=device)
    values = leaf(4, 2, device=device)
    assert gradcheck(lambda v: torch_ragged.segment_expand(v, first_idx), (values,))
    assert gradgradcheck(lambda v: torch_ragged.segment_expand(v, first_idx, 6), (values,))


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_backward_is_twice_differentiable(device):
    # the fused backward op's own backward (written with sum / expand), checked directly
    first_idx = torch.tensor(FIRST_IDX)
    for log in (False, True):
        grad, output = leaf(6, 2, device=device), leaf(6, 2, device=device)
        assert gradcheck(lambda g, y, log=log: ops.segment_softmax_backward(g, y, first_idx, log), (grad, output))
        assert gradgradcheck(lambda g, y, log=log: ops.segment_softmax_backward(g, y, first_idx, log),
                             (grad, output))


@pytest.mark.parametrize("device", DEVICES)
def test_max_gradient_goes_to_the_arg_rows_only(device):
    data = torch.tensor([[1.0, 5.0], [3.0, 5.0], [2.0, 0.0]], device=device, requires_grad=True)
    first_idx = torch.tensor([0, 0, 3])  # an empty segment first
    values, arg = torch_ragged.segment_max(data, first_idx)
    (values * torch.tensor([[10.0, 10.0], [1.0, 2.0]], device=device)).sum().backward()
    assert torch.equal(data.grad.cpu(), torch.tensor([[0.0, 2.0], [1.0, 0.0], [0.0, 0.0]]))
    assert not arg.requires_grad


@pytest.mark.parametrize("device", DEVICES)
def test_mean_gradient_divides_by_the_count(device):
    data = torch.ones(5, 2, device=device, requires_grad=True)
    torch_ragged.segment_mean(data, torch.tensor([0, 1, 1, 5])).sum().backward()
    expected = torch.tensor([1.0, 0.25, 0.25, 0.25, 0.25]).unsqueeze(1).expand(5, 2)
    assert torch.equal(data.grad.cpu(), expected)


def test_half_precision_gradients_accumulate_in_float():
    data = torch.randn(40, 4, dtype=torch.float64)
    first_idx = torch.tensor([0, 10, 40])
    for op in (torch_ragged.segment_softmax, torch_ragged.segment_log_softmax):
        half = data.to(torch.bfloat16).requires_grad_(True)
        wide = half.detach().double().requires_grad_(True)
        weight = torch.randn(40, 4, dtype=torch.float64)
        (op(half, first_idx).double() * weight).sum().backward()
        (op(wide, first_idx) * weight).sum().backward()
        torch.testing.assert_close(half.grad.double(), wide.grad, rtol=2e-2, atol=2e-2)


def attention_pool(points, scores, first_idx):
    """Per-cloud softmax attention over a packed point batch (the docs example)."""
    weights = torch_ragged.segment_softmax(scores, first_idx)
    return torch_ragged.segment_sum(points * weights, first_idx)


def test_compile_fullgraph_with_backward():
    compiled = torch.compile(attention_pool, fullgraph=True)
    points = torch.randn(9, 3, requires_grad=True)
    scores = torch.randn(9, 1, requires_grad=True)
    first_idx = torch.tensor([0, 4, 4, 9])
    out = compiled(points, scores, first_idx)
    expected = attention_pool(points, scores, first_idx)
    torch.testing.assert_close(out, expected)
    grads = torch.autograd.grad(out.square().sum(), (points, scores))
    expected_grads = torch.autograd.grad(expected.square().sum(), (points, scores))
    for a, b in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_compile_fullgraph_expand_ids_and_extrema():
    def fn(data, first_idx):
        values, arg = torch_ragged.segment_max(data, first_idx)
        centred = data - torch_ragged.segment_expand(torch_ragged.segment_mean(data, first_idx), first_idx,
                                                     data.shape[0])
        return values, arg, centred, torch_ragged.segment_ids(first_idx, data.shape[0])

    data, first_idx = torch.randn(7, 2), torch.tensor([0, 3, 3, 7])
    for a, b in zip(torch.compile(fn, fullgraph=True)(data, first_idx), fn(data, first_idx), strict=True):
        torch.testing.assert_close(a, b)


def scripted_pool(points: torch.Tensor, scores: torch.Tensor, first_idx: torch.Tensor) -> torch.Tensor:
    weights = torch.ops.torch_ragged.segment_softmax(scores, first_idx)
    values, arg = torch.ops.torch_ragged.segment_max(points, first_idx)
    return torch.ops.torch_ragged.segment_sum(points * weights, first_idx) + values


def test_torchscript():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated but supported
        scripted = torch.jit.script(scripted_pool)
    points, scores, first_idx = torch.randn(6, 3), torch.randn(6, 1), torch.tensor([0, 2, 6])
    torch.testing.assert_close(scripted(points, scores, first_idx), scripted_pool(points, scores, first_idx))
