//! An outcome record's verdict: "prepared 41 s before NotBefore; approved 12 min early;
//! paused 3.2 s, announced ≤ 9 s" — typed parts, and the line they make.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::host_move::HostChange;
use super::impact::{Impact, MeasuredBy};
use super::record::{ApprovalRecord, OutcomeRecord};
use crate::log_fields::millis;
use crate::state::CallPhase;

/// How preparation went, against the time Azure could act (NotBefore; when it was blank,
/// the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "preparation", rename_all = "kebab-case")]
pub enum PreparationOutcome {
    /// Still preparing (or not started preparing).
    Pending,
    /// Every plugin approved before NotBefore (this many milliseconds; None when NotBefore
    /// was blank and the event has not started).
    InTime {
        /// Milliseconds between the last approval and NotBefore (or the start).
        before_ms: Option<u64>,
    },
    /// Every plugin approved, after NotBefore (or after the event started).
    Late {
        /// Milliseconds past it.
        after_ms: u64,
    },
    /// The event started (or ended) before every plugin approved.
    NotPrepared,
    /// No plugin was asked to prepare (ignored, approved at once, none subscribed).
    NotNeeded,
}

impl PreparationOutcome {
    /// The label of the `forewarn_event_preparations_total` metric.
    pub fn as_str(self) -> &'static str {
        match self {
            PreparationOutcome::Pending => "pending",
            PreparationOutcome::InTime { .. } => "in-time",
            PreparationOutcome::Late { .. } => "late",
            PreparationOutcome::NotPrepared => "not-prepared",
            PreparationOutcome::NotNeeded => "not-needed",
        }
    }

    /// The labels that are final, for the metric (every one but `pending`).
    pub const FINAL_LABELS: [&'static str; 4] = ["in-time", "late", "not-prepared", "not-needed"];
}

/// One part of the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "part", rename_all = "kebab-case")]
pub enum VerdictPart {
    /// How preparation went.
    Preparation(PreparationOutcome),
    /// The approval was accepted this long before NotBefore.
    ApprovedEarly {
        /// Milliseconds before NotBefore.
        early_ms: u64,
    },
    /// The approval was accepted at or after NotBefore, or with NotBefore blank.
    Approved,
    /// No approval was sent: why (the last hold).
    NotApproved {
        /// The hold's reason, or what else kept it.
        reason: String,
    },
    /// The event was canceled before it started.
    Canceled,
    /// Announced, not started yet.
    NotStartedYet,
    /// Started, not over yet.
    UnderWay,
    /// A pause was measured.
    Paused {
        /// Milliseconds.
        measured_ms: u64,
        /// ± milliseconds.
        precision_ms: u64,
        /// `DurationInSeconds` as announced.
        announced_seconds: Option<i64>,
    },
    /// A downtime was measured.
    Down {
        /// Milliseconds.
        measured_ms: u64,
        /// ± milliseconds.
        precision_ms: u64,
        /// `DurationInSeconds` as announced.
        announced_seconds: Option<i64>,
    },
    /// The heartbeat saw no pause.
    NoPauseSeen {
        /// The smallest gap that counts, in milliseconds.
        threshold_ms: u64,
        /// `DurationInSeconds` as announced.
        announced_seconds: Option<i64>,
    },
    /// The impact could not be measured.
    ImpactNotMeasured {
        /// Why.
        why: String,
    },
    /// The VM came back from its reboot on another dedicated host (IMDS's `host.id`).
    MovedHost {
        /// `host.id` after the reboot.
        to: String,
    },
}

/// The verdict: its parts and the line they read as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The line: the parts, joined by "; ".
    pub text: String,
    /// The parts.
    pub parts: Vec<VerdictPart>,
}

