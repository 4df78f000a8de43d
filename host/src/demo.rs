//! `forewarn demo`: the simulator and the daemon in one process with the bundled plugins,
//! printing a timeline a person can follow, until the scenario is over.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_runtime::Runtime;
use forewarn_simulator::{SimulatorConfig, SimulatorHandle};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::app;
use crate::bundled::bundled_plugins;
use crate::config::Config;
use crate::manifest::{ConfigValue, PluginManifest};
use crate::plugins::{LoadedPlugin, PluginSource};
use crate::timeline::{TimelineEntry, new_timeline};

/// Options of `forewarn demo`.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub scenario: String,
    pub speed: f64,
    /// Drain window the demo gives lb-drain, so the story fits in under a minute.
    pub drain_seconds: u64,
    /// Give up after this long (a bug, not a scenario, would get there).
    pub timeout: Duration,
}

/// Runs the demo; Ok when the scenario finished and every event was handled to the end.
pub async fn run(options: DemoOptions) -> anyhow::Result<()> {
    let scenario = forewarn_simulator::load_scenario(&options.scenario)?;
    let vm_name = scenario.default_vm().to_owned();
    let simulator = forewarn_simulator::spawn(SimulatorConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        scenario,
        speed: options.speed,
    })
    .await
    .context("cannot start the IMDS simulator")?;
    let state_dir = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let config = Config {
        vm_name: vm_name.clone(),
        state_dir: state_dir.path().to_path_buf(),
        imds: crate::config::ImdsConfig {
            url: simulator.base_url(),
            poll_interval: Duration::from_millis(250),
            ..Default::default()
        },
        // Any free port: demos may run side by side with a daemon on the default port.
        admin: crate::config::AdminConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        },
        ..Config::default()
    };
    let prepared = app::build_runtime(&config)?;
    let loaded = load_bundled(&prepared.runtime, options.drain_seconds).await?;
    print_header(&options, &simulator, &vm_name, &loaded);
    let plugins = app::publish_plugins(loaded);
    let timeline = new_timeline();
    let printer = tokio::spawn(print_timeline(timeline.subscribe(), Instant::now()));
    let finish_watch = timeline.subscribe();
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn({
        let config = config.clone();
        let plugins = plugins.subscribe();
        let timeline = timeline.clone();
        let shutdown = shutdown.clone();
        let readiness = prepared.readiness.clone();
        async move { app::run_daemon(&config, plugins, timeline, readiness, shutdown).await }
    });
    let finished = tokio::time::timeout(options.timeout, simulator.finished()).await;
    // Let recovery of the last event complete: the daemon forgets an event once done.
    let drained = wait_for_idle_daemon(finish_watch, &simulator).await;
    shutdown.cancel();
    daemon.await.context("the daemon task failed")??;
    drop(timeline);
    let summary = printer.await.context("the timeline printer failed")?;
    let snapshot = simulator.snapshot();
    simulator.shutdown().await;
    if finished.is_err() {
        bail!("the scenario did not finish within {:?}", options.timeout);
    }
    if !drained {
        bail!("the daemon still had events in progress when the scenario ended");
    }
    println!(
        "\nScenario over: {} event(s) seen, {} approved by forewarn at IMDS, {} recovery call(s).",
        summary.events.len(),
        snapshot.approvals.iter().filter(|a| a.accepted).count(),
        summary.recoveries
    );
    Ok(())
}

async fn load_bundled(runtime: &Runtime, drain_seconds: u64) -> anyhow::Result<Vec<LoadedPlugin>> {
    let mut loaded = Vec::new();
    for bundled in bundled_plugins() {
        let mut manifest = bundled
            .parsed_manifest()
            .map_err(|error| anyhow::anyhow!("bundled manifest of {}: {error}", bundled.name))?;
        if manifest.config.contains_key("drain-seconds") {
            manifest.config.insert(
                "drain-seconds".into(),
                ConfigValue::Integer(drain_seconds as i64),
            );
        }
        let runtime = runtime.clone();
        let settings = manifest.runtime_settings();
        let plugin =
            tokio::task::spawn_blocking(move || runtime.load(bundled.name, bundled.wasm, settings))
                .await
                .context("the plugin loading task failed")?
                .with_context(|| format!("cannot load the bundled plugin {}", bundled.name))?;
        loaded.push(LoadedPlugin {
            plugin,
            manifest: PluginManifest { ..manifest },
            source: PluginSource::Bundled,
        });
    }
    Ok(loaded)
}

/// Waits (briefly) until every event the daemon took up is finished.
async fn wait_for_idle_daemon(
    mut entries: broadcast::Receiver<TimelineEntry>,
    simulator: &SimulatorHandle,
) -> bool {
    let appeared: BTreeSet<String> = simulator
        .snapshot()
        .history
        .iter()
        .map(|record| record.event_id.clone())
        .collect();
    let mut finished = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if appeared.iter().all(|id| finished.contains(id)) {
            return true;
        }
        match tokio::time::timeout_at(deadline, entries.recv()).await {
            Ok(Ok(TimelineEntry::Finished { event_id })) => {
                finished.insert(event_id);
            }
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => return false,
        }
    }
}

fn print_header(
    options: &DemoOptions,
    simulator: &SimulatorHandle,
    vm_name: &str,
    plugins: &[LoadedPlugin],
) {
    let names: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
    println!(
        "forewarn demo: scenario `{}` at {}x speed\n  IMDS simulator: {}  (this VM: {vm_name})\n  plugins: {} (bundled)\n",
        options.scenario,
        options.speed,
        simulator.base_url(),
        names.join(", ")
    );
}

#[derive(Default)]
struct Summary {
    events: BTreeSet<String>,
    recoveries: usize,
}

async fn print_timeline(
    mut entries: broadcast::Receiver<TimelineEntry>,
    start: Instant,
) -> Summary {
    let mut summary = Summary::default();
    loop {
        let entry = match entries.recv().await {
            Ok(entry) => entry,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                println!("  ({missed} timeline entries skipped)");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return summary,
        };
        if let Some(line) = render(&entry, &mut summary) {
            let elapsed = start.elapsed().as_secs_f64();
            println!("{elapsed:>6.1}s  {line}");
            let _ignored = std::io::stdout().flush();
        }
    }
}

fn render(entry: &TimelineEntry, summary: &mut Summary) -> Option<String> {
    Some(match entry {
        TimelineEntry::Transition {
            event_id,
            transition,
            detail,
            ..
        } => {
            summary.events.insert(event_id.clone());
            format!("event {}  {transition:<20} {detail}", short(event_id))
        }
        TimelineEntry::Handling { event_id, handling } => {
            format!("event {}  {:<20} {handling}", short(event_id), "policy")
        }
        TimelineEntry::PluginCalled {
            plugin,
            phase,
            attempt,
            ..
        } => {
            format!("   -> {plugin:<18} {phase} (attempt {attempt})")
        }
        TimelineEntry::PluginAnswered {
            plugin,
            phase,
            outcome,
            reason,
            elapsed_ms,
            ..
        } => {
            if phase.starts_with("ended") {
                summary.recoveries += 1;
            }
            let reason = if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            };
            format!("   <- {plugin:<18} {outcome}{reason}  ({elapsed_ms} ms)")
        }
        TimelineEntry::Approved { event_ids } => {
            let ids: Vec<String> = event_ids.iter().map(|id| short(id)).collect();
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
    })
}

fn short(id: &str) -> String {
    id.chars().take(8).collect()
}
