//! One event's outcome record: what IMDS announced, what forewarn did, what happened. Built
//! up from the timeline's entries by [`OutcomeRecord`]'s methods, each taking its `now`.

use std::time::Duration;

use forewarn_events::{
    EventId, EventSource, EventStatus, EventType, ImdsTime, PluginName, ScheduledEvent,
};
use serde::{Deserialize, Serialize};

use super::host_move::HostChange;
use super::impact::{HeartbeatGap, Impact, Measured, MeasuredBy, RestartSeen};
use super::verdict::Verdict;
use crate::log_fields::millis;
use crate::state::{AnswerOutcome, CallPhase};
use crate::tracker::TransitionKind;

/// The version of the record's JSON form; a record of another version is not read.
pub const OUTCOME_SCHEMA: u32 = 1;
/// Most plugin calls a record lists (the first ones; the others are counted).
pub const RECORD_CALLS_MAX: usize = 64;
/// Most NotBefore changes and status changes a record lists.
pub const RECORD_CHANGES_MAX: usize = 32;
/// Most holds a record lists.
pub const RECORD_HOLDS_MAX: usize = 16;
/// The longest text (a reason, the description) kept, in bytes; longer is cut, marked `…`.
pub const RECORD_TEXT_MAX: usize = 512;
/// How long before the daemon saw the event Started a heartbeat gap still counts: a Freeze
/// that began just after IMDS said Started pauses the daemon before its next poll sees it.
pub const STARTED_LOOKBACK: Duration = Duration::from_secs(5);

/// Where the event stands, as the record tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case")]
pub enum RecordStage {
    /// Announced, not started.
    Announced,
    /// Started (the maintenance is under way).
    Started,
    /// Over after it started; plugins recover.
    Ended,
    /// Gone without having started.
    Canceled,
    /// Recovery done: the record is complete.
    Finished {
        /// Whether the event had started.
        started: bool,
    },
}

impl RecordStage {
    fn started(self) -> RecordStage {
        match self {
            RecordStage::Announced => RecordStage::Started,
            other => other,
        }
    }

    fn ended(self, after_start: bool) -> RecordStage {
        match (self, after_start) {
            (RecordStage::Finished { .. }, _) => self,
            (_, true) => RecordStage::Ended,
            (_, false) => RecordStage::Canceled,
        }
    }

    fn finished(self) -> RecordStage {
        let started = !matches!(self, RecordStage::Canceled | RecordStage::Announced);
        match self {
            RecordStage::Finished { .. } => self,
            _ => RecordStage::Finished { started },
        }
    }

    /// Whether the event is over (ended, canceled or finished).
    pub fn is_over(self) -> bool {
        !matches!(self, RecordStage::Announced | RecordStage::Started)
    }

    /// Whether the record is complete.
    pub fn is_finished(self) -> bool {
        matches!(self, RecordStage::Finished { .. })
    }
}

/// One event's outcome record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    /// [`OUTCOME_SCHEMA`].
    pub schema: u32,
    /// IMDS's EventId.
    pub event_id: EventId,
    /// IMDS's EventType.
    pub event_type: EventType,
    /// IMDS's EventType as sent.
    pub event_type_raw: String,
    /// Where the event stands (`"stage": "finished", "started": true`).
    #[serde(flatten)]
    pub stage: RecordStage,
    /// The outcome in one line, and its parts.
    pub verdict: Verdict,
    /// What IMDS announced.
    pub announced: Announced,
    /// What forewarn did.
    pub handled: Handled,
    /// What happened.
    pub happened: Happened,
}

/// What IMDS announced, and each change of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announced {
    /// `EventSource`.
    pub source: EventSource,
    /// `ResourceType`.
    pub resource_type: String,
    /// How many VMs `Resources` names.
    pub resources: usize,
    /// Whether this VM is one of them (an empty list names it too).
    pub names_this_vm: bool,
    /// `Description`, cut to [`RECORD_TEXT_MAX`] bytes.
    pub description: String,
    /// `DurationInSeconds` as last announced (None: unknown).
    pub duration_seconds: Option<i64>,
    /// `NotBefore` as first announced and at every reschedule.
    pub not_before: Vec<NotBeforeSeen>,
    /// Each status change the daemon saw.
    pub statuses: Vec<StatusSeen>,
    /// Changes beyond [`RECORD_CHANGES_MAX`], not listed.
    #[serde(default)]
    pub changes_dropped: u32,
}

