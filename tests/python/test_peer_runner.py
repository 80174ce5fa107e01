"""scripts/peer_test_sparse.py (the runner of PyTorch's own test_sparse.py with and without accelerate()) finds a
test that passes with torch alone and fails accelerated, and passes a file where nothing changes: checked on a small
test file written here, so a "0 regressions" report from it is known to be able to say otherwise."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEER_FILE = '''
import torch
import torch_ragged


def test_coalesce_is_torchs():
    s = torch.sparse_coo_tensor([[1, 0, 1]], [1.0, 2.0, 3.0], (3,))
    assert torch.equal(s.coalesce().values(), torch.tensor([2.0, 4.0]))


def test_fails_alone():
    assert torch_ragged.sparse.is_accelerated()


def test_passes_only_alone():
    assert not torch_ragged.sparse.is_accelerated()
'''


def run_runner(tmp_path, body):
    test_file = tmp_path / "test_peer_sample.py"
    test_file.write_text(body)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "peer_test_sparse.py"), str(test_file), "-k", "",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_the_runner_reports_a_regression_and_a_fix(tmp_path):
    result = run_runner(tmp_path, PEER_FILE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "torch alone: 3 tests, 2 passed, 1 failed, 0 skipped" in result.stdout
    assert "REGRESSION test_peer_sample::test_passes_only_alone (failed)" in result.stdout
    assert "now passes test_peer_sample::test_fails_alone" in result.stdout


def test_the_runner_passes_when_nothing_changes(tmp_path):
    body = PEER_FILE.split("\n\ndef test_fails_alone")[0] + "\n"
    result = run_runner(tmp_path, body)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passing with torch alone but not accelerated: 0" in result.stdout
