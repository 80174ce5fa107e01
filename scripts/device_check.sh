#!/usr/bin/env bash
# GPU machine check (see the tool library's `device` entry): builds the extension against the torch found
# there (no network: nothing is installed), runs the CUDA tests (under compute-sanitizer memcheck when
# available) and the GPU benchmarks, and writes logs under $OUT. Meant to finish in a few minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export MAX_JOBS=${MAX_JOBS:-16}

{ nvidia-smi; "$PYTHON" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"; } \
  >"$OUT/env.log" 2>&1

echo "== build" | tee "$OUT/summary.log"
if ! TORCH_RAGGED_WITH_CUDA=1 "$PYTHON" setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
  echo "build FAILED (see build.log)" | tee -a "$OUT/summary.log"
  exit 1
fi
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

echo "== CUDA tests" | tee -a "$OUT/summary.log"
# CUDA-only tests plus every test parametrised over devices (the "cuda" cases run here).
"$PYTHON" -m pytest -q -p no:cacheprovider -k "cuda" tests/python/test_cuda.py tests/python/test_batch.py \
  tests/python/test_pad.py tests/python/test_pad_autograd.py >"$OUT/test_cuda.log" 2>&1
tail -n 1 "$OUT/test_cuda.log" | tee -a "$OUT/summary.log"

if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck" | tee -a "$OUT/summary.log"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 1 "$PYTHON" -m pytest -q -p no:cacheprovider \
    -k "cuda and not two_to_the_31 and not opcheck" tests/python/test_cuda.py tests/python/test_pad_autograd.py \
    >"$OUT/memcheck.log" 2>&1
  echo "memcheck exit $?" | tee -a "$OUT/summary.log"
fi

echo "== full pytest" | tee -a "$OUT/summary.log"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python >"$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" | tee -a "$OUT/summary.log"

echo "== GPU benchmarks" | tee -a "$OUT/summary.log"
for family in batch pad; do
  timeout 150 "$PYTHON" benchmarks/run.py --family "$family" --device cuda --json "$OUT/bench_${family}_cuda.json" \
    >"$OUT/bench_${family}_cuda.log" 2>&1
  echo "benchmark $family exit $?" | tee -a "$OUT/summary.log"
done
