//! systemd-logind's delay inhibitor (`org.freedesktop.login1.Manager` on the system bus,
//! <https://systemd.io/INHIBITOR_LOCKS/>): taken at start, so that a shutdown or reboot with
//! no Scheduled Event waits for the plugins' last preparation. logind sends
//! `PrepareForShutdown(true)` and waits until every delay lock is closed or its
//! `InhibitDelayMaxUSec` has passed; forewarn closes its lock when the pipeline releases the
//! shutdown. `PrepareForShutdown(false)` (called off) takes a new lock. A plain `systemctl
//! stop forewarn` sends no signal: it is not a shutdown.
//!
//! The bus is the system bus (`DBUS_SYSTEM_BUS_ADDRESS` when set, as the tests do with a
//! private `dbus-daemon` and a stand-in logind).

use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use zbus::zvariant::OwnedFd;

use super::shutdown_watch::{
    HoldMessages, ShutdownHold, ShutdownNotice, announce_hold, budget_within,
};
use forewarn_pipeline::log_messages;

/// What logind holds a shutdown for when it does not say (its documented default).
const LOGIND_DEFAULT_DELAY: Duration = Duration::from_secs(5);
/// Kept between the budget's end and logind's own: the release must reach logind first.
const RELEASE_MARGIN: Duration = Duration::from_secs(1);

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
trait LoginManager {
    /// Takes an inhibitor lock; closing the returned file descriptor releases it.
    fn inhibit(&self, what: &str, who: &str, why: &str, mode: &str) -> zbus::Result<OwnedFd>;

    /// Sent when a shutdown begins (`start` true) and when it was called off (false).
    #[zbus(signal)]
    fn prepare_for_shutdown(&self, start: bool) -> zbus::Result<()>;

    /// The longest logind waits for delay locks.
    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> zbus::Result<u64>;
}

/// The budget for `wanted`, when logind holds a shutdown for at most `logind_max`: the
/// shorter, less [`RELEASE_MARGIN`] (half of logind's when that is under the margin).
pub(super) fn budget_for(wanted: Duration, logind_max: Duration) -> Duration {
    budget_within(wanted, logind_max, RELEASE_MARGIN)
}

/// Holds shutdowns back for the plugins until `stop`; gives up (saying why, once) when there
/// is no logind to ask.
pub(super) async fn hold_shutdowns(wanted: Duration, hold: ShutdownHold, stop: CancellationToken) {
    let result = tokio::select! {
        () = stop.cancelled() => Ok(()),
        result = hold_until_stopped(wanted, hold, &stop) => result,
    };
    if let Err(error) = result {
        tracing::warn!(%error, "{}", log_messages::LOGIND_UNREACHABLE);
    }
}

async fn hold_until_stopped(
    wanted: Duration,
    mut hold: ShutdownHold,
    stop: &CancellationToken,
) -> zbus::Result<()> {
    let connection = zbus::Connection::system().await?;
    let logind = LoginManagerProxy::new(&connection).await?;
    // Listening first: a shutdown that begins while the lock is being taken is not missed.
    let mut signals = logind.receive_prepare_for_shutdown().await?;
    let logind_max = logind
        .inhibit_delay_max_usec()
        .await
        .map(Duration::from_micros)
        .unwrap_or(LOGIND_DEFAULT_DELAY);
    let budget = budget_for(wanted, logind_max);
    let mut lock = Some(take_lock(&logind).await?);
    announce_hold(
        HoldMessages {
            held: log_messages::SHUTDOWN_HELD,
            cut: log_messages::SHUTDOWN_BUDGET_CUT_BY_LOGIND,
        },
        budget,
        wanted,
        logind_max,
    );
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            signal = signals.next() => {
                let Some(signal) = signal else {
                    return Err(zbus::Error::Failure("logind's signals stopped (the system bus went away)".into()));
                };
                let notice = match signal.args()?.start {
                    true => ShutdownNotice::Coming { budget },
                    false => ShutdownNotice::CalledOff,
                };
                if notice == ShutdownNotice::CalledOff && lock.is_none() {
                    lock = Some(take_lock(&logind).await?);
                }
                if hold.notices.send(notice).is_err() {
                    return Ok(());
                }
            }
            released = hold.releases.recv() => {
                if released.is_none() {
                    return Ok(());
                }
                // Closing the lock's file descriptor lets logind go on.
                if lock.take().is_some() {
                    tracing::info!("{}", log_messages::SHUTDOWN_LOCK_RELEASED);
                }
            }
        }
    }
}

async fn take_lock(logind: &LoginManagerProxy<'_>) -> zbus::Result<OwnedFd> {
    logind
        .inhibit(
            "shutdown",
            "forewarn",
            "the plugins prepare the workload (drain, stop) before the VM shuts down",
            "delay",
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_ends_a_second_before_logind_stops_waiting() {
        let s = Duration::from_secs;
        assert_eq!(budget_for(s(30), s(5)), s(4), "logind's default 5 s");
        assert_eq!(
            budget_for(s(30), s(35)),
            s(30),
            "logind raised: the budget asked"
        );
        assert_eq!(budget_for(s(30), s(1)), Duration::from_millis(500));
        assert_eq!(budget_for(s(2), s(5)), s(2));
    }
}
