//! `bench-fleet`: N `forewarn run` daemons on one machine, each with the bundled plugins, its
//! own state directory and admin port, against one simulator serving one Reboot that names
//! all N VMs (`/vm/NAME/`) and a three-member etcd cluster on loopback (issue 37, item 2).
//!
//! For each N (10, 50, 100 by default), on a fresh cluster and simulator:
//!
//! 1. the first daemon starts with an empty compile cache (the bundled plugins compiled once);
//!    its cache is then copied into every other daemon's state directory (forewarn has no
//!    shared cache: each daemon keeps its own under `state-dir/cache`), and the others start;
//! 2. once every daemon holds its lease (`members/VM` in etcd), and a settling pause, an idle
//!    window: etcd's own request counters (`grpc_server_started_total` on each member's
//!    `/metrics`, summed over the three), the members' and the daemons' CPU and RSS;
//! 3. the event is generated at the simulator (`POST /simulator/events`, NotBefore 5 minutes
//!    ahead, every VM of the scenario): the event window runs from there to the approval
//!    POST the simulator records. An `etcdctl watch` on the events' prefix gives when each
//!    `events/ID/ready/VM` key was first written.
//!
//! Figures: (a) last ready key → approval POST; (d) event appears → approval POST, and the
//! part of it that is the VMs' own preparation (appears → last ready); (b) etcd requests per
//! VM per second, idle and during the event, and the bytes etcd sent; (c) the etcd leader's
//! and a follower's CPU and RSS; the daemons' median RSS and total CPU; the load average.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use forewarn_bench::forewarn_binary;
use forewarn_bench::proc_stats::{clock_ticks_per_second, load_average, process_cpu, rss_kib};
use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::etcd::{EtcdCluster, etcdctl};
use forewarn_test_support::harness::{
    ChildGuard, Daemon, DaemonConfig, Simulator, http_get, http_post_json, install_bundled_plugin,
    now_unix_ms,
};
use forewarn_test_support::pki::find_on_path;
use tempfile::TempDir;

/// Fleet sizes measured by default.
const DEFAULT_SIZES: [usize; 3] = [10, 50, 100];
/// How long the idle window lasts by default.
const DEFAULT_IDLE: Duration = Duration::from_secs(30);
/// After every daemon holds its lease and before the idle window: the start-up's requests
/// (lease grants, member keys) are over, and each daemon's keep-alive is on its cadence.
const SETTLE: Duration = Duration::from_secs(12);
/// The event's notice: far enough that NotBefore never cuts the barrier short.
const NOTICE_SECONDS: u64 = 300;
/// lb-drain's drain window in the bench (the shipped default is 15 s).
const DRAIN_SECONDS: u64 = 5;
/// The last VM's drain window: it is the straggler the others wait for at the barrier.
const STRAGGLER_DRAIN_SECONDS: u64 = 30;
/// How long the bench counts etcd's load while N − 1 VMs wait at the barrier for the
/// straggler (each of them reading etcd every `ROUND_EVERY`).
const WAITING_WINDOW: Duration = Duration::from_secs(8);
/// Events per fleet size, one after the other.
const EVENTS: usize = 3;
/// How long an approved event runs before it goes (the simulator's `runs_for_seconds`).
const RUNS_FOR_SECONDS: u64 = 3;
/// After an event went: the daemons see it gone and their plugins recover.
const BETWEEN_EVENTS: Duration = Duration::from_secs(5);
/// The key prefix the daemons use.
const PREFIX: &str = "/forewarn";
/// The lease TTL the daemons use: forewarn's default.
const LEASE_TTL: &str = "10s";
/// How long the bench waits for any one stage (start-up, the approval).
const STAGE_WITHIN: Duration = Duration::from_secs(300);
/// The bundled plugins the daemons run, as `forewarn demo` does.
const PLUGINS: [&str; 4] = ["lb-drain", "checkpoint", "graceful-shutdown", "notify"];

