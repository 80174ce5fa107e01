#!/usr/bin/env bash
# The demo command: installs, builds the Python package, runs examples/quickstart.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python3 examples/quickstart.py
