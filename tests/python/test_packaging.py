"""Packaging metadata: one version everywhere, the torch pin derived from the torch built against, the license."""

import os
import pathlib
import subprocess
import sys

import torch
import torch_ragged

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_version_is_written_once_and_reported_everywhere():
    assert torch_ragged.__version__ == torch.ops.torch_ragged.version()  # the compiled library's
    assert f"Status ({torch_ragged.__version__})" in (ROOT / "README.md").read_text()
    assert f"## {torch_ragged.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_distribution_metadata(tmp_path):
    env = dict(os.environ, TORCH_RAGGED_WITH_CUDA="0")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    info = next(tmp_path.glob("*.egg-info"))
    metadata = (info / "PKG-INFO").read_text()
    assert f"Version: {torch_ragged.__version__}" in metadata
    assert "License-Expression: BSD-3-Clause" in metadata
    torch_minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert (info / "requires.txt").read_text().split() == [f"torch=={torch_minor}.*"]
    assert "python/torch_ragged/py.typed" in (info / "SOURCES.txt").read_text()
    assert "BSD 3-Clause License" in (ROOT / "LICENSE").read_text()
