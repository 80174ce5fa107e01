"""A GPU cost model for the library's CUDA kernels, checked against the one real GPU run (2026-12-04).

    python benchmarks/gpu_model.py [--json FILE] [--library PATH]

Most sessions that change a CUDA kernel have no GPU, so a design is judged by this model first. For each GPU
benchmark case it lists every kernel launch of the op, old (the kernels that ran on an H200 on 2026-12-04) beside
current, and predicts the op's time and its share of the copy bandwidth on an H100 and an H200.

The model, per launch (a roofline with a latency roof):
- occupancy: resident threads per SM from the kernel's registers and shared memory (read from the build's
  cubins: `kernel_resources`, the figures `ptxas -v` prints) against the SM's limits;
- latency: each thread's critical path in memory round trips — DRAM round trips (loads the thread keeps in flight
  count once per round), L2 and L1 hits on dependent loads (binary searches, table reads) — times the waves of
  threads the GPU holds at once;
- bandwidth: DRAM bytes moved (sectors fetched, not bytes used) over the copy bandwidth;
- issue: warp instructions over the SMs' issue rate (4 schedulers x clock);
- a launch's fixed cost; host steps (synchronising reads, staging uploads, eager ATen calls) at fixed costs.
A launch takes the largest of latency, bandwidth and issue, plus its fixed cost; an op the sum of its launches and
host steps. The constants are public microbenchmark figures for Hopper (latencies, issue rate), the copy bandwidth
measured on 2026-12-04, and one fitted constant (`LOADED_DRAM_US`, the DRAM latency under load), fitted to the
2026-12-04 rows and then fixed.

Each launch's per-thread figures (round trips, dependent loads, instructions) are worked out from the kernel's body
(csrc/*/ *_index.h, cuda/*.cu) and written next to it; the 2026-12-04 kernels are described from their source at
16a1db9^ (the commit before the first rewrite). They are estimates by reading, not traces: the model says where
a kernel's time goes and how far a design is from the copy floor, within the factor its calibration shows (the
check column), no closer. A GPU run is the measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import struct
import sys
from dataclasses import dataclass, field

# ---- Hardware ----


@dataclass(frozen=True)
class Gpu:
    name: str
    sms: int
    copy_gbps: float  # a plain device copy, bytes read + written per second
    copy_source: str
    clock_ghz: float = 1.98
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    shared_per_sm: int = 228 * 1024
    reserved_shared_per_block: int = 1024  # the runtime's per-block reservation on sm_90


GPUS = (
    # H200: the copy bandwidth Tensor.copy_ reached on the large cases of the 2026-12-04 run (3.5-4.0 TB/s).
    Gpu("H200", sms=132, copy_gbps=3800.0, copy_source="measured 2026-12-04"),
    # H100 SXM: HBM3 at 3.35 TB/s peak; ~88% of peak as copy, as the H200 reached of its 4.8 TB/s (estimate).
    Gpu("H100", sms=132, copy_gbps=2950.0, copy_source="estimate: 88% of 3.35 TB/s peak"),
)

# Latencies of one dependent load (us). L1 and L2 from public Hopper microbenchmarks (~35 and ~260 cycles plus the
# instructions around the load). DRAM under load: the one fitted constant (unloaded it is ~0.5-0.6 us; queues under
# load add to it). Against the 2026-12-04 rows, values from 1.3 to 1.6 keep every row within 1.5x (1.2: sum fwd +
# bwd at 1.50x; 1.0: 1.61x); at 1.3 the model's % of copy is 1.13x the measured one on geometric average -- it is
# optimistic: read a prediction as roughly an upper bound.
L1_US = 0.03
L2_US = 0.27
LOADED_DRAM_US = 1.3
LAUNCH_US = 2.5  # back-to-back kernel launches on one stream
SYNC_US = 15.0  # a synchronising device-to-host read (stream drained, copy, host wake-up)
UPLOAD_US = 8.0  # a pinned host-to-device staging copy of a small table
ATEN_CALL_US = 5.0  # one eager ATen call on GPU tensors (dispatch, allocation, launch) from C++
PYTHON_CALL_US = 10.0  # one Python-level call of a torch function (argument parsing, dispatch, launch)
BENCH_SYNC_US = 5.0  # torch.cuda.synchronize() after each timed call, the GPU idle or just finishing

# ---- Kernel resources from the build ----


@dataclass(frozen=True)
class Resources:
    registers: int
    stack_bytes: int  # per thread (ptxas "bytes stack frame")
    shared_bytes: int  # static shared memory per block
    sass_instructions: int  # static count (16 bytes each on sm_90)


def _elf_sections(blob: bytes, base: int) -> list[dict]:
    shoff = struct.unpack_from("<Q", blob, base + 0x28)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", blob, base + 0x3A)
    sections = []
    for i in range(count):
        name, kind, _, _, offset, size, link, _, _, _ = struct.unpack_from(
            "<IIQQQQIIQQ", blob, base + shoff + i * entry_size
        )
        sections.append({"name": name, "type": kind, "offset": base + offset, "size": size, "link": link})
    names = sections[names_index]
    for s in sections:
        start = names["offset"] + s["name"]
        s["name"] = blob[start : blob.index(b"\0", start)].decode()
    return sections


def _symbol_names(blob: bytes, sections: list[dict]) -> list[str]:
    table = next(s for s in sections if s["type"] == 2)  # SHT_SYMTAB
    strings = sections[table["link"]]
    names = []
    for i in range(table["size"] // 24):
        name = struct.unpack_from("<I", blob, table["offset"] + i * 24)[0]
        start = strings["offset"] + name
        names.append(blob[start : blob.index(b"\0", start)].decode())
    return names


# .nv.info attributes (format 0x04: a sized value of [symbol index, value]): REGCOUNT and FRAME_SIZE.
_REGCOUNT, _FRAME_SIZE = 0x2F, 0x11


def cubin_resources(blob: bytes, base: int = 0) -> dict[str, Resources]:
    """Registers, stack frame, static shared memory and SASS size of every kernel of one cubin (ELF) image."""
    sections = _elf_sections(blob, base)
    symbols = _symbol_names(blob, sections)
    attrs: dict[str, dict[int, int]] = {}
    for s in sections:
        if s["name"] != ".nv.info":
            continue
        data, i = blob[s["offset"] : s["offset"] + s["size"]], 0
        while i + 4 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt != 0x04:
                i += 4
                continue
            size = struct.unpack_from("<H", data, i + 2)[0]
            if attr in (_REGCOUNT, _FRAME_SIZE) and size == 8:
                symbol, value = struct.unpack_from("<II", data, i + 4)
                attrs.setdefault(symbols[symbol], {})[attr] = value
            i += 4 + size
    sizes = {s["name"]: s["size"] for s in sections}
    return {
        name: Resources(
            registers=a.get(_REGCOUNT, 0),
            stack_bytes=a.get(_FRAME_SIZE, 0),
            shared_bytes=sizes.get(".nv.shared." + name, 0),
            sass_instructions=sizes.get(".text." + name, 0) // 16,
        )
        for name, a in attrs.items()
        if ".text." + name in sizes
    }


def kernel_resources(library: str) -> dict[str, Resources]:
    """Every kernel of every sm_90 cubin embedded in the built library (the fatbin is stored uncompressed)."""
    with open(library, "rb") as f:
        blob = f.read()
    found: dict[str, Resources] = {}
    for match in re.finditer(rb"\x7fELF\x02\x01\x01\x41", blob):  # 64-bit little-endian, OS ABI "CUDA"
        found.update(cubin_resources(blob, match.start()))
    return found


def default_library() -> str:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "torch_ragged")
    for name in sorted(os.listdir(here)):
        if name.startswith("_C.") and name.endswith(".so"):
            return os.path.join(here, name)
    raise SystemExit("gpu_model: no built torch_ragged/_C*.so (run scripts/build.sh)")


def lookup(resources: dict[str, Resources], *parts: str) -> Resources | None:
    """The heaviest instantiation (most registers) of the kernels whose mangled name holds every part."""
    hits = [r for name, r in resources.items() if all(p in name for p in parts)]
    return max(hits, key=lambda r: (r.registers, r.stack_bytes)) if hits else None


# ---- The model ----


@dataclass
class Launch:
    kernel: str
    threads: float
    dram_rounds: float = 1.0  # DRAM round trips on an average thread's critical path
    l2_steps: float = 0.0  # dependent loads that hit L2, per thread
    l1_steps: float = 0.0  # dependent loads that hit L1, per thread
    bytes: float = 0.0  # DRAM bytes moved (sectors fetched)
    instructions: float = 30.0  # SASS instructions per thread (dynamic, estimated from the body)
    block: int = 256
    match: tuple[str, ...] = ()  # mangled-name parts of the current kernel in the build
    built: Resources | None = None  # a 2026-12-04 kernel's figures (RUN_2026_12_04)
    note: str = ""


@dataclass
class OpModel:
    case: str
    op: str
    version: str  # "2026-12-04" or "current"
    useful_bytes: float  # what the benchmark counts: bytes read + written
    launches: list[Launch]
    host: list[tuple[str, float, bool]] = field(default_factory=list)  # (what, us, synchronises)
    measured_pct: float | None = None  # the 2026-12-04 run's % of copy


def occupancy(gpu: Gpu, registers: int, block: int, shared: int) -> int:
    """Resident threads per SM."""
    warps_per_block = math.ceil(block / 32)
    registers_per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    by_registers = gpu.registers_per_sm // (registers_per_warp * warps_per_block)
    by_shared = gpu.shared_per_sm // (shared + gpu.reserved_shared_per_block)
    by_threads = gpu.threads_per_sm // block
    return max(1, min(by_registers, by_shared, by_threads, gpu.blocks_per_sm)) * block


def launch_time_us(launch: Launch, gpu: Gpu, res: Resources | None) -> dict:
    if launch.built is not None:  # a 2026-12-04 kernel: its figures from that build
        res = launch.built
    registers = res.registers if res else 32
    shared = res.shared_bytes if res else 0
    resident = occupancy(gpu, registers, launch.block, shared) * gpu.sms
    # Blocks start as others finish: with equal work per thread the last wave is a whole wave's time.
    waves = math.ceil(math.ceil(launch.threads / launch.block) * launch.block / resident)
    thread_us = launch.dram_rounds * LOADED_DRAM_US + launch.l2_steps * L2_US + launch.l1_steps * L1_US
    latency = waves * thread_us
    bandwidth = launch.bytes / (gpu.copy_gbps * 1e3)
    issue = launch.threads * launch.instructions / 32 / (gpu.sms * 4 * gpu.clock_ghz * 1e3)
    bound = max(("latency", latency), ("bandwidth", bandwidth), ("issue", issue), key=lambda t: t[1])
    return {
        "kernel": launch.kernel,
        "threads": int(launch.threads),
        "registers": registers,
        "stack": res.stack_bytes if res else None,
        "resident_per_sm": resident // gpu.sms,
        "us": LAUNCH_US + bound[1],
        "bound": bound[0],
        "note": launch.note,
    }


def predict(model: OpModel, gpu: Gpu, resources: dict[str, Resources]) -> dict:
    rows = [launch_time_us(k, gpu, lookup(resources, *k.match) if k.match else None) for k in model.launches]
    return {"us": op_time_us(model, rows), "pct_of_copy": 100 * copy_time_us(model.useful_bytes / 2, gpu) /
            op_time_us(model, rows), "launches": rows}


def op_time_us(model: OpModel, launches: list[dict]) -> float:
    """As the benchmarks time it (each call followed by torch.cuda.synchronize): the host's work overlaps the GPU's
    unless a host step waits for the GPU (then they add up), plus the benchmark's own synchronisation."""
    gpu_us = sum(k["us"] for k in launches)
    host_us = sum(us for _, us, _ in model.host)
    waits = any(sync for _, _, sync in model.host)
    return (host_us + gpu_us if waits else max(host_us, gpu_us)) + BENCH_SYNC_US


