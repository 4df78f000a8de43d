//! After the event: telling plugins it started, then recovery in reverse order, one step at a
//! time, a few attempts each.

use forewarn_events::ImdsTime;
use std::sync::Arc;

use forewarn_events::EventType;

use super::plan::*;
use crate::roster::Member;
use crate::state::{CallPhase, EventProgress, Lifecycle};

/// The `started` calls due: every subscriber not told yet, each once. When the VM goes
/// away with the event (Preempt, Terminate) and a subscriber was never asked to prepare
/// (forewarn first saw the event Started: it was down, or IMDS unreadable, through the
/// Scheduled phase), it is asked to `prepare` first, once, with its whole budget: reading
/// the document proves the VM still runs, so a stop action may still stop the app
/// cleanly. Records that attempt.
pub fn tell_started(shared: &mut Arc<EventProgress>, schedule: Schedule<'_>) -> Vec<PlannedCall> {
    let last_chance = vm_goes_away(shared.event.event_type);
    let due: Vec<&Member> = schedule
        .roster
        .subscribers(shared.event.event_type)
        .into_iter()
        .filter(|member| !shared.plugin(&member.name).told_started)
        .filter(|member| !schedule.plugin_busy(&member.name))
        .filter(|member| !schedule.roster.is_quarantined(&member.name))
        .collect();
    let mut calls = Vec::new();
    for member in due {
        let own = shared.plugin(&member.name);
        let budget = member.terms.budget;
        if last_chance && own.prepare_attempts == 0 && !own.prepared {
            let progress = Arc::make_mut(shared);
            progress.plugin_mut(&member.name).prepare_attempts += 1;
            calls.push(planned(progress, member, CallPhase::Prepare, budget));
            continue;
        }
        calls.push(planned(shared, member, CallPhase::Started, budget));
    }
    calls
}

/// Whether the VM is gone once an event of this type runs (Spot eviction, deletion, or a
/// type forewarn does not know, which could be either): a Started one still gets the
/// preparation it missed (see [`tell_started`]).
pub fn vm_goes_away(event_type: EventType) -> bool {
    matches!(
        event_type,
        EventType::Preempt | EventType::Terminate | EventType::Unknown
    )
}

/// The recovery calls due, in reverse dependency order: a plugin recovers once every
/// plugin that runs after it has recovered (start the app before rejoining the load
/// balancer). Records attempt numbers.
pub fn recover(shared: &mut Arc<EventProgress>, schedule: Schedule<'_>, now: ImdsTime) -> Recovery {
    let progress: &EventProgress = shared;
    let phase = match progress.lifecycle {
        Lifecycle::Ended { after_start: true } => CallPhase::EndedAfterStart,
        _ => CallPhase::EndedWithoutStart,
    };
    let id = progress.event.id.clone();
    let subscribers = schedule.roster.subscribers(progress.event.event_type);
    let all_told = subscribers
        .iter()
        .all(|member| recovery_over(progress, member, schedule));
    if all_told && !schedule.event_in_flight(&id) {
        return Recovery::Done;
    }
    let due: Vec<&Member> = subscribers
        .iter()
        .rev()
        .copied()
        .filter(|member| may_recover(progress, member, &subscribers, schedule, now))
        .collect();
    let mut calls = Vec::new();
    for member in due {
        let progress = Arc::make_mut(shared);
        progress.plugin_mut(&member.name).recovery_attempts += 1;
        calls.push(planned(progress, member, phase, member.terms.budget));
    }
    Recovery::Calls(calls)
}

fn may_recover(
    progress: &EventProgress,
    member: &Member,
    subscribers: &[&Member],
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> bool {
    wants_to_recover(progress, member, subscribers, schedule, now)
        && !schedule.plugin_busy(&member.name)
}

/// `may_recover` but for a call in flight: not told yet, every plugin after it told, no
/// retry pending.
pub fn wants_to_recover(
    progress: &EventProgress,
    member: &Member,
    subscribers: &[&Member],
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> bool {
    let own = progress.plugin(&member.name);
    let successors_pending = subscribers.iter().any(|other| {
        schedule
            .roster
            .predecessors(&other.name)
            .contains(&member.name)
            && !recovery_over(progress, other, schedule)
    });
    !recovery_over(progress, member, schedule) && !successors_pending && !retry_pending(&own, now)
}

/// Whether `member`'s recovery of `progress` is over: it was told the event ended (or its
/// recovery was given up), or it is quarantined and had its one recovery call. A plugin that
/// fails in a loop may still be the only one able to undo what it did (a readiness hold, a
/// stopped app), so it is asked once, and not again.
fn recovery_over(progress: &EventProgress, member: &Member, schedule: Schedule<'_>) -> bool {
    let own = progress.plugin(&member.name);
    own.told_ended || (schedule.roster.is_quarantined(&member.name) && own.recovery_attempts > 0)
}
