"""The eager door of the ops (bindings/fast_calls.cpp, torch_ragged/_fast_calls.py): torch.ops.torch_ragged.<op>
called from Python takes a direct binding when its arguments allow, and torch's own call otherwise. Both doors
must give the same results, the same errors, the same autograd graph, and leave __torch_function__ (subclasses,
modes, FX proxies), TorchScript, torch.compile and export exactly as torch.ops does."""

import pytest
import torch
import torch_ragged
from torch.overrides import TorchFunctionMode
from torch_ragged import _fast

ops = torch.ops.torch_ragged
BOUND = sorted(name for name in dir(_fast) if not name.startswith("_"))


def torch_call(name, *args, **kwargs):
    """The op through torch's own parsing and boxed dispatch (the packet's original _op)."""
    return getattr(ops, name)._op(*args, **kwargs)


def test_every_binding_is_its_ops_call_and_the_packet_stays_an_op_packet():
    assert len(BOUND) >= 50
    for name in BOUND:
        packet = getattr(ops, name)
        assert isinstance(packet, torch._ops.OpOverloadPacket)
        assert type(packet).__call__ is getattr(_fast, name), name
        assert packet.default._schema.name == f"torch_ragged::{name}"


def test_the_binding_and_torchs_call_give_the_same_values_and_gradients():
    data = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    first_idx = torch.tensor([0, 2, 2, 7])
    expected = torch.stack([data[0:2].sum(0), torch.zeros(3, dtype=torch.float64), data[2:7].sum(0)])
    for call in (ops.segment_sum, lambda *a: torch_call("segment_sum", *a)):
        out = call(data, first_idx)
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
        (grad,) = torch.autograd.grad((out * torch.arange(3.0, dtype=torch.float64).view(3, 1)).sum(), data)
        torch.testing.assert_close(grad, torch.tensor([0, 0, 2, 2, 2, 2, 2], dtype=torch.float64).view(7, 1)
                                   .expand(7, 3))
    assert ops.segment_sum(data, first_idx).grad_fn.name() == torch_call("segment_sum", data, first_idx).grad_fn.name()


def test_keywords_defaults_and_conversions_give_torchs_result():
    values = torch.arange(6.0).view(3, 2)
    padded = ops.packed_to_padded(values, torch.tensor([[1], [2]]), torch.tensor([0, 1, 3]), 0.0)  # defaults
    by_keyword = ops.packed_to_padded(values, torch.tensor([[1], [2]]), torch.tensor([0, 1, 3]), padding_value=0.0,
                                      padding_side="right")
    assert torch.equal(padded, by_keyword)
    assert torch.equal(padded, torch.tensor([[[0.0, 1.0], [0.0, 0.0]], [[2.0, 3.0], [4.0, 5.0]]]))
    assert torch.equal(padded, torch_call("packed_to_padded", values, torch.tensor([[1], [2]]), torch.tensor([0, 1, 3]),
                                          0.0))
    # a 0-d tensor where the schema has an int (the binding refuses it; torch converts it)
    ids = ops.segment_ids(torch.tensor([0, 1, 3]), torch.tensor(3))
    assert ids.tolist() == [0, 1, 1]
    # an int where the schema has a Scalar of a float tensor, a bool for a bool tensor
    assert ops.list_to_padded([torch.ones(1, 1), torch.ones(2, 1)], 7, None, "right")[0][0, 1, 0].item() == 7.0
    flags = ops.list_to_padded([torch.ones(1, 1, dtype=torch.bool)] * 2, True, [3], "left")[0]
    assert flags.shape == (2, 3, 1) and flags.all()


def test_errors_are_the_same_through_both_doors():
    data, bad = torch.ones(3, 2), torch.tensor([0, 5])
    messages = []
    for call in (ops.segment_sum, lambda *a: torch_call("segment_sum", *a)):
        with pytest.raises(ValueError, match=r"torch_ragged\.segment_sum: first_idx must run from 0") as info:
            call(data, bad)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    with pytest.raises(RuntimeError, match="missing value for argument 'first_idx'"):
        ops.segment_sum(data)  # a missing argument: torch's own message
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor'"):
        ops.segment_sum(data, "not a tensor")  # a wrong type: torch's own message


class _Logged(torch.Tensor):
    calls: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(str(func))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_subclasses_and_torch_function_modes_still_see_the_op():
    data, first_idx = torch.arange(4.0), torch.tensor([0, 1, 4])
    _Logged.calls.clear()
    out = ops.segment_sum(data.as_subclass(_Logged), first_idx)
    assert "torch_ragged.segment_sum" in _Logged.calls and type(out) is _Logged
    assert out.as_subclass(torch.Tensor).tolist() == [0.0, 6.0]

    seen = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Mode():
        assert torch_ragged.segment_sum(data, first_idx).tolist() == [0.0, 6.0]
    assert "torch_ragged.segment_sum" in seen


def test_fx_tracing_torchscript_compile_and_export_still_record_the_op():
    def f(data, first_idx):
        return torch_ragged.segment_sum(data, first_idx) * 2

    data, first_idx = torch.arange(6.0).view(3, 2), torch.tensor([0, 1, 3])
    expected = torch.tensor([[0.0, 2.0], [12.0, 16.0]])
    traced = torch.fx.symbolic_trace(f)
    assert any(node.target is ops.segment_sum for node in traced.graph.nodes)
    assert torch.equal(traced(data, first_idx), expected)
    scripted = torch.jit.script(f)
    assert "torch_ragged::segment_sum" in str(scripted.inlined_graph)
    assert torch.equal(scripted(data, first_idx), expected)
    assert torch.equal(torch.compile(f, fullgraph=True, backend="eager")(data, first_idx), expected)

    class M(torch.nn.Module):
        def forward(self, data, first_idx):
            return f(data, first_idx)

    graph = torch.export.export(M(), (data, first_idx)).graph
    assert any(node.target is ops.segment_sum.default for node in graph.nodes)


def test_fake_tensors_and_the_meta_device_pass_through_the_binding():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = ops.segment_sum(torch.empty(5, 3), torch.tensor([0, 2, 5]))
    assert out.shape == (2, 3)