def copy_time_us(nbytes: float, gpu: Gpu) -> float:
    """The benchmarks' copy baseline for the same bytes (Tensor.clone / copy_ from Python, then a synchronize)."""
    return max(PYTHON_CALL_US, LAUNCH_US + 2 * nbytes / (gpu.copy_gbps * 1e3)) + BENCH_SYNC_US


# ---- The 2026-12-04 kernels ----

# Their resources, read by `cubin_resources` from `nvcc -cubin -arch=sm_90 -O3` of the sources at 31cfc40 (the
# commit that recorded the run), float32 instantiations: (registers, stack bytes per thread).
RUN_2026_12_04 = {
    "check_first_idx_kernel": Resources(26, 0, 0, 120),
    "reduce_chunks_kernel/sum": Resources(46, 0, 0, 0),
    "reduce_chunks_kernel/max+shift": Resources(44, 0, 0, 0),
    "reduce_chunks_kernel/exp-sum": Resources(38, 0, 0, 0),
    "merge_nodes_kernel/sum": Resources(32, 0, 0, 520),
    "merge_nodes_kernel/max": Resources(38, 0, 0, 616),
    "write_empty_segments_kernel": Resources(26, 0, 0, 568),
    "map_chunks_kernel/softmax": Resources(29, 0, 0, 520),
    "copy_selected_rows_kernel": Resources(30, 0, 0, 752),
    "expand_rows_kernel": Resources(28, 0, 0, 624),
    "pad_gather_kernel": Resources(36, 0, 0, 408),  # 32-bit indices (every index fits)
    "pad_fold_kernel": Resources(48, 1872, 0, 1760),  # 25 axes of per-thread state in local memory
}

