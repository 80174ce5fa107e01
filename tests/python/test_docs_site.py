"""The documentation site: Sphinx builds it with warnings as errors, and its pages open in headless Chromium with
no console message, every local resource they name present, and a screenshot taken of each
(build/docs/screenshots/)."""

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["index.html", "segment.html", "from_torch_scatter.html", "api/container.html", "api/sparse.html",
         "benchmarks.html"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("sphinx", reason="Sphinx is not installed (requirements-dev.txt)")
    out = tmp_path_factory.mktemp("docs") / "html"
    result = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh"), str(out)], capture_output=True, text=True,
                            env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == 0, f"the docs build failed or warned:\n{result.stdout}\n{result.stderr}"
    return out


class _LocalResources(HTMLParser):
    """Every stylesheet, script, image and same-site link a page names."""

    def __init__(self):
        super().__init__()
        self.targets = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value and not urlparse(value).scheme and not value.startswith("#"):
                self.targets.append(unquote(value.split("#")[0].split("?")[0]))


def test_every_api_module_has_a_reference_page(site):
    import importlib

    for module in ("batch", "container", "distributed", "pad", "segment", "sparse", "tiles"):
        page = (site / "api" / f"{module}.html").read_text()
        for name in importlib.import_module(f"torch_ragged.{module}").__all__:
            assert f'id="torch_ragged.{module}.{name}"' in page, f"{module}.{name} is missing from its API page"
        assert 'class="reference internal"' in page.split('id="torch_ragged.', 1)[0], f"{module}: no guide link"
    container = (site / "api" / "container.html").read_text()
    assert container.index('id="torch_ragged.container.RaggedTensor"') < container.index(
        'id="torch_ragged.container.LazyStack"'), "the container page should open with its main class"


def test_api_pages_render_each_parameter_with_its_description(site):
    page = (site / "api" / "segment.html").read_text()
    entry = page[page.index('id="torch_ragged.segment.segment_sum"'):]
    entry = entry.split('<dt class="sig', 1)[0]  # up to the next entry
    assert "Parameters" in entry
    for name in ("data", "first_idx", "dim"):
        assert f"<strong>{name}</strong>" in entry, f"segment_sum's {name} is not in its parameter list"
    assert "the dim of" in entry  # the description, not only the name


@pytest.mark.parametrize("page", PAGES)
def test_page_resources_exist(site, page):
    parser = _LocalResources()
    parser.feed((site / page).read_text())
    assert parser.targets, f"{page} names no resource at all"
    missing = [t for t in parser.targets if t and not (site / page).parent.joinpath(t).resolve().exists()]
    assert not missing, f"{page} names files the build did not produce: {missing}"


def test_index_opens_in_headless_chromium_without_console_messages(site):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium package is not installed here (scripts/build.sh installs it where apt can)")
    shots = ROOT / "build" / "docs" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    for page in PAGES:
        screenshot = shots / page.replace("/", "_").replace(".html", ".png")
        screenshot.unlink(missing_ok=True)
        result = subprocess.run(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,900",
             "--enable-logging=stderr", "--v=0", f"--screenshot={screenshot}", (site / page).as_uri()],
            capture_output=True, text=True, timeout=120)
        # Chromium logs every console message (log, warning, error, uncaught exception) as "CONSOLE"; a clean page
        # logs none.
        console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
        assert result.returncode == 0, result.stderr[-2000:]
        assert not console, f"{page}: console messages in Chromium:\n" + "\n".join(console)
        assert screenshot.stat().st_size > 10_000, f"the screenshot of {page} is (nearly) blank"
