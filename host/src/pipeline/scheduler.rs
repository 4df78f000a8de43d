//! The scheduler stage: which plugin call is due for an event, in which order, under which
//! budget, and what an answer means for the next call. Pure: `now` comes in, calls go out.
//!
//! Preparation runs in dependency order (a plugin is asked once every plugin it runs
//! `after` has approved), each call's budget is the manifest's, cut to what is left before
//! NotBefore minus the safety margin; deferrals are asked again after the wait they ask
//! for, pulled in so a last call fits before the deadline. Recovery runs in reverse order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use forewarn_imds::{EventType, ScheduledEvent};
use forewarn_runtime::PluginLogLine;

use crate::pipeline::clock::{from_unix_ms, unix_ms};
use crate::pipeline::policy::LeadTime;
use crate::pipeline::roster::{Member, Roster};
use crate::pipeline::state::{
    Answer, AnswerOutcome, Approval, CallPhase, EventProgress, Handling, Lifecycle, PluginProgress,
};
use crate::plugins::manifest::FailurePolicy;

/// Shortest wait before asking a deferring plugin again.
pub(crate) const MIN_RETRY: Duration = Duration::from_millis(100);
/// Wait before asking again a plugin whose call failed (trap, budget exceeded).
pub(crate) const FAILURE_RETRY: Duration = Duration::from_secs(5);
/// Once the deadline has passed the event may start at any moment: a deferring plugin is
/// asked again after the wait it asked for, but at least this soon…
pub(crate) const LATE_RETRY: Duration = Duration::from_secs(1);
/// … and at most this late (a plugin asking for less is not called more than once a second).
pub(crate) const LATE_RETRY_MAX: Duration = Duration::from_secs(5);
/// A prepare call may always run this long (or its own budget, if shorter), even when less
/// time is left before the deadline: a stop action cut off half-way helps nobody, and the
/// VM runs until Azure acts. The seeds advise shutting down a Spot VM "in under 30 seconds,
/// best to target 10 or less".
pub(crate) const SHORT_NOTICE_BUDGET: Duration = Duration::from_secs(10);
/// With `prepare-lead-time = "auto"`, preparation starts this long plus the longest chain
/// of the subscribed plugins' prepare-times plus the safety margin before NotBefore…
pub(crate) const AUTO_LEAD_SLACK: Duration = Duration::from_secs(60);
/// … but never later than this before NotBefore: the longest standard notice (Freeze and
/// Reboot, 15 minutes), so events with the usual notices are prepared at first sight, the
/// etcd barrier's `coordination.deadline` comes after preparation began, and a plugin whose
/// preparation takes longer than its `prepare-time` still has the whole notice. Only events
/// announced further ahead (degraded hardware: days) wait.
pub(crate) const AUTO_LEAD_FLOOR: Duration = Duration::from_secs(15 * 60);
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

/// What the scheduler works with besides the event: the plugins, the calls in flight, the
/// safety margin before NotBefore and when preparation starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule<'a> {
    /// The plugins, in dependency order.
    pub roster: &'a Roster,
    /// Calls not answered yet: never two calls to one plugin at once.
    pub in_flight: &'a InFlight,
    /// How long before NotBefore preparation should be over (`policy.safety-margin-ms`).
    pub margin: Duration,
    /// How long before NotBefore preparation starts (`policy.prepare-lead-time`).
    pub lead: LeadTime,
}

/// Where an event's preparation stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Preparation {
    /// Too early: preparation starts at this instant (`prepare-lead-time` before NotBefore).
    NotYet {
        /// When the first prepare calls are due.
        starts_at: SystemTime,
    },
    /// These calls are due now (possibly none: waiting on retries or on calls in flight).
    Calls {
        /// The calls, in dependency order.
        calls: Vec<PlannedCall>,
        /// Plugins that start without waiting for the plugins they run after, because
        /// their turn came (see [`turn_start`]).
        shortened: Vec<ShortenedTurn>,
    },
    /// Every subscribed plugin approved (`subscribers` of them): the approval stage decides.
    AllPrepared {
        /// How many plugins subscribe to the event.
        subscribers: usize,
    },
}

/// A plugin asked to prepare before the plugins it runs after approved: their share of the
/// time before the deadline was over, so theirs (a drain window, say) is cut short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShortenedTurn {
    /// The plugin that starts now.
    pub plugin: String,
    /// The plugins it runs after that had not approved yet.
    pub cut_short: Vec<String>,
    /// How long this plugin and those after it need (their prepare-times, in a chain).
    pub needed: Duration,
    /// How long was left before the deadline (NotBefore minus the margin).
    pub left: Duration,
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
    /// Whether `plugin` has a call in flight, for any event: a plugin's calls are
    /// serialised across events.
    fn plugin_busy(&self, plugin: &str) -> bool {
        self.in_flight.iter().any(|(_, busy)| busy == plugin)
    }

    /// Whether a call about `event_id` is in flight, to any plugin.
    fn event_in_flight(&self, event_id: &str) -> bool {
        self.in_flight.iter().any(|(event, _)| event == event_id)
    }
}

