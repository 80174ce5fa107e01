"""Bad-input fuzz of every registered op, and random calls of every family against independent references.

Each opcheck sample (the every-op list of test_export.py) is called again with one argument broken: a required tensor
replaced by None, moved to the meta device beside real tensors, given a float dtype where an index is expected, an
extra or a missing dimension, one entry set to -1, 2**31 or 2**62, emptied; an int argument set to -3 or 2**62; a
string replaced by an unknown name; a float set to NaN / inf. Beside them, random calls drawn from legal and illegal
forms, each checked against an independent reference: numpy.pad for pad; loops, torch.sparse with its invariant checks
and numpy tile loops for the segment, sparse, tiles and container families (fuzz_families.py) -- where the reference
raises ours must raise, where it returns ours must return the same result. The calls run in child processes (a crash
must not take pytest down), a batch at a time, and each case must end in one of:
- a clear error: an exception of a Python error type whose message names the op;
- a result, for breakages that can be legal (values, shapes, extreme numbers), with finite output sizes, on the
  device the inputs are on;
and never in a signal, a hang, or a result for breakages that are always illegal (None / mixed devices / a float
index / an unknown name). Seeded: the same cases every run; bounded: about 2,600 calls in about a minute.
"""

import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLEAR_ERRORS = ("ValueError", "TypeError", "IndexError", "RuntimeError", "NotImplementedError", "OverflowError")
BATCH_TIMEOUT_S = 240
PAD_CASES = 400
FAMILY_CASES = 250  # per family in fuzz_families.DRAW


# ---- the cases (built in the child, which has imported torch) ----

def sample_ops():
    """(op name, op, args) for every op sample, args without autograd (the fuzz checks the kernels' guards)."""
    import torch
    from test_export import all_samples
    from torch.utils import _pytree as pytree

    def plain(value):
        return value.detach() if isinstance(value, torch.Tensor) else value

    return [(str(op).split(".")[-1], op, pytree.tree_map(plain, args)) for op, args in all_samples()]


