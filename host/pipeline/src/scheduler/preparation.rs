//! Preparation: when it starts (lead time), each plugin's turn in dependency order, each
//! call's budget cut to what is left before the deadline, and who is blocked on a busy plugin.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use forewarn_events::ImdsTime;

use forewarn_events::PluginName;

use super::plan::*;
use super::recovery::wants_to_recover;
use crate::policy::LeadTime;
use crate::roster::{Member, Roster};
use crate::state::{Approval, CallPhase, EventProgress, Handling, Lifecycle};

/// How long each subscriber and every subscriber after it (the longest chain through
/// `after`) need, by name: the sum of their `prepare-time`s.
pub fn chain_needs(subscribers: &[&Member], roster: &Roster) -> HashMap<PluginName, Duration> {
    let mut needs: HashMap<PluginName, Duration> = HashMap::new();
    for member in subscribers.iter().rev() {
        let after_it = subscribers
            .iter()
            .filter(|other| roster.predecessors(&other.name).contains(&member.name))
            .filter_map(|other| needs.get(&other.name).copied())
            .max()
            .unwrap_or(Duration::ZERO);
        let own = member.terms.preparation_need();
        needs.insert(member.name.clone(), own.saturating_add(after_it));
    }
    needs
}

/// When a plugin whose chain (it and every plugin after it) needs `need` must start at the
/// latest so that the whole chain gets its turn before `deadline`: the chain is planned
/// backwards from the deadline with each plugin's prepare-time. The last plugin of a chain
/// (the stop action) gets its full prepare-time; when the notice is shorter than the chain
/// needs, the first plugins' turns (a drain window) are cut short. A past instant means
/// "at once".
pub fn turn_start(deadline: ImdsTime, need: Duration) -> ImdsTime {
    deadline.saturating_sub(need)
}

/// When preparation of `progress` starts: `lead` before NotBefore; "auto" is the longest
/// chain of the subscribers' prepare-times plus the margin plus [`AUTO_LEAD_SLACK`], and at
/// least [`AUTO_LEAD_FLOOR`]. None: at once (no NotBefore).
pub fn preparation_start(progress: &EventProgress, schedule: Schedule<'_>) -> Option<ImdsTime> {
    let not_before = progress.event.not_before_time()?;
    let lead = match schedule.lead {
        LeadTime::Fixed(lead) => lead,
        LeadTime::Auto => {
            let subscribers = schedule.roster.subscribers(progress.event.event_type);
            let longest = chain_needs(&subscribers, schedule.roster)
                .into_values()
                .max()
                .unwrap_or(Duration::ZERO);
            longest
                .saturating_add(schedule.margin)
                .saturating_add(AUTO_LEAD_SLACK)
                .max(AUTO_LEAD_FLOOR)
        }
    };
    Some(not_before.saturating_sub(lead))
}

