"""Benchmarks of the batch family against the baselines a user would otherwise pick.

Each case returns rows of (case, op, baseline, baseline_s, ours_s, bytes moved by the op, memcpy_gbs), all
timed in the same run so ratios are meaningful on a noisy shared machine.
"""

import inspect
import sys

import torch
import torch_ragged
from torch.nn.utils.rnn import pad_sequence
from torch.utils import benchmark

CASES = {
    "many small (B=4096, len U[1,64], D=3)": dict(batch=4096, max_len=64, elem=3),
    "few large (B=16, len U[1,100000], D=64)": dict(batch=16, max_len=100_000, elem=64),
}
GPU_CASES = {
    "huge (B=64, len U[1,200000], D=128)": dict(batch=64, max_len=200_000, elem=128),
}


def median_seconds(fn, min_run_time):
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


# Each timed pair prints a line to stderr as it finishes (a family's table comes only at its end); the census,
# which prints its own row lines, turns this off.
report_progress = True


def paired_medians(baseline_fn, ours_fn, min_run_time, rounds=3):
    """Medians of baseline and ours, timed in alternating rounds so machine drift hits both alike."""
    baseline, ours = [], []
    for _ in range(rounds):
        baseline.append(median_seconds(baseline_fn, min_run_time / rounds))
        ours.append(median_seconds(ours_fn, min_run_time / rounds))
    result = sorted(baseline)[rounds // 2], sorted(ours)[rounds // 2]
    if report_progress:
        caller = inspect.stack()[1]
        print(f"  timed ({caller.function}, line {caller.lineno}): baseline {result[0] * 1e3:.3f} ms, ours "
              f"{result[1] * 1e3:.3f} ms, {result[0] / result[1]:.2f}x", file=sys.stderr, flush=True)
    return result


def synchronized(fn, device):
    if device == "cuda":
        def run():
            fn()
            torch.cuda.synchronize()
        return run
    return fn


def kaolin_list_to_padded(tensors, padding_value, max_len):
    """Kaolin's implementation: torch.full, then one slice assignment per sub-tensor."""
    out = torch.full((len(tensors), max_len, tensors[0].shape[-1]), padding_value, dtype=tensors[0].dtype,
                     device=tensors[0].device)
    for i, t in enumerate(tensors):
        out[i, : t.shape[0]] = t
    return out


def make_batch(batch, max_len, elem, dtype, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (batch,), generator=generator)
    packed = torch.randn(int(lengths.sum()), elem, generator=generator).to(dtype=dtype, device=device)
    tensors = list(packed.split(lengths.tolist()))
    return lengths, packed, tensors


def run_case(name, batch, max_len, elem, dtype=torch.float32, device="cpu", min_run_time=1.0):
    lengths, packed, tensors = make_batch(batch, max_len, elem, dtype, device)
    tensors = [t.clone() for t in tensors]  # separate allocations, as a real list would have
    shape_per_tensor = lengths.unsqueeze(1)
    first_idx = torch_ragged.get_first_idx(lengths)
    longest = int(lengths.max())
    padded = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0)
    mask = (torch.arange(longest).unsqueeze(0) < lengths.unsqueeze(1)).to(device)
    offsets = first_idx.to(device)
    values = torch.randn(batch, dtype=torch.float32).to(dtype=dtype, device=device)
    counts = lengths.to(device)
    total = int(lengths.sum())
    es = packed.element_size()
    packed_bytes, padded_bytes = packed.numel() * es, padded.numel() * es

    def ours_time(fn):
        return median_seconds(synchronized(fn, device), min_run_time)

    # memcpy bandwidth (bytes read + written) of a copy as large as the padded tensor, buffers pre-touched.
    copy_src = torch.ones(padded.numel(), dtype=dtype, device=device)
    copy_dst = torch.zeros_like(copy_src)
    memcpy_gbs = 2 * padded_bytes / ours_time(lambda: copy_dst.copy_(copy_src)) / 1e9

    rows = []

    # The floor for any op producing the padded tensor: allocating and filling it (fresh pages).
    full_s = ours_time(lambda: torch.full(padded.shape, 0.0, dtype=dtype, device=device))

    def add(op, baseline_name, baseline_fn, ours_fn, moved_bytes):
        baseline_s, ours_s = paired_medians(synchronized(baseline_fn, device), synchronized(ours_fn, device),
                                            min_run_time)
        rows.append(dict(case=name, op=op, baseline=baseline_name, baseline_s=baseline_s, ours_s=ours_s,
                         bytes=moved_bytes, memcpy_gbs=memcpy_gbs, padded_full_s=full_s))

    def ours_list_to_padded():
        return torch_ragged.list_to_padded(tensors, 0.0)

    add("list_to_padded", "pad_sequence", lambda: pad_sequence(tensors, batch_first=True), ours_list_to_padded,
        packed_bytes + padded_bytes)
    add("list_to_padded", "Kaolin loop (full + slice copy)", lambda: kaolin_list_to_padded(tensors, 0.0, longest),
        ours_list_to_padded, packed_bytes + padded_bytes)

    def nested_to_padded():
        # The longest member given, as a caller would: without it the CUDA path sized its output from a
        # default bound (on an H200 it tried to allocate 195 GiB).
        nested = torch.nested.nested_tensor_from_jagged(packed, offsets, max_seqlen=longest)
        return torch.nested.to_padded_tensor(nested, 0.0, output_size=tuple(padded.shape))

    add("packed_to_padded", "torch.nested.to_padded_tensor", nested_to_padded,
        lambda: torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, 0.0), packed_bytes + padded_bytes)
    add("padded_to_packed", "boolean-mask indexing", lambda: padded[mask],
        lambda: torch_ragged.padded_to_packed(padded, shape_per_tensor, num_rows=total), 2 * packed_bytes)
    tile_bytes = total * es + values.numel() * es
    add("tile_to_packed", "repeat_interleave",
        lambda: values.repeat_interleave(counts, output_size=total).unsqueeze(1),
        lambda: torch_ragged.tile_to_packed(values, counts, total), tile_bytes)
    return rows
