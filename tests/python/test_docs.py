"""The documentation runs: docstring examples (doctest), README / docs code blocks, and every public name has a
docstring that reads as plain text in help() (no Sphinx roles).

A fenced block marked ```python sketch is a fragment (it needs a dataset, a process group, a model) and is not run.
"""

import doctest
import importlib
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch
import torch_ragged

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = ["batch", "segment", "sparse", "pad", "container", "tiles", "distributed", "scatter_compat"]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)  # "```python sketch" does not match
PAGES = [page for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))) if BLOCK.search(page.read_text())]
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module):
    mod = importlib.import_module(f"torch_ragged.{module}")
    result = doctest.testmod(mod, extraglobs={"torch": torch, "torch_ragged": torch_ragged}, optionflags=FLAGS,
                             report=True)
    assert result.failed == 0


# Runs each block file given, as pasted into a fresh interpreter: its own globals (a name another block defined is
# a NameError), in one process (one torch import for a page).
RUN_EACH = """
import runpy, sys
for path in sys.argv[1:]:
    print("== " + path, file=sys.stderr, flush=True)
    runpy.run_path(path, run_name="__main__")
"""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_code_blocks_run(page, tmp_path):
    """Each of a page's program blocks runs as pasted: alone, with its own imports (a reader copies one block, not
    the page); >>> blocks run as doctests."""
    blocks = BLOCK.findall(page.read_text())
    doctests = [b for b in blocks if b.lstrip().startswith(">>>")]
    programs = [b for b in blocks if not b.lstrip().startswith(">>>")]
    for k, block in enumerate(doctests):
        test = doctest.DocTestParser().get_doctest(block, {"torch": torch, "torch_ragged": torch_ragged},
                                                   f"{page.name}[{k}]", str(page), 0)
        runner = doctest.DocTestRunner(optionflags=FLAGS)
        runner.run(test)
        assert runner.failures == 0, f"{page.name}: doctest block {k}"
    if programs:
        scripts = []
        for k, block in enumerate(programs):  # files: torch.jit.script needs the source
            scripts.append(tmp_path / f"{page.stem}_block_{k}.py")
            scripts[-1].write_text(block)
        package_parent = str(pathlib.Path(torch_ragged.__file__).resolve().parents[1])  # the torch_ragged under test
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")])))
        run = subprocess.run([sys.executable, "-c", RUN_EACH, *map(str, scripts)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{page.name}:\n{run.stderr[-3000:]}"


def public_objects():
    seen = set()
    for module in MODULES:
        mod = importlib.import_module(f"torch_ragged.{module}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{module}.{name}", obj
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") and member != "__getitem__":
                        continue
                    function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if callable(function):
                        yield f"{module}.{name}.{member}", function


def test_every_public_name_has_a_plain_text_docstring():
    missing, roles = [], []
    for name, obj in public_objects():
        doc = inspect.getdoc(obj) or ""
        if not doc.strip():
            missing.append(name)
        if re.search(r":[a-z_]+:`", doc):  # any role (:func:, :sup:, ...) shows raw in help()
            roles.append(name)
    assert not missing, f"no docstring: {missing}"
    assert not roles, f"Sphinx roles (raw in help()): {roles}"


ARGS_SECTION = re.compile(r"^Args:[ \t]*\n(.*?)(?=^\S|\Z)", re.M | re.S)
ARG_ENTRY = re.compile(r"^    (\*{0,2}\w+)(?: \([^)]*\))?: (\S.*)$", re.M)


def described_parameters(doc: str) -> dict[str, str]:
    """{name: first line of its description} from a Google-style ``Args:`` section (the docs' one convention)."""
    section = ARGS_SECTION.search(doc)
    return {} if section is None else {m.group(1).lstrip("*"): m.group(2) for m in ARG_ENTRY.finditer(section.group(1))}


def test_every_parameter_of_every_public_function_is_described():
    """Each parameter of a public function, method or class constructor (the class's docstring describes its
    constructor's) has an entry in the docstring's Args section, and the section names no parameter the signature
    lacks; Sphinx renders the section as the parameter list of the API page."""
    undescribed, unknown, checked = {}, {}, 0
    for name, obj in public_objects():
        if isinstance(obj, property) or not callable(obj):
            continue
        if not (inspect.isroutine(obj) or inspect.isclass(obj)):  # a callable object (collate): its __call__
            obj = type(obj).__call__
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):  # a builtin without a signature
            continue
        parameters = [p for p in signature.parameters if p not in ("self", "cls")]
        if not parameters:
            continue
        checked += 1
        described = described_parameters(inspect.getdoc(obj) or "")
        if missing := [p for p in parameters if p not in described]:
            undescribed[name] = missing
        if extra := [p for p in described if p not in parameters]:
            unknown[name] = extra
    assert checked > 150, checked
    assert not undescribed, f"parameters without a description: {undescribed}"
    assert not unknown, f"described parameters the signature lacks: {unknown}"


def test_docstrings_name_no_file_paths():
    """A docstring names a guide by its title (the API page links it), never as a path into the checkout."""
    paths = {name: m.group(0) for name, obj in public_objects()
             if (m := re.search(r"docs/\w+\.md", inspect.getdoc(obj) or ""))}
    for module in MODULES:
        doc = importlib.import_module(f"torch_ragged.{module}").__doc__ or ""
        if m := re.search(r"docs/\w+\.md", doc):
            paths[module] = m.group(0)
    assert not paths, paths


def test_no_page_claims_duplicates_are_summed_in_input_order():
    """Long runs of duplicates are summed in the reduction tree's order (input order within a chunk, chunk partials
    merged): no page or docstring may claim plain input order."""
    claim = re.compile(r"(summed|sum|added|adds)\s+(\w+\s+)?in\s+input\s+order", re.I)
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "README.md", *(ROOT / "docs").glob("*.md"))}
    texts.update({name: inspect.getdoc(obj) or "" for name, obj in public_objects()})
    for module in MODULES:
        texts[f"torch_ragged.{module}"] = importlib.import_module(f"torch_ragged.{module}").__doc__ or ""
    claims = {name: m.group(0) for name, text in texts.items() if (m := claim.search(text))}
    assert not claims, claims