# ---- The cases of the GPU benchmarks (benchmarks/bench_segment.py, bench_pad.py, bench_container.py) ----

F32 = 4
CHUNK_LOADS = 8  # segment_index.h kChunkLoads: rows a level-0 thread loads before using them
MERGE_LOADS = 4  # segment_index.h kMergeLoads: children a merge thread reads before merging them


def chunk_rows(width: int) -> int:
    """segment_index.h chunk_bits: 32 rows up to 15 columns, doubling with the width, at most 1024."""
    bits, w = 5, width // 8
    while w > 1 and bits < 10:
        bits, w = bits + 1, w // 2
    return 1 << bits


@dataclass(frozen=True)
class SegmentCase:
    name: str
    segments: int
    rows: int
    width: int
    max_len: int  # segment lengths U[1, max_len]

    @property
    def mean_len(self) -> float:
        return self.rows / self.segments


# The 2026-12-04 shapes: 100k segments of U[1, 32] rows x 64 columns; 8 segments of U[1, 2M] rows x 16 columns
# (6.07M rows in that run's draw: its bytes / 64).
MANY_SMALL = SegmentCase("many small (B=100k, len U[1,32], F=64)", 100_000, 1_650_000, 64, 32)
FEW_HUGE = SegmentCase("few huge (B=8, len U[1,2M], F=16)", 8, 6_070_000, 16, 2_000_000)


