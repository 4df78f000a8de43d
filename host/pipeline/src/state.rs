//! The daemon's durable state: the tracker plus, per event, how far each plugin got and
//! whether the event was approved. Journaled before every action, so a restart resumes.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use forewarn_events::{EventId, ImdsTime, PluginName, ScheduledEvent};
use serde::{Deserialize, Serialize};

use crate::log_messages;
use crate::policy::WithholdRule;
use crate::roster::FailurePolicy;
use crate::tracker::Tracker;

/// Everything the pipeline must not forget across a restart. Every field has a default,
/// so a journal written before a field existed still loads (see `daemon::journal_schema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DaemonState {
    /// What the tracker last saw of each listed event (shared with the last journaled
    /// state until a document changes it).
    pub tracker: Arc<Tracker>,
    /// Events being handled, by EventId. Each is shared with the last journaled state
    /// until it changes (`Arc::make_mut`), so a round copies and journals only the events
    /// it changed.
    pub events: BTreeMap<EventId, Arc<EventProgress>>,
}

/// Everything the daemon knows and decided about one event, from its first listing until
/// recovery is done; journaled, so a restart resumes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventProgress {
    /// The event as last listed.
    pub event: ScheduledEvent,
    /// What the policy decided when the event first appeared; kept for the event's life.
    pub handling: Handling,
    /// Scheduled, started or ended, as the documents showed it.
    pub lifecycle: Lifecycle,
    /// Where the approval of this event at IMDS stands.
    pub approval: Approval,
    /// Per plugin (by name), what it was asked and answered.
    pub plugins: BTreeMap<PluginName, PluginProgress>,
    /// When the first prepare calls were planned (ms since the Unix epoch); None while the
    /// event waits for `prepare-lead-time`. Kept across a reschedule: plugins that already
    /// hold something are asked again at once.
    #[serde(default)]
    pub preparing_since_unix_ms: Option<ImdsTime>,
    /// The id listed again (or rescheduled off this VM) while this record's recovery runs:
    /// once recovery is done the event is handled afresh as listed here, instead of being
    /// forgotten. Absent in journals written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relisted: Option<ScheduledEvent>,
}

/// What the policy decided to do with the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Handling {
    /// Not for this VM: plugins are not called and nothing is approved.
    Ignored {
        /// Why, in words ("not listed for this VM", an ignore rule, …).
        reason: String,
    },
    /// A built-in rule approves it without waking plugins.
    ApproveAtOnce {
        /// The rule that matched, as the policy names it.
        rule: String,
    },
    /// Plugins prepare; approved when all of them approve.
    Prepare {
        /// Whether this VM is among the event's resources; false when the event names only
        /// other VMs and the policy still prepares for it.
        affects_this_vm: bool,
    },
}

/// Where the event is in its life, as the daemon last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lifecycle {
    /// Listed with EventStatus Scheduled: the maintenance has not begun; plugins prepare.
    Scheduled,
    /// Listed with EventStatus Started: the maintenance is under way.
    Started,
    /// Gone from the document; recovery runs, then the event is forgotten.
    Ended {
        /// Whether the daemon saw the event Started before it went (the maintenance
        /// happened); false when it vanished while Scheduled (cancelled, or missed).
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
    Due {
        /// When the approval became due, in milliseconds since the Unix epoch.
        since_unix_ms: ImdsTime,
    },
    /// IMDS accepted the approval.
    Sent {
        /// When IMDS accepted it, in milliseconds since the Unix epoch.
        at_unix_ms: ImdsTime,
    },
    /// Every plugin approved, and the event names other VMs too: the approval waits on the
    /// etcd barrier (`[coordination]`, docs/coordination.md) until one elected VM sends it
    /// for all. Stays so on the VMs that did not send it. Under a disruption budget
    /// (`coordination.disruption-budget`), an event naming only this VM waits here for a
    /// slot.
    Coordinating {
        /// When this VM joined the barrier, in milliseconds since the Unix epoch.
        since_unix_ms: ImdsTime,
    },
    /// Every plugin approved but the policy holds the approval back; the reason says why.
    Withheld {
        /// The policy's reason, in words.
        reason: String,
        /// The policy rule that holds it back.
        #[serde(default)]
        rule: WithholdRule,
    },
    /// Dry run: logged what would have been approved.
    DryRun {
        /// What would have been sent, in words (the events the POST would approve).
        would: String,
    },
    /// No approval will be sent: the deadline passed or the event started first.
    Abandoned {
        /// Why no approval will be sent, in words.
        reason: String,
    },
    /// Not from IMDS (the operating system's own shutdown): there is nothing to approve;
    /// every plugin prepared at this instant and the shutdown was let go on.
    NotAtImds {
        /// When the last plugin prepared, in milliseconds since the Unix epoch.
        prepared_at_unix_ms: ImdsTime,
    },
}

