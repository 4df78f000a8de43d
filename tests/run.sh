#!/usr/bin/env bash
# forewarn's whole test suite, as a new machine runs it: installs the system programs the
# end-to-end tests drive for real (HAProxy, systemd-analyze, etcd, openssl, the plugin toolchains) when missing, then runs every
# test of the workspace with cargo. The wasm plugins are built by build scripts on the way.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: installing ${missing[*]} from Debian's packages (the end-to-end tests use them)"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The C, Python and JavaScript plugin examples need their toolchains (clang and wasi-libc
# from Debian, componentize-py from PyPI, componentize-js from npm): quick when present.
bash tests/install-language-toolchains.sh

# The .deb packaging test needs cargo-deb (a crates.io tool, ~2 minutes to build once).
if ! cargo deb --version >/dev/null 2>&1; then
    echo "tests/run.sh: installing cargo-deb from crates.io (the packaging test builds a .deb)"
    cargo install cargo-deb --version 3.8.0 --locked --quiet
fi

cargo test --workspace --locked --no-fail-fast
