#!/usr/bin/env bash
# Builds a forewarn plugin written in JavaScript into a WebAssembly component, in one command:
#   sdk/js/build.sh my-plugin.js -o my-plugin.wasm
# The module exports onEvent(event, phase, ctx) (see sdk/js/README.md). Needs node and
# componentize-js, installed into sdk/js/node_modules by tests/install-language-toolchains.sh js.
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

plugin=""
output=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -o) output="$2"; shift 2 ;;
        -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
        *) plugin="$1"; shift ;;
    esac
done
if [[ -z "$output" || -z "$plugin" ]]; then
    echo "usage: $0 PLUGIN.js -o PLUGIN.wasm" >&2
    exit 2
fi
if [[ ! -d "$sdk_dir/node_modules/@bytecodealliance/componentize-js" ]]; then
    echo "error: componentize-js is not installed in $sdk_dir/node_modules: run tests/install-language-toolchains.sh js" >&2
    exit 1
fi

node "$sdk_dir/build.mjs" "$plugin" "$output"
echo "built $output ($(stat -c %s "$output") bytes)"
