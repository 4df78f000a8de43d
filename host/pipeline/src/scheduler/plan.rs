//! What the scheduler works with: its waits and budgets, the calls it plans, the view of
//! the daemon a decision needs ([`Schedule`]), and the helpers every step shares.

use std::collections::HashSet;
use std::time::Duration;

use forewarn_events::{EventId, ImdsTime, PluginName, ScheduledEvent};

use crate::policy::LeadTime;
use crate::roster::{Member, Roster};
use crate::state::{AnswerOutcome, CallPhase, EventProgress, Handling, PluginProgress};
use crate::timeline::PluginLogLine;

/// Shortest wait before asking a deferring plugin again.
pub const MIN_RETRY: Duration = Duration::from_millis(100);
/// Wait before asking again a plugin whose call failed (trap, budget exceeded).
pub const FAILURE_RETRY: Duration = Duration::from_secs(5);
/// Once the deadline has passed the event may start at any moment: a deferring plugin is
/// asked again after the wait it asked for, but at least this soon…
pub const LATE_RETRY: Duration = Duration::from_secs(1);
/// … and at most this late (a plugin asking for less is not called more than once a second).
pub const LATE_RETRY_MAX: Duration = Duration::from_secs(5);
/// A prepare call may always run this long (or its own budget, if shorter), even when less
/// time is left before the deadline: a stop action cut off half-way helps nobody, and the
/// VM runs until Azure acts. The seeds advise shutting down a Spot VM "in under 30 seconds,
/// best to target 10 or less".
pub const SHORT_NOTICE_BUDGET: Duration = Duration::from_secs(10);
/// With `prepare-lead-time = "auto"`, preparation starts this long plus the longest chain
/// of the subscribed plugins' prepare-times plus the safety margin before NotBefore…
pub const AUTO_LEAD_SLACK: Duration = Duration::from_secs(60);
/// … but never later than this before NotBefore: the longest standard notice (Freeze and
/// Reboot, 15 minutes), so events with the usual notices are prepared at first sight, the
/// etcd barrier's `coordination.deadline` comes after preparation began, and a plugin whose
/// preparation takes longer than its `prepare-time` still has the whole notice. Only events
/// announced further ahead (degraded hardware: days) wait.
pub const AUTO_LEAD_FLOOR: Duration = Duration::from_secs(15 * 60);
/// Recovery calls made before giving up on a plugin's recovery.
pub const RECOVERY_ATTEMPTS: u32 = 3;

/// Calls started and not answered yet, by (event id, plugin name). A plugin has at most
/// one call in flight, whatever the event: its calls touch its state, so a prepare for one
/// event and a recovery for another must not interleave.
pub type InFlight = HashSet<(EventId, PluginName)>;

/// A call the scheduler decided on.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    /// The event the call is about.
    pub event_id: EventId,
    /// The plugin to call.
    pub plugin: PluginName,
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
pub struct CallReply {
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
pub struct Schedule<'a> {
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
pub enum Preparation {
    /// Too early: preparation starts at this instant (`prepare-lead-time` before NotBefore).
    NotYet {
        /// When the first prepare calls are due.
        starts_at: ImdsTime,
    },
    /// These calls are due now (possibly none: waiting on retries or on calls in flight).
    Calls {
        /// The calls, in dependency order.
        calls: Vec<PlannedCall>,
        /// Plugins that start without waiting for the plugins they run after, because
        /// their turn came (see [`turn_start`](super::preparation::turn_start)).
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
pub struct ShortenedTurn {
    /// The plugin that starts now.
    pub plugin: PluginName,
    /// The plugins it runs after that had not approved yet.
    pub cut_short: Vec<PluginName>,
    /// How long this plugin and those after it need (their prepare-times, in a chain).
    pub needed: Duration,
    /// How long was left before the deadline (NotBefore minus the margin).
    pub left: Duration,
}

/// Where an event's recovery stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Recovery {
    /// These calls are due now (possibly none).
    Calls(Vec<PlannedCall>),
    /// Every plugin was told the event ended (or recovery was given up): forget the event.
    Done,
}

impl Schedule<'_> {
    /// Whether `plugin` has a call in flight, for any event: a plugin's calls are
    /// serialised across events.
    pub fn plugin_busy(&self, plugin: &PluginName) -> bool {
        self.in_flight.iter().any(|(_, busy)| busy == plugin)
    }

    /// Whether a call about `event_id` is in flight, to any plugin.
    pub fn event_in_flight(&self, event_id: &EventId) -> bool {
        self.in_flight.iter().any(|(event, _)| event == event_id)
    }
}

/// The deadline of preparation: NotBefore minus the safety margin (None without NotBefore).
pub fn deadline(event: &ScheduledEvent, margin: Duration) -> Option<ImdsTime> {
    let not_before = event.not_before_time()?;
    Some(not_before.checked_sub(margin).unwrap_or(not_before))
}

/// Time from `now` to `deadline` (zero once it passed; unbounded without one).
pub fn time_left(deadline: Option<ImdsTime>, now: ImdsTime) -> Duration {
    match deadline {
        Some(deadline) => deadline.duration_since(now),
        None => Duration::MAX,
    }
}

/// Whether `own` deferred (or failed) and its retry time is still ahead of `now`.
pub fn retry_pending(own: &PluginProgress, now: ImdsTime) -> bool {
    own.retry_at_unix_ms.is_some_and(|at| at > now)
}

/// The call of `member` for `progress` in `phase`, under `budget`, with its attempt count.
pub fn planned(
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
