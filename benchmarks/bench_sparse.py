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
            # the floor: a copy of the indices and values (coalesce returns new tensors, never the input's)
            base_s, ours_s = paired_medians(synchronized(lambda t=flat: (t._indices().clone(), t._values().clone()),
                                                         device),
                                            synchronized(lambda t=flat: torch_ragged.sparse.coalesce(t), device),
                                            min_run_time)
            rows.append(row(case, "coalesce", "clone of indices + values", base_s, ours_s, 2 * unique * 20, memcpy))
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

        what = "rows: no sort" if dim == 1 else "columns: pools in place, no sort"
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


def _peak_extra_mb(fn):
    """Peak RSS growth (MB) while fn runs: VmHWM after resetting it, minus VmRSS before (Linux)."""
    def status_kb(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_kb("VmRSS:")
    fn()
    return (status_kb("VmHWM:") - before) / 1024


def matmul_rows(device, min_run_time):
    """S @ D (200k x 200k, nnz 2M, D 200k x 64) against torch COO, torch CSR and scipy; with backward."""
    g = torch.Generator().manual_seed(5)
    rows = []

    def sparse_matrix(n, nnz):
        return torch.sparse_coo_tensor(torch.randint(0, n, (2, nnz), generator=g), torch.randn(nnz, generator=g),
                                       (n, n), check_invariants=False).coalesce().to(device)

    n, nnz, k = 200_000, 2_000_000, 64
    s = sparse_matrix(n, nnz)
    d = torch.randn(n, k, generator=g).to(device)
    csr = s.to_sparse_csr()
    plan = torch_ragged.sparse.plan(s)
    memcpy = copy_gbs(d.numel() * 4, device, min_run_time)
    torch.testing.assert_close(torch_ragged.sparse.mm(s, d, plan=plan), csr @ d, rtol=1e-4, atol=1e-4)
    case = "mm 200k x 200k, nnz 2M, D 200k x 64"
    nbytes = nnz * 12 + nnz * k * 4 + n * k * 4  # entries, gathered rows, output
    ours = synchronized(lambda: torch_ragged.sparse.mm(s, d, plan=plan), device)
    for name, fn in (("torch COO", lambda: torch.sparse.mm(s, d)), ("torch CSR", lambda: csr @ d)):
        base_s, ours_s = paired_medians(synchronized(fn, device), ours, min_run_time)
        rows.append(row(case, "mm (plan reused)", name, base_s, ours_s, nbytes, memcpy))
    if scipy is not None and device == "cpu":
        i = s.indices().numpy()
        m = scipy.sparse.csr_matrix((s.values().numpy(), (i[0], i[1])), shape=(n, n))
        dn = d.numpy()
        base_s, ours_s = paired_medians(lambda: m @ dn, ours, min_run_time)
        rows.append(row(case, "mm (plan reused)", "scipy csr @ ndarray", base_s, ours_s, nbytes, memcpy))
    plan_s = median_seconds(synchronized(lambda: torch_ragged.sparse.plan(s), device), min_run_time)
    print(f"{case}: building the plan (sorts by column, once per pattern) takes {plan_s * 1e3:.1f} ms")

    d_leaf = d.clone().requires_grad_(True)
    weight = torch.randn(n, k, generator=g).to(device)

    def backward_to_d(mm):
        return lambda: torch.autograd.grad((mm(d_leaf) * weight).sum(), d_leaf)

    base_s, ours_s = paired_medians(
        synchronized(backward_to_d(lambda x: torch.sparse.mm(s, x)), device),
        synchronized(backward_to_d(lambda x: torch_ragged.sparse.mm(s, x, plan=plan)), device), min_run_time)
    rows.append(row(case, "mm fwd+bwd to D", "torch COO", base_s, ours_s, 2 * nbytes, memcpy))
    base_s, ours_s = paired_medians(synchronized(backward_to_d(lambda x: csr @ x), device),
                                    synchronized(backward_to_d(lambda x: torch_ragged.sparse.mm(s, x, plan=plan)),
                                                 device), min_run_time)
    rows.append(row(case, "mm fwd+bwd to D", "torch CSR", base_s, ours_s, 2 * nbytes, memcpy))

    values = s.values().clone().requires_grad_(True)

    def ours_both():  # values as a tensor of their own (a GNN's edge weights), through the plan
        return torch.autograd.grad((plan.mm(values, d_leaf) * weight).sum(), (values, d_leaf))

    forward_s = median_seconds(ours, min_run_time)
    both_s = median_seconds(synchronized(ours_both, device), min_run_time)
    extra = _peak_extra_mb(ours_both) if device == "cpu" else float("nan")
    print(f"{case}: ours forward {forward_s * 1e3:.1f} ms, forward + backward to both {both_s * 1e3:.1f} ms "
          f"({both_s / forward_s:.2f}x the forward), peak extra memory {extra:.0f} MB")

    # torch COO's backward to S builds a dense n x n gradient: only at 20k (1.6 GB) does it run here
    small_n, small_nnz = 20_000, 200_000
    small = sparse_matrix(small_n, small_nnz)
    small_d = torch.randn(small_n, k, generator=g).to(device).requires_grad_(True)
    small_w = torch.randn(small_n, k, generator=g).to(device)
    small_plan = torch_ragged.sparse.plan(small)
    sv = small.values().clone().requires_grad_(True)

    def torch_both():
        t = torch.sparse_coo_tensor(small.indices(), sv, small.shape, is_coalesced=True)
        return torch.autograd.grad((torch.sparse.mm(t, small_d) * small_w).sum(), (sv, small_d))

    def ours_small_both():
        return torch.autograd.grad((small_plan.mm(sv, small_d) * small_w).sum(), (sv, small_d))

    base_s, ours_s = paired_medians(synchronized(torch_both, device), synchronized(ours_small_both, device),
                                    min_run_time)
    rows.append(row("mm 20k x 20k, nnz 200k, D 20k x 64", "mm fwd+bwd to S and D", "torch COO (dense n x n grad)",
                    base_s, ours_s, 2 * small_nnz * (12 + 4 * k), memcpy))

    return rows


def power_law_matrix(n, nnz, generator):
    """Row lengths that follow Zipf's law (row r holds ~ nnz / (H_n * (r + 1)) entries), columns uniform: a graph's
    adjacency with hubs. Coalesced, float32."""
    weights = 1.0 / torch.arange(1, n + 1, dtype=torch.float64)
    rows = torch.multinomial(weights, nnz, replacement=True, generator=generator)
    cols = torch.randint(0, n, (nnz,), generator=generator)
    values = torch.randn(nnz, generator=generator)
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (n, n)).coalesce()


