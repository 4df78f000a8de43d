//! Policy: which events forewarn acts on and how — pure functions over the `[policy]`
//! configuration, an event and this VM's name.
//!
//! The daemon asks [`plan`] what to do with a scheduled event (ignore it, approve it at once
//! by a built-in rule, or let the plugins prepare), and asks [`approval_gate`] before every
//! approval it would send (also for `ApproveAtOnce`). How long calls may take and when
//! preparation starts is the scheduler's business (`pipeline::scheduler`).

use std::time::Duration;

use forewarn_events::{EventField, EventSource, EventStatus, EventType, ScheduledEvent};
use serde::{Deserialize, Serialize};

/// How many other VM names a log sentence lists before summarising the rest.
const NAMES_LISTED: usize = 5;

/// The `[policy]` section of the configuration.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct PolicyConfig {
    /// Approve `EventSource = User` events of `user-initiated-types` at once, without
    /// plugins (default false).
    pub approve_user_initiated: bool,
    /// The event types `approve-user-initiated` applies to (default Reboot and Redeploy, what
    /// the VM's owner starts from the portal or the CLI; a Spot eviction or a scale-in is
    /// never the owner asking for maintenance now).
    pub user_initiated_types: Vec<EventType>,
    /// Approve a Freeze at once, without plugins, when its `DurationInSeconds` is known and
    /// below this many seconds (default: no such rule).
    pub approve_freeze_shorter_than: Option<u64>,
    /// Never approve; plugins still prepare and recover (default false).
    pub observe_only: bool,
    /// Log what would be approved, approve nothing (default false).
    pub dry_run: bool,
    /// Whether this VM approves events that also name other VMs.
    pub group_approval: GroupApproval,
    /// Plugin budgets end this many milliseconds before `NotBefore` (default 2000).
    pub safety_margin_ms: u64,
    /// Also call plugins (with affects-this-vm = false, approving nothing) for events that
    /// name only other VMs; by default such events are ignored (default false).
    pub notify_other_vms: bool,
    /// Approve at once an event no plugin subscribes to (default false: nobody subscribed is
    /// not consent, and such an event starts at NotBefore).
    pub approve_unsubscribed: bool,
    /// How long before NotBefore preparation starts (default "auto": the longest chain of
    /// the subscribed plugins' prepare-times, plus the safety margin, plus one minute, and at
    /// least 15 minutes).
    pub prepare_lead_time: LeadTime,
    /// A plugin whose calls fail (trap, budget or memory exceeded, cannot start) this many
    /// times within `quarantine-window` is quarantined: not called again until a new version
    /// of it is loaded or the daemon restarts (default 5; 0: never quarantine).
    pub quarantine_after_failures: u32,
    /// The window `quarantine-after-failures` counts failures in (default "60s").
    #[serde(with = "humantime_serde")]
    pub quarantine_window: Duration,
}

/// How long before NotBefore plugins start preparing: until then the event is tracked and
/// shown, not prepared (an event announced days ahead must not keep the VM drained).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(try_from = "String", into = "String")]
pub enum LeadTime {
    /// The longest chain of the subscribed plugins' prepare-times, plus the safety margin,
    /// plus one minute, and at least 15 minutes (`"auto"`, the default).
    #[default]
    Auto,
    /// This long before NotBefore (`"10m"`); at most 30 days.
    Fixed(Duration),
}

/// Longest `prepare-lead-time`: 30 days, more than any notice IMDS gives (degraded-hardware
/// events come days ahead), so `"30d"` means "prepare at first sight".
const MAX_LEAD_TIME: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// A `prepare-lead-time` that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LeadTimeError {
    /// Neither `"auto"` nor a duration.
    #[error("\"{text}\" is neither \"auto\" nor a duration like \"10m\": {error}")]
    NotADuration {
        /// The text given.
        text: String,
        /// What the duration parser said.
        error: humantime::DurationError,
    },
    /// Longer than 30 days.
    #[error(
        "\"{text}\" is longer than the maximum \"30d\" (which already means: prepare every \
         event at first sight)"
    )]
    TooLong {
        /// The text given.
        text: String,
    },
}

impl TryFrom<String> for LeadTime {
    type Error = LeadTimeError;

    fn try_from(text: String) -> Result<LeadTime, LeadTimeError> {
        if text.trim() == "auto" {
            return Ok(LeadTime::Auto);
        }
        let lead = match humantime::parse_duration(text.trim()) {
            Ok(lead) => lead,
            Err(error) => return Err(LeadTimeError::NotADuration { text, error }),
        };
        if lead > MAX_LEAD_TIME {
            return Err(LeadTimeError::TooLong { text });
        }
        Ok(LeadTime::Fixed(lead))
    }
}

