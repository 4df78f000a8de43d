//! `forewarn demo`: the simulator, the daemon with the bundled plugins and a small workload
//! in one process, printing a timeline a person can follow until the scenario is over.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_runtime::Runtime;
use forewarn_simulator::{SimulatorConfig, SimulatorHandle};
use serde::Serialize;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use forewarn_imds::EventId;

use crate::authoring::verdict::PluginVerdicts;
use crate::bundled::bundled_plugins;
use crate::cli::demo_load_balancer::{self, DemoLoadBalancer};
use crate::cli::demo_log::{self, DemoLogLine};
use crate::cli::demo_workload::{
    DemoWorkload, START_ACTION, STOP_ACTION, WorkloadFacts, WorkloadNote,
};
use crate::cli::plugin_files::{self, PluginFile};
use crate::cli::quiet_stretch_skipper;
use forewarn_daemon::config::{ActionConfig, Config};
use forewarn_daemon::daemon::outcome_keeper;
use forewarn_daemon::daemon::timeline_broadcast::new_timeline;
use forewarn_daemon::daemon::wiring;
use forewarn_daemon::ops::admin;
use forewarn_daemon::plugins::set::{LoadedPlugin, PluginSource};
use forewarn_manifest::{ConfigValue, PluginManifest};
use forewarn_pipeline::timeline::{LogLevel, TimelineEntry};

/// `forewarn demo`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario: a built-in name (see `forewarn simulate --list`) or a scenario file.
    #[arg(long, default_value = forewarn_simulator::DEFAULT_SCENARIO)]
    scenario: String,
    /// How many times faster than real time the scenario runs.
    #[arg(long, default_value_t = 10.0)]
    speed: f64,
    /// lb-drain's drain window in seconds (real time).
    #[arg(long, default_value_t = 3)]
    drain_seconds: u64,
    /// Print the timeline as JSON lines (one object per entry, a summary last).
    #[arg(long)]
    json: bool,
    /// Also run the plugins in DIR (each NAME.wasm with its NAME.toml, if present).
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,
}

impl Args {
    /// The demo's options: the bundled plugins, those in `--plugins DIR`, five minutes at most.
    fn options(self) -> anyhow::Result<DemoOptions> {
        Ok(DemoOptions {
            scenario: self.scenario,
            speed: self.speed,
            drain_seconds: self.drain_seconds,
            timeout: Duration::from_secs(300),
            json: self.json,
            extra_plugins: match &self.plugins {
                Some(dir) => plugin_files::in_dir(dir)?,
                None => Vec::new(),
            },
            bundled: true,
            quiet: false,
            compile_cache: None,
            actions: None,
            skip_quiet_stretches: false,
        })
    }
}

/// Options of a demo run (`forewarn demo`, and each scenario `plugin test` plays).
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// A built-in scenario's name, or the path of a scenario file (TOML, or `.json`).
    pub scenario: String,
    /// How much faster than real time the simulated IMDS runs the scenario (1 is real time);
    /// finite and greater than 0, or the simulator refuses to start.
    pub speed: f64,
    /// Drain window the demo gives lb-drain, so the story fits in under a minute.
    pub drain_seconds: u64,
    /// Give up after this long (a bug, not a scenario, would get there).
    pub timeout: Duration,
    /// Print one JSON object per line instead of the human timeline.
    pub json: bool,
    /// Plugins besides the bundled ones (`demo --plugins DIR`, `plugin test`'s plugin).
    pub extra_plugins: Vec<PluginFile>,
    /// Whether the bundled plugins take part (`plugin test` without `--with-bundled`: no).
    pub bundled: bool,
    /// Print nothing (`plugin test --all-scenarios` prints only its verdicts).
    pub quiet: bool,
    /// The compile cache to use instead of one in the run's own state directory: `plugin
    /// test` compiles the plugin into it once and plays every scenario from it.
    pub compile_cache: Option<PathBuf>,
    /// The actions plugins run instead of the demo workload's stop and start
    /// (`plugin test --daemon-config`).
    pub actions: Option<BTreeMap<String, ActionConfig>>,
    /// Skip each stretch of the scenario where the daemon only waits (`plugin test`; see
    /// [`quiet_stretch_skipper`]); the demo, which people watch, plays every second.
    pub skip_quiet_stretches: bool,
}

