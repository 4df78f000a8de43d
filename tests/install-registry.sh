#!/usr/bin/env bash
# Installs what the registry tests (host/tests/e2e_registry.rs, host/tests/supply_hostile.rs)
# drive for real, when missing: Debian's docker-registry (the CNCF distribution server; the
# tests start it themselves on loopback with a config of their own), htpasswd
# (apache2-utils) for its basic auth, OpenSSH's ssh-keygen for signing keys, and wkg
# (bytecodealliance's wasm-pkg-tools, from crates.io, pinned) as the third-party client.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/apt-install.sh

missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/install-registry.sh: installing ${missing[*]} from Debian's packages"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # The package's service would listen on every interface: no service may start while it
    # installs (policy-rc.d), and on a machine with systemd it is stopped and disabled after.
    policy=/usr/sbin/policy-rc.d
    created=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod 755 "$policy"
        created=yes
    fi
    apt_install "${missing[@]}"
    [ -n "$created" ] && $sudo rm -f "$policy"
    if [ -d /run/systemd/system ]; then
        $sudo systemctl disable --now docker-registry >/dev/null 2>&1 || true
    fi
fi

# wkg: about 520 s of CPU to build from cold (about 5 minutes on 2 idle cores), once per
# machine; `cargo install` keeps it in ~/.cargo/bin like cargo-deb.
WKG_VERSION=0.16.1
if ! wkg --version 2>/dev/null | grep -qx "wkg $WKG_VERSION"; then
    echo "tests/install-registry.sh: installing wkg $WKG_VERSION from crates.io (the registry tests' third-party client; ~5 minutes to build once)"
    cargo install wkg --version "$WKG_VERSION" --locked --quiet
fi
