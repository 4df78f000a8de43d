//! `bench-footprint`: the idle daemon's memory and CPU — the real `forewarn run` with the
//! bundled plugins, first start and restart — against a Python poller, from /proc.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_test_support::harness::{Daemon, DaemonConfig, Simulator, wait_for};

/// How long the idle daemon is watched unless `--seconds N` says otherwise.
const DEFAULT_SECONDS: u64 = 25;
/// Time given to the daemon to settle (plugins loaded, first polls) before measuring.
const SETTLE: Duration = Duration::from_secs(5);
const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// An event far in the future keeps the simulator serving an empty document.
const IDLE_SCENARIO: &str =
    "name = \"idle\"\n\n[[events]]\ntype = \"Reboot\"\nappear_at = \"24h\"\n";

/// The baseline: the smallest thing an Azure user would run instead of forewarn, a Python
/// poller like Microsoft's Scheduled Events sample (requests, one GET a second, no plugins).
const BASELINE_POLLER: &str = r#"
import sys, time
import requests

url = sys.argv[1]
session = requests.Session()
while True:
    try:
        document = session.get(url, headers={"Metadata": "true"}, timeout=5).json()
        for event in document.get("Events", []):
            print(event["EventId"], event["EventType"], flush=True)
    except Exception as error:
        print("poll failed:", error, file=sys.stderr, flush=True)
    time.sleep(1)
"#;

/// One watched process: its RSS while idle and its CPU.
struct Watched {
    label: &'static str,
    rss_max_kib: u64,
    rss_min_kib: u64,
    status: BTreeMap<String, u64>,
    cpu_seconds: f64,
    wall: Duration,
    requests: usize,
    top_mappings: Vec<(String, u64)>,
}

fn main() -> anyhow::Result<()> {
    let (binary, seconds) = arguments()?;
    let work = tempfile::tempdir().context("could not create a temporary directory")?;
    let plugin_dir = work.path().join("plugins");
    export_bundled(&binary, &plugin_dir)?;
    let simulator = Simulator::builder(&binary)
        .scenario_text(IDLE_SCENARIO)
        .start();
    let watch_for = Duration::from_secs(seconds);

    let baseline = watch_baseline_poller(work.path(), &simulator, watch_for)?;

    let config = work.path().join("forewarn.toml");
    DaemonConfig {
        poll_interval: "1s".into(),
        ..DaemonConfig::vm_a(work.path(), plugin_dir.clone(), &simulator.base_url)
    }
    .write(&config);
    let (first, loaded) = watch_daemon(
        "forewarn, first start (plugins compiled)",
        &binary,
        &config,
        &simulator,
        watch_for,
    )?;
    let (restart, _) = watch_daemon(
        "forewarn, restart (compile cache warm)",
        &binary,
        &config,
        &simulator,
        watch_for,
    )?;

    let tick_hz = clock_ticks_per_second();
    println!("# forewarn idle footprint against a Python poller\n");
    println!("- binary: {}", binary.display());
    println!(
        "- plugins: the bundled ones ({loaded} \"plugin loaded\" log lines at the first start)"
    );
    println!(
        "- each process watched for {} s after {} s to settle, one after the other, polling the same simulator once a second; CPU ticks are 1/{tick_hz} s\n",
        seconds,
        SETTLE.as_secs()
    );
    println!(
        "| process | idle RSS (max of samples) | ÷ baseline | VmHWM | CPU over the watch | IMDS requests |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for watched in [&baseline, &first, &restart] {
        let hwm = watched.status.get("VmHWM").copied().unwrap_or(0);
        println!(
            "| {} | {:.1} MiB | {:.2} | {:.1} MiB | {:.2} s ({:.3} % of a core) | {} |",
            watched.label,
            mib(watched.rss_max_kib),
            watched.rss_max_kib as f64 / baseline.rss_max_kib as f64,
            mib(hwm),
            watched.cpu_seconds,
            100.0 * watched.cpu_seconds / watched.wall.as_secs_f64(),
            watched.requests,
        );
    }
    for watched in [&baseline, &first, &restart] {
        println!("\n## {}\n", watched.label);
        println!(
            "- VmRSS over the watch: {:.1}–{:.1} MiB; at the end {}",
            mib(watched.rss_min_kib),
            mib(watched.rss_max_kib),
            describe_status(&watched.status)
        );
        println!("\n| mapping | RSS |");
        println!("|---|---:|");
        for (name, kib) in &watched.top_mappings {
            println!("| {name} | {:.1} MiB |", mib(*kib));
        }
    }
    Ok(())
}

