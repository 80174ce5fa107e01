#!/usr/bin/env bash
# The test command: installs and builds the package, runs the C++ example (a LibTorch program running a
# TorchScript model and an AOTInductor package) against its op library, builds the wheel, installs it into a
# virtual environment and runs the C++ example against it (scripts/wheel.sh); then the sanitizer job
# (scripts/sanitize.sh: the op library under ASan + UBSan, installed, the GoogleTest suite built against that
# install tree and run, and the bad-input tests; ~6 min cold on two cores, ~1 min warm); then pytest (which
# also builds the documentation site with warnings as errors and opens it in headless Chromium). Ends with
# pytest's summary. GoogleTest runs once, under the sanitizers: a plain build of the suite (scripts/build.sh
# --tests) would add ~100 s cold to every CI run for the same tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/build.sh --example

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