impl Verdict {
    /// The verdict of `record` as it stands.
    pub fn of(record: &OutcomeRecord) -> Verdict {
        let mut parts = vec![VerdictPart::Preparation(preparation_of(record))];
        if let Some(approval) = approval_part(record) {
            parts.push(approval);
        }
        parts.push(impact_part(record));
        if let Some(HostChange::Moved { to, .. }) = &record.happened.host {
            parts.push(VerdictPart::MovedHost { to: to.clone() });
        }
        let text = parts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        Verdict { text, parts }
    }

    /// The preparation part.
    pub fn preparation(&self) -> PreparationOutcome {
        self.parts
            .iter()
            .find_map(|part| match part {
                VerdictPart::Preparation(outcome) => Some(*outcome),
                _ => None,
            })
            .unwrap_or(PreparationOutcome::Pending)
    }
}

fn preparation_of(record: &OutcomeRecord) -> PreparationOutcome {
    let asked = record
        .handled
        .calls
        .iter()
        .any(|call| call.phase == CallPhase::Prepare);
    // The time Azure could act: NotBefore, or the start when NotBefore was blank.
    let deadline = record.not_before().or(record.happened.started_unix_ms);
    match record.handled.prepared_unix_ms {
        Some(prepared) => match deadline {
            Some(deadline) if prepared > deadline => PreparationOutcome::Late {
                after_ms: millis(prepared.duration_since(deadline)),
            },
            Some(deadline) => PreparationOutcome::InTime {
                before_ms: Some(millis(deadline.duration_since(prepared))),
            },
            None => PreparationOutcome::InTime { before_ms: None },
        },
        None if !asked && matches!(record.handled.approval, ApprovalRecord::Accepted { .. }) => {
            PreparationOutcome::NotNeeded
        }
        None if record.happened.started_unix_ms.is_none() && !record.stage.is_over() => {
            PreparationOutcome::Pending
        }
        None if asked => PreparationOutcome::NotPrepared,
        None => PreparationOutcome::NotNeeded,
    }
}

fn approval_part(record: &OutcomeRecord) -> Option<VerdictPart> {
    match &record.handled.approval {
        ApprovalRecord::Accepted {
            before_not_before_ms: Some(early_ms),
            ..
        } => Some(VerdictPart::ApprovedEarly {
            early_ms: *early_ms,
        }),
        ApprovalRecord::Accepted { .. } => Some(VerdictPart::Approved),
        ApprovalRecord::NotSent { failed_posts } => {
            if let Some(hold) = record.handled.holds.last() {
                return Some(VerdictPart::NotApproved {
                    reason: hold.reason.clone(),
                });
            }
            if !record.announced.names_this_vm {
                return None;
            }
            let reason = if *failed_posts > 0 {
                format!("{failed_posts} approval POSTs failed")
            } else if record.announced.resources > 1 {
                // With [coordination], one VM of those named approves for all of them: this
                // VM's record cannot tell that approval from Azure's own start.
                format!(
                    "not sent by this VM (the event names {} VMs: one approves for all, or Azure started it)",
                    record.announced.resources
                )
            } else {
                "Azure started it without forewarn's approval".to_owned()
            };
            (record.happened.started_unix_ms.is_some())
                .then_some(VerdictPart::NotApproved { reason })
        }
    }
}

fn impact_part(record: &OutcomeRecord) -> VerdictPart {
    let announced_seconds = record
        .announced
        .duration_seconds
        .filter(|seconds| *seconds > 0);
    match &record.happened.impact {
        Impact::Pending if record.happened.started_unix_ms.is_some() => VerdictPart::UnderWay,
        Impact::Pending => VerdictPart::NotStartedYet,
        Impact::NotMeasured { .. } if record.happened.started_unix_ms.is_none() => {
            VerdictPart::Canceled
        }
        Impact::Pause(measured) | Impact::Downtime(measured) => {
            let (measured_ms, precision_ms) = (measured.milliseconds, measured.precision_ms);
            match measured.measured_by {
                MeasuredBy::LargestHeartbeatGap => VerdictPart::Paused {
                    measured_ms,
                    precision_ms,
                    announced_seconds,
                },
                MeasuredBy::LastHeartbeatToStart => VerdictPart::Down {
                    measured_ms,
                    precision_ms,
                    announced_seconds,
                },
            }
        }
        Impact::NoPauseSeen { threshold_ms } => VerdictPart::NoPauseSeen {
            threshold_ms: *threshold_ms,
            announced_seconds,
        },
        Impact::NotMeasured { why } => VerdictPart::ImpactNotMeasured { why: why.clone() },
    }
}

