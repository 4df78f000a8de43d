#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time (tests/run.sh's Linux step).

`cargo test` runs one test binary after another; most of forewarn's are end-to-end tests that
wait on real servers, timeouts and scenario clocks and leave the cores idle, so a run spent
most of its time waiting. This runs several binaries at once, the slowest first, as long as
the CPU they are known to use fits the cores: each binary's seconds and CPU seconds come from
the last run on this machine (target/test-durations.tsv) or else the committed snapshot
(tests/test-durations.tsv), so the few that compile plugins and projects (CPU-bound) run
beside the many that wait on servers and clocks, not beside each other. Each runs exactly as
cargo runs it: from its package's directory, with the CARGO_* variables cargo sets, its tests
on their own threads as usual. The doc tests run as one more job (`cargo test --doc`).

Each binary's output is printed whole when it ends, under the `Running …` line cargo would
print, so tests/summary.py and tests/failed-tests.sh read the log as they read cargo's. A
binary that fails does not stop the others. Exits 1 when any binary failed.

    test-binaries.py ARTIFACTS.json LOG      (ARTIFACTS: `cargo test --no-run
                                              --message-format=json` of the workspace)

FOREWARN_TEST_JOBS caps the number of binaries at once (default: three per core, at least
4); FOREWARN_TEST_JOBS=1 runs them one after another as cargo does.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEASURED = os.path.join(REPO, "target", "test-durations.tsv")
COMMITTED = os.path.join(REPO, "tests", "test-durations.tsv")
# A binary that keeps this many cores busy on average is CPU-bound: those run beside each
# other only as far as the cores go; the others wait on servers and clocks and fill in.
CPU_BOUND = 0.5


class Binary:
    """One test executable: what cargo says of it, and how it ran."""

    def __init__(self, message):
        target = message["target"]
        self.executable = message["executable"]
        self.package_dir = os.path.dirname(message["manifest_path"])
        self.manifest_path = message["manifest_path"]
        self.package_id = message["package_id"]
        self.crate_name = target["name"].replace("-", "_")
        kind = target["kind"][0]
        # The binary's name without its hash; a crate's lib and bin share it (`[bin]` tells).
        self.key = os.path.basename(self.executable).rsplit("-", 1)[0]
        if kind == "bin":
            self.key += "[bin]"
        source = os.path.relpath(target["src_path"], self.package_dir)
        described = f"unittests {source}" if kind in ("lib", "bin", "proc-macro") else source
        self.header = f"     Running {described} ({os.path.relpath(self.executable, REPO)})"

    def __repr__(self):
        return self.key

    def command(self):
        return [self.executable]

    def environment(self, cargo):
        name, version = package_name_and_version(self.package_id, self.manifest_path)
        major, minor, patch = (version.split("-")[0].split(".") + ["0", "0", "0"])[:3]
        env = dict(os.environ)
        env.update(
            {
                "CARGO": cargo,
                "CARGO_MANIFEST_DIR": self.package_dir,
                "CARGO_MANIFEST_PATH": self.manifest_path,
                "CARGO_PKG_NAME": name,
                "CARGO_PKG_VERSION": version,
                "CARGO_PKG_VERSION_MAJOR": major,
                "CARGO_PKG_VERSION_MINOR": minor,
                "CARGO_PKG_VERSION_PATCH": patch,
                "CARGO_CRATE_NAME": self.crate_name,
            }
        )
        deps = os.path.dirname(self.executable)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            part for part in (deps, os.environ.get("LD_LIBRARY_PATH", "")) if part
        )
        return env


class DocTests:
    """The workspace's doc tests: cargo compiles and runs them itself."""

    key = "doc-tests"
    header = None
    package_dir = REPO

    def command(self):
        return ["cargo", "test", "--workspace", "--locked", "--doc"]

    def environment(self, cargo):
        return dict(os.environ)


def package_name_and_version(package_id, manifest_path):
    """The name and version in a package id (`path+file:///…/host#forewarn-host@0.1.0`, or
    `path+file:///…/sdk#0.1.0` when the name is the directory's)."""
    fragment = package_id.rsplit("#", 1)[-1]
    if "@" in fragment:
        name, version = fragment.split("@", 1)
        return name, version
    return os.path.basename(os.path.dirname(manifest_path)), fragment


