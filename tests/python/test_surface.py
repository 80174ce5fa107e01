"""The library's front doors, public function by public function: which functions are registered ops, which
compile with TorchScript when called by their public name, and which the C++ headers declare. Every function that
misses a door is listed below with the reason; a function that gains the door must leave the list (the lists are
checked in both directions), so the ledger cannot go stale. torch.compile(fullgraph=True) and torch.export are
checked per family in the family's own tests (test_*_pt2.py, test_export.py, the scatter / scan compile tests)."""

import importlib
import inspect
import pathlib
import re
import warnings

import pytest
import torch
import torch_ragged  # noqa: F401  (loads the op library)

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = ["batch", "segment", "scatter_compat", "sparse", "pad", "tiles", "distributed"]

SPARSE_REASON = ("Python composite over torch sparse tensors (layout dispatch in Python); its triplet ops "
                 "(torch.ops.torch_ragged.sparse_*) are what TorchScript, export and C++ call today")
DISTRIBUTED_REASON = "collectives over torch.distributed process groups: Python by design, no op"

# (module, function) -> why it is not a registered op under its own public name
NOT_AN_OP_BY_NAME = {
    **{("scatter_compat", name): "calls one of the compat_* ops (torch_scatter's names would clash with the "
       "library's own scatter ops)" for name in (
           "gather_coo", "gather_csr", "scatter_add", "scatter_log_softmax", "scatter_logsumexp", "scatter_mean",
           "scatter_mul", "scatter_softmax", "scatter_std", "scatter_sum", "segment_add_coo", "segment_add_csr",
           "segment_coo", "segment_csr", "segment_max_coo", "segment_max_csr", "segment_mean_coo",
           "segment_mean_csr", "segment_min_coo", "segment_min_csr", "segment_sum_coo", "segment_sum_csr",
           "softmax")},
    ("tiles", "tiles_box_filter"): "tiles_correlate with a box kernel built in Python",
    **{("distributed", name): DISTRIBUTED_REASON for name in ("ragged_all_gather", "ragged_all_to_all", "rebalance")},
}
# The sparse functions that are ops on torch sparse tensors: torch_ragged::sparse_<name> (an overload "tensor" where
# the triplet op holds the name), taking the sparse tensor as `s` (the operands as `a`, `b` for add / sub / mul, a
# list `tensors` for cat / stack, any layout `x` for the conversions, `dense` for to_sparse and sparse_mask -- op
# sparse_sparse_mask: the triplet op sparse_mask takes the same argument types --, the added `input` for addmm /
# sspaddmm).
SPARSE_UNARY = {"neg", "abs", "asin", "asinh", "atan", "atanh", "ceil", "deg2rad", "erf", "erfinv", "expm1", "floor",
                "frac", "log1p", "rad2deg", "relu", "round", "sgn", "sign", "signbit", "sin", "sinh", "sqrt", "square",
                "tan", "tanh", "trunc"}
SPARSE_OPS_BY_NAME = SPARSE_UNARY | {"pow", "coalesce", "to_dense", "sum", "softmax", "log_softmax", "unsqueeze",
                                     "select", "narrow_copy", "permute", "transpose", "t", "index_select", "add",
                                     "sub", "mul", "div", "cat", "stack", "to_sparse", "to_sparse_coo",
                                     "to_sparse_csr", "to_sparse_csc", "mm", "addmm", "bmm", "mv", "matmul",
                                     "hspmm", "smm", "sspaddmm", "sparse_mask"}

NOT_SCRIPTABLE = {
    ("pad", "pad"): "numpy.pad's signature: keyword-only arguments and **kwargs for vector functions; TorchScript "
                    "calls torch.ops.torch_ragged.pad (the broadcast forms)",
    **{("distributed", name): DISTRIBUTED_REASON for name in ("ragged_all_gather", "ragged_all_to_all", "rebalance")},
}
# coalesce: return_order picks the result's type; mm / addmm: a plan (SparsePlan, a Python class) may be passed
SPARSE_SCRIPTABLE = SPARSE_OPS_BY_NAME - {"coalesce", "mm", "addmm"} | {"is_accelerated"}

# C++ declarations: the C++ API keeps one function per reduction where torch_scatter has several names
NOT_DECLARED_IN_CPP = {
    **{("distributed", name): DISTRIBUTED_REASON for name in ("ragged_all_gather", "ragged_all_to_all", "rebalance")},
}
SPARSE_DECLARED = SPARSE_OPS_BY_NAME | {"sparse_mask"}


def public_functions():
    for module in MODULES:
        mod = importlib.import_module(f"torch_ragged.{module}")
        for name in mod.__all__:
            if inspect.isfunction(getattr(mod, name)):
                yield module, name, getattr(mod, name)


def expected_misses(exceptions: dict, sparse_hits: set) -> dict:
    misses = dict(exceptions)
    for module, name, _ in public_functions():
        if module == "sparse" and name not in sparse_hits:
            misses[module, name] = SPARSE_REASON
    return misses