fn main() -> anyhow::Result<()> {
    let (sizes, idle) = arguments()?;
    preflight(sizes.iter().copied().max().unwrap_or(0))?;
    let binary = forewarn_binary()?;
    let started = Instant::now();
    println!(
        "# bench-fleet: N daemons, one event, a 3-member etcd ({})\n",
        binary.display()
    );
    let mut runs = Vec::new();
    for &vms in &sizes {
        eprintln!("bench-fleet: N = {vms} …");
        let run = measure(&binary, vms, idle)?;
        print_run(&run);
        runs.push(run);
    }
    print_tables(&runs, idle);
    println!("\nTotal run time: {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `[--vms 10,50,100] [--idle-seconds 30]`.
fn arguments() -> anyhow::Result<(Vec<usize>, Duration)> {
    let mut sizes = DEFAULT_SIZES.to_vec();
    let mut idle = DEFAULT_IDLE;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().with_context(|| {
            format!(
                "{arg} needs a value (usage: bench-fleet [--vms 10,50,100] [--idle-seconds 30])"
            )
        })?;
        match arg.as_str() {
            "--vms" => {
                sizes = value
                    .split(',')
                    .map(|n| n.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("--vms takes sizes like 10,50,100, not {value:?}"))?;
            }
            "--idle-seconds" => {
                idle = Duration::from_secs(value.parse().with_context(|| {
                    format!("--idle-seconds takes a whole number, not {value:?}")
                })?);
            }
            _ => bail!(
                "unknown argument {arg:?} (usage: bench-fleet [--vms 10,50,100] [--idle-seconds 30])"
            ),
        }
    }
    if let Some(&bad) = sizes.iter().find(|&&n| !(2..=100).contains(&n)) {
        bail!(
            "--vms {bad}: a fleet is 2 to 100 VMs (the simulator names at most 100 VMs in an event)"
        );
    }
    Ok((sizes, idle))
}

/// etcd and etcdctl installed; enough file descriptors and processes for `largest` daemons.
fn preflight(largest: usize) -> anyhow::Result<()> {
    for (program, package) in [("etcd", "etcd-server"), ("etcdctl", "etcd-client")] {
        if find_on_path(program).is_none() {
            bail!(
                "{program} is not installed: bench-fleet runs a real three-member etcd cluster. \
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
fn limit(name: &str) -> anyhow::Result<u64> {
    let text =
        std::fs::read_to_string("/proc/self/limits").context("cannot read /proc/self/limits")?;
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

/// What one N measured.
struct Run {
    vms: usize,
    /// The first daemon, compiling the bundled plugins: spawn → every plugin loaded.
    cold_start: Duration,
    /// The others, from the copied cache: first spawned → every daemon's lease in etcd.
    fleet_up: Duration,
    idle: Window,
    events: Vec<EventRun>,
    /// The member that led the raft cluster.
    leader: usize,
    /// Median daemon RSS at the end, in KiB; the largest.
    daemon_rss_median_kib: u64,
    daemon_rss_max_kib: u64,
}

impl Run {
    /// The windows of the first event.
    fn first(&self) -> &EventRun {
        &self.events[0]
    }

    /// One figure of every event, sorted.
    fn each(&self, figure: impl Fn(&BarrierFigures) -> Duration) -> Vec<Duration> {
        let mut all: Vec<Duration> = self
            .events
            .iter()
            .map(|event| figure(&event.figures))
            .collect();
        all.sort();
        all
    }
}

/// One event's windows and figures.
struct EventRun {
    /// N − 1 VMs ready, waiting at the barrier for the straggler.
    waiting: Window,
    /// Event appears → approval POST.
    event: Window,
    /// Whether the straggler was still preparing at the end of the waiting window.
    straggler_waited: bool,
    figures: BarrierFigures,
}

/// Counters taken at the start and the end of a window.
struct Window {
    length: Duration,
    /// etcd gRPC requests started, per method, summed over the members.
    requests: BTreeMap<String, f64>,
    /// Requests started on each member.
    requests_per_member: Vec<f64>,
    /// Bytes etcd sent to its clients (all members).
    sent_bytes: f64,
    /// Writes applied (puts + txns + deletes) by the raft leader's store.
    leader_writes: f64,
    /// CPU of each etcd member over the window.
    member_cpu: Vec<Duration>,
    /// RSS of each member at the end, KiB.
    member_rss_kib: Vec<u64>,
    /// CPU of all daemons together.
    daemons_cpu: Duration,
    /// CPU of the simulator.
    simulator_cpu: Duration,
    /// Load average (1 min) at the start and the end.
    load: (f64, f64),
}

impl Window {
    fn total_requests(&self) -> f64 {
        self.requests.values().sum()
    }

    fn per_vm_per_second(&self, count: f64, vms: usize) -> f64 {
        count / vms as f64 / self.length.as_secs_f64().max(1e-9)
    }
}

/// Everything measured at one instant.
struct Sample {
    at: Instant,
    metrics: Vec<Metrics>,
    member_cpu: Vec<Duration>,
    daemons_cpu: Duration,
    simulator_cpu: Duration,
    load: f64,
}

/// The counters read from one member's `/metrics`.
#[derive(Default)]
struct Metrics {
    started: BTreeMap<String, f64>,
    sent_bytes: f64,
    writes: f64,
}

/// The processes a sample reads.
struct Fleet<'a> {
    cluster: &'a EtcdCluster,
    daemons: &'a [Daemon],
    simulator_pid: u32,
    ticks: u64,
}

impl Fleet<'_> {
    fn sample(&self) -> anyhow::Result<Sample> {
        let at = Instant::now();
        let mut metrics = Vec::new();
        let mut member_cpu = Vec::new();
        for index in 0..3 {
            metrics.push(read_metrics(self.cluster.metrics_address(index))?);
            let pid = self.cluster.pid(index).context("an etcd member stopped")?;
            member_cpu.push(process_cpu(pid, self.ticks)?);
        }
        let mut daemons_cpu = Duration::ZERO;
        for daemon in self.daemons {
            daemons_cpu += process_cpu(daemon.pid(), self.ticks)
                .context("a daemon exited during the bench; its log says why")?;
        }
        Ok(Sample {
            at,
            metrics,
            member_cpu,
            daemons_cpu,
            simulator_cpu: process_cpu(self.simulator_pid, self.ticks)?,
            load: load_average()?,
        })
    }

    fn window(&self, start: &Sample, end: &Sample, leader: usize) -> anyhow::Result<Window> {
        let mut requests: BTreeMap<String, f64> = BTreeMap::new();
        let mut requests_per_member = Vec::new();
        let mut sent_bytes = 0.0;
        for (before, after) in start.metrics.iter().zip(&end.metrics) {
            let mut on_member = 0.0;
            for (method, count) in &after.started {
                let delta = count - before.started.get(method).copied().unwrap_or(0.0);
                *requests.entry(method.clone()).or_default() += delta;
                on_member += delta;
            }
            requests_per_member.push(on_member);
            sent_bytes += after.sent_bytes - before.sent_bytes;
        }
        let mut member_rss_kib = Vec::new();
        for index in 0..3 {
            let pid = self.cluster.pid(index).context("an etcd member stopped")?;
            member_rss_kib.push(rss_kib(pid)?);
        }
        Ok(Window {
            length: end.at - start.at,
            requests,
            requests_per_member,
            sent_bytes,
            leader_writes: end.metrics[leader].writes - start.metrics[leader].writes,
            member_cpu: end
                .member_cpu
                .iter()
                .zip(&start.member_cpu)
                .map(|(after, before)| after.saturating_sub(*before))
                .collect(),
            member_rss_kib,
            daemons_cpu: end.daemons_cpu.saturating_sub(start.daemons_cpu),
            simulator_cpu: end.simulator_cpu.saturating_sub(start.simulator_cpu),
            load: (start.load, end.load),
        })
    }
}

/// Reads a member's Prometheus text: gRPC requests started per method, bytes sent to
/// clients, and the writes its store applied.
fn read_metrics(address: &str) -> anyhow::Result<Metrics> {
    let text = http_get(address, "/metrics")
        .map_err(|error| anyhow::anyhow!("cannot read etcd's /metrics at {address}: {error}"))?;
    let mut metrics = Metrics::default();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        match name {
            "grpc_server_started_total" => {
                let method = label(series, "grpc_method").unwrap_or("?").to_owned();
                *metrics.started.entry(method).or_default() += value;
            }
            "etcd_network_client_grpc_sent_bytes_total" => metrics.sent_bytes += value,
            "etcd_debugging_mvcc_put_total"
            | "etcd_debugging_mvcc_delete_total"
            | "etcd_debugging_mvcc_txn_total" => metrics.writes += value,
            _ => {}
        }
    }
    Ok(metrics)
}

/// The value of `name="…"` in a series' labels.
fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let start = series.find(&format!("{name}=\""))? + name.len() + 2;
    let rest = &series[start..];
    Some(&rest[..rest.find('"')?])
}

/// The first time each key was written, as an `etcdctl watch` on a prefix saw it.
struct KeyWatch {
    _process: ChildGuard,
    first_put: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl KeyWatch {
    fn start(endpoints: &str, prefix: &str) -> anyhow::Result<KeyWatch> {
        let etcdctl = find_on_path("etcdctl").context("etcdctl is not installed")?;
        let mut child = Command::new(etcdctl)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoints}"))
            .args(["watch", "--prefix", prefix])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start etcdctl watch")?;
        let stdout = child.stdout.take().context("etcdctl's stdout is piped")?;
        let first_put = Arc::new(Mutex::new(BTreeMap::new()));
        let seen = first_put.clone();
        // `etcdctl watch` prints each change as three lines: PUT or DELETE, the key, the value.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            while let Some(line) = lines.next() {
                if line != "PUT" {
                    continue;
                }
                let at = now_unix_ms();
                let Some(key) = lines.next() else { break };
                let _value = lines.next();
                let mut seen = seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                seen.entry(key).or_insert(at);
            }
        });
        Ok(KeyWatch {
            _process: ChildGuard::new(child),
            first_put,
        })
    }

    fn first_puts(&self) -> BTreeMap<String, u64> {
        self.first_put
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

fn vm_name(index: usize) -> String {
    format!("vm-{index:03}")
}

/// A scenario serving `vms` VMs and no event (the bench generates it).
fn scenario(vms: &[String]) -> String {
    let names: Vec<String> = vms.iter().map(|vm| format!("\"{vm}\"")).collect();
    format!(
        "name = \"fleet\"\ndescription = \"bench-fleet: {} VMs, one event generated by the bench\"\n\
         vms = [{}]\nopen_ended = true\n",
        vms.len(),
        names.join(", ")
    )
}

/// The bundled plugins as an operator would configure them: lb-drain with a short drain,
/// graceful-shutdown with stop/start actions (harmless commands); checkpoint and notify
/// with nothing to talk to (they say so once and approve).
fn write_plugins(dir: &Path, drain_seconds: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).context("cannot create the plugin directory")?;
    let bundled = forewarn_host::plugins::bundled::bundled_plugins();
    for name in PLUGINS {
        let plugin = bundled
            .iter()
            .find(|plugin| plugin.name == name)
            .with_context(|| format!("no bundled plugin {name}"))?;
        let manifest = match name {
            "lb-drain" => edit(
                plugin.manifest,
                "drain-seconds = 15",
                &format!("drain-seconds = {drain_seconds}"),
            )?,
            "graceful-shutdown" => {
                let manifest = edit(
                    plugin.manifest,
                    "# stop-action = \"stop-app\"",
                    "stop-action = \"stop-app\"",
                )?;
                let manifest = edit(
                    &manifest,
                    "# start-action = \"start-app\"",
                    "start-action = \"start-app\"",
                )?;
                edit(
                    &manifest,
                    "# actions = [\"stop-app\", \"start-app\"]",
                    "actions = [\"stop-app\", \"start-app\"]",
                )?
            }
            _ => plugin.manifest.to_owned(),
        };
        install_bundled_plugin(dir, name, Some(&manifest));
    }
    Ok(())
}