/// What the demo saw, printed at the end (and as the last JSON line with `--json`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DemoSummary {
    /// The events the daemon saw.
    pub events: BTreeSet<EventId>,
    /// How many approvals IMDS accepted.
    pub approved_at_imds: usize,
    /// How many recovery calls plugins answered.
    pub recoveries: usize,
    /// Warnings and errors: the daemon's, and those the plugins logged.
    pub warnings: usize,
    /// What the demo's workload went through.
    pub workload: WorkloadFacts,
    /// What each event cost: its outcome record's verdict (`forewarn events`).
    pub outcomes: Vec<DemoOutcome>,
    /// How each plugin did, for `plugin test`.
    #[serde(skip)]
    pub verdicts: PluginVerdicts,
}

/// One event's outcome, as the demo's summary ends with it.
#[derive(Debug, Clone, Serialize)]
pub struct DemoOutcome {
    /// IMDS's EventId.
    pub event_id: EventId,
    /// IMDS's EventType as sent.
    pub event_type: String,
    /// The record's verdict line.
    pub verdict: String,
}

/// How a run ended: the summary, and whether the scenario and the daemon's work finished.
#[derive(Debug, Clone)]
pub struct Played {
    /// What the run saw.
    pub summary: DemoSummary,
    /// The scenario finished within the timeout.
    pub finished: bool,
    /// The daemon finished every event it took up.
    pub drained: bool,
    /// The plugins this run compiled itself (the others came from the compile cache).
    pub compiled: Vec<String>,
    /// The scenario time skipped as quiet stretches (`skip_quiet_stretches`).
    pub skipped: Duration,
}

/// Runs the demo; exit 0 when the scenario finished and every event was handled to the end.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = args.options()?;
    let played = play(&options).await?;
    if !played.finished {
        bail!("the scenario did not finish within {:?}", options.timeout);
    }
    if !played.drained {
        bail!("the daemon still had events in progress when the scenario ended");
    }
    Ok(ExitCode::SUCCESS)
}