def spgemm_case(case, a, b, device, min_run_time, memcpy):
    expected = torch.sparse.mm(a, b).coalesce()
    actual = torch_ragged.sparse.mm(a, b)
    assert torch.equal(actual._indices(), expected._indices())
    torch.testing.assert_close(actual._values(), expected._values(), rtol=1e-4, atol=1e-4)
    nbytes = (a._nnz() + b._nnz()) * 20 + expected._nnz() * 20  # operands read, product written (int64 COO)
    ours = synchronized(lambda: torch_ragged.sparse.mm(a, b), device)
    rows = []
    base_s, ours_s = paired_medians(synchronized(lambda: torch.sparse.mm(a, b), device), ours, min_run_time)
    rows.append(row(case, "mm", "torch COO", base_s, ours_s, nbytes, memcpy))
    ca, cb = a.to_sparse_csr(), b.to_sparse_csr()
    base_s, ours_s = paired_medians(synchronized(lambda: ca @ cb, device), ours, min_run_time)
    rows.append(row(case, "mm", "torch CSR @ CSR", base_s, ours_s, nbytes, memcpy))
    # like for like: both products of the CSR operands, both CSR out (int64 indices: 12 bytes per float entry)
    csr = torch_ragged.sparse.mm(ca, cb)
    assert torch.equal(csr.crow_indices(), torch.sparse.mm(ca, cb).crow_indices())
    assert torch.equal(csr.col_indices(), actual._indices()[1]) and torch.equal(csr.values(), actual._values())
    csr_bytes = (a._nnz() + b._nnz()) * 12 + expected._nnz() * 12
    base_s, ours_s = paired_medians(synchronized(lambda: ca @ cb, device),
                                    synchronized(lambda: torch_ragged.sparse.mm(ca, cb), device), min_run_time)
    rows.append(row(case, "mm, CSR operands, CSR out", "torch CSR @ CSR", base_s, ours_s, csr_bytes, memcpy))
    if scipy is None or device != "cpu":
        return rows
    ai, bi = a.indices().numpy(), b.indices().numpy()
    sa = scipy.sparse.csr_matrix((a.values().numpy(), (ai[0], ai[1])), shape=tuple(a.shape))
    sb = scipy.sparse.csr_matrix((b.values().numpy(), (bi[0], bi[1])), shape=tuple(b.shape))
    assert (sa @ sb).nnz == expected._nnz()

    def scipy_sorted():
        product = sa @ sb
        product.sort_indices()
        return product

    base_s, ours_s = paired_medians(lambda: sa @ sb, ours, min_run_time)
    rows.append(row(case, "mm", "scipy csr @ csr (rows left unsorted)", base_s, ours_s, nbytes, memcpy))
    # like for like: CSR operands and product with int32 indices, as scipy holds them (8 bytes per float entry)
    ia, ib = (torch.sparse_csr_tensor(x.crow_indices().int(), x.col_indices().int(), x.values(), x.shape)
              for x in (ca, cb))
    assert torch.equal(torch_ragged.sparse.mm(ia, ib).crow_indices(), torch.from_numpy((sa @ sb).indptr))
    base_s, ours_s = paired_medians(lambda: sa @ sb, lambda: torch_ragged.sparse.mm(ia, ib), min_run_time)
    rows.append(row(case, "mm, CSR operands (int32), CSR out", "scipy csr @ csr (rows left unsorted)", base_s,
                    ours_s, (a._nnz() + b._nnz()) * 8 + expected._nnz() * 8, memcpy))
    base_s, ours_s = paired_medians(scipy_sorted, ours, min_run_time)
    rows.append(row(case, "mm", "scipy csr @ csr + sort_indices", base_s, ours_s, nbytes, memcpy))
    return rows


