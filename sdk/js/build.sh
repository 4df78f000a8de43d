#!/usr/bin/env bash
# Builds a forewarn plugin written in JavaScript into a WebAssembly component, in one command:
#   sdk/js/build.sh my-plugin.js -o my-plugin.wasm
# The module exports onEvent(event, phase, ctx) and optionally onStart(ctx) (see sdk/js/README.md). Needs node and
# componentize-js, installed into sdk/js/node_modules by tests/install-language-toolchains.sh js.
# The work is the package's own `forewarn-build-js` (build.mjs), run from this checkout.
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ ! -d "$sdk_dir/node_modules/@bytecodealliance/componentize-js" ]]; then
    echo "error: componentize-js is not installed in $sdk_dir/node_modules: run tests/install-language-toolchains.sh js" >&2
    exit 1
fi
exec node "$sdk_dir/build.mjs" "$@"
