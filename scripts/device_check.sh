#!/usr/bin/env bash
# GPU machine check (the tool library's `device` entry): one run, under 9 minutes in all, that builds the
# extension against the torch found there (no network: nothing is installed) and then, most valuable first:
#   1. the CUDA tests (CPU agreement bit for bit where promised, gradcheck, opcheck, determinism, > 2^31
#      elements, the device-side argument checks) of every family, and beside them, at the same time,
#      compute-sanitizer memcheck on a representative subset;
#   2. beside them, compute-sanitizer racecheck and synccheck on the cooperative kernels;
#   3. the GPU benchmarks of every family (--quick), with their targets printed beside the ratios.
# (The whole Python suite is scripts/test.sh's, on the CPU: in this budget it never finished.)
# Logs go under $OUT (summary.log first; failing tests are listed in it). Every step gets at most what is left
# of the run's budget (CHECK_BUDGET_S, default 530 s), so a slow step cannot eat the summary. The tool returns
# at most 8 files: the main logs stay, everything (benchmark logs and JSON too) is packed into logs.tar.gz.
# A rerun can narrow the work: CUDA_TESTS_K (pytest -k expression, default "cuda"), BENCH_FAMILIES (default
# all), SKIP_MEMCHECK=1.
#
#   scripts/device_check.sh            on the GPU machine: `run` with timeout_s ~570
#   scripts/device_check.sh --dry-run  anywhere: every step is reached, those that need a GPU say why they
#                                      are skipped (the build is skipped when the extension is already built)
set -uo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
OUT=${OUT:-out}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export MAX_JOBS=${MAX_JOBS:-16}
export PYTHONUNBUFFERED=1
DEADLINE=$((SECONDS + ${CHECK_BUDGET_S:-530}))
CUDA_TESTS_K=${CUDA_TESTS_K:-cuda}
# tiles is left out: its baselines are CPU routes (the CUDA tests cover its kernels).
BENCH_FAMILIES=${BENCH_FAMILIES:-segment sparse batch pad container}

# The returned files: the main logs, plus every log packed into one archive.
pack() {
  # Written beside $OUT, then moved in: tar of a folder it is writing into fails ("file changed").
  local archive
  archive=$(mktemp /tmp/device_check_logs.XXXXXX)
  tar czf "$archive" -C "$OUT" . && mv "$archive" "$OUT/logs.tar.gz" || rm -f "$archive"
  rm -f "$OUT"/bench_* "$OUT/env.log"
}
trap pack EXIT
# Lists a pytest log's failing tests in the summary.
failures() { grep -E '^(FAILED|ERROR) ' "$1" | head -n 60 >>"$OUT/summary.log"; }

step() { echo "== $1 ($(date +%T))" | tee -a "$OUT/summary.log"; }
note() { echo "$1" | tee -a "$OUT/summary.log"; }
# Seconds a step may take: what it asks for, at most what is left of the budget.
budget() {
  local left=$((DEADLINE - SECONDS))
  echo $(($1 < left ? $1 : left))
}
# Runs a step under its budget, or says it is out of time.
timed() {
  local seconds
  seconds=$(budget "$1")
  shift
  if [ "$seconds" -le 5 ]; then
    note "skipped: out of time (CHECK_BUDGET_S)"
    return 124
  fi
  timeout "$seconds" "$@"
}

