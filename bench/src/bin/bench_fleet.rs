//! `bench-fleet`: N `forewarn run` daemons on one machine, each with the bundled plugins, its
//! own state directory and admin port, against one simulator serving one Reboot that names
//! all N VMs (`/vm/NAME/`) and a three-member etcd cluster on loopback (issue 37, item 2).
//!
//! For each N (10, 50, 100 by default), on a fresh cluster and simulator:
//!
//! 1. the first daemon starts with an empty compile cache (the bundled plugins compiled once);
//!    its cache is then copied into every other daemon's state directory (forewarn has no
//!    shared cache: each daemon keeps its own under `state-dir/cache`), and the others start;
//! 2. once every daemon holds its lease (`vms/VM/member` in etcd), and a settling pause, an idle
//!    window: etcd's own request counters (`grpc_server_started_total` on each member's
//!    `/metrics`, summed over the three), the members' and the daemons' CPU and RSS;
//! 3. the event is generated at the simulator (`POST /simulator/events`, NotBefore 5 minutes
//!    ahead, every VM of the scenario): the event window runs from there to the approval
//!    POST the simulator records. An `etcdctl watch` on the events' prefix gives when each
//!    `vms/VM/events/ID/ready` key was first written.
//!
//! Figures: (a) last ready key → approval POST; (d) event appears → approval POST, and the
//! part of it that is the VMs' own preparation (appears → last ready); (b) etcd requests per
//! VM per second, idle and during the event, and the bytes etcd sent; (c) the etcd leader's
//! and a follower's CPU and RSS; the daemons' median RSS and total CPU; the load average.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use forewarn_bench::fleet_limits::preflight;
use forewarn_bench::forewarn_binary;
use forewarn_bench::proc_stats::{clock_ticks_per_second, rss_kib};
use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::etcd::EtcdCluster;
use forewarn_test_support::harness::{Daemon, Simulator, http_post_json};
use tempfile::TempDir;

#[path = "bench_fleet/fleet_tables.rs"]
mod fleet_tables;
use fleet_tables::{print_run, print_tables};
#[path = "bench_fleet/fleet_probes.rs"]
mod fleet_probes;
use fleet_probes::{Fleet, KeyWatch, Metrics};
#[path = "bench_fleet/fleet_setup.rs"]
mod fleet_setup;
use fleet_setup::{
    copy_cache, count_keys, describe_daemon, plugins_loaded, scenario, vm_name, wait, write_config,
    write_plugins,
};

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
    preflight("bench-fleet", sizes.iter().copied().max().unwrap_or(0))?;
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
    let first_config = write_config(
        dir.path(),
        &names[0],
        &plugin_dir,
        &simulator,
        &endpoints,
        &[],
    )?;
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
        let config = write_config(dir.path(), vm, plugins, &simulator, &endpoints, &[])?;
        copy_cache(&warm_cache, &dir.path().join(vm).join("state"))?;
        daemons.push(Daemon::start(binary, &config));
    }
    // Before any event, a VM's subtree holds its member key alone.
    let members = format!("{PREFIX}/vms/");
    wait(
        STAGE_WITHIN,
        "every daemon's lease in etcd (vms/VM/member)",
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

    let watch = KeyWatch::start(&all_endpoints, &format!("{PREFIX}/"))?;
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
    let vms_prefix = format!("{PREFIX}/vms/");
    let ready_suffix = format!("/events/{event_id}/ready");
    let ready_keys = || {
        watch
            .first_puts()
            .keys()
            .filter(|key| key.starts_with(&vms_prefix) && key.ends_with(&ready_suffix))
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
        let key = format!("{PREFIX}/vms/{vm}/events/{event_id}/ready");
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
                .lines_with_message(forewarn_daemon::log_messages::COORDINATION_READY)
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
