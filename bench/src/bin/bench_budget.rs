//! `bench-budget`: the fleet disruption budget (issue 50) with N real `forewarn run` daemons
//! on one machine, each with the bundled plugins, its own state directory and admin port,
//! against one simulator and a three-member etcd cluster on loopback — bench-fleet's fleet,
//! set up by the same code (`bench_fleet/fleet_setup.rs`).
//!
//! For each N (10, 50, 100 by default), twice on a fresh cluster and simulator: once with
//! `disruption-budget = "10%"` in `[coordination]`, once without a budget. Every VM is given a
//! Reboot of its own (naming only itself), all generated within the same second so that they
//! carry the same NotBefore (5 minutes ahead); each runs `RUNS_FOR_SECONDS` once approved,
//! then is gone. An `etcdctl watch --prefix -w json` stamps every change of the daemons' keys
//! as it arrives (etcd keeps revisions, no wall time).
//!
//! Figures:
//! 1. the most VMs approved and not recovered at once: from etcd's own history of the slot
//!    keys (`etcdctl watch --rev=1`: the most `vms/VM/slots/ID` keys live at any revision),
//!    and independently at the simulator (approved and not yet Removed);
//! 2. one slot given back (its key deleted, as the watch saw it; and as the daemon logged it)
//!    → the next VM's approval POST at the simulator, p50/p99;
//! 3. the fleet's total: the first event appears → the last VM's event is gone, with a budget
//!    and without.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use forewarn_bench::fleet_limits::preflight;
use forewarn_bench::forewarn_binary;
use forewarn_bench::proc_stats::{clock_ticks_per_second, load_average};
use forewarn_simulator::Transition;
use forewarn_test_support::etcd::{EtcdCluster, prefix_history};
use forewarn_test_support::harness::{Daemon, Simulator, http_post_json, now_unix_ms};
use tempfile::TempDir;

#[path = "bench_fleet/fleet_setup.rs"]
mod fleet_setup;
use fleet_setup::{
    copy_cache, count_keys, describe_daemon, plugins_loaded, scenario, vm_name, wait, write_config,
    write_plugins,
};
#[path = "bench_budget/budget_watch.rs"]
mod budget_watch;
use budget_watch::{LoadSample, PrefixWatch, keys_under, simulator_state};
#[path = "bench_budget/budget_figures.rs"]
mod budget_figures;
use budget_figures::{Observed, RunFigures, print_run, print_tables};

/// Fleet sizes measured by default.
const DEFAULT_SIZES: [usize; 3] = [10, 50, 100];
/// The budget of the runs with one.
const DEFAULT_BUDGET: &str = "10%";
/// The events' notice: far enough that NotBefore never comes before the fleet is through.
const NOTICE_SECONDS: u64 = 300;
/// How long an approved event runs before it goes (the simulator's `runs_for_seconds`).
const RUNS_FOR_SECONDS: u64 = 5;
/// lb-drain's drain window (bench-fleet's; the shipped default is 15 s).
const DRAIN_SECONDS: u64 = 5;
/// After every daemon holds its lease (and its group key): their first rounds are over.
const SETTLE: Duration = Duration::from_secs(5);
/// The key prefix the daemons use.
const PREFIX: &str = "/forewarn";
/// The lease TTL the daemons use: forewarn's default, as bench-fleet sets it.
const LEASE_TTL: &str = "10s";
/// How long the bench waits for start-up and for the slots given back.
const STAGE_WITHIN: Duration = Duration::from_secs(300);
/// How long the bench waits for the whole fleet to get through its events.
const FLEET_WITHIN: Duration = Duration::from_secs(900);
/// How often the bench reads the simulator's state while it waits (it carries up to 10 000
/// requests: read every 100 ms it would cost the 2 cores what the daemons need).
const STATE_EVERY: Duration = Duration::from_millis(500);
/// The bundled plugins the daemons run, as bench-fleet and `forewarn demo` do.
const PLUGINS: [&str; 4] = ["lb-drain", "checkpoint", "graceful-shutdown", "notify"];
/// What a daemon logs when it deleted its slot key (host/coordination/src/disruption_slots.rs).
const GAVE_BACK: &str = "gave back this VM's slot of the disruption budget";

