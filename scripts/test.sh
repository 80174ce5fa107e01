#!/usr/bin/env bash
# The test command: installs, builds, runs the GoogleTest suite, the C++ example (a LibTorch program
# running a TorchScript model), and pytest. Ends with pytest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/build.sh --cmake

echo "== GoogleTest"
ctest --test-dir build/cmake --output-on-failure -j "$(nproc)" | tail -n 3

echo "== C++ example (TorchScript model + C++ API)"
"$PYTHON" examples/torchscript/ragged_module.py build/model.pt 2>/dev/null
./build/cpp_app/cpp_app build/model.pt

echo "== pytest"
"$PYTHON" -m pytest -q -p no:cacheprovider "$@"