/// Where an approval is, without its details: what `/status` and the status page key on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalKind {
    /// [`Approval::Pending`].
    #[default]
    Pending,
    /// [`Approval::Due`].
    Due,
    /// [`Approval::Sent`].
    Sent,
    /// [`Approval::Coordinating`].
    Coordinating,
    /// [`Approval::Withheld`].
    Withheld,
    /// [`Approval::DryRun`].
    DryRun,
    /// [`Approval::Abandoned`].
    Abandoned,
    /// [`Approval::NotAtImds`].
    NotAtImds,
}

impl Approval {
    /// Which kind of approval state this is.
    pub fn kind(&self) -> ApprovalKind {
        match self {
            Approval::Pending => ApprovalKind::Pending,
            Approval::Due { .. } => ApprovalKind::Due,
            Approval::Sent { .. } => ApprovalKind::Sent,
            Approval::Coordinating { .. } => ApprovalKind::Coordinating,
            Approval::Withheld { .. } => ApprovalKind::Withheld,
            Approval::DryRun { .. } => ApprovalKind::DryRun,
            Approval::Abandoned { .. } => ApprovalKind::Abandoned,
            Approval::NotAtImds { .. } => ApprovalKind::NotAtImds,
        }
    }
}

/// One plugin's progress on one event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginProgress {
    /// Prepare calls made so far (for this NotBefore: a reschedule starts again at 0).
    pub prepare_attempts: u32,
    /// The plugin approved its preparation.
    pub prepared: bool,
    /// Do not ask again before this instant (ms since the Unix epoch).
    pub retry_at_unix_ms: Option<ImdsTime>,
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
    /// The phase the plugin was called for.
    pub phase: CallPhase,
    /// What the call came to.
    pub outcome: AnswerOutcome,
    /// The defer or failure reason; empty for approve.
    #[serde(default)]
    pub reason: String,
    /// When the answer arrived (ms since the Unix epoch).
    pub at_unix_ms: ImdsTime,
    /// How long the call took.
    #[serde(default)]
    pub elapsed_ms: u64,
}

impl Answer {
    /// The audit trail: one structured line per plugin decision; a failed prepare call says
    /// whether it counted as a defer or, under `on-failure = "approve"`, as consent.
    pub fn log(&self, event_id: &EventId, plugin: &PluginName, on_failure: FailurePolicy) {
        if self.outcome.is_failure() {
            let consent = self.phase == CallPhase::Prepare && on_failure == FailurePolicy::Approve;
            let (decision, message) = match consent {
                true => ("approve", log_messages::PLUGIN_CALL_FAILED_CONSENT),
                false => ("defer", log_messages::PLUGIN_CALL_FAILED),
            };
            tracing::warn!(
                event_id = event_id.as_str(), plugin = plugin.as_str(), phase = %self.phase, decision,
                failure = %self.outcome, reason = %self.reason, elapsed_ms = self.elapsed_ms,
                "{message}"
            );
            return;
        }
        tracing::info!(
            event_id = event_id.as_str(), plugin = plugin.as_str(), phase = %self.phase, decision = %self.outcome,
            reason = %self.reason, elapsed_ms = self.elapsed_ms, "{}",
            log_messages::PLUGIN_DECISION
        );
    }
}

