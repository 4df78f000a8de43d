#!/usr/bin/env bash
# Runs the native tests (test_*.py) with pytest from the forewarn Python SDK's venv
# (tests/install-language-toolchains.sh python installs it), else python3 -m pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
sdk_dir="${FOREWARN_SDK_PYTHON:-{{sdk_dir}}}"
if [[ ! -f "$sdk_dir/forewarn/testing.py" ]]; then
    echo "error: the forewarn Python SDK is not at $sdk_dir: set FOREWARN_SDK_PYTHON to the sdk/python directory of a forewarn checkout" >&2
    exit 1
fi
python="$sdk_dir/.venv/bin/python3"
if ! "$python" -m pytest --version >/dev/null 2>&1; then
    python=python3
    "$python" -m pytest --version >/dev/null 2>&1 || {
        echo "error: pytest not found: run tests/install-language-toolchains.sh python in the forewarn checkout (installs it into $sdk_dir/.venv), or pip install pytest" >&2
        exit 1
    }
fi
PYTHONPATH="$sdk_dir${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m pytest -q -p no:cacheprovider "$@"