/// Starts the baseline poller against `simulator` and watches it.
fn watch_baseline_poller(
    work: &Path,
    simulator: &Simulator,
    watch_for: Duration,
) -> anyhow::Result<Watched> {
    let has_requests = Command::new("python3")
        .args(["-c", "import requests"])
        .status()
        .context("cannot run python3 (the baseline poller is a Python program)")?;
    if !has_requests.success() {
        bail!("the baseline poller needs Python's requests: run `python3 -m pip install requests`");
    }
    let script = work.join("baseline_poller.py");
    std::fs::write(&script, BASELINE_POLLER).context("could not write the baseline poller")?;
    let url = format!(
        "{}/metadata/scheduledevents?api-version=2020-07-01",
        simulator.base_url
    );
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(&url)
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("cannot start the baseline poller")?;
    let before = simulator.state().requests.len();
    wait_for(
        Duration::from_secs(30),
        "the baseline poller's first poll",
        || {
            let gets = simulator.state().requests.len() - before;
            if gets > 0 {
                Ok(())
            } else {
                Err(format!("{gets} requests"))
            }
        },
    );
    let watched = watch(
        "Python sample poller (requests, 1 s)",
        child.id(),
        simulator,
        watch_for,
    );
    let _ = child.kill();
    let _ = child.wait();
    watched
}

/// Starts `forewarn run` with `config`, watches it, and kills it (the next start reuses its
/// state directory and so its compile cache). Returns the figures and the plugins loaded.
fn watch_daemon(
    label: &'static str,
    binary: &Path,
    config: &Path,
    simulator: &Simulator,
    watch_for: Duration,
) -> anyhow::Result<(Watched, usize)> {
    let before = simulator.state().requests.len();
    let mut daemon = Daemon::start(binary, config);
    wait_for(Duration::from_secs(60), "the daemon's first poll", || {
        let gets = simulator.state().requests.len() - before;
        if gets > 0 {
            Ok(())
        } else {
            Err(format!("{gets} requests"))
        }
    });
    let watched = watch(label, daemon.pid(), simulator, watch_for)?;
    let loaded = daemon.lines_with_message("plugin loaded").len();
    if daemon.has_exited() {
        bail!(
            "the daemon exited during the measurement:\n{}",
            daemon.describe_for_failure()
        );
    }
    daemon.kill();
    Ok((watched, loaded))
}

/// Lets `pid` settle, then samples its RSS every [`SAMPLE_EVERY`] for `watch_for`.
fn watch(
    label: &'static str,
    pid: u32,
    simulator: &Simulator,
    watch_for: Duration,
) -> anyhow::Result<Watched> {
    std::thread::sleep(SETTLE);
    let requests_before = simulator.state().requests.len();
    let ticks_before = cpu_ticks(pid)?;
    let started = Instant::now();
    let mut rss_samples = Vec::new();
    while started.elapsed() < watch_for {
        rss_samples.push(status_kib(pid, "VmRSS")?);
        let remaining = watch_for.saturating_sub(started.elapsed());
        std::thread::sleep(SAMPLE_EVERY.min(remaining));
    }
    rss_samples.push(status_kib(pid, "VmRSS")?);
    let wall = started.elapsed();
    let ticks = cpu_ticks(pid)? - ticks_before;
    Ok(Watched {
        label,
        rss_max_kib: rss_samples.iter().max().copied().unwrap_or(0),
        rss_min_kib: rss_samples.iter().min().copied().unwrap_or(0),
        status: read_status(pid)?,
        cpu_seconds: ticks as f64 / clock_ticks_per_second(),
        wall,
        requests: simulator.state().requests.len() - requests_before,
        top_mappings: largest_mappings(pid, 6)?,
    })
}

