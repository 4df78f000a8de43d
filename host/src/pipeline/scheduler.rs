//! The scheduler stage: which plugin call is due for an event, in which order, under which
//! budget, and what an answer means for the next call. Pure: `now` comes in, calls go out.
//!
//! Preparation runs in dependency order (a plugin is asked once every plugin it runs
//! `after` has approved), each call's budget is the manifest's, cut to what is left before
//! NotBefore minus the safety margin; deferrals are asked again after the wait they ask
//! for, pulled in so a last call fits before the deadline. Recovery runs in reverse order.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use forewarn_imds::ScheduledEvent;
use forewarn_runtime::PluginLogLine;

use crate::pipeline::clock::{from_unix_ms, unix_ms};
use crate::pipeline::policy;
use crate::pipeline::roster::{Member, Roster};
use crate::pipeline::state::{
    Answer, AnswerOutcome, Approval, CallPhase, EventProgress, Handling, Lifecycle, PluginProgress,
};

/// Shortest wait before asking a deferring plugin again.
pub(crate) const MIN_RETRY: Duration = Duration::from_millis(100);
/// Wait before asking again a plugin whose call failed (trap, budget exceeded).
pub(crate) const FAILURE_RETRY: Duration = Duration::from_secs(5);
/// Recovery calls made before giving up on a plugin's recovery.
pub(crate) const RECOVERY_ATTEMPTS: u32 = 3;

/// Calls started and not answered yet, by (event id, plugin name). A plugin has at most
/// one call in flight, whatever the event: its calls touch its state, so a prepare for one
/// event and a recovery for another must not interleave.
pub(crate) type InFlight = HashSet<(String, String)>;

/// A call the scheduler decided on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedCall {
    /// The event the call is about.
    pub event_id: String,
    /// The plugin to call.
    pub plugin: String,
    /// What the plugin is told.
    pub phase: CallPhase,
    /// 1 for the first call of this phase, then 2, 3, …
    pub attempt: u32,
    /// How long the call may run.
    pub budget: Duration,
    /// Whether the event names this VM (else the plugin is only told about it).
    pub affects_this_vm: bool,
    /// The event as last listed.
    pub event: ScheduledEvent,
}

/// A plugin's reply to a call, as the pipeline needs it (the WIT glue converts the
/// runtime's outcome into this).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallReply {
    /// The decision, or how the call failed.
    pub outcome: AnswerOutcome,
    /// The defer or failure reason; empty for approve.
    pub reason: String,
    /// For a defer: when the plugin asks to be called again.
    pub retry_after: Duration,
    /// How long the call took.
    pub elapsed: Duration,
    /// What the plugin logged during the call.
    pub logs: Vec<PluginLogLine>,
}

/// What the scheduler works with besides the event: the plugins, the calls in flight and
/// the safety margin before NotBefore.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule<'a> {
    /// The plugins, in dependency order.
    pub roster: &'a Roster,
    /// Calls not answered yet: never two calls to one plugin at once.
    pub in_flight: &'a InFlight,
    /// How long before NotBefore preparation must be over (`policy.safety-margin`).
    pub margin: Duration,
}

/// Where an event's preparation stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Preparation {
    /// These calls are due now (possibly none: waiting on retries or on calls in flight).
    Calls(Vec<PlannedCall>),
    /// Every subscribed plugin approved (`subscribers` of them): the approval stage decides.
    AllPrepared {
        /// How many plugins subscribe to the event.
        subscribers: usize,
    },
    /// NotBefore minus the margin came first; these plugins had not approved.
    DeadlinePassed {
        /// The plugins still preparing.
        still_preparing: Vec<String>,
    },
}

/// Where an event's recovery stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Recovery {
    /// These calls are due now (possibly none).
    Calls(Vec<PlannedCall>),
    /// Every plugin was told the event ended (or recovery was given up): forget the event.
    Done,
}

impl Schedule<'_> {
    /// Whether `plugin` has a call in flight, for this event or any other: a plugin's calls
    /// are serialised across events. (`_event_id` names the event asking.)
    fn is_in_flight(&self, _event_id: &str, plugin: &str) -> bool {
        self.in_flight.iter().any(|(_, busy)| busy == plugin)
    }

    /// Whether a call about `event_id` is in flight, to any plugin.
    fn event_in_flight(&self, event_id: &str) -> bool {
        self.in_flight.iter().any(|(event, _)| event == event_id)
    }

    /// Time left for preparation: until NotBefore minus the margin (unbounded without one).
    fn time_left(&self, event: &ScheduledEvent, now: SystemTime) -> Duration {
        policy::plugin_budget(Duration::MAX, event.not_before, now, self.margin)
    }
}