def serial_rounds(length: int, in_flight: int) -> int:
    """DRAM round trips of folding `length` rows in order with `in_flight` loads issued before their additions and
    the remainder one at a time (SumReducer::fold; the 2026-12-04 fold was the compiler's 4-way unroll of the same
    shape, seen in its SASS: four LDG before four FADD, the remainder one LDG per FADD)."""
    return length // in_flight + length % in_flight


def chunk_fold(case: SegmentCase, in_flight: int) -> tuple[float, float]:
    """(DRAM round trips, pieces) of one chunk's thread: every segment piece in the chunk folded in turn."""
    chunk = chunk_rows(case.width)
    if case.max_len >= chunk:  # pieces of long segments: the chunk's rows, in one or two pieces
        return serial_rounds(chunk, in_flight), 1.0
    per_segment = sum(serial_rounds(n, in_flight) for n in range(1, case.max_len + 1)) / case.max_len
    pieces = chunk / case.mean_len + 1  # the segments inside, and one split by the chunk's edge
    return pieces * per_segment, pieces


def tree_levels(case: SegmentCase) -> list[int]:
    nodes, levels = math.ceil(case.rows / chunk_rows(case.width)), []
    while nodes > 1:
        nodes = math.ceil(nodes / 32)
        levels.append(nodes)
    return levels


def crossing_piece_rows(case: SegmentCase) -> float:
    """Rows of a chunk's head or tail piece: half the length of a segment crossing the edge (a crossing segment is
    picked by length: E[L^2] / E[L] for L ~ U[1, max_len]), at most the chunk."""
    chunk = chunk_rows(case.width)
    if case.max_len >= chunk:
        return chunk
    lengths = range(1, case.max_len + 1)
    return min(chunk, sum(n * n for n in lengths) / sum(lengths) / 2)


def reduction_tree(case: SegmentCase, version: str, *, rule: str, partial_bytes: int, load_extra: float = 0.0,
                   match: tuple[str, ...], merge_match: tuple[str, ...], pieces_only: bool = False) -> list[Launch]:
    """The launches of one fixed-order tree: reduce_chunk per (chunk, column), merge_node per (node, column) and
    level, write_if_empty per (segment, column); `load_extra` dependent statistic loads per piece (softmax's shift)
    and the instructions of computing a term (exp). pieces_only: level 0 folds only each chunk's head and tail pieces
    (reduce_chunk_pieces: softmax's trees)."""
    old = version == "2026-12-04"
    chunk = chunk_rows(case.width)
    chunks = math.ceil(case.rows / chunk)
    rounds, pieces = chunk_fold(case, 4)
    data = case.rows * case.width * F32
    folded_rows = chunk
    if pieces_only:  # the head and tail pieces, each folded CHUNK_LOADS rows at a time
        piece = crossing_piece_rows(case)
        rounds = (1 if piece >= chunk else 2) * math.ceil(piece / CHUNK_LOADS)
        folded_rows = min(chunk, (1 if piece >= chunk else 2) * piece)
        data = min(data, chunks * folded_rows * case.width * F32)
    elif not old:  # kChunkLoads rows loaded at a time, across segment ends
        rounds = math.ceil(chunk / CHUNK_LOADS)
    crossing = min(1.0, chunk / case.mean_len)  # head and tail partials: both where segments are short
    search = math.ceil(math.log2(max(case.segments, 2)))
    launches = []
    launches.append(Launch(
        "reduce_chunks_kernel", chunks * case.width, dram_rounds=rounds,
        # old: a search for the chunk's first segment and, per piece, its statistics (softmax's shift) behind its
        # segment; now the chunk table's entry, and the statistics loaded with the rows.
        l2_steps=search + pieces * load_extra if old else 1,
        l1_steps=2 * pieces,  # first_idx where a segment ends (the warp's 32 column threads share the lines)
        bytes=data + 2 * chunks * case.width * partial_bytes + case.segments * case.width * F32,
        instructions=(12 + 30 * load_extra) * folded_rows + 40 * pieces + (12 * search if old else 0),
        built=RUN_2026_12_04[f"reduce_chunks_kernel/{rule}"] if old else None, match=match,
        note=f"a thread per ({chunk}-row chunk, column); 4-byte loads, "
             + ("4 in flight, a segment at a time" if old else f"{CHUNK_LOADS} in flight, "
                + ("the head and tail pieces only" if pieces_only else "across segment ends"))))
    children = chunks
    for level, nodes in enumerate(tree_levels(case), 1):
        kids = min(32, children)
        # old: per child, two searches for its head and tail segments (L1 hits: the 32 column threads of a warp
        # walk the same addresses), then its head / tail partials (L2: written by the launch before), child after
        # child; now MERGE_LOADS children at a time: their crossing entries, then their partials, then the merges.
        launches.append(Launch(
            "merge_nodes_kernel", nodes * case.width, dram_rounds=0,
            l2_steps=kids * (1 + crossing) if old else 2 * math.ceil(kids / MERGE_LOADS),
            l1_steps=kids * (2 * search + 4) if old else 0, bytes=2 * children * case.width * partial_bytes,
            instructions=kids * (40 + (24 * search if old else 0)),
            built=RUN_2026_12_04["merge_nodes_kernel/" + ("max" if rule == "max+shift" else "sum")] if old else None,
            match=merge_match, note=f"level {level}: {nodes} nodes x {case.width} columns, {kids} children each"))
        children = nodes
    if pieces_only:  # their statistics serve the rows' map; an empty segment has none
        return launches
    launches.append(Launch("write_empty_segments_kernel", case.segments * case.width, dram_rounds=0, l2_steps=1,
                           bytes=case.segments * 16, instructions=20,
                           built=RUN_2026_12_04["write_empty_segments_kernel"] if old else None,
                           match=("write_empty_segments_kernelINS_10SumReducerIfEENS_8WriteSumIfLb0",),
                           note="an identity per empty segment and column"))
    return launches


