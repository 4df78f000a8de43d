//! The demo's workload: a loopback HTTP service that checkpoints and restores (for the
//! checkpoint plugin) and supervises an app process that the stop/start actions really stop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::Serialize;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use forewarn_daemon::config::ActionConfig;

/// How long the workload's checkpoint takes: long enough that the checkpoint plugin has to
/// defer once and ask again.
const CHECKPOINT_TAKES: Duration = Duration::from_millis(700);
/// How long the app may take to exit after SIGTERM before it is killed.
const APP_STOP_GRACE: Duration = Duration::from_secs(5);
/// The action names the demo defines for graceful-shutdown.
pub(crate) const STOP_ACTION: &str = "stop-app";
pub(crate) const START_ACTION: &str = "start-app";

/// One thing the workload did, shown in the demo's timeline (`--json`: `"what"` names it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "what", rename_all = "kebab-case")]
pub enum WorkloadNote {
    /// The app process was started.
    AppStarted {
        /// Its process id.
        pid: u32,
    },
    /// The app process ended after the stop action's SIGTERM.
    AppStopped {
        /// Its process id.
        pid: u32,
        /// How it ended: "exited cleanly", "exited with status N", "ended by a signal" or
        /// "killed after DURATION" (it ignored SIGTERM for the grace period).
        how: String,
    },
    /// Stopping the app failed (waiting for or killing the process returned an error).
    AppStopFailed {
        /// Its process id (0 when the process had none any more).
        pid: u32,
        /// The error, with its causes.
        error: String,
    },
    /// The checkpoint plugin asked for a checkpoint (`POST /checkpoint`).
    CheckpointStarted,
    /// A checkpoint finished; reported when the plugin polls `/checkpoint/status` after it
    /// is done.
    CheckpointWritten,
    /// The checkpoint plugin asked to restore after the maintenance (`POST /restore`).
    Restored,
    /// The demo's load balancer took the VM out of rotation: its probes of `/readyz` failed
    /// `failed_probes` times in a row.
    OutOfRotation {
        /// The load balancer's `fall`.
        failed_probes: u32,
    },
    /// The demo's load balancer put the VM back: `/readyz` passed `passed_probes` times in a
    /// row.
    BackInRotation {
        /// The load balancer's `rise`.
        passed_probes: u32,
    },
}

impl std::fmt::Display for WorkloadNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadNote::AppStarted { pid } => write!(f, "app started (pid {pid})"),
            WorkloadNote::AppStopped { pid, how } => write!(f, "app (pid {pid}) stopped: {how}"),
            WorkloadNote::AppStopFailed { pid, error } => {
                write!(f, "app (pid {pid}) did not stop cleanly: {error}")
            }
            WorkloadNote::CheckpointStarted => write!(f, "checkpoint started"),
            WorkloadNote::CheckpointWritten => write!(f, "checkpoint written"),
            WorkloadNote::Restored => write!(f, "state restored from the checkpoint"),
            WorkloadNote::OutOfRotation { failed_probes } => write!(
                f,
                "load balancer: took the VM out of rotation ({failed_probes} failed probes of \
                 /readyz in a row)"
            ),
            WorkloadNote::BackInRotation { passed_probes } => write!(
                f,
                "load balancer: VM back in rotation ({passed_probes} passing probes of /readyz)"
            ),
        }
    }
}

/// What the workload did, for the demo's summary and its test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkloadFacts {
    /// Checkpoints asked for (`POST /checkpoint`).
    pub checkpoints_requested: u32,
    /// Checkpoints finished and reported done to the plugin.
    pub checkpoints_completed: u32,
    /// Restores asked for (`POST /restore`).
    pub restores: u32,
    /// Times the app was stopped by the stop action (failed stops are not counted).
    pub app_stops: u32,
    /// Times the start action started the app again (the start with the demo not counted).
    pub app_starts: u32,
    /// The app's process ids, in the order they ran (the first one started with the demo).
    pub app_pids: Vec<u32>,
    /// Whether the app was running when the demo ended.
    pub app_running_at_end: bool,
}