# The toolchain too: one machine's compiler linked libstdc++ statically (setup.py now relinks that away).
{ nvidia-smi; nproc; nvcc --version; echo "CC=${CC:-} CXX=${CXX:-}"; command -v g++ gcc nm; ls -l /usr/bin/g++*;
  "${CXX:-g++}" --version; "$PYTHON" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"; } \
  >"$OUT/env.log" 2>&1
HAS_GPU=$("$PYTHON" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
[ "$HAS_GPU" = 1 ] || note "no CUDA device here: the steps that need one are skipped, each with a line"

step build
if [ "$DRY_RUN" = 1 ] && ls python/torch_ragged/_C*.so >/dev/null 2>&1; then
  note "dry run: build skipped (the extension is already built)"
elif ! TORCH_RAGGED_WITH_CUDA=1 timed 300 "$PYTHON" setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
  # setup.py refuses a library that keeps a private libstdc++; the system compiler links the shared one.
  rebuilt=1
  if [ -x /usr/bin/g++ ] && [ "${CXX:-}" != /usr/bin/g++ ] && grep -q "private copy of libstdc" "$OUT/build.log"; then
    note "build with ${CXX:-the default compiler} kept a private libstdc++: again with /usr/bin/g++"
    export CC=/usr/bin/gcc CXX=/usr/bin/g++
    TORCH_RAGGED_WITH_CUDA=1 timed 300 "$PYTHON" setup.py build_ext --inplace >"$OUT/build.log" 2>&1
    rebuilt=$?
  fi
  if [ "$rebuilt" != 0 ]; then
    note "build FAILED (see build.log)"
    tail -n 30 "$OUT/build.log"
    exit 1
  fi
fi
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
grep -E "private copy of libstdc|relinking" "$OUT/build.log" >>"$OUT/summary.log"
timed 60 "$PYTHON" -m pytest -q -p no:cacheprovider tests/python/test_toolchain.py >"$OUT/toolchain.log" 2>&1
note "toolchain check exit $?: $(tail -n 1 "$OUT/toolchain.log")"
# Several workers when pytest-xdist is there: faster, and a test that crashes its process (a segfault)
# costs that worker, not the rest of the run.
PARALLEL=()
"$PYTHON" -c "import xdist" 2>/dev/null && [ "$HAS_GPU" = 1 ] && PARALLEL=(-n 8)

step "CUDA tests"
# CUDA-only tests plus every test parametrised over devices (their "cuda" cases); no -x: one run lists every
# failing kernel. Without a GPU they all skip (pytest says so); the run still proves the files collect.
timed 150 "$PYTHON" -m pytest -q -p no:cacheprovider "${PARALLEL[@]}" -rfEs -k "$CUDA_TESTS_K" tests/python/test_cuda.py \
  tests/python/test_batch.py tests/python/test_pad.py tests/python/test_pad_autograd.py \
  tests/python/test_segment.py tests/python/test_segment_autograd.py tests/python/test_sparse.py \
  tests/python/test_sparse_autograd.py tests/python/test_sparse_softmax.py \
  tests/python/test_sparse_matmul.py tests/python/test_ragged_index_select.py tests/python/test_container.py \
  tests/python/test_tiles.py tests/python/test_sparse_compressed.py tests/python/test_sparse_spgemm.py \
  tests/python/test_sparse_accelerate.py tests/python/test_scatter.py tests/python/test_sparse_elementwise.py \
  tests/python/test_sequences.py tests/python/test_container_layers.py tests/python/test_segment_scan.py \
  tests/python/test_scatter_compat.py >"$OUT/test_cuda.log" 2>&1 &
TESTS_PID=$!

step "compute-sanitizer memcheck"
MEMCHECK_PID=
if [ "$HAS_GPU" != 1 ]; then
  note "skipped: needs a CUDA device"
elif [ "${SKIP_MEMCHECK:-0}" = 1 ]; then
  note "skipped: SKIP_MEMCHECK=1"
elif ! command -v compute-sanitizer >/dev/null; then
  note "skipped: compute-sanitizer not found"
else
  # Runs beside the CUDA tests (the GPU has room for both). One kernel family each, small inputs: tests that
  # launch huge grids, opcheck sweeps, sync-mode tests and deliberate device-side asserts (child processes)
  # are left out.
  timed 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$PYTHON" -m pytest -q -p no:cacheprovider \
    -rfE -k "cuda and not two_to_the_31 and not opcheck and not synchronise and not empty_output and not one_grid" \
    tests/python/test_cuda.py tests/python/test_segment.py tests/python/test_ragged_index_select.py \
    tests/python/test_tiles.py tests/python/test_sparse_spgemm.py tests/python/test_sparse_compressed.py \
    tests/python/test_pad.py tests/python/test_sparse.py tests/python/test_segment_scan.py \
    tests/python/test_scatter.py >"$OUT/memcheck.log" 2>&1 &
  MEMCHECK_PID=$!
fi

# racecheck (shared-memory hazards) and synccheck (barriers, warp collectives) on the cooperative kernels
# (common/block.h bodies: the segment core's row mover behind expand / ids / index_select / the sum backward
# and the rank-1 list_to_packed / padded_to_packed, and the row kernels of pad and packed_to_padded), which the
# block emulator checks the same way on the host.
COOPERATIVE_K="cuda and (expand or ids or index_select or backward or packed or padded or pad) and not two_to_the_31 and not opcheck"
COOPERATIVE_FILES=(tests/python/test_segment.py tests/python/test_segment_autograd.py
  tests/python/test_ragged_index_select.py tests/python/test_batch.py tests/python/test_pad.py)
step "compute-sanitizer racecheck and synccheck (cooperative kernels)"
SANITIZER_PIDS=()
if [ "$HAS_GPU" != 1 ] || ! command -v compute-sanitizer >/dev/null; then
  note "skipped: needs a CUDA device and compute-sanitizer"
else
  for tool in racecheck synccheck; do
    timed 150 compute-sanitizer --tool "$tool" --error-exitcode 1 "$PYTHON" -m pytest -q -p no:cacheprovider \
      -rfE -k "$COOPERATIVE_K" "${COOPERATIVE_FILES[@]}" >"$OUT/$tool.log" 2>&1 &
    SANITIZER_PIDS+=("$tool:$!")
  done
fi
wait $TESTS_PID
note "CUDA tests exit $?: $(tail -n 1 "$OUT/test_cuda.log")"
failures "$OUT/test_cuda.log"
if [ -n "$MEMCHECK_PID" ]; then
  wait "$MEMCHECK_PID"
  note "memcheck exit $?: $(tail -n 1 "$OUT/memcheck.log")"
  failures "$OUT/memcheck.log"
  grep -m 20 -E '^========= (Invalid|Program hit|Address|Saved host backtrace)' "$OUT/memcheck.log" \
    >>"$OUT/summary.log"
fi

for entry in "${SANITIZER_PIDS[@]}"; do
  wait "${entry#*:}"
  note "${entry%%:*} exit $?: $(tail -n 1 "$OUT/${entry%%:*}.log")"
  grep -m 10 -E '^========= (Race|Barrier|Error|Warning)' "$OUT/${entry%%:*}.log" >>"$OUT/summary.log"
done

# The cost model's predictions for the benchmark cases (no GPU needed), to read beside the measured rows below.
step "GPU cost model"
timed 30 "$PYTHON" benchmarks/gpu_model.py --json "$OUT/gpu_model.json" >"$OUT/gpu_model.log" 2>&1
note "exit $?"
grep -E '^\|' "$OUT/gpu_model.log" | head -n 40 >>"$OUT/summary.log"

# Targets of the GPU benchmarks (ratios are baseline time / ours, > 1: faster).
note "targets: batch >= 1.2x pad_sequence / NJT and >= 70% of device copy; segment >= 3x torch.segment_reduce;"
note "         sparse >= 1x torch CUDA sparse"
for family in $BENCH_FAMILIES; do
  step "GPU benchmark $family"
  if [ "$HAS_GPU" != 1 ]; then
    note "skipped: needs a CUDA device"
    continue
  fi
  only=()
  [ "$family" = segment ] && only=(--only reductions)  # the scans get their own step below
  timed 45 "$PYTHON" benchmarks/run.py --family "$family" --device cuda --quick "${only[@]}" \
    --json "$OUT/bench_${family}_cuda.json" >"$OUT/bench_${family}_cuda.log" 2>&1
  note "exit $?"
  grep -E '^\|' "$OUT/bench_${family}_cuda.log" | head -n 40 >>"$OUT/summary.log"
done
case " $BENCH_FAMILIES " in
  *" segment "*)
    step "GPU benchmark segmented scans"
    if [ "$HAS_GPU" != 1 ]; then
      note "skipped: needs a CUDA device"
    else
      timed 45 "$PYTHON" benchmarks/run.py --family segment --only scans --device cuda --quick \
        --json "$OUT/bench_scans_cuda.json" >"$OUT/bench_scans_cuda.log" 2>&1
      note "exit $?"
      grep -E '^\|' "$OUT/bench_scans_cuda.log" | head -n 40 >>"$OUT/summary.log"
    fi
    ;;
esac

step done