def cpp_declarations(module: str) -> set[str]:
    """The functions a module's C++ header declares (exported or inline); batch's get_first_idx is segment's."""
    headers = {"batch": ["batch.h", "segment.h"], "segment": ["segment.h"], "scatter_compat": ["scatter_compat.h"],
               "sparse": ["sparse.h"], "pad": ["pad.h"], "tiles": ["tiles.h"], "distributed": []}[module]
    names = set()
    for header in headers:
        text = (ROOT / "csrc" / "torch_ragged" / header).read_text()
        names |= set(re.findall(r"TORCH_RAGGED_API\s+[^;{]*?\b(\w+)\s*\(", text, re.S))
        names |= set(re.findall(r"^inline\s+[^;{]*?\b(\w+)\s*\(", text, re.M | re.S))
    return names


def test_the_public_functions_are_counted_per_module():
    counts = {module: sum(1 for m, _, _ in public_functions() if m == module) for module in MODULES}
    assert counts == {"batch": 10, "segment": 19, "scatter_compat": 26, "sparse": 61, "pad": 1, "tiles": 7,
                      "distributed": 3}, counts


def sparse_tensor_op(name: str):
    """torch_ragged::sparse_<name>'s overload taking a torch sparse tensor `s` (operands `a`, `b`, `tensors`, `x`,
    `input`; to_sparse's and sparse_mask's `dense`), or None: the triplet ops of the same names take `indices` or
    `dense` first."""
    packet = getattr(torch.ops.torch_ragged, "sparse_" + name, None)
    for overload in packet.overloads() if packet is not None else ():
        schema = getattr(packet, overload)._schema
        if schema.arguments and schema.arguments[0].name in ("s", "a", "tensors", "x", "input") or (
                name in ("to_sparse", "sparse_mask") and schema.arguments[0].name == "dense"):
            return getattr(packet, overload)
    return None


def test_registered_ops_by_public_name():
    ops = set(dir(torch.ops.torch_ragged))
    misses = {(m, n) for m, n, _ in public_functions()
              if (sparse_tensor_op(n) is None if m == "sparse" else n not in ops)}
    assert misses == set(expected_misses(NOT_AN_OP_BY_NAME, SPARSE_OPS_BY_NAME))


def test_torchscript_compiles_each_public_function_by_name():
    misses = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module, name, function in public_functions():
            try:
                torch.jit.script(function)
            except Exception:  # noqa: BLE001 - any failure to compile is a miss, listed below with its reason
                misses.add((module, name))
    assert misses == set(expected_misses(NOT_SCRIPTABLE, SPARSE_SCRIPTABLE))


@pytest.mark.parametrize("module", MODULES)
def test_cpp_headers_declare_the_public_functions(module):
    declared = cpp_declarations(module)
    misses = {(m, n) for m, n, _ in public_functions() if m == module and n not in declared}
    expected = {key for key in expected_misses(NOT_DECLARED_IN_CPP, SPARSE_DECLARED) if key[0] == module}
    assert misses == expected


# The Python RaggedTensor's public methods and properties the C++ class does not declare under the same name, with
# why (C++ spells it another way, or it is Python machinery).
RAGGED_TENSOR_NOT_IN_CPP = {
    **{name: "to(options) (at::TensorOptions carries the dtype / device)"
       for name in ("cpu", "cuda", "double", "float", "half", "long", "pin_memory")},
    **{name: "read from values() (its dtype(), device(), requires_grad(), grad())"
       for name in ("dtype", "device", "requires_grad", "requires_grad_", "grad")},
    "shape": "Python's torch.Size with None for ragged sizes: C++ reads size(), shape_per_tensor(), feature_shape()",
    "ndim": "dim()",
    "packed": "values()",
    "from_packed": "the checked constructor RaggedTensor(values, first_idx, shape_per_tensor)",
    "append": "a C++ RaggedTensor is immutable: RaggedTensor::cat({r, RaggedTensor::from_list({member})})",
    "extend": "a C++ RaggedTensor is immutable: RaggedTensor::cat",
    "is_nested": "a flag for torch.nn layers' Python checks",
    **{name: "torch.nested / PackedSequence conversions: Python objects (a C++ program builds them from values())"
       for name in ("from_nested", "to_nested", "to_packed_sequence", "from_packed_sequence")},
}


def test_the_cpp_ragged_tensor_declares_the_python_class_methods():
    """Each public method / property of torch_ragged.RaggedTensor has a C++ member of the same name, or is listed
    above with its C++ spelling (checked both ways: a name that gains a C++ member leaves the list)."""
    header = (ROOT / "csrc" / "torch_ragged" / "ragged_tensor.h").read_text()
    declared = set(re.findall(r"\b(\w+)\s*\(", header))
    public = {name for name in vars(torch_ragged.RaggedTensor) if not name.startswith("_")}
    missing = {name for name in public if name not in declared}
    assert missing == set(RAGGED_TENSOR_NOT_IN_CPP), missing ^ set(RAGGED_TENSOR_NOT_IN_CPP)