const USAGE: &str = "usage: bench-budget [--vms 10,50,100] [--budget 10%]";

fn main() -> anyhow::Result<()> {
    let (sizes, budget) = arguments()?;
    preflight("bench-budget", sizes.iter().copied().max().unwrap_or(0))?;
    let binary = forewarn_binary()?;
    let started = Instant::now();
    println!(
        "# bench-budget: N daemons, a Reboot each, disruption-budget = \"{budget}\" against none, \
         a 3-member etcd ({})\n",
        binary.display()
    );
    let mut runs = Vec::new();
    for &vms in &sizes {
        for with in [Some(budget.as_str()), None] {
            eprintln!(
                "bench-budget: N = {vms}, {} …",
                with.map_or("no budget".to_owned(), |budget| format!("budget {budget}"))
            );
            let run = measure(&binary, vms, with)?;
            print_run(&run);
            runs.push(run);
        }
    }
    print_tables(&runs);
    println!("\nTotal run time: {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `[--vms 10,50,100] [--budget 10%]`.
fn arguments() -> anyhow::Result<(Vec<usize>, String)> {
    let mut sizes = DEFAULT_SIZES.to_vec();
    let mut budget = DEFAULT_BUDGET.to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{arg} needs a value ({USAGE})"))?;
        match arg.as_str() {
            "--vms" => {
                sizes = value
                    .split(',')
                    .map(|n| n.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("--vms takes sizes like 10,50,100, not {value:?}"))?;
            }
            "--budget" => {
                expected_slots(&value, 1)?;
                budget = value;
            }
            _ => bail!("unknown argument {arg:?} ({USAGE})"),
        }
    }
    if let Some(&bad) = sizes.iter().find(|&&n| !(2..=100).contains(&n)) {
        bail!("--vms {bad}: a fleet is 2 to 100 VMs (bench-fleet's bounds)");
    }
    Ok((sizes, budget))
}

/// The slots `budget` ("10%", "3") gives a group of `vms` VMs: forewarn's rule
/// (pipeline::disruption_budget), written again here so that the bench checks the daemons
/// against it rather than against themselves.
fn expected_slots(budget: &str, vms: usize) -> anyhow::Result<usize> {
    let text = budget.trim();
    let slots = match text.strip_suffix('%') {
        Some(percent) => {
            let percent: usize = percent
                .trim()
                .parse()
                .with_context(|| format!("--budget {budget:?}: not a percentage"))?;
            if !(1..=100).contains(&percent) {
                bail!("--budget {budget:?}: a percentage from 1% to 100%");
            }
            (vms * percent / 100).max(1)
        }
        None => {
            let count: usize = text
                .parse()
                .with_context(|| format!("--budget {budget:?}: neither a count nor \"10%\""))?;
            if count == 0 {
                bail!("--budget 0 lets no VM approve early");
            }
            count
        }
    };
    Ok(slots)
}

/// One fleet of `vms` daemons, `budget` or none, through one Reboot per VM.
fn measure(binary: &Path, vms: usize, budget: Option<&str>) -> anyhow::Result<RunFigures> {
    let dir = TempDir::new().context("cannot create a temp dir")?;
    let names: Vec<String> = (1..=vms).map(vm_name).collect();
    let cluster = EtcdCluster::start(3);
    let endpoints: Vec<String> = (0..3).map(|index| cluster.endpoint(index)).collect();
    let all_endpoints = cluster.endpoints();
    let simulator = Simulator::builder(binary)
        .scenario_text(&scenario(&names))
        .start();
    let plugin_dir = dir.path().join("plugins");
    write_plugins(&plugin_dir, DRAIN_SECONDS)?;
    let coordination: Vec<String> = budget
        .map(|budget| vec![format!("disruption-budget = \"{budget}\"")])
        .unwrap_or_default();

    // The first daemon compiles the bundled plugins; the others start from its cache.
    let mut daemons = Vec::new();
    let first_config = write_config(
        dir.path(),
        &names[0],
        &plugin_dir,
        &simulator,
        &endpoints,
        &coordination,
    )?;
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
    let warm_cache = dir.path().join(&names[0]).join("state").join("cache");
    wait(STAGE_WITHIN, "the first daemon's compile cache", || {
        let index = std::fs::read_to_string(warm_cache.join("index.sha256")).unwrap_or_default();
        let entries = index.lines().filter(|line| !line.trim().is_empty()).count();
        Ok((entries < PLUGINS.len()).then(|| format!("{entries} entries in index.sha256")))
    })?;
    let fleet_start = Instant::now();
    for vm in &names[1..] {
        let config = write_config(
            dir.path(),
            vm,
            &plugin_dir,
            &simulator,
            &endpoints,
            &coordination,
        )?;
        copy_cache(&warm_cache, &dir.path().join(vm).join("state"))?;
        daemons.push(Daemon::start(binary, &config));
    }
    // Every daemon's member key, and with a budget its group key: the budget's percentage
    // is of the VMs known in the group, so every VM must be known before the events come.
    let vms_prefix = format!("{PREFIX}/vms/");
    wait(
        STAGE_WITHIN,
        "every daemon's lease (and group) in etcd",
        || {
            let keys = keys_under(&all_endpoints, &vms_prefix)?;
            let members = keys.iter().filter(|key| key.ends_with("/member")).count();
            let groups = keys.iter().filter(|key| key.ends_with("/group")).count();
            for daemon in daemons.iter_mut() {
                if daemon.has_exited() {
                    bail!(
                        "a daemon exited while starting:\n{}",
                        describe_daemon(daemon)
                    );
                }
            }
            let up = members == vms && (budget.is_none() || groups == vms);
            Ok((!up).then(|| format!("{members} member keys, {groups} group keys of {vms}")))
        },
    )?;
    eprintln!(
        "  {vms} daemons up {:.1} s after the second started; {} keys under {vms_prefix}",
        fleet_start.elapsed().as_secs_f64(),
        count_keys(&all_endpoints, &vms_prefix)?
    );
    std::thread::sleep(SETTLE);

    let watch = PrefixWatch::start(&all_endpoints, &format!("{PREFIX}/"))?;
    let ticks = clock_ticks_per_second()?;
    let load_before = load_average()?;
    let cost_before = LoadSample::take(&cluster, &daemons, ticks)?;
    let events = generate_events(&simulator, &names)?;
    let generated = simulator_state(&simulator)?;
    let not_befores: std::collections::BTreeSet<String> = generated
        .events
        .iter()
        .filter(|event| {
            events
                .values()
                .any(|id| id.eq_ignore_ascii_case(&event.event_id))
        })
        .map(|event| event.not_before.clone())
        .collect();

    // Every VM's event approved, run and gone.
    let state = wait_for_the_fleet(&simulator, &events, &mut daemons)?;
    if budget.is_some() {
        wait(STAGE_WITHIN, "every slot given back", || {
            let held: Vec<String> = keys_under(&all_endpoints, &vms_prefix)?
                .into_iter()
                .filter(|key| key.contains("/slots/"))
                .collect();
            Ok((!held.is_empty()).then(|| format!("still held: {held:?}")))
        })?;
    }
    let cost = cost_before.until(&LoadSample::take(&cluster, &daemons, ticks)?);
    // The watch prints what etcd sent it; a moment for the last deletes to arrive.
    std::thread::sleep(Duration::from_secs(1));
    let load_after = load_average()?;
    let history = prefix_history(&all_endpoints, &[], &vms_prefix, Duration::from_secs(120));
    let gave_back: BTreeMap<String, u64> = names
        .iter()
        .zip(&daemons)
        .filter_map(|(vm, daemon)| {
            let event_id = events.get(vm)?;
            let line = daemon
                .lines_with_message(GAVE_BACK)
                .into_iter()
                .find(|line| line.text("event_id").eq_ignore_ascii_case(event_id))?;
            Some((vm.clone(), line.at_unix_ms))
        })
        .collect();
    let slots = budget
        .map(|budget| expected_slots(budget, vms))
        .transpose()?;
    let observed = Observed {
        vms,
        budget: budget.map(str::to_owned),
        slots,
        prefix: PREFIX,
        events: &events,
        state: &state,
        watch: &watch.changes(),
        watch_problems: watch.problems().len(),
        history: &history,
        gave_back: &gave_back,
        not_befores: not_befores.len(),
        notice: Duration::from_secs(NOTICE_SECONDS),
        load: (load_before, load_after),
        cost,
    };
    Ok(RunFigures::from_observed(&observed))
}

/// One Reboot per VM, naming only it, generated within one wall-clock second (NotBefore is
/// given to the second: they all carry the same one): one thread per VM, all let go at once
/// just after a second begins, so that daemons preparing the first events do not slow the
/// POSTs of the last ones. Returns VM → EventId.
fn generate_events(
    simulator: &Simulator,
    names: &[String],
) -> anyhow::Result<BTreeMap<String, String>> {
    let go = std::sync::Barrier::new(names.len() + 1);
    let started = std::cell::Cell::new(None);
    let answers: Vec<anyhow::Result<(String, String)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = names
            .iter()
            .map(|vm| {
                let go = &go;
                scope.spawn(move || {
                    go.wait();
                    generate_one(simulator, vm).map(|id| (vm.clone(), id))
                })
            })
            .collect();
        let into_second = now_unix_ms() % 1000;
        std::thread::sleep(Duration::from_millis(1000 - into_second + 10));
        started.set(Some(Instant::now()));
        go.wait();
        threads
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .map_err(|_| anyhow::anyhow!("a thread generating an event panicked"))?
            })
            .collect()
    });
    let events = answers.into_iter().collect::<anyhow::Result<_>>()?;
    eprintln!(
        "  {} events generated in {} ms",
        names.len(),
        started.get().map_or(0, |at| at.elapsed().as_millis())
    );
    Ok(events)
}