def spgemm_rows(device, min_run_time):
    """sparse @ sparse, 50k x 50k with 500k entries each (uniform and power-law rows) against torch COO, torch CSR
    @ CSR, scipy csr @ csr (whose result leaves each row's columns unsorted) and scipy with sort_indices() (the
    canonical, sorted form our coalesced COO result has)."""
    g = torch.Generator().manual_seed(5)
    n, nnz = 50_000, 500_000
    memcpy = copy_gbs(2 * 10**7 * 4, device, min_run_time)

    def uniform():
        indices = torch.randint(0, n, (2, nnz), generator=g)
        return torch.sparse_coo_tensor(indices, torch.randn(nnz, generator=g), (n, n)).coalesce()

    rows = []
    for pattern, make in (("uniform", uniform), ("power-law rows", lambda: power_law_matrix(n, nnz, g))):
        case = f"sparse @ sparse, 50k x 50k, 500k entries each, {pattern}"
        rows += spgemm_case(case, make().to(device), make().to(device), device, min_run_time, memcpy)
    return rows


def scatter_rows(device, min_run_time):
    """torch_ragged.scatter (torch_scatter's API: a stable sort by index + the segment core) against torch's own
    scatter_reduce and index_add_ (atomics on CUDA: not deterministic there): 1M rows x 16 into 100k positions."""
    g = torch.Generator().manual_seed(7)
    rows_n, width, positions = 10**6, 16, 10**5
    src = torch.randn(rows_n, width, generator=g).to(device)
    index = torch.randint(0, positions, (rows_n,), generator=g).to(device)
    full_index = index.view(-1, 1).expand_as(src)
    memcpy = copy_gbs(src.numel() * 4, device, min_run_time)
    nbytes = src.numel() * 4 + rows_n * 8 + positions * width * 4
    case = "scatter 1M x 16 rows into 100k positions, unsorted index"
    rows = []
    for reduce, theirs_name, theirs in (
        ("sum", "index_add_", lambda: torch.zeros(positions, width, device=device).index_add_(0, index, src)),
        ("sum", "scatter_reduce sum", lambda: torch.zeros(positions, width, device=device).scatter_reduce(
            0, full_index, src, "sum", include_self=False)),
        ("max", "scatter_reduce amax", lambda: torch.zeros(positions, width, device=device).scatter_reduce(
            0, full_index, src, "amax", include_self=False)),
    ):
        def ours(reduce=reduce):
            return torch_ragged.scatter(src, index, dim=0, dim_size=positions, reduce=reduce)

        torch.testing.assert_close(ours(), theirs(), rtol=1e-4, atol=1e-4)
        base_s, ours_s = paired_medians(synchronized(theirs, device), synchronized(ours, device), min_run_time)
        rows.append(row(case, f"scatter {reduce}", theirs_name, base_s, ours_s, nbytes, memcpy))
    return rows


