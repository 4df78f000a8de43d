#!/usr/bin/env bash
# Builds {{name}}.wasm from {{name}}.js with the forewarn JavaScript SDK (componentize-js).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
sdk_dir="${FOREWARN_SDK_JS:-{{sdk_dir}}}"
if [[ ! -x "$sdk_dir/build.sh" ]]; then
    echo "error: the forewarn JavaScript SDK is not at $sdk_dir: set FOREWARN_SDK_JS to the sdk/js directory of a forewarn checkout" >&2
    exit 1
fi
exec "$sdk_dir/build.sh" {{name}}.js -o {{name}}.wasm
