"""Benchmarks of the sparse family against torch.sparse (and scipy where it applies), same data, same run.

Rows: coalesce of 4M entries with 30% duplicates in a 1M x 1M matrix (scalar and [nnz, 16] values), coalesce of an
input that is already coalesced but not flagged so (torch then sorts it again), and torch.sparse.sum over dim 1
and dim 0 of a coalesced 100k x 100k matrix with 2M entries. "GB/s" is the minimum traffic (entries read,
unique entries written) over our time; "memcpy GB/s" a plain copy of the input's bytes in the same run.
"""

import numpy as np
import torch
import torch_ragged
from bench_batch import median_seconds, paired_medians, synchronized

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


def run_all(device, min_run_time):
    np.random.seed(0)
    return coalesce_rows(device, min_run_time) + sum_rows(device, min_run_time)
