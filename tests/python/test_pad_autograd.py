"""Gradients of torch_ragged.pad: gradcheck / gradgradcheck in float64 for every mode, and the index
modes' backward against an independent gather built from numpy.pad of an index array."""

import numpy as np
import pytest
import torch
import torch_ragged
from devices import DEVICES
from torch.autograd import gradcheck, gradgradcheck

WIDTHS = ((2, 7), (0, 3), (4, 1))  # wider than the axes below: several periods


def check(fn, *inputs):
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode,kwargs", [
    ("constant", {}), ("empty", {}), ("edge", {}), ("wrap", {}), ("reflect", {}), ("symmetric", {}),
    ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"}),
    ("linear_ramp", {"end_values": ((1.0, -2.0),)}), ("mean", {}), ("mean", {"stat_length": 2}),
    ("maximum", {}), ("minimum", {"stat_length": (1, 3)}), ("median", {}), ("median", {"stat_length": 2}),
])
def test_gradcheck_every_mode(device, mode, kwargs):
    x = torch.randn(3, 2, 4, dtype=torch.float64, device=device, requires_grad=True)

    def fn(x):
        out = torch_ragged.pad(x, WIDTHS, mode, **kwargs)
        if mode == "empty":  # only the interior is defined
            return out[2:5, 0:2, 4:8]
        return out
    check(fn, x)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_constant_values_and_end_values(device):
    x = torch.randn(2, 3, dtype=torch.float64, device=device, requires_grad=True)
    values = torch.randn(2, 2, dtype=torch.float64, device=device, requires_grad=True)
    check(lambda x, v: torch_ragged.pad(x, ((1, 2), (3, 1)), constant_values=v), x, values)
    scalar = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)  # broadcast to every side
    check(lambda x, v: torch_ragged.pad(x, 2, constant_values=v), x, scalar.to(device).detach().requires_grad_())
    ends = torch.randn(2, 2, dtype=torch.float64, device=device, requires_grad=True)
    check(lambda x, e: torch_ragged.pad(x, ((1, 2), (3, 1)), "linear_ramp", end_values=e), x, ends)


def source_index_map(shape, widths, mode):
    """numpy.pad of the flat indices: the input element each output element copies (independent of torch_ragged)."""
    indices = np.arange(int(np.prod(shape))).reshape(shape)
    return torch.from_numpy(np.pad(indices, widths, mode).copy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric"])
@pytest.mark.parametrize("shape,widths", [((5,), ((3, 11),)), ((3, 4), ((5, 2), (4, 9))),
                                          ((1, 2, 3), ((2, 2), (3, 0), (1, 7)))])
def test_index_mode_backward_equals_the_gather_adjoint(device, mode, shape, widths):
    x = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    grad = torch.randn(torch_ragged.pad(x.detach(), widths, mode).shape, dtype=torch.float64, device=device)
    torch_ragged.pad(x, widths, mode).backward(grad)
    source = source_index_map(shape, widths, mode).reshape(-1).to(device)
    expected = torch.zeros(x.numel(), dtype=torch.float64, device=device).index_add_(0, source, grad.reshape(-1))
    torch.testing.assert_close(x.grad.reshape(-1), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_index_mode_backward_is_deterministic(device):
    x = torch.randn(64, 33, 17, device=device, requires_grad=True)
    grad = torch.randn(64 + 9, 33 + 40, 17 + 5, device=device)
    results = []
    for _ in range(3):
        x.grad = None
        torch_ragged.pad(x, ((4, 5), (20, 20), (0, 5)), "reflect").backward(grad)
        results.append(x.grad.clone())
    assert all(torch.equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("device", DEVICES)
def test_maximum_routes_the_gradient_to_the_first_maximal_element(device):
    x = torch.tensor([3.0, 1.0, 3.0, 2.0], device=device, requires_grad=True)
    torch_ragged.pad(x, (2, 1), "maximum").sum().backward()
    assert x.grad.tolist() == [4.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("device", DEVICES)
def test_median_of_an_even_count_splits_the_gradient_between_the_middle_elements(device):
    x = torch.tensor([4.0, 1.0, 3.0, 2.0], device=device, requires_grad=True)
    torch_ragged.pad(x, (1, 1), "median").sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("device", DEVICES)
def test_half_precision_backward_accumulates_in_float(device):
    x = torch.ones(1, 1, device=device, dtype=torch.half, requires_grad=True)
    grad = torch.full((1, 4096), 0.1, device=device, dtype=torch.half)  # a half sum would stall near 256
    torch_ragged.pad(x, ((0, 0), (0, 4095)), "wrap").backward(grad)
    assert abs(x.grad.item() - 4096 * grad[0, 0].item()) < 0.5
