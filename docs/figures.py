"""Draws the guides' figures from the library's own outputs (so a picture cannot drift from what the code does).

    python docs/figures.py [--out docs/img]

scripts/docs.sh runs it before building the site. Each figure is computed by torch_ragged first, then drawn:
- packed_padded.png (docs/batch.md): three members packed with their ``first_idx``, then padded right and left
  (``packed_to_padded``); each cell coloured by the member its value came from, padding grey.
- scatter.png (docs/segment.md): ``scatter`` by an unsorted index: each row of ``src`` goes to the output position
  its index names, and each position holds the sum of its rows (an empty position stays 0).
- pad_modes.png (docs/pad.md): numpy's pad modes on one 1-D signal, three cells each side (``pad``).
matplotlib is a documentation-only dependency (requirements-dev.txt).
"""

import argparse
import os

import torch
import torch_ragged

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]
PADDING = "#d9d9d9"


def _save(fig, path: str) -> None:
    """Writes the figure beside `path`, then renames it there: a reader (the docs build and the figures test may
    run at once) never sees a half-written PNG."""
    partial = f"{path}.{os.getpid()}.partial"
    fig.savefig(partial, dpi=110, metadata={"Software": None}, format="png")
    os.replace(partial, path)


def _grid(ax, member_of, labels, title):
    """Cells (rows x columns): member_of[r][c] is the member index, or -1 for padding."""
    from matplotlib.patches import Rectangle

    rows, cols = len(member_of), len(member_of[0])
    for r in range(rows):
        for c in range(cols):
            m = member_of[r][c]
            ax.add_patch(Rectangle((c, rows - 1 - r), 0.95, 0.95, color=PADDING if m < 0 else COLOURS[m]))
            ax.text(c + 0.475, rows - 1 - r + 0.475, labels[r][c], ha="center", va="center", fontsize=9,
                    color="black" if m < 0 else "white")
    ax.set_xlim(-0.1, cols + 0.1)
    ax.set_ylim(-0.1, rows + 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)


def packed_padded(path: str) -> None:
    import matplotlib.pyplot as plt

    lengths = [3, 1, 2]
    members = [torch.full((n, 1), float(b + 1)) * 10 + torch.arange(n).view(-1, 1) for b, n in enumerate(lengths)]
    packed, shape_per_tensor = torch_ragged.list_to_packed(members)
    first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
    sides = {side: torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, -1.0, padding_side=side)
             for side in ("right", "left")}

    def member(value):  # values were written as 10 * (member + 1) + row
        return -1 if value < 0 else int(value) // 10 - 1

    fig, axes = plt.subplots(1, 3, figsize=(10, 2.6), gridspec_kw={"width_ratios": [6, 3, 3]})
    row = [member(v) for v in packed[:, 0].tolist()]
    _grid(axes[0], [row], [[f"{int(v)}" for v in packed[:, 0].tolist()]],
          f"packed (6, 1), first_idx = {first_idx.tolist()}")
    for b in first_idx.tolist():  # the segment boundaries first_idx marks
        axes[0].axvline(b - 0.025, color="black", linewidth=1.5)
    for ax, (side, padded) in zip(axes[1:], sides.items(), strict=True):
        values = padded[..., 0].tolist()
        _grid(ax, [[member(v) for v in line] for line in values],
              [["pad" if v < 0 else f"{int(v)}" for v in line] for line in values],
              f"packed_to_padded, {side} (3, 3, 1)")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def scatter(path: str) -> None:
    import matplotlib.pyplot as plt

    src = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    index = torch.tensor([2, 0, 2, 3, 0, 2])
    out = torch_ragged.scatter(src, index, dim_size=5)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for i, (value, target) in enumerate(zip(src.tolist(), index.tolist(), strict=True)):
        y = len(src) - 1 - i
        ax.add_patch(plt.Rectangle((0, y), 0.9, 0.9, color=COLOURS[target % len(COLOURS)]))
        ax.text(0.45, y + 0.45, f"{value:g}", ha="center", va="center", color="white")
        ax.text(-0.3, y + 0.45, f"index {target}", ha="right", va="center", fontsize=9)
        ty = len(src) - 1 - target * len(src) / len(out)
        ax.annotate("", xy=(3.0, ty + 0.45), xytext=(0.95, y + 0.45),
                    arrowprops={"arrowstyle": "->", "color": COLOURS[target % len(COLOURS)], "lw": 1.2})
    for p, total in enumerate(out.tolist()):
        y = len(src) - 1 - p * len(src) / len(out)
        ax.add_patch(plt.Rectangle((3.05, y), 0.9, 0.9, color=COLOURS[p % len(COLOURS)] if total else PADDING))
        ax.text(3.5, y + 0.45, f"{total:g}", ha="center", va="center", color="white" if total else "black")
        ax.text(4.1, y + 0.45, f"out[{p}]", ha="left", va="center", fontsize=9)
    ax.text(0.45, len(src) + 0.1, "src", ha="center", fontsize=10)
    ax.text(3.5, len(src) + 0.1, "out", ha="center", fontsize=10)
    ax.set_xlim(-1.6, 5.0)
    ax.set_ylim(-1.0, len(src) + 0.6)
    ax.axis("off")
    ax.set_title(f"scatter(src, index, dim_size=5) = {out.tolist()}", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def pad_modes(path: str) -> None:
    import matplotlib.pyplot as plt

    signal = torch.tensor([1.0, 2.0, 4.0, 7.0, 5.0])
    width = 3
    cases = [("constant", {}), ("constant", {"constant_values": 9}), ("edge", {}), ("linear_ramp", {}),
             ("maximum", {}), ("minimum", {}), ("mean", {}), ("median", {}), ("reflect", {}),
             ("reflect", {"reflect_type": "odd"}), ("symmetric", {}), ("wrap", {})]
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * len(cases) + 0.5))
    for row, (mode, kwargs) in enumerate(cases):
        padded = torch_ragged.pad(signal, width, mode, **kwargs).tolist()
        y = len(cases) - 1 - row
        label = mode + "".join(f", {k}={v}" for k, v in kwargs.items())
        ax.text(-0.3, y + 0.4, label, ha="right", va="center", fontsize=9)
        for c, value in enumerate(padded):
            inside = width <= c < width + len(signal)
            ax.add_patch(plt.Rectangle((c, y), 0.92, 0.8, color=COLOURS[0] if inside else COLOURS[1]))
            ax.text(c + 0.46, y + 0.4, f"{value:.3g}", ha="center", va="center", fontsize=8, color="white")
    ax.set_xlim(-5.5, len(signal) + 2 * width + 0.1)
    ax.set_ylim(-0.2, len(cases))
    ax.axis("off")
    ax.set_title(f"torch_ragged.pad({signal.tolist()}, {width}, mode): the input (blue) and its padding", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


FIGURES = {"packed_padded.png": packed_padded, "scatter.png": scatter, "pad_modes.png": pad_modes}


def main(argv=None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    os.makedirs(args.out, exist_ok=True)
    written = []
    for name, draw in FIGURES.items():
        path = os.path.join(args.out, name)
        draw(path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in main():
        print(path)