/// A NotBefore, as announced at `seen_unix_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotBeforeSeen {
    /// When the daemon saw it (IMDS's clock).
    pub seen_unix_ms: ImdsTime,
    /// The NotBefore (None: blank, the event may start at any moment).
    pub not_before_unix_ms: Option<ImdsTime>,
}

/// A status, as seen at `seen_unix_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusSeen {
    /// When the daemon saw it (IMDS's clock).
    pub seen_unix_ms: ImdsTime,
    /// What changed.
    pub transition: TransitionKind,
    /// The status IMDS listed (None once the event is gone).
    pub status: Option<EventStatus>,
}

/// What forewarn did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handled {
    /// When the daemon first saw the event (IMDS's clock).
    pub first_seen_unix_ms: ImdsTime,
    /// The policy's handling, in words ("prepare (this VM)", "ignored: …").
    pub handling: String,
    /// When preparation was due to start, for an event announced further ahead than the
    /// lead time.
    pub preparation_starts_unix_ms: Option<ImdsTime>,
    /// Each plugin call, in order.
    pub calls: Vec<CallRecord>,
    /// Calls beyond [`RECORD_CALLS_MAX`], not listed.
    pub calls_dropped: u32,
    /// When every plugin asked to prepare had approved (None: not, or none was asked).
    pub prepared_unix_ms: Option<ImdsTime>,
    /// The safety margin before NotBefore passed with plugins still preparing.
    pub preparing_late: Option<LateNote>,
    /// Why no approval was sent (`TimelineEntry::NotApproved`), each time it was said.
    pub holds: Vec<HoldRecord>,
    /// The approval.
    pub approval: ApprovalRecord,
}

/// One plugin call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The plugin.
    pub plugin: PluginName,
    /// Prepare, started, or a recovery.
    pub phase: CallPhase,
    /// Which call of the plugin for this phase, from 1.
    pub attempt: u32,
    /// When it was called (IMDS's clock).
    pub called_unix_ms: ImdsTime,
    /// Its answer (None while in flight).
    pub answer: Option<CallAnswer>,
}

/// A plugin's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallAnswer {
    /// Approve, defer, or the failure.
    pub outcome: AnswerOutcome,
    /// Why, cut to [`RECORD_TEXT_MAX`] bytes.
    pub reason: String,
    /// How long the call took, in milliseconds.
    pub elapsed_ms: u64,
}

/// Preparation ran past the safety margin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateNote {
    /// When (IMDS's clock).
    pub at_unix_ms: ImdsTime,
    /// The plugins still preparing.
    pub still_preparing: Vec<PluginName>,
}

/// A hold: every plugin approved, but no approval was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRecord {
    /// When (IMDS's clock).
    pub at_unix_ms: ImdsTime,
    /// Why, cut to [`RECORD_TEXT_MAX`] bytes.
    pub reason: String,
}

/// Where the approval stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ApprovalRecord {
    /// No approval accepted (yet).
    NotSent {
        /// POSTs that failed.
        failed_posts: u32,
    },
    /// IMDS accepted the approval.
    Accepted {
        /// When (IMDS's clock).
        at_unix_ms: ImdsTime,
        /// How long before the NotBefore then announced, in milliseconds (None: blank
        /// NotBefore, or accepted after it).
        before_not_before_ms: Option<u64>,
        /// POSTs that failed before.
        failed_posts: u32,
    },
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Happened {
    /// When the daemon saw the event Started (IMDS's clock).
    pub started_unix_ms: Option<ImdsTime>,
    /// When it saw the event gone.
    pub ended_unix_ms: Option<ImdsTime>,
    /// When recovery was complete.
    pub finished_unix_ms: Option<ImdsTime>,
    /// The largest heartbeat gap while Started.
    pub largest_gap: Option<HeartbeatGap>,
    /// What the daemon found about its own restart during the event, if it restarted.
    pub restart: Option<RestartSeen>,
    /// After a reboot during the event, whether the VM came back on another host (where
    /// IMDS tells it: a dedicated host's `host.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostChange>,
    /// The measured impact.
    pub impact: Impact,
}