def compressed_rows(device, min_run_time):
    """CSR / CSC taken as they are: conversions against torch's (COO -> CSR, CSR -> CSC, CSC -> COO), CSR @ dense
    against torch's CSR product (MKL on the CPU), CSC @ dense against torch's, and softmax along CSR rows (the
    segments as stored) against torch's COO softmax on the same entries (torch has none for CSR).
    200k x 200k, 2M entries, dense operand 200k x 32."""
    g = torch.Generator().manual_seed(8)
    n, nnz, k = 200_000, 2 * 10**6, 32
    coo = torch.sparse_coo_tensor(torch.randint(0, n, (2, nnz), generator=g), torch.randn(nnz, generator=g),
                                  (n, n)).coalesce().to(device)
    csr, csc = coo.to_sparse_csr(), coo.to_sparse_csc()
    dense = torch.randn(n, k, generator=g).to(device)
    entries = coo._nnz()
    memcpy = copy_gbs(entries * 20, device, min_run_time)
    case = f"200k x 200k, {entries / 1e6:.1f}M entries"
    sp = torch_ragged.sparse
    rows = []
    for op, theirs, ours, nbytes in (
        ("COO -> CSR", lambda: coo.to_sparse_csr(), lambda: sp.to_sparse_csr(coo), entries * 28),
        ("CSR -> CSC", lambda: csr.to_sparse_csc(), lambda: sp.to_sparse_csc(csr), entries * 32),
        ("CSC -> COO", lambda: csc.to_sparse_coo().coalesce(), lambda: sp.to_sparse_coo(csc), entries * 40),
        ("CSR @ D", lambda: csr @ dense, lambda: sp.mm(csr, dense), entries * 12 + 2 * n * k * 4),
        ("CSC @ D", lambda: csc @ dense, lambda: sp.mm(csc, dense), entries * 12 + 2 * n * k * 4),
        ("softmax along CSR rows", lambda: torch.sparse.softmax(coo, 1), lambda: sp.to_sparse_coo(sp.softmax(csr, 1)),
         entries * 8),
    ):
        got, expected = ours(), theirs()
        if got.layout != torch.strided:  # same entries (compared as coalesced COO: too large to densify)
            assert got.layout == expected.layout
            got, expected = sp.to_sparse_coo(got), sp.to_sparse_coo(expected)
            assert torch.equal(got.indices(), expected.indices())
            got, expected = got.values(), expected.values()
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
        base_s, ours_s = paired_medians(synchronized(theirs, device), synchronized(ours, device), min_run_time)
        baseline = "torch COO softmax" if op.startswith("softmax") else "torch"
        rows.append(row(case, op, baseline, base_s, ours_s, nbytes, memcpy))
    return rows


def accelerate_rows(device, min_run_time):
    """torch's own calls, unchanged, with torch_ragged.sparse.accelerate() off (baseline) and on (ours): coalesce
    of 2M entries with 30% duplicates, torch.sparse.softmax forward and forward+backward along dim 1, the sum over
    dim 0, torch.sparse.mm with a dense 32-column matrix, on a 200k x 200k matrix."""
    g = torch.Generator().manual_seed(9)
    n, nnz, k = 200_000, 2 * 10**6, 32
    raw = torch.sparse_coo_tensor(duplicated_entries(nnz, n, 0.3, g), torch.randn(nnz, generator=g), (n, n),
                                  check_invariants=False).to(device)
    coalesced = raw.coalesce()
    dense = torch.randn(n, k, generator=g).to(device)
    leaf = coalesced.values().clone().requires_grad_()

    def softmax_forward_backward():
        out = torch.sparse.softmax(torch.sparse_coo_tensor(coalesced.indices(), leaf, coalesced.shape), 1)
        out.values().sum().backward()
        return leaf.grad

    entries = coalesced._nnz()
    memcpy = copy_gbs(nnz * 20, device, min_run_time)
    case = f"torch's own calls, 200k x 200k, {entries / 1e6:.1f}M entries"
    rows = []
    for op, fn, nbytes in (
        ("x.coalesce() (2M, 30% dup)", lambda: raw.coalesce(), nnz * 20 + entries * 20),
        ("torch.sparse.softmax dim 1", lambda: torch.sparse.softmax(coalesced, 1), entries * 8),
        ("softmax fwd+bwd dim 1", softmax_forward_backward, entries * 16),
        ("torch.sparse.sum dim 0", lambda: torch.sparse.sum(coalesced, 0), entries * 20),
        ("torch.sparse.mm(S, D 32 cols)", lambda: torch.sparse.mm(coalesced, dense), entries * 12 + 2 * n * k * 4),
    ):
        with torch_ragged.sparse.accelerate(False):
            expected = fn()
        with torch_ragged.sparse.accelerate():
            got = fn()
        if got.is_sparse:  # coalesced on both sides: the same entries
            assert torch.equal(got._indices(), expected._indices())
            got, expected = got._values(), expected._values()
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)

        def alone(fn=fn):
            with torch_ragged.sparse.accelerate(False):
                return fn()

        def accelerated(fn=fn):
            with torch_ragged.sparse.accelerate():
                return fn()

        base_s, ours_s = paired_medians(synchronized(alone, device), synchronized(accelerated, device), min_run_time)
        rows.append(row(case, op, "same call, torch alone", base_s, ours_s, nbytes, memcpy))
    return rows


def run_all(device, min_run_time):
    np.random.seed(0)
    return (coalesce_rows(device, min_run_time) + sum_rows(device, min_run_time) + softmax_rows(device, min_run_time)
            + wide_softmax_row(device, min_run_time) + matmul_rows(device, min_run_time)
            + spgemm_rows(device, min_run_time) + scatter_rows(device, min_run_time)
            + compressed_rows(device, min_run_time) + accelerate_rows(device, min_run_time))