/// Plays the scenario with the demo's plugins and prints the timeline; Err only when it
/// could not be set up.
pub async fn play(options: &DemoOptions) -> anyhow::Result<Played> {
    let (log_sender, log_lines) = mpsc::unbounded_channel();
    demo_log::route_to(log_sender);
    let (note_sender, notes) = mpsc::unbounded_channel();
    let workload = DemoWorkload::start(note_sender.clone()).await?;
    let scenario = forewarn_simulator::load_scenario(&options.scenario)?;
    if scenario.open_ended {
        bail!(
            "scenario `{}` never ends on its own (it is the simulator console's blank canvas): \
             play it with `forewarn simulate --scenario {}`, or pick a scenario that ends from \
             `forewarn simulate --list`",
            options.scenario,
            options.scenario
        );
    }
    let vm_name = scenario.default_vm().to_owned();
    let simulator = forewarn_simulator::spawn(SimulatorConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        scenario,
        speed: options.speed,
    })
    .await
    .context("cannot start the IMDS simulator")?;
    let state_dir = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let mut config = demo_config(&simulator, &workload, &vm_name, state_dir.path());
    if let Some(actions) = &options.actions {
        config.actions = actions.clone();
    }
    let admin_listener = admin::bind(config.admin.listen).await?;
    let admin_address = admin_listener
        .local_addr()
        .context("cannot read the admin endpoint's address")?;
    let prepared = match &options.compile_cache {
        Some(cache_dir) => wiring::build_runtime_with_cache(&config, cache_dir)?,
        None => wiring::build_runtime(&config)?,
    };
    let mut loaded = match options.bundled {
        true => load_bundled(&prepared.runtime, options, &workload).await?,
        false => Vec::new(),
    };
    loaded.extend(load_files(&prepared.runtime, &options.extra_plugins).await?);
    let compiled = loaded
        .iter()
        .filter(|loaded| !loaded.plugin.loaded_from_cache())
        .map(|loaded| loaded.name().to_owned())
        .collect();
    let output = Output {
        json: options.json,
        quiet: options.quiet,
    };
    output.header(options, &simulator, &workload, &vm_name, &loaded);
    // Compiling plugins (a Python or JavaScript one takes seconds) must not eat the
    // scenario: it starts over now, as the daemon starts.
    simulator.restart_scenario();
    let plugins = wiring::publish_plugins(loaded);
    let timeline = new_timeline();
    let inputs = PrinterInputs {
        timeline: timeline.subscribe(),
        notes,
        log_lines,
    };
    let printer = tokio::spawn(print_timeline(inputs, output, Instant::now()));
    let load_balancer = DemoLoadBalancer::start(admin_address, note_sender);
    let finish_watch = timeline.subscribe();
    let skipper = match options.skip_quiet_stretches {
        true => Some(timeline.subscribe()),
        false => None,
    };
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn({
        let config = config.clone();
        let plugins = plugins.subscribe();
        let timeline = timeline.clone();
        let shutdown = shutdown.clone();
        let readiness = prepared.readiness.clone();
        let storage = prepared.storage.clone();
        async move {
            wiring::run_daemon_on(
                admin_listener,
                &config,
                plugins,
                timeline,
                readiness,
                storage,
                shutdown,
            )
            .await
        }
    });
    let finished = tokio::time::timeout(options.timeout, async {
        let Some(entries) = skipper else {
            return simulator.finished().await;
        };
        tokio::select! {
            () = simulator.finished() => {}
            () = quiet_stretch_skipper::skip_quiet_stretches(&simulator, entries) => {}
        }
    })
    .await;
    // Let recovery of the last event complete: the daemon forgets an event once done. A
    // scenario stopped at the timeout has events still going: no use waiting for them.
    let drained = match &finished {
        Ok(()) => wait_for_idle_daemon(finish_watch).await,
        Err(_) => false,
    };
    shutdown.cancel();
    load_balancer.shutdown().await;
    daemon.await.context("the daemon task failed")??;
    drop(timeline);
    let facts = workload.shutdown().await;
    let mut summary = printer.await.context("the timeline printer failed")?;
    let snapshot = simulator.snapshot();
    simulator.shutdown().await;
    summary.approved_at_imds = snapshot.approvals.iter().filter(|a| a.accepted).count();
    summary.workload = facts;
    // The daemon wrote its outcome records as it stopped.
    summary.outcomes = outcome_keeper::records_in(state_dir.path())
        .into_iter()
        .map(|record| DemoOutcome {
            event_id: record.event_id,
            event_type: record.event_type_raw,
            verdict: record.verdict.text,
        })
        .collect();
    output.summary(&summary);
    Ok(Played {
        summary,
        finished: finished.is_ok(),
        drained,
        compiled,
        skipped: Duration::from_millis(snapshot.skipped_scenario_ms),
    })
}

/// The plugins given as files, loaded off the async threads.
async fn load_files(runtime: &Runtime, files: &[PluginFile]) -> anyhow::Result<Vec<LoadedPlugin>> {
    let mut loaded = Vec::new();
    for file in files {
        let (file, runtime) = (file.clone(), runtime.clone());
        let plugin = tokio::task::spawn_blocking(move || file.load(&runtime))
            .await
            .context("the plugin loading task failed")??;
        loaded.push(plugin);
    }
    Ok(loaded)
}

