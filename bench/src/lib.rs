//! forewarn-bench's shared pieces: the statistics the benchmark binaries print, and the
//! checks the fleet benchmarks (bench-fleet, bench-budget) make before they start.
//! (measure-runtime keeps its own index-based median and percentile, as its figures were taken.)

use std::time::Duration;

/// The `forewarn` binary: `$FOREWARN_BINARY` (to measure another build), else the one beside
/// this executable (`cargo build --workspace` builds both).
pub fn forewarn_binary() -> anyhow::Result<std::path::PathBuf> {
    let binary = match std::env::var_os("FOREWARN_BINARY") {
        Some(path) => std::path::PathBuf::from(path),
        None => std::env::current_exe()
            .map_err(|error| anyhow::anyhow!("cannot find this executable: {error}"))?
            .with_file_name("forewarn"),
    };
    if !binary.exists() {
        anyhow::bail!(
            "{} does not exist: build it first (cargo build --workspace)",
            binary.display()
        );
    }
    Ok(binary)
}

/// The `percent`th percentile of sorted `times` (nearest rank); zero when there are none.
pub fn percentile(times: &[Duration], percent: usize) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = (times.len() * percent).div_ceil(100).max(1);
    times[rank.min(times.len()) - 1]
}

/// `times` sorted, shortest first.
pub fn sorted(mut times: Vec<Duration>) -> Vec<Duration> {
    times.sort();
    times
}

/// How many times longer `left` is than `right`.
pub fn ratio(left: Duration, right: Duration) -> f64 {
    left.as_secs_f64() / right.as_secs_f64().max(1e-9)
}

/// A duration in µs below 1 ms, in ms above.
pub fn micros(duration: Duration) -> String {
    if duration >= Duration::from_millis(10) {
        return format!("{:.1} ms", duration.as_secs_f64() * 1000.0);
    }
    if duration >= Duration::from_millis(1) {
        return format!("{:.2} ms", duration.as_secs_f64() * 1000.0);
    }
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

/// A Markdown table row: `label`, then the median, p99 and maximum of sorted `times`.
pub fn row(label: &str, times: &[Duration]) -> String {
    let max = times.last().copied().unwrap_or_default();
    format!(
        "| {label} | {} | {} | {} |",
        micros(percentile(times, 50)),
        micros(percentile(times, 99)),
        micros(max)
    )
}

/// What `/proc` says about a process and the machine: CPU time, resident memory, load.
pub mod proc_stats {
    use std::time::Duration;

    use anyhow::Context as _;

    /// The process's user + system CPU time so far, from /proc/PID/stat; `ticks` is
    /// [`clock_ticks_per_second`].
    pub fn process_cpu(pid: u32, ticks: u64) -> anyhow::Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
        // The command name may hold spaces: the fields after it start past its ')'.
        let after_name = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("/proc/PID/stat has no ')'")?;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of stat: the 12th and 13th after the name.
        let field = |index: usize| -> anyhow::Result<u64> {
            fields
                .get(index)
                .context("/proc/PID/stat is too short")?
                .parse()
                .context("a CPU time in /proc/PID/stat is not a number")
        };
        let ticks_used = field(11)? + field(12)?;
        Ok(Duration::from_secs_f64(ticks_used as f64 / ticks as f64))
    }

    /// `getconf CLK_TCK`: the unit of the CPU times in /proc.
    pub fn clock_ticks_per_second() -> anyhow::Result<u64> {
        let output = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .context("cannot run getconf CLK_TCK")?;
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .context("getconf CLK_TCK did not print a number")
    }

    /// The process's resident memory (`VmRSS` of /proc/PID/status), in KiB.
    pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("cannot read /proc/{pid}/status"))?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .with_context(|| format!("no VmRSS in /proc/{pid}/status"))
    }

    /// The machine's 1-minute load average (/proc/loadavg).
    pub fn load_average() -> anyhow::Result<f64> {
        let text = std::fs::read_to_string("/proc/loadavg").context("cannot read /proc/loadavg")?;
        text.split_whitespace()
            .next()
            .and_then(|first| first.parse().ok())
            .context("/proc/loadavg does not start with a number")
    }
}

/// What a bench running a fleet of daemons and a real etcd cluster needs from the machine
/// (bench-fleet, bench-budget).
pub mod fleet_limits {
    use anyhow::{Context as _, bail};
    use forewarn_test_support::pki::find_on_path;

    /// etcd and etcdctl installed; enough file descriptors and processes for `largest`
    /// daemons. `bench` names the benchmark in the messages.
    pub fn preflight(bench: &str, largest: usize) -> anyhow::Result<()> {
        for (program, package) in [("etcd", "etcd-server"), ("etcdctl", "etcd-client")] {
            if find_on_path(program).is_none() {
                bail!(
                    "{program} is not installed: {bench} runs a real three-member etcd cluster. \
                     Install it with `apt-get install -y etcd-server etcd-client` (Debian/Ubuntu; \
                     {program} is in {package}) so that `{program}` is on PATH"
                );
            }
        }
        // Per daemon the bench holds its log pipe and reader thread; each daemon runs a few
        // threads of its own.
        let files = limit("Max open files")?;
        let wanted_files = 8 * largest as u64 + 256;
        if files < wanted_files {
            bail!(
                "this shell allows {files} open files; {largest} daemons need about {wanted_files}. \
                 Raise it first: `ulimit -n 4096`"
            );
        }
        let processes = limit("Max processes")?;
        let wanted_processes = 40 * largest as u64 + 512;
        if processes < wanted_processes {
            bail!(
                "this shell allows {processes} processes (threads count); {largest} daemons need \
                 about {wanted_processes}. Raise it first: `ulimit -u 16384`"
            );
        }
        Ok(())
    }

    /// The soft limit `name` of /proc/self/limits (u64::MAX when unlimited).
    pub fn limit(name: &str) -> anyhow::Result<u64> {
        let text = std::fs::read_to_string("/proc/self/limits")
            .context("cannot read /proc/self/limits")?;
        let line = text
            .lines()
            .find(|line| line.starts_with(name))
            .with_context(|| format!("no {name:?} in /proc/self/limits"))?;
        let soft = line[name.len()..]
            .split_whitespace()
            .next()
            .with_context(|| format!("no soft limit on {line:?}"))?;
        if soft == "unlimited" {
            return Ok(u64::MAX);
        }
        soft.parse()
            .with_context(|| format!("the soft limit in {line:?} is not a number"))
    }
}
