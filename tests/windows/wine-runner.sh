#!/usr/bin/env bash
# cargo's target runner for x86_64-pc-windows-gnu (CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER):
# runs a Windows test binary under Wine, in the prefix tests/install-windows-toolchain.sh made.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
exec "$WINE" "$@"