/// `[FOREWARN_BINARY] [--seconds N]`; the binary defaults to `forewarn` beside this one.
fn arguments() -> anyhow::Result<(PathBuf, u64)> {
    let mut binary = None;
    let mut seconds = DEFAULT_SECONDS;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--seconds" {
            let value = args.next().context("--seconds needs a number")?;
            seconds = value
                .parse()
                .with_context(|| format!("--seconds needs a whole number, not {value:?}"))?;
            continue;
        }
        binary = Some(PathBuf::from(arg));
    }
    let binary = match binary {
        Some(binary) => binary,
        None => std::env::current_exe()
            .context("cannot find this program's path")?
            .with_file_name("forewarn"),
    };
    if !binary.exists() {
        bail!(
            "{} does not exist: build it first (`cargo build -p forewarn-host`) or pass the \
             forewarn binary's path",
            binary.display()
        );
    }
    Ok((binary, seconds))
}

fn export_bundled(binary: &Path, dir: &Path) -> anyhow::Result<()> {
    let output = Command::new(binary)
        .args(["plugin", "export-bundled"])
        .arg(dir)
        .output()
        .with_context(|| format!("cannot run {}", binary.display()))?;
    if !output.status.success() {
        bail!(
            "forewarn plugin export-bundled failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// utime + stime of the process, in clock ticks (/proc/PID/stat fields 14 and 15).
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("unexpected /proc/PID/stat format")?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    Ok(utime + stime)
}

fn read_status(pid: u32) -> anyhow::Result<BTreeMap<String, u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let number = value.trim().trim_end_matches(" kB");
        if let Ok(number) = number.parse::<u64>() {
            values.insert(key.to_owned(), number);
        }
    }
    Ok(values)
}

fn status_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    read_status(pid)?
        .get(key)
        .copied()
        .with_context(|| format!("no {key} in /proc/{pid}/status"))
}

fn describe_status(status: &BTreeMap<String, u64>) -> String {
    let field = |key: &str| status.get(key).copied().unwrap_or(0);
    format!(
        "VmRSS {:.1} MiB (RssAnon {:.1}, RssFile {:.1}, RssShmem {:.1}), VmHWM {:.1} MiB, \
         VmSize {:.0} MiB, {} threads",
        mib(field("VmRSS")),
        mib(field("RssAnon")),
        mib(field("RssFile")),
        mib(field("RssShmem")),
        mib(field("VmHWM")),
        mib(field("VmSize")),
        field("Threads"),
    )
}

/// RSS summed by mapping name ("[heap]", "[anon]", file paths), largest first.
fn largest_mappings(pid: u32, count: usize) -> anyhow::Result<Vec<(String, u64)>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))
        .with_context(|| format!("cannot read /proc/{pid}/smaps"))?;
    let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
    let mut current = String::from("[anon]");
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let first = parts.next().unwrap_or("");
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            // A mapping header: address perms offset dev inode [name].
            current = parts
                .nth(4)
                .map(str::to_owned)
                .unwrap_or_else(|| "[anon]".into());
            continue;
        }
        if first == "Rss:" {
            let kib: u64 = parts.next().unwrap_or("0").parse().unwrap_or(0);
            *by_name.entry(current.clone()).or_default() += kib;
        }
    }
    let mut sorted: Vec<(String, u64)> = by_name.into_iter().collect();
    sorted.sort_by_key(|(_, kib)| std::cmp::Reverse(*kib));
    sorted.truncate(count);
    Ok(sorted)
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