def read_binaries(artifacts):
    binaries, seen = [], set()
    for line in open(artifacts, errors="replace"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        if message["executable"] in seen:
            continue
        seen.add(message["executable"])
        binaries.append(Binary(message))
    return binaries


def read_durations():
    """{binary: (seconds, cpu seconds)} of the last run here, else of the committed snapshot."""
    for path in (MEASURED, COMMITTED):
        if not os.path.exists(path):
            continue
        durations = {}
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or line.startswith("#"):
                continue
            try:
                durations[parts[0]] = (float(parts[1]), float(parts[2]))
            except ValueError:
                continue
        if durations:
            return durations
    return {}


def write_durations(durations):
    os.makedirs(os.path.dirname(MEASURED), exist_ok=True)
    with open(MEASURED, "w") as out:
        out.write(
            "# binary\tseconds\tCPU seconds (tests/test-binaries.py, the last run on this machine)\n"
        )
        for key, (seconds, cpu) in sorted(durations.items(), key=lambda item: -item[1][0]):
            out.write(f"{key}\t{seconds:.1f}\t{cpu:.1f}\n")


def default_jobs():
    configured = os.environ.get("FOREWARN_TEST_JOBS", "").strip()
    if configured:
        try:
            return max(1, int(configured))
        except ValueError:
            sys.exit(
                f"test-binaries.py: FOREWARN_TEST_JOBS={configured!r} is not a number: "
                "set it to how many test binaries may run at once (1 runs them one by one)"
            )
    return max(4, 3 * (os.cpu_count() or 1))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    artifacts, log_path = sys.argv[1], sys.argv[2]
    jobs = default_jobs()
    cargo = shutil.which("cargo") or "cargo"
    rustup = shutil.which("rustup")
    if rustup:
        found = subprocess.run([rustup, "which", "cargo"], capture_output=True, text=True, cwd=REPO)
        if found.returncode == 0 and found.stdout.strip():
            cargo = found.stdout.strip()
    known = read_durations()
    cores = float(os.cpu_count() or 1)
    pending = read_binaries(artifacts) + [DocTests()]
    # Longest first, so that the slowest binary does not start last; unknown ones (new tests)
    # count as a minute using half a core.
    for binary in pending:
        seconds, cpu = known.get(binary.key, (60.0, 30.0))
        binary.seconds = max(seconds, 0.1)
        binary.load = min(cpu / binary.seconds, cores)
    pending.sort(key=lambda binary: -binary.seconds)
    total = len(pending)
    print(
        f"test-binaries.py: {total} test binaries (with the doc tests), up to {jobs} at a time "
        f"within {cores:.0f} cores of known CPU use",
        flush=True,
    )

    changed = threading.Condition()
    running = []
    durations, failed, finished = {}, [], []
    log = open(log_path, "w")
    started = time.monotonic()

    def next_binary():
        """The longest pending binary that may start now: one that mostly waits always (up
        to `jobs`), a CPU-bound one when the CPU-bound ones running leave it room (or none
        runs); None when none may. Called with `changed` held."""
        if len(running) >= jobs:
            return None
        in_use = sum(binary.load for binary in running if binary.load >= CPU_BOUND)
        for binary in pending:
            if binary.load < CPU_BOUND or in_use == 0 or in_use + binary.load <= cores:
                return binary
        return None

    def run(binary):
        begun = time.monotonic()
        try:
            status, text, cpu = execute(binary)
        except OSError as error:
            status, text, cpu = 1, f"test-binaries.py: cannot run {binary.key}: {error}\n", 0.0
        seconds = time.monotonic() - begun
        finish(binary, status, text, seconds, cpu)

    def execute(binary):
        with tempfile.TemporaryFile(mode="w+b") as output:
            child = subprocess.Popen(
                binary.command(),
                cwd=binary.package_dir,
                env=binary.environment(cargo),
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            # wait4: the child's own CPU time (with the processes it waited for), which
            # decides what may run beside it next time.
            _pid, wait_status, usage = os.wait4(child.pid, 0)
            child.returncode = status = os.waitstatus_to_exitcode(wait_status)
            output.seek(0)
            text = output.read().decode("utf-8", errors="replace")
        return status, text, usage.ru_utime + usage.ru_stime

    def finish(binary, status, text, seconds, cpu):
        with changed:
            running.remove(binary)
            durations[binary.key] = (seconds, cpu)
            finished.append(binary.key)
            block = (binary.header + "\n" if binary.header else "") + text
            if not block.endswith("\n"):
                block += "\n"
            if status != 0:
                failed.append(binary.key)
                block += f"test-binaries.py: {binary.key} exited with status {status}\n"
            log.write(block)
            log.flush()
            sys.stdout.write(block)
            sys.stdout.write(
                f"test-binaries.py: [{len(finished)}/{total}] {binary.key} "
                f"{'FAILED' if status else 'ok'} in {seconds:.0f} s, {cpu:.0f} s of CPU "
                f"({time.monotonic() - started:.0f} s into the step)\n"
            )
            sys.stdout.flush()
            changed.notify_all()

    threads = []
    with changed:
        while pending:
            binary = next_binary()
            if binary is None:
                changed.wait()
                continue
            pending.remove(binary)
            running.append(binary)
            thread = threading.Thread(target=run, args=(binary,))
            thread.start()
            threads.append(thread)
    for thread in threads:
        thread.join()
    log.close()
    write_durations(durations)
    if failed:
        print(f"test-binaries.py: {len(failed)} of {total} test binaries failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
