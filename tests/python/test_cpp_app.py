"""examples/cpp_app refuses AOTInductor packages it must not load (issue 15, bad input): one built against another
torch_ragged version, one without the version, a file that is not a package. scripts/test.sh builds the app and
the package (build/cpp_app/cpp_app, build/model.pt, build/model.pt2) before running pytest."""

import json
import pathlib
import subprocess
import zipfile

import pytest
import torch_ragged

ROOT = pathlib.Path(__file__).resolve().parents[2]
APP, MODEL, PACKAGE = ROOT / "build/cpp_app/cpp_app", ROOT / "build/model.pt", ROOT / "build/model.pt2"

pytestmark = pytest.mark.skipif(not (APP.exists() and MODEL.exists() and PACKAGE.exists()),
                                reason="needs the C++ app and the package that scripts/test.sh builds")


def rewrite_metadata(source: pathlib.Path, target: pathlib.Path, edit) -> None:
    """A copy of the package whose metadata files (`*_metadata.json`) pass through `edit`."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename.endswith("_metadata.json"):
                data = json.dumps(edit(json.loads(data))).encode()
            new.writestr(item, data)


def run_app(package: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([APP, MODEL, package], capture_output=True, text=True, timeout=120)


def test_the_built_package_passes_every_check():
    result = run_app(PACKAGE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok   AOTInductor package: reflect-padded 6x4 image equals pad" in result.stdout


def test_a_package_from_another_torch_ragged_version_is_refused(tmp_path):
    other = tmp_path / "other.pt2"
    rewrite_metadata(PACKAGE, other, lambda meta: {**meta, "torch_ragged_version": "0.0.0-other"})
    result = run_app(other)
    assert result.returncode == 2
    assert f"built against torch_ragged 0.0.0-other, this program links {torch_ragged.__version__}" in result.stderr
    assert "AOTInductor package" not in result.stdout  # refused before loading


def test_a_package_without_a_version_is_refused(tmp_path):
    unnamed = tmp_path / "unnamed.pt2"
    rewrite_metadata(PACKAGE, unnamed, lambda meta: {k: v for k, v in meta.items() if k != "torch_ragged_version"})
    result = run_app(unnamed)
    assert result.returncode == 2
    assert "names no torch_ragged_version" in result.stderr


def test_a_file_that_is_not_a_package_is_refused(tmp_path):
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"not a zip archive")
    result = run_app(junk)
    assert result.returncode == 2
    assert "not a readable AOTInductor package" in result.stderr