def tree_tables(case: SegmentCase) -> Launch:
    """with_tree_tables: one launch for every chunk's first segment and every node's crossing segments (two
    searches per thread: the node's first and last rows' segments), shared by all of an op's trees."""
    entries = sum([math.ceil(case.rows / chunk_rows(case.width)), *tree_levels(case)[:-1]])
    search = math.ceil(math.log2(max(case.segments, 2)))
    return Launch("tree_tables_kernel", entries, dram_rounds=0, l2_steps=2 * search, bytes=entries * 24,
                  instructions=40 + 36 * search, match=("tree_tables_kernel",),
                  note="a thread per chunk or node: its searches, once for every pass and column")


def check_first_idx(segments: int, version: str) -> Launch:
    return Launch("check_first_idx_kernel", segments + 1, dram_rounds=1, bytes=segments * 8, instructions=25,
                  note="a thread per first_idx entry: the device-side check of the offsets",
                  built=RUN_2026_12_04["check_first_idx_kernel"] if version == "2026-12-04" else None,
                  match=("check_first_idx_kernel",))


OP_CALL = [("op call from Python", PYTHON_CALL_US, False)]


def segment_sum(case: SegmentCase, version: str, measured: float | None) -> OpModel:
    launches = [check_first_idx(case.segments, version), *([] if version == "2026-12-04" else [tree_tables(case)]),
                *reduction_tree(case, version, rule="sum", partial_bytes=F32,
                                match=("reduce_chunks_kernelINS_10SumReducerIfEELb0ENS_8LoadRowsIffEENS_8WriteSumIfLb0",),
                                merge_match=("merge_nodes_kernelINS_10SumReducerIfEENS_8WriteSumIfLb0",))]
    useful = (case.rows + case.segments) * case.width * F32
    return OpModel(case.name, "sum", version, useful, launches, OP_CALL, measured)


def sum_forward_backward(case: SegmentCase, version: str, measured: float | None) -> OpModel:
    """segment_sum, then its backward through autograd: the gradient of each segment copied to its rows
    (segment_expand). The autograd engine's host work overlaps the GPU (no synchronisation)."""
    forward = segment_sum(case, version, None)
    search = math.ceil(math.log2(max(case.segments, 2)))
    elements = case.rows * case.width
    moved = (case.rows + case.segments) * case.width * F32
    if version == "2026-12-04":
        # expand_rows_kernel: a thread per output element: its row (a 64-bit division), the row's segment (a
        # binary search: the upper steps hit L1, the last ~7 of first_idx's 800 KB go to L2), one load, one store.
        expand = Launch("expand_rows_kernel", elements, dram_rounds=1, l1_steps=search - 7, l2_steps=7,
                        bytes=moved, instructions=DIV64 + 10 * search + 30, built=RUN_2026_12_04["expand_rows_kernel"],
                        note="a thread per element, a search each")
    else:
        # move_segment_rows (SegmentRow): a block per tile of 256 rows: one search per tile (every thread walks
        # the same 17 addresses), heads marked in shared memory and a block scan, then lanes over the row's
        # 16-byte chunks (16 per 64-float row), 4 in flight per thread.
        chunks_per_thread = 256 * case.width * F32 / 16 / 256
        expand = Launch("move_segment_rows_kernel", case.rows, dram_rounds=math.ceil(chunks_per_thread / 4),
                        l2_steps=search, l1_steps=10, bytes=moved, instructions=60 + 12 * chunks_per_thread,
                        match=("move_segment_rows_kernel", "SegmentRow", "Bytes16"),
                        note="a tile of 256 rows per block, 16 lanes per row of 16-byte chunks")
    return OpModel(case.name, "sum fwd+bwd", version, 2 * moved, [*forward.launches, expand],
                   [("forward and autograd.grad from Python", 2 * PYTHON_CALL_US + 3 * ATEN_CALL_US, False)],
                   measured)


