"""What a multi-threaded inference server, a DataLoader with workers and long training loops ask of the library,
kept true in the test command (each bounded to seconds): concurrent calls of every family are bitwise the serial
ones, collate works in fork and spawn workers, loops do not grow the process, tiny inputs never wake the thread
pool, and inputs past 2^31 elements stay exact (the `large` tests, run when the machine has the memory)."""

import functools
import gc
import os
import threading
import time

import pytest
import torch
import torch_ragged
from concurrency import run_for
from torch.utils.data import DataLoader
from torch_ragged import RaggedTensor, sparse, tiles


def family_calls():
    """One call per family on small fixed inputs: name -> a function returning a tensor (or tuple of tensors)."""
    g = torch.Generator().manual_seed(0)
    data = torch.randn(300, 4, generator=g, dtype=torch.float64)
    first_idx = torch.tensor([0, 7, 7, 120, 300])
    s = torch.sparse_coo_tensor(torch.randint(0, 30, (2, 400), generator=g), torch.randn(400, generator=g), (30, 30))
    dense = torch.randn(30, 5, generator=g)
    members = [torch.randn(n, 3, generator=g) for n in (5, 1, 9)]
    r = RaggedTensor.from_list(members)
    pages, origins = torch.randn(3, 4, 4, generator=g), torch.tensor([[0, 0], [4, 0], [2, 2]])
    image = torch.randn(6, 7, generator=g)
    return {
        "segment_sum": lambda: torch_ragged.segment_sum(data, first_idx),
        "segment_softmax": lambda: torch_ragged.segment_log_softmax(data, first_idx),
        "segment_max": lambda: tuple(torch_ragged.segment_max(data, first_idx)),
        "scatter": lambda: torch_ragged.scatter(data, torch.arange(300) % 11, dim=0, reduce="mean"),
        "coalesce": lambda: sparse.coalesce(s).values(),
        "sparse_softmax": lambda: sparse.softmax(s, 0).values(),
        "sparse_mm": lambda: sparse.mm(s, dense),
        "sparse_spgemm": lambda: sparse.mm(s.coalesce(), s.coalesce()).values(),
        "to_dense": lambda: sparse.to_dense(s),
        "list_to_padded": lambda: torch_ragged.list_to_padded(members, -1.0)[0],
        "ragged_mean": lambda: r.mean(),
        "pad_reflect": lambda: torch_ragged.pad(image, 3, mode="reflect"),
        "pad_median": lambda: torch_ragged.pad(image, 2, mode="median"),
        "tiles_to_dense": lambda: tiles.tiles_to_dense(pages, origins, [0, 0], [8, 6]),
        "tiles_correlate": lambda: tiles.tiles_correlate(pages, origins, torch.ones(3, 3) / 9, [0, 0], [8, 6]),
    }


def flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def test_threads_calling_every_family_concurrently_get_the_serial_bits():
    """8 Python threads call every family in turn for ~1.5 s: each result is bitwise the serial one."""
    calls = family_calls()
    serial = {name: flat(fn()) for name, fn in calls.items()}
    names = list(calls)
    stop = threading.Event()
    mismatches, counts = [], [0] * 8

    def worker(w):
        k = w
        while not stop.is_set():
            name = names[k % len(names)]
            got = flat(calls[name]())
            if not all(torch.equal(a, b) for a, b in zip(got, serial[name], strict=True)):
                mismatches.append(name)
            counts[w] += 1
            k += 1

    run_for(1.5, stop, *(functools.partial(worker, w) for w in range(8)))
    assert not mismatches, sorted(set(mismatches))
    assert min(counts) > 0 and sum(counts) >= len(names)