/// The daemon's configuration for the demo: the simulator as IMDS, a throwaway state
/// directory, any free admin port, and the workload's stop/start actions.
fn demo_config(
    simulator: &SimulatorHandle,
    workload: &DemoWorkload,
    vm_name: &str,
    state_dir: &std::path::Path,
) -> Config {
    Config {
        vm_name: vm_name.to_owned(),
        state_dir: state_dir.to_path_buf(),
        imds: forewarn_daemon::config::ImdsConfig {
            url: simulator.base_url(),
            poll_interval: Duration::from_millis(250),
            ..Default::default()
        },
        // Any free port: demos may run side by side with a daemon on the default port.
        admin: forewarn_daemon::config::AdminConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Default::default()
        },
        actions: workload.actions().into_iter().collect(),
        // The demo holds no shutdown of the machine it runs on back.
        shutdown: forewarn_daemon::config::ShutdownConfig {
            prepare: false,
            ..forewarn_daemon::config::ShutdownConfig::default()
        },
        ..Config::default()
    }
}

/// The bundled plugins, configured for the demo's workload and drain window.
async fn load_bundled(
    runtime: &Runtime,
    options: &DemoOptions,
    workload: &DemoWorkload,
) -> anyhow::Result<Vec<LoadedPlugin>> {
    let mut loaded = Vec::new();
    for bundled in bundled_plugins() {
        let mut manifest = bundled.parsed_manifest()?;
        configure_for_demo(bundled.name, &mut manifest, options, workload);
        let runtime = runtime.clone();
        let settings = manifest.runtime_settings();
        let plugin =
            tokio::task::spawn_blocking(move || runtime.load(bundled.name, bundled.wasm, settings))
                .await
                .context("the plugin loading task failed")?
                .with_context(|| format!("cannot load the bundled plugin {}", bundled.name))?;
        loaded.push(LoadedPlugin {
            plugin,
            manifest,
            source: PluginSource::Bundled,
        });
    }
    Ok(loaded)
}

/// What an operator would write in each bundled plugin's manifest for this workload.
fn configure_for_demo(
    name: &str,
    manifest: &mut PluginManifest,
    options: &DemoOptions,
    workload: &DemoWorkload,
) {
    let text = |value: String| ConfigValue::Text(value);
    let base = workload.base_url();
    let settings: Vec<(&str, ConfigValue)> = match name {
        // The demo's load balancer probes every 250 ms and takes the VM out after 3 failed
        // probes: the drain ends then, plus a second for open connections, inside the window.
        "lb-drain" => vec![
            (
                "drain-seconds",
                ConfigValue::Integer(i64::try_from(options.drain_seconds).unwrap_or(i64::MAX)),
            ),
            (
                "unhealthy-threshold",
                ConfigValue::Integer(i64::from(demo_load_balancer::FALL)),
            ),
            ("connection-drain-seconds", ConfigValue::Integer(1)),
        ],
        "checkpoint" => {
            manifest.capabilities.http = vec![workload.authority()];
            vec![
                ("checkpoint-url", text(format!("{base}/checkpoint"))),
                ("status-url", text(format!("{base}/checkpoint/status"))),
                ("restore-url", text(format!("{base}/restore"))),
                ("retry-seconds", ConfigValue::Integer(1)),
            ]
        }
        "graceful-shutdown" => {
            manifest.capabilities.actions = vec![STOP_ACTION.into(), START_ACTION.into()];
            vec![
                ("stop-action", text(STOP_ACTION.into())),
                ("start-action", text(START_ACTION.into())),
            ]
        }
        _ => Vec::new(),
    };
    for (key, value) in settings {
        manifest.config.insert(key.into(), value);
    }
}

/// Waits (briefly) until every event the daemon took up is finished: each event with a
/// transition on the timeline has its `Finished` entry. Events the simulator played but the
/// daemon never saw (gone between two polls) are not waited for.
async fn wait_for_idle_daemon(mut entries: broadcast::Receiver<TimelineEntry>) -> bool {
    let mut taken_up = BTreeSet::new();
    let mut finished = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        // Everything already on the timeline first, so the check below sees it all.
        loop {
            match entries.try_recv() {
                Ok(entry) => note_progress(&entry, &mut taken_up, &mut finished),
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(broadcast::error::TryRecvError::Closed) => {
                    return taken_up.is_subset(&finished);
                }
            }
        }
        if taken_up.is_subset(&finished) {
            return true;
        }
        match tokio::time::timeout_at(deadline, entries.recv()).await {
            Ok(Ok(entry)) => note_progress(&entry, &mut taken_up, &mut finished),
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => return false,
        }
    }
}

