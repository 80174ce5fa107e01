"""Benchmarks of torch_ragged.pad against numpy.pad (same data, CPU) and F.pad (modes it has, forward and backward).

Every row's baseline, ours and a plain copy of the output's size are timed in the same run; the ratio is
baseline time / ours (> 1: faster). "% memcpy" is our bandwidth (input read + output written) against that copy's.
"""

import numpy as np
import torch
import torch.nn.functional as F
import torch_ragged
from bench_batch import median_seconds, paired_medians, synchronized

# The large case's output (113 MB) is a fresh allocation each call (page faults; run.py asks for huge pages); the
# 160^3 one (23 MB) stays below glibc's mmap threshold, so its output reuses warm heap pages (issue 16 item 20).
NUMPY_CASES = (
    dict(shape=(256, 256, 256), width=16, modes=("reflect", "symmetric", "wrap", "edge", "constant", "mean")),
    dict(shape=(160, 160, 160), width=10, modes=("reflect", "symmetric", "wrap", "edge", "constant")),
)
FPAD_CASE = dict(shape=(32, 64, 128, 128), width=3, modes=("reflect", "replicate", "circular", "constant"))


def copy_gbs(nbytes, dtype, device, min_run_time):
    src = torch.empty(nbytes // torch.finfo(dtype).bits * 8, dtype=dtype, device=device).fill_(1)
    dst = torch.empty_like(src)
    seconds = median_seconds(synchronized(lambda: dst.copy_(src), device), min_run_time)
    return 2 * nbytes / seconds / 1e9


def row(case, op, baseline, baseline_s, ours_s, nbytes, memcpy_gbs):
    return dict(case=case, op=op, baseline=baseline, baseline_s=baseline_s, ours_s=ours_s, bytes=nbytes,
                memcpy_gbs=memcpy_gbs)


def numpy_row(case, array, x, width, mode, device, min_run_time):
    expected = np.pad(array, width, mode)
    assert np.allclose(torch_ragged.pad(x, width, mode).cpu().numpy(), expected, atol=1e-5)
    return paired_medians(lambda: np.pad(array, width, mode),
                          synchronized(lambda: torch_ragged.pad(x, width, mode), device), min_run_time)


def numpy_rows(device, min_run_time):
    return [r for case in NUMPY_CASES for r in numpy_case_rows(case, device, min_run_time)]


def numpy_case_rows(numpy_case, device, min_run_time):
    shape, width = numpy_case["shape"], numpy_case["width"]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    array = x.numpy()
    x = x.to(device)
    out_numel = int(np.prod([n + 2 * width for n in shape]))
    nbytes = 4 * (x.numel() + out_numel)
    memcpy = copy_gbs(4 * out_numel, torch.float32, device, min_run_time)
    case = f"float32 {'x'.join(map(str, shape))}, width {width}"
    return [row(case, f"pad {mode}", "numpy.pad", *numpy_row(case, array, x, width, mode, device, min_run_time),
                nbytes, memcpy)
            for mode in numpy_case["modes"]]


def fpad_forward(x, width, mode, device, min_run_time):
    widths = ((0, 0),) * (x.dim() - 2) + ((width, width),) * 2

    def baseline():
        return F.pad(x, (width,) * 4, mode=mode)

    def ours():
        return torch_ragged.pad(x, widths, mode)
    assert torch.equal(baseline(), ours())
    return paired_medians(synchronized(baseline, device), synchronized(ours, device), min_run_time)


def fpad_backward(x, width, mode, device, min_run_time):
    """Times the backward pass alone (autograd.grad on a retained graph), after checking the gradients agree."""
    widths = ((0, 0),) * (x.dim() - 2) + ((width, width),) * 2
    leaf = x.clone().requires_grad_()
    base_out = F.pad(leaf, (width,) * 4, mode=mode)
    our_out = torch_ragged.pad(leaf, widths, mode)
    grad = torch.randn(base_out.shape, generator=torch.Generator().manual_seed(1)).to(device)
    expected = torch.autograd.grad(base_out, leaf, grad, retain_graph=True)[0]
    torch.testing.assert_close(torch.autograd.grad(our_out, leaf, grad, retain_graph=True)[0], expected)
    return paired_medians(
        synchronized(lambda: torch.autograd.grad(base_out, leaf, grad, retain_graph=True), device),
        synchronized(lambda: torch.autograd.grad(our_out, leaf, grad, retain_graph=True), device),
        min_run_time)


def fpad_rows(device, min_run_time):
    shape, width = FPAD_CASE["shape"], FPAD_CASE["width"]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(device)
    out_numel = x.numel() // (shape[2] * shape[3]) * (shape[2] + 2 * width) * (shape[3] + 2 * width)
    nbytes = 4 * (x.numel() + out_numel)
    memcpy = copy_gbs(4 * out_numel, torch.float32, device, min_run_time)
    case = f"float32 NCHW {'x'.join(map(str, shape))}, pads {width}"
    rows = []
    for mode in FPAD_CASE["modes"]:
        rows.append(row(case, f"forward {mode}", "F.pad", *fpad_forward(x, width, mode, device, min_run_time),
                        nbytes, memcpy))
        rows.append(row(case, f"backward {mode}", "F.pad", *fpad_backward(x, width, mode, device, min_run_time),
                        nbytes, memcpy))
    return rows


def run_all(device, min_run_time):
    rows = fpad_rows(device, min_run_time)
    if device == "cpu":  # numpy has no GPU: the numpy comparison is a CPU one
        rows = numpy_rows(device, min_run_time) + rows
    return rows


def print_table(rows):
    header = ("case", "op", "baseline", "baseline ms", "ours ms", "ratio", "ours GB/s", "memcpy GB/s", "% memcpy")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        ours_gbs = r["bytes"] / r["ours_s"] / 1e9
        cells = (r["case"], r["op"], r["baseline"], f"{r['baseline_s'] * 1e3:.2f}", f"{r['ours_s'] * 1e3:.2f}",
                 f"{r['baseline_s'] / r['ours_s']:.2f}x", f"{ours_gbs:.1f}", f"{r['memcpy_gbs']:.1f}",
                 f"{100 * ours_gbs / r['memcpy_gbs']:.0f}%")
        print("| " + " | ".join(cells) + " |")