class VariableSizes(torch.utils.data.Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"points": torch.randn(i + 1, 3, generator=g), "label": i, "pair": (torch.tensor(i), f"s{i}")}


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_collate_in_dataloader_workers_gives_the_in_process_batches(context):
    dataset = VariableSizes()
    expected = [torch_ragged.collate([dataset[i] for i in range(b, b + 4)]) for b in range(0, 12, 4)]
    loader = DataLoader(dataset, batch_size=4, num_workers=2 if context == "fork" else 1,
                        multiprocessing_context=context, collate_fn=torch_ragged.collate)
    batches = list(loader)
    assert len(batches) == 3
    for got, want in zip(batches, expected, strict=True):
        assert torch.equal(got["points"].values, want["points"].values)
        assert torch.equal(got["points"].first_idx, want["points"].first_idx)
        assert torch.equal(got["label"], want["label"])
        assert type(got["pair"]) is list and got["pair"][1] == want["pair"][1]


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def error_paths():
    """Calls that raise (bad input named by the op): their exceptions and messages must not leak either."""
    s = torch.sparse_coo_tensor([[0, 7]], [1.0, 2.0], (3,), check_invariants=False)
    return [
        lambda: torch_ragged.segment_sum(torch.ones(4), [0, 5]),
        lambda: sparse.coalesce(s),
        lambda: torch_ragged.list_to_padded([torch.ones(2, 3), torch.ones(2, 4)]),
        lambda: torch_ragged.pad(torch.ones(3), 1, mode="nonsense"),
        lambda: tiles.tiles_to_dense(torch.ones(1, 2, 2), torch.tensor([[1, 1]]), [0, 0], [2, 2]),
    ]


def test_long_loops_of_every_family_do_not_grow_the_process():
    """2,000 rounds of every family's call and every error path after a warm-up: resident memory grows by less
    than 4 MB (a leak of one small tensor or message per call would be ~2 KB x 40k calls = 80 MB)."""
    calls = list(family_calls().values())
    errors = error_paths()

    def round_():
        for fn in calls:
            fn()
        for fn in errors:
            try:
                fn()
            except (ValueError, TypeError, IndexError, RuntimeError):
                pass

    for _ in range(200):  # warm-up: allocator caches, lazy imports, first-call registrations
        round_()
    gc.collect()
    before = rss_bytes()
    for _ in range(2000):
        round_()
    gc.collect()
    grown = rss_bytes() - before
    assert grown < (4 << 20), f"resident memory grew by {grown / 2**20:.1f} MB over 2,000 rounds"


