//! The local daemon `forewarn plugin dev` loads the author's plugin into: the simulated IMDS
//! on the blank `idle` scenario (events come from its console), the daemon with a plugin
//! directory of its own (watched and hot-reloaded, as on a VM), the demo workload for the
//! stop and start actions, and a printer that puts the daemon's timeline on the terminal.

use forewarn_imds::PluginName;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use forewarn_simulator::{SimulatorConfig, SimulatorHandle};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cli::demo;
use crate::cli::demo_log::{self, DemoLogLine};
use crate::cli::demo_workload::{DemoWorkload, WorkloadNote};
use forewarn_daemon::config::{ActionConfig, Config};
use forewarn_daemon::daemon::timeline_broadcast::new_timeline;
use forewarn_daemon::daemon::wiring;
use forewarn_daemon::ops::admin;
use forewarn_daemon::plugins::reload::{PluginDirectory, ReloadOptions};
use forewarn_pipeline::timeline::TimelineEntry;

/// The simulator's scenario: a VM with no events until the console makes some.
const CANVAS: &str = "idle";

/// How long a new version may take to load (a Python or JavaScript component compiles for
/// tens of seconds on a busy machine).
const LOAD_WAIT: Duration = Duration::from_secs(180);

/// Why the dev daemon does not run the version [`DevDaemon::install`] put in its plugin
/// directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotLoaded {
    /// The plugin directory's watcher stopped (the dev daemon is shutting down).
    #[error("the dev daemon's plugin directory stopped")]
    DirectoryStopped,
    /// The daemon refused the plugin: its load error, as the status page shows it.
    #[error("{0}")]
    Refused(String),
    /// The daemon did not take in the new version in time.
    #[error(
        "no new version within {} s (the plugin directory is {})",
        waited.as_secs(),
        plugin_dir.display()
    )]
    NoNewVersion {
        /// How long it was waited for.
        waited: Duration,
        /// The dev daemon's plugin directory, to look in.
        plugin_dir: PathBuf,
    },
}

/// The dev daemon, running until [`DevDaemon::shutdown`].
pub(crate) struct DevDaemon {
    simulator: SimulatorHandle,
    status: SocketAddr,
    plugins: PluginDirectory,
    plugin_dir: tempfile::TempDir,
    _state_dir: tempfile::TempDir,
    workload: DemoWorkload,
    shutdown: CancellationToken,
    daemon: JoinHandle<anyhow::Result<()>>,
    printer: JoinHandle<()>,
}

impl DevDaemon {
    /// Starts the simulator on `console_listen` and the daemon's admin endpoint on `listen`;
    /// plugins run `actions`, or the demo workload's stop and start.
    pub(crate) async fn start(
        listen: SocketAddr,
        console_listen: SocketAddr,
        actions: Option<BTreeMap<String, ActionConfig>>,
    ) -> anyhow::Result<DevDaemon> {
        let (log_sender, log_lines) = mpsc::unbounded_channel();
        demo_log::route_to(log_sender);
        let (note_sender, notes) = mpsc::unbounded_channel();
        let workload = DemoWorkload::start(note_sender).await?;
        let scenario = forewarn_simulator::load_scenario(CANVAS)?;
        let vm_name = scenario.default_vm().to_owned();
        let simulator = forewarn_simulator::spawn(SimulatorConfig {
            listen: console_listen,
            scenario,
            speed: 1.0,
        })
        .await
        .with_context(|| format!("cannot start the IMDS simulator on {console_listen}"))?;
        let state_dir = tempfile::tempdir().context("cannot create a state directory")?;
        let plugin_dir = tempfile::tempdir().context("cannot create a plugin directory")?;
        let mut config = dev_config(
            simulator.base_url(),
            &vm_name,
            state_dir.path(),
            plugin_dir.path(),
            listen,
        );
        config.actions = actions.unwrap_or_else(|| workload.actions().into_iter().collect());
        let listener = admin::bind(config.admin.listen)
            .await
            .with_context(|| format!("cannot serve the status page on {listen} (pass --listen)"))?;
        let status = listener
            .local_addr()
            .context("cannot read the status page's address")?;
        let prepared = wiring::build_runtime(&config)?;
        let plugins = PluginDirectory::start(
            prepared.runtime.clone(),
            &config.plugin_dir,
            ReloadOptions {
                file_limits: config.plugin_file_limits(),
                ..Default::default()
            },
        )
        .await?;
        let timeline = new_timeline();
        let printer = tokio::spawn(print_daemon(timeline.subscribe(), log_lines, notes));
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn({
            let (plugins, shutdown) = (plugins.subscribe(), shutdown.clone());
            async move {
                wiring::run_daemon_on(
                    listener,
                    &config,
                    plugins,
                    timeline,
                    prepared.readiness,
                    prepared.storage,
                    shutdown,
                )
                .await
            }
        });
        Ok(DevDaemon {
            simulator,
            status,
            plugins,
            plugin_dir,
            _state_dir: state_dir,
            workload,
            shutdown,
            daemon,
            printer,
        })
    }

    /// The simulator's console.
    pub(crate) fn console_url(&self) -> String {
        self.simulator.base_url()
    }