impl From<LeadTime> for String {
    fn from(lead: LeadTime) -> String {
        match lead {
            LeadTime::Auto => "auto".into(),
            LeadTime::Fixed(lead) => humantime::format_duration(lead).to_string(),
        }
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            approve_user_initiated: false,
            user_initiated_types: vec![EventType::Reboot, EventType::Redeploy],
            approve_freeze_shorter_than: None,
            observe_only: false,
            dry_run: false,
            group_approval: GroupApproval::Never,
            safety_margin_ms: 2000,
            notify_other_vms: false,
            approve_unsubscribed: false,
            prepare_lead_time: LeadTime::Auto,
            quarantine_after_failures: DEFAULT_QUARANTINE_AFTER_FAILURES,
            quarantine_window: DEFAULT_QUARANTINE_WINDOW,
        }
    }
}

/// Failed calls within [`DEFAULT_QUARANTINE_WINDOW`] that quarantine a plugin by default: a
/// plugin asked again after each failure (every 5 s) is quarantined 20 s after it began to
/// fail, long before a 15-minute notice runs out, and one transient error never is.
pub const DEFAULT_QUARANTINE_AFTER_FAILURES: u32 = 5;
/// The default window of the crash-loop quarantine.
pub const DEFAULT_QUARANTINE_WINDOW: Duration = Duration::from_secs(60);
/// Longest `quarantine-window`: a failure an hour ago says nothing about a loop now.
pub const MAX_QUARANTINE_WINDOW: Duration = Duration::from_secs(60 * 60);

impl PolicyConfig {
    /// [`PolicyConfig::safety_margin_ms`] as a duration.
    pub fn safety_margin(&self) -> Duration {
        Duration::from_millis(self.safety_margin_ms)
    }
}

/// Whether this VM approves an event that also names other VMs (one approval releases the
/// event for every VM it names).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum GroupApproval {
    /// Never: such events start at `NotBefore` (the default).
    #[default]
    Never,
    /// This VM approves when it is listed first in `Resources`.
    FirstListed,
    /// This VM approves whenever its own plugins approved.
    Always,
}

/// The rule of [`approval_gate`] that holds an approval back: the `rule` field of the log
/// line, and what the journal keeps beside the reason.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WithholdRule {
    /// The event already started.
    AlreadyStarted,
    /// The event does not name this VM.
    NotThisVm,
    /// `policy.observe-only` is set.
    ObserveOnly,
    /// The event names other VMs too and `policy.group-approval` does not let this VM approve.
    GroupApproval,
    /// IMDS listed `Resources` forewarn cannot read: which VMs the approval would release
    /// is unknown.
    UnreadableResources,
    /// Not recorded (a journal from before the rule was kept).
    #[default]
    Unrecorded,
}

impl WithholdRule {
    /// The name in logs and the journal ("group-approval", …).
    pub fn as_str(self) -> &'static str {
        match self {
            WithholdRule::AlreadyStarted => "already-started",
            WithholdRule::NotThisVm => "not-this-vm",
            WithholdRule::ObserveOnly => "observe-only",
            WithholdRule::GroupApproval => "group-approval",
            WithholdRule::UnreadableResources => "unreadable-resources",
            WithholdRule::Unrecorded => "unrecorded",
        }
    }
}

/// What to do with a scheduled event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Do nothing; log `reason` once.
    Ignore {
        /// Why the event is ignored, as the log says it.
        reason: String,
    },
    /// Approve without calling plugins (still through [`approval_gate`]); `rule` is
    /// "user-initiated" or "short-freeze".
    ApproveAtOnce {
        /// The built-in rule that approves it.
        rule: &'static str,
    },
    /// Call the plugins; approve (through [`approval_gate`]) once all of them approved.
    Prepare {
        /// Whether this VM is among the event's resources; false when the event names only
        /// other VMs and the policy still prepares for it.
        affects_this_vm: bool,
    },
}

/// Whether an approval may be sent, asked once every plugin approved (or a built-in rule did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalGate {
    /// Send the approval.
    Approve,
    /// Log `would`, send nothing.
    DryRun {
        /// What would have been sent, for the log.
        would: String,
    },
    /// Send nothing, log `reason`; the event starts at `NotBefore`.
    Withhold {
        /// The rule that withholds it.
        rule: WithholdRule,
        /// The rule's explanation, in words.
        reason: String,
    },
}