def worker_run_times() -> dict:
    """CPU time (ns) of every thread of this process but the calling one: torch's intra-op pool."""
    me = threading.get_native_id()
    times = {}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != me:
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as stat:
                    times[tid] = int(stat.read().split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
    return times


def pool_time_spent(calls: dict, repeats=20) -> dict:
    """name -> how long the other threads ran while that call ran `repeats` times. A woken OpenMP worker spins for
    ~10 ms before it sleeps again: each measurement starts and ends 0.1 s after any work."""
    time.sleep(0.1)
    spent, before = {}, worker_run_times()
    for name, fn in calls.items():
        for _ in range(repeats):
            fn()
        time.sleep(0.1)
        after = worker_run_times()
        spent[name] = sum(after[t] - before[t] for t in before if t in after)
        before = after
    return spent


@pytest.mark.skipif(torch.get_num_threads() < 2, reason="needs an intra-op pool of 2 or more threads")
def test_tiny_inputs_run_inline_without_waking_the_thread_pool():
    """A few rows must not wake the pool: on a busy machine each wake-up waits for a descheduled worker (15-47 ms
    per call was measured for tiles_correlate, the box filter's backward, dense_to_tiles, tiles_lookup and
    pad(mode="maximum") with 2 threads, against 0.02-0.7 ms with one). The probe: the other threads' CPU time."""
    big = torch.ones(1 << 22, 2)
    control = pool_time_spent({"large": lambda: torch_ragged.segment_sum(big, torch.tensor([0, 1 << 21, 1 << 22]))},
                              repeats=3)
    assert control["large"] > 0  # the probe sees the pool work where it should
    pages = torch.randn(2, 4, 4, requires_grad=True)
    origins = torch.tensor([[0, 0], [4, 0]])
    x = torch.randn(3, 3, requires_grad=True)
    tiny = {
        "tiles_correlate": lambda: tiles.tiles_correlate(pages, origins, torch.ones(3, 3) / 9, [0, 0], [8, 4]),
        "box filter backward": lambda: tiles.tiles_box_filter(pages, origins, [0, 0], [8, 4]).sum().backward(),
        "dense_to_tiles": lambda: tiles.dense_to_tiles(torch.randn(8, 4), origins, [4, 4], [0, 0]),
        "tiles_lookup": lambda: tiles.tiles_lookup(origins, [4, 4], torch.tensor([[1, 1], [5, 2]]), [0, 0], [8, 4]),
        **{f"pad {mode}": (lambda mode=mode: torch_ragged.pad(x, 1, mode=mode).sum().backward())
           for mode in ("maximum", "minimum", "median", "mean", "reflect", "wrap", "linear_ramp")},
        **{name: (lambda fn=fn: fn()) for name, fn in family_calls().items()
           if name not in ("sparse_softmax", "sparse_mm", "to_dense")},  # torch's own softmax(dim) wakes it
    }
    woke = pool_time_spent(tiny)
    assert not {name: ns for name, ns in woke.items() if ns}, woke


# ---- past 2^31 elements (smaller versions of what the reliability pass ran), when the machine has the memory ----

def memory_available() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def needs_memory(gib: float):
    return pytest.mark.skipif(memory_available() < gib * 2**30,
                              reason=f"needs {gib} GiB of available memory")


BIG = (1 << 31) + (1 << 20)  # rows past int32 indexing


@pytest.mark.large
@needs_memory(7)
def test_segment_reductions_past_2_31_rows_are_exact():
    data = torch.ones(BIG, dtype=torch.int8)
    data[BIG - 5] = 7
    first_idx = torch.tensor([0, 3, BIG - 4, BIG])
    assert torch_ragged.segment_mean(data, first_idx).tolist() == [1, 1, 1]  # the 64-bit sum over the count
    values, arg = torch_ragged.segment_max(data, first_idx)
    assert values.tolist() == [1, 7, 1] and arg.tolist() == [0, BIG - 5, BIG - 4]
    assert torch_ragged.segment_sum(data, first_idx).tolist() == [3, (BIG - 7 + 6) % 256 - 256 * (
        (BIG - 7 + 6) % 256 > 127), 4]  # int8 sums wrap, as the dtype's
    del data
    halves = torch.ones(BIG, dtype=torch.float16)
    total = torch_ragged.segment_sum(halves, torch.tensor([0, BIG]))  # accumulated in float, rounded once
    assert total.item() == float(torch.tensor(float(BIG), dtype=torch.float16))


@pytest.mark.large
@needs_memory(6)
def test_coalesce_of_30_million_entries():
    n, unique = 30_000_000, 1_000_003
    keys = torch.randperm(n) % unique
    indices = torch.stack([keys // 1000, keys % 1000])
    s = torch.sparse_coo_tensor(indices, torch.ones(n), (unique // 1000 + 1, 1000))
    del keys
    c = sparse.coalesce(s)
    counts = torch.full((unique,), n // unique, dtype=torch.float32)
    counts[: n % unique] += 1
    assert c.values().shape == (unique,) and torch.equal(c.values(), counts)
    flat = c.indices()[0] * 1000 + c.indices()[1]
    assert torch.equal(flat, torch.arange(unique))


@pytest.mark.large
@needs_memory(9)
def test_pad_and_list_to_padded_past_2_31_elements():
    x = torch.arange(1 << 16, dtype=torch.int8).view(-1, 1).expand(1 << 16, 1 << 15).contiguous()  # 2^31 elements
    out = torch_ragged.pad(x, 1, mode="edge")
    assert out.shape == ((1 << 16) + 2, (1 << 15) + 2) and out.numel() > 1 << 31
    assert torch.equal(out[1:-1, 1:-1], x)
    assert torch.equal(out[-1], out[-2]) and torch.equal(out[:, -1], out[:, -2]) and torch.equal(out[0], out[1])
    del out, x
    members = [torch.full(((1 << 30) + 5, 1), 3, dtype=torch.int8), torch.full((7, 1), 4, dtype=torch.int8)]
    padded, shapes = torch_ragged.list_to_padded(members, -1)
    assert padded.shape == (2, (1 << 30) + 5, 1) and padded.numel() > 1 << 31
    assert shapes.tolist() == [[(1 << 30) + 5], [7]]
    assert padded[0, -1, 0] == 3 and padded[1, 6, 0] == 4 and padded[1, 7, 0] == -1 and padded[1, -1, 0] == -1
    assert int((padded[1] == -1).sum()) == (1 << 30) + 5 - 7