impl fmt::Display for PreparationOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreparationOutcome::Pending => f.write_str("preparing"),
            PreparationOutcome::InTime {
                before_ms: Some(before),
            } => write!(f, "prepared {} before NotBefore", spoken(*before)),
            PreparationOutcome::InTime { before_ms: None } => f.write_str("prepared"),
            PreparationOutcome::Late { after_ms } => {
                write!(f, "prepared {} after NotBefore", spoken(*after_ms))
            }
            PreparationOutcome::NotPrepared => f.write_str("not prepared in time"),
            PreparationOutcome::NotNeeded => f.write_str("nothing to prepare"),
        }
    }
}

impl fmt::Display for VerdictPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let announced = |f: &mut fmt::Formatter<'_>, seconds: &Option<i64>| match seconds {
            Some(seconds) => write!(f, ", announced ≤ {seconds} s"),
            None => Ok(()),
        };
        match self {
            VerdictPart::Preparation(outcome) => outcome.fmt(f),
            VerdictPart::ApprovedEarly { early_ms } => {
                write!(f, "approved {} early", spoken(*early_ms))
            }
            VerdictPart::Approved => f.write_str("approved"),
            VerdictPart::NotApproved { reason } => write!(f, "not approved: {reason}"),
            VerdictPart::Canceled => f.write_str("canceled before it started"),
            VerdictPart::NotStartedYet => f.write_str("not started yet"),
            VerdictPart::UnderWay => f.write_str("under way"),
            VerdictPart::Paused {
                measured_ms,
                announced_seconds,
                ..
            } => {
                write!(f, "paused {}", spoken(*measured_ms))?;
                announced(f, announced_seconds)
            }
            VerdictPart::Down {
                measured_ms,
                announced_seconds,
                ..
            } => {
                write!(f, "down {}", spoken(*measured_ms))?;
                announced(f, announced_seconds)
            }
            VerdictPart::NoPauseSeen {
                threshold_ms,
                announced_seconds,
            } => {
                write!(f, "no pause over {} seen", spoken(*threshold_ms))?;
                announced(f, announced_seconds)
            }
            VerdictPart::ImpactNotMeasured { why } => write!(f, "impact not measured: {why}"),
            VerdictPart::MovedHost { to } => {
                write!(f, "moved to dedicated host {}", last_segment(to))
            }
        }
    }
}

/// The last `/`-separated segment of an Azure resource id (the host's name).
fn last_segment(id: &str) -> &str {
    id.rsplit('/')
        .find(|segment| !segment.is_empty())
        .unwrap_or(id)
}

/// A span for people: "0.25 s", "3.2 s", "41 s", "12 min", "2 h 5 min", "3 d 4 h".
pub fn spoken(ms: u64) -> String {
    const MINUTE: u64 = 60_000;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    match ms {
        0..1_000 => format!("{:.2} s", ms as f64 / 1000.0),
        1_000..10_000 => format!("{:.1} s", ms as f64 / 1000.0),
        10_000..MINUTE => format!("{} s", (ms + 500) / 1000),
        MINUTE..HOUR => format!("{} min", (ms + MINUTE / 2) / MINUTE),
        HOUR..DAY => {
            let minutes = (ms + MINUTE / 2) / MINUTE;
            format!("{} h {} min", minutes / 60, minutes % 60)
        }
        _ => {
            let hours = (ms + HOUR / 2) / HOUR;
            format!("{} d {} h", hours / 24, hours % 24)
        }
    }
}
