"""Benchmarks of the sparse family against torch.sparse (and scipy where it applies), same data, same run.

Rows: coalesce of 4M entries with 30% duplicates in a 1M x 1M matrix (scalar and [nnz, 16] values), coalesce of an
input that is already coalesced but not flagged so (torch then sorts it again), and torch.sparse.sum over dim 1
and dim 0 of a coalesced 100k x 100k matrix with 2M entries. "GB/s" is the minimum traffic (entries read,
unique entries written) over our time; "memcpy GB/s" a plain copy of the input's bytes in the same run.
"""

import subprocess
import sys

import numpy as np
import torch
import torch_ragged
from bench_batch import median_seconds, paired_medians, synchronized
from bench_segment import softmax_recipe, with_backward

try:
    import scipy.sparse
except ImportError:
    scipy = None


def duplicated_entries(nnz, n, duplicate_fraction, generator):
    unique = int(nnz * (1 - duplicate_fraction))
    base = torch.randint(0, n, (2, unique), generator=generator)
    repeats = base[:, torch.randint(0, unique, (nnz - unique,), generator=generator)]
    indices = torch.cat([base, repeats], 1)
    return indices[:, torch.randperm(nnz, generator=generator)]  # duplicates scattered, order random


def copy_gbs(nbytes, device, min_run_time):
    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / median_seconds(synchronized(lambda: dst.copy_(src), device), min_run_time) / 1e9


def row(case, op, baseline, baseline_s, ours_s, nbytes, memcpy_gbs):
    return dict(case=case, op=op, baseline=baseline, baseline_s=baseline_s, ours_s=ours_s, bytes=nbytes,
                memcpy_gbs=memcpy_gbs)


def coalesce_rows(device, min_run_time):
    g = torch.Generator().manual_seed(0)
    n, nnz = 10**6, 4 * 10**6
    indices = duplicated_entries(nnz, n, 0.3, g)
    rows = []
    for width in (1, 16):
        values = torch.randn((nnz,) if width == 1 else (nnz, width), generator=g)
        s = torch.sparse_coo_tensor(indices, values, (n, n, *values.shape[1:]), check_invariants=False).to(device)
        expected = s.coalesce()
        actual = torch_ragged.sparse.coalesce(s)
        assert torch.equal(actual._indices(), expected.indices())
        torch.testing.assert_close(actual._values(), expected.values())
        unique = expected._nnz()
        value_bytes = 4 * width
        nbytes = nnz * (16 + value_bytes) + unique * (16 + value_bytes)
        memcpy = copy_gbs(nnz * (16 + value_bytes), device, min_run_time)
        case = f"coalesce 4M, 30% dup, 1M x 1M, values [nnz{'' if width == 1 else ', 16'}]"
        base_s, ours_s = paired_medians(synchronized(lambda s=s: s.coalesce(), device),
                                        synchronized(lambda s=s: torch_ragged.sparse.coalesce(s), device),
                                        min_run_time)
        rows.append(row(case, "coalesce", "torch coalesce", base_s, ours_s, nbytes, memcpy))
        if scipy is not None and width == 1 and device == "cpu":
            r, c = indices.numpy()
            v = values.numpy()

            def scipy_coalesce(r=r, c=c, v=v):
                m = scipy.sparse.coo_matrix((v, (r, c)), shape=(n, n)).tocsr()
                m.sum_duplicates()
                return m

            assert scipy_coalesce().nnz == unique
            base_s, ours_s = paired_medians(scipy_coalesce, lambda s=s: torch_ragged.sparse.coalesce(s), min_run_time)
            rows.append(row(case, "coalesce", "scipy tocsr + sum_duplicates", base_s, ours_s, nbytes, memcpy))
        if width == 1:  # already coalesced, not flagged: torch sorts it again
            flat = torch.sparse_coo_tensor(expected.indices(), expected.values(), s.shape, check_invariants=False)
            case = "coalesce of an already coalesced tensor (2.8M entries)"
            base_s, ours_s = paired_medians(synchronized(lambda t=flat: t.coalesce(), device),
                                            synchronized(lambda t=flat: torch_ragged.sparse.coalesce(t), device),
                                            min_run_time)
            rows.append(row(case, "coalesce", "torch coalesce", base_s, ours_s, 2 * unique * 20, memcpy))
    return rows


def sum_rows(device, min_run_time):
    g = torch.Generator().manual_seed(1)
    n, nnz = 10**5, 2 * 10**6
    indices = duplicated_entries(nnz, n, 0.0, g)
    s = torch.sparse_coo_tensor(indices, torch.randn(nnz, generator=g), (n, n), check_invariants=False).coalesce()
    s = s.to(device)
    memcpy = copy_gbs(s._nnz() * 20, device, min_run_time)
    rows = []
    for dim in (1, 0):
        expected, actual = torch.sparse.sum(s, dim), torch_ragged.sparse.sum(s, dim)
        assert torch.equal(actual._indices(), expected.indices())
        torch.testing.assert_close(actual._values(), expected.values(), rtol=1e-5, atol=1e-5)
        nbytes = s._nnz() * 20 + actual._nnz() * 12
        base_s, ours_s = paired_medians(synchronized(lambda d=dim: torch.sparse.sum(s, d), device),
                                        synchronized(lambda d=dim: torch_ragged.sparse.sum(s, d), device),
                                        min_run_time)
        what = "a trailing sparse dim: no sort" if dim == 1 else "the leading dim: a sort by column"
        rows.append(row(f"sum dim {dim}, 100k x 100k, nnz 2M ({what})", "sum", "torch.sparse.sum", base_s, ours_s,
                        nbytes, memcpy))
    return rows


