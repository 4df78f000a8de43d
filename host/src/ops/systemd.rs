//! systemd integration for `Type=notify`: READY=1 once IMDS has answered the first poll,
//! WATCHDOG=1 at half of `WatchdogSec`, STOPPING=1 on shutdown (no-ops without NOTIFY_SOCKET).

use std::time::{Duration, SystemTime};

use forewarn_imds::PollStatus;
use sd_notify::NotifyState;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::log_messages;

/// Tells systemd the daemon is up (`READY=1`).
fn notify_ready() {
    send(&[NotifyState::Ready], "READY=1");
}

/// Sends `READY=1` once `poll` shows a first document fetched (IMDS may take up to two
/// minutes to answer the first call), and logs [`log_messages::IMDS_FIRST_DOCUMENT`] with
/// `waited_ms` since `polling_since`. Nothing is sent if `shutdown` comes first.
pub(crate) fn spawn_ready_after_first_document(
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
            waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            "{}",
            log_messages::IMDS_FIRST_DOCUMENT
        );
        notify_ready();
    });
}

/// Tells systemd the daemon is stopping (`STOPPING=1`).
pub(crate) fn notify_stopping() {
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
pub(crate) fn watchdog_interval() -> Option<Duration> {
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

/// Pings the watchdog from the async runtime until `shutdown`, if the unit has
/// `WatchdogSec`: a wedged runtime stops the pings and systemd restarts forewarn.
pub(crate) fn spawn_watchdog(shutdown: CancellationToken) {
    let Some(interval) = watchdog_interval() else {
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
                _ = ticks.tick() => send(&[NotifyState::Watchdog], "WATCHDOG=1"),
            }
        }
    });
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