/// `POST /simulator/events`: a Reboot naming `vm` alone. Returns its EventId.
fn generate_one(simulator: &Simulator, vm: &str) -> anyhow::Result<String> {
    let body = format!(
        "{{\"type\": \"Reboot\", \"not_before_seconds\": {NOTICE_SECONDS}, \
         \"runs_for_seconds\": {RUNS_FOR_SECONDS}, \"resources\": [\"{vm}\"]}}"
    );
    let answer = http_post_json(simulator.address(), "/simulator/events", &body)
        .map_err(|error| anyhow::anyhow!("cannot generate {vm}'s event: {error}"))?;
    let created: serde_json::Value = serde_json::from_str(&answer)
        .with_context(|| format!("the simulator answered {answer:?}"))?;
    let event_id = created["event_id"]
        .as_str()
        .with_context(|| format!("no event_id in {answer}"))?;
    Ok(event_id.to_owned())
}

/// Waits until every VM's event is gone at the simulator (approved, run, removed); fails
/// when a daemon exits meanwhile. Returns the simulator's state then.
fn wait_for_the_fleet(
    simulator: &Simulator,
    events: &BTreeMap<String, String>,
    daemons: &mut [Daemon],
) -> anyhow::Result<forewarn_simulator::StateSnapshot> {
    let deadline = Instant::now() + FLEET_WITHIN;
    loop {
        let state = simulator_state(simulator)?;
        let ours = |id: &str| events.values().any(|event| event.eq_ignore_ascii_case(id));
        let approved = state
            .approvals
            .iter()
            .filter(|approval| approval.accepted && ours(&approval.event_id))
            .map(|approval| approval.event_id.to_ascii_lowercase())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let gone = state
            .history
            .iter()
            .filter(|change| change.transition == Transition::Removed && ours(&change.event_id))
            .count();
        if gone >= events.len() {
            return Ok(state);
        }
        for daemon in daemons.iter_mut() {
            if daemon.has_exited() {
                bail!(
                    "a daemon exited during the events:\n{}",
                    describe_daemon(daemon)
                );
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "timed out after {FLEET_WITHIN:?}: {approved} of {} events approved, {gone} gone",
                events.len()
            );
        }
        std::thread::sleep(STATE_EVERY);
    }
}
