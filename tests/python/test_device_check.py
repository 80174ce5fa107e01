"""scripts/device_check.sh --dry-run reaches every step (the GPU machine's one-shot check must not die halfway)."""

import os
import pathlib
import subprocess

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = ["build", "CUDA tests", "compute-sanitizer memcheck",
         "compute-sanitizer racecheck and synccheck (cooperative kernels)", "GPU cost model",
         *(f"GPU benchmark {f}" for f in ("segment", "sparse", "batch", "pad", "container")),
         "GPU benchmark segmented scans", "done"]


def test_dry_run_reaches_every_step(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path))
    result = subprocess.run(["bash", str(ROOT / "scripts" / "device_check.sh"), "--dry-run"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = (tmp_path / "summary.log").read_text()
    headers = [line[3:].rsplit(" (", 1)[0] for line in summary.splitlines() if line.startswith("== ")]
    assert headers == STEPS
    assert "CUDA tests exit 0:" in summary  # the CUDA test files collected and ran (skipping, without a GPU)
    assert "| model / measured |" in summary  # the cost model's table, to read beside the measured rows
    if not torch.cuda.is_available():
        # memcheck, racecheck / synccheck, five benchmark families and the scans
        assert summary.count("skipped: needs a CUDA device") == 8
