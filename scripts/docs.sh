#!/usr/bin/env bash
# Builds the documentation site (API reference from the docstrings + the guides in docs/*.md) into
# build/docs/html, with Sphinx warnings as errors. Needs the built package (scripts/build.sh) and the
# requirements in requirements-dev.txt. Open build/docs/html/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
out=${1:-build/docs/html}
# The guides' figures, drawn from the library's own outputs (docs/figures.py; deterministic bytes).
"$PYTHON" docs/figures.py >/dev/null
# docs/conf.py picks the package: this source tree's when it is built in place, else the installed one.
"$PYTHON" -m sphinx -W --keep-going -q -b html docs "$out"
echo "documentation: $out/index.html"
