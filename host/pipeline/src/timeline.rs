//! What the daemon reports as it works, for people and tests: one `TimelineEntry` per
//! step (document seen, transition, plugin asked and answered, approval). The pipeline emits
//! them as actions; the shell broadcasts them (`daemon::timeline_broadcast`).

use forewarn_events::ImdsTime;
use serde::Serialize;

use forewarn_events::{EventId, EventStatus, EventType, PluginName, ScheduledEvent};

use crate::log_fields;
use crate::quarantine::QuarantinedPlugin;
use crate::state::{AnswerOutcome, CallPhase};
use crate::tracker::TransitionKind;

/// One step of the daemon's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TimelineEntry {
    /// The tracker turned a document into a transition.
    Transition {
        /// IMDS's EventId.
        event_id: EventId,
        /// IMDS's EventType (`Unknown` for a type newer than forewarn: its text is in
        /// `event_type_raw`).
        event_type: EventType,
        /// IMDS's EventType as sent ("Reboot", "Freeze", …), for people.
        event_type_raw: String,
        /// What changed: the event appeared, started, ended, …
        transition: TransitionKind,
        /// The event in one line for people: type, status, resources, time to NotBefore.
        detail: String,
        /// The event as IMDS listed it in the document that made the transition (for
        /// an end, as last listed): what the outcome record keeps. Not serialized: the
        /// history and the demo show `detail`.
        #[serde(skip)]
        announced: Box<ScheduledEvent>,
    },
    /// The policy decided how to handle a new event.
    Handling {
        /// IMDS's EventId.
        event_id: EventId,
        /// The decision in words ("prepare (this VM)", "ignored: REASON", …).
        handling: String,
    },
    /// The event is announced further ahead than `policy.prepare-lead-time`: it is tracked,
    /// and preparation starts later.
    PreparationWaits {
        /// IMDS's EventId.
        event_id: EventId,
        /// When the first prepare calls are due, in milliseconds since the Unix epoch.
        starts_at_unix_ms: ImdsTime,
    },
    /// A plugin starts preparing before the plugins it runs after approved: their share of
    /// the time before NotBefore is over, so their preparation (a drain window) is cut short
    /// and this plugin still finishes in time.
    TurnShortened {
        /// IMDS's EventId.
        event_id: EventId,
        /// The plugin that starts now.
        plugin: PluginName,
        /// The plugins it runs after that had not approved yet.
        cut_short: Vec<PluginName>,
        /// What this plugin and those after it need (their prepare-times), in milliseconds.
        needed_ms: u64,
        /// What was left before NotBefore minus the safety margin, in milliseconds.
        left_ms: u64,
    },
    /// NotBefore minus the safety margin passed before every plugin approved. Preparation
    /// goes on while the event is Scheduled (the VM runs until Azure acts), and the approval
    /// is still sent if every plugin approves in time.
    PreparingLate {
        /// IMDS's EventId.
        event_id: EventId,
        /// The plugins that had not approved yet.
        still_preparing: Vec<PluginName>,
    },
    /// A plugin is being called.
    PluginCalled {
        /// The event the call is about.
        event_id: EventId,
        /// The plugin's name.
        plugin: PluginName,
        /// Prepare (before the maintenance) or recover (after it).
        phase: CallPhase,
        /// Which call this is for the plugin, event and phase, starting at 1; a plugin that
        /// deferred is asked again with the next number.
        attempt: u32,
        /// The time the call may take before it is cut off, in milliseconds.
        budget_ms: u64,
    },
    /// A line the plugin logged (or printed) during a call, sent just before its answer.
    PluginLog {
        /// The event the call was about.
        event_id: EventId,
        /// The plugin that logged the line.
        plugin: PluginName,
        /// The level the plugin logged the line at.
        level: LogLevel,
        /// The line as the plugin wrote it.
        message: String,
    },
    /// A plugin answered (or failed, counted as a defer).
    PluginAnswered {
        /// The event the call was about.
        event_id: EventId,
        /// The plugin that answered.
        plugin: PluginName,
        /// Prepare or recover, as in the matching [`TimelineEntry::PluginCalled`].
        phase: CallPhase,
        /// Approve, defer, or the kind of failure.
        outcome: AnswerOutcome,
        /// The plugin's explanation, or the failure's; empty when there was none.
        reason: String,
        /// How long the call took, in milliseconds.
        elapsed_ms: u64,
    },
    /// The approval was accepted by IMDS.
    Approved {
        /// The events approved by the one POST, never empty.
        event_ids: Vec<EventId>,
    },
    /// The approval POST failed; it is retried.
    ApprovalFailed {
        /// The events the failed POST would have approved.
        event_ids: Vec<EventId>,
        /// Why it failed, as the IMDS client reported it.
        error: String,
    },
    /// Every plugin approved but no approval is sent (policy, dry run, deadline).
    NotApproved {
        /// The event left for Azure to start at NotBefore.
        event_id: EventId,
        /// Why no approval is sent, in words.
        reason: String,
    },
    /// Recovery is complete and the event is forgotten.
    Finished {
        /// The event that is done; no further entry names it.
        event_id: EventId,
    },
    /// A plugin's calls failed `policy.quarantine-after-failures` times within the window:
    /// it is not called again until a new version of it is loaded or the daemon restarts.
    PluginQuarantined(QuarantinedPlugin),
    /// A quarantined plugin was loaded in a new version (or unloaded): it is called again.
    QuarantineLifted {
        /// The plugin.
        plugin: PluginName,
    },
    /// The operating system began to shut down or reboot; the service manager holds it back
    /// for the budget while the plugins prepare.
    HostShutdownBegan {
        /// The shutdown budget, in milliseconds.
        budget_ms: u64,
        /// The event whose preparation it waits for: forewarn's own Shutdown event, or a
        /// Scheduled Event already preparing this VM; none when one had prepared it already.
        event_id: Option<EventId>,
    },
    /// The operating system's shutdown was let go on.
    HostShutdownReleased {
        /// The event whose preparation it waited for.
        event_id: EventId,
        /// "prepared", "already-prepared" or "budget-spent".
        outcome: &'static str,
        /// From the operating system's notice to the release, in milliseconds.
        prepared_ms: u64,
    },
}

impl TimelineEntry {
    /// The entry of `event`'s transition `kind`, seen at `now`.
    pub fn transition(event: &ScheduledEvent, kind: TransitionKind, now: ImdsTime) -> Self {
        TimelineEntry::Transition {
            event_id: event.id.clone(),
            event_type: event.event_type,
            event_type_raw: event.event_type_raw.clone(),
            transition: kind,
            detail: describe_event(event, now),
            announced: Box::new(event.clone()),
        }
    }
}

/// The event in one line for people: type, status, resources, time to NotBefore, impact.
fn describe_event(event: &ScheduledEvent, now: ImdsTime) -> String {
    let status = match event.status {
        EventStatus::Scheduled => "Scheduled",
        EventStatus::Started => "Started",
    };
    let mut parts = vec![
        format!("{} {}", event.event_type_raw, status),
        format!("for {}", log_fields::names(&event.resources)),
    ];
    if let Some(not_before) = event.not_before_time() {
        let seconds = not_before.duration_since(now).as_secs();
        parts.push(format!("NotBefore in {seconds}s"));
    }
    if let Some(duration) = event.duration_seconds {
        parts.push(format!("impact {duration}s"));
    }
    parts.join(", ")
}

pub use forewarn_events::{LogLevel, PluginLogLine};