/// The phase of a plugin call: the WIT `phase`, as journaled, logged and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallPhase {
    /// Prepare for the event; approve when ready.
    Prepare,
    /// The event started.
    Started,
    /// The event is over, after it started: recover.
    EndedAfterStart,
    /// The event is gone without having started (canceled): undo the preparation.
    EndedWithoutStart,
}

impl CallPhase {
    /// The name in logs, metrics and the journal ("prepare", "ended-after-start", …).
    pub fn as_str(self) -> &'static str {
        match self {
            CallPhase::Prepare => "prepare",
            CallPhase::Started => "started",
            CallPhase::EndedAfterStart => "ended-after-start",
            CallPhase::EndedWithoutStart => "ended-without-start",
        }
    }

    /// Whether this is a recovery phase (the event ended).
    pub fn is_recovery(self) -> bool {
        matches!(
            self,
            CallPhase::EndedAfterStart | CallPhase::EndedWithoutStart
        )
    }
}

impl fmt::Display for CallPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a plugin call came to: a decision, or the way it failed (counted as a defer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerOutcome {
    /// The plugin is ready.
    Approve,
    /// The plugin needs more time.
    Defer,
    /// The call ran past its budget and was cut off.
    BudgetExceeded,
    /// The plugin went past its memory limit.
    MemoryExceeded,
    /// The plugin trapped (a panic, an unreachable, a bad host call).
    Trap,
    /// The plugin could not be instantiated for the call.
    Instantiation,
}

impl AnswerOutcome {
    /// The name in logs, metrics and the journal ("approve", "budget-exceeded", …).
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerOutcome::Approve => "approve",
            AnswerOutcome::Defer => "defer",
            AnswerOutcome::BudgetExceeded => "budget-exceeded",
            AnswerOutcome::MemoryExceeded => "memory-exceeded",
            AnswerOutcome::Trap => "trap",
            AnswerOutcome::Instantiation => "instantiation",
        }
    }

    /// Whether the call failed (and so counts as a defer).
    pub fn is_failure(self) -> bool {
        !matches!(self, AnswerOutcome::Approve | AnswerOutcome::Defer)
    }
}

impl fmt::Display for AnswerOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Handling {
    /// One sentence for the timeline: "plugins prepare this VM", "ignored: …".
    pub fn sentence(&self) -> String {
        match self {
            Handling::Ignored { reason } => format!("ignored: {reason}"),
            Handling::ApproveAtOnce { rule } => format!("approve at once (rule: {rule})"),
            Handling::Prepare {
                affects_this_vm: true,
            } => "plugins prepare this VM".into(),
            Handling::Prepare {
                affects_this_vm: false,
            } => "plugins are told (the event names other VMs, not this one)".into(),
        }
    }

