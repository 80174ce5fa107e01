"""Sphinx configuration: the API reference (autodoc over the package's docstrings) and the guides in docs/*.md.

Build: ``python -m sphinx -W --keep-going -b html docs build/docs/html`` (scripts/docs.sh does this and checks the
result in headless Chromium). The package must be importable: its op library is loaded on import.
"""

import glob
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The source tree's package when it is built in place (scripts/build.sh, pip install -e .); otherwise an installed
# one (pip install .), whose docstrings are the same source's.
SOURCES = os.path.join(ROOT, "python")
if glob.glob(os.path.join(SOURCES, "torch_ragged", "_C*.so")) or importlib.util.find_spec("torch_ragged") is None:
    sys.path.insert(0, SOURCES)

from torch_ragged import __version__  # noqa: E402

project = "torch_ragged"
author = "the torch_ragged authors"
copyright = "the torch_ragged authors, BSD-3-Clause"  # noqa: A001 (Sphinx's name)
release = version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# Docstrings write `name` for a reference to another object of the package (or of torch); with this role those
# become links where Sphinx knows the target and plain code where it does not.
default_role = "py:obj"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Offline by default (CI machines and the GPU box have no route to docs.pytorch.org); set
# TORCH_RAGGED_DOCS_INTERSPHINX=1 to link torch / numpy / Python names to their own documentation.
intersphinx_mapping = {}
if os.environ.get("TORCH_RAGGED_DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "torch": ("https://docs.pytorch.org/docs/stable", None),
        "numpy": ("https://numpy.org/doc/stable", None),
    }

myst_heading_anchors = 3
html_theme = "furo"
html_title = f"torch_ragged {version}"
