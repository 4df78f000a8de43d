#!/usr/bin/env bash
# Installs what the registry tests (host/tests/e2e_registry.rs, host/tests/supply_hostile.rs)
# drive for real, when missing: Debian's docker-registry (the CNCF distribution server; the
# tests start it themselves on loopback with a config of their own), htpasswd
# (apache2-utils) for its basic auth, OpenSSH's ssh-keygen for signing keys, and (by
# tests/install-cargo-tools.sh) wkg as the third-party client.
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
# wkg, the third-party client, is a crates.io tool: tests/install-cargo-tools.sh builds it.
