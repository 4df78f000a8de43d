//! The daemon's durable state: the tracker plus, per event, how far each plugin got and
//! whether the event was approved. Journaled before every action, so a restart resumes.

use std::collections::{BTreeMap, BTreeSet};

use forewarn_imds::ScheduledEvent;
use serde::{Deserialize, Serialize};

use crate::pipeline::tracker::Tracker;

/// Everything the daemon must not forget across a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonState {
    pub tracker: Tracker,
    /// Events being handled, by EventId.
    pub events: BTreeMap<String, EventProgress>,
    /// Plugins holding the VM not ready (`set-ready(false)`), as of the last commit:
    /// restored at start, so `/readyz` stays 503 across a restart mid-drain.
    #[serde(default)]
    pub readiness_holds: BTreeSet<String>,
}

/// One event's handling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventProgress {
    /// The event as last listed.
    pub event: ScheduledEvent,
    pub handling: Handling,
    pub lifecycle: Lifecycle,
    pub approval: Approval,
    /// Per plugin (by name), what it was asked and answered.
    pub plugins: BTreeMap<String, PluginProgress>,
}

/// What the policy decided to do with the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Handling {
    /// Not for this VM: plugins are not called and nothing is approved.
    Ignored { reason: String },
    /// A built-in rule approves it without waking plugins.
    ApproveAtOnce { rule: String },
    /// Plugins prepare; approved when all of them approve.
    Prepare { affects_this_vm: bool },
}

/// Where the event is in its life, as the daemon last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lifecycle {
    Scheduled,
    Started,
    /// Gone from the document; recovery runs, then the event is forgotten.
    Ended {
        after_start: bool,
    },
}

/// The approval of the event at IMDS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Approval {
    /// Not every plugin has approved yet.
    Pending,
    /// Every plugin approved and the policy allows it: the POST is due (or being retried).
    /// Journaled before the POST, so a crash in between re-sends it (IMDS accepts repeats).
    Due { since_unix_ms: u64 },
    /// IMDS accepted the approval.
    Sent { at_unix_ms: u64 },
    /// Every plugin approved, and the event names other VMs too: the approval waits on the
    /// etcd barrier (`[coordination]`, docs/coordination.md) until one elected VM sends it
    /// for all. Stays so on the VMs that did not send it.
    Coordinating { since_unix_ms: u64 },
    /// Every plugin approved but the policy holds the approval back; the reason says why.
    Withheld { reason: String },
    /// Dry run: logged what would have been approved.
    DryRun { would: String },
    /// No approval will be sent: the deadline passed or the event started first.
    Abandoned { reason: String },
}

/// One plugin's progress on one event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginProgress {
    /// Prepare calls made so far (for this NotBefore: a reschedule starts again at 0).
    pub prepare_attempts: u32,
    /// The plugin approved its preparation.
    pub prepared: bool,
    /// Do not ask again before this instant (ms since the Unix epoch).
    pub retry_at_unix_ms: Option<u64>,
    /// The plugin was told the event started.
    pub told_started: bool,
    /// Recovery calls made so far.
    pub recovery_attempts: u32,
    /// The plugin was told the event ended (or recovery was given up).
    pub told_ended: bool,
    /// The last answer, for the log and status.
    pub last_answer: Option<Answer>,
}

/// A plugin's answer as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// "prepare", "started", "ended-after-start" or "ended-without-start".
    pub phase: String,
    /// "approve", "defer", or the failure kind ("budget-exceeded", "trap", …).
    pub outcome: String,
    /// The defer or failure reason; empty for approve.
    pub reason: String,
    pub at_unix_ms: u64,
    pub elapsed_ms: u64,
}

impl EventProgress {
    /// A new record for an event the tracker just reported.
    pub fn new(event: ScheduledEvent, handling: Handling, lifecycle: Lifecycle) -> Self {
        EventProgress {
            event,
            handling,
            lifecycle,
            approval: Approval::Pending,
            plugins: BTreeMap::new(),
        }
    }

    /// The plugin's progress, created on first use.
    pub fn plugin_mut(&mut self, name: &str) -> &mut PluginProgress {
        self.plugins.entry(name.to_owned()).or_default()
    }

    /// The plugin's progress, or the initial one.
    pub fn plugin(&self, name: &str) -> PluginProgress {
        self.plugins.get(name).cloned().unwrap_or_default()
    }

    /// Forgets preparation (the event was rescheduled): every plugin is asked again.
    pub fn restart_preparation(&mut self) {
        for progress in self.plugins.values_mut() {
            progress.prepared = false;
            progress.prepare_attempts = 0;
            progress.retry_at_unix_ms = None;
        }
        if !matches!(self.approval, Approval::Sent { .. }) {
            self.approval = Approval::Pending;
        }
    }
}