def segment_softmax(case: SegmentCase, version: str, measured: float | None) -> OpModel:
    old = version == "2026-12-04"
    chunk = chunk_rows(case.width)
    chunks = math.ceil(case.rows / chunk)
    _, pieces = chunk_fold(case, 4)
    launches = [check_first_idx(case.segments, version), *([] if old else [tree_tables(case)])]
    # Now the trees fold only the chunks' head and tail pieces (the segments inside a chunk are the fused
    # kernel's).
    launches += reduction_tree(  # max (with its row), written as each segment's shift; partials of 16 bytes
        case, version, rule="max+shift", partial_bytes=16, pieces_only=not old,
        match=("reduce_chunks_kernelINS_15ExtremumReducerIfLb1EEELb1ENS_8LoadRowsIffEENS_10WriteShift",),
        merge_match=("merge_nodes_kernelINS_15ExtremumReducerIfLb1EEENS_10WriteShift",))
    launches += reduction_tree(  # sums of exp(x - shift), written as 1 / sum
        case, version, rule="exp-sum", partial_bytes=F32, load_extra=1.0, pieces_only=not old,
        match=("Lb1ENS_14LoadShiftedExpIfEENS_19WriteSoftmaxDivisorIfLb0",),
        merge_match=("merge_nodes_kernelINS_10SumReducerIfEENS_19WriteSoftmaxDivisorIfLb0",))
    data = case.rows * case.width * F32
    if old:
        # map_chunks: per row, `while (first_idx[b + 1] <= row)` (an L1 hit) settles the segment before the row's
        # load is issued, and the row's store waits for its load: a DRAM round trip per row.
        launches.append(Launch("map_chunks_kernel", chunks * case.width, dram_rounds=chunk, l1_steps=chunk,
                               l2_steps=2 * pieces, bytes=2 * data, instructions=60 * chunk,
                               built=RUN_2026_12_04["map_chunks_kernel/softmax"],
                               note="a thread per (chunk, column), one row's load in flight"))
    else:
        # softmax_chunks: per (chunk, column), a segment inside the chunk in three passes over its rows -- max
        # (from memory, CHUNK_LOADS rows at a time), sum of exp, outputs (both from L1: a warp's 32 columns of a
        # segment are ~2 KB) -- and the crossing pieces mapped with the trees' shift and divisor (L2).
        inside = max(0.0, pieces - 2) if case.max_len < chunk else 0.0
        per_segment = sum(math.ceil(n / CHUNK_LOADS) for n in range(1, case.max_len + 1)) / case.max_len \
            if case.max_len < chunk else 0.0
        piece = crossing_piece_rows(case)
        crossing_pieces = 1 if piece >= chunk else 2
        launches.append(Launch(
            "softmax_chunks_kernel", chunks * case.width,
            dram_rounds=inside * per_segment + crossing_pieces * math.ceil(piece / CHUNK_LOADS),
            l1_steps=2 * inside * per_segment + pieces, l2_steps=crossing_pieces, bytes=2 * data,
            instructions=90 * chunk, match=("softmax_chunks_kernelINS_13SoftmaxOutputIfLb0E",),
            note="a thread per (chunk, column): inside segments in three passes, crossing pieces mapped"))
    return OpModel(case.name, "softmax", version, 2 * data, launches, OP_CALL, measured)


# ---- pad: float32 NCHW 32x64x128x128, 3 on each side of the last two axes ----

PAD_CASE = "float32 NCHW 32x64x128x128, pads 3"
PAD_IN_ROWS, PAD_IN_LEN = 32 * 64 * 128, 128
PAD_OUT_ROWS, PAD_OUT_LEN = 32 * 64 * 134, 134
PAD_BYTES = (PAD_IN_ROWS * PAD_IN_LEN + PAD_OUT_ROWS * PAD_OUT_LEN) * F32
DIV64 = 70  # instructions of one call of the 64-bit division / remainder subroutine (__cuda_sm20_rem_s64)
DIV32 = 20  # a 32-bit division by a runtime value, inline


