#!/usr/bin/env bash
# Builds the wheel (build/wheel/), installs it into a fresh virtual environment beside the running torch
# (build/wheel_venv, --system-site-packages: torch is not downloaded again), checks the installed package
# imports from there and runs an op, then builds and runs examples/cpp_app against the *installed wheel*
# (find_package(TorchRagged) through torch_ragged.cmake_prefix_path()). The compile reuses the build's
# objects (setup.py's one build folder): warm, this takes well under a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
export PATH=/usr/lib/ccache:$PATH

echo "== wheel"
rm -rf build/wheel
"$PYTHON" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w build/wheel . \
  >build/wheel.log 2>&1 || { tail -n 40 build/wheel.log; exit 1; }
wheel=$(ls build/wheel/torch_ragged-*.whl)
echo "$(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"

venv=build/wheel_venv
rm -rf "$venv"
"$PYTHON" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheel"
# From outside the checkout, so that only the installed copy can be imported.
(cd /tmp && "$ROOT/$venv/bin/python" - "$ROOT/$venv" <<'PY'
import os, sys
import torch
import torch_ragged

venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(torch_ragged.__file__).startswith(venv), f"imported {torch_ragged.__file__}, not the wheel"
counts = torch_ragged.segment_sum(torch.ones(5, 2), torch_ragged.get_first_idx([2, 3]))
assert counts.tolist() == [[2.0, 2.0], [3.0, 3.0]], counts
for name in ("py.typed", "include/torch_ragged/torch_ragged.h", "share/cmake/TorchRagged/TorchRaggedConfig.cmake",
             "share/cmake/TorchRagged/TorchRaggedConfigVersion.cmake"):
    assert os.path.exists(os.path.join(os.path.dirname(torch_ragged.__file__), name)), f"the wheel lacks {name}"
print(f"installed wheel imports from {os.path.dirname(torch_ragged.__file__)} and runs")
PY
)

echo "== C++ example against the installed wheel (find_package(TorchRagged))"
prefix=$("$PYTHON" -c "import torch; print(torch.utils.cmake_prefix_path)")
package=$(cd /tmp && "$ROOT/$venv/bin/python" -c "import torch_ragged; print(torch_ragged.cmake_prefix_path())")
cmake -S examples/cpp_app -B build/cpp_app_wheel -G Ninja -DCMAKE_PREFIX_PATH="$package;$prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -Wno-dev >build/cpp_app_wheel.log 2>&1 || { cat build/cpp_app_wheel.log; exit 1; }
cmake --build build/cpp_app_wheel >>build/cpp_app_wheel.log 2>&1 || { tail -n 40 build/cpp_app_wheel.log; exit 1; }
./build/cpp_app_wheel/cpp_app build/model.pt build/model.pt2 | tail -n 1
