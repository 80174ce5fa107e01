"""The guides' figures (docs/figures.py): drawn from the library's outputs, not blank, committed in docs/img (the
docs script redraws them) and shown by their guides."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE_OF = {"packed_padded.png": "batch.md", "scatter.png": "segment.md", "pad_modes.png": "pad.md",
            "segment_reductions.png": "segment.md", "pad_image.png": "pad.md", "sparse_layouts.png": "sparse.md",
            "tiles.png": "tiles.md", "container_views.png": "container.md", "overview.png": "index.md",
            "design_layers.png": "design.md", "ragged_all_gather.png": "distributed.md",
            "exported_graph.png": "export.md"}


def test_figures_are_drawn_not_blank_match_the_committed_ones_and_are_shown(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "figures.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    drawn = sorted(p.name for p in tmp_path.glob("*.png"))
    assert drawn == sorted(GUIDE_OF)
    for name, guide in GUIDE_OF.items():
        for path in (tmp_path / name, ROOT / "docs" / "img" / name):  # drawn now, and the committed copy
            pixels = image.imread(path)[..., :3].reshape(-1, 3)
            colours = {tuple(p) for p in (pixels * 255).round().astype(int)[::7].tolist()}
            assert len(colours) > 8 and pixels.std() > 0.05, f"{path} looks blank"
        assert f"](img/{name})" in (ROOT / "docs" / guide).read_text(), f"{guide} does not show {name}"


def test_every_guide_and_coming_from_page_shows_a_figure():
    pages = [p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("benchmarks")]
    assert len(pages) >= 16, sorted(p.name for p in pages)
    bare = [p.name for p in pages if "](img/" not in p.read_text()]
    assert not bare, f"pages without a figure: {bare}"
    for page in pages:
        for name in re.findall(r"\]\(img/([^)]+)\)", page.read_text()):
            assert (ROOT / "docs" / "img" / name).exists(), f"{page.name} shows img/{name}, which is not there"