def pad_forward(mode: str, version: str, measured: float | None) -> OpModel:
    periodic = mode in ("reflect", "circular")
    if version == "2026-12-04":
        # pad_gather_kernel: a thread per output element decodes its 3 merged axes (32-bit divisions), maps each
        # padded axis through the mode (reflect / circular: floor_mod in 64 bits, a subroutine call per padded
        # axis) and loads one element: one round trip; issue-bound.
        instructions = 3 * 2 * DIV32 + (2 * DIV64 if periodic else 0) + 150
        launch = Launch("pad_gather_kernel", PAD_OUT_ROWS * PAD_OUT_LEN, dram_rounds=1, bytes=PAD_BYTES,
                        instructions=instructions, built=RUN_2026_12_04["pad_gather_kernel"],
                        note="a thread per output element, every axis decoded per element")
    else:
        # pad_gather_rows: 32 lanes per output row (134 elements): the row's outer axes decoded once (32-bit), 4
        # elements per lane per step (2 steps), the closed form only where a column is padding.
        launch = Launch("pad_gather_rows_kernel", PAD_OUT_ROWS * 32, dram_rounds=2, bytes=PAD_BYTES,
                        instructions=2 * 2 * DIV32 + (DIV64 if periodic else 0) + 8 * 20,
                        match=("pad_gather_rows_kernelIjjE",), note="32 lanes per output row, 4 elements per lane")
    return OpModel(PAD_CASE, f"forward {mode}", version, PAD_BYTES, [launch], OP_CALL, measured)


def pad_backward(mode: str, version: str, measured: float | None) -> OpModel:
    if version == "2026-12-04":
        # pad_fold_kernel: a thread per input element gathers its preimage: 21 calls of 64-bit div / rem, the
        # 25-axis preimage state in local memory (1872-byte frame; its live part stays in L1), the preimage
        # rebuilt for every outer position.
        launch = Launch("pad_fold_kernel", PAD_IN_ROWS * PAD_IN_LEN, dram_rounds=2, l1_steps=60, bytes=PAD_BYTES,
                        instructions=21 * DIV64 + 400, built=RUN_2026_12_04["pad_fold_kernel"],
                        note="a thread per input element, preimages per element")
    else:
        # pad_fold_rows: 32 lanes per input row (128 elements), outer axes decoded once, 4 elements per lane per
        # step (one step). Per outer preimage position (1, or more on the rows the padding mirrors / repeats): the
        # 4 own terms loaded together (one round trip), then each element's padding terms walked one load at a
        # time (AscendingPreimage, ~60 instructions per element and position). Every warp holds border columns:
        # reflect, columns 1-3 and 124-126 one padding term each (2 rounds: lanes k = 0 and k = 3 in turn);
        # replicate, columns 0 and 127 three each (6 rounds).
        outer = 1 + 6 / 128
        padding_rounds = {"reflect": 2, "replicate": 6, "circular": 2, "symmetric": 2}.get(mode, 0)
        launch = Launch("pad_fold_rows_kernel", PAD_IN_ROWS * 32, dram_rounds=outer * (1 + padding_rounds),
                        l1_steps=20, bytes=PAD_BYTES, instructions=2 * DIV64 + 4 * outer * 60 + 100,
                        match=("pad_fold_rows_kernelIfLi4E",),
                        note="32 lanes per input row, own terms of 4 elements in flight, padding terms in turn")
    return OpModel(PAD_CASE, f"backward {mode}", version, PAD_BYTES, [launch], OP_CALL, measured)


# ---- container: r[index], 5000 of 20000 members of U[1, 16] rows x 16 float columns ----

SELECT_CASE = "select 5000 of 20000 members x <=16 x 16"
SELECT_ROWS = 5000 * 8.5


def ragged_index(version: str, measured: float | None) -> OpModel:
    useful = 2 * SELECT_ROWS * 16 * F32
    if version == "2026-12-04":
        # first_idx and values on the GPU, index on the CPU: first_idx checked on the device, ~8 eager ATen calls
        # for the selection's offsets, one synchronising read of [bad, rows], then copy_selected_rows_kernel (a
        # thread per element, a 13-step search of the 5000 offsets each); the Python method then moves the
        # index to the CPU and selects the shapes.
        launches = [
            check_first_idx(20_000, version),
            Launch("copy_selected_rows_kernel", SELECT_ROWS * 16, dram_rounds=1, l1_steps=13, bytes=useful,
                   instructions=13 * 12 + 40, built=RUN_2026_12_04["copy_selected_rows_kernel"],
                   note="a thread per element, a search each"),
        ]
        host = [("RaggedTensor.__getitem__, index_select (Python)", 2 * PYTHON_CALL_US, False),
                ("index upload, range check, where, clamp, 2 index_select, sub, cumsum, cat",
                 UPLOAD_US + 9 * ATEN_CALL_US, False),
                ("read [bad, rows] (waits for the GPU)", SYNC_US, True),
                ("output allocation, launch", 2 * ATEN_CALL_US, False),
                ("index to the CPU, where, shapes' index_select", 3 * ATEN_CALL_US, False)]
    else:
        # ragged_index_select from CPU tables (the container keeps first_idx on the CPU): the selection computed on
        # the host, one staging upload, the cooperative row mover (a tile of 256 rows, one search per tile,
        # 16-byte chunks, 4 rows in flight).
        launches = [Launch("move_segment_rows_kernel", SELECT_ROWS * 4, dram_rounds=2, l2_steps=13, bytes=useful,
                           instructions=80, match=("move_segment_rows_kernel", "SelectedRow", "Bytes16"),
                           note="a tile of 256 rows per block, 4 lanes per row of 16-byte chunks")]
        host = [("RaggedTensor.__getitem__ (Python)", PYTHON_CALL_US, False),
                ("selection tables on the host", ATEN_CALL_US, False), ("one staging upload", UPLOAD_US, False),
                ("output allocation, launch", 2 * ATEN_CALL_US, False)]
    return OpModel(SELECT_CASE, "r[index]", version, useful, launches, host, measured)


