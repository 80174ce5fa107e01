"""The README's C++ section, built as a reader would: its CMakeLists.txt and main.cpp blocks written into an empty
directory, its shell block run there (with this interpreter as `python`), and the program's output compared with
the output the README states."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cpp_section_blocks() -> dict[str, str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## C++\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = dict(re.findall(r"```(cmake|cpp|bash)\n(.*?)```", section, re.S))
    assert set(blocks) == {"cmake", "cpp", "bash"}, f"the README's C++ section should hold one block of each: {blocks}"
    return blocks


def test_the_readme_cpp_section_builds_and_runs_as_written(tmp_path):
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.skip("needs cmake and a C++ compiler (scripts/build.sh installs them)")
    blocks = cpp_section_blocks()
    assert blocks["cmake"].startswith("# CMakeLists.txt\n") and blocks["cpp"].startswith("// main.cpp\n")
    (tmp_path / "CMakeLists.txt").write_text(blocks["cmake"])
    (tmp_path / "main.cpp").write_text(blocks["cpp"])
    bin_dir = tmp_path / "bin"  # the README says `python`: this interpreter, the one with torch_ragged installed
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("TORCH_CUDA_ARCH_LIST", None)  # the block sets what it needs
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks["bash"]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    promised = re.search(r"# (padded .*)$", blocks["bash"], re.M).group(1)  # the output the README states
    assert run.stdout.strip().splitlines()[-1] == promised