impl OutcomeRecord {
    /// A record for `event` as first seen at `now`, on the VM `vm_name`.
    pub fn new(event: &ScheduledEvent, vm_name: &str, now: ImdsTime) -> OutcomeRecord {
        let mut record = OutcomeRecord {
            schema: OUTCOME_SCHEMA,
            event_id: event.id.clone(),
            event_type: event.event_type,
            event_type_raw: cut(&event.event_type_raw),
            stage: RecordStage::Announced,
            verdict: Verdict::default(),
            announced: Announced {
                source: event.source,
                resource_type: cut(&event.resource_type),
                resources: event.resources.len(),
                names_this_vm: event.resources.is_empty() || event.names_vm(vm_name),
                description: cut(&event.description),
                duration_seconds: event.duration_seconds,
                not_before: Vec::new(),
                statuses: Vec::new(),
                changes_dropped: 0,
            },
            handled: Handled {
                first_seen_unix_ms: now,
                handling: String::new(),
                preparation_starts_unix_ms: None,
                calls: Vec::new(),
                calls_dropped: 0,
                prepared_unix_ms: None,
                preparing_late: None,
                holds: Vec::new(),
                approval: ApprovalRecord::NotSent { failed_posts: 0 },
            },
            happened: Happened {
                started_unix_ms: None,
                ended_unix_ms: None,
                finished_unix_ms: None,
                largest_gap: None,
                restart: None,
                host: None,
                impact: Impact::Pending,
            },
        };
        record.push_not_before(event, now);
        record
    }

    /// The NotBefore last announced.
    pub fn not_before(&self) -> Option<ImdsTime> {
        self.announced
            .not_before
            .last()
            .and_then(|seen| seen.not_before_unix_ms)
    }

    /// IMDS listed the event again, changed (`transition`), at `now`.
    pub fn transition(
        &mut self,
        event: &ScheduledEvent,
        transition: TransitionKind,
        now: ImdsTime,
    ) {
        let status = match transition {
            TransitionKind::EndedAfterStart | TransitionKind::EndedWithoutStart => None,
            _ => Some(event.status),
        };
        self.push_change(|announced| {
            announced.statuses.push(StatusSeen {
                seen_unix_ms: now,
                transition,
                status,
            });
        });
        match transition {
            TransitionKind::Scheduled => {}
            TransitionKind::Rescheduled => {
                self.announced.resources = event.resources.len();
                self.announced.duration_seconds = event.duration_seconds;
                self.push_not_before(event, now);
            }
            TransitionKind::Started => {
                self.stage = self.stage.started();
                self.happened.started_unix_ms.get_or_insert(now);
            }
            TransitionKind::EndedAfterStart => self.end(true, now),
            TransitionKind::EndedWithoutStart => self.end(false, now),
        }
    }

    fn push_not_before(&mut self, event: &ScheduledEvent, now: ImdsTime) {
        let not_before = event.not_before_time();
        if self.not_before() == not_before && !self.announced.not_before.is_empty() {
            return;
        }
        self.push_change(|announced| {
            announced.not_before.push(NotBeforeSeen {
                seen_unix_ms: now,
                not_before_unix_ms: not_before,
            });
        });
    }

    /// Adds a change to the lists, or counts it once they are full.
    fn push_change(&mut self, push: impl FnOnce(&mut Announced)) {
        let listed = self.announced.not_before.len() + self.announced.statuses.len();
        if listed >= RECORD_CHANGES_MAX * 2 {
            self.announced.changes_dropped += 1;
            return;
        }
        push(&mut self.announced);
    }

    fn end(&mut self, after_start: bool, now: ImdsTime) {
        self.stage = self.stage.ended(after_start);
        self.happened.ended_unix_ms.get_or_insert(now);
        self.happened.impact = self.final_impact();
    }

    /// The operating system's shutdown was let go on at `now`: for forewarn's own Shutdown
    /// event, that is its start (nothing at IMDS says so).
    pub fn shutdown_went_on(&mut self, now: ImdsTime) {
        self.stage = self.stage.started();
        self.happened.started_unix_ms.get_or_insert(now);
    }

