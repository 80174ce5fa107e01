"""numpy's own test suite for numpy.pad (numpy/lib/tests/test_arraypad.py, installed with numpy), run against
torch_ragged.pad: the module's `np.pad` is replaced by a function that pads `torch.from_numpy(array)` with
torch_ragged.pad and hands back `.numpy()`, so every assertion numpy makes about its own pad (values, dtypes, memory
layout, errors and their messages) is made about ours. Cases for what torch itself cannot hold (object arrays,
80-bit long doubles) or that this library documents as unsupported are skipped below, each with its reason."""

import types

import numpy as np
import torch
import torch_ragged
from numpy.lib.tests import test_arraypad as numpy_suite


def _pad_with_torch_ragged(array, pad_width, mode="constant", **kwargs):
    array = np.asarray(array)
    if array.dtype == np.ulonglong:  # the same 64-bit type as np.uint64, but torch.from_numpy knows only the latter
        array = array.view(np.uint64)
    # np.copy(order="K") keeps a Fortran-ordered array Fortran-ordered (torch.from_numpy keeps its strides)
    return torch_ragged.pad(torch.from_numpy(np.copy(array, order="K")), pad_width, mode, **kwargs).numpy()


_numpy_with_our_pad = types.ModuleType("numpy_with_torch_ragged_pad")
_numpy_with_our_pad.__dict__.update({name: getattr(np, name) for name in dir(np) if not name.startswith("__")})
_numpy_with_our_pad.pad = _pad_with_torch_ragged
numpy_suite.np = _numpy_with_our_pad  # the suite's functions read `np` from their module's globals

# numpy's tests, collected here. TestAsPairs tests numpy's private _as_pairs helper, not pad: left out.
globals().update({name: value for name, value in vars(numpy_suite).items()
                  if (name.startswith("Test") or name.startswith("test_")) and name != "TestAsPairs"})

# (node id fragment, reason): conftest.py skips matching cases with the reason.
UNSUPPORTED_CASES = {
    "test_check_object_array": "torch has no object dtype (numpy's object arrays of Python objects)",
    "test_object_input": "torch has no object dtype (numpy's object arrays of Python objects)",
    "longdouble": "torch has no 80-bit long double / complex long double dtype",
    "maximum-complex": "maximum / minimum / median of complex inputs (numpy orders complex numbers "
                       "lexicographically) are documented as unsupported: TypeError",
    "minimum-complex": "see maximum-complex",
    "median-complex": "see maximum-complex",
}
