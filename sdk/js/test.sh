#!/usr/bin/env bash
# Runs the JavaScript SDK's own tests (sdk/js/test: testing.js) with node's test runner.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node --test test/*.test.js
