"""Benchmarks of the containers against what a user does today, same data, same run.

Rows per case (members of U[1, max_len] rows x D floats):
- LazyStack.get(as_padded_tensor=True) vs tensordict's LazyStackedTensorDict.get (same TensorDict members);
- RaggedTensor.padded() vs torch.nested.to_padded_tensor on a jagged NJT with the output size given;
- r[index] (ragged_index_select) vs a list comprehension over the members + torch.cat, and vs a plain copy of
  the selected rows' bytes (fresh output, and into a reused buffer);
- the DataLoader collate (packed RaggedTensor; and collate + .padded()) vs a pad_sequence-based collate.
"""

import torch
import torch_ragged
from bench_batch import median_seconds, paired_medians, synchronized
from bench_sparse import copy_gbs, row
from torch.nn.utils.rnn import pad_sequence

try:
    import tensordict
except ImportError:
    tensordict = None

CASES = {
    "1000 members x <=300 x 16": dict(batch=1000, max_len=300, elem=16, select=500),
    "64 members x <=100k x 3": dict(batch=64, max_len=100_000, elem=3, select=32),
}
INDEX_CASES = {
    "select 5000 of 20000 members x <=16 x 16": dict(batch=20_000, max_len=16, elem=16, select=5000),
    "select 32 of 64 members x <=100k x 3": dict(batch=64, max_len=100_000, elem=3, select=32),
}


def make_members(batch, max_len, elem, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (batch,), generator=generator)
    packed = torch.randn(int(lengths.sum()), elem, generator=generator).to(device)
    return lengths, [t.clone() for t in packed.split(lengths.tolist())]


def pad_sequence_collate(samples):
    points = [s["points"] for s in samples]
    lengths = torch.tensor([len(p) for p in points])
    return {"points": pad_sequence(points, batch_first=True), "lengths": lengths,
            "label": torch.tensor([s["label"] for s in samples])}


def container_rows(name, batch, max_len, elem, select, device, min_run_time):
    lengths, members = make_members(batch, max_len, elem, device)
    padded_bytes = (members[0].element_size() * batch * int(lengths.max()) * elem
                    + sum(m.nbytes for m in members))
    memcpy = copy_gbs(max(padded_bytes, 1 << 20), device, min_run_time)
    rows = []

    def add(op, baseline, baseline_fn, ours_fn, nbytes):
        base_s, ours_s = paired_medians(synchronized(baseline_fn, device), synchronized(ours_fn, device),
                                        min_run_time)
        rows.append(row(name, op, baseline, base_s, ours_s, nbytes, memcpy))

    if tensordict is not None:
        tds = [tensordict.TensorDict(a=m) for m in members]
        theirs = tensordict.LazyStackedTensorDict(*tds, stack_dim=0)
        ours = torch_ragged.LazyStack(*tds)
        add("LazyStack.get(as_padded_tensor)", "tensordict lazy stack",
            lambda: theirs.get("a", as_padded_tensor=True), lambda: ours.get("a", as_padded_tensor=True), padded_bytes)
    r = torch_ragged.RaggedTensor.from_list(members)
    nested = r.to_nested()
    size = (batch, int(lengths.max()), elem)
    add("RaggedTensor.padded()", "NJT to_padded_tensor(output_size)",
        lambda: torch.nested.to_padded_tensor(nested, 0.0, output_size=size), lambda: r.padded(0.0), padded_bytes)
    samples = [{"points": m, "label": i % 2} for i, m in enumerate(members)]
    add("collate (packed RaggedTensor)", "pad_sequence collate",
        lambda: pad_sequence_collate(samples), lambda: torch_ragged.collate(samples), padded_bytes)
    add("collate + .padded()", "pad_sequence collate",
        lambda: pad_sequence_collate(samples), lambda: torch_ragged.collate(samples)["points"].padded(0.0),
        padded_bytes)
    return rows


def index_rows(name, batch, max_len, elem, select, device, min_run_time):
    lengths, members = make_members(batch, max_len, elem, device)
    r = torch_ragged.RaggedTensor.from_list(members)
    views = r.list()
    index = torch.randperm(batch, generator=torch.Generator().manual_seed(1))[:select]
    positions = index.tolist()
    nbytes = 2 * sum(views[i].nbytes for i in positions)  # read + write
    memcpy = copy_gbs(nbytes // 2, device, min_run_time)
    rows = []
    base_s, ours_s = paired_medians(synchronized(lambda: torch.cat([views[i] for i in positions]), device),
                                    synchronized(lambda: r[index], device), min_run_time)
    rows.append(row(name, "r[index]", "list comprehension + torch.cat", base_s, ours_s, nbytes, memcpy))
    selected_rows = sum(views[i].shape[0] for i in positions)
    source = r.values[:selected_rows].clone()
    reused = torch.empty_like(source)
    fresh_s = median_seconds(synchronized(lambda: source.clone(), device), min_run_time)
    reused_s = median_seconds(synchronized(lambda: reused.copy_(source), device), min_run_time)
    rows.append(row(name, "r[index]", "plain copy of the selected rows (fresh output)", fresh_s, ours_s, nbytes,
                    memcpy))
    rows.append(row(name, "r[index]", "plain copy of the selected rows (reused output)", reused_s, ours_s, nbytes,
                    memcpy))
    return rows


def run_all(device, min_run_time):
    rows = []
    for name, params in CASES.items():
        rows += container_rows(name, device=device, min_run_time=min_run_time, **params)
    for name, params in INDEX_CASES.items():
        rows += index_rows(name, device=device, min_run_time=min_run_time, **params)
    if tensordict is None:
        print("tensordict is not installed: the LazyStack rows are missing (pip install tensordict)")
    return rows