/// The prepare calls due for `progress` at `now`, in dependency order; records their
/// attempt numbers. The event must be Scheduled with its approval pending.
pub(crate) fn prepare(
    progress: &mut EventProgress,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> Preparation {
    let event = progress.event.clone();
    let subscribers = schedule.roster.subscribers(event.event_type);
    if schedule.time_left(&event, now).is_zero() {
        let still_preparing = subscribers
            .iter()
            .filter(|member| !progress.plugin(&member.name).prepared)
            .map(|member| member.name.clone())
            .collect();
        return Preparation::DeadlinePassed { still_preparing };
    }
    if subscribers
        .iter()
        .all(|member| progress.plugin(&member.name).prepared)
    {
        return Preparation::AllPrepared {
            subscribers: subscribers.len(),
        };
    }
    let mut calls = Vec::new();
    for member in &subscribers {
        if !may_prepare(progress, member, schedule, now) {
            continue;
        }
        let own = progress.plugin_mut(&member.name);
        own.prepare_attempts += 1;
        let budget = policy::plugin_budget(
            member.manifest.budget,
            event.not_before,
            now,
            schedule.margin,
        );
        calls.push(planned(progress, member, CallPhase::Prepare, budget));
    }
    Preparation::Calls(calls)
}

/// Whether `member` may be asked to prepare now: not prepared yet, every plugin it runs
/// after (among the event's subscribers) prepared, no retry pending, no call in flight.
fn may_prepare(
    progress: &EventProgress,
    member: &Member,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> bool {
    let own = progress.plugin(&member.name);
    let event_type = progress.event.event_type;
    let waiting_on_others = schedule
        .roster
        .predecessors(&member.name)
        .iter()
        .filter(|before| {
            schedule
                .roster
                .get(before)
                .is_some_and(|other| other.manifest.subscribes_to(event_type))
        })
        .any(|before| !progress.plugin(before).prepared);
    !own.prepared
        && !waiting_on_others
        && !retry_pending(&own, now)
        && !schedule.is_in_flight(&progress.event.id, &member.name)
}

/// The `started` calls due: every subscriber not told yet, each once.
pub(crate) fn tell_started(progress: &EventProgress, schedule: Schedule<'_>) -> Vec<PlannedCall> {
    schedule
        .roster
        .subscribers(progress.event.event_type)
        .into_iter()
        .filter(|member| !progress.plugin(&member.name).told_started)
        .filter(|member| !schedule.is_in_flight(&progress.event.id, &member.name))
        .map(|member| planned(progress, member, CallPhase::Started, member.manifest.budget))
        .collect()
}

/// The recovery calls due, in reverse dependency order: a plugin recovers once every
/// plugin that runs after it has recovered (start the app before rejoining the load
/// balancer). Records attempt numbers.
pub(crate) fn recover(
    progress: &mut EventProgress,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> Recovery {
    let phase = match progress.lifecycle {
        Lifecycle::Ended { after_start: true } => CallPhase::EndedAfterStart,
        _ => CallPhase::EndedWithoutStart,
    };
    let id = progress.event.id.clone();
    let subscribers = schedule.roster.subscribers(progress.event.event_type);
    let all_told = subscribers
        .iter()
        .all(|member| progress.plugin(&member.name).told_ended);
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
        progress.plugin_mut(&member.name).recovery_attempts += 1;
        calls.push(planned(progress, member, phase, member.manifest.budget));
    }
    Recovery::Calls(calls)
}

fn may_recover(
    progress: &EventProgress,
    member: &Member,
    subscribers: &[&Member],
    schedule: Schedule<'_>,
    now: SystemTime,
) -> bool {
    let own = progress.plugin(&member.name);
    let successors_pending = subscribers.iter().any(|other| {
        schedule
            .roster
            .predecessors(&other.name)
            .contains(&member.name)
            && !progress.plugin(&other.name).told_ended
    });
    !own.told_ended
        && !successors_pending
        && !retry_pending(&own, now)
        && !schedule.is_in_flight(&progress.event.id, &member.name)
}

fn retry_pending(own: &PluginProgress, now: SystemTime) -> bool {
    own.retry_at_unix_ms
        .is_some_and(|at| from_unix_ms(at) > now)
}

fn planned(
    progress: &EventProgress,
    member: &Member,
    phase: CallPhase,
    budget: Duration,
) -> PlannedCall {
    let own = progress.plugin(&member.name);
    let attempt = match phase {
        CallPhase::Prepare => own.prepare_attempts,
        CallPhase::Started => 1,
        CallPhase::EndedAfterStart | CallPhase::EndedWithoutStart => own.recovery_attempts,
    };
    PlannedCall {
        event_id: progress.event.id.clone(),
        plugin: member.name.clone(),
        phase,
        attempt,
        budget,
        affects_this_vm: match progress.handling {
            Handling::Prepare { affects_this_vm } => affects_this_vm,
            _ => true,
        },
        event: progress.event.clone(),
    }
}

/// Records `reply` from `plugin` for `phase` in `progress` at `now`, and when to ask again;
/// returns the answer as journaled.
pub(crate) fn record_reply(
    progress: &mut EventProgress,
    plugin: &str,
    phase: CallPhase,
    reply: &CallReply,
    now: SystemTime,
    margin: Duration,
) -> Answer {
    let answer = Answer {
        phase,
        outcome: reply.outcome,
        reason: reply.reason.clone(),
        at_unix_ms: unix_ms(now),
        elapsed_ms: u64::try_from(reply.elapsed.as_millis()).unwrap_or(u64::MAX),
    };
    let not_before = progress.event.not_before;
    let own = progress.plugin_mut(plugin);
    own.last_answer = Some(answer.clone());
    match phase {
        CallPhase::Prepare => record_prepare(own, reply, now, not_before, margin),
        CallPhase::Started => own.told_started = true,
        CallPhase::EndedAfterStart | CallPhase::EndedWithoutStart => {
            record_recovery(plugin, own, reply, now)
        }
    }
    answer
}

fn record_prepare(
    own: &mut PluginProgress,
    reply: &CallReply,
    now: SystemTime,
    not_before: Option<SystemTime>,
    margin: Duration,
) {
    let wait = match reply.outcome {
        AnswerOutcome::Approve => {
            own.prepared = true;
            own.retry_at_unix_ms = None;
            return;
        }
        AnswerOutcome::Defer => reply.retry_after.max(MIN_RETRY),
        _ => FAILURE_RETRY,
    };
    own.retry_at_unix_ms = Some(unix_ms(retry_instant(now, wait, not_before, margin)));
}

fn record_recovery(plugin: &str, own: &mut PluginProgress, reply: &CallReply, now: SystemTime) {
    let failed = reply.outcome.is_failure();
    if !failed || own.recovery_attempts >= RECOVERY_ATTEMPTS {
        if failed {
            tracing::error!(
                plugin,
                attempts = own.recovery_attempts,
                "giving up on a plugin's recovery after repeated failures"
            );
        }
        own.told_ended = true;
        own.retry_at_unix_ms = None;
        return;
    }
    own.retry_at_unix_ms = Some(unix_ms(now + FAILURE_RETRY));
}

/// When to ask again: after `wait`, but early enough that a last call fits before the
/// deadline (NotBefore minus the margin), and never sooner than [`MIN_RETRY`].
pub(crate) fn retry_instant(
    now: SystemTime,
    wait: Duration,
    not_before: Option<SystemTime>,
    margin: Duration,
) -> SystemTime {
    let wanted = now + wait;
    let Some(not_before) = not_before else {
        return wanted;
    };
    let last_useful = not_before
        .checked_sub(margin + Duration::from_secs(1))
        .unwrap_or(now);
    wanted.min(last_useful).max(now + MIN_RETRY)
}

/// The next instant something is due for `progress`: a retry while the event is being
/// prepared or recovered, or the preparation deadline. A retry left over from a phase that
/// is over (preparation abandoned at the deadline) is not due: counting it would wake the
/// loop at once, forever.
pub(crate) fn next_due(progress: &EventProgress, margin: Duration) -> Option<SystemTime> {
    let preparing =
        progress.lifecycle == Lifecycle::Scheduled && progress.approval == Approval::Pending;
    let recovering = matches!(progress.lifecycle, Lifecycle::Ended { .. });
    let retries = progress
        .plugins
        .values()
        .filter(|_| preparing || recovering)
        .filter(|own| !(recovering && own.told_ended))
        .filter_map(|own| own.retry_at_unix_ms.map(from_unix_ms));
    let deadline = preparing
        .then_some(progress.event.not_before)
        .flatten()
        .map(|not_before| not_before.checked_sub(margin).unwrap_or(not_before));
    retries.chain(deadline).min()
}

#[cfg(test)]
mod tests;
