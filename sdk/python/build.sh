#!/usr/bin/env bash
# Builds a forewarn plugin written in Python into a WebAssembly component, in one command:
#   sdk/python/build.sh my_plugin.py -o my-plugin.wasm
# The module defines on_event(event, phase, ctx) and optionally on_start(ctx) (see sdk/python/README.md). Needs
# componentize-py, installed into sdk/python/.venv by tests/install-language-toolchains.sh python.
# The work is the package's own `forewarn-build-py` (forewarn/build.py), run from this checkout.
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="$sdk_dir/.venv/bin/python3"

if [[ ! -x "$sdk_dir/.venv/bin/componentize-py" && -z "${COMPONENTIZE_PY:-}" ]]; then
    echo "error: componentize-py not found in $sdk_dir/.venv: run tests/install-language-toolchains.sh python" >&2
    exit 1
fi
[[ -x "$python" ]] || python=python3
PYTHONPATH="$sdk_dir${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m forewarn.build "$@"
