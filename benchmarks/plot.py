"""Draws benchmark results (the JSON rows that run.py writes) as one PNG per family and device.

    python benchmarks/plot.py [docs/benchmarks_pad_cpu.json ...] [--out docs/img]
    python benchmarks/run.py --family pad --json docs/benchmarks_pad_cpu.json --plot   # run, then draw

Without file arguments every docs/benchmarks_<family>_<device>.json is drawn. Each figure has two panels, one bar
per row: left, the ratio baseline time / ours (> 1: ours is faster; log scale, the line at 1 marks parity);
right, the bandwidth we achieved (bytes read + written / our time) beside the copy bandwidth measured in the
same run, i.e. how far each op is from the memory-traffic floor. matplotlib is a benchmark-only dependency.
"""

import argparse
import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def row_label(row: dict) -> str:
    return f"{row['op']} | {row['case']} vs {row['baseline']}"


def draw(rows: list, title: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = [r for r in rows if "error" not in r]  # census rows that were not timed
    labels = [row_label(r) for r in rows]
    ratios = [r["baseline_s"] / r["ours_s"] for r in rows]
    with_bandwidth = all("bytes" in r for r in rows)  # the census times calls, not bytes: ratios only
    positions = range(len(rows))
    height = max(3.0, 0.28 * len(rows) + 1.2)
    if with_bandwidth:
        figure, (left, right) = plt.subplots(1, 2, figsize=(15, height), sharey=True,
                                             gridspec_kw={"width_ratios": [1.2, 1]})
    else:
        figure, left = plt.subplots(1, 1, figsize=(10, height))
    left.barh(positions, ratios, color=["tab:green" if r >= 1 else "tab:red" for r in ratios])
    left.axvline(1.0, color="black", linewidth=0.8)
    left.set_xscale("log")
    left.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
    left.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.set_xlabel("baseline time / ours (log; > 1 = faster than the baseline)")
    for y, ratio in zip(positions, ratios, strict=True):
        left.annotate(f"{ratio:.2f}x", (ratio, y), xytext=(3, 0), textcoords="offset points", va="center",
                      fontsize=7)
    left.set_yticks(list(positions), labels, fontsize=7)
    left.invert_yaxis()
    if with_bandwidth:
        achieved = [r["bytes"] / r["ours_s"] / 1e9 for r in rows]
        copy = [r["memcpy_gbs"] for r in rows]
        right.barh([p - 0.2 for p in positions], achieved, height=0.4, label="ours (bytes moved / time)")
        right.barh([p + 0.2 for p in positions], copy, height=0.4, color="lightgray", label="copy, same run")
        right.set_xlabel("GB/s")
        right.legend(loc="lower right", fontsize=7)
    figure.suptitle(title)
    figure.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")  # "tight": long row labels widen the canvas
    plt.close(figure)


def draw_census(rows: list, title: str, path: str) -> None:
    """The census in one readable figure: per size, every row's ratio sorted (log scale, the line at 1 marks parity,
    losses in red) and the count of rows below 1.0x; the five worst rows named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sizes = list(dict.fromkeys(r["case"] for r in rows))
    figure, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.6), sharey=True, squeeze=False)
    for axis, size in zip(axes[0], sizes, strict=True):
        timed = sorted((r for r in rows if r["case"] == size and "error" not in r),
                       key=lambda r: r["baseline_s"] / r["ours_s"])
        ratios = [r["baseline_s"] / r["ours_s"] for r in timed]
        axis.bar(range(len(ratios)), ratios, width=1.0, color=["tab:red" if x < 1 else "tab:green" for x in ratios])
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
        losses = sum(x < 1 for x in ratios)
        axis.set_title(f"{size}: {losses} of {len(ratios)} rows below 1.0x", fontsize=10)
        axis.set_xlabel("rows, sorted by ratio")
        worst = "\n".join(f"{r['op']} {x:.2f}x" for r, x in zip(timed[:5], ratios[:5], strict=False))
        axis.text(0.98, 0.03, "worst:\n" + worst, transform=axis.transAxes, ha="right", va="bottom", fontsize=7,
                  bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "lightgray"})
    axes[0][0].set_ylabel("baseline time / ours (log; > 1 = faster)")
    figure.suptitle(title)
    figure.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_file(json_path: str, out_dir: str) -> str:
    """Draws one run.py JSON file; returns the PNG's path (out_dir/<same name>.png)."""
    with open(json_path) as f:
        rows = json.load(f)
    name = os.path.splitext(os.path.basename(json_path))[0]
    title = name.replace("benchmarks_", "").replace("_", " on ") + f" ({len(rows)} rows, {os.path.basename(json_path)})"
    path = os.path.join(out_dir, name + ".png")
    (draw_census if "census" in name else draw)(rows, title, path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="run.py JSON files (default: docs/benchmarks_*.json)")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "img"), help="folder for the PNGs")
    args = parser.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "docs", "benchmarks_*.json")))
    for json_path in files:
        print(f"{json_path} -> {plot_file(json_path, args.out)}")


if __name__ == "__main__":
    main()