fn edit(manifest: &str, from: &str, to: &str) -> anyhow::Result<String> {
    if !manifest.contains(from) {
        bail!(
            "the bundled manifest no longer has the line {from:?}: update bench-fleet's write_plugins"
        );
    }
    Ok(manifest.replacen(from, to, 1))
}

/// Writes `vm`'s config (its state dir, the shared plugin dir, its IMDS URL, an ephemeral
/// admin port, the three endpoints) and returns its path.
fn write_config(
    root: &Path,
    vm: &str,
    plugin_dir: &Path,
    simulator: &Simulator,
    endpoints: &[String],
) -> anyhow::Result<PathBuf> {
    let dir = root.join(vm);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let truth = find_on_path("true").context("no `true` command on PATH")?;
    let config = DaemonConfig {
        vm_name: vm.to_owned(),
        state_dir: dir.join("state"),
        plugin_dir: plugin_dir.to_owned(),
        imds_url: format!("{}/vm/{vm}", simulator.base_url),
        poll_interval: "1s".into(),
        policy: vec!["group-approval = \"never\"".into()],
        extra: format!(
            "[actions.stop-app]\nargv = [\"{truth}\"]\n\n[actions.start-app]\nargv = [\"{truth}\"]\n\n\
             [coordination]\nendpoints = [{}]\nprefix = \"{PREFIX}\"\nlease-ttl = \"{LEASE_TTL}\"\n",
            endpoints
                .iter()
                .map(|endpoint| format!("\"{endpoint}\""))
                .collect::<Vec<_>>()
                .join(", "),
            truth = truth.display()
        ),
        prepare_lead_time: None,
    };
    let path = dir.join("forewarn.toml");
    config.write(&path);
    Ok(path)
}

