#!/usr/bin/env bash
# Builds a forewarn plugin written in C into a WebAssembly component, in one command:
#   sdk/c/build.sh my-plugin.c [more.c ...] -o my-plugin.wasm
# Needs clang-19, lld-19, wasi-libc and libclang-rt-19-dev-wasm32 (tests/install-language-toolchains.sh)
# and cargo (it builds host/component-tool, which generates the bindings and wraps the component).
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$sdk_dir/../.." && pwd)"
clang="${CLANG:-clang-19}"

source "$sdk_dir/../build-args.sh"
parse_build_args "PLUGIN.c [MORE.c ...] -o PLUGIN.wasm" "$@"
sources=("${inputs[@]}")
if ! command -v "$clang" >/dev/null; then
    echo "error: $clang not found: run tests/install-language-toolchains.sh c (or apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)" >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 1. C bindings of the contract: event_handler.{h,c} and the component-type object (built with
#    the component tool, which sets $component_tool).
source "$sdk_dir/bindings.sh"
c_bindings "$work/bindings"

# 2. A core wasm module (a reactor: no main, the host calls the export).
if ! "$clang" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Wno-unused-parameter \
    -I "$sdk_dir" -I "$work/bindings" \
    "${sources[@]}" "$sdk_dir/forewarn.c" "$work/bindings/event_handler.c" \
    "$work/bindings/event_handler_component_type.o" \
    -o "$work/core.wasm" 2> "$work/clang.err"; then
    cat "$work/clang.err" >&2
    # The one mistake the linker words least helpfully: the plugin's answer is missing.
    if grep -q "undefined symbol: fw_on_event" "$work/clang.err"; then
        echo "error: ${sources[*]} defines no fw_on_event function, so the plugin would have nothing to answer events with: add \`fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx)\` returning fw_approve() or fw_defer(...)" >&2
    fi
    exit 1
fi
cat "$work/clang.err" >&2   # the warnings of a build that worked

# 3. The component.
"$component_tool" new "$work/core.wasm" -o "$output"
echo "built $output ($(stat -c %s "$output") bytes)"
