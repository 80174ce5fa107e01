#!/usr/bin/env bash
# GPU machine check (see the tool library's `device` entry): builds the extension against the torch found
# there (no network: nothing is installed), then, most valuable first, runs the CUDA tests, the GPU
# benchmarks, compute-sanitizer memcheck and the whole suite, with logs under $OUT (summary.log first).
# Each step has its own timeout; never run yet: give it `run` with timeout_s ~570 and expect to fix the script.
# CUDA tests no longer stop at the first failure (-x removed): one run should list every failing kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export MAX_JOBS=${MAX_JOBS:-16}
export PYTHONUNBUFFERED=1

{ nvidia-smi; "$PYTHON" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"; } \
  >"$OUT/env.log" 2>&1

step() { echo "== $1 ($(date +%T))" | tee -a "$OUT/summary.log"; }

step build
if ! TORCH_RAGGED_WITH_CUDA=1 timeout 300 "$PYTHON" setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
  echo "build FAILED (see build.log)" | tee -a "$OUT/summary.log"
  tail -n 30 "$OUT/build.log"
  exit 1
fi
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

step "CUDA tests"
# CUDA-only tests plus every test parametrised over devices (their "cuda" cases).
timeout 240 "$PYTHON" -m pytest -q -p no:cacheprovider -k "cuda" tests/python/test_cuda.py \
  tests/python/test_batch.py tests/python/test_pad.py tests/python/test_pad_autograd.py \
  tests/python/test_segment.py tests/python/test_segment_autograd.py tests/python/test_sparse.py \
  tests/python/test_sparse_autograd.py tests/python/test_sparse_softmax.py \
  tests/python/test_sparse_matmul.py tests/python/test_ragged_index_select.py tests/python/test_container.py \
  tests/python/test_tiles.py \
  >"$OUT/test_cuda.log" 2>&1
echo "exit $?: $(tail -n 1 "$OUT/test_cuda.log")" | tee -a "$OUT/summary.log"

for family in segment sparse container pad batch; do
  step "GPU benchmark $family"
  timeout 150 "$PYTHON" benchmarks/run.py --family "$family" --device cuda --quick \
    --json "$OUT/bench_${family}_cuda.json" \
    >"$OUT/bench_${family}_cuda.log" 2>&1
  echo "exit $?" | tee -a "$OUT/summary.log"
done

if command -v compute-sanitizer >/dev/null; then
  step "compute-sanitizer memcheck"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$PYTHON" -m pytest -q -p no:cacheprovider \
    -k "cuda and not two_to_the_31 and not opcheck and not synchronise" tests/python/test_cuda.py \
    tests/python/test_pad_autograd.py tests/python/test_segment.py tests/python/test_sparse.py \
    tests/python/test_ragged_index_select.py tests/python/test_tiles.py >"$OUT/memcheck.log" 2>&1
  echo "exit $?" | tee -a "$OUT/summary.log"
fi

step "full pytest"
timeout 150 "$PYTHON" -m pytest -q -p no:cacheprovider tests/python >"$OUT/pytest.log" 2>&1
echo "exit $?: $(tail -n 1 "$OUT/pytest.log")" | tee -a "$OUT/summary.log"
