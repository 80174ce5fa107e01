"""Draws the guides' figures from the library's own outputs (so a picture cannot drift from what the code does).

    python docs/figures.py [--out docs/img]

scripts/docs.sh runs it before building the site. Each figure is computed by torch_ragged first, then drawn:
- packed_padded.png (docs/batch.md): three members packed with their ``first_idx``, then padded right and left
  (``packed_to_padded``); each cell coloured by the member its value came from, padding grey.
- scatter.png (docs/segment.md): ``scatter`` by an unsorted index: each row of ``src`` goes to the output position
  its index names, and each position holds the sum of its rows (an empty position stays 0).
- pad_modes.png (docs/pad.md): numpy's pad modes on one 1-D signal, three cells each side (``pad``).
- overview.png (docs/index.md): one small panel per family (packed / padded, segment_sum, scatter, sparse, pad,
  tiles).
- segment_reductions.png (docs/segment.md): per-row (softmax, cumsum) and per-segment (sum, mean, max, arg) results
  over one ``first_idx`` with an empty segment.
- pad_image.png (docs/pad.md): ten modes on one 8 x 8 image with an "F" (which way each mode turns).
- sparse_layouts.png (docs/sparse.md): a COO matrix with duplicates, coalesced, as CSR, dense.
- tiles.png (docs/tiles.md): overlapping tiles read first-wins, and a box filter reading across tile edges.
- container_views.png (docs/container.md): a RaggedTensor's values / first_idx, padded, mask, ``r[:, -1]``,
  ``r[[2, 0]]``.
- design_layers.png (docs/design.md): csrc/'s directories and which include which (read from the sources).
- ragged_all_gather.png (docs/distributed.md): two ranks' members and the gathered batch on every rank.
- exported_graph.png (docs/export.md): the nodes of a ``torch.export``-ed model calling the library.
matplotlib is a documentation-only dependency (requirements-dev.txt).
"""

import argparse
import os
import warnings

import torch
import torch_ragged
from torch_ragged import tiles

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
    """Cells (rows x columns): member_of[r][c] is the member index, -1 for padding, None for no cell."""
    from matplotlib.patches import Rectangle

    rows, cols = len(member_of), len(member_of[0])
    for r in range(rows):
        for c in range(cols):
            m = member_of[r][c]
            if m is None:  # no cell here
                continue
            colour = PADDING if m < 0 else COLOURS[m % len(COLOURS)]
            ax.add_patch(Rectangle((c, rows - 1 - r), 0.95, 0.95, color=colour))
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


def segment_reductions(path: str) -> None:
    import matplotlib.pyplot as plt

    packed = torch.tensor([[2.0], [0.0], [1.0], [3.0], [1.0], [0.0], [4.0], [2.0]])
    first_idx = torch.tensor([0, 3, 3, 5, 8])  # segment 1 is empty
    segment_of = torch_ragged.segment_ids(first_idx, packed.size(0)).tolist()
    softmax = torch_ragged.segment_softmax(packed, first_idx)[:, 0].tolist()
    cumsum = torch_ragged.segment_cumsum(packed, first_idx)[:, 0].tolist()
    sums = torch_ragged.segment_sum(packed, first_idx)[:, 0].tolist()
    means = torch_ragged.segment_mean(packed, first_idx)[:, 0].tolist()
    highest = torch_ragged.segment_max(packed, first_idx)
    fig, (rows_ax, segments_ax) = plt.subplots(1, 2, figsize=(9.5, 3.6), gridspec_kw={"width_ratios": [4, 5]})
    per_row = [[f"{int(v)}" for v in packed[:, 0].tolist()], [f"{v:.2f}" for v in softmax], [f"{v:g}" for v in cumsum]]
    _grid(rows_ax, [[segment_of[r]] * 3 for r in range(len(segment_of))],
          [[column[r] for column in per_row] for r in range(len(segment_of))],
          f"per row: packed | segment_softmax | segment_cumsum\nfirst_idx = {first_idx.tolist()}")
    for b in first_idx.tolist():
        rows_ax.axhline(len(segment_of) - b - 0.025, color="black", linewidth=1.5)
    per_segment = [[f"{v:g}" for v in sums], [f"{v:.3g}" for v in means],
                   [f"{v:g}" for v in highest.values[:, 0].tolist()], [f"{v}" for v in highest.arg[:, 0].tolist()]]
    segments = len(sums)
    _grid(segments_ax, [[b if first_idx[b] < first_idx[b + 1] else -1] * 4 for b in range(segments)],
          [[column[b] for column in per_segment] for b in range(segments)],
          "per segment: sum | mean | max | arg\n(segment 1 is empty: 0, 0, 0, arg -1)")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _pad_image_source() -> torch.Tensor:
    """An 8 x 8 grey ramp with a dark "F": every mode's reflection or wrap shows which way it turns."""
    image = (torch.arange(8.0).view(1, 8) + torch.arange(8.0).view(8, 1)) / 14.0 * 0.6 + 0.4
    image[1:7, 2] = 0.0
    image[1, 2:6] = 0.0
    image[3, 2:5] = 0.0
    return image


