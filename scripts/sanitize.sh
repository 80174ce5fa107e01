#!/usr/bin/env bash
# The CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer: the op library built in its own
# directory (build/asan) with -fsanitize=address,undefined and installed (build/asan_install), the GoogleTest
# suite built against that install tree (build/asan_tests), then the GoogleTest suite and a subset of pytest (the bad-input fuzz and the error tests, whose odd
# arguments are where out-of-bounds accesses would hide, the kernels accelerate() lends torch's own
# sparse ops, which receive whatever torch hands them, and sparse softmax's pools normalised in place,
# whose index arithmetic replays the reduction tree) with that library loaded in place of the
# package's own (TORCH_RAGGED_LIBRARY). Any ASan report or UB aborts the process and fails the run.
# Called by scripts/test.sh after scripts/build.sh; usable alone once build.sh has run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PATH=/usr/lib/ccache:$PATH
# Set, torch's CMake config skips probing for a GPU (a try_run CMake 3.25 cannot build with C++20).
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"

# -O0 -g1: the quickest build (CI pays for it cold: 295 s on two cores, against 420 s at -O1) that still
# reports file:line; the GoogleTest suite takes 23 s against 19 s at -O1, the pytest subset as long.
sanitizers="-O0 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# vptr checks need RTTI of torch's classes across libraries built without UBSan: skipped.
sanitizers="$sanitizers -fno-sanitize=vptr"
prefix=$("$PYTHON" -c "import torch; print(torch.utils.cmake_prefix_path)")
flags=(-G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$sanitizers" -DCMAKE_SHARED_LINKER_FLAGS="$sanitizers"
  -DCMAKE_EXE_LINKER_FLAGS="$sanitizers" -Wno-dev)
cmake -S . -B build/asan "${flags[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DTORCH_RAGGED_BUILD_TESTS=OFF >/dev/null
cmake --build build/asan

# The CMake install tree of this build (library, headers, TorchRaggedConfig / Targets / ConfigVersion), and the
# GoogleTest suite built against it as a LibTorch project would: find_package(TorchRagged 0.1 EXACT).
echo "== the CMake install tree, and the GoogleTest suite built against it"
rm -rf build/asan_install
cmake --install build/asan --prefix build/asan_install >/dev/null
cmake -S . -B build/asan_tests "${flags[@]}" -DCMAKE_PREFIX_PATH="$PWD/build/asan_install;$prefix" \
  -DTORCH_RAGGED_TESTS_AGAINST_PACKAGE=ON >/dev/null
cmake --build build/asan_tests

# torch leaks by design at exit (static registries): leak checking would only report those.
# A bad input may legally ask for a huge output (tile_to_packed with a count of 2**31): with
# allocator_may_return_null the allocation fails as it would without ASan (torch raises "not enough
# memory") instead of ASan aborting the process.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:symbolize=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "== GoogleTest under ASan + UBSan"
bash scripts/gtest.sh build/asan_tests/torch_ragged_tests

echo "== pytest (bad-input fuzz, error tests) under ASan + UBSan"
runtime="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
LD_PRELOAD="$runtime" TORCH_RAGGED_LIBRARY="$PWD/build/asan/libtorch_ragged.so" \
  "$PYTHON" -m pytest -q -p no:cacheprovider tests/python/test_fuzz_bad_input.py \
  tests/python/test_batch_errors.py tests/python/test_pad_errors.py tests/python/test_segment_errors.py \
  tests/python/test_sparse_errors.py tests/python/test_tiles_errors.py tests/python/test_container_errors.py \
  tests/python/test_sparse_accelerate.py \
  tests/python/test_sparse_softmax.py::test_pools_along_dim_0_replay_the_reduction_tree_bit_for_bit_at_every_level \
  tests/python/test_sparse_softmax.py::test_pools_of_a_3d_tensor_along_each_dim_replay_the_tree_bit_for_bit \
  tests/python/test_sparse_softmax.py::test_an_index_out_of_range_in_any_dim_is_refused_by_name \
  tests/python/test_reliability.py::test_threads_calling_every_family_concurrently_get_the_serial_bits \
  tests/python/test_sparse_matmul.py::test_raw_products_refuse_a_plan_built_for_other_indices \
  tests/python/test_sparse_compressed.py::test_compressed_violation_finds_the_first_break_as_a_loop_does_and_as_torch_refuses \
  tests/python/test_sparse_compressed.py::test_ops_on_a_compressed_tensor_refuse_broken_indices_by_name \
  tests/python/test_sparse_spgemm.py::test_csr_product_matches_the_product_loop_in_the_index_dtype \
  tests/python/test_sparse_spgemm.py::test_csr_product_is_the_coo_product_bit_for_bit_on_both_accumulators \
  tests/python/test_sparse_spgemm.py::test_csr_product_sums_rows_whose_columns_are_not_sorted \
  tests/python/test_sparse_spgemm.py::test_csr_product_refuses_bad_input_by_name \
  -k "not cuda" | tail -n 2