def test_pad_signature_names_its_keywords():
    parameters = inspect.signature(torch_ragged.pad).parameters
    for keyword in ("constant_values", "end_values", "stat_length", "reflect_type"):
        assert parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY
    assert "kwargs" not in parameters  # only vector_function_kwargs, for a vector-function mode
    with pytest.raises(ValueError, match="unsupported keyword arguments for mode 'reflect': .'constant_values'."):
        torch_ragged.pad(torch.arange(3), 1, "reflect", constant_values=0)  # refused even at numpy's default


COMING_FROM = sorted((ROOT / "docs").glob("from_*.md"))
CENSUS_CELL = re.compile(r"(\d+\.\d+)x / (\d+\.\d+)x / (\d+\.\d+)x \(`([^`]+)`\)")


def test_coming_from_pages_quote_the_census_as_it_stands():
    """Each speed cell of a "Coming from" page, ``tiny / medium / large (`census row`)``, is that row of the CPU
    census JSON that docs/benchmarks.md shows (rounded to two decimals): rerunning the census updates the pages'
    claims or fails here."""
    import json

    census = json.loads((ROOT / "docs" / "benchmarks_census_cpu.json").read_text())
    ratio = {(r["op"], r["case"]): r["baseline_s"] / r["ours_s"] for r in census}
    assert len(COMING_FROM) == 6, [p.name for p in COMING_FROM]
    for page in COMING_FROM:
        cells = CENSUS_CELL.findall(page.read_text())
        assert cells, f"{page.name} quotes no census row"
        for *quoted, op in cells:
            for size, value in zip(("tiny", "medium", "large"), quoted, strict=True):
                assert (op, size) in ratio, f"{page.name}: no census row {op!r} at {size}"
                assert f"{ratio[op, size]:.2f}" == value, f"{page.name}: {op} {size} is {ratio[op, size]:.2f}x"