def softmax_rows(device, min_run_time):
    """torch.sparse.softmax vs ours vs the scatter recipe, along rows (dim 1) and columns (dim 0)."""
    g = torch.Generator().manual_seed(2)
    n, nnz = 10**5, 2 * 10**6
    indices = duplicated_entries(nnz, n, 0.0, g)
    s = torch.sparse_coo_tensor(indices, torch.randn(nnz, generator=g), (n, n), check_invariants=False).coalesce()
    s = s.to(device)
    memcpy = copy_gbs(s._nnz() * 20, device, min_run_time)
    coalesced_indices = s.indices()
    rows = []
    for dim in (1, 0):
        expected, actual = torch.sparse.softmax(s, dim), torch_ragged.sparse.softmax(s, dim)
        torch.testing.assert_close(actual._values(), expected._values(), rtol=1e-5, atol=1e-6)
        pool_ids = coalesced_indices[1 - dim]  # dim 1: pools are rows; dim 0: columns
        index = pool_ids.unsqueeze(1)

        def recipe(values, ids=pool_ids, index=index):
            return softmax_recipe(values.unsqueeze(1), ids, index, n).squeeze(1)

        def ours(values, dim=dim):
            return torch.ops.torch_ragged.sparse_softmax(coalesced_indices, values, [n, n], dim)

        def theirs(values, dim=dim):
            return torch.sparse.softmax(torch.sparse_coo_tensor(coalesced_indices, values, (n, n), is_coalesced=True),
                                        dim).values()

        what = "rows: no sort" if dim == 1 else "columns: a sort by column"
        case = f"softmax dim {dim}, 100k x 100k, nnz 2M ({what})"
        values = s.values()
        nbytes = 2 * s._nnz() * 4
        for baseline_name, baseline in (("torch.sparse.softmax", theirs), ("scatter recipe", recipe)):
            base_s, ours_s = paired_medians(synchronized(lambda b=baseline, v=values: b(v), device),
                                            synchronized(lambda f=ours, v=values: f(v), device), min_run_time)
            rows.append(row(case, "softmax", baseline_name, base_s, ours_s, nbytes, memcpy))
            base_s, ours_s = paired_medians(synchronized(with_backward(baseline, values), device),
                                            synchronized(with_backward(ours, values), device), min_run_time)
            rows.append(row(case, "softmax fwd+bwd", baseline_name, base_s, ours_s, 2 * nbytes, memcpy))
    return rows


WIDE_CASE = """
import sys, time, torch, torch_ragged

def status_kb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))

g = torch.Generator().manual_seed(4)
indices = torch.stack([torch.randint(0, s, (1000,), generator=g) for s in (4000, 4000, 8)])
s = torch.sparse_coo_tensor(indices, torch.randn(1000, generator=g), (4000, 4000, 8)).coalesce()
op = torch.sparse.softmax if sys.argv[1] == "torch" else torch_ragged.sparse.softmax
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
before = status_kb("VmRSS:")
op(s, 2)  # the first call: its peak memory growth
extra_mb = (status_kb("VmHWM:") - before) / 1024
start = time.perf_counter()
op(s, 2)  # a warm call: its time
print(time.perf_counter() - start, extra_mb)
"""


def wide_softmax_row(device, min_run_time):
    """(4000, 4000, 8), 1000 entries, dim 2: torch sizes its pool table by the other dims' product. Each side in a
    fresh process: the peak RSS growth of its first call, the time of a second (warm) call."""
    if device != "cpu":
        return []
    result = {}
    for side in ("torch", "ours"):
        out = subprocess.run([sys.executable, "-c", WIDE_CASE, side], capture_output=True, text=True, check=True)
        seconds, extra_mb = map(float, out.stdout.split())
        result[side] = (seconds, extra_mb)
    print(f"softmax (4000, 4000, 8), nnz 1000, dim 2: torch {result['torch'][0] * 1e3:.1f} ms, "
          f"+{result['torch'][1]:.1f} MB peak; ours {result['ours'][0] * 1e3:.3f} ms, +{result['ours'][1]:.1f} MB peak")
    return [row("softmax (4000, 4000, 8), nnz 1000, dim 2 (one warm call each)", "softmax", "torch.sparse.softmax",
                result["torch"][0], result["ours"][0], 2 * 1000 * 4, float("nan"))]


def run_all(device, min_run_time):
    np.random.seed(0)
    return (coalesce_rows(device, min_run_time) + sum_rows(device, min_run_time) + softmax_rows(device, min_run_time)
            + wide_softmax_row(device, min_run_time))
