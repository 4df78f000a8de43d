#!/usr/bin/env bash
# Installs the two crates.io tools the tests drive, when missing: wkg (bytecodealliance's
# wasm-pkg-tools, the registry tests' third-party client: host/tests/e2e_registry.rs) and
# cargo-deb (the .deb packaging test: host/tests/e2e_fleet_tooling.rs), both pinned, into
# ~/.cargo/bin, once per machine.
#
# They are the only things the install phase compiles, so tests/run.sh starts this script in
# the background at the very beginning, beside the Debian, PyPI and npm installs (which wait
# on the network and the disk, not the CPU) and the workspace build, and waits for it only
# before the tests run. Built with `--debug`: the tests run each tool a few times on small
# inputs, so their optimised builds would cost minutes of CPU (wkg alone about 520 s) for
# nothing a test measures.
set -euo pipefail
cd "$(dirname "$0")/.."

WKG_VERSION=0.16.1
if ! wkg --version 2>/dev/null | grep -qx "wkg $WKG_VERSION"; then
    echo "tests/install-cargo-tools.sh: installing wkg $WKG_VERSION from crates.io (the registry tests' third-party client)"
    cargo install wkg --version "$WKG_VERSION" --locked --quiet --debug
fi

CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version >/dev/null 2>&1; then
    echo "tests/install-cargo-tools.sh: installing cargo-deb $CARGO_DEB_VERSION from crates.io (the packaging test builds a .deb)"
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked --quiet --debug
fi
