"""Eager calls of ``torch.ops.torch_ragged.<op>`` through direct bindings (bindings/fast_calls.cpp).

A call through ``torch.ops`` converts each Python argument to an IValue against the schema and dispatches boxed:
~1.5-2.5 us before the kernel starts, most of a small input's time (torch's own functions pay ~0.5 us through their
generated bindings). ``torch_ragged._fast`` binds the same ops, unboxed, through the dispatcher, so every dispatch
key (autograd, autocast, vmap, fake tensors, Python dispatch modes, the JIT tracer) sees a call exactly as it sees
a ``torch.ops`` one; a call the binding does not take as it is (a required argument left out, tensor subclasses and
FX proxies, which may define ``__torch_function__``, an active torch function mode, arguments needing a conversion)
goes to torch's own call of the op, unchanged.

Each op's packet (``torch.ops.torch_ragged.<op>``: what the wrappers, TorchScript, torch.compile and export use)
gets a class of its own whose ``__call__`` *is* the binding (a builtin does not bind ``self``: no Python frame
per call). It is still an ``OpOverloadPacket``: TorchScript and Dynamo see the op it is and never run ``__call__``.
"""

import torch
from torch._ops import OpOverloadPacket

from . import _fast


def install() -> None:
    """Gives each op that torch_ragged._fast binds its binding as ``__call__`` (once the op library is loaded)."""
    for name in dir(_fast):
        if name.startswith("_"):
            continue
        packet = getattr(torch.ops.torch_ragged, name)
        packet.__class__ = type(f"FastOpOverloadPacket_{name}", (OpOverloadPacket,),
                                {"__call__": getattr(_fast, name), "__module__": __name__})