def models() -> list[OpModel]:
    """Every (case, op) in both versions; the 2026-12-04 ones carry that run's % of copy."""
    out = []
    pairs = [
        (lambda v, m: segment_sum(MANY_SMALL, v, m), 22.0),
        (lambda v, m: segment_sum(FEW_HUGE, v, m), 40.0),
        (lambda v, m: sum_forward_backward(MANY_SMALL, v, m), 9.0),
        (lambda v, m: segment_softmax(MANY_SMALL, v, m), 12.0),
        (lambda v, m: pad_forward("reflect", v, m), 18.0),
        (lambda v, m: pad_forward("replicate", v, m), 23.0),
        (lambda v, m: pad_forward("circular", v, m), 17.0),
        (lambda v, m: pad_backward("reflect", v, m), 3.0),
        (lambda v, m: pad_backward("replicate", v, m), 4.0),
        (lambda v, m: ragged_index(v, m), 12.0),
    ]
    for build, measured in pairs:
        out.append(build("2026-12-04", measured))
        out.append(build("current", None))
    return out


def table(resources: dict[str, Resources]) -> list[dict]:
    rows = []
    for model in models():
        row = {"case": model.case, "op": model.op, "version": model.version, "measured_pct": model.measured_pct,
               "kernels": [k.kernel for k in model.launches]}
        for gpu in GPUS:
            p = predict(model, gpu, resources)
            row[gpu.name] = {"us": round(p["us"], 1), "pct_of_copy": round(p["pct_of_copy"], 1),
                             "launches": p["launches"]}
        row["predicted_pct_of_copy"] = row["H200"]["pct_of_copy"]
        rows.append(row)
    return rows


def calibration_ratio(row: dict) -> float | None:
    """Predicted over measured % of copy for a 2026-12-04 row (the check: within 1.5x either way)."""
    if row["measured_pct"] is None:
        return None
    return row["H200"]["pct_of_copy"] / row["measured_pct"]


def print_table(rows: list[dict]) -> None:
    """Old beside new, one line per (case, op): % of copy measured on 2026-12-04, predicted for those kernels (and
    model / measured), predicted for the current ones on an H200 and an H100."""
    print("| case | op | 2026-12-04 measured | 2026-12-04 predicted | model / measured | now, H200 | now, H100 |"
          " now: kernels (H200 us) |")
    print("|---|---|---|---|---|---|---|---|")
    old = {(r["case"], r["op"]): r for r in rows if r["version"] == "2026-12-04"}
    for r in rows:
        if r["version"] != "current":
            continue
        was = old[(r["case"], r["op"])]
        kernels: dict[str, float] = {}
        for k in r["H200"]["launches"]:
            kernels[k["kernel"]] = kernels.get(k["kernel"], 0.0) + k["us"]
        spent = ", ".join(f"{name} {us:.0f}" for name, us in kernels.items())
        print(f"| {r['case']} | {r['op']} | {was['measured_pct']:.0f}% | {was['H200']['pct_of_copy']:.0f}% | "
              f"{calibration_ratio(was):.2f}x | {r['H200']['pct_of_copy']:.0f}% ({r['H200']['us']:.0f} us) | "
              f"{r['H100']['pct_of_copy']:.0f}% | {spent} |")


def print_launches(rows: list[dict]) -> None:
    print("\nPer launch (H200):")
    for r in rows:
        print(f"{r['case']} / {r['op']} / {r['version']}:")
        for k in r["H200"]["launches"]:
            print(f"  {k['kernel']:<30} threads {k['threads']:>10,}  regs {k['registers']:>3}  "
                  f"stack {k['stack'] if k['stack'] is not None else '-':>4}  resident/SM {k['resident_per_sm']:>5}  "
                  f"{k['us']:8.1f} us  ({k['bound']})  {k['note']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", help="the built _C*.so (default: the package's)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--launches", action="store_true", help="print every launch's prediction")
    args = parser.parse_args(argv)
    resources = kernel_resources(args.library or default_library())
    if not resources:
        print("gpu_model: the library has no CUDA kernels (a CPU-only build); registers default to 32",
              file=sys.stderr)
    rows = table(resources)
    print_table(rows)
    print("\ncopy bandwidth: " + "; ".join(f"{g.name} {g.copy_gbps:.0f} GB/s ({g.copy_source})" for g in GPUS))
    if args.launches:
        print_launches(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
