//! What the daemon reports as it works, for people and tests: one `TimelineEntry` per
//! step (document seen, transition, plugin asked and answered, approval), broadcast.

use serde::Serialize;

use crate::pipeline::state::{AnswerOutcome, CallPhase};
use crate::pipeline::tracker::TransitionKind;

/// One step of the daemon's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TimelineEntry {
    /// The tracker turned a document into a transition.
    Transition {
        event_id: String,
        event_type: String,
        transition: TransitionKind,
        detail: String,
    },
    /// The policy decided how to handle a new event.
    Handling { event_id: String, handling: String },
    /// A plugin is being called.
    PluginCalled {
        event_id: String,
        plugin: String,
        phase: CallPhase,
        attempt: u32,
        budget_ms: u64,
    },
    /// A line the plugin logged (or printed) during a call, sent just before its answer.
    PluginLog {
        event_id: String,
        plugin: String,
        level: forewarn_runtime::LogLevel,
        message: String,
    },
    /// A plugin answered (or failed, counted as a defer).
    PluginAnswered {
        event_id: String,
        plugin: String,
        phase: CallPhase,
        outcome: AnswerOutcome,
        reason: String,
        elapsed_ms: u64,
    },
    /// The approval was accepted by IMDS.
    Approved { event_ids: Vec<String> },
    /// The approval POST failed; it is retried.
    ApprovalFailed {
        event_ids: Vec<String>,
        error: String,
    },
    /// Every plugin approved but no approval is sent (policy, dry run, deadline).
    NotApproved { event_id: String, reason: String },
    /// Recovery is complete and the event is forgotten.
    Finished { event_id: String },
}

/// Sender half: the daemon keeps it; anyone may `subscribe()`.
pub(crate) type Timeline = tokio::sync::broadcast::Sender<TimelineEntry>;

/// A timeline with room for bursts; slow readers miss entries rather than slowing the daemon.
pub fn new_timeline() -> Timeline {
    tokio::sync::broadcast::channel(1024).0
}
