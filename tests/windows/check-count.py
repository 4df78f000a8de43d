#!/usr/bin/env python3
"""Checks how many tests a Windows test binary ran under Wine against what the Linux build
lists for the same crate, minus the tests left out on Windows (tests/windows.sh runs it after
each Wine run).

    check-count.py LINUX_JSON EXCLUSIONS PACKAGE_DIR TARGET WINE_LOG [--all-ignored]

LINUX_JSON: `cargo test --no-run --message-format=json` of the Linux workspace; EXCLUSIONS:
the list host/tests/test_tree_honesty.rs writes (FOREWARN_WINDOWS_EXCLUSIONS): "kind file test
reason" lines, kind `compiled-out` (cfg(unix) and the like) or `ignored` (cfg_attr(windows,
ignore)), or `windows-only` (cfg(windows): counted on top); WINE_LOG: the run's output (its `test result:` lines). The Linux test binary lists
its tests (`--list`, and `--list --ignored` for the ones ignored everywhere). With
--all-ignored (e2e_windows, whose tests are ignored in a plain `cargo test`) the run is
expected to have run each of the Linux binary's ignored tests.

Prints one line saying the numbers; exits 1 when the Wine run ran fewer tests than expected.
"""
import json
import os
import re
import subprocess
import sys


def linux_executable(linux_json, package_dir, target):
    for line in open(linux_json):
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            message.get("reason") == "compiler-artifact"
            and message.get("executable")
            and message["profile"]["test"]
            and message["target"]["name"] == target
            and os.path.dirname(message["manifest_path"]) == package_dir
        ):
            return message["executable"], message["target"]["src_path"]
    return None, None


def listed(executable, package_dir, *extra):
    output = subprocess.run(
        [executable, "--list", "--format", "terse", *extra],
        cwd=package_dir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line[: -len(": test")] for line in output.splitlines() if line.endswith(": test")}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    all_ignored = "--all-ignored" in sys.argv
    linux_json, exclusions_file, package_dir, target, wine_log = args
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    passed = failed = results = 0
    for line in open(wine_log, errors="replace"):
        match = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", line)
        if match:
            results += 1
            passed += int(match.group(1))
            failed += int(match.group(2))
    ran = passed + failed

    executable, src_path = linux_executable(linux_json, package_dir, target)
    if executable is None:
        print(f"the Linux build has no test binary {target} of {package_dir} to compare with")
        return 1
    everything = listed(executable, package_dir)
    ignored_everywhere = listed(executable, package_dir, "--ignored")

    if all_ignored:
        expected = len(ignored_everywhere)
        print(
            f"{target}: {ran} ran under Wine; the Linux build lists {expected} "
            f"(its ignored tests, run here with --ignored)"
        )
        if ran < expected:
            print(f"{target} ran {ran} tests under Wine, fewer than the {expected} it has")
            return 1
        return 0

    # The exclusions that belong to this binary: the crate's src/ for a lib, the file itself
    # for an integration test.
    relative_src = os.path.relpath(src_path, repo)
    lib = relative_src.endswith("src/lib.rs")
    scope = os.path.dirname(relative_src) + "/" if lib else relative_src
    left_out = {"compiled-out": set(), "ignored": set()}
    windows_only = 0
    unmatched = []
    for line in open(exclusions_file):
        kind, file, test, *_ = line.rstrip("\n").split("\t")
        if not (file.startswith(scope) if lib else file == scope):
            continue
        if kind == "windows-only":
            windows_only += 1
            continue
        candidates = [name for name in everything if name.split("::")[-1] == test]
        if len(candidates) > 1 and lib:
            top = os.path.relpath(file, scope).split("/")[0].removesuffix(".rs")
            candidates = [name for name in candidates if name.split("::")[0] == top]
        if len(candidates) != 1:
            unmatched.append(f"{file} {test} ({len(candidates)} Linux tests of that name)")
            continue
        left_out[kind].add(candidates[0])
    run_on_linux = everything - ignored_everywhere
    compiled_out = left_out["compiled-out"] & run_on_linux
    ignored = (left_out["ignored"] - left_out["compiled-out"]) & run_on_linux
    expected = len(run_on_linux) - len(compiled_out) - len(ignored) + windows_only
    summary = (
        f"{target}: {ran} ran under Wine ({passed} passed, {failed} failed); the Linux build "
        f"lists {len(everything)} ({len(ignored_everywhere)} ignored there too), "
        f"{len(compiled_out)} compiled out and {len(ignored)} ignored on Windows, "
        f"{windows_only} on Windows only: {expected} expected"
    )
    print(summary)
    for entry in unmatched:
        print(f"  note: a Windows exclusion matches no single Linux test: {entry}")
    if results == 0:
        print(f"{target} printed no `test result:` line under Wine (it crashed or did not start)")
        return 1
    if ran < expected:
        print(
            f"{target} ran {ran} tests under Wine, fewer than the {expected} expected: a test "
            "that cannot run on Windows must be ignored or compiled out there with its reason "
            "(host/tests/test_tree_honesty.rs lists them), or the Wine run lost tests"
        )
        return 1
    if ran > expected:
        print(
            f"  note: {ran - expected} more than expected: the listing of the tests left "
            "out on Windows (host/tests/test_tree_honesty.rs) counts one that ran"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
