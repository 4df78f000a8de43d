//! systemd integration for `Type=notify`: READY=1 once IMDS has answered the first poll,
//! WATCHDOG=1 at half of `WatchdogSec`, STOPPING=1 on shutdown (no-ops without NOTIFY_SOCKET).
//! `forewarn service …` is Windows': here the unit is systemd's (`systemctl`).

use std::time::Duration;

use sd_notify::NotifyState;

use super::{InstallOptions, ServiceError};

/// Tells systemd the daemon is up (`READY=1`).
pub(super) fn ready() {
    send(&[NotifyState::Ready], "READY=1");
}

/// Pings systemd's watchdog (`WATCHDOG=1`).
pub(super) fn watchdog_ping() {
    send(&[NotifyState::Watchdog], "WATCHDOG=1");
}

/// Tells systemd the daemon is stopping (`STOPPING=1`).
pub(super) fn stopping() {
    send(&[NotifyState::Stopping], "STOPPING=1");
}

fn send(states: &[NotifyState<'_>], what: &str) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(error) = sd_notify::notify(false, states) {
        tracing::warn!(%error, "cannot send {what} to systemd");
    }
}

/// The interval to ping the watchdog at: half of WATCHDOG_USEC, if systemd set it for this
/// process. As in libsystemd's `sd_watchdog_enabled`, WATCHDOG_PID (when set) must be ours.
pub(super) fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok()?;
    let pid = std::env::var("WATCHDOG_PID").ok();
    watchdog_interval_from(&usec, pid.as_deref(), std::process::id())
}

fn watchdog_interval_from(usec: &str, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(own_pid)
    {
        return None;
    }
    let usec: u64 = usec.trim().parse().ok().filter(|usec| *usec > 0)?;
    Some(Duration::from_micros(usec) / 2)
}

/// systemd-logind's delay inhibitor, held by a task of its own until `stop`.
pub(super) fn spawn_shutdown_watch(
    budget: Duration,
    stop: tokio_util::sync::CancellationToken,
) -> Option<super::ShutdownWatch> {
    let (watch, hold) = super::ShutdownWatch::channel();
    tokio::spawn(super::logind::hold_shutdowns(budget, hold, stop));
    Some(watch)
}

/// On Linux forewarn is a systemd unit: `forewarn service …` says so.
pub(super) fn install(_options: &InstallOptions) -> Result<(), ServiceError> {
    Err(ServiceError::NotWindows)
}

pub(super) fn uninstall() -> Result<(), ServiceError> {
    Err(ServiceError::NotWindows)
}

pub(super) fn start() -> Result<(), ServiceError> {
    Err(ServiceError::NotWindows)
}

pub(super) fn stop() -> Result<(), ServiceError> {
    Err(ServiceError::NotWindows)
}

pub(super) fn run_dispatcher(_service: super::ServiceBody) -> Result<(), ServiceError> {
    Err(ServiceError::NotWindows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_is_half_of_watchdog_usec_for_this_process() {
        let half = Some(Duration::from_secs(15));
        assert_eq!(watchdog_interval_from("30000000", None, 7), half);
        assert_eq!(watchdog_interval_from("30000000", Some("7"), 7), half);
        assert_eq!(watchdog_interval_from("30000000", Some("8"), 7), None);
        assert_eq!(watchdog_interval_from("0", None, 7), None);
        assert_eq!(watchdog_interval_from("soon", None, 7), None);
    }
}
