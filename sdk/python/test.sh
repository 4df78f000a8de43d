#!/usr/bin/env bash
# Runs the Python SDK's own tests (sdk/python/tests: forewarn.testing) with pytest from
# sdk/python/.venv (tests/install-language-toolchains.sh python installs it), else python3 -m pytest.
set -euo pipefail
sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="$sdk_dir/.venv/bin/python3"
if ! "$python" -m pytest --version >/dev/null 2>&1; then
    python=python3
    "$python" -m pytest --version >/dev/null 2>&1 || {
        echo "error: pytest not found: run tests/install-language-toolchains.sh python (installs it into $sdk_dir/.venv)" >&2
        exit 1
    }
fi
cd "$sdk_dir"
PYTHONPATH="$sdk_dir${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m pytest -q -p no:cacheprovider tests "$@"
