"""benchmarks/gpu_model.py: its reading of kernel resources against ptxas's own report, its calibration against the
one GPU run (2026-12-04), and its descriptions of the current kernels against the build."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch_ragged

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import gpu_model  # noqa: E402

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)

# Three kernels whose resources differ: few registers; a shared array and many registers; a stack frame (an array
# indexed by a runtime value cannot live in registers).
KERNELS = r"""
__global__ void small_kernel(float* x) { x[threadIdx.x] += 1.f; }
__global__ void shared_kernel(float* x, int n) {
  __shared__ float tile[300];
  float held[16];
  for (int i = 0; i < 16; ++i) held[i] = x[i * n + threadIdx.x];
  tile[threadIdx.x % 300] = held[0] * held[15];
  __syncthreads();
  float sum = 0.f;
  for (int i = 0; i < 16; ++i) sum += held[i] * tile[(threadIdx.x + i) % 300];
  x[threadIdx.x] = sum;
}
__global__ void frame_kernel(float* x, int n) {
  float local[64];
  for (int i = 0; i < 64; ++i) local[(i * n) & 63] = x[i * n + threadIdx.x];
  x[threadIdx.x] = local[n & 63];
}
"""


def ptxas_report(text):
    """{mangled name: (registers, stack frame bytes, shared bytes)} from nvcc -Xptxas -v."""
    report, name = {}, None
    for line in text.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            name = m.group(1)
            report[name] = [0, 0, 0]
        elif name and (m := re.search(r"(\d+) bytes stack frame", line)):
            report[name][1] = int(m.group(1))
        elif name and (m := re.search(r"Used (\d+) registers", line)):
            report[name][0] = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                report[name][2] = int(s.group(1))
    return {k: tuple(v) for k, v in report.items()}


@pytest.mark.skipif(NVCC is None, reason="needs the CUDA toolkit's nvcc (scripts/build.sh's machines have it)")
def test_resources_read_from_a_cubin_are_what_ptxas_reports(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(KERNELS)
    done = subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-O3", "-Xptxas", "-v", str(source), "-o",
                           str(tmp_path / "k.cubin")], capture_output=True, text=True, check=True)
    expected = ptxas_report(done.stdout + done.stderr)
    assert len(expected) == 3
    read = gpu_model.cubin_resources((tmp_path / "k.cubin").read_bytes())
    for name, (registers, stack, shared) in expected.items():
        r = read[name]
        assert (r.registers, r.stack_bytes) == (registers, stack), name
        # the cubin's shared section holds the kernel's arrays and, on sm_90, the runtime's 1 KB reservation
        assert r.shared_bytes in (shared, shared + 1024) if shared else r.shared_bytes == 0, name
        assert r.sass_instructions > 0
    # the three differ, so a reader that mixed kernels up would fail above
    assert len({v[:2] for v in expected.values()}) == 3
    assert expected[next(n for n in expected if "frame" in n)][1] > 0


def test_the_model_reproduces_the_2026_12_04_run_within_1_5x():
    """Every row of that run the model describes, within 1.5x of its measured % of copy."""
    rows = gpu_model.table(gpu_model.kernel_resources(gpu_model.default_library()))
    calibrated = [r for r in rows if r["measured_pct"] is not None]
    assert {r["op"] for r in calibrated} >= {"sum", "sum fwd+bwd", "softmax", "forward reflect", "forward replicate",
                                            "forward circular", "backward reflect", "backward replicate", "r[index]"}
    for r in calibrated:
        ratio = gpu_model.calibration_ratio(r)
        assert 1 / 1.5 <= ratio <= 1.5, (r["case"], r["op"], r["H200"]["pct_of_copy"], r["measured_pct"])


def test_the_model_predicts_by_its_stated_rules():
    """Hand-worked launches: blocks of 256 threads at 64 registers (4 blocks per SM, 528 on 132 SMs); each thread's
    10 DRAM round trips and 4 L2 hits; 1 GB over the copy bandwidth outlasts the one wave of 264 blocks, so the first
    launch is bandwidth-bound; the second moves little and takes three waves."""
    gpu = gpu_model.GPUS[0]
    launch = gpu_model.Launch("k", threads=264 * 256, dram_rounds=10, l2_steps=4, bytes=1e9, instructions=10,
                              built=gpu_model.Resources(64, 0, 0, 0))
    got = gpu_model.launch_time_us(launch, gpu, None)
    assert got["resident_per_sm"] == 1024
    latency = 10 * gpu_model.LOADED_DRAM_US + 4 * gpu_model.L2_US
    bandwidth = 1e9 / (gpu.copy_gbps * 1e3)
    assert bandwidth > latency and got["bound"] == "bandwidth"
    assert got["us"] == pytest.approx(gpu_model.LAUNCH_US + bandwidth)
    # one block past two waves takes a third wave's time (blocks of equal work)
    small = gpu_model.Launch("k", threads=2 * 528 * 256 + 256, dram_rounds=10, l2_steps=4, bytes=1e6,
                             built=gpu_model.Resources(64, 0, 0, 0))
    got = gpu_model.launch_time_us(small, gpu, None)
    assert got["bound"] == "latency" and got["us"] == pytest.approx(gpu_model.LAUNCH_US + 3 * latency)


@pytest.mark.skipif(not torch_ragged.built_with_cuda(), reason="a CPU-only build has no CUDA kernels to read")
def test_every_current_kernel_the_model_names_is_in_the_build():
    resources = gpu_model.kernel_resources(gpu_model.default_library())
    assert len(resources) > 100
    for model in gpu_model.models():
        for launch in model.launches:
            if model.version == "current":
                assert launch.match and gpu_model.lookup(resources, *launch.match), (model.op, launch.kernel)


def test_json_rows_carry_the_case_the_kernels_and_the_prediction(tmp_path):
    out = tmp_path / "model.json"
    assert gpu_model.main(["--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["version"] for r in rows} == {"2026-12-04", "current"}
    for r in rows:
        assert r["kernels"] and r["case"] and r["op"]
        assert 0 < r["predicted_pct_of_copy"] <= 100
