"""The pad family's registration checks (opcheck: schema, fake kernel, autograd wiring) and torch.compile."""

import pytest
import torch
import torch_ragged
from torch.library import opcheck

ops = torch.ops.torch_ragged


def pad_samples():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    values = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    # The output keeps a dense input's memory layout: the fake kernel must give the same strides.
    image = torch.randn(2, 3, 4, 5, dtype=torch.float64).to(memory_format=torch.channels_last).requires_grad_()
    return [
        (ops.pad_index, (image, [0, 1, 2, 0, 1, 1, 0, 2], "constant", torch.randn(4, 2, dtype=torch.float64))),
        (ops.pad_index, (x, [1, 2, 5, 0], "reflect")),
        (ops.pad_index, (x, [1, 2, 0, 3], "constant", values)),
        (ops.pad_index_backward, (torch.randn(6, 9, dtype=torch.float64, requires_grad=True), [1, 2, 5, 0],
                                  "symmetric")),
        (ops.pad, (x, [2, 1, 0, 3], "wrap")),
        (ops.pad, (x, [2, 1, 0, 3], "median", None, None, [1, 2, 2, 1])),
        (ops.pad, (x, [2, 1, 0, 3], "linear_ramp", None, values)),
        (ops.pad, (x, [2, 1, 0, 3], "reflect", None, None, None, "odd")),
    ]


@pytest.mark.parametrize("op,args", pad_samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_opcheck(op, args):
    opcheck(op, args)


@pytest.mark.parametrize("mode", ["reflect", "mean"])
def test_compile_fullgraph_pad(mode):
    def fn(x):
        return torch_ragged.pad(torch.sin(x), ((1, 2), (3, 0)), mode) * 2

    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    x = torch.randn(4, 5, requires_grad=True)
    torch.testing.assert_close(compiled(x), fn(x))
    compiled(x).sum().backward()
    expected = torch.autograd.grad(fn(x).sum(), x)[0]
    torch.testing.assert_close(x.grad, expected)
