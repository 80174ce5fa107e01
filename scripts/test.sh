#!/usr/bin/env bash
# The test command: installs, builds, runs the GoogleTest suite, the C++ example (a LibTorch program
# running a TorchScript model and an AOTInductor package), builds the wheel, installs it into a virtual
# environment and runs the C++ example against it (scripts/wheel.sh), and pytest (which also builds the
# documentation site with warnings as errors and opens it in headless Chromium). Ends with pytest's summary.
# Then the sanitizer job (scripts/sanitize.sh: the GoogleTest suite and the bad-input tests under
# ASan + UBSan, ~9 min cold on two cores, ~1 min warm), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# The package, then GoogleTest and the C++ example against its op library (the CMake build of the library
# itself is scripts/sanitize.sh's, under the sanitizers, whose install tree is checked there too).
bash scripts/build.sh --tests

echo "== GoogleTest"
ctest --test-dir build/tests --output-on-failure -j "$(nproc)" | tail -n 3

echo "== C++ example (TorchScript model, AOTInductor package, C++ API)"
"$PYTHON" examples/torchscript/ragged_module.py build/model.pt 2>/dev/null
# The package build (torch.export + AOTInductor's C++ compile) takes ~20-40 s on two cores.
if ! "$PYTHON" examples/export_aoti.py build/model.pt2 2>build/export_aoti.log; then
  cat build/export_aoti.log
  exit 1
fi
./build/cpp_app/cpp_app build/model.pt build/model.pt2
bash scripts/wheel.sh

bash scripts/sanitize.sh

echo "== pytest"
# One worker per core (pytest-xdist); the `large` tests (several GB each) share one worker (tests/python/conftest.py).
"$PYTHON" -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-$(nproc)}" --dist loadgroup "$@"
