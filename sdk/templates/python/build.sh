#!/usr/bin/env bash
# Builds {{name}}.wasm from {{name_snake}}.py with the forewarn Python SDK (componentize-py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
sdk_dir="${FOREWARN_SDK_PYTHON:-{{sdk_dir}}}"
if [[ ! -x "$sdk_dir/build.sh" ]]; then
    echo "error: the forewarn Python SDK is not at $sdk_dir: set FOREWARN_SDK_PYTHON to the sdk/python directory of a forewarn checkout" >&2
    exit 1
fi
exec "$sdk_dir/build.sh" {{name_snake}}.py -o {{name}}.wasm
