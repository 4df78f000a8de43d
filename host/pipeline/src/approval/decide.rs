//! The approval rules: what an event whose plugins all approved gets under the policy
//! (alone, by `policy.group-approval`, or waiting on the barrier), and what holds it first
//! (plugin files that failed to load, nobody subscribing, quarantined plugins).

use std::time::Duration;

use forewarn_events::{ImdsTime, PluginName, ScheduledEvent};

use super::hold::Hold;
use crate::policy::{self, ApprovalGate, GroupApproval, PolicyConfig};
use crate::roster::Roster;
use crate::state::{Approval, EventProgress, Handling, Lifecycle};

/// The rules an approval is decided by on this VM.
#[derive(Debug, Clone)]
pub struct ApprovalRules {
    /// This VM's name, as IMDS lists it in `Resources`.
    pub vm_name: String,
    /// The `[policy]` section.
    pub policy: PolicyConfig,
    /// Whether events naming this VM and others wait on the etcd barrier (`[coordination]`).
    pub coordinated: bool,
    /// Whether an early approval of an event naming only this VM waits for a slot of the
    /// fleet's disruption budget (`coordination.disruption-budget`).
    pub budgeted: bool,
}

/// A notice this short is too short to wait for a slot: the event is approved at once (its
/// slot taken without waiting, so that the budget counts it). A Spot eviction's whole notice
/// is 30 s or less.
pub const SHORT_NOTICE: Duration = Duration::from_secs(30);

/// How an approval the policy allows goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotNeed {
    /// No budget applies (none set, or the barrier coordinates the event).
    None,
    /// Wait for a slot, then approve.
    Wait,
    /// Approve at once and take a slot without waiting (a Spot eviction, a short notice).
    Occupy,
}

impl ApprovalRules {
    /// The approval an event gets when every plugin on this VM approved it at `now`: the
    /// single-VM policy's gate, or — coordinated, for an event naming this VM and another
    /// one — a wait on the barrier under every rule but `group-approval`.
    pub fn decide(&self, event: &ScheduledEvent, now: ImdsTime) -> Approval {
        if !self.coordinated || !applies_to(event, &self.vm_name) {
            let gate = self.local_gate(event);
            if gate == ApprovalGate::Approve && self.slot_need(event, now) == SlotNeed::Wait {
                return Approval::Coordinating { since_unix_ms: now };
            }
            return approval_of(gate, now);
        }
        match coordinated_gate(event, &self.vm_name, &self.policy) {
            ApprovalGate::Approve => Approval::Coordinating { since_unix_ms: now },
            gate => approval_of(gate, now),
        }
    }

    /// Whether an approval of `event` at `now` waits for a slot of the disruption budget,
    /// takes one at once, or needs none.
    pub fn slot_need(&self, event: &ScheduledEvent, now: ImdsTime) -> SlotNeed {
        if !self.budgeted || (self.coordinated && applies_to(event, &self.vm_name)) {
            return SlotNeed::None;
        }
        match crate::disruption_budget::never_held(event, now, SHORT_NOTICE) {
            true => SlotNeed::Occupy,
            false => SlotNeed::Wait,
        }
    }

    /// Whether `event` can hold a slot of the disruption budget on this VM: it names this VM
    /// and, while the barrier coordinates, no other one.
    pub fn may_hold_a_slot(&self, event: &ScheduledEvent) -> bool {
        event.names_vm(&self.vm_name) && !(self.coordinated && applies_to(event, &self.vm_name))
    }

    /// Whether the single-VM policy lets this VM approve `event` on its own (what decides a
    /// coordinated event while the barrier cannot be reached).
    pub fn approves_alone(&self, event: &ScheduledEvent) -> bool {
        self.local_gate(event) == ApprovalGate::Approve
    }

    fn local_gate(&self, event: &ScheduledEvent) -> ApprovalGate {
        policy::approval_gate(event, &self.vm_name, &self.policy)
    }
}

/// Why an event whose subscribers all approved may still not be approved: a plugin file
/// that failed to load counts as a subscriber that has not approved (unless its manifest
/// was read and says `on-failure = "approve"`), and nobody subscribing is not consent unless
/// `policy.approve-unsubscribed` says so. None: go on.
pub fn hold(
    event: &ScheduledEvent,
    subscribers: usize,
    roster: &Roster,
    policy: &PolicyConfig,
) -> Option<Hold> {
    let files: Vec<String> = roster
        .load_errors()
        .keys()
        .filter(|path| roster.load_error_holds(path))
        .map(|path| path.display().to_string())
        .collect();
    if !files.is_empty() {
        return Some(Hold::FailedToLoad { files });
    }
    if subscribers == 0 && !policy.approve_unsubscribed {
        return Some(Hold::Unsubscribed {
            event_type: event.event_type_raw.clone(),
        });
    }
    None
}

/// The quarantined plugins that hold `progress`: under `on-failure = "hold"`, subscribed to
/// its type and not approved, while the event waits for its plugins (Scheduled, pending).
pub fn held_by_quarantine(progress: &EventProgress, roster: &Roster) -> Vec<PluginName> {
    let waits_for_plugins = matches!(progress.handling, Handling::Prepare { .. })
        && progress.lifecycle == Lifecycle::Scheduled
        && progress.approval == Approval::Pending;
    if !waits_for_plugins {
        return Vec::new();
    }
    roster
        .subscribers(progress.event.event_type)
        .into_iter()
        .filter(|member| roster.is_quarantined(&member.name) && !roster.excused(member))
        .filter(|member| !progress.plugin(&member.name).prepared)
        .map(|member| member.name.clone())
        .collect()
}

/// The hold quarantined plugins put on `progress` (see [`held_by_quarantine`]). None: none
/// holds it.
pub fn quarantine_hold(progress: &EventProgress, roster: &Roster) -> Option<Hold> {
    let plugins = held_by_quarantine(progress, roster);
    if plugins.is_empty() {
        return None;
    }
    Some(Hold::Quarantined { plugins })
}

/// Whether the barrier coordinates `event` for `vm_name`: it names this VM and another one.
pub fn applies_to(event: &ScheduledEvent, vm_name: &str) -> bool {
    event.names_vm(vm_name)
        && event
            .resources
            .iter()
            .any(|resource| !forewarn_events::is_vm_name(resource, vm_name))
}

/// The policy's gate for an event the barrier coordinates: every rule applies (observe-only,
/// dry-run, started, not this VM) except `group-approval`, which the barrier replaces.
fn coordinated_gate(event: &ScheduledEvent, vm_name: &str, config: &PolicyConfig) -> ApprovalGate {
    let coordinated = PolicyConfig {
        group_approval: GroupApproval::Always,
        ..config.clone()
    };
    policy::approval_gate(event, vm_name, &coordinated)
}

fn approval_of(gate: ApprovalGate, now: ImdsTime) -> Approval {
    match gate {
        ApprovalGate::Approve => Approval::Due { since_unix_ms: now },
        ApprovalGate::DryRun { would } => Approval::DryRun { would },
        ApprovalGate::Withhold { rule, reason } => Approval::Withheld { reason, rule },
    }
}