fn note_progress(
    entry: &TimelineEntry,
    taken_up: &mut BTreeSet<EventId>,
    finished: &mut BTreeSet<EventId>,
) {
    match entry {
        TimelineEntry::Transition { event_id, .. } => {
            taken_up.insert(event_id.clone());
        }
        TimelineEntry::Finished { event_id } => {
            finished.insert(event_id.clone());
        }
        _ => {}
    }
}

/// Everything the printer shows, from three sources.
struct PrinterInputs {
    timeline: broadcast::Receiver<TimelineEntry>,
    notes: mpsc::UnboundedReceiver<WorkloadNote>,
    log_lines: mpsc::UnboundedReceiver<DemoLogLine>,
}

/// One thing to print.
enum Shown {
    Entry(TimelineEntry),
    Workload(WorkloadNote),
    Log(DemoLogLine),
    Skipped(u64),
}

async fn print_timeline(mut inputs: PrinterInputs, output: Output, start: Instant) -> DemoSummary {
    let mut summary = DemoSummary::default();
    loop {
        // Biased: a plugin's log lines and the workload's notes happen before the answer
        // that the timeline carries, so they are printed first when both are waiting.
        let shown = tokio::select! {
            biased;
            Some(line) = inputs.log_lines.recv() => Shown::Log(line),
            Some(note) = inputs.notes.recv() => Shown::Workload(note),
            entry = inputs.timeline.recv() => match entry {
                Ok(entry) => Shown::Entry(entry),
                Err(broadcast::error::RecvError::Lagged(missed)) => Shown::Skipped(missed),
                Err(broadcast::error::RecvError::Closed) => return summary,
            },
        };
        output.show(&shown, &mut summary, start.elapsed());
    }
}

/// How the demo prints: for people, or JSON lines for scripts and tests.
#[derive(Clone, Copy)]
struct Output {
    json: bool,
    quiet: bool,
}

impl Output {
    fn header(
        &self,
        options: &DemoOptions,
        simulator: &SimulatorHandle,
        workload: &DemoWorkload,
        vm_name: &str,
        plugins: &[LoadedPlugin],
    ) {
        if self.quiet {
            return;
        }
        let names: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
        let origin = match (options.bundled, options.extra_plugins.is_empty()) {
            (true, true) => "bundled",
            (true, false) => "bundled, and from files",
            (false, _) => "from files",
        };
        if self.json {
            let header = serde_json::json!({
                "kind": "demo",
                "scenario": options.scenario,
                "speed": options.speed,
                "imds": simulator.base_url(),
                "console": format!("{}/", simulator.base_url()),
                "workload": workload.base_url(),
                "vm_name": vm_name,
                "plugins": names,
            });
            print_line(&header.to_string());
            return;
        }
        print_line(&format!(
            "forewarn demo: scenario `{}` at {}x speed\n  IMDS simulator: {}  (this VM: {vm_name}; console at {}/ while it runs)\n  plugins: {} ({origin})\n  workload: {}  (checkpoints, restores, and an app process the stop/start actions stop and start)\n  load balancer: probes /readyz every 250 ms, takes the VM out after 3 failures (lb-drain's drain ends then)\n",
            options.scenario,
            options.speed,
            simulator.base_url(),
            simulator.base_url(),
            names.join(", "),
            workload.base_url(),
        ));
    }

    fn show(&self, shown: &Shown, summary: &mut DemoSummary, elapsed: Duration) {
        count(shown, summary);
        if self.quiet {
            return;
        }
        if self.json {
            if let Some(value) = json_of(shown, elapsed) {
                print_line(&value.to_string());
            }
            return;
        }
        if let Some(line) = render(shown) {
            print_line(&format!("{:>6.1}s  {line}", elapsed.as_secs_f64()));
        }
    }