def pad_image(path: str) -> None:
    import matplotlib.pyplot as plt

    image = _pad_image_source()
    width = 5
    cases = [("constant", {}), ("edge", {}), ("wrap", {}), ("reflect", {}), ("symmetric", {}),
             ("reflect", {"reflect_type": "odd"}), ("linear_ramp", {"end_values": 1.0}), ("mean", {}),
             ("median", {"stat_length": 2}), ("maximum", {})]
    fig, axes = plt.subplots(2, 5, figsize=(10, 4.6))
    for ax, (mode, kwargs) in zip(axes.flat, cases, strict=True):
        padded = torch_ragged.pad(image, width, mode, **kwargs)
        ax.imshow(padded.clamp(-0.5, 1.5).numpy(), cmap="viridis", vmin=-0.5, vmax=1.5, interpolation="nearest")
        ax.add_patch(plt.Rectangle((width - 0.5, width - 0.5), 8, 8, fill=False, edgecolor="white", linewidth=1.2))
        ax.set_title(mode + "".join(f"\n{k}={v}" for k, v in kwargs.items()), fontsize=9)
        ax.axis("off")
    fig.suptitle(f"torch_ragged.pad(image (8, 8), {width}, mode): the input inside the white square", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _sparse_example():
    indices = torch.tensor([[2, 0, 1, 0, 2], [1, 3, 0, 3, 1]])
    values = torch.tensor([5.0, 1.0, 2.0, 3.0, 4.0])
    return torch.sparse_coo_tensor(indices, values, (3, 4), check_invariants=True)


def sparse_layouts(path: str) -> None:
    import matplotlib.pyplot as plt

    s = _sparse_example()
    coalesced = torch_ragged.sparse.coalesce(s)
    csr = torch_ragged.sparse.to_sparse_csr(coalesced)
    dense = torch_ragged.sparse.to_dense(s)
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), gridspec_kw={"width_ratios": [5, 4, 5, 4]})

    def triplets(ax, t, title):
        rows, cols = t._indices().tolist()
        labels = [[str(r) for r in rows], [str(c) for c in cols], [f"{v:g}" for v in t._values().tolist()]]
        _grid(ax, [rows] * 3, labels, title)
        for y, name in zip((2.45, 1.45, 0.45), ("row", "col", "value"), strict=True):
            ax.text(-0.15, y, name, ha="right", va="center", fontsize=8)

    triplets(axes[0], s, "COO as given: (0, 3) and (2, 1) twice")
    triplets(axes[1], coalesced, "coalesce: sorted, duplicates summed")
    crow, nnz = csr.crow_indices().tolist(), csr.col_indices().numel()
    row_of = torch_ragged.segment_ids(csr.crow_indices(), nnz).tolist()
    width = max(len(crow), nnz)
    blank = [None] * (width - nnz)
    _grid(axes[2], [list(range(len(crow) - 1)) + [-1] + [None] * (width - len(crow)), row_of + blank, row_of + blank],
          [[str(v) for v in crow] + [""] * (width - len(crow)),
           [str(v) for v in csr.col_indices().tolist()] + [""] * len(blank),
           [f"{v:g}" for v in csr.values().tolist()] + [""] * len(blank)],
          "CSR: crow_indices (first_idx of the rows),\ncol_indices, values")
    member_of = [[r if v != 0 else -1 for v in line] for r, line in enumerate(dense.tolist())]
    _grid(axes[3], member_of, [[f"{v:g}" if v else "" for v in line] for line in dense.tolist()], "to_dense (3, 4)")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _tiles_example():
    origins = torch.tensor([[2, 2], [6, 7], [13, 14], [15, 1]])
    pages = torch.stack([torch.full((8, 8), float(t + 1)) for t in range(len(origins))])
    return pages, origins


