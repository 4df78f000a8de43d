//! The service manager forewarn runs under, one seam for both platforms: readiness, a
//! watchdog, stopping, and (on Windows) installing and controlling the service.
//!
//! - Linux: systemd ([`systemd`]): `Type=notify` with READY=1 once IMDS has answered the
//!   first poll, WATCHDOG=1 at half of `WatchdogSec`, STOPPING=1 on shutdown.
//! - Windows: the Service Control Manager (`windows_scm`): `forewarn service
//!   install|uninstall|start|stop`, and the service's own entry (`forewarn service run`),
//!   which reports start-pending, running once IMDS has answered, stop-pending and stopped,
//!   and turns Stop and Shutdown into the daemon's shutdown; Pre-shutdown first goes to the
//!   plugins' last preparation (`preshutdown_relay`) when `[shutdown] prepare` holds it. Its log goes to
//!   a rotating file under `%ProgramData%\forewarn\logs` (`windows_log`).

use std::path::PathBuf;
use std::time::SystemTime;

use forewarn_imds::PollStatus;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use forewarn_pipeline::log_messages;

pub use shutdown_config::ShutdownConfig;
pub use shutdown_watch::{ShutdownHold, ShutdownNotice, ShutdownWatch};

// not on Windows: systemd-logind's shutdown inhibitor; the Windows service has its own
#[cfg(unix)]
mod logind;
// the Windows service's pre-shutdown notification; platform-neutral, so Linux tests it too
#[cfg(any(windows, test))]
mod preshutdown_relay;
mod shutdown_config;
mod shutdown_watch;
// not on Windows: systemd's notify protocol and its test; windows_scm is the Windows service manager
#[cfg(unix)]
mod systemd;
#[cfg(unix)]
use systemd as imp;
#[cfg(windows)]
mod windows_log;
#[cfg(windows)]
mod windows_scm;
#[cfg(windows)]
use windows_scm as imp;

/// The Windows service's name (`sc query forewarn`, `net stop forewarn`).
pub const SERVICE_NAME: &str = "forewarn";

/// Why a service command failed; each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// `forewarn service …` on Linux.
    #[error(
        "`forewarn service` manages the Windows service; on Linux forewarn runs as a systemd \
         unit. Fix: `sudo systemctl enable --now forewarn` (docs/operations.md)"
    )]
    NotWindows,
    /// The Service Control Manager refused.
    #[error("cannot {action} the {SERVICE_NAME} service: {message}. Fix: {fix}")]
    Refused {
        /// What was attempted: "install", "start", …
        action: &'static str,
        /// The system's error.
        message: String,
        /// What to do about it.
        fix: String,
    },
    /// The service did not reach the state asked for in time.
    #[error(
        "the {SERVICE_NAME} service did not {what} within {waited_s} s (it is {state}). Fix: {fix}"
    )]
    NotReached {
        /// "start", "stop".
        what: &'static str,
        /// How long was waited.
        waited_s: u64,
        /// The state it is in.
        state: String,
        /// What to look at.
        fix: String,
    },
}

/// How `forewarn service install` registers the service.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The forewarn executable the service runs (`forewarn service run --config CONFIG`).
    pub executable: PathBuf,
    /// The config file the service reads.
    pub config: PathBuf,
    /// The account it runs as; None: LocalSystem (needed by actions such as `net stop`).
    pub account: Option<String>,
    /// That account's password (none for LocalSystem, LocalService, NetworkService and
    /// virtual accounts such as `NT SERVICE\forewarn`).
    pub password: Option<String>,
    /// The service logs JSON lines (`forewarn --log-format json service install`).
    pub json_log: bool,
}

/// What the service runs once the Service Control Manager has started it: the daemon,
/// until the token is cancelled (Stop, Shutdown, Pre-shutdown).
pub type ServiceBody = Box<dyn FnOnce(CancellationToken) -> anyhow::Result<()> + Send>;

/// Registers the Windows service (auto-start, restart on failure).
pub fn install(options: &InstallOptions) -> Result<(), ServiceError> {
    imp::install(options)
}

/// Stops (if running) and removes the Windows service.
pub fn uninstall() -> Result<(), ServiceError> {
    imp::uninstall()
}

/// Starts the Windows service and waits until it runs.
pub fn start() -> Result<(), ServiceError> {
    imp::start()
}

/// Stops the Windows service and waits until it has stopped.
pub fn stop() -> Result<(), ServiceError> {
    imp::stop()
}

/// Hands this process to the Service Control Manager, which runs `body` as the service;
/// returns when the service has stopped.
pub fn run_dispatcher(body: ServiceBody) -> Result<(), ServiceError> {
    imp::run_dispatcher(body)
}

/// Tells the service manager the daemon is up once `poll` shows a first document fetched
/// (IMDS may take up to two minutes to answer the first call), and logs
/// [`log_messages::IMDS_FIRST_DOCUMENT`] with `waited_ms` since `polling_since`. Nothing is
/// sent if `shutdown` comes first.
pub fn spawn_ready_after_first_document(
    mut poll: watch::Receiver<PollStatus>,
    polling_since: SystemTime,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        let answered = tokio::select! {
            () = shutdown.cancelled() => false,
            seen = poll.wait_for(|status| status.last_success.is_some()) => seen.is_ok(),
        };
        if !answered {
            return;
        }
        let waited = SystemTime::now()
            .duration_since(polling_since)
            .unwrap_or_default();
        tracing::info!(
            waited_ms = forewarn_imds::millis(waited),
            "{}",
            log_messages::IMDS_FIRST_DOCUMENT
        );
        imp::ready();
    });
}

/// Holds the operating system's shutdown back for the plugins' last preparation, if
/// `[shutdown] prepare` asks for it and the service manager can (systemd-logind's delay
/// inhibitor on Linux, the service's pre-shutdown notification on Windows), until `stop`.
/// None: nothing will hold a shutdown back.
pub fn spawn_shutdown_watch(
    config: &ShutdownConfig,
    stop: CancellationToken,
) -> Option<ShutdownWatch> {
    if !config.prepare {
        tracing::info!("{}", log_messages::SHUTDOWN_NOT_HELD);
        return None;
    }
    imp::spawn_shutdown_watch(config.budget, stop)
}

/// Tells the service manager the daemon is stopping.
pub fn notify_stopping() {
    imp::stopping();
}

/// Pings the service manager's watchdog from the async runtime until `shutdown`, if it
/// has one for this process (systemd's `WatchdogSec`): a wedged runtime stops the pings and
/// the service manager restarts forewarn.
pub fn spawn_watchdog(shutdown: CancellationToken) {
    let Some(interval) = imp::watchdog_interval() else {
        return;
    };
    tracing::info!(
        interval_ms = interval.as_millis() as u64,
        "systemd watchdog enabled"
    );
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => imp::watchdog_ping(),
            }
        }
    });
}

/// The service's log writer: a rotating file under the log directory on Windows (a
/// service has no console); None on Linux, where journald keeps stderr.
pub fn log_file_writer() -> anyhow::Result<
    Option<impl for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static>,
> {
    #[cfg(windows)]
    {
        windows_log::writer().map(Some)
    }
    #[cfg(unix)]
    {
        Ok(None::<fn() -> std::io::Stderr>)
    }
}