    fn summary(&self, summary: &DemoSummary) {
        if self.quiet {
            return;
        }
        if self.json {
            let mut value = serde_json::to_value(summary).unwrap_or_default();
            value["kind"] = "summary".into();
            print_line(&value.to_string());
            return;
        }
        let facts = &summary.workload;
        print_line(&format!(
            "\nScenario over: {} event(s) seen, {} approved by forewarn at IMDS, {} recovery call(s).\nWorkload: {} checkpoint(s) written, {} restore(s), app stopped {} time(s) and started {} time(s) (pids {}).",
            summary.events.len(),
            summary.approved_at_imds,
            summary.recoveries,
            facts.checkpoints_completed,
            facts.restores,
            facts.app_stops,
            facts.app_starts,
            facts
                .app_pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" -> "),
        ));
        if !summary.outcomes.is_empty() {
            print_line("What each event cost (`forewarn events show ID` on a VM):");
        }
        for outcome in &summary.outcomes {
            let short: String = outcome.event_id.as_str().chars().take(8).collect();
            print_line(&format!(
                "  {short} {:<9} {}",
                outcome.event_type, outcome.verdict
            ));
        }
    }
}

/// Prints one line of output; a closed pipe (`| head`) only ends the output.
pub(crate) fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) only ends the output; the demo itself goes on.
    let _ignored = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn count(shown: &Shown, summary: &mut DemoSummary) {
    if let Shown::Entry(entry) = shown {
        summary.verdicts.observe(entry);
    }
    match shown {
        Shown::Entry(TimelineEntry::Transition { event_id, .. }) => {
            summary.events.insert(event_id.clone());
        }
        Shown::Entry(TimelineEntry::PluginAnswered { phase, .. }) if phase.is_recovery() => {
            summary.recoveries += 1;
        }
        Shown::Entry(TimelineEntry::PluginLog { level, .. }) if *level >= LogLevel::Warn => {
            summary.warnings += 1;
        }
        Shown::Log(_) => summary.warnings += 1,
        _ => {}
    }
}

fn json_of(shown: &Shown, elapsed: Duration) -> Option<serde_json::Value> {
    let mut value = match shown {
        Shown::Entry(entry) => serde_json::to_value(entry).ok()?,
        Shown::Workload(note) => {
            let mut value = serde_json::to_value(note).ok()?;
            value["kind"] = "workload".into();
            value
        }
        Shown::Log(line) => serde_json::json!({
            "kind": "daemon-log",
            "level": line.level.as_str().to_ascii_lowercase(),
            "message": line.text,
        }),
        Shown::Skipped(missed) => serde_json::json!({ "kind": "skipped", "entries": missed }),
    };
    value["at_ms"] = u64::try_from(elapsed.as_millis())
        .unwrap_or(u64::MAX)
        .into();
    Some(value)
}

fn render(shown: &Shown) -> Option<String> {
    match shown {
        Shown::Entry(entry) => render_entry(entry),
        Shown::Workload(note) => Some(format!("   ~  {:<18} {note}", "workload")),
        Shown::Log(line) => Some(format!(
            "   !  {}: {}",
            line.level.as_str().to_ascii_lowercase(),
            line.text
        )),
        Shown::Skipped(missed) => Some(format!("   ({missed} timeline entries skipped)")),
    }
}