    /// The daemon's status page.
    pub(crate) fn status_url(&self) -> String {
        format!("http://{}", self.status)
    }

    /// Puts the plugin `name` (`bytes` with the manifest at `manifest`) into the daemon's
    /// plugin directory and waits until the daemon runs that version: Ok(Ok(what is live)),
    /// or Ok(Err(why the daemon does not run it)).
    pub(crate) async fn install(
        &self,
        name: &str,
        bytes: &[u8],
        manifest: &Path,
        hash: &str,
    ) -> anyhow::Result<Result<String, NotLoaded>> {
        let manifest_text = std::fs::read(manifest)
            .with_context(|| format!("cannot read {}", manifest.display()))?;
        let wasm_at = self.plugin_dir.path().join(format!("{name}.wasm"));
        let toml_at = self.plugin_dir.path().join(format!("{name}.toml"));
        let unchanged = std::fs::read(&wasm_at).is_ok_and(|live| live == bytes)
            && std::fs::read(&toml_at).is_ok_and(|live| live == manifest_text);
        if unchanged {
            return Ok(Ok(format!("{name} unchanged (sha256 {})", short(hash))));
        }
        let mut sets = self.plugins.subscribe();
        sets.borrow_and_update();
        // Renamed into place, the manifest first: the reload takes both as one version.
        place(&toml_at, &manifest_text)?;
        place(&wasm_at, bytes)?;
        let waited = tokio::time::timeout(LOAD_WAIT, async {
            loop {
                if sets.changed().await.is_err() {
                    return Err(NotLoaded::DirectoryStopped);
                }
                let set = sets.borrow_and_update().clone();
                if let Some(loaded) = set.get(&PluginName::from(name))
                    && loaded.plugin.content_hash() == hash
                {
                    let how = match loaded.plugin.loaded_from_cache() {
                        true => "from the compile cache",
                        false => "compiled",
                    };
                    return Ok(format!("{name} sha256 {} ({how})", short(hash)));
                }
                let refused = set
                    .load_errors()
                    .iter()
                    .find(|(path, _)| path.file_stem().is_some_and(|stem| stem == name));
                if let Some((_, error)) = refused {
                    return Err(NotLoaded::Refused(error.clone()));
                }
            }
        })
        .await;
        Ok(waited.unwrap_or_else(|_| {
            Err(NotLoaded::NoNewVersion {
                waited: LOAD_WAIT,
                plugin_dir: self.plugin_dir.path().to_path_buf(),
            })
        }))
    }

    /// Stops the daemon, the simulator and the workload.
    pub(crate) async fn shutdown(self) {
        self.shutdown.cancel();
        if let Ok(Err(error)) = self.daemon.await {
            eprintln!("forewarn: the dev daemon stopped with an error: {error:#}");
        }
        self.plugins.stop().await;
        self.simulator.shutdown().await;
        self.workload.shutdown().await;
        self.printer.abort();
    }
}

/// The dev daemon's config: the simulator as IMDS, a throwaway state directory and plugin
/// directory, the status page on `listen`.
fn dev_config(
    imds_url: String,
    vm_name: &str,
    state_dir: &Path,
    plugin_dir: &Path,
    listen: SocketAddr,
) -> Config {
    Config {
        vm_name: vm_name.to_owned(),
        state_dir: state_dir.to_path_buf(),
        plugin_dir: plugin_dir.to_path_buf(),
        imds: forewarn_daemon::config::ImdsConfig {
            url: imds_url,
            poll_interval: Duration::from_millis(250),
            ..Default::default()
        },
        admin: forewarn_daemon::config::AdminConfig {
            listen,
            ..Default::default()
        },
        shutdown: forewarn_daemon::config::ShutdownConfig {
            prepare: false,
            ..forewarn_daemon::config::ShutdownConfig::default()
        },
        ..Config::default()
    }
}

/// Writes `bytes` beside `at` under a hidden name (the reload ignores dotfiles) and renames
/// it into place.
fn place(at: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let file_name = at
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hidden = at.with_file_name(format!(".{file_name}.new"));
    std::fs::write(&hidden, bytes).with_context(|| format!("cannot write {}", hidden.display()))?;
    std::fs::rename(&hidden, at).with_context(|| format!("cannot move {} into place", at.display()))
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Prints the daemon's timeline, its warnings and the workload's notes as they come.
async fn print_daemon(
    mut timeline: broadcast::Receiver<TimelineEntry>,
    mut log_lines: mpsc::UnboundedReceiver<DemoLogLine>,
    mut notes: mpsc::UnboundedReceiver<WorkloadNote>,
) {
    loop {
        let line = tokio::select! {
            entry = timeline.recv() => match entry {
                Ok(entry) => demo::render_entry(&entry).map(|line| format!("daemon | {line}")),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    Some(format!("daemon | ({missed} timeline entries skipped)"))
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            // The tests' daemons log here too: these lines are not only the dev daemon's.
            Some(line) = log_lines.recv() => Some(format!(
                "log    | {}: {}",
                line.level.as_str().to_ascii_lowercase(),
                line.text
            )),
            Some(note) = notes.recv() => Some(format!("daemon | ~ workload: {note}")),
        };
        if let Some(line) = line {
            demo::print_line(&line);
        }
    }
}
