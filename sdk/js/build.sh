#!/usr/bin/env bash
# Builds a forewarn plugin written in JavaScript into a WebAssembly component, in one command:
#   sdk/js/build.sh my-plugin.js -o my-plugin.wasm
# The module exports onEvent(event, phase, ctx) and optionally onStart(ctx) (see sdk/js/README.md). Needs node and
# componentize-js, installed into sdk/js/node_modules by tests/install-language-toolchains.sh js.
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

source "$sdk_dir/../build-args.sh"
parse_build_args "PLUGIN.js -o PLUGIN.wasm" "$@"
if [[ ${#inputs[@]} -ne 1 ]]; then
    echo "usage: $0 PLUGIN.js -o PLUGIN.wasm (one module)" >&2
    exit 2
fi
plugin="${inputs[0]}"
if [[ ! -d "$sdk_dir/node_modules/@bytecodealliance/componentize-js" ]]; then
    echo "error: componentize-js is not installed in $sdk_dir/node_modules: run tests/install-language-toolchains.sh js" >&2
    exit 1
fi

node "$sdk_dir/build.mjs" "$plugin" "$output"
echo "built $output ($(stat -c %s "$output") bytes)"