pub(crate) fn render_entry(entry: &TimelineEntry) -> Option<String> {
    Some(match entry {
        TimelineEntry::Transition {
            event_id,
            transition,
            detail,
            ..
        } => format!("event {}  {transition:<20} {detail}", short(event_id)),
        TimelineEntry::Handling { event_id, handling } => {
            format!("event {}  {:<20} {handling}", short(event_id), "policy")
        }
        TimelineEntry::PreparationWaits {
            event_id,
            starts_at_unix_ms,
        } => format!(
            "event {}  {:<20} plugins start preparing at {} (policy.prepare-lead-time)",
            short(event_id),
            "waits",
            forewarn_pipeline::log_fields::rfc3339(*starts_at_unix_ms)
        ),
        TimelineEntry::TurnShortened {
            plugin,
            cut_short,
            needed_ms,
            left_ms,
            ..
        } => format!(
            "   !! {plugin} starts now without waiting for {}: it and the plugins after it need \
             {} s, {} s are left before NotBefore",
            cut_short.join(", "),
            needed_ms / 1000,
            left_ms / 1000
        ),
        TimelineEntry::PreparingLate {
            event_id,
            still_preparing,
        } => format!(
            "event {}  past NotBefore minus the margin; still preparing: {} (asked again until \
             the event starts)",
            short(event_id),
            still_preparing.join(", ")
        ),
        TimelineEntry::PluginCalled {
            plugin,
            phase,
            attempt,
            ..
        } => format!("   -> {plugin:<18} {phase} (attempt {attempt})"),
        TimelineEntry::PluginLog { level, message, .. } => match level {
            LogLevel::Warn | LogLevel::Error => {
                format!("      {:<18} {}: {message}", "", level.as_str())
            }
            _ => format!("      {:<18} {message}", ""),
        },
        TimelineEntry::PluginAnswered {
            plugin,
            outcome,
            reason,
            elapsed_ms,
            ..
        } => {
            let reason = match reason.is_empty() {
                true => String::new(),
                false => format!(": {reason}"),
            };
            format!("   <- {plugin:<18} {outcome}{reason}  ({elapsed_ms} ms)")
        }
        TimelineEntry::Approved { event_ids } => {
            let ids: Vec<String> = event_ids.iter().map(short).collect();
            format!("APPROVED at IMDS: {}", ids.join(", "))
        }
        TimelineEntry::ApprovalFailed { error, .. } => {
            format!("approval failed, retrying: {error}")
        }
        TimelineEntry::NotApproved { event_id, reason } => {
            format!("event {}  not approved: {reason}", short(event_id))
        }
        TimelineEntry::Finished { event_id } => {
            format!("event {}  handled to the end", short(event_id))
        }
        TimelineEntry::PluginQuarantined(quarantined) => format!(
            "   !! {} quarantined after {} failed calls (last: {}); on-failure = {}",
            quarantined.plugin,
            quarantined.failures,
            quarantined.last_failure,
            quarantined.on_failure
        ),
        TimelineEntry::QuarantineLifted { plugin } => {
            format!("   !! {plugin} quarantine lifted: a new version was loaded")
        }
        TimelineEntry::HostShutdownBegan { budget_ms, .. } => format!(
            "SHUTDOWN of the operating system, no Scheduled Event: the plugins prepare within \
             {} s (not from IMDS)",
            budget_ms / 1000
        ),
        TimelineEntry::HostShutdownReleased {
            outcome,
            prepared_ms,
            ..
        } => format!("SHUTDOWN goes on ({outcome}, after {prepared_ms} ms)"),
    })
}

fn short(id: &EventId) -> String {
    id.as_str().chars().take(8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn defaults_tell_the_story_in_well_under_a_minute() {
        assert_consistent::<Args>();
        let options = parse::<Args>(&[])
            .expect("parses")
            .options()
            .expect("options");
        assert_eq!(options.scenario, forewarn_simulator::DEFAULT_SCENARIO);
        assert_eq!((options.speed, options.drain_seconds), (10.0, 3));
        assert!(options.bundled && !options.json && !options.quiet);
        assert!(options.extra_plugins.is_empty());
    }

    #[test]
    fn plugins_dir_adds_each_component_in_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("extra.wasm"), b"\0asm").expect("write");
        let dir = dir.path().to_str().expect("utf-8");
        let options = parse::<Args>(&["--plugins", dir, "--json"])
            .expect("parses")
            .options()
            .expect("options");
        assert!(options.json);
        let names: Vec<_> = options
            .extra_plugins
            .iter()
            .map(|plugin| plugin.wasm.file_name().expect("a file"))
            .collect();
        assert_eq!(names, ["extra.wasm"]);
    }
}
