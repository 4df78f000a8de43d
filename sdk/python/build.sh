#!/usr/bin/env bash
# Builds a forewarn plugin written in Python into a WebAssembly component, in one command:
#   sdk/python/build.sh my_plugin.py -o my-plugin.wasm
# The module defines on_event(event, phase, ctx) and optionally on_start(ctx) (see sdk/python/README.md). Needs
# componentize-py, installed into sdk/python/.venv by tests/install-language-toolchains.sh python.
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$sdk_dir/../.." && pwd)"
componentize_py="${COMPONENTIZE_PY:-$sdk_dir/.venv/bin/componentize-py}"

source "$sdk_dir/../build-args.sh"
parse_build_args "PLUGIN.py -o PLUGIN.wasm" "$@"
plugin="${inputs[0]}"
if [[ ${#inputs[@]} -ne 1 || "$plugin" != *.py ]]; then
    echo "usage: $0 PLUGIN.py -o PLUGIN.wasm (one .py module)" >&2
    exit 2
fi
if [[ ! -x "$componentize_py" ]]; then
    echo "error: componentize-py not found at $componentize_py: run tests/install-language-toolchains.sh python" >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
module="$(basename "$plugin" .py)"
# The component's entry module: the SDK turns the plugin's on_event (and on_start, if it has
# one) into the Handler export.
cat > "$work/forewarn_entry.py" <<PY
import forewarn
import $module as _plugin

Handler = forewarn.handler(_plugin.on_event, getattr(_plugin, "on_start", None))
PY

# A copy of the plugin's folder (hidden files, __pycache__ and .wasm left out), so that the
# import at build time writes no __pycache__ into the source tree.
mkdir "$work/src"
tar -C "$(dirname "$plugin")" -cf - --exclude='./.*' --exclude='__pycache__' --exclude='*.wasm' . \
    | tar -C "$work/src" -xf -

"$componentize_py" -d "$repo_dir/wit" -w event-handler componentize forewarn_entry \
    -p "$work" -p "$sdk_dir" -p "$work/src" -o "$output" >/dev/null
echo "built $output ($(stat -c %s "$output") bytes)"
