#!/usr/bin/env bash
# Names the failed tests in a `cargo test` log, each under the test binary that ran it, with
# the first lines of its panic message: tests/run.sh prints this at the very end, so the tail
# of a CI log says what failed even when the Linux tests' output scrolled far above it.
#
#   bash tests/failed-tests.sh target/linux-tests.log
#   bash tests/failed-tests.sh target/windows-tests.log   (the Wine runs, tests/windows.sh)
set -euo pipefail
log="${1:?usage: bash tests/failed-tests.sh CARGO_TEST_LOG}"
awk '
    /^     Running / { binary = $0; sub(/^     Running /, "", binary); next }
    /^windows: [^ ]+ under Wine/ { binary = $2 " (under Wine, tests/windows.sh)"; next }
    /^test .* \.\.\. FAILED$/ { print "FAILED in " binary ": " $2; failed++; next }
    /panicked at/ { print "  " $0; panic_lines = 4; next }
    panic_lines > 0 { print "    " $0; panic_lines--; next }
    /^error: test failed|^error: [0-9]+ targets? failed/ { print; next }
    END { if (failed == 0) print "(no failed test line in the log: a build or a test binary failed; see above)" }
' "$log"
