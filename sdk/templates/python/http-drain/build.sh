#!/usr/bin/env bash
# Builds {{name}}.wasm from {{name_snake}}.py with the forewarn Python SDK's forewarn-build-py
# (componentize-py), from .venv (see requirements.txt) or else from PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
build=.venv/bin/forewarn-build-py
[[ -x "$build" ]] || build="$(command -v forewarn-build-py || true)"
if [[ -z "$build" ]]; then
    echo "error: forewarn-build-py not found: python3 -m venv .venv && .venv/bin/pip install -r requirements.txt" >&2
    exit 1
fi
exec "$build" {{name_snake}}.py -o {{name}}.wasm