/// The prepare calls due for `progress` at `now`, in dependency order; records their
/// attempt numbers. The event must be Scheduled with its approval pending. Preparation
/// never stops for lack of time: while the event is Scheduled (even past NotBefore) a
/// plugin that has not approved is asked again, with whatever time is left.
/// `shared` is copied (`Arc::make_mut`) only when a call is planned or preparation begins,
/// so a round that changes nothing leaves the event shared with the journaled state.
pub fn prepare(
    shared: &mut Arc<EventProgress>,
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> Preparation {
    let progress: &EventProgress = shared;
    let event = progress.event.clone();
    let subscribers = schedule.roster.subscribers(event.event_type);
    if subscribers.is_empty() {
        // Nobody to prepare: the approval stage decides at once (`approve-unsubscribed`).
        return Preparation::AllPrepared { subscribers: 0 };
    }
    if progress.preparing_since_unix_ms.is_none() {
        // A journal from before lead times has no start, but its plugins' progress shows one.
        let resumed = progress
            .plugins
            .values()
            .any(|own| own.prepare_attempts > 0 || own.prepared);
        if !resumed
            && let Some(starts_at) = preparation_start(progress, schedule)
            && now < starts_at
        {
            return Preparation::NotYet { starts_at };
        }
        Arc::make_mut(shared).preparing_since_unix_ms = Some(now);
    }
    let progress: &EventProgress = shared;
    if subscribers
        .iter()
        .all(|member| consented(progress, member, schedule))
    {
        return Preparation::AllPrepared {
            subscribers: subscribers.len(),
        };
    }
    if subscribers.iter().all(|member| {
        consented(progress, member, schedule)
            || schedule.plugin_busy(&member.name)
            || schedule.roster.is_quarantined(&member.name)
    }) {
        // Every plugin still to prepare has a call in flight (a plugin's calls are
        // serialised across events) or is quarantined: the planning below would find
        // nothing, so a round costs little for each event waiting its turn.
        return Preparation::Calls {
            calls: Vec::new(),
            shortened: Vec::new(),
        };
    }
    let deadline = deadline(&event, schedule.margin);
    let needs = chain_needs(&subscribers, schedule.roster);
    let mut calls = Vec::new();
    let mut shortened = Vec::new();
    for member in &subscribers {
        let waiting_for = unprepared_predecessors(shared, member, schedule);
        let need = needs.get(&member.name).copied().unwrap_or_default();
        let turn_came = deadline.is_some_and(|deadline| turn_start(deadline, need) <= now);
        if !waiting_for.is_empty() && !turn_came {
            continue;
        }
        if !may_prepare(shared, member, schedule, now) {
            continue;
        }
        let progress = Arc::make_mut(shared);
        let own = progress.plugin_mut(&member.name);
        if !waiting_for.is_empty() && own.prepare_attempts == 0 {
            shortened.push(ShortenedTurn {
                plugin: member.name.clone(),
                cut_short: waiting_for,
                needed: need,
                left: time_left(deadline, now),
            });
        }
        own.prepare_attempts += 1;
        let budget = prepare_budget(member.terms.budget, deadline, now);
        calls.push(planned(progress, member, CallPhase::Prepare, budget));
    }
    Preparation::Calls { calls, shortened }
}

/// Whether `member` stands as approved for `progress`: it approved, or it is quarantined
/// under `on-failure = "approve"` (see [`Roster::excused`]).
fn consented(progress: &EventProgress, member: &Member, schedule: Schedule<'_>) -> bool {
    progress.plugin(&member.name).prepared || schedule.roster.excused(member)
}

/// The budget of a prepare call: the manifest's, cut to the time left before the deadline,
/// but never below [`SHORT_NOTICE_BUDGET`] (or the manifest's budget, if shorter).
pub fn prepare_budget(configured: Duration, deadline: Option<ImdsTime>, now: ImdsTime) -> Duration {
    let left = time_left(deadline, now).max(SHORT_NOTICE_BUDGET);
    configured.min(left)
}

/// The plugins `member` runs after, among the event's subscribers, that have not approved.
fn unprepared_predecessors(
    progress: &EventProgress,
    member: &Member,
    schedule: Schedule<'_>,
) -> Vec<PluginName> {
    let event_type = progress.event.event_type;
    schedule
        .roster
        .predecessors(&member.name)
        .iter()
        .filter_map(|before| schedule.roster.get(before))
        .filter(|other| other.terms.subscribes_to(event_type))
        .filter(|other| !consented(progress, other, schedule))
        .map(|other| other.name.clone())
        .collect()
}

/// Whether `member` may be asked to prepare now as far as its own progress goes: not
/// prepared yet, no retry pending, no call in flight, not quarantined.
fn may_prepare(
    progress: &EventProgress,
    member: &Member,
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> bool {
    wants_to_prepare(progress, member, schedule, now) && !schedule.plugin_busy(&member.name)
}

/// [`may_prepare`] but for a call in flight: not prepared yet, no retry pending.
fn wants_to_prepare(
    progress: &EventProgress,
    member: &Member,
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> bool {
    let own = progress.plugin(&member.name);
    !own.prepared && !retry_pending(&own, now) && !schedule.roster.is_quarantined(&member.name)
}

/// The plugins a call about `progress` waits for at `now` only because they have a call in
/// flight (for this event or another): the calls [`prepare`], [`tell_started`](super::recovery::tell_started)
/// or [`recover`](super::recovery::recover) would plan if they were free. The pipeline visits the event again when one
/// of them is free, instead of visiting every event after every answer.
pub fn blocked_on_busy(
    progress: &EventProgress,
    schedule: Schedule<'_>,
    now: ImdsTime,
) -> Vec<PluginName> {
    if !matches!(progress.handling, Handling::Prepare { .. }) {
        return Vec::new();
    }
    let subscribers = schedule.roster.subscribers(progress.event.event_type);
    let busy: Vec<&Member> = subscribers
        .iter()
        .copied()
        .filter(|member| schedule.plugin_busy(&member.name))
        .collect();
    if busy.is_empty() {
        return Vec::new();
    }
    let wanted: Vec<&Member> = match progress.lifecycle {
        Lifecycle::Scheduled => {
            let preparing = progress.approval == Approval::Pending
                && progress.preparing_since_unix_ms.is_some();
            if !preparing {
                return Vec::new();
            }
            let deadline = deadline(&progress.event, schedule.margin);
            let mut needs = None;
            busy.into_iter()
                .filter(|member| wants_to_prepare(progress, member, schedule, now))
                .filter(|member| {
                    if unprepared_predecessors(progress, member, schedule).is_empty() {
                        return true;
                    }
                    let needs =
                        needs.get_or_insert_with(|| chain_needs(&subscribers, schedule.roster));
                    let need = needs.get(&member.name).copied().unwrap_or_default();
                    deadline.is_some_and(|deadline| turn_start(deadline, need) <= now)
                })
                .collect()
        }
        Lifecycle::Started => busy
            .into_iter()
            .filter(|member| !progress.plugin(&member.name).told_started)
            .collect(),
        Lifecycle::Ended { .. } => busy
            .into_iter()
            .filter(|member| wants_to_recover(progress, member, &subscribers, schedule, now))
            .collect(),
    };
    wanted
        .into_iter()
        .map(|member| member.name.clone())
        .collect()
}

/// The instants at which a plugin's turn comes while it still waits for the plugins it
/// runs after: wake-ups for the event loop.
pub fn pending_turns(progress: &EventProgress, schedule: Schedule<'_>) -> Vec<ImdsTime> {
    let Some(deadline) = deadline(&progress.event, schedule.margin) else {
        return Vec::new();
    };
    let subscribers = schedule.roster.subscribers(progress.event.event_type);
    let waiting: Vec<&&Member> = subscribers
        .iter()
        .filter(|member| progress.plugin(&member.name).prepare_attempts == 0)
        .filter(|member| !schedule.roster.is_quarantined(&member.name))
        .filter(|member| !unprepared_predecessors(progress, member, schedule).is_empty())
        .collect();
    if waiting.is_empty() {
        // Checked first: the chains below cost more, and this runs for every event each
        // time the loop asks when it is next due.
        return Vec::new();
    }
    let needs = chain_needs(&subscribers, schedule.roster);
    waiting
        .into_iter()
        .filter_map(|member| needs.get(&member.name))
        .map(|need| turn_start(deadline, *need))
        .collect()
}
