#!/usr/bin/env python3
"""The account of a whole test run (tests/run.sh prints it last): one line

    N passed, N failed, N ignored

summed over every `test result:` line of the logs given (the Linux `cargo test`, the Windows
test binaries under Wine and the end-to-end tests of forewarn.exe), then the failures of
every step, whichever failed first: each failed test under the binary that ran it with the
first lines of its panic message (tests/failed-tests.sh), and each failure that names no test
(a build, a test binary that ended without a result, a Wine run that ran fewer tests than the
Linux build lists: the "windows: FAILED:" lines of tests/windows.sh), each counted as one
failed. Exits 1 when anything failed.

    summary.py STEP:STATUS:LOG ...     (STEP a name, STATUS its exit status, LOG its output;
                                        LOG may be absent for a step that did not run)
"""
import os
import re
import subprocess
import sys

RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
STARTS = re.compile(r"^\s+(Running|Doc-tests) (.*)$")
FINISHED = re.compile(r"^test result: .*; finished in ([0-9.]+)s")


def read_step(log):
    """(passed, failed, ignored, failed tests, unnamed failures) of one log."""
    passed = failed = ignored = failed_tests = 0
    unnamed = []
    binary, has_result = None, True
    if not log or not os.path.exists(log):
        return passed, failed, ignored, failed_tests, unnamed
    for line in open(log, errors="replace"):
        line = line.rstrip("\n")
        start = STARTS.match(line)
        if start:
            if not has_result:
                unnamed.append(f"{binary} ended without a test result (it crashed or was killed)")
            binary, has_result = start.group(2), False
            continue
        result = RESULT.match(line)
        if result:
            passed += int(result.group(1))
            failed += int(result.group(2))
            ignored += int(result.group(3))
            has_result = True
            continue
        if re.match(r"^test .* \.\.\. FAILED$", line):
            failed_tests += 1
        if line.startswith("windows: FAILED: "):
            unnamed.append(line[len("windows: FAILED: ") :])
    if not has_result:
        unnamed.append(f"{binary} ended without a test result (it crashed or was killed)")
    return passed, failed, ignored, failed_tests, unnamed


def binary_durations(log):
    """[(seconds, binary)] of one log: each binary's `finished in Ns` by the `Running` before it."""
    durations, binary = [], None
    if not log or not os.path.exists(log):
        return durations
    for line in open(log, errors="replace"):
        start = STARTS.match(line.rstrip("\n"))
        if start:
            # "unittests src/lib.rs (target/debug/deps/forewarn_pipeline-0a1b…)": the binary's
            # name without its hash says which crate; the source path alone does not.
            named = re.search(r"\(([^)]*)\)", start.group(2))
            binary = start.group(2)
            if named:
                binary = re.sub(r"-[0-9a-f]{16}(\.exe)?$", "", os.path.basename(named.group(1)))
            continue
        finished = FINISHED.search(line)
        if finished and binary:
            durations.append((float(finished.group(1)), binary))
    return durations


def print_where_the_time_went(specs):
    """The phases' seconds (FOREWARN_RUN_PHASES, written by tests/run.sh) and the slowest test
    binaries: where a cold run's time goes, in every run's output (docs/testing.md)."""
    phases = os.environ.get("FOREWARN_RUN_PHASES")
    if phases and os.path.exists(phases):
        parts, total = [], 0
        for line in open(phases):
            name, _, seconds = line.rstrip("\n").rpartition(":")
            if name and seconds.isdigit():
                parts.append(f"{name} {seconds} s")
                total += int(seconds)
        if parts:
            print(f"tests/run.sh: {total} s in all; where the time went: " + "; ".join(parts))
    durations = []
    for spec in specs:
        durations += binary_durations(spec.split(":", 2)[2])
    if durations:
        durations.sort(reverse=True)
        slowest = ", ".join(f"{b} {s:.0f} s" for s, b in durations[:10])
        total = sum(s for s, _ in durations)
        print(f"tests/run.sh: {len(durations)} test binaries, {total:.0f} s in all; slowest: {slowest}")


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    totals = [0, 0, 0]
    breakdown = []
    failures = []
    anything_failed = False
    for spec in sys.argv[1:]:
        step, status, log = spec.split(":", 2)
        status = int(status)
        passed, failed, ignored, failed_tests, unnamed = read_step(log)
        extra = len(unnamed)
        if status != 0 and failed == 0 and extra == 0:
            where = f" (its output: {log})" if log else ""
            unnamed.append(f"{step} failed with exit status {status}, naming no test{where}")
            extra = 1
        totals[0] += passed
        totals[1] += failed + extra
        totals[2] += ignored
        breakdown.append(f"{step}: {passed} passed / {failed + extra} failed / {ignored} ignored")
        if status != 0 or failed or extra:
            anything_failed = True
            listing = ""
            if failed_tests and log:
                listing = subprocess.run(
                    ["bash", os.path.join(repo, "tests/failed-tests.sh"), log],
                    capture_output=True,
                    text=True,
                ).stdout
            failures.append((step, log, listing, unnamed))
    print("tests/run.sh: " + "; ".join(breakdown))
    print_where_the_time_went(sys.argv[1:])
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} ignored")
    for step, log, listing, unnamed in failures:
        print(f"{step} failed" + (f" (its whole output: {log}):" if log else ":"))
        for line in listing.splitlines():
            if line.startswith("(no failed test line"):
                continue
            print("  " + line)
        for entry in unnamed:
            print(f"  FAILED: {entry}")
    return 1 if anything_failed else 0


if __name__ == "__main__":
    sys.exit(main())
