#!/usr/bin/env bash
# Installs the CloudEvents SDK for Python (PyPI `cloudevents`, pinned) into
# tests/.tools/cloudevents-venv: host/tests/e2e_outcome.rs parses `forewarn events export
# --format cloudevents` with it and round-trips each event. Idempotent: a second run checks
# and returns at once. Needs python3 with venv/ensurepip (tests/install-language-toolchains.sh
# installs python3-venv where it is missing).
set -euo pipefail

CLOUDEVENTS_VERSION="2.2.0"

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo_dir/tests/.tools/cloudevents-venv"

installed() {
    [[ -x "$venv/bin/python3" ]] \
        && [[ "$("$venv/bin/python3" -c 'import importlib.metadata as m; print(m.version("cloudevents"))' 2>/dev/null)" == "$CLOUDEVENTS_VERSION" ]]
}

if installed; then
    echo "cloudevents: the Python SDK $CLOUDEVENTS_VERSION is already installed"
    exit 0
fi
echo "cloudevents: installing the Python SDK $CLOUDEVENTS_VERSION into tests/.tools/cloudevents-venv (pip)"
for attempt in 1 2; do
    rm -rf "$venv"
    if python3 -m venv --without-pip "$venv" \
        && "$venv/bin/python3" -m ensurepip --upgrade --default-pip >/dev/null \
        && "$venv/bin/pip" install --quiet --disable-pip-version-check "cloudevents==$CLOUDEVENTS_VERSION"; then
        exit 0
    fi
    echo "cloudevents: attempt $attempt to set up the venv failed (see above)" >&2
done
exit 1