def tensor_breakages(tensor, has_other_tensors: bool):
    """(label, broken tensor, always illegal?) for one tensor argument."""
    import torch

    broken = []
    if has_other_tensors:
        broken.append(("meta", tensor.to("meta"), False))
    if not tensor.is_floating_point() and tensor.dtype != torch.bool:
        broken.append(("float_index", tensor.double(), True))
        if tensor.numel() > 0:
            for value in (-1, 2**31, 2**62):
                changed = tensor.clone().reshape(-1)
                changed[changed.numel() // 2] = value if tensor.dtype == torch.int64 else min(value, 2**31 - 1)
                broken.append((f"entry_{value}", changed.reshape(tensor.shape), False))
    broken.append(("extra_dim", tensor.unsqueeze(0), False))
    if tensor.dim() > 0:
        broken.append(("fewer_dims", tensor.reshape(-1)[:1].reshape(()) if tensor.dim() == 1 else tensor[0], False))
        broken.append(("empty", tensor[:0], False))
    return broken


def argument_breakages(schema_arg, value, has_other_tensors: bool):
    """(label, broken value, always illegal?) for one argument of the op's schema."""
    import torch

    optional = isinstance(schema_arg.type, torch.OptionalType)
    if isinstance(value, torch.Tensor):
        broken = tensor_breakages(value, has_other_tensors)
        if not optional:
            broken.append(("none", None, True))
        return broken
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        broken = [("list_empty", [], False), ("list_none", [value[0], None], True)]
        if len(value) > 1:
            broken.append(("list_meta", [value[0], value[1].to("meta"), *value[2:]], True))
        broken += [(f"member_{label}", [v, *value[1:]], illegal)
                   for label, v, illegal in tensor_breakages(value[0], True)]
        return broken
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [("int_-3", -3, False), ("int_2**62", 2**62, False)]
    if isinstance(value, float):
        return [("nan", math.nan, False), ("inf", math.inf, False)]
    if isinstance(value, str):  # numpy reads any reflect_type other than "odd" as "even"
        return [("unknown_name", "bogus", schema_arg.name != "reflect_type")]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        return [("ints_negative", [-3, *value[1:]], False), ("ints_huge", [2**62, *value[1:]], False),
                ("ints_empty", [], False), ("ints_longer", [*value, 1], False)]
    return []


def random_pad_call(rng):
    """A torch_ragged.pad call with arguments drawn from numpy's legal and illegal forms (numpy is the reference)."""
    import numpy as np

    ndim = int(rng.integers(0, 4))
    shape = tuple(int(rng.choice([0, 1, 2, 5])) for _ in range(ndim))
    dtype = rng.choice([np.float32, np.float64, np.int8, np.uint8, np.int64, np.bool_])
    array = np.asarray((rng.standard_normal(shape) * 50).astype(dtype))
    width_choices = [0, 1, 3, 7, -1, 2**62, 2**63 - 1, 1.5, True, (1, 2), (1, 2, 3), ((1, 2),), [[1, 2]] * ndim,
                     [[1, 2]] * (ndim + 1), {0: 2}, {5: 1}, "2", None]
    widths = width_choices[int(rng.integers(len(width_choices)))]
    mode = str(rng.choice(["constant", "edge", "wrap", "reflect", "symmetric", "linear_ramp", "maximum", "minimum",
                           "mean", "median", "bogus"]))
    kwargs = {}
    if rng.random() < 0.5:
        key = str(rng.choice(["constant_values", "end_values", "stat_length", "reflect_type"]))
        kwargs[key] = [0, -1, 2**62, 1.5, float("nan"), (1, 2), ((1, 2, 3),), "odd", "x", 300][
            int(rng.integers(10))]
    return array, widths, mode, kwargs


def pad_against_numpy(array, widths, mode, kwargs):
    """The outcome of torch_ragged.pad, with numpy.pad's beside it."""
    import warnings

    import numpy as np
    import torch
    import torch_ragged

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = np.pad(array, widths, mode, **kwargs)
        except Exception as error:  # noqa: BLE001 (numpy's exception is the reference)
            expected = error
    outcome = outcome_of("pad", torch_ragged.pad, (torch.from_numpy(array), widths, mode), kwargs)
    if isinstance(expected, Exception):
        outcome["numpy"] = f"raised {type(expected).__name__}"
    elif "returned" in outcome:
        actual = torch_ragged.pad(torch.from_numpy(array), widths, mode, **kwargs).numpy()
        close = np.allclose if mode == "mean" and array.dtype.kind == "f" else np.array_equal  # pairwise sums
        same = actual.shape == expected.shape and actual.dtype == expected.dtype and close(
            actual, expected, equal_nan=actual.dtype.kind in "fc")
        outcome["numpy"] = "same result" if same else f"a different result: numpy {expected!r}, ours {actual!r}"
    else:
        outcome["numpy"] = "a result"
    return outcome


def all_cases():
    """(case id, op name, op, args, always illegal?), in a fixed order; op None marks a pad-vs-numpy case, op
    "family" a family call against its reference (args: the call's spec)."""
    import fuzz_families
    import numpy as np
    import torch

    cases = []
    rng = np.random.default_rng(19)
    for _ in range(PAD_CASES):
        cases.append((f"pad_vs_numpy[{len(cases)}]", "pad", None, random_pad_call(rng), False))
    for family, draw in fuzz_families.DRAW.items():
        for _ in range(FAMILY_CASES):
            cases.append((f"{family}_vs_reference[{len(cases)}]", family, "family", draw(rng), False))
    for name, op, args in sample_ops():
        schema_args = op.default._schema.arguments
        for position, value in enumerate(args):
            others = any(isinstance(v, torch.Tensor) for i, v in enumerate(args) if i != position)
            for label, broken, illegal in argument_breakages(schema_args[position], value, others):
                changed = (*args[:position], broken, *args[position + 1:])
                cases.append((f"{name}[{len(cases)}]:{schema_args[position].name}:{label}", name, op, changed,
                              illegal))
    return cases


def outcome_of(name, op, args, kwargs=None):
    """What one call did, as a JSON-able dict."""
    import torch
    from torch.utils import _pytree as pytree

    try:
        result = op(*args, **(kwargs or {}))
    except Exception as error:  # noqa: BLE001 (the exception is the outcome)
        return {"raised": type(error).__name__, "message": str(error).split("\n")[0][:300]}
    outputs = [leaf for leaf in pytree.tree_leaves(result) if isinstance(leaf, torch.Tensor)]
    inputs = [leaf for leaf in pytree.tree_leaves(args) if isinstance(leaf, torch.Tensor)]
    devices = sorted({str(t.device) for t in inputs})
    return {"returned": [list(t.shape) for t in outputs], "devices": sorted({str(t.device) for t in outputs}),
            "input_devices": devices}


def run_child(first: int, last: int):
    """Runs cases [first, last), printing 'start i' before and one JSON outcome line after each."""
    import fuzz_families
    import torch

    torch.manual_seed(0)
    cases = all_cases()
    for i in range(first, min(last, len(cases))):
        case_id, name, op, args, illegal = cases[i]
        print(f"start {i}", flush=True)
        if op is None:
            outcome = pad_against_numpy(*args)
        elif op == "family":
            outcome = fuzz_families.outcome(name, args, outcome_of)
        else:
            outcome = outcome_of(name, op, args)
        print(json.dumps({"i": i, "case": case_id, "op": name, "illegal": illegal, **outcome}), flush=True)
    print("done", flush=True)


# ---- the parent ----

def count_cases() -> int:
    return int(subprocess.run([sys.executable, __file__, "count"], capture_output=True, text=True, check=True,
                              timeout=BATCH_TIMEOUT_S).stdout.split()[-1])


def run_all(total: int):
    """Every case's outcome; a child that dies is restarted after the case it died in (recorded as a crash)."""
    outcomes, first = {}, 0
    while first < total:
        process = subprocess.run([sys.executable, __file__, str(first), str(total)], capture_output=True, text=True,
                                 timeout=BATCH_TIMEOUT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})
        in_flight = None
        for line in process.stdout.splitlines():
            if line.startswith("start "):
                in_flight = int(line.split()[1])
            elif line.startswith("{"):
                record = json.loads(line)
                outcomes[record["i"]] = record
                in_flight = None
        if process.returncode == 0:
            break
        assert in_flight is not None, f"child failed outside a case:\n{process.stderr[-2000:]}"
        outcomes[in_flight] = {"i": in_flight, "crashed": process.returncode, "stderr": process.stderr[-500:]}
        first = in_flight + 1
    return outcomes


