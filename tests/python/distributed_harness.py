"""Runs check functions on every rank of a gloo process group on 127.0.0.1 (torch.multiprocessing, one spawn per
call), and reports each rank's failures to the parent. A rank that hangs or dies fails the run: the parent waits
at most `timeout` seconds, then kills every survivor (CI must never hang on a collective)."""

import os
import socket
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, checks, report_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    failures = []
    for check in checks:
        try:
            check(rank, world)
        except Exception:  # noqa: BLE001 (report every failing check, then go on: the others must still run)
            failures.append(f"rank {rank}, {check.__name__}:\n{traceback.format_exc()}")
        dist.barrier()  # a check that failed on one rank only must not desynchronise the next one
    with open(os.path.join(report_dir, f"rank{rank}.txt"), "w") as f:
        f.write("\n".join(failures) if failures else "OK")
    dist.barrier()  # no rank tears down (rank 0 hosts the store) while another still talks to it
    dist.destroy_process_group()
    # Skip interpreter finalisation: gloo's worker threads can still hold tensors there, and freeing them while
    # Python shuts down aborts the rank ("terminate called without an active exception", seen once in CI under
    # load, after every check had passed). The report above is already on disk.
    os._exit(0)


def run_on_ranks(checks, world: int, timeout: float = 240.0) -> list:
    """Runs every check on `world` ranks; returns the failure reports (empty when all passed)."""
    with tempfile.TemporaryDirectory() as report_dir:
        context = mp.start_processes(_worker, args=(world, free_port(), checks, report_dir), nprocs=world,
                                     join=False, start_method="spawn")
        deadline = time.monotonic() + timeout
        try:
            while not context.join(timeout=max(0.1, deadline - time.monotonic())):
                if time.monotonic() > deadline:
                    return [f"timed out after {timeout} s (a rank hung in a collective?)"]
        except mp.ProcessRaisedException as error:
            return [f"a rank died: {error}"]
        except mp.ProcessExitedException as error:
            return [f"a rank exited: {error}; what each rank reported before: {_reports(report_dir, world)}"]
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
        return [text for text in _reports(report_dir, world) if text != "OK"]


def _reports(report_dir, world) -> list:
    reports = []
    for rank in range(world):
        path = os.path.join(report_dir, f"rank{rank}.txt")
        reports.append(open(path).read() if os.path.exists(path) else f"rank {rank} wrote no report")
    return reports
