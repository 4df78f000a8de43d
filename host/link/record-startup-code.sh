#!/usr/bin/env bash
# Records which functions of the release `forewarn` run while the daemon starts (first start,
# with plugins compiled, and restart, from the compile cache) and then idles polling IMDS,
# and writes them to host/link/startup-symbols.txt: the release link puts these functions
# next to each other (host/build.rs), so the idle daemon keeps fewer pages of its code
# resident (BENCHMARKS.md, "Footprint: what each step bought").
#
# Run it again when what the daemon runs at start changes a lot: a symbol that no longer
# exists is skipped by the linker, and a new function not in the list is laid out with the
# rest of the code, so a stale list costs resident memory, never correctness.
#
#   host/link/record-startup-code.sh            # builds the release binary first
#   host/link/record-startup-code.sh --no-build # uses target/release/forewarn as it is
#   KEEP_WORK=1 host/link/record-startup-code.sh   # keeps the logs and profiles, and says where
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/apt-install.sh
root=$PWD
out=host/link/startup-symbols.txt
idle_seconds=${IDLE_SECONDS:-20}

if ! command -v valgrind >/dev/null 2>&1; then
    echo "record-startup-code.sh: installing valgrind from Debian's packages"
    apt_install valgrind
fi
if [ "${1:-}" != "--no-build" ]; then
    cargo build --release -p forewarn-host
fi
binary=$root/target/release/forewarn

work=$(mktemp -d)
simulator_pid=""
cleanup() {
    [ -n "$simulator_pid" ] && kill "$simulator_pid" 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

# An IMDS with nothing scheduled for a day: the daemon starts and polls, as on an idle VM.
printf 'name = "idle"\n\n[[events]]\ntype = "Reboot"\nappear_at = "24h"\n' >"$work/idle.toml"
"$binary" simulate --listen 127.0.0.1:0 --stay --scenario "$work/idle.toml" >"$work/simulator.out" &
simulator_pid=$!
for _ in $(seq 100); do
    grep -q 'http://' "$work/simulator.out" 2>/dev/null && break
    sleep 0.1
done
url=$(grep -o 'http://[0-9.:]*' "$work/simulator.out" | head -n1)
[ -n "$url" ] || { echo "record-startup-code.sh: the simulator printed no address" >&2; exit 1; }

"$binary" plugin export-bundled "$work/plugins" >/dev/null
cat >"$work/forewarn.toml" <<TOML
vm-name = "vm-a"
state-dir = "$work/state"
plugin-dir = "$work/plugins"

[imds]
url = "$url"
poll-interval = "1s"

[admin]
listen = "127.0.0.1:0"
TOML

# One daemon run under callgrind, stopped with SIGTERM as systemd would once every bundled
# plugin has loaded and the daemon idled $idle_seconds more. Children are traced too: the
# plugin compiler child must compile for the CPU valgrind presents (on a CPU with AVX-512 a
# compiled form made natively is refused by the daemon under valgrind), but only the
# daemon's own profile ($name.<its pid>) is kept.
record() {
    local name=$1
    valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
        --trace-children=yes --callgrind-out-file="$work/$name.%p.callgrind" \
        "$binary" run --config "$work/forewarn.toml" >"$work/$name.log" 2>&1 &
    local pid=$!
    local plugins
    plugins=$(ls "$work/plugins"/*.wasm | wc -l)
    for _ in $(seq 1200); do
        [ "$(grep -c 'plugin loaded' "$work/$name.log")" -ge "$plugins" ] && break
        grep -q 'was not loaded' "$work/$name.log" && {
            echo "record-startup-code.sh: a plugin did not load in the $name run:" >&2
            grep 'was not loaded' "$work/$name.log" >&2
            kill -TERM "$pid"
            exit 1
        }
        sleep 0.5
    done
    sleep "$idle_seconds"
    kill -TERM "$pid"
    wait "$pid" || true
    mv "$work/$name.$pid.callgrind" "$work/$name.callgrind" 2>/dev/null
    [ -s "$work/$name.callgrind" ] || { echo "record-startup-code.sh: no profile from the $name run:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
}
record first-start
record restart

# Every function of the binary that ran, sorted so that a new recording diffs against the
# last; Rust's own symbols only (the C library and the plugins' compiled code are not in the
# binary's text).
{
    echo "# Functions of the release forewarn that run at start and while idle, recorded by"
    echo "# host/link/record-startup-code.sh; laid out first by the release link (host/build.rs)."
    cat "$work/first-start.callgrind" "$work/restart.callgrind" |
        sed -n 's/^c\?fn=\(([0-9]*) \)\?//p' |
        grep -E '^_(ZN|R)' |
        LC_ALL=C sort -u
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "record-startup-code.sh: $(grep -vc '^#' "$out") functions in $out"
