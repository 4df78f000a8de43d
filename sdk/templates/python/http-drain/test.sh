#!/usr/bin/env bash
# Runs the native tests (test_*.py) with pytest, from .venv (see requirements.txt) or else with
# the python3 on PATH; forewarn.testing.TestHost stands in for the daemon.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
python=.venv/bin/python3
[[ -x "$python" ]] || python=python3
if ! "$python" -c 'import forewarn.testing, pytest' 2>/dev/null; then
    echo "error: the forewarn SDK or pytest is missing for $python: python3 -m venv .venv && .venv/bin/pip install -r requirements.txt" >&2
    exit 1
fi
exec "$python" -m pytest -q -p no:cacheprovider "$@"