def _draw_tile_outlines(ax, origins, size=8):
    from matplotlib.patches import Rectangle

    for t, (r, c) in enumerate(origins.tolist()):
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), size, size, fill=False, edgecolor=COLOURS[t], linewidth=1.8,
                               linestyle="--"))
        ax.text(c, r, f"tile {t}", color="white", fontsize=8, va="top", ha="left")


def _first_wins_field(ax):
    """The example tiles read into their 24 x 24 bound (tiles_to_dense), each point coloured by its winning tile,
    grey where none covers it, the tiles outlined. Returns (pages, origins)."""
    from matplotlib.colors import ListedColormap

    pages, origins = _tiles_example()
    field = tiles.tiles_to_dense(pages, origins, [0, 0], [24, 24], fill_value=0.0)
    ax.imshow(field.numpy(), cmap=ListedColormap([PADDING, *COLOURS[:4]]), vmin=0, vmax=4, interpolation="nearest")
    _draw_tile_outlines(ax, origins)
    return pages, origins


def tiles_figure(path: str) -> None:
    import matplotlib.pyplot as plt

    fig, (first_ax, filter_ax) = plt.subplots(1, 2, figsize=(10, 4.8))
    pages, origins = _first_wins_field(first_ax)
    blurred = tiles.tiles_box_filter(pages, origins, [0, 0], [24, 24], size=5, out="dense")
    first_ax.set_title("tiles_to_dense: where tiles 0 and 1 overlap, tile 0 wins\n(grey: no tile, fill_value)",
                       fontsize=10)
    image = filter_ax.imshow(blurred.numpy(), cmap="viridis", interpolation="nearest")
    _draw_tile_outlines(filter_ax, origins)
    filter_ax.set_title("tiles_box_filter(size=5, out=\"dense\"): each point's 5 x 5 mean,\nread across tile "
                        "edges (a 2-point halo) and over empty space", fontsize=10)
    fig.colorbar(image, ax=filter_ax, fraction=0.046)
    for ax in (first_ax, filter_ax):
        ax.set_xticks([0, 8, 16, 23])
        ax.set_yticks([0, 8, 16, 23])
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def container_views(path: str) -> None:
    import matplotlib.pyplot as plt

    r = torch_ragged.RaggedTensor.from_list([torch.tensor([10.0, 11.0, 12.0]), torch.tensor([20.0]),
                                             torch.tensor([30.0, 31.0])])
    member_of = torch_ragged.segment_ids(r.first_idx, r.values.size(0)).tolist()
    padded, mask, last, picked = r.padded(-1.0), r.mask(), r[:, -1], r[[2, 0]]
    fig, axes = plt.subplots(1, 5, figsize=(12, 2.9), gridspec_kw={"width_ratios": [6, 3, 3, 1.4, 5]})
    _grid(axes[0], [member_of], [[f"{v:g}" for v in r.values.tolist()]],
          f"r.values, r.first_idx = {r.first_idx.tolist()}")
    for b in r.first_idx.tolist():
        axes[0].axvline(b - 0.025, color="black", linewidth=1.5)
    _grid(axes[1], [[b if m else -1 for m in line] for b, line in enumerate(mask.tolist())],
          [["pad" if not m else f"{v:g}" for v, m in zip(vs, ms, strict=True)]
           for vs, ms in zip(padded.tolist(), mask.tolist(), strict=True)], "r.padded()")
    _grid(axes[2], [[b if m else -1 for m in line] for b, line in enumerate(mask.tolist())],
          [["T" if m else "F" for m in line] for line in mask.tolist()], "r.mask()")
    _grid(axes[3], [[b] for b in range(len(r))], [[f"{v:g}"] for v in last.tolist()], "r[:, -1]")
    picked_member = torch_ragged.segment_ids(picked.first_idx, picked.values.size(0)).tolist()
    _grid(axes[4], [[(2, 0)[m] for m in picked_member]], [[f"{v:g}" for v in picked.values.tolist()]],
          "r[[2, 0]].values: one kernel")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def overview(path: str) -> None:
    """index.md: one small panel per family, each computed by the library."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(12, 5.4))
    members = [torch.tensor([11.0, 12.0, 13.0]), torch.tensor([21.0]), torch.tensor([31.0, 32.0])]
    packed, shape_per_tensor = torch_ragged.list_to_packed(members)
    first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
    padded = torch_ragged.packed_to_padded(packed, shape_per_tensor, first_idx, -1.0)
    segment_of = torch_ragged.segment_ids(first_idx, packed.size(0)).tolist()
    _grid(axes[0, 0], [segment_of] + [[b if v >= 0 else -1 for v in line] + [None] * 3 for b, line in
                                      enumerate(padded.tolist())],
          [[f"{v:g}" for v in packed.tolist()]] + [[f"{v:g}" if v >= 0 else "pad" for v in line] + [""] * 3
                                                   for line in padded.tolist()],
          f"a packed batch, first_idx = {first_idx.tolist()},\nand packed_to_padded")

    sums = torch_ragged.segment_expand(torch_ragged.segment_sum(packed, first_idx), first_idx, packed.size(0))
    _grid(axes[0, 1], [segment_of, segment_of],
          [[f"{v:g}" for v in packed.tolist()], [f"{v:g}" for v in sums.tolist()]],
          "segment_sum over first_idx\n(each row shows its segment's sum)")

    src, index = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), torch.tensor([2, 0, 2, 3, 0, 2])
    out = torch_ragged.scatter(src, index, dim_size=5)
    _grid(axes[0, 2], [index.tolist(), [p if v else -1 for p, v in enumerate(out.tolist())] + [None]],
          [[f"{v:g}" for v in src.tolist()], [f"{v:g}" for v in out.tolist()] + [""]],
          f"scatter(src, index = {index.tolist()})\nsums each position's rows")

    dense = torch_ragged.sparse.to_dense(torch_ragged.sparse.coalesce(_sparse_example()))
    _grid(axes[1, 0], [[r if v else -1 for v in line] for r, line in enumerate(dense.tolist())],
          [[f"{v:g}" if v else "" for v in line] for line in dense.tolist()],
          "sparse COO: coalesce, to_dense\n(duplicates summed in a fixed order)")

    signal = torch.tensor([1.0, 2.0, 4.0, 7.0])
    reflected = torch_ragged.pad(signal, 3, "reflect").tolist()
    _grid(axes[1, 1], [[0 if 3 <= c < 7 else 1 for c in range(len(reflected))]], [[f"{v:g}" for v in reflected]],
          "pad(signal, 3, \"reflect\"):\nnumpy.pad's eleven modes")

    _first_wins_field(axes[1, 2])
    axes[1, 2].axis("off")
    axes[1, 2].set_title("tiles_to_dense: the first\ncovering tile wins", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _source_dependencies() -> dict:
    """{directory: {included directory: "internal" or "public API"}} over csrc/, read from the #include lines:
    ``"segment/sort.h"`` is an internal header, ``<torch_ragged/batch.h>`` another family's public C++ API (functions
    that call the ops through the dispatcher)."""
    import re

    csrc = os.path.join(ROOT, "csrc")
    directories = sorted(d for d in os.listdir(csrc) if os.path.isdir(os.path.join(csrc, d)) and d != "torch_ragged")
    found = {}
    for directory in directories:
        folder = os.path.join(csrc, directory)
        targets = {}
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8") as source:
                text = source.read()
            for target in re.findall(r'#include <torch_ragged/([a-z_]+)\.h>', text):
                if target in directories and target != directory:
                    targets.setdefault(target, "public API")
            for target in re.findall(r'#include "([a-z_]+)/', text):
                if target in directories and target != directory:
                    targets[target] = "internal"
        found[directory] = targets
    return found


def design_layers(path: str) -> None:
    """design.md: the layers, and the dependency rule as the sources' #include lines draw it."""
    import matplotlib.pyplot as plt

    dependencies = _source_dependencies()
    families = [d for d in dependencies if d not in ("common", "segment")]
    middle = len(families) / 2 - 0.5
    place = {"common": (middle, 0.0), "segment": (middle, 1.3)}
    place.update({family: (i, 2.6) for i, family in enumerate(families)})
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for source, targets in dependencies.items():
        for target, kind in targets.items():
            (x0, y0), (x1, y1) = place[source], place[target]
            same_row = abs(y0 - y1) < 0.1
            start, end = ((x0, y0 + 0.3), (x1, y1 + 0.3)) if same_row else ((x0, y0 - 0.3), (x1, y1 + 0.3))
            ax.annotate("", xy=end, xytext=start, arrowprops={
                "arrowstyle": "->", "lw": 1.0, "color": "#555555" if kind == "internal" else COLOURS[3],
                "linestyle": "-" if kind == "internal" else "--",
                "connectionstyle": "arc3,rad=0.5" if same_row else "arc3,rad=0.12"})
    for name, (x, y) in place.items():
        colour = COLOURS[0] if name == "common" else COLOURS[1] if name == "segment" else COLOURS[2]
        ax.add_patch(plt.Rectangle((x - 0.45, y - 0.3), 0.9, 0.6, color=colour))
        ax.text(x, y, name, ha="center", va="center", color="white", fontsize=10)
    doors = "Python torch_ragged.*  ·  torch.ops.torch_ragged.*  ·  C++ torch_ragged::  ·  compile / export / script"
    ax.text(middle, 3.95, doors, ha="center", va="center", fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "#eeeeee", "edgecolor": "#999999"})
    ax.text(middle, 3.55, "the ATen dispatcher: CPU / CUDA kernels, autograd, fake kernels", ha="center",
            va="center", fontsize=9)
    ax.text(middle, -0.65, "solid: includes an internal header  ·  dashed red: calls another family's public C++ API "
            "(its ops, through the dispatcher)", ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.7, len(families) - 0.3)
    ax.set_ylim(-0.85, 4.2)
    ax.axis("off")
    ax.set_title("csrc/: which directory's files #include which (read from the sources)", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def ragged_all_gather_layout(path: str) -> None:
    """distributed.md: what ragged_all_gather returns on every rank: each rank's members, rank 0's first, packed
    without padding (drawn with the library's layout ops: the gathered batch is the members' list packed)."""
    import matplotlib.pyplot as plt

    ranks = [[torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0])], [torch.tensor([5.0, 6.0]), torch.tensor([]),
                                                                   torch.tensor([7.0, 8.0, 9.0])]]
    fig, axes = plt.subplots(3, 1, figsize=(8, 3.6))
    member = 0
    for rank, (ax, members) in enumerate(zip(axes, ranks, strict=False)):
        packed, shape_per_tensor = torch_ragged.list_to_packed([m.view(-1, 1) for m in members])
        first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
        of = [member + b for b in torch_ragged.segment_ids(first_idx, packed.size(0)).tolist()]
        _grid(ax, [of], [[f"{v:g}" for v in packed[:, 0].tolist()]],
              f"rank {rank}: {len(members)} members, first_idx = {first_idx.tolist()}")
        member += len(members)
    gathered = [m.view(-1, 1) for members in ranks for m in members]
    packed, shape_per_tensor = torch_ragged.list_to_packed(gathered)
    first_idx = torch_ragged.get_first_idx(shape_per_tensor.prod(1))
    _grid(axes[2], [torch_ragged.segment_ids(first_idx, packed.size(0)).tolist()],
          [[f"{v:g}" for v in packed[:, 0].tolist()]],
          f"ragged_all_gather on every rank: first_idx = {first_idx.tolist()} (an empty member kept)")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def exported_graph(path: str) -> None:
    """export.md: the nodes torch.export keeps for a model calling the library: its ops stay single graph nodes."""
    import matplotlib.pyplot as plt

    class Pool(torch.nn.Module):
        def forward(self, packed, first_idx):
            weights = torch_ragged.segment_softmax(packed[:, :1], first_idx)
            return torch_ragged.segment_sum(packed * weights, first_idx)

    program = torch.export.export(Pool(), (torch.randn(8, 3), torch.tensor([0, 4, 5, 8])))
    nodes = [node for node in program.graph.nodes]
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(nodes) + 0.6))
    for i, node in enumerate(nodes):
        y = len(nodes) - 1 - i
        target = str(node.target) if node.op == "call_function" else node.op
        ours = target.startswith("torch_ragged.")
        inputs = ", ".join(str(a) for a in node.args) if node.op in ("call_function", "output") else ""
        ax.add_patch(plt.Rectangle((0, y), 7.5, 0.8, color=COLOURS[1] if ours else COLOURS[0]))
        ax.text(0.15, y + 0.4, f"{node.name} = {target}({inputs})", va="center", color="white", fontsize=9,
                family="monospace")
    ax.set_xlim(0, 7.6)
    ax.set_ylim(-0.2, len(nodes))
    ax.axis("off")
    ax.set_title("torch.export of segment_softmax + segment_sum: the library's ops (orange) are graph nodes",
                 fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


FIGURES = {"packed_padded.png": packed_padded, "scatter.png": scatter, "pad_modes.png": pad_modes,
           "segment_reductions.png": segment_reductions, "pad_image.png": pad_image,
           "sparse_layouts.png": sparse_layouts, "tiles.png": tiles_figure, "container_views.png": container_views,
           "overview.png": overview, "design_layers.png": design_layers,
           "ragged_all_gather.png": ragged_all_gather_layout, "exported_graph.png": exported_graph}


def main(argv=None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
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