/// Decides what to do with a scheduled event. Events naming only other VMs are ignored
/// (or, with `notify-other-vms`, prepared with `affects_this_vm: false`); then
/// user-initiated events and short Freezes may be approved at once; everything else,
/// unknown types included, is prepared by the plugins. An event with an empty `Resources`
/// list is taken to affect this VM. The status is not consulted.
pub fn plan(event: &ScheduledEvent, vm_name: &str, config: &PolicyConfig) -> Plan {
    if !affects_vm(event, vm_name) {
        if config.notify_other_vms {
            return Plan::Prepare {
                affects_this_vm: false,
            };
        }
        return Plan::Ignore {
            reason: format!(
                "ignoring event {}: it names {} but not this VM ({vm_name}); set \
                 `policy.notify-other-vms = true` to tell plugins about such events",
                event.id,
                list_names(&event.resources),
            ),
        };
    }
    if config.approve_user_initiated
        && event.source == EventSource::User
        && config.user_initiated_types.contains(&event.event_type)
    {
        return Plan::ApproveAtOnce {
            rule: "user-initiated",
        };
    }
    if is_short_freeze(event, config.approve_freeze_shorter_than) {
        return Plan::ApproveAtOnce {
            rule: "short-freeze",
        };
    }
    Plan::Prepare {
        affects_this_vm: true,
    }
}

/// Decides whether this VM may send the approval for `event`, once its plugins (or a
/// built-in rule) approved. Withholds for: an event already started, `Resources` forewarn
/// cannot read, an event not naming this VM, `observe-only`, and events naming other VMs unless `group-approval` allows it;
/// under `dry-run` reports what would have been sent.
pub fn approval_gate(event: &ScheduledEvent, vm_name: &str, config: &PolicyConfig) -> ApprovalGate {
    if event.status == EventStatus::Started {
        return withhold(
            WithholdRule::AlreadyStarted,
            format!("not approving event {}: it has already started", event.id),
        );
    }
    if let Some(raw) = event.unreadable(EventField::Resources) {
        return withhold(
            WithholdRule::UnreadableResources,
            format!(
                "not approving event {}: IMDS listed Resources forewarn cannot read (\"{raw}\"), so \
                 which VMs an approval would release is unknown; plugins prepare this VM and the \
                 event starts at its NotBefore",
                event.id
            ),
        );
    }
    if !affects_vm(event, vm_name) {
        return withhold(
            WithholdRule::NotThisVm,
            format!(
                "not approving event {}: it names {} but not this VM ({vm_name}), and only the VMs \
             it names may approve it",
                event.id,
                list_names(&event.resources),
            ),
        );
    }
    if config.observe_only {
        return withhold(
            WithholdRule::ObserveOnly,
            format!(
                "not approving event {}: `policy.observe-only` is set, so the event starts at its \
             NotBefore",
                event.id
            ),
        );
    }
    if let Some(reason) = group_withhold_reason(event, vm_name, config.group_approval) {
        return withhold(WithholdRule::GroupApproval, reason);
    }
    if config.dry_run {
        return ApprovalGate::DryRun {
            would: format!(
                "would approve event {} ({} of {}), but `policy.dry-run` is set: nothing sent",
                event.id,
                event.event_type_raw,
                list_names(&event.resources),
            ),
        };
    }
    ApprovalGate::Approve
}

/// Whether `Resources` names this VM; an empty list is taken to mean this VM.
fn affects_vm(event: &ScheduledEvent, vm_name: &str) -> bool {
    event.resources.is_empty() || event.names_vm(vm_name)
}

/// A Freeze whose known duration is below `shorter_than` seconds.
fn is_short_freeze(event: &ScheduledEvent, shorter_than: Option<u64>) -> bool {
    let Some(limit) = shorter_than else {
        return false;
    };
    let Some(duration) = event.duration_seconds else {
        return false;
    };
    let Ok(duration) = u64::try_from(duration) else {
        return false;
    };
    event.event_type == EventType::Freeze && duration < limit
}

/// Why `group_approval` forbids this VM to approve an event that also names other VMs, or
/// None when it may.
fn group_withhold_reason(
    event: &ScheduledEvent,
    vm_name: &str,
    group_approval: GroupApproval,
) -> Option<String> {
    let others: Vec<String> = event
        .resources
        .iter()
        .filter(|resource| !forewarn_events::is_vm_name(resource, vm_name))
        .cloned()
        .collect();
    if others.is_empty() {
        return None;
    }
    match group_approval {
        GroupApproval::Always => None,
        GroupApproval::Never => Some(format!(
            "not approving event {}: it also names {} and one approval releases it for all of \
             them; set `policy.group-approval = \"first-listed\"` to let the first VM listed \
             approve for the group",
            event.id,
            list_names(&others),
        )),
        GroupApproval::FirstListed => {
            let first = event.resources.first()?;
            if forewarn_events::is_vm_name(first, vm_name) {
                return None;
            }
            Some(format!(
                "not approving event {}: {first} is listed first and approves for the group \
                 (`policy.group-approval = \"first-listed\"`)",
                event.id
            ))
        }
    }
}

/// "vm-b, vm-c" — at most [`NAMES_LISTED`] names, then "and N more".
fn list_names(names: &[String]) -> String {
    let shown = names
        .iter()
        .take(NAMES_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(NAMES_LISTED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

fn withhold(rule: WithholdRule, reason: String) -> ApprovalGate {
    ApprovalGate::Withhold { rule, reason }
}

#[cfg(test)]
mod tests;
