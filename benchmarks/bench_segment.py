"""Benchmarks of the segment core against what a user would otherwise pick (same run, same data).

Baselines: torch.segment_reduce (offsets form), scatter_reduce(include_self=False), index_add_, and for softmax the
scatter-max / exp / scatter-sum recipe graph libraries use (torch_geometric.utils.softmax). PyG's torch_scatter is
used when installed (no wheel for torch 2.14; a benchmark-only extra). Each row is timed in alternating rounds with
its baseline; "GB/s" is the minimum traffic (data read + output written) over our time, against a plain copy of the
data measured in the same run.
"""

import torch
import torch_ragged
from bench_batch import median_seconds, paired_medians, synchronized

CASES = {
    "many small (B=100k, len U[1,32], F=64)": dict(segments=100_000, max_len=32, width=64),
    "few huge (B=8, len U[1,2M], F=16)": dict(segments=8, max_len=2_000_000, width=16),
}

try:
    import torch_scatter
except ImportError:  # the usual case: no wheel for torch 2.14
    torch_scatter = None


def make_case(segments, max_len, width, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (segments,), generator=generator)
    first_idx = torch_ragged.get_first_idx(lengths)
    data = torch.randn(int(first_idx[-1]), width, generator=generator).to(device)
    return data, first_idx.to(device), lengths.to(device)


def softmax_recipe(data, ids, index, segments):
    """scatter-max, gather, exp, scatter-sum, gather, divide: what graph libraries write."""
    maxima = data.new_zeros(segments, data.shape[1]).scatter_reduce(0, index, data, "amax", include_self=False)
    exps = (data - maxima.index_select(0, ids)).exp()
    sums = data.new_zeros(segments, data.shape[1]).index_add_(0, ids, exps)
    return exps / sums.index_select(0, ids)


def with_backward(fn, data):
    """forward + backward of sum(out * w) with a fixed weight w (random, so no shortcut)."""
    leaf = data.detach().requires_grad_(True)
    weight = {}

    def run():
        out = fn(leaf)
        out = out[0] if isinstance(out, tuple) else out
        if "w" not in weight:
            weight["w"] = torch.randn_like(out)
        torch.autograd.grad(out, leaf, weight["w"])
    return run


def run_case(name, segments, max_len, width, device="cpu", min_run_time=1.0):
    data, first_idx, lengths = make_case(segments, max_len, width, device)
    ids = torch.repeat_interleave(torch.arange(segments, device=device), lengths)
    index = ids.unsqueeze(1).expand_as(data)
    es = data.element_size()
    data_bytes, reduced_bytes = data.numel() * es, segments * width * es
    copy_dst = torch.empty_like(data)
    copy_gbs = 2 * data_bytes / median_seconds(synchronized(lambda: copy_dst.copy_(data), device), min_run_time) / 1e9
    rows = []

    def add(op, baseline_name, baseline_fn, ours_fn, moved_bytes, check=True):
        if check:
            expected, actual = baseline_fn(), ours_fn()
            expected = expected[0] if isinstance(expected, tuple) else expected
            actual = actual[0] if isinstance(actual, tuple) else actual
            torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-2)  # float32 sums of 1M rows
        baseline_s, ours_s = paired_medians(synchronized(baseline_fn, device), synchronized(ours_fn, device),
                                            min_run_time)
        rows.append(dict(case=name, op=op, baseline=baseline_name, baseline_s=baseline_s, ours_s=ours_s,
                         bytes=moved_bytes, memcpy_gbs=copy_gbs))

    def zeros():
        return data.new_zeros(segments, width)

    reduce_bytes = data_bytes + reduced_bytes
    ours = {
        "sum": lambda d: torch_ragged.segment_sum(d, first_idx),
        "mean": lambda d: torch_ragged.segment_mean(d, first_idx),
        "max": lambda d: torch_ragged.segment_max(d, first_idx),
        "softmax": lambda d: torch_ragged.segment_softmax(d, first_idx),
    }
    baselines = {
        "sum": [("torch.segment_reduce", lambda d: torch.segment_reduce(d, "sum", offsets=first_idx)),
                ("scatter_reduce", lambda d: zeros().scatter_reduce(0, index, d, "sum", include_self=False)),
                ("index_add_", lambda d: zeros().index_add(0, ids, d))],
        "mean": [("torch.segment_reduce", lambda d: torch.segment_reduce(d, "mean", offsets=first_idx)),
                 ("scatter_reduce", lambda d: zeros().scatter_reduce(0, index, d, "mean", include_self=False))],
        "max": [("torch.segment_reduce (no arg)", lambda d: torch.segment_reduce(d, "max", offsets=first_idx)),
                ("scatter_reduce amax (no arg)",
                 lambda d: zeros().scatter_reduce(0, index, d, "amax", include_self=False))],
        "softmax": [("scatter recipe", lambda d: softmax_recipe(d, ids, index, segments))],
    }
    if torch_scatter is not None:
        baselines["sum"].append(("torch_scatter.segment_csr", lambda d: torch_scatter.segment_csr(d, first_idx)))
        baselines["mean"].append(("torch_scatter.segment_csr",
                                  lambda d: torch_scatter.segment_csr(d, first_idx, reduce="mean")))
        baselines["max"].append(("torch_scatter.segment_csr",
                                 lambda d: torch_scatter.segment_csr(d, first_idx, reduce="max")))
        baselines["softmax"].append(("torch_scatter.scatter_softmax",
                                     lambda d: torch_scatter.composite.scatter_softmax(d, ids, dim=0)))
    moved = {"sum": reduce_bytes, "mean": reduce_bytes, "max": reduce_bytes + segments * width * 8,
             "softmax": 2 * data_bytes}
    for op, candidates in baselines.items():
        ours_fn = ours[op]
        for baseline_name, baseline_fn in candidates:
            add(op, baseline_name, lambda f=baseline_fn: f(data), lambda f=ours_fn: f(data), moved[op])
        for baseline_name, baseline_fn in candidates:
            add(f"{op} fwd+bwd", baseline_name, with_backward(baseline_fn, data), with_backward(ours_fn, data),
                moved[op] + data_bytes + (data_bytes if op == "softmax" else reduced_bytes), check=False)
    return rows