def problem_with(record) -> str | None:
    if "crashed" in record:
        return f"died with return code {record['crashed']}: {record['stderr']}"
    reference = record.get("numpy", record.get("reference", ""))
    if reference.startswith("raised") and "returned" in record:
        return f"returned {record['returned']} where the reference {reference}"
    if reference == "a result" or reference.startswith("a different"):
        return f"{record.get('raised', '')} {record.get('message', '')} where the reference gave {reference}"
    if "raised" in record:
        if record["raised"] not in CLEAR_ERRORS:
            return f"raised {record['raised']}: {record['message']}"
        # a family call goes through a wrapper or a method (RaggedTensor.mask): torch_ragged names it
        named = "torch_ragged." if "reference" in record else record["op"]
        if named not in record["message"]:
            return f"error does not name the op: {record['raised']}: {record['message']}"
        return None
    if "reference" in record:  # a family call that returned: the reference comparison above was its check
        return None
    if record["illegal"]:
        return f"returned {record['returned']} for an illegal argument"
    if any(any(extent < 0 or extent >= 2**40 for extent in shape) for shape in record["returned"]):
        return f"returned implausible sizes {record['returned']}"
    if record["devices"] and set(record["devices"]) - set(record["input_devices"]):
        return f"returned on {record['devices']} from inputs on {record['input_devices']}"
    if "meta" in record["case"] and record["devices"] != ["meta"]:  # real outputs computed from a meta tensor
        return f"returned {record['devices']} outputs from a meta argument (uninitialised memory)"
    return None


def test_bad_arguments_give_clear_errors_never_crashes():
    total = count_cases()
    assert total > 500  # every op contributes
    outcomes = run_all(total)
    assert len(outcomes) == total
    problems = [f"{outcomes[i].get('case', i)}: {problem}" for i in sorted(outcomes)
                if (problem := problem_with(outcomes[i])) is not None]
    assert not problems, f"{len(problems)} of {total} bad calls misbehaved:\n" + "\n".join(problems)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    if sys.argv[1] == "count":
        print(len(all_cases()))
    else:
        run_child(int(sys.argv[1]), int(sys.argv[2]))
