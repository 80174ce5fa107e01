"""The op library shares torch's libstdc++ (a private copy crashes in iostreams: setup.py relinks it away).

Found on a GPU machine whose compiler linked libstdc++ statically: every error message with an int64
in it segfaulted inside the library's own std::locale facets.
"""

import ctypes
import glob
import os
import shutil
import subprocess

import pytest
import torch_ragged
from torch_ragged._toolchain import private_libstdcxx_symbols

PROGRAM = '#include <sstream>\nextern "C" int width(long n) { std::ostringstream s; s << n; return s.str().size(); }\n'
needs_toolchain = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("nm") is None,
                                     reason="needs g++ and nm")


def shared_library(tmp_path, *flags):
    source = tmp_path / "width.cpp"
    source.write_text(PROGRAM)
    library = tmp_path / f"libwidth{len(flags)}.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", str(source), "-o", str(library), *flags], check=True)
    return str(library)


@needs_toolchain
def test_detector_finds_a_statically_linked_libstdcxx(tmp_path):
    assert private_libstdcxx_symbols(shared_library(tmp_path, "-static-libstdc++"))


@needs_toolchain
def test_detector_passes_a_dynamically_linked_one(tmp_path):
    assert private_libstdcxx_symbols(shared_library(tmp_path)) == []


@needs_toolchain
def test_the_naming_of_the_shared_library_setup_py_relinks_with_removes_the_copy(tmp_path):
    library = shared_library(tmp_path, "-static-libstdc++", "-l:libstdc++.so.6")
    assert private_libstdcxx_symbols(library) == []
    assert ctypes.CDLL(library).width(ctypes.c_long(-1234567)) == len("-1234567")


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm")
def test_the_op_library_has_no_private_libstdcxx():
    here = os.path.dirname(torch_ragged.__file__)
    library = os.environ.get("TORCH_RAGGED_LIBRARY") or sorted(glob.glob(os.path.join(here, "_C*.so")))[0]
    assert private_libstdcxx_symbols(library) == []
