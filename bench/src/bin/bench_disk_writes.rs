//! `bench-disk-writes`: what the daemon writes to disk while a plugin keeps it busy — one
//! that defers with retry 0, and one that rewrites its state as much as each call may, then
//! defers with retry 0 — for two forewarn binaries (a baseline and this one), alternately,
//! in one run.
//!
//! Each run: the simulator lists a Reboot with 30 minutes of notice; the daemon (under
//! `strace -f --seccomp-bpf`, which stops only at the traced syscalls) prepares it at once;
//! once the plugin answered, the daemon is watched for `--seconds`: bytes it sent to the
//! disk (`write_bytes` of /proc/PID/io), its `fsync` and `fdatasync` calls (strace's
//! timestamped lines inside the window), and the plugin calls it made (its log).
//!
//! ```sh
//! cargo build --workspace --bin forewarn --bin bench-disk-writes
//! cp target/debug/forewarn /tmp/forewarn-after   # and a baseline build as /tmp/forewarn-before
//! target/debug/bench-disk-writes --before /tmp/forewarn-before --after /tmp/forewarn-after
//! ```
//!
//! The state directory is under the system's temporary directory: it must be on a disk
//! (ext4, xfs), not a tmpfs, for `write_bytes` to mean anything.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Simulator, wait_for, write_plugin_dir,
};

/// How long each run is watched unless `--seconds N` says otherwise.
const DEFAULT_SECONDS: u64 = 20;
/// Runs of each binary and case unless `--rounds N` says otherwise.
const DEFAULT_ROUNDS: usize = 2;
/// Time after the plugin's first answer before the window opens.
const SETTLE: Duration = Duration::from_secs(2);

/// One Reboot for vm-a, 3 s in, with 30 minutes of notice (prepared at once: the harness's
/// lead time is an hour).
const SCENARIO: &str = "name = \"disk-writes\"\nend_after = \"1h\"\n\n[[events]]\n\
     type = \"Reboot\"\nappear_at = \"3s\"\nnotice = \"30m\"\n";

/// What keeps the daemon busy.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// A plugin that defers with retry 0 (asked again every 100 ms, the daemon's minimum).
    DeferRetryZero,
    /// A plugin that rewrites its state until its call's caps refuse, then defers with retry 0.
    StateHammer,
}

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::DeferRetryZero => "retry-0 deferral",
            Case::StateHammer => "state hammer",
        }
    }

    fn plugin(self) -> ProbePlugin {
        let plugin = match self {
            Case::DeferRetryZero => ProbePlugin::new("busy", "defer-until-attempt")
                .config("attempts", "1000000000")
                .config("retry-ms", "0"),
            Case::StateHammer => ProbePlugin::new("busy", "state-hammer"),
        };
        plugin.subscribe(&["Reboot"]).budget("5s")
    }
}

/// What one run measured, per second of the window.
#[derive(Debug, Clone, Copy)]
struct Rates {
    write_bytes: f64,
    fsyncs: f64,
    fdatasyncs: f64,
    calls: f64,
}

fn main() -> anyhow::Result<()> {
    let arguments = Arguments::parse()?;
    let window = Duration::from_secs(arguments.seconds);
    println!(
        "# forewarn disk writes: {} s windows, {} rounds, before = {}, after = {}\n",
        arguments.seconds,
        arguments.rounds,
        arguments.before.display(),
        arguments.after.display()
    );
    for case in [Case::DeferRetryZero, Case::StateHammer] {
        let mut before = Vec::new();
        let mut after = Vec::new();
        for _ in 0..arguments.rounds {
            before.push(measure(&arguments.before, &arguments.after, case, window)?);
            after.push(measure(&arguments.after, &arguments.after, case, window)?);
        }
        report(case, &before, &after);
    }
    Ok(())
}

/// One run of `binary` (the simulator from `simulator_binary`) busy with `case`.
fn measure(
    binary: &Path,
    simulator_binary: &Path,
    case: Case,
    window: Duration,
) -> anyhow::Result<Rates> {
    let work = tempfile::tempdir().context("could not create a temporary directory")?;
    let plugin_dir = work.path().join("plugins");
    write_plugin_dir(
        &plugin_dir,
        Path::new(forewarn_test_support::guests::PROBE),
        &[case.plugin()],
    );
    let simulator = Simulator::builder(simulator_binary)
        .scenario_text(SCENARIO)
        .start();
    let config = work.path().join("forewarn.toml");
    DaemonConfig::vm_a(work.path(), plugin_dir, &simulator.base_url).write(&config);
    let trace = work.path().join("syncs.strace");
    let trace_arg = trace.display().to_string();
    let wrapper = [
        "strace",
        "-f",
        "--seccomp-bpf",
        "-ttt",
        "-e",
        "trace=fsync,fdatasync",
        "-o",
        trace_arg.as_str(),
        "--",
    ];
    let mut daemon = Daemon::start_under(&wrapper, binary, &config);
    daemon.wait_for_decisions(Duration::from_secs(120), "the plugin's first answer", |d| {
        !d.is_empty()
    });
    std::thread::sleep(SETTLE);
    let pid = traced_child(daemon.pid())?;
    let calls_before = daemon.decisions().len();
    let bytes_before = write_bytes(pid)?;
    let opened = unix_seconds();
    let started = Instant::now();
    std::thread::sleep(window);
    let bytes_after = write_bytes(pid)?;
    let closed = unix_seconds();
    let elapsed = started.elapsed().as_secs_f64();
    let calls = daemon.decisions().len() - calls_before;
    // A clean stop, so strace writes its last lines.
    let _ignored = Command::new("kill").arg(pid.to_string()).status();
    wait_for(
        Duration::from_secs(30),
        "the daemon to stop",
        || match daemon.has_exited() {
            true => Ok(()),
            false => Err("still running".to_owned()),
        },
    );
    let (fsyncs, fdatasyncs) = syncs_between(&trace, opened, closed)?;
    Ok(Rates {
        write_bytes: (bytes_after - bytes_before) as f64 / elapsed,
        fsyncs: fsyncs as f64 / elapsed,
        fdatasyncs: fdatasyncs as f64 / elapsed,
        calls: calls as f64 / elapsed,
    })
}

