#!/usr/bin/env bash
# forewarn's whole test suite, as a new machine runs it: installs the system programs the
# end-to-end tests drive for real (HAProxy, systemd-analyze) when missing, then runs every
# test of the workspace with cargo. The wasm plugins are built by build scripts on the way.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: installing ${missing[*]} from Debian's packages (the end-to-end tests use them)"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cargo test --workspace --locked
