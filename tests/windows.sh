#!/usr/bin/env bash
# The Windows part of the test command (tests/run.sh runs it last): cross-compiles forewarn for
# x86_64-pc-windows-gnu with mingw-w64 and runs, under Wine, the platform seams' unit tests,
# the runtime's sandbox tests and the runtime's and the daemon's unit tests (those needing a
# Linux tool are ignored on Windows, each saying why; cargo's target runner is
# tests/windows/wine-runner.sh); then the end-to-end tests of forewarn.exe against the
# simulator running natively (host/tests/e2e_windows.rs, ignored in a plain `cargo test`),
# and builds and lists the zip package (packaging/windows/make-zip.sh).
#
# The cross build has a target dir of its own (target/windows: the Linux build is left as
# it is), no incremental state and no debug info (lean on disk), and reuses the wasm
# plugins the Linux build compiled (FOREWARN_WASM_TARGET_DIR=target/wasm).
#
#   bash tests/windows.sh [build|test]   (neither: both; `build` can run in the background,
#                                         at low priority, while the Linux tests run)
set -euo pipefail
mode="${1:-all}"
cd "$(dirname "$0")/.."
repo_dir="$PWD"

started=$SECONDS
phase() { echo "windows: $1 ($((SECONDS - started)) s so far)"; }

bash tests/install-windows-toolchain.sh
source tests/windows/env.sh
phase "toolchain and Wine prefix ready"
mkdir -p "$repo_dir/target/windows"

windows_dir="$repo_dir/target/windows"
cross_env=(
    CARGO_TARGET_DIR="$windows_dir"
    CARGO_INCREMENTAL=0
    CARGO_PROFILE_DEV_DEBUG=false
    CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$repo_dir/tests/windows/wine-runner.sh"
    FOREWARN_WASM_TARGET_DIR="$repo_dir/target/wasm"
)
cross=(--locked --target "$WINDOWS_TARGET")

exe="$windows_dir/$WINDOWS_TARGET/debug/forewarn.exe"
if [[ "$mode" != test ]]; then
# One cargo invocation builds the test binaries and the exe: selecting an integration test
# of forewarn-host (e2e_windows, whose tests are ignored there) makes cargo link
# forewarn.exe with the same features as the tests. A separate `cargo build --bin` would
# resolve the features without the dev-dependencies and compile wasmtime and its
# dependency tree a second time.
env "${cross_env[@]}" cargo test "${cross[@]}" -p forewarn-platform -p forewarn-runtime \
    -p forewarn-pipeline -p forewarn-host --lib --test sandbox --test e2e_windows --no-run \
    --message-format=json-render-diagnostics > "$windows_dir/test-binaries.json"
[[ -x "$exe" ]] || { echo "windows: $exe was not built" >&2; exit 1; }
phase "cross-compiled ($(du -sh "$windows_dir" | cut -f1) in target/windows)"
fi
[[ "$mode" == build ]] && exit 0

# The test binaries cargo built: "TARGET PACKAGE_DIR EXECUTABLE" lines.
binaries="$(python3 - "$windows_dir/test-binaries.json" <<'PY'
import json, os, sys
for line in open(sys.argv[1]):
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["profile"]["test"]:
        print(message["target"]["name"], os.path.dirname(message["manifest_path"]), message["executable"])
PY
)"
# Runs the test binary of TARGET under Wine from its package's directory, as cargo would.
run_under_wine() {
    local target="$1"
    shift
    local dir executable
    read -r _ dir executable < <(awk -v t="$target" '$1 == t' <<<"$binaries" | head -n 1) || true
    [[ -n "${executable:-}" ]] || { echo "windows: no test binary $target was built" >&2; exit 1; }
    echo "windows: $target under Wine $*"
    (cd "$dir" && "$repo_dir/tests/windows/wine-runner.sh" "$executable" "$@")
}
run_under_wine forewarn_platform
run_under_wine sandbox
run_under_wine forewarn_runtime
run_under_wine forewarn_pipeline
run_under_wine forewarn_host
phase "unit and sandbox tests passed under Wine"

FOREWARN_WINDOWS_EXE="$exe" cargo test --locked --workspace --test e2e_windows -- --ignored
phase "end-to-end tests of forewarn.exe passed under Wine"

packaging/windows/make-zip.sh "$exe" "$windows_dir/forewarn-windows-x86_64.zip"
"$WINESERVER" --kill 2>/dev/null || true
phase "zip built and listed; done"