/// Copies a warm compile cache into `state_dir/cache` (private, as the daemon wants it).
fn copy_cache(from: &Path, state_dir: &Path) -> anyhow::Result<()> {
    let to = state_dir.join("cache");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&to)
        .with_context(|| format!("cannot create {}", to.display()))?;
    std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let temporary = entry.file_name().to_string_lossy().ends_with(".tmp");
        if entry.file_type()?.is_file() && !temporary {
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .with_context(|| format!("cannot copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Waits for `check` to say yes, polling every 100 ms, or fails after `within` naming `what`.
fn wait(
    within: Duration,
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<Option<String>>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let progress = match check()? {
            None => return Ok(()),
            Some(progress) => progress,
        };
        if Instant::now() >= deadline {
            bail!("timed out after {within:?} waiting for {what}: {progress}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many keys etcd holds under `prefix`.
fn count_keys(endpoints: &str, prefix: &str) -> anyhow::Result<u64> {
    let output = etcdctl(
        endpoints,
        &[
            "get",
            prefix,
            "--prefix",
            "--keys-only",
            "--limit=1",
            "-w",
            "json",
        ],
    );
    if !output.status.success() {
        bail!(
            "etcdctl get {prefix} --prefix: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("etcdctl -w json did not print JSON")?;
    Ok(answer["count"].as_u64().unwrap_or(0))
}

fn plugins_loaded(daemon: &Daemon) -> usize {
    daemon
        .lines_with_message(forewarn_host::log_messages::PLUGIN_LOADED)
        .len()
}

fn describe_daemon(daemon: &Daemon) -> String {
    daemon.describe_for_failure()
}

fn measure(binary: &Path, vms: usize, idle: Duration) -> anyhow::Result<Run> {
    let ticks = clock_ticks_per_second()?;
    let dir = TempDir::new().context("cannot create a temp dir")?;
    let names: Vec<String> = (1..=vms).map(vm_name).collect();
    let cluster = EtcdCluster::start(3);
    let endpoints: Vec<String> = (0..3).map(|index| cluster.endpoint(index)).collect();
    let all_endpoints = cluster.endpoints();
    let simulator = Simulator::builder(binary)
        .scenario_text(&scenario(&names))
        .start();
    let simulator_pid = simulator.pid();
    let plugin_dir = dir.path().join("plugins");
    write_plugins(&plugin_dir, DRAIN_SECONDS)?;
    let straggler_plugin_dir = dir.path().join("plugins-straggler");
    write_plugins(&straggler_plugin_dir, STRAGGLER_DRAIN_SECONDS)?;

    // The first daemon compiles the bundled plugins into its cache.
    let mut daemons = Vec::new();
    let first_config = write_config(dir.path(), &names[0], &plugin_dir, &simulator, &endpoints)?;
    let cold = Instant::now();
    daemons.push(Daemon::start(binary, &first_config));
    wait(
        STAGE_WITHIN,
        "the first daemon to load the bundled plugins",
        || {
            let loaded = plugins_loaded(&daemons[0]);
            Ok((loaded < PLUGINS.len())
                .then(|| format!("{loaded} loaded\n{}", describe_daemon(&daemons[0]))))
        },
    )?;
    let cold_start = cold.elapsed();
    let warm_cache = dir.path().join(&names[0]).join("state").join("cache");
    // Every compiled plugin recorded in the cache's index before it is copied.
    wait(STAGE_WITHIN, "the first daemon's compile cache", || {
        let index = std::fs::read_to_string(warm_cache.join("index.sha256")).unwrap_or_default();
        let entries = index.lines().filter(|line| !line.trim().is_empty()).count();
        Ok((entries < PLUGINS.len()).then(|| format!("{entries} entries in index.sha256")))
    })?;

    let fleet_start = Instant::now();
    for vm in &names[1..] {
        let plugins = match vm == &names[vms - 1] {
            true => &straggler_plugin_dir,
            false => &plugin_dir,
        };
        let config = write_config(dir.path(), vm, plugins, &simulator, &endpoints)?;
        copy_cache(&warm_cache, &dir.path().join(vm).join("state"))?;
        daemons.push(Daemon::start(binary, &config));
    }
    let members = format!("{PREFIX}/members/");
    wait(
        STAGE_WITHIN,
        "every daemon's lease in etcd (members/VM)",
        || {
            let count = count_keys(&all_endpoints, &members)?;
            for daemon in daemons.iter_mut() {
                if daemon.has_exited() {
                    bail!(
                        "a daemon exited while starting:\n{}",
                        describe_daemon(daemon)
                    );
                }
            }
            Ok((count < vms as u64).then(|| format!("{count} of {vms} members")))
        },
    )?;
    let fleet_up = fleet_start.elapsed();
    let recompiled: usize = daemons[1..]
        .iter()
        .map(|daemon| {
            daemon
                .lines()
                .iter()
                .filter(|line| line.message().contains("compil"))
                .count()
        })
        .sum();
    eprintln!(
        "  {vms} daemons up: first (compiling) {:.1} s, the rest from the copied cache {:.1} s; \
         log lines about compiling among the rest: {recompiled}",
        cold_start.as_secs_f64(),
        fleet_up.as_secs_f64()
    );
    std::thread::sleep(SETTLE);

    let watch = KeyWatch::start(&all_endpoints, &format!("{PREFIX}/events/"))?;
    let leader = cluster.leader();
    let fleet = Fleet {
        cluster: &cluster,
        daemons: &daemons,
        simulator_pid,
        ticks,
    };
    let idle_start = fleet.sample()?;
    std::thread::sleep(idle);
    let idle_end = fleet.sample()?;
    let idle_window = fleet.window(&idle_start, &idle_end, leader)?;

    let mut events = Vec::new();
    for round in 0..EVENTS {
        let event = one_event(&fleet, &simulator, &watch, &names, leader)?;
        eprintln!(
            "  event {}: last ready → approval POST {} ms, appears → approval POST {} ms",
            round + 1,
            event.figures.last_ready_to_approval.as_millis(),
            event.figures.barrier.as_millis()
        );
        events.push(event);
    }
    let mut rss: Vec<u64> = daemons
        .iter()
        .map(|daemon| rss_kib(daemon.pid()))
        .collect::<anyhow::Result<_>>()?;
    rss.sort_unstable();
    Ok(Run {
        vms,
        cold_start,
        fleet_up,
        idle: idle_window,
        events,
        leader,
        daemon_rss_median_kib: rss[rss.len() / 2],
        daemon_rss_max_kib: rss.last().copied().unwrap_or(0),
    })
}

/// One event naming every VM: generated, waited at the barrier for the straggler, approved
/// once; then ended, and the fleet left to settle.
fn one_event(
    fleet: &Fleet<'_>,
    simulator: &Simulator,
    watch: &KeyWatch,
    names: &[String],
    leader: usize,
) -> anyhow::Result<EventRun> {
    let vms = names.len();
    let event_start = fleet.sample()?;
    let answer = http_post_json(
        simulator.address(),
        "/simulator/events",
        &format!(
            "{{\"type\": \"Reboot\", \"not_before_seconds\": {NOTICE_SECONDS}, \"runs_for_seconds\": {RUNS_FOR_SECONDS}}}"
        ),
    )
    .map_err(|error| anyhow::anyhow!("cannot generate the event: {error}"))?;
    let created: serde_json::Value = serde_json::from_str(&answer)
        .with_context(|| format!("the simulator answered {answer:?}"))?;
    let event_id = created["event_id"]
        .as_str()
        .with_context(|| format!("no event_id in {answer}"))?
        .to_owned();
    let ready_prefix = format!("{PREFIX}/events/{event_id}/ready/");
    let ready_keys = || {
        watch
            .first_puts()
            .keys()
            .filter(|key| key.starts_with(&ready_prefix))
            .count()
    };
    wait(STAGE_WITHIN, "every VM but the straggler ready", || {
        let ready = ready_keys();
        Ok((ready + 1 < vms).then(|| format!("{ready} of {vms} ready keys written")))
    })?;
    // N − 1 VMs wait at the barrier for the straggler.
    std::thread::sleep(Duration::from_secs(1));
    let waiting_start = fleet.sample()?;
    std::thread::sleep(WAITING_WINDOW);
    let waiting_end = fleet.sample()?;
    let waiting = fleet.window(&waiting_start, &waiting_end, leader)?;
    let straggler_waited = ready_keys() + 1 == vms;
    // The approval: the claim shows in etcd first; then the simulator is asked (its state
    // carries the request log, so it is not read in a tight loop).
    let approval_key = format!("{PREFIX}/events/{event_id}/approval");
    wait(STAGE_WITHIN, "the approval claimed in etcd", || {
        let ready = ready_keys();
        Ok((!watch.first_puts().contains_key(&approval_key))
            .then(|| format!("{ready} of {vms} ready keys written, no approval claimed")))
    })?;
    wait(STAGE_WITHIN, "the approval POST at the simulator", || {
        let state = simulator.state();
        Ok(state
            .approvals
            .iter()
            .all(|approval| approval.event_id != event_id)
            .then(|| "claimed in etcd, not POSTed yet".to_owned()))
    })?;
    let event_end = fleet.sample()?;
    let event = fleet.window(&event_start, &event_end, leader)?;
    // The event runs for RUNS_FOR_SECONDS and goes; a second approval would show by then.
    wait(STAGE_WITHIN, "the event to end at the simulator", || {
        let state = simulator.state();
        let removed = state
            .history
            .iter()
            .any(|record| record.event_id == event_id && record.transition == Transition::Removed);
        Ok((!removed).then(|| "not removed yet".to_owned()))
    })?;
    let state_after = simulator.state();
    let figures = barrier_figures(
        &state_after,
        &event_id,
        &watch.first_puts(),
        names,
        fleet.daemons,
    )?;
    // The daemons see it gone and their plugins recover before the next event.
    std::thread::sleep(BETWEEN_EVENTS);
    Ok(EventRun {
        waiting,
        event,
        straggler_waited,
        figures,
    })
}

struct BarrierFigures {
    barrier: Duration,
    /// Appears → every VM but the straggler ready.
    appear_to_fast_ready: Duration,
    appear_to_first_ready: Duration,
    appear_to_last_ready: Duration,
    last_ready_to_approval: Duration,
    last_ready_logged_to_approval: Option<Duration>,
    approval_posts: usize,
}

fn barrier_figures(
    state: &StateSnapshot,
    event_id: &str,
    first_puts: &BTreeMap<String, u64>,
    names: &[String],
    daemons: &[Daemon],
) -> anyhow::Result<BarrierFigures> {
    let appeared = state
        .history
        .iter()
        .find(|record| record.event_id == event_id && record.transition == Transition::Appeared)
        .map(|record| record.at_unix_ms)
        .context("the simulator's history has no appearance of the event")?;
    let approvals: Vec<_> = state
        .approvals
        .iter()
        .filter(|approval| approval.event_id == event_id)
        .collect();
    let approved = approvals
        .first()
        .map(|approval| approval.at_unix_ms)
        .context("no approval")?;
    let mut ready = Vec::new();
    for vm in names {
        let key = format!("{PREFIX}/events/{event_id}/ready/{vm}");
        let at = first_puts
            .get(&key)
            .with_context(|| format!("the watch never saw {key} written"))?;
        ready.push(*at);
    }
    ready.sort_unstable();
    let first_ready = ready.first().copied().unwrap_or(0);
    let fast_ready = ready[ready.len().saturating_sub(2)];
    let last_ready = ready.iter().copied().max().unwrap_or(0);
    if last_ready > approved {
        bail!(
            "the event was approved at {approved} before the last VM was ready at {last_ready}: the barrier is broken"
        );
    }
    let last_logged = daemons
        .iter()
        .filter_map(|daemon| {
            daemon
                .lines_with_message(forewarn_host::log_messages::COORDINATION_READY)
                .into_iter()
                .find(|line| line.text("event_id") == event_id)
                .map(|line| line.at_unix_ms)
        })
        .max();
    let ms = |from: u64, to: u64| Duration::from_millis(to.saturating_sub(from));
    Ok(BarrierFigures {
        barrier: ms(appeared, approved),
        appear_to_first_ready: ms(appeared, first_ready),
        appear_to_fast_ready: ms(appeared, fast_ready),
        appear_to_last_ready: ms(appeared, last_ready),
        last_ready_to_approval: ms(last_ready, approved),
        last_ready_logged_to_approval: last_logged.map(|at| ms(at, approved)),
        approval_posts: approvals.len(),
    })
}

fn seconds(duration: Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

fn millis(duration: Duration) -> String {
    format!("{} ms", duration.as_millis())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn cores(cpu: Duration, window: Duration) -> String {
    format!("{:.2}", cpu.as_secs_f64() / window.as_secs_f64().max(1e-9))
}

/// One member other than the leader: the one the daemons talk to when that is a follower.
fn follower(leader: usize) -> usize {
    if leader == 0 { 1 } else { 0 }
}

fn print_window(name: &str, window: &Window, vms: usize) {
    println!(
        "- {name} window {}: {:.0} etcd requests ({:.2} per VM per second), by member {:?}; by method {}; \
         {:.1} KiB/s sent by etcd; {:.0} writes applied; member CPU {:?} s; member RSS {:?} MiB; \
         daemons {} cores; simulator {} cores; load {:.1} → {:.1}",
        seconds(window.length),
        window.total_requests(),
        window.per_vm_per_second(window.total_requests(), vms),
        window
            .requests_per_member
            .iter()
            .map(|n| *n as u64)
            .collect::<Vec<_>>(),
        window
            .requests
            .iter()
            .filter(|(_, count)| **count > 0.0)
            .map(|(method, count)| format!("{method} {count:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        window.sent_bytes / 1024.0 / window.length.as_secs_f64(),
        window.leader_writes,
        window
            .member_cpu
            .iter()
            .map(|cpu| (cpu.as_secs_f64() * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        window
            .member_rss_kib
            .iter()
            .map(|kib| (*kib as f64 / 1024.0 * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        cores(window.daemons_cpu, window.length),
        cores(window.simulator_cpu, window.length),
        window.load.0,
        window.load.1
    );
}

fn print_run(run: &Run) {
    println!("## N = {}\n", run.vms);
    println!(
        "- start-up: first daemon (compiles the 4 bundled plugins) {}; the other {} from the copied cache: all leases in etcd {} after the first of them started",
        seconds(run.cold_start),
        run.vms - 1,
        seconds(run.fleet_up)
    );
    println!(
        "- raft leader: member {} (the daemons talk to member 0, their first endpoint)",
        run.leader
    );
    print_window("idle", &run.idle, run.vms);
    for (index, event) in run.events.iter().enumerate() {
        let figures = &event.figures;
        println!(
            "- event {}: appears → first ready key {} → last ready key {} → approval POST {} (appears → approval {}); approval POSTs: {}{}",
            index + 1,
            millis(figures.appear_to_first_ready),
            millis(figures.appear_to_last_ready),
            millis(figures.last_ready_to_approval),
            millis(figures.barrier),
            figures.approval_posts,
            figures
                .last_ready_logged_to_approval
                .map(|logged| format!(
                    "; last \"recorded ready\" log line → approval POST {}",
                    millis(logged)
                ))
                .unwrap_or_default()
        );
        if !event.straggler_waited {
            println!(
                "  NOTE: the straggler was ready before the waiting window ended: that window is not all waiting"
            );
        }
        print_window("  waiting at the barrier", &event.waiting, run.vms);
        print_window("  whole event", &event.event, run.vms);
    }
    println!(
        "- daemon RSS: median {}, largest {}\n",
        mib(run.daemon_rss_median_kib),
        mib(run.daemon_rss_max_kib)
    );
}

/// `min–max (median)` of sorted durations, in ms.
fn spread(all: &[Duration]) -> String {
    let median = all[all.len() / 2];
    format!(
        "{}–{} ms (median {})",
        all[0].as_millis(),
        all[all.len() - 1].as_millis(),
        median.as_millis()
    )
}

fn print_tables(runs: &[Run], idle: Duration) {
    println!(
        "## Summary\n\n{EVENTS} events per N. Windows: idle ({} s, no event); waiting (N − 1 VMs ready, \
         waiting {} s at the barrier for the straggler; first event); event (first event: appears → \
         approval POST). Requests: gRPC requests started, summed over the 3 members, per VM of the \
         fleet per second.\n",
        idle.as_secs(),
        WAITING_WINDOW.as_secs()
    );
    println!(
        "| N | (a) last ready → approval POST | (d) event appears → approval POST | appears → last VM but the straggler ready | approval POSTs per event | (b) etcd req/VM/s idle | waiting | whole event | etcd KiB/s sent, waiting | load avg (1 min) idle / waiting |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for run in runs {
        let rate = |window: &Window| window.per_vm_per_second(window.total_requests(), run.vms);
        let load = |window: &Window| format!("{:.1}–{:.1}", window.load.0, window.load.1);
        let posts: Vec<String> = run
            .events
            .iter()
            .map(|event| event.figures.approval_posts.to_string())
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {} / {} |",
            run.vms,
            spread(&run.each(|figures| figures.last_ready_to_approval)),
            spread(&run.each(|figures| figures.barrier)),
            spread(&run.each(|figures| figures.appear_to_fast_ready)),
            posts.join(", "),
            rate(&run.idle),
            rate(&run.first().waiting),
            rate(&run.first().event),
            run.first().waiting.sent_bytes / 1024.0 / run.first().waiting.length.as_secs_f64(),
            load(&run.idle),
            load(&run.first().waiting),
        );
    }
    println!(
        "\n| N | (c) leader CPU idle / waiting / event (cores) | leader RSS | follower CPU idle / waiting / event | follower RSS | daemons CPU idle / waiting / event (cores, all N) | daemon RSS median | simulator CPU idle / event |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for run in runs {
        let other = follower(run.leader);
        let first = run.first();
        let three = |member: usize| {
            format!(
                "{} / {} / {}",
                cores(run.idle.member_cpu[member], run.idle.length),
                cores(first.waiting.member_cpu[member], first.waiting.length),
                cores(first.event.member_cpu[member], first.event.length)
            )
        };
        println!(
            "| {} | {} | {} | {} | {} | {} / {} / {} | {} | {} / {} |",
            run.vms,
            three(run.leader),
            mib(first.event.member_rss_kib[run.leader]),
            three(other),
            mib(first.event.member_rss_kib[other]),
            cores(run.idle.daemons_cpu, run.idle.length),
            cores(first.waiting.daemons_cpu, first.waiting.length),
            cores(first.event.daemons_cpu, first.event.length),
            mib(run.daemon_rss_median_kib),
            cores(run.idle.simulator_cpu, run.idle.length),
            cores(first.event.simulator_cpu, first.event.length),
        );
    }
}