    /// The policy's handling.
    pub fn handling(&mut self, handling: &str) {
        self.handled.handling = cut(handling);
    }

    /// Preparation starts later, at `at`.
    pub fn preparation_waits(&mut self, at: ImdsTime) {
        self.handled.preparation_starts_unix_ms = Some(at);
    }

    /// A plugin was called.
    pub fn called(&mut self, plugin: &PluginName, phase: CallPhase, attempt: u32, now: ImdsTime) {
        // A plugin whose turn came after the others approved (`after`): the event was not
        // prepared when they had; it is when this one approves too.
        let new_turn = phase == CallPhase::Prepare
            && !self
                .handled
                .calls
                .iter()
                .any(|call| call.phase == CallPhase::Prepare && call.plugin == *plugin);
        if new_turn && matches!(self.handled.approval, ApprovalRecord::NotSent { .. }) {
            self.handled.prepared_unix_ms = None;
        }
        if self.handled.calls.len() >= RECORD_CALLS_MAX {
            self.handled.calls_dropped += 1;
            return;
        }
        self.handled.calls.push(CallRecord {
            plugin: plugin.clone(),
            phase,
            attempt,
            called_unix_ms: now,
            answer: None,
        });
    }

    /// A plugin answered; when every plugin asked to prepare has approved, the event is
    /// prepared (at the first such answer).
    pub fn answered(
        &mut self,
        plugin: &PluginName,
        phase: CallPhase,
        answer: CallAnswer,
        now: ImdsTime,
    ) {
        let approved = answer.outcome == AnswerOutcome::Approve;
        if let Some(call) = self
            .handled
            .calls
            .iter_mut()
            .rev()
            .find(|call| call.plugin == *plugin && call.phase == phase && call.answer.is_none())
        {
            call.answer = Some(CallAnswer {
                reason: cut(&answer.reason),
                ..answer
            });
        }
        if phase == CallPhase::Prepare
            && approved
            && self.handled.prepared_unix_ms.is_none()
            && !self.stage.is_over()
            && self.every_prepare_call_approved()
        {
            self.handled.prepared_unix_ms = Some(now);
        }
    }

    /// Whether each plugin's last prepare call was answered with an approval.
    fn every_prepare_call_approved(&self) -> bool {
        let prepare = || {
            self.handled
                .calls
                .iter()
                .filter(|call| call.phase == CallPhase::Prepare)
        };
        prepare().all(|call| {
            let last = prepare().rev().find(|other| other.plugin == call.plugin);
            last.and_then(|last| last.answer.as_ref())
                .is_some_and(|answer| answer.outcome == AnswerOutcome::Approve)
        })
    }

    /// The safety margin passed with `still_preparing` not done.
    pub fn preparing_late(&mut self, still_preparing: &[PluginName], now: ImdsTime) {
        self.handled.preparing_late.get_or_insert_with(|| LateNote {
            at_unix_ms: now,
            still_preparing: still_preparing.to_vec(),
        });
    }

    /// No approval is sent, for `reason` (said again is not listed again).
    pub fn held(&mut self, reason: &str, now: ImdsTime) {
        let reason = cut(reason);
        let holds = &mut self.handled.holds;
        if holds.last().is_some_and(|last| last.reason == reason) || holds.len() >= RECORD_HOLDS_MAX
        {
            return;
        }
        holds.push(HoldRecord {
            at_unix_ms: now,
            reason,
        });
    }

    /// IMDS accepted the approval at `now`.
    pub fn approved(&mut self, now: ImdsTime) {
        let ApprovalRecord::NotSent { failed_posts } = self.handled.approval else {
            return;
        };
        let before_not_before_ms = self
            .not_before()
            .and_then(|not_before| not_before.checked_duration_since(now))
            .map(millis);
        self.handled.approval = ApprovalRecord::Accepted {
            at_unix_ms: now,
            before_not_before_ms,
            failed_posts,
        };
    }

    /// An approval POST failed.
    pub fn approval_failed(&mut self) {
        if let ApprovalRecord::NotSent { failed_posts } = &mut self.handled.approval {
            *failed_posts += 1;
        }
    }

