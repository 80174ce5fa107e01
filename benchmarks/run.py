"""Runs a family's benchmarks and prints a ratio table (baseline time / ours; > 1 means faster).

    python benchmarks/run.py --family batch|census|container|distributed|latency|pad|segment|sparse|tiles \
        [--device cpu|cuda] \
        [--json out.json [--plot]] [--quick] [--only SUBSTRING] [--sizes tiny,medium,large]

Ratios, not absolute times, are the result: the machines are shared and noisy, but every row's baseline,
ours and memcpy are timed in the same run. "% memcpy" compares our bandwidth (bytes read + written)
with a plain copy of the padded tensor's size measured in the same run. THP_MEM_ALLOC_ENABLE=1 is set (unless
already set) so that fresh large allocations are not dominated by page faults; see docs/benchmarks.md.
"""

import argparse
import json
import os
import sys

# Large fresh CPU allocations otherwise cost more in page faults (4 KiB pages) than the ops themselves;
# torch's allocator then asks for transparent huge pages. Baselines and ours run under the same setting.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FAMILIES = ("batch", "census", "container", "distributed", "latency", "pad", "segment", "sparse", "tiles")


def print_table(rows, floor_note=True):
    header = ("case", "op", "baseline", "baseline ms", "ours ms", "ratio", "ours GB/s", "memcpy GB/s", "% memcpy")
    lines = [header]
    for r in rows:
        ours_gbs = r["bytes"] / r["ours_s"] / 1e9
        memcpy_gbs = r["memcpy_gbs"]
        lines.append((r["case"], r["op"], r["baseline"], f"{r['baseline_s'] * 1e3:.3f}", f"{r['ours_s'] * 1e3:.3f}",
                      f"{r['baseline_s'] / r['ours_s']:.2f}x", f"{ours_gbs:.2f}", f"{memcpy_gbs:.2f}",
                      f"{100 * ours_gbs / memcpy_gbs:.0f}%"))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for line in lines[1:]:
        print("| " + " | ".join(line) + " |")
    print()
    if not floor_note:
        return
    for case in dict.fromkeys(r["case"] for r in rows):
        full_ms = next(r["padded_full_s"] for r in rows if r["case"] == case) * 1e3
        print(f"{case}: torch.full of the padded output alone takes {full_ms:.3f} ms (floor for *_to_padded)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=FAMILIES, required=True)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--quick", action="store_true", help="short timing runs (smoke test)")
    parser.add_argument("--only", help="census: only the ops whose name contains this; segment: reductions or scans")
    parser.add_argument("--sizes", default="tiny,medium,large", help="census: sizes to run (comma-separated)")
    parser.add_argument("--plot", action="store_true", help="also draw the JSON rows as <json name>.png beside it")
    args = parser.parse_args()
    if args.plot and not args.json:
        parser.error("--plot draws the --json file; give --json too")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks/run.py: --device cuda needs a CUDA device")

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}")
    min_run_time = 0.05 if args.quick else 1.0
    if args.family == "pad":
        import bench_pad

        rows = bench_pad.run_all(args.device, min_run_time)
        bench_pad.print_table(rows)
    elif args.family == "segment":
        import bench_segment

        rows = []
        if args.only in (None, "reductions"):
            for name, params in bench_segment.CASES.items():
                rows += bench_segment.run_case(name, device=args.device, min_run_time=min_run_time, **params)
        if args.only in (None, "scans"):
            for name, params in bench_segment.SCAN_CASES.items():
                rows += bench_segment.run_scan_case(name, device=args.device, min_run_time=min_run_time, **params)
        print_table(rows, floor_note=False)
    elif args.family == "container":
        import bench_container

        rows = bench_container.run_all(args.device, min_run_time)
        print_table(rows, floor_note=False)
    elif args.family == "tiles":
        import bench_tiles

        rows = bench_tiles.run_all(args.device, min_run_time)
        print_table(rows, floor_note=False)
    elif args.family == "distributed":
        import bench_distributed

        rows = bench_distributed.run_all(args.device, min_run_time)
        print_table(rows, floor_note=False)
    elif args.family == "census":  # every public op at three sizes
        import bench_census

        rows = bench_census.run_all(args.device, min_run_time, args.only, tuple(args.sizes.split(",")))
        bench_census.print_table(rows)
    elif args.family == "latency":  # per-call cost on tiny inputs, one thread
        import bench_latency

        rows = bench_latency.run_all(args.device, min_run_time)
        bench_latency.print_table(rows)
    elif args.family == "sparse":
        import bench_sparse

        rows = bench_sparse.run_all(args.device, min_run_time)
        print_table(rows, floor_note=False)
    else:
        rows = run_batch(args.device, min_run_time)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.plot:
        import plot

        # next to the JSON (docs/img holds the committed figures: `python benchmarks/plot.py` redraws those)
        print(f"plot: {plot.plot_file(args.json, os.path.dirname(os.path.abspath(args.json)))}")


def run_batch(device, min_run_time):
    import bench_batch as bench

    cases = dict(bench.CASES)
    if device == "cuda":
        cases.update(bench.GPU_CASES)
    rows = []
    for name, params in cases.items():
        dtypes = [torch.float32, torch.bfloat16] if name in bench.GPU_CASES else [torch.float32]
        for dtype in dtypes:
            label = name if dtype == torch.float32 else f"{name} bf16"
            rows += bench.run_case(label, dtype=dtype, device=device, min_run_time=min_run_time, **params)
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
