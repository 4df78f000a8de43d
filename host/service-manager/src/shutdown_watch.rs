//! The operating system's shutdown as the daemon hears it, whichever service manager holds
//! it back (`logind.rs` on Linux; on Windows the service's pre-shutdown notification): a
//! [`ShutdownNotice`] when it begins or is called off, and [`ShutdownWatch::release`] to let
//! it go on. The event loop turns the notices into the pipeline's `Input::HostShutdown` and
//! `Input::HostShutdownCancelled`, and its `Action::ReleaseShutdown` into `release`.

use forewarn_imds::millis;
use std::time::Duration;

use tokio::sync::mpsc;

/// What the service manager says about the operating system's shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownNotice {
    /// The system is shutting down or rebooting; it is held back for `budget` at most.
    Coming {
        /// How long forewarn may prepare before it must release the shutdown.
        budget: Duration,
    },
    /// The shutdown was called off.
    CalledOff,
}

/// The daemon's end of a shutdown hold.
#[derive(Debug)]
pub struct ShutdownWatch {
    notices: mpsc::UnboundedReceiver<ShutdownNotice>,
    releases: mpsc::UnboundedSender<()>,
}

/// The service manager's end of a shutdown hold.
#[derive(Debug)]
pub struct ShutdownHold {
    /// Where the notices go.
    pub notices: mpsc::UnboundedSender<ShutdownNotice>,
    /// Where the releases come from.
    pub releases: mpsc::UnboundedReceiver<()>,
}

impl ShutdownWatch {
    /// A watch and the hold that feeds it (the service manager's task takes the hold; tests
    /// play the service manager with it).
    pub fn channel() -> (ShutdownWatch, ShutdownHold) {
        let (notice_tx, notice_rx) = mpsc::unbounded_channel();
        let (release_tx, release_rx) = mpsc::unbounded_channel();
        let watch = ShutdownWatch {
            notices: notice_rx,
            releases: release_tx,
        };
        let hold = ShutdownHold {
            notices: notice_tx,
            releases: release_rx,
        };
        (watch, hold)
    }

    /// The next notice; None once the service manager's side is gone (no more will come).
    pub async fn next(&mut self) -> Option<ShutdownNotice> {
        self.notices.recv().await
    }

    /// Lets the shutdown go on.
    pub fn release(&self) {
        // The hold gone means nothing holds the shutdown back any more: nothing to release.
        let _ignored = self.releases.send(());
    }
}

/// The budget for `wanted` when the service manager holds a shutdown for at most `limit`:
/// the shorter, ending `margin` before the limit (at half the limit when that is under the
/// margin).
pub(super) fn budget_within(wanted: Duration, limit: Duration, margin: Duration) -> Duration {
    let room = match limit.checked_sub(margin) {
        Some(room) if !room.is_zero() => room,
        _ => limit / 2,
    };
    wanted.min(room)
}

/// What a service manager's hold says once taken: `held` with the budget and the manager's
/// `limit_ms`, and `cut` when the budget is shorter than the `wanted` one.
pub(super) struct HoldMessages {
    /// Logged when the hold is taken.
    pub held: &'static str,
    /// Warned when the service manager's limit cut the budget.
    pub cut: &'static str,
}

/// Says that shutdowns are held for `budget` (of `wanted`) within the manager's `limit`.
pub(super) fn announce_hold(
    messages: HoldMessages,
    budget: Duration,
    wanted: Duration,
    limit: Duration,
) {
    tracing::info!(
        budget_ms = millis(budget),
        limit_ms = millis(limit),
        "{}",
        messages.held
    );
    if budget < wanted {
        tracing::warn!(
            budget_ms = millis(budget),
            wanted_ms = millis(wanted),
            "{}",
            messages.cut
        );
    }
}
