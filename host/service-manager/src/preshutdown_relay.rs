//! The Windows service's pre-shutdown notification, held for the plugins' last preparation.
//!
//! The Service Control Manager's handler hands the notification to
//! [`PreshutdownRelay::shutdown_coming`] with the service's stop token, and reports
//! stop-pending instead of stopping. The relay tells the daemon
//! ([`ShutdownNotice::Coming`]) and stops the service once the pipeline releases the
//! shutdown, or once the budget and [`STOP_MARGIN`] are spent (a daemon too wedged to say
//! so). Windows waits for a service that accepted pre-shutdown until it stops or its
//! `PreshutdownTimeout` has passed (`forewarn service install` sets 60 s), so the budget
//! ends [`STOP_MARGIN`] before that: the daemon still has to stop. A Stop control
//! (`net stop forewarn`, `sc stop`) is not a shutdown and never comes here; a pre-shutdown
//! cannot be called off.
//!
//! Platform-neutral, so the Linux test run plays the SCM with it too.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::shutdown_watch::{
    HoldMessages, ShutdownHold, ShutdownNotice, ShutdownWatch, announce_hold, budget_within,
};
use forewarn_imds::millis;
use forewarn_pipeline::log_messages;

/// Kept between the budget's end and Windows' own: the daemon stops (its journal, the
/// plugins' last calls) after the release, before Windows stops waiting.
pub(crate) const STOP_MARGIN: Duration = Duration::from_secs(5);

/// The Service Control Manager's end: where a pre-shutdown notification goes.
#[derive(Debug)]
pub(crate) struct PreshutdownRelay {
    coming: mpsc::UnboundedSender<CancellationToken>,
    budget: Duration,
}

impl PreshutdownRelay {
    /// Starts relaying pre-shutdown notifications to the daemon, which prepares for at most
    /// `wanted` (cut to fit `windows_limit`, the service's `PreshutdownTimeout`), until
    /// `stop`: the relay and the daemon's end of the hold.
    pub(crate) fn spawn(
        wanted: Duration,
        windows_limit: Duration,
        stop: CancellationToken,
    ) -> (PreshutdownRelay, ShutdownWatch) {
        let budget = budget_within(wanted, windows_limit, STOP_MARGIN);
        announce_hold(
            HoldMessages {
                held: log_messages::PRESHUTDOWN_HELD,
                cut: log_messages::SHUTDOWN_BUDGET_CUT_BY_WINDOWS,
            },
            budget,
            wanted,
            windows_limit,
        );
        let (watch, hold) = ShutdownWatch::channel();
        let (coming, notifications) = mpsc::unbounded_channel();
        tokio::spawn(relay_the_first(notifications, hold, budget, stop));
        (PreshutdownRelay { coming, budget }, watch)
    }

    /// Windows is shutting down: the daemon prepares, then cancels `service_stop`. The
    /// budget it prepares for, or None when nothing listens any more (the daemon stopped):
    /// then stop at once.
    pub(crate) fn shutdown_coming(&self, service_stop: CancellationToken) -> Option<Duration> {
        self.coming.send(service_stop).ok().map(|()| self.budget)
    }
}

/// Relays the first pre-shutdown (there is only one: it cannot be called off) and stops the
/// service after the release.
async fn relay_the_first(
    mut notifications: mpsc::UnboundedReceiver<CancellationToken>,
    hold: ShutdownHold,
    budget: Duration,
    stop: CancellationToken,
) {
    let service_stop = tokio::select! {
        () = stop.cancelled() => return,
        notified = notifications.recv() => match notified {
            Some(service_stop) => service_stop,
            None => return,
        },
    };
    let released = prepared_in_time(hold, budget, &stop).await;
    match released {
        true => tracing::info!("{}", log_messages::PRESHUTDOWN_RELEASED),
        false => tracing::warn!(
            budget_ms = millis(budget),
            "{}",
            log_messages::PRESHUTDOWN_NOT_RELEASED
        ),
    }
    service_stop.cancel();
}

/// Tells the daemon and waits for its release: false when it never came within the budget
/// and the margin (or the daemon went away).
async fn prepared_in_time(
    mut hold: ShutdownHold,
    budget: Duration,
    stop: &CancellationToken,
) -> bool {
    if hold
        .notices
        .send(ShutdownNotice::Coming { budget })
        .is_err()
    {
        return false;
    }
    tokio::select! {
        () = stop.cancelled() => false,
        released = tokio::time::timeout(budget + STOP_MARGIN, hold.releases.recv()) => {
            matches!(released, Ok(Some(())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANTED: Duration = Duration::from_secs(30);
    const WINDOWS_LIMIT: Duration = Duration::from_secs(60);

    /// The SCM's handler, played: a pre-shutdown arrives with the service's stop token.
    fn preshutdown(relay: &PreshutdownRelay) -> (CancellationToken, Option<Duration>) {
        let service_stop = CancellationToken::new();
        let budget = relay.shutdown_coming(service_stop.clone());
        (service_stop, budget)
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_stops_only_after_the_daemon_released_the_shutdown() {
        let (relay, mut watch) =
            PreshutdownRelay::spawn(WANTED, WINDOWS_LIMIT, CancellationToken::new());
        let (service_stop, budget) = preshutdown(&relay);
        assert_eq!(budget, Some(WANTED));
        assert_eq!(
            watch.next().await,
            Some(ShutdownNotice::Coming { budget: WANTED })
        );
        // Preparing: 20 s on (less than the budget), the service still runs.
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!service_stop.is_cancelled(), "stopped before the release");
        watch.release();
        service_stop.cancelled().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_daemon_that_never_releases_is_stopped_after_the_budget_and_the_margin() {
        let (relay, mut watch) =
            PreshutdownRelay::spawn(WANTED, WINDOWS_LIMIT, CancellationToken::new());
        let began = tokio::time::Instant::now();
        let (service_stop, _) = preshutdown(&relay);
        assert!(watch.next().await.is_some());
        service_stop.cancelled().await;
        assert_eq!(began.elapsed(), WANTED + STOP_MARGIN);
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_is_cut_to_end_before_windows_stops_waiting() {
        let (relay, mut watch) = PreshutdownRelay::spawn(
            Duration::from_secs(90),
            WINDOWS_LIMIT,
            CancellationToken::new(),
        );
        let (_service_stop, budget) = preshutdown(&relay);
        let cut = WINDOWS_LIMIT - STOP_MARGIN;
        assert_eq!(budget, Some(cut));
        assert_eq!(
            watch.next().await,
            Some(ShutdownNotice::Coming { budget: cut })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn with_the_daemon_gone_the_handler_is_told_to_stop_at_once() {
        let stop = CancellationToken::new();
        let (relay, watch) = PreshutdownRelay::spawn(WANTED, WINDOWS_LIMIT, stop.clone());
        drop(watch);
        stop.cancel();
        // The relay's task ends with the daemon; wait until it dropped its receiver.
        relay.coming.closed().await;
        let (service_stop, budget) = preshutdown(&relay);
        assert_eq!(budget, None);
        assert!(!service_stop.is_cancelled(), "the handler stops it itself");
    }
}
