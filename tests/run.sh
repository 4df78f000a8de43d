#!/usr/bin/env bash
# forewarn's whole test suite, as a new machine runs it: installs what the end-to-end tests
# drive for real when missing (HAProxy, systemd-analyze, etcd, openssl, procps, dpkg-deb,
# headless Chromium, Prometheus and promtool, rpm (rpmbuild) and cloud-init from Debian; the
# C, Python and JavaScript plugin toolchains; Azurite; puppeteer-core; docker-registry,
# htpasswd and (tests/install-cargo-tools.sh, in the background) wkg for the registry tests and
# cargo-deb; mingw-w64 and Wine) while the workspace builds beside the installs, then runs
# every test binary of the workspace, several at once (tests/test-binaries.py), then the
# Windows build's tests under Wine (tests/windows.sh). The build scripts build the wasm
# plugins on the way, adding the wasm32-wasip2 target with rustup when the toolchain lacks
# it. Every step runs whatever failed before it, and the run ends with one line over all of
# them, `N passed, N failed, N ignored` (a failure that names no test, such as a build, counts
# as one), then each failure: the test, its binary and its panic message (tests/summary.py).
# The exit status is non-zero when anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/apt-install.sh
# Where the time goes: each phase's seconds, printed with the summary (tests/summary.py).
mkdir -p target
phase_times=target/run-phases.txt
: > "$phase_times"
phase_started=$SECONDS
phase_done() { echo "$1:$((SECONDS - phase_started))" >> "$phase_times"; phase_started=$SECONDS; }
# A background job runs at a lower priority (`nice`) to keep out of the way of the work in
# front of it; once the run waits on it, that reason is gone, and beside other load on the
# machine (a busy CI host, a VM under maintenance load) the low priority would starve it:
# stop 58's run beside two busy loops waited 40 minutes on the nice-10 wkg build. This lifts
# the job and everything it started to the run's own priority (as root; elsewhere lowering
# niceness is not allowed and the job keeps its priority).
unnice() {
    local pids=("$1") all=()
    while ((${#pids[@]})); do
        all+=("${pids[@]}")
        mapfile -t pids < <(pgrep -P "$(IFS=,; echo "${pids[*]}")" || true)
    done
    renice -n 0 -p "${all[@]}" > /dev/null 2>&1 || true
}

# wkg and cargo-deb (crates.io tools the registry and packaging tests drive) compile from
# source: in the background from the start, beside the installs that wait on the network and
# the workspace build, at a lower priority; waited for just before the tests run.
cargo_tools_log=target/cargo-tools.log
nice -n 10 bash tests/install-cargo-tools.sh > "$cargo_tools_log" 2>&1 &
cargo_tools=$!

# The workspace build (the Linux test binaries; their build scripts build the wasm plugins)
# needs nothing the installs below bring, so it starts now, beside them: they wait on the
# network and the disk, it on the CPU. Its artifact list (JSON) is what the test step runs;
# its compiler output goes to target/linux-build.log, printed when it is done.
build_log=target/linux-build.log
binaries_json=target/linux-test-binaries.json
cargo test --workspace --locked --no-fail-fast --no-run --message-format=json-render-diagnostics \
    > "$binaries_json" 2> "$build_log" &
linux_build=$!

missing=()
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v ps >/dev/null 2>&1 || missing+=(procps)
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v make >/dev/null 2>&1 || missing+=(make)     # the C plugin template's Makefile
command -v gcc >/dev/null 2>&1 || missing+=(gcc)       # the C SDK's native testing host
command -v pkg-config >/dev/null 2>&1 || missing+=(pkgconf)  # the C SDK package's forewarn-sdk.pc
# The fleet tooling test (host/tests/e2e_fleet_tooling.rs): promtool and a Prometheus for the
# alert rules and the dashboard, rpm (rpmbuild) to build and read the .rpm, cloud-init to
# check its example.
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v rpm >/dev/null 2>&1 || missing+=(rpm)
command -v cloud-init >/dev/null 2>&1 || missing+=(cloud-init)
# The shutdown tests (host/tests/e2e_host_shutdown.rs): a private system bus (the real
# dbus-daemon) on which the test serves logind's documented Manager interface. Debian's
# elogind cannot be installed beside chromium here (`apt-get install -s elogind` removes it
# and 13 more packages), and runs only as the machine's one session manager anyway.
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus-daemon)
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: installing ${missing[*]} from Debian's packages (the end-to-end tests use them)"
    apt_install "${missing[@]}"
fi

# The C, Python and JavaScript plugin examples need their toolchains (clang and wasi-libc
# from Debian, componentize-py from PyPI, componentize-js from npm): quick when present.
bash tests/install-language-toolchains.sh
# The CloudEvents SDK (PyPI, pinned) in tests/.tools/cloudevents-venv: e2e_outcome parses the
# `forewarn events export --format cloudevents` output with it. Quick when present.
bash tests/install-cloudevents.sh
# A Node.js the script had to fetch (the machine's was missing or too old) comes first.
[ -x tests/.tools/node/bin/node ] && export PATH="$PWD/tests/.tools/node/bin:$PATH"

# Azurite (npm, pinned) into tests/.tools/azurite: the blob storage tests run it over HTTPS
# with OAuth against the simulator's managed identity tokens. Quick when present.
bash tests/install-azurite.sh

# The page tests drive headless Chromium (above) with puppeteer-core (npm, pinned in
# tests/browser/package-lock.json) against the simulator console and the status page.
bash tests/install-browser.sh

# The registry tests run Debian's docker-registry (CNCF distribution) on loopback, with
# htpasswd and ssh-keygen, and wkg (crates.io, pinned) as the third-party client.
bash tests/install-registry.sh


# The Windows build's tools (mingw-w64 and wine64 from Debian, the rustup target, a Wine
# prefix with its ProcessPrng stand-in): quick when present.
bash tests/install-windows-toolchain.sh
# The Windows cross build (its own target dir) starts now, beside the workspace build, at the
# lowest priority: it is as large as the Linux build and its longest crates (cranelift,
# wasmtime) compile one after another, so it takes whatever core the workspace build leaves
# idle and then the time the Linux tests spend waiting on clocks and servers. Started after
# the tests (as before 2026-12-02) it was the cold run's last wait: 603-934 s.
windows_build_log=target/windows-build.log
nice -n 19 bash tests/windows.sh build > "$windows_build_log" 2>&1 &
windows_build=$!

phase_done "installing what the tests drive (Debian packages, toolchains, Azurite, Chromium, mingw-w64, Wine), the workspace build beside it"
linux_status=0
wait "$linux_build" || linux_status=$?
cat "$build_log"
phase_done "waiting for the workspace build (the Linux test binaries and the wasm plugins)"
# The pipeline is pure (docs/architecture.md, "No clock in the pipeline"): its clippy.toml bans
# the clock, files, threads, processes and environment, and this step makes the bans hold in
# every run (a `SystemTime::now()` in host/pipeline/src fails it). Only those two lints, so a
# style lint cannot fail the suite; `cargo clippy --all-targets -- -D warnings` is the rest.
# It runs beside the tests (it only type-checks one crate); its output is printed after them.
purity_log=target/pipeline-purity.log
cargo clippy -p forewarn-pipeline --lib --locked -- -A clippy::all \
    -D clippy::disallowed_methods -D clippy::disallowed_types > "$purity_log" 2>&1 &
purity=$!
# The binary without its default `simulator` feature (the daemon and the operator's commands,
# no demo, simulator, plugin test or plugin dev) still builds: a type-check of the binary
# alone (no dev-dependencies, which would turn the feature back on), beside the tests at a
# lower priority; cargo runs it after the purity check (one build directory).
daemon_alone_log=target/no-default-features.log
nice -n 10 cargo check -p forewarn-host --no-default-features --bins --locked \
    > "$daemon_alone_log" 2>&1 &
daemon_alone=$!
cargo_tools_status=0
unnice "$cargo_tools"
wait "$cargo_tools" || cargo_tools_status=$?
cat "$cargo_tools_log"
phase_done "waiting for wkg and cargo-deb (crates.io tools, built in the background)"
# The Linux test binaries, several at once (tests/test-binaries.py: most wait on servers and
# clocks, not the CPU), each whole in target/linux-tests.log: the failures are named again at
# the very end, after the Windows step, where a CI log's tail shows them.
linux_log=target/linux-tests.log
if [[ "$linux_status" -eq 0 ]]; then
    python3 tests/test-binaries.py "$binaries_json" "$linux_log" || linux_status=$?
else
    echo "tests/run.sh: the workspace build failed (exit $linux_status, its output above): the Linux tests do not run" >&2
    cp "$build_log" "$linux_log"
fi
phase_done "running the Linux tests (several binaries at once; the Windows cross build, started after the installs, beside them at nice 19)"
purity_status=0
wait "$purity" || purity_status=$?
cat "$purity_log"
phase_done "the pipeline's purity (clippy, beside the tests)"
daemon_alone_status=0
unnice "$daemon_alone"
wait "$daemon_alone" || daemon_alone_status=$?
cat "$daemon_alone_log"
phase_done "forewarn without its simulator feature (cargo check, beside the tests)"
# Last, so the Linux results come first: forewarn cross-compiled for Windows and its tests
# under Wine (docs/windows.md), reusing the wasm plugins the Linux build compiled. Whatever
# failed before, every step that can run runs, and the run ends with one account of all.
windows_build_status=0
unnice "$windows_build"
wait "$windows_build" || windows_build_status=$?
phase_done "waiting for the Windows cross build"
cat "$windows_build_log"
windows_log=target/windows-tests.log
windows_tests_status=0
if [[ "$windows_build_status" -ne 0 ]]; then
    echo "tests/run.sh: the Windows cross build failed (exit $windows_build_status, its output above): its tests do not run" >&2
    : > "$windows_log"
else
    bash tests/windows.sh test 2>&1 | tee "$windows_log" || windows_tests_status=$?
fi
phase_done "the Windows tests under Wine"
# One line, `N passed, N failed, N ignored` over both steps (CI reads it), then what failed
# in either (tests/summary.py); its exit status is the run's.
echo
FOREWARN_RUN_PHASES="$phase_times" python3 tests/summary.py \
    "installing wkg and cargo-deb:$cargo_tools_status:$cargo_tools_log" \
    "the pipeline's purity (clippy's bans in host/pipeline/clippy.toml):$purity_status:$purity_log" \
    "forewarn built without its default features (cargo check -p forewarn-host --no-default-features):$daemon_alone_status:$daemon_alone_log" \
    "the Linux tests:$linux_status:$linux_log" \
    "the Windows cross build:$windows_build_status:$windows_build_log" \
    "the Windows tests under Wine:$windows_tests_status:$windows_log"
