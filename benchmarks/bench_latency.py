"""Per-call cost on tiny inputs (<= 16 rows or entries): each public function against its closest torch equivalent.

Graph, point-cloud and sequence models call these ops thousands of times per step on small pieces; there the fixed
cost of a call (Python checks, autograd set-up, dispatcher, allocations, thread-pool wake-ups) is the speed. Each row
times the baseline and ours in alternating rounds (torch.utils.benchmark's blocked timing, the other families'
`paired_medians`) and reports the median per-call time of each. Results are checked equal first
(values; for pad_sequence-like baselines, the padded tensors)."""

import torch
import torch.nn.functional as F
import torch_ragged
import torch_ragged.sparse as rs
from bench_batch import paired_medians
from torch.nn.utils.rnn import pad_sequence


def _sparse(rows=3, cols=3, nnz=4, seed=0, coalesced=True):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, rows, (nnz,), generator=g), torch.randint(0, cols, (nnz,), generator=g)])
    s = torch.sparse_coo_tensor(indices, torch.randn(nnz, generator=g), (rows, cols))
    return s.coalesce() if coalesced else s


def cases():
    """(name, baseline label, baseline fn, ours fn): fns take no arguments (inputs bound here, built once)."""
    g = torch.Generator().manual_seed(1)
    s = _sparse()
    s_uncoalesced = _sparse(nnz=6, coalesced=False)
    csr = s.to_sparse_csr()
    dense = torch.randn(3, 8, generator=g)
    x = torch.randn(10, 8, generator=g)
    members = [torch.randn(n, 4, generator=g) for n in (3, 1, 4)]
    packed = torch.cat(members)
    lengths = torch.tensor([len(m) for m in members])
    first_idx = torch_ragged.get_first_idx(lengths)
    shape_per_tensor = lengths.view(-1, 1)
    padded = pad_sequence(members, batch_first=True)
    index = torch.tensor([0, 1, 2, 0, 1, 2, 3, 3, 4, 4])
    full_index = index.view(-1, 1).expand(10, 8)
    zeros = torch.zeros(5, 8)
    r = torch_ragged.RaggedTensor.from_list(members)
    nested = torch.nested.nested_tensor(members, layout=torch.jagged)
    ops = torch.ops.torch_ragged
    return [
        ("sparse.mm COO @ dense", "torch.sparse.mm", lambda: torch.sparse.mm(s, dense), lambda: rs.mm(s, dense)),
        ("sparse.mm CSR @ dense", "torch.sparse.mm", lambda: torch.sparse.mm(csr, dense),
         lambda: rs.mm(csr, dense)),
        ("sparse.coalesce", "Tensor.coalesce", lambda: s_uncoalesced.coalesce(), lambda: rs.coalesce(s_uncoalesced)),
        ("sparse.softmax", "torch.sparse.softmax", lambda: torch.sparse.softmax(s, 1), lambda: rs.softmax(s, 1)),
        ("sparse.sum(dim)", "torch.sparse.sum", lambda: torch.sparse.sum(s, 1), lambda: rs.sum(s, 1)),
        ("sparse.to_dense", "Tensor.to_dense", lambda: s.to_dense(), lambda: rs.to_dense(s)),
        ("pad reflect", "F.pad reflect", lambda: F.pad(x, (2, 2), mode="reflect"),
         lambda: torch_ragged.pad(x, ((0, 0), (2, 2)), mode="reflect")),
        ("pad constant", "F.pad constant", lambda: F.pad(x, (2, 2, 1, 1)),
         lambda: torch_ragged.pad(x, ((1, 1), (2, 2)))),
        ("list_to_padded", "pad_sequence", lambda: pad_sequence(members, batch_first=True),
         lambda: torch_ragged.list_to_padded(members, 0.0)[0]),
        ("packed_to_padded", "pad_sequence", lambda: pad_sequence(members, batch_first=True),
         lambda: torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0)),
        ("RaggedTensor.padded", "NJT to_padded_tensor", lambda: nested.to_padded_tensor(0.0),
         lambda: r.padded(0.0)),
        ("op segment_sum", "torch.segment_reduce", lambda: torch.segment_reduce(packed, "sum", lengths=lengths),
         lambda: ops.segment_sum(packed, first_idx)),
        ("segment_sum", "torch.segment_reduce", lambda: torch.segment_reduce(packed, "sum", lengths=lengths),
         lambda: torch_ragged.segment_sum(packed, first_idx)),
        ("segment_softmax", "torch.softmax (padded)", lambda: torch.softmax(padded, 1),
         lambda: torch_ragged.segment_softmax(packed, first_idx)),
        ("scatter sum", "scatter_reduce sum", lambda: zeros.scatter_reduce(0, full_index, x, "sum", include_self=False),
         lambda: torch_ragged.scatter(x, index, 0, 5)),
        ("scatter max", "scatter_reduce amax",
         lambda: zeros.scatter_reduce(0, full_index, x, "amax", include_self=False),
         lambda: torch_ragged.scatter(x, index, 0, 5, reduce="max")),
    ]


# baseline and ours give the same tensor (others: a different form of the same data; checked by the tests)
_COMPARABLE = {"sparse.mm COO @ dense", "sparse.mm CSR @ dense", "sparse.softmax", "sparse.to_dense",
               "pad reflect", "pad constant", "list_to_padded", "packed_to_padded", "RaggedTensor.padded",
               "op segment_sum", "segment_sum", "scatter sum", "scatter max"}


def _as_dense(t):
    if isinstance(t, torch_ragged.RaggedTensor):
        return t.values
    return t.to_dense() if t.layout != torch.strided else t


def run_all(device: str, min_run_time: float):
    if device != "cpu":
        raise SystemExit("bench_latency: the per-call table is measured on the CPU (tiny GPU calls time the launch)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread, as a model calling many small ops per step runs them
    rows = []
    try:
        for name, baseline_name, baseline, ours in cases():
            if name in _COMPARABLE:
                torch.testing.assert_close(_as_dense(ours()), _as_dense(baseline()), msg=f"{name}: results differ")
            base_s, ours_s = paired_medians(baseline, ours, min_run_time, rounds=5)
            rows.append({"case": "tiny", "op": name, "baseline": baseline_name, "baseline_s": base_s,
                         "ours_s": ours_s})
            print(f"  {name}: {base_s / ours_s:.2f}x", flush=True)
    finally:
        torch.set_num_threads(threads)
    return rows


def print_table(rows):
    rows = sorted(rows, key=lambda r: r["baseline_s"] / r["ours_s"])
    print("| op | baseline | baseline us | ours us | ratio |")
    print("|---|---|---|---|---|")
    for r in rows:
        ratio = r["baseline_s"] / r["ours_s"]
        flag = " (slower)" if ratio < 1.0 else ""
        print(f"| {r['op']} | {r['baseline']} | {r['baseline_s'] * 1e6:.1f} | {r['ours_s'] * 1e6:.1f} | "
              f"{ratio:.2f}x{flag} |")