/// The running workload. Dropping it does not stop the app: call [`DemoWorkload::shutdown`].
pub struct DemoWorkload {
    address: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    /// The program that runs the app (this binary, `demo-workload app`).
    program: PathBuf,
    inner: Mutex<Inner>,
    notes: mpsc::UnboundedSender<WorkloadNote>,
}

#[derive(Default)]
struct Inner {
    facts: WorkloadFacts,
    app: Option<Child>,
    checkpoint_done_at: Option<Instant>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn note(&self, note: WorkloadNote) {
        // The printer may be gone at the very end; a lost note is fine then.
        let _ignored = self.notes.send(note);
    }
}

impl DemoWorkload {
    /// Starts the app and the HTTP service on a free loopback port. `notes` receives one line
    /// per thing the workload does, for the timeline.
    pub async fn start(notes: mpsc::UnboundedSender<WorkloadNote>) -> anyhow::Result<Self> {
        let program = std::env::current_exe().context("cannot find the forewarn binary")?;
        let shared = Arc::new(Shared {
            program,
            inner: Mutex::new(Inner::default()),
            notes,
        });
        let pid = start_app(&shared).await?;
        shared.note(WorkloadNote::AppStarted { pid });
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("cannot start the demo workload's HTTP service")?;
        let address = listener.local_addr()?;
        let stop = CancellationToken::new();
        let app = router(shared.clone());
        let server = tokio::spawn({
            let stop = stop.clone();
            async move {
                let _ignored = axum::serve(listener, app)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
            }
        });
        Ok(DemoWorkload {
            address,
            shared,
            stop,
            server,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `127.0.0.1:PORT`, as a plugin's `[capabilities] http` names it.
    pub(crate) fn authority(&self) -> String {
        self.address.to_string()
    }

    /// The `[actions]` graceful-shutdown runs: this binary asking the workload to stop or
    /// start its app.
    pub fn actions(&self) -> Vec<(String, ActionConfig)> {
        [(STOP_ACTION, "stop"), (START_ACTION, "start")]
            .into_iter()
            .map(|(name, verb)| {
                let argv = vec![
                    self.shared.program.display().to_string(),
                    "demo-workload".into(),
                    verb.into(),
                    "--control".into(),
                    self.base_url(),
                ];
                let action = ActionConfig {
                    argv,
                    timeout: Duration::from_secs(10),
                };
                (name.to_owned(), action)
            })
            .collect()
    }

    /// Stops the service and the app; returns what the workload did.
    pub async fn shutdown(self) -> WorkloadFacts {
        self.stop.cancel();
        let _ignored = self.server.await;
        let app = self.shared.lock().app.take();
        let mut facts = self.shared.lock().facts.clone();
        facts.app_running_at_end = app.is_some();
        if let Some(child) = app {
            let _ignored = stop_child(child).await;
        }
        facts
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/checkpoint", post(checkpoint))
        .route("/checkpoint/status", get(checkpoint_status))
        .route("/restore", post(restore))
        .route("/app/stop", post(app_stop))
        .route("/app/start", post(app_start))
        .with_state(shared)
}

async fn checkpoint(State(shared): State<Arc<Shared>>) -> (StatusCode, &'static str) {
    let mut inner = shared.lock();
    inner.facts.checkpoints_requested += 1;
    inner.checkpoint_done_at = Some(Instant::now() + CHECKPOINT_TAKES);
    drop(inner);
    shared.note(WorkloadNote::CheckpointStarted);
    (StatusCode::ACCEPTED, "started")
}

async fn checkpoint_status(State(shared): State<Arc<Shared>>) -> (StatusCode, &'static str) {
    let mut inner = shared.lock();
    match inner.checkpoint_done_at {
        Some(done_at) if Instant::now() >= done_at => {
            inner.checkpoint_done_at = None;
            inner.facts.checkpoints_completed += 1;
            drop(inner);
            shared.note(WorkloadNote::CheckpointWritten);
            (StatusCode::OK, "done")
        }
        Some(_) => (StatusCode::ACCEPTED, "running"),
        None => (StatusCode::OK, "done"),
    }
}

async fn restore(State(shared): State<Arc<Shared>>) -> (StatusCode, &'static str) {
    shared.lock().facts.restores += 1;
    shared.note(WorkloadNote::Restored);
    (StatusCode::OK, "restored")
}

async fn app_stop(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    let Some(child) = shared.lock().app.take() else {
        return (StatusCode::OK, "the app was not running".into());
    };
    let pid = child.id().unwrap_or_default();
    let note = match stop_child(child).await {
        Ok(how) => {
            shared.lock().facts.app_stops += 1;
            WorkloadNote::AppStopped { pid, how }
        }
        Err(error) => WorkloadNote::AppStopFailed {
            pid,
            error: format!("{error:#}"),
        },
    };
    let answer = note.to_string();
    shared.note(note);
    (StatusCode::OK, answer)
}

async fn app_start(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    if let Some(pid) = shared.lock().app.as_ref().and_then(Child::id) {
        return (StatusCode::OK, format!("the app is running (pid {pid})"));
    }
    match start_app(&shared).await {
        Ok(pid) => {
            shared.lock().facts.app_starts += 1;
            let note = WorkloadNote::AppStarted { pid };
            let answer = note.to_string();
            shared.note(note);
            (StatusCode::OK, answer)
        }
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot start the app: {error:#}"),
        ),
    }
}

/// Spawns the app (`forewarn demo-workload app`) and records it.
async fn start_app(shared: &Shared) -> anyhow::Result<u32> {
    let child = spawn_app(&shared.program)?;
    let pid = child.id().context("the app exited as soon as it started")?;
    let mut inner = shared.lock();
    inner.facts.app_pids.push(pid);
    inner.app = Some(child);
    Ok(pid)
}

fn spawn_app(program: &Path) -> anyhow::Result<Child> {
    Command::new(program)
        .args(["demo-workload", "app"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {} demo-workload app", program.display()))
}

/// Asks it to stop (SIGTERM), then waits (killing it after the grace period, at once where
/// it cannot be asked); says how it ended.
async fn stop_child(mut child: Child) -> anyhow::Result<String> {
    let grace = match forewarn_platform::process_tree::request_stop(&child) {
        true => APP_STOP_GRACE,
        false => Duration::ZERO,
    };
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => Ok(match status?.code() {
            Some(0) => "exited cleanly".into(),
            Some(code) => format!("exited with status {code}"),
            None => "ended by a signal".into(),
        }),
        Err(_elapsed) => {
            child.kill().await?;
            Ok(format!(
                "killed after {}",
                humantime::format_duration(grace)
            ))
        }
    }
}

/// `forewarn demo-workload`'s subcommands: what `demo` runs as its app and its actions.
#[derive(Debug, clap::Subcommand)]
pub enum WorkloadCommand {
    /// Run the demo's app until SIGTERM.
    App,
    /// Ask the demo workload to stop its app.
    Stop(ControlArgs),
    /// Ask the demo workload to start its app.
    Start(ControlArgs),
}

/// `demo-workload stop|start`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    #[arg(long)]
    control: String,
}

/// Runs the app, or asks the workload at `--control` to stop or start it.
pub async fn run(command: WorkloadCommand) -> anyhow::Result<ExitCode> {
    match command {
        WorkloadCommand::App => run_app().await?,
        WorkloadCommand::Stop(args) => run_control("stop", &args.control).await?,
        WorkloadCommand::Start(args) => run_control("start", &args.control).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `forewarn demo-workload app`: the demo's app; runs until SIGTERM, then exits 0.
async fn run_app() -> anyhow::Result<()> {
    forewarn_platform::stop_request::wait(|_, _| {}).await;
    Ok(())
}

/// `forewarn demo-workload stop|start --control URL`: the demo's stop and start actions.
async fn run_control(verb: &str, control: &str) -> anyhow::Result<()> {
    let url = format!("{}/app/{verb}", control.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()?;
    let response = client
        .post(&url)
        .send()
        .await
        .with_context(|| format!("cannot reach the demo workload at {url}"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    println!("{body}");
    anyhow::ensure!(status.is_success(), "{url} answered {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn stop_and_start_need_the_control_url() {
        assert_consistent::<ControlArgs>();
        let args = parse::<ControlArgs>(&["--control", "http://127.0.0.1:1"]).expect("parses");
        assert_eq!(args.control, "http://127.0.0.1:1");
        assert!(parse::<ControlArgs>(&[]).is_err());
    }
}