    /// A short label for the status table: "prepare (this VM)", "ignored: …".
    pub fn label(&self) -> String {
        match self {
            Handling::Ignored { reason } => format!("ignored: {reason}"),
            Handling::ApproveAtOnce { rule } => format!("approve at once ({rule})"),
            Handling::Prepare {
                affects_this_vm: true,
            } => "prepare (this VM)".to_owned(),
            Handling::Prepare {
                affects_this_vm: false,
            } => "prepare (other VMs)".to_owned(),
        }
    }
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
            preparing_since_unix_ms: None,
            relisted: None,
        }
    }

    /// The plugin's progress, created on first use.
    pub fn plugin_mut(&mut self, name: &PluginName) -> &mut PluginProgress {
        self.plugins.entry(name.clone()).or_default()
    }

    /// The plugin's progress, or the initial one.
    pub fn plugin(&self, name: &PluginName) -> PluginProgress {
        self.plugins.get(name).cloned().unwrap_or_default()
    }

    /// Forgets the preparation of the plugins `again` picks (the event was rescheduled):
    /// they are asked again. An approval IMDS accepted stays sent unless a plugin is asked
    /// again (it is then sent again once they approve); any other approval is pending again.
    /// Returns whether a plugin is asked again.
    pub fn restart_preparation(&mut self, again: impl Fn(&PluginName) -> bool) -> bool {
        let mut asked_again = false;
        for (name, progress) in &mut self.plugins {
            if !again(name) {
                continue;
            }
            asked_again = true;
            progress.prepared = false;
            progress.prepare_attempts = 0;
            progress.retry_at_unix_ms = None;
        }
        if asked_again || !matches!(self.approval, Approval::Sent { .. }) {
            self.approval = Approval::Pending;
        }
        asked_again
    }

    /// The event started, as `event` lists it; an approval not yet sent is abandoned.
    pub fn started(&mut self, event: ScheduledEvent) {
        self.event = event;
        self.lifecycle = Lifecycle::Started;
        if matches!(self.approval, Approval::Pending | Approval::Due { .. }) {
            self.approval = Approval::Abandoned {
                reason: "the event started before it was approved".into(),
            };
        }
    }

    /// The event ended (after its start, or so it most likely did: [`missed_the_start`]):
    /// recovery starts now, and an approval not yet sent is abandoned.
    pub fn ended(&mut self, event: ScheduledEvent, after_start: bool, now: ImdsTime) {
        let after_start = after_start || missed_the_start(self, now);
        self.event = event;
        self.lifecycle = Lifecycle::Ended { after_start };
        // A deferral's wait was for preparation: recovery starts now, not when it ends.
        for own in self.plugins.values_mut() {
            own.retry_at_unix_ms = None;
        }
        if matches!(self.approval, Approval::Pending | Approval::Due { .. }) {
            self.approval = Approval::Abandoned {
                reason: "the event ended before it was approved".into(),
            };
        }
    }

    /// Marks the record ended without a start, so the plugins that prepared under its old plan
    /// recover, and keeps `relisted` (the event under its new plan) for afterwards.
    pub fn recover_before_relisting(&mut self, relisted: ScheduledEvent, reason: String) {
        tracing::info!(
            event_id = %self.event.id,
            %reason,
            "plugins prepared for the event's previous plan; they recover before it is handled again"
        );
        self.lifecycle = Lifecycle::Ended { after_start: false };
        for own in self.plugins.values_mut() {
            own.retry_at_unix_ms = None;
        }
        if matches!(
            self.approval,
            Approval::Pending | Approval::Due { .. } | Approval::Coordinating { .. }
        ) {
            self.approval = Approval::Abandoned { reason };
        }
        self.relisted = Some(relisted);
    }

    /// Whether the record is recovering (the event is gone, plugins are told).
    pub fn is_ended(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Ended { .. })
    }

    /// Whether any plugin was asked to prepare (or told about) the event.
    pub fn plugins_were_asked(&self) -> bool {
        self.plugins
            .values()
            .any(|own| own.prepare_attempts > 0 || own.prepared || own.told_started)
    }
}

/// Whether an event that vanished while the daemon last saw it Scheduled most likely ran:
/// our approval was sent (or was due: a crash between the POST and the journal write leaves
/// it so), or its NotBefore had passed. Either way the daemon missed the Started document
/// (it was down — perhaps rebooted by this very event — or IMDS was unreadable for longer
/// than the event lasted). A cancel happens before the start, so recovering as after a
/// start is the safe reading: plugins restore and restart.
fn missed_the_start(progress: &EventProgress, now: ImdsTime) -> bool {
    let approved = matches!(
        progress.approval,
        Approval::Sent { .. } | Approval::Due { .. }
    );
    let past_not_before = progress
        .event
        .not_before_time()
        .is_some_and(|not_before| not_before <= now);
    if approved || past_not_before {
        tracing::info!(
            event_id = %progress.event.id,
            approved,
            past_not_before,
            "event vanished without being seen Started; recovering as after a start"
        );
    }
    approved || past_not_before
}
