"""The examples run and check themselves (their output is compared with references inside them)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_sparse_tiles_example_writes_a_png(tmp_path):
    path = tmp_path / "tiles.png"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "sparse_tiles.py"), str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "box filter matches the dense reference: True" in result.stdout
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IEND" in data[-12:]
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (66 * 8, 32 * 8)
