"""The speed census (benchmarks/bench_census.py) covers every public op, and every row's two sides agree.

Timing is not tested (no timed assertions): this checks that a new public function cannot land without a census
row, and runs each row's builder once on tiny inputs with its result (and gradients) checked against the
baseline's -- the same check the benchmark makes before it times a row."""

import importlib
import inspect
import os
import re
import sys

import pytest
import torch
import torch_ragged

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
bench_census = pytest.importorskip("bench_census")

MODULES = ["segment", "batch", "sparse", "pad", "tiles", "container", "distributed", "scatter_compat"]


def public_names():
    """(module, name) of each public function or class, from every module's __all__ and the package's."""
    names = set()
    for module_name in MODULES:
        module = importlib.import_module(f"torch_ragged.{module_name}")
        names |= {(module_name, n) for n in module.__all__}
    for n in torch_ragged.__all__:
        if not inspect.ismodule(getattr(torch_ragged, n)):
            names.add(("", n))
    return sorted(names)


def test_every_public_name_has_a_census_row_or_a_reason():
    missing = [f"{module}.{name}".lstrip(".") for module, name in public_names()
               if not bench_census.census_rows_for(name, module) and name not in bench_census.COVERED_ELSEWHERE]
    assert not missing, f"public names without a census row (add one to benchmarks/bench_census.py): {missing}"
    stale = [name for name in bench_census.COVERED_ELSEWHERE if name not in {n for _, n in public_names()}]
    assert not stale, f"COVERED_ELSEWHERE names that are not public: {stale}"


def test_every_torch_op_accelerate_takes_over_has_a_census_row():
    with open(os.path.join(ROOT, "csrc", "sparse", "accelerate.cpp")) as f:
        taken_over = set(re.findall(r'TorchKernel<\w+> \w+\("(aten::\w+)"', f.read()))
    assert len(taken_over) >= 12
    missing = sorted(op for op in taken_over if f"accelerated {op}" not in bench_census.CASES)
    assert not missing, f"accelerated torch ops without a census row: {missing}"


def _rows():
    for name, build in bench_census.CASES.items():
        yield pytest.param(name, False, id=name)
        if build.differentiable:
            yield pytest.param(name, True, id=f"{name} fwd+bwd")


@pytest.mark.parametrize("name,backward", list(_rows()))
def test_each_row_gives_the_baselines_result_on_tiny_inputs(name, backward):
    pair = bench_census.CASES[name](bench_census.SIZES["tiny"], "cpu", backward)
    assert not backward or pair.leaves, f"{name}: a differentiable row needs leaves to differentiate"
    bench_census.check_equal(name, pair, backward)


def test_the_equality_check_can_fail():
    wrong = bench_census.Pair("zeros", lambda: torch.zeros(3), lambda: torch.ones(3))
    with pytest.raises(AssertionError, match="results differ"):
        bench_census.check_equal("wrong", wrong, False)
    x = torch.ones(3, requires_grad=True)
    wrong_grad = bench_census.Pair("x", lambda: x * 2, lambda: (x * 2).detach() + 0 * x, (x,))
    with pytest.raises(AssertionError, match="gradients differ"):
        bench_census.check_equal("wrong", wrong_grad, True)


def test_only_a_failing_baseline_leaves_a_row_untimed():
    """torch raising at a size (NJT asking for 1.5 TB) is reported; our op raising is a failure, not a table row."""

    def boom():
        raise RuntimeError("out of memory")

    with pytest.raises(bench_census.BaselineFailed, match="the baseline \\(theirs\\) raised: out of memory"):
        bench_census.check_equal("x", bench_census.Pair("theirs", boom, lambda: torch.ones(1)), False)
    with pytest.raises(RuntimeError, match="out of memory"):
        bench_census.check_equal("x", bench_census.Pair("theirs", lambda: torch.ones(1), boom), False)