# ---- segmented scans ----

SCAN_CASES = {
    "many short (B=100k, len U[1,32], F=1)": dict(segments=100_000, max_len=32, width=1),
    "many short (B=100k, len U[1,32], F=16)": dict(segments=100_000, max_len=32, width=16),
    "few long (B=8, len U[1,2M], F=1)": dict(segments=8, max_len=2_000_000, width=1),
}


def padded_route(scan, fill):
    """What a user writes without segmented scans: pad to (B, max_len, F) (masked_scatter into a full tensor: one
    pass, no per-member tensors), torch's scan along dim 1, and the real rows picked back out."""
    def route(data, mask):
        padded = data.new_full((*mask.shape, data.shape[1]), fill)
        padded.masked_scatter_(mask.unsqueeze(-1), data)
        return scan(padded)[mask]
    return route


def run_scan_case(name, segments, max_len, width, device="cpu", min_run_time=1.0):
    """segment_cumsum / logcumsumexp / cummax against the padded route, torch's scan of an already padded batch (the
    scan alone, no padding: a floor for that route) and a loop of torch's scan per member (few members only)."""
    data, first_idx, lengths = make_case(segments, max_len, width, device)
    mask = torch.arange(int(lengths.max()), device=device) < lengths.unsqueeze(1)
    members = data.split(lengths.tolist()) if segments <= 1000 else None
    data_bytes = data.numel() * data.element_size()
    copy_dst = torch.empty_like(data)
    copy_gbs = 2 * data_bytes / median_seconds(synchronized(lambda: copy_dst.copy_(data), device), min_run_time) / 1e9
    rows = []

    def add(op, baseline_name, baseline_fn, ours_fn, moved_bytes, check=True):
        if check:
            torch.testing.assert_close(ours_fn(), baseline_fn(), rtol=1e-3, atol=1e-2)
        baseline_s, ours_s = paired_medians(synchronized(baseline_fn, device), synchronized(ours_fn, device),
                                            min_run_time)
        rows.append(dict(case=name, op=op, baseline=baseline_name, baseline_s=baseline_s, ours_s=ours_s,
                         bytes=moved_bytes, memcpy_gbs=copy_gbs))

    scans = {
        "cumsum": (lambda d: torch_ragged.segment_cumsum(d, first_idx), lambda p: p.cumsum(1), 0.0),
        "logcumsumexp": (lambda d: torch_ragged.segment_logcumsumexp(d, first_idx),
                         lambda p: p.logcumsumexp(1), -torch.inf),
        "cummax": (lambda d: torch_ragged.segment_cummax(d, first_idx).values, lambda p: p.cummax(1).values,
                   -torch.inf),
    }
    for op, (ours_fn, scan, fill) in scans.items():
        route = padded_route(scan, fill)
        add(op, "padded route (pad, scan, unpad)", lambda r=route: r(data, mask), lambda f=ours_fn: f(data),
            2 * data_bytes)
        padded_batch = data.new_full((*mask.shape, width), fill)
        padded_batch.masked_scatter_(mask.unsqueeze(-1), data)
        add(op, "torch scan of a padded batch (scan only)", lambda s=scan, p=padded_batch: s(p),
            lambda f=ours_fn: f(data), 2 * data_bytes, check=False)
        if members is not None:
            loop = {"cumsum": lambda m: m.cumsum(0), "logcumsumexp": lambda m: m.logcumsumexp(0),
                    "cummax": lambda m: m.cummax(0).values}[op]
            add(op, "loop of torch scans per member", lambda lp=loop: torch.cat([lp(m) for m in members]),
                lambda f=ours_fn: f(data), 2 * data_bytes)
        if op == "cumsum":
            add("cumsum fwd+bwd", "padded route (pad, scan, unpad)", with_backward(lambda d, r=route: r(d, mask), data),
                with_backward(ours_fn, data), 4 * data_bytes, check=False)
    return rows