/// The daemon strace runs (strace's only child).
fn traced_child(strace: u32) -> anyhow::Result<u32> {
    let path = format!("/proc/{strace}/task/{strace}/children");
    let children = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    match children.split_whitespace().next() {
        Some(child) => Ok(child.parse()?),
        None => bail!("strace (pid {strace}) runs no daemon"),
    }
}

/// Bytes `pid` caused to be sent to the disk so far.
fn write_bytes(pid: u32) -> anyhow::Result<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    io.lines()
        .find_map(|line| line.strip_prefix("write_bytes: "))
        .context("no write_bytes in /proc/PID/io")?
        .trim()
        .parse()
        .context("write_bytes is not a number")
}

fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// The `fsync` and `fdatasync` calls strace recorded between `from` and `to` (Unix seconds).
fn syncs_between(trace: &Path, from: f64, to: f64) -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string(trace).context("reading strace's output")?;
    let (mut fsyncs, mut fdatasyncs) = (0, 0);
    for line in text.lines() {
        // "PID 1732650000.123456 fsync(7) = 0", or "<... fsync resumed>" halves.
        let mut words = line.split_whitespace().skip(1);
        let (Some(at), Some(call)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(at) = at.parse::<f64>() else {
            continue;
        };
        if at < from || at > to || call.starts_with("<...") {
            continue;
        }
        if call.starts_with("fdatasync(") {
            fdatasyncs += 1;
        } else if call.starts_with("fsync(") {
            fsyncs += 1;
        }
    }
    Ok((fsyncs, fdatasyncs))
}

fn report(case: Case, before: &[Rates], after: &[Rates]) {
    println!("#### {}\n", case.label());
    println!("| binary | written MiB/min | fsync/s | fdatasync/s | syncs/min | plugin calls/s |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (label, runs) in [("before", before), ("after", after)] {
        for rates in runs {
            println!(
                "| {label} | {:.2} | {:.1} | {:.1} | {:.0} | {:.1} |",
                rates.write_bytes * 60.0 / (1024.0 * 1024.0),
                rates.fsyncs,
                rates.fdatasyncs,
                (rates.fsyncs + rates.fdatasyncs) * 60.0,
                rates.calls
            );
        }
    }
    let mean = |runs: &[Rates], pick: fn(&Rates) -> f64| {
        runs.iter().map(pick).sum::<f64>() / runs.len().max(1) as f64
    };
    let ratio = |pick: fn(&Rates) -> f64| {
        let base = mean(before, pick);
        match base > 0.0 {
            true => format!("{:.3}", mean(after, pick) / base),
            false => "-".to_owned(),
        }
    };
    println!(
        "\nafter / before (means): written bytes {}, syncs {}, plugin calls {}\n",
        ratio(|rates| rates.write_bytes),
        ratio(|rates| rates.fsyncs + rates.fdatasyncs),
        ratio(|rates| rates.calls)
    );
}

/// `--before PATH --after PATH [--seconds N] [--rounds N]`.
struct Arguments {
    before: PathBuf,
    after: PathBuf,
    seconds: u64,
    rounds: usize,
}

impl Arguments {
    fn parse() -> anyhow::Result<Arguments> {
        let mut before = None;
        let mut after = None;
        let mut seconds = DEFAULT_SECONDS;
        let mut rounds = DEFAULT_ROUNDS;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--before" => before = Some(PathBuf::from(value()?)),
                "--after" => after = Some(PathBuf::from(value()?)),
                "--seconds" => seconds = value()?.parse()?,
                "--rounds" => rounds = value()?.parse()?,
                other => bail!(
                    "unknown argument {other}; usage: bench-disk-writes --before PATH --after PATH [--seconds N] [--rounds N]"
                ),
            }
        }
        let (Some(before), Some(after)) = (before, after) else {
            bail!("usage: bench-disk-writes --before PATH --after PATH [--seconds N] [--rounds N]");
        };
        Ok(Arguments {
            before,
            after,
            seconds,
            rounds,
        })
    }
}