/// The deadline of preparation: NotBefore minus the safety margin (None without NotBefore).
pub(crate) fn deadline(event: &ScheduledEvent, margin: Duration) -> Option<SystemTime> {
    let not_before = event.not_before?;
    Some(not_before.checked_sub(margin).unwrap_or(not_before))
}

/// How long each subscriber and every subscriber after it (the longest chain through
/// `after`) need, by name: the sum of their `prepare-time`s.
pub(crate) fn chain_needs(subscribers: &[&Member], roster: &Roster) -> HashMap<String, Duration> {
    let mut needs: HashMap<String, Duration> = HashMap::new();
    for member in subscribers.iter().rev() {
        let after_it = subscribers
            .iter()
            .filter(|other| roster.predecessors(&other.name).contains(&member.name))
            .filter_map(|other| needs.get(&other.name).copied())
            .max()
            .unwrap_or(Duration::ZERO);
        let own = member.manifest.preparation_need();
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
pub(crate) fn turn_start(deadline: SystemTime, need: Duration) -> SystemTime {
    deadline.checked_sub(need).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// When preparation of `progress` starts: `lead` before NotBefore; "auto" is the longest
/// chain of the subscribers' prepare-times plus the margin plus [`AUTO_LEAD_SLACK`], and at
/// least [`AUTO_LEAD_FLOOR`]. None: at once (no NotBefore).
pub(crate) fn preparation_start(
    progress: &EventProgress,
    schedule: Schedule<'_>,
) -> Option<SystemTime> {
    let not_before = progress.event.not_before?;
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
    Some(
        not_before
            .checked_sub(lead)
            .unwrap_or(SystemTime::UNIX_EPOCH),
    )
}

/// The prepare calls due for `progress` at `now`, in dependency order; records their
/// attempt numbers. The event must be Scheduled with its approval pending. Preparation
/// never stops for lack of time: while the event is Scheduled (even past NotBefore) a
/// plugin that has not approved is asked again, with whatever time is left.
/// `shared` is copied (`Arc::make_mut`) only when a call is planned or preparation begins,
/// so a round that changes nothing leaves the event shared with the journaled state.
pub(crate) fn prepare(
    shared: &mut Arc<EventProgress>,
    schedule: Schedule<'_>,
    now: SystemTime,
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
        Arc::make_mut(shared).preparing_since_unix_ms = Some(unix_ms(now));
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
        let budget = prepare_budget(member.manifest.budget, deadline, now);
        calls.push(planned(progress, member, CallPhase::Prepare, budget));
    }
    Preparation::Calls { calls, shortened }
}

/// Whether `member` stands as approved for `progress`: it approved, or it is quarantined
/// under `on-failure = "approve"` (see [`Roster::excused`]).
fn consented(progress: &EventProgress, member: &Member, schedule: Schedule<'_>) -> bool {
    progress.plugin(&member.name).prepared || schedule.roster.excused(member)
}

/// Time from `now` to `deadline` (zero once it passed; unbounded without one).
fn time_left(deadline: Option<SystemTime>, now: SystemTime) -> Duration {
    match deadline {
        Some(deadline) => deadline.duration_since(now).unwrap_or(Duration::ZERO),
        None => Duration::MAX,
    }
}

/// The budget of a prepare call: the manifest's, cut to the time left before the deadline,
/// but never below [`SHORT_NOTICE_BUDGET`] (or the manifest's budget, if shorter).
pub(crate) fn prepare_budget(
    configured: Duration,
    deadline: Option<SystemTime>,
    now: SystemTime,
) -> Duration {
    let left = time_left(deadline, now).max(SHORT_NOTICE_BUDGET);
    configured.min(left)
}

/// The plugins `member` runs after, among the event's subscribers, that have not approved.
fn unprepared_predecessors(
    progress: &EventProgress,
    member: &Member,
    schedule: Schedule<'_>,
) -> Vec<String> {
    let event_type = progress.event.event_type;
    schedule
        .roster
        .predecessors(&member.name)
        .iter()
        .filter_map(|before| schedule.roster.get(before))
        .filter(|other| other.manifest.subscribes_to(event_type))
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
    now: SystemTime,
) -> bool {
    wants_to_prepare(progress, member, schedule, now) && !schedule.plugin_busy(&member.name)
}

/// [`may_prepare`] but for a call in flight: not prepared yet, no retry pending.
fn wants_to_prepare(
    progress: &EventProgress,
    member: &Member,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> bool {
    let own = progress.plugin(&member.name);
    !own.prepared && !retry_pending(&own, now) && !schedule.roster.is_quarantined(&member.name)
}

/// The plugins a call about `progress` waits for at `now` only because they have a call in
/// flight (for this event or another): the calls [`prepare`], [`tell_started`] or
/// [`recover`] would plan if they were free. The pipeline visits the event again when one
/// of them is free, instead of visiting every event after every answer.
pub(crate) fn blocked_on_busy(
    progress: &EventProgress,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> Vec<String> {
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
fn pending_turns(progress: &EventProgress, schedule: Schedule<'_>) -> Vec<SystemTime> {
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

/// The `started` calls due: every subscriber not told yet, each once. When the VM goes
/// away with the event (Preempt, Terminate) and a subscriber was never asked to prepare
/// (forewarn first saw the event Started: it was down, or IMDS unreadable, through the
/// Scheduled phase), it is asked to `prepare` first, once, with its whole budget: reading
/// the document proves the VM still runs, so a stop action may still stop the app
/// cleanly. Records that attempt.
pub(crate) fn tell_started(
    shared: &mut Arc<EventProgress>,
    schedule: Schedule<'_>,
) -> Vec<PlannedCall> {
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
        let budget = member.manifest.budget;
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
pub(crate) fn vm_goes_away(event_type: EventType) -> bool {
    matches!(
        event_type,
        EventType::Preempt | EventType::Terminate | EventType::Unknown
    )
}

/// The recovery calls due, in reverse dependency order: a plugin recovers once every
/// plugin that runs after it has recovered (start the app before rejoining the load
/// balancer). Records attempt numbers.
pub(crate) fn recover(
    shared: &mut Arc<EventProgress>,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> Recovery {
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
    wants_to_recover(progress, member, subscribers, schedule, now)
        && !schedule.plugin_busy(&member.name)
}

/// [`may_recover`] but for a call in flight: not told yet, every plugin after it told, no
/// retry pending.
fn wants_to_recover(
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
/// returns the answer as journaled. A failed prepare call of a plugin whose `on-failure` is
/// `approve` counts as its approval.
pub(crate) fn record_reply(
    progress: &mut EventProgress,
    plugin: &str,
    phase: CallPhase,
    reply: &CallReply,
    now: SystemTime,
    margin: Duration,
    on_failure: FailurePolicy,
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
        CallPhase::Prepare => record_prepare(own, reply, now, not_before, margin, on_failure),
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
    on_failure: FailurePolicy,
) {
    if consents(reply.outcome, on_failure) {
        own.prepared = true;
        own.retry_at_unix_ms = None;
        return;
    }
    let wait = match reply.outcome {
        AnswerOutcome::Defer => reply.retry_after.max(MIN_RETRY),
        _ => FAILURE_RETRY,
    };
    own.retry_at_unix_ms = Some(unix_ms(retry_instant(now, wait, not_before, margin)));
}

/// Whether a prepare call that came to `outcome` is the plugin's approval: an approve, or a
/// failure under `on-failure = "approve"`. A defer is an answer, never a failure: it holds.
fn consents(outcome: AnswerOutcome, on_failure: FailurePolicy) -> bool {
    match outcome {
        AnswerOutcome::Approve => true,
        AnswerOutcome::Defer => false,
        _ => on_failure == FailurePolicy::Approve,
    }
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
/// deadline (NotBefore minus the margin), and never sooner than [`MIN_RETRY`]. Once that
/// last moment has passed the event may start at any time: ask again after the wait,
/// within [`LATE_RETRY`]..=[`LATE_RETRY_MAX`].
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
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if last_useful <= now + MIN_RETRY {
        return now + wait.clamp(LATE_RETRY, LATE_RETRY_MAX);
    }
    wanted.min(last_useful).max(now + MIN_RETRY)
}

/// The next instant after `now` something is due for `progress`: the start of preparation
/// (lead time), a plugin's turn, a retry while the event is being prepared or recovered, or
/// the preparation deadline. A retry left over from a phase that is over is not due:
/// counting it would wake the loop at once, forever.
pub(crate) fn next_due(
    progress: &EventProgress,
    schedule: Schedule<'_>,
    now: SystemTime,
) -> Option<SystemTime> {
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
        .filter_map(|(_, own)| own.retry_at_unix_ms.map(from_unix_ms));
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
