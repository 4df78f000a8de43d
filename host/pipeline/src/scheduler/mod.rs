//! The scheduler stage: which plugin call is due for an event, in which order, under which
//! budget, and what an answer means for the next call. Pure: `now` comes in, calls go out.
//!
//! Preparation runs in dependency order (a plugin is asked once every plugin it runs
//! `after` has approved), each call's budget is the manifest's, cut to what is left before
//! NotBefore minus the safety margin; deferrals are asked again after the wait they ask
//! for, pulled in so a last call fits before the deadline. Recovery runs in reverse order.

mod plan;
mod preparation;
mod recovery;
mod replies;

use forewarn_events::ImdsTime;

use crate::state::{Approval, EventProgress, Lifecycle};

pub use plan::*;
pub use preparation::*;
pub use recovery::*;
pub use replies::*;

/// The next instant after `now` something is due for `progress`: the start of preparation
/// (lead time), a plugin's turn, a retry while the event is being prepared or recovered, or
/// the preparation deadline. A retry left over from a phase that is over is not due:
/// counting it would wake the loop at once, forever.
pub fn next_due(
    progress: &EventProgress,
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> Option<ImdsTime> {
    let preparing =
        progress.lifecycle == Lifecycle::Scheduled && progress.approval == Approval::Pending;
    let recovering = matches!(progress.lifecycle, Lifecycle::Ended { .. });
    if preparing && progress.preparing_since_unix_ms.is_none() {
        return preparation_start(progress, schedule).filter(|at| *at > now);
    }
    let retries = progress
        .plugins
        .iter()
        .filter(|_| preparing || recovering)
        .filter(|(_, own)| !(recovering && own.told_ended))
        .filter(|(name, _)| !schedule.roster.is_quarantined(name))
        .filter_map(|(_, own)| own.retry_at_unix_ms);
    let turns = if preparing {
        pending_turns(progress, schedule)
    } else {
        Vec::new()
    };
    let deadline = preparing
        .then(|| deadline(&progress.event, schedule.margin))
        .flatten();
    retries
        .chain(turns)
        .chain(deadline)
        .filter(|at| *at > now)
        .min()
}

#[cfg(test)]
mod tests;
