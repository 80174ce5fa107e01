"""Ragged collectives and DTensor pad on 2 ranks (gloo, 127.0.0.1; `run.py --family distributed`).

Baselines, timed in the same processes in alternating rounds (each round starts after a barrier; rank 0's times):
- torchmetrics' pad-to-max recipe (`gather_all_tensors`, applied to each tensor of a list state, as its metrics do
  for per-image detections): per member, an all_gather of its shape, then an all_gather of it padded to the
  largest rank's shape, trimmed;
- `all_gather_object` of the member list (pickling, as detectron2 / tensordict do);
- for DTensor pad: `full_tensor()` -> pad -> `distribute_tensor` back to the same sharding.
"transport floor" rows time a raw `all_gather_single` of the same bytes (ratio = floor time / ours, <= 1: how
close to what gloo's loopback moves at best). `memcpy GB/s` is a local copy on rank 0, for scale.
"""

import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch_ragged
from bench_sparse import copy_gbs, row
from torch_ragged.distributed import ragged_all_gather

WORLD = 2


def members(rank, count, max_rows, features):
    g = torch.Generator().manual_seed(rank)
    lengths = torch.randint(0, max_rows + 1, (count,), generator=g)
    # separate tensors, as per-image results are (pickling a view would pickle its whole base storage)
    return [m.clone() for m in torch.randn(int(lengths.sum()), features, generator=g).split(lengths.tolist())]


def gather_all_tensors(tensor):
    """torchmetrics.utilities.distributed.gather_all_tensors (uneven shapes): shapes, then padded tensors."""
    world = dist.get_world_size()
    local_size = torch.tensor(tensor.shape)
    sizes = [torch.zeros_like(local_size) for _ in range(world)]
    dist.all_gather(sizes, local_size)
    max_size = torch.stack(sizes).max(dim=0).values
    pad = [p for dim in reversed(range(tensor.dim())) for p in (0, int(max_size[dim] - tensor.shape[dim]))]
    padded = torch.nn.functional.pad(tensor, pad)
    gathered = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return [g[tuple(slice(0, int(s)) for s in size)] for g, size in zip(gathered, sizes, strict=True)]


def rounds_of(fns, rounds):
    """Median seconds of each fn, alternating fns within each round, every call after a barrier."""
    times = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            dist.barrier()
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def gather_case(rank, rounds, name, count, max_rows, features):
    local = members(rank, count, max_rows, features)
    packed = torch.cat(local)
    first_idx = torch.tensor([0, *torch.tensor([len(m) for m in local]).cumsum(0).tolist()])
    sizes = [None] * WORLD
    dist.all_gather_object(sizes, packed.numel() * 4)
    gathered_bytes = sum(sizes)
    raw, raw_out = torch.empty(max(sizes) // 4), torch.empty(WORLD * (max(sizes) // 4))

    def ours():
        ragged_all_gather(packed, first_idx)

    def pad_to_max():
        [gather_all_tensors(m) for m in local]

    def pickled():
        dist.all_gather_object([None] * WORLD, local)

    def floor():
        dist.all_gather_single(raw_out, raw)

    t_ours, t_pad, t_pickle, t_floor = rounds_of([ours, pad_to_max, pickled, floor], rounds)
    copy = copy_gbs(gathered_bytes, "cpu", 0.2) if rank == 0 else 0.0
    return [row(name, "ragged_all_gather", "pad-to-max per member (torchmetrics)", t_pad, t_ours, gathered_bytes, copy),
            row(name, "ragged_all_gather", "all_gather_object", t_pickle, t_ours, gathered_bytes, copy),
            row(name, "ragged_all_gather", "transport floor (all_gather_single of the bytes)", t_floor, t_ours,
                gathered_bytes, copy)]


def pad_case(rank, rounds, mesh, full, mode, widths, placement):
    from torch.distributed.tensor import distribute_tensor

    x = distribute_tensor(full, mesh, [placement])

    def ours():
        torch_ragged.pad(x, widths, mode)

    def gather_route():
        distribute_tensor(torch_ragged.pad(x.full_tensor(), widths, mode), mesh, [placement])

    t_ours, t_gather = rounds_of([ours, gather_route], rounds)
    rows, cols = full.shape[0] + sum(widths[0]), full.shape[1] + sum(widths[1])
    nbytes = 2 * full.element_size() * rows * cols // WORLD  # this rank's output, written and read
    copy = copy_gbs(nbytes, "cpu", 0.2) if rank == 0 else 0.0
    axes = "sharded axis" if widths[placement.dim] != (0, 0) else "unsharded axis"
    return row(f"DTensor {full.shape[0]}x{full.shape[1]} float32, Shard({placement.dim}) over {WORLD} ranks",
               f"pad {mode} {widths} ({axes})", "full_tensor -> pad -> distribute_tensor", t_gather, t_ours, nbytes,
               copy)


def run_rank(rank, rounds):
    from torch.distributed.tensor import Shard, init_device_mesh

    rows = []
    for name, count, max_rows, features in [("1000 members <= 300x16 per rank", 1000, 300, 16),
                                            ("16 members <= 100k x64 per rank", 16, 100_000, 64)]:
        rows += gather_case(rank, rounds, name, count, max_rows, features)
    mesh = init_device_mesh("cpu", (WORLD,))
    full = torch.randn(4096, 4096, generator=torch.Generator().manual_seed(0))
    for mode, widths in [("reflect", ((3, 3), (3, 3))), ("constant", ((8, 8), (0, 0))), ("edge", ((0, 0), (5, 5)))]:
        rows.append(pad_case(rank, rounds, mesh, full, mode, widths, Shard(0)))
    return rows


def _worker(rank, port, rounds, result_path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    rows = run_rank(rank, rounds)
    if rank == 0:
        torch.save(rows, result_path)
    dist.barrier()
    dist.destroy_process_group()


def run_all(device, min_run_time):
    if device != "cpu":
        raise SystemExit("bench_distributed: CPU (gloo) only on this machine; NCCL needs a multi-GPU host")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rounds = 3 if min_run_time < 0.5 else 7
    with tempfile.TemporaryDirectory() as folder:
        result_path = os.path.join(folder, "rows.pt")
        torch.set_num_threads(max(1, torch.get_num_threads() // WORLD))
        mp.spawn(_worker, args=(port, rounds, result_path), nprocs=WORLD)
        return torch.load(result_path)
