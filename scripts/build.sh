#!/usr/bin/env bash
# Installs what the build needs and builds torch_ragged: the Python package (op library in
# python/torch_ragged/) and, with --cmake, the C++ library, its tests and its exported CMake package
# (build/cmake, installed to build/install); with --tests, the GoogleTest suite (build/tests, run it with
# scripts/gtest.sh) and the C++ example (build/cpp_app), both linked against the Python package's op library
# through its CMake package (the library's sources compile once, by setup.py); with --example, only the
# example (what scripts/test.sh builds: its GoogleTest run is scripts/sanitize.sh's, under the sanitizers).
# Idempotent: a second run with nothing changed only checks (ninja + ccache make rebuilds incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"

# System packages (Debian): compilers' cache, build tools, GoogleTest, Google Benchmark.
missing=()
for pkg in ccache cmake ninja-build g++ libgtest-dev libbenchmark-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export PATH=/usr/lib/ccache:$PATH

# Headless Chromium opens the built documentation in the docs test; without it that one test skips and says so.
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing Debian's chromium (the docs site test)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
    echo "chromium could not be installed: tests/python/test_docs_site.py will skip its browser check"
fi

# Python dependencies (torch pinned; pip's cache keeps the large wheel between runs).
"$PYTHON" -m pip install -q --disable-pip-version-check -r requirements-dev.txt

# The Python package, installed editable from *this* checkout.
installed_from=$("$PYTHON" -c "import importlib.util as u; s = u.find_spec('torch_ragged'); print(s.origin if s else '')" 2>/dev/null || true)
if [ "$installed_from" = "$ROOT/python/torch_ragged/__init__.py" ] && ls python/torch_ragged/_C*.so >/dev/null 2>&1; then
  echo "== building the Python extension (incremental)"
  mkdir -p build
  if ! "$PYTHON" setup.py build_ext --inplace >build/build_ext.log 2>&1; then
    tail -n 40 build/build_ext.log
    echo "build_ext failed; full log: build/build_ext.log" >&2
    exit 1
  fi
else
  echo "== installing torch_ragged (editable) from $ROOT"
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
fi

if [ "${1:-}" = "--tests" ] || [ "${1:-}" = "--example" ]; then
  prefix=$("$PYTHON" -c "import torch; print(torch.utils.cmake_prefix_path)")
  package=$("$PYTHON" -c "import torch_ragged; print(torch_ragged.cmake_prefix_path())")
  if [ "$1" = "--tests" ]; then
    echo "== building the GoogleTest suite against the package's op library (CMake)"
    cmake -S . -B build/tests -G Ninja -DCMAKE_PREFIX_PATH="$package;$prefix" \
      -DTORCH_RAGGED_TESTS_AGAINST_PACKAGE=ON -Wno-dev >/dev/null
    cmake --build build/tests
  fi
  echo "== building the C++ example against the package's op library (CMake)"
  cmake -S examples/cpp_app -B build/cpp_app -G Ninja -DCMAKE_PREFIX_PATH="$package;$prefix" -Wno-dev >/dev/null
  cmake --build build/cpp_app
fi

if [ "${1:-}" = "--cmake" ]; then
  echo "== building the C++ library, its tests and the C++ example (CMake)"
  prefix=$("$PYTHON" -c "import torch; print(torch.utils.cmake_prefix_path)")
  cmake -S . -B build/cmake -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_INSTALL_PREFIX="$ROOT/build/install" -Wno-dev >/dev/null
  cmake --build build/cmake
  cmake --install build/cmake >/dev/null
  cmake -S examples/cpp_app -B build/cpp_app -G Ninja -DCMAKE_PREFIX_PATH="$ROOT/build/install;$prefix" \
    -Wno-dev >/dev/null
  cmake --build build/cpp_app
fi
