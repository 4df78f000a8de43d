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
# Dependencies at opt-level 1, not the workspace's 2: the cross build is as large as the Linux
# one (318 crates, cranelift and wasmtime the longest), and it is the cold run's last wait,
# while the Windows tests (a minute under Wine) hardly notice slower host code. The plugins'
# machine code is cranelift's output, not cranelift's own code, so what the tests check of
# it is the same.
cross=(--locked --target "$WINDOWS_TARGET" --config 'profile.dev.package."*".opt-level=1')

exe="$windows_dir/$WINDOWS_TARGET/debug/forewarn.exe"
if [[ "$mode" != test ]]; then
# One cargo invocation builds the test binaries and the exe: selecting an integration test
# of forewarn-host (e2e_windows, whose tests are ignored there) makes cargo link
# forewarn.exe with the same features as the tests. A separate `cargo build --bin` would
# resolve the features without the dev-dependencies and compile wasmtime and its
# dependency tree a second time.
env "${cross_env[@]}" cargo test "${cross[@]}" -p forewarn-platform -p forewarn-runtime \
    -p forewarn-pipeline -p forewarn-service-manager -p forewarn-coordination -p forewarn-daemon -p forewarn-host \
    --lib --test sandbox --test e2e_windows --no-run \
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

# Every step runs, whatever failed before it: each failure is named on a line of its own
# starting "windows: FAILED:" (tests/run.sh's summary counts those and the failed tests), and
# the exit status is non-zero at the end.
failures=0
fail() {
    echo "windows: FAILED: $*"
    failures=$((failures + 1))
}
tests_failed=0

# What each Wine run is checked against: the Linux build's test binaries (built already when
# tests/run.sh runs this; built here otherwise) list each crate's tests, and
# host/tests/test_tree_honesty.rs lists those left out on Windows (compiled out or ignored,
# each with its reason).
linux_json="$repo_dir/target/linux-test-binaries.json"
exclusions="$windows_dir/windows-exclusions.tsv"
rm -f "$exclusions"
# The whole workspace first (what tests/run.sh built: nothing to do); when some other target
# does not build, only the ones compared with (the Linux failure is named by the Linux step).
if cargo test --workspace --locked --no-run --message-format=json-render-diagnostics \
    > "$linux_json" 2>/dev/null ||
    cargo test --locked -p forewarn-platform -p forewarn-runtime -p forewarn-pipeline \
        -p forewarn-service-manager -p forewarn-coordination -p forewarn-daemon -p forewarn-host --lib --test sandbox --test e2e_windows --test test_tree_honesty \
        --no-run --message-format=json-render-diagnostics > "$linux_json"; then
    honesty="$(python3 - "$linux_json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["target"]["name"] == "test_tree_honesty":
        print(message["executable"])
PY
)"
    FOREWARN_WINDOWS_EXCLUSIONS="$exclusions" "$honesty" --exact \
        no_test_skips_returns_early_or_leaves_windows_without_a_reason >/dev/null 2>&1 || true
    [[ -s "$exclusions" ]] ||
        fail "the listing of the tests left out on Windows ($honesty) wrote nothing to $exclusions"
else
    fail "the Linux test binaries did not build: the Wine runs' counts cannot be checked"
fi

# Checks the count of the run logged in $3 of TARGET ($1, in package dir $2) against Linux's.
check_count() {
    local report
    if [[ ! -s "$exclusions" ]]; then
        echo "windows: $1: its count of tests run is not checked (the failure above)"
    elif report="$(python3 "$repo_dir/tests/windows/check-count.py" "$linux_json" "$exclusions" "$2" "$1" "$3" "${@:4}")"; then
        sed 's/^/windows: /' <<<"$report"
    else
        sed '$d; s/^/windows: /' <<<"$report"
        fail "$(tail -n 1 <<<"$report")"
    fi
}

# Runs the test binary of TARGET under Wine from its package's directory, as cargo would,
# then checks its count.
run_under_wine() {
    local target="$1"
    shift
    local dir executable status=0 log="$windows_dir/wine-$target.log"
    read -r _ dir executable < <(awk -v t="$target" '$1 == t' <<<"$binaries" | head -n 1) || true
    if [[ -z "${executable:-}" ]]; then
        fail "no test binary $target was built"
        return
    fi
    echo "windows: $target under Wine $*"
    (cd "$dir" && "$repo_dir/tests/windows/wine-runner.sh" "$executable" "$@") 2>&1 |
        tee "$log" || status=$?
    if ! grep -q "^test result:" "$log"; then
        fail "$target exited $status under Wine without a test result (it crashed or did not start)"
        return
    fi
    [[ "$status" -eq 0 ]] || tests_failed=1
    check_count "$target" "$dir" "$log"
}
# No persistent Wine server (`wineserver --persistent`): the Wine services a test binary
# starts (winedevice.exe) inherit its stdout, the pipe to `tee` below, and live as long as
# the server, so the first run's `tee` never saw its end and the step hung.
run_under_wine forewarn_platform
run_under_wine sandbox
run_under_wine forewarn_runtime
run_under_wine forewarn_pipeline
run_under_wine forewarn_service_manager
run_under_wine forewarn_coordination
run_under_wine forewarn_daemon
run_under_wine forewarn_host
phase "unit and sandbox tests run under Wine"

e2e_log="$windows_dir/e2e-windows.log"
e2e_status=0
FOREWARN_WINDOWS_EXE="$exe" cargo test --locked --workspace --test e2e_windows -- --ignored 2>&1 |
    tee "$e2e_log" || e2e_status=$?
if grep -q "^test result:" "$e2e_log"; then
    [[ "$e2e_status" -eq 0 ]] || tests_failed=1
    check_count e2e_windows "$repo_dir/host" "$e2e_log" --all-ignored
else
    fail "the end-to-end tests of forewarn.exe (e2e_windows) exited $e2e_status without a test result"
fi
phase "end-to-end tests of forewarn.exe run under Wine"

packaging/windows/make-zip.sh "$exe" "$windows_dir/forewarn-windows-x86_64.zip" ||
    fail "the zip (packaging/windows/make-zip.sh) could not be built"
"$WINESERVER" --kill 2>/dev/null || true
phase "zip built and listed; done"
if [[ "$failures" -gt 0 || "$tests_failed" -ne 0 ]]; then
    echo "windows: $failures step(s) failed$([[ "$tests_failed" -ne 0 ]] && echo ", and tests failed (named above)")" >&2
    exit 1
fi