    /// Recovery is done.
    pub fn finished(&mut self, now: ImdsTime) {
        if !self.stage.is_over() {
            self.happened.ended_unix_ms.get_or_insert(now);
            self.happened.impact = self.final_impact();
        }
        self.stage = self.stage.finished();
        self.happened.finished_unix_ms.get_or_insert(now);
    }

    /// Whether a heartbeat gap falls in the time the event was Started (or just before the
    /// daemon saw it so, [`STARTED_LOOKBACK`]).
    pub fn covers(&self, gap: &HeartbeatGap) -> bool {
        let Some(started) = self.happened.started_unix_ms else {
            return false;
        };
        let opens = started.saturating_sub(STARTED_LOOKBACK);
        let open_until = self.happened.ended_unix_ms.unwrap_or(ImdsTime::MAX);
        gap.ended_unix_ms >= opens && gap.began() <= open_until
    }

    /// A heartbeat gap while Started: kept when it is the largest.
    pub fn gap(&mut self, gap: HeartbeatGap) {
        let larger = self
            .happened
            .largest_gap
            .is_none_or(|largest| gap.length_ms > largest.length_ms);
        if larger {
            self.happened.largest_gap = Some(gap);
            if self.stage.is_over() {
                self.happened.impact = self.final_impact();
            }
        }
    }

    /// Whether the daemon's restart may have been this event's reboot: a Reboot, Redeploy or
    /// the operating system's own Shutdown approved or started and not over.
    pub fn may_have_rebooted(&self) -> bool {
        let reboots = matches!(
            self.event_type,
            EventType::Reboot | EventType::Redeploy | EventType::Shutdown
        );
        let under_way = self.stage == RecordStage::Started
            || (self.stage == RecordStage::Announced
                && matches!(self.handled.approval, ApprovalRecord::Accepted { .. }));
        reboots && under_way
    }

    /// What the daemon found at its restart during the event.
    pub fn restarted(&mut self, restart: RestartSeen) {
        self.happened.restart = Some(restart);
    }

    /// Whether the daemon found a new boot when it restarted during the event.
    pub fn rebooted_during(&self) -> bool {
        matches!(self.happened.restart, Some(RestartSeen::Rebooted(_)))
    }

    /// Whether the reboot during the event brought the VM back on another host.
    pub fn host_after_reboot(&mut self, change: HostChange) {
        self.happened.host = Some(change);
    }

    /// The impact once the event is over, from what was measured.
    fn final_impact(&self) -> Impact {
        if self.happened.started_unix_ms.is_none() {
            return Impact::NotMeasured {
                why: "the event did not start".into(),
            };
        }
        let pause = self.happened.largest_gap.map(|gap| {
            Measured::new(
                gap.length_ms,
                gap.precision_ms,
                MeasuredBy::LargestHeartbeatGap,
            )
        });
        match self.event_type {
            EventType::Reboot | EventType::Redeploy | EventType::Shutdown => {
                match &self.happened.restart {
                    Some(RestartSeen::Rebooted(downtime)) => Impact::Downtime(Measured::new(
                        downtime.length_ms,
                        downtime.precision_ms,
                        MeasuredBy::LastHeartbeatToStart,
                    )),
                    Some(RestartSeen::Unknown { why }) => Impact::NotMeasured {
                        why: format!("downtime not measured: {why}"),
                    },
                    Some(RestartSeen::SameBoot) | None => match pause {
                        Some(pause) => Impact::Pause(pause),
                        None => Impact::NotMeasured {
                            why: "no reboot seen: the daemon ran through the event in one boot"
                                .into(),
                        },
                    },
                }
            }
            EventType::Preempt | EventType::Terminate => Impact::NotMeasured {
                why: "the VM is evicted or deleted: nothing inside it is left to measure".into(),
            },
            EventType::Freeze | EventType::Unknown => match pause {
                Some(pause) => Impact::Pause(pause),
                None => Impact::NoPauseSeen {
                    threshold_ms: millis(super::impact::PAUSE_THRESHOLD_FLOOR),
                },
            },
        }
    }
}

/// `text` cut to [`RECORD_TEXT_MAX`] bytes at a character boundary, marked with `…`.
fn cut(text: &str) -> String {
    if text.len() <= RECORD_TEXT_MAX {
        return text.to_owned();
    }
    let mut end = RECORD_TEXT_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
