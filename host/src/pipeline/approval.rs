//! The approval stage: once this VM's plugins are all prepared, decides whether, and when,
//! the approval goes to IMDS — alone, by the group policy, or through the etcd barrier.
//!
//! One trait, [`Approver`], stands for every way of approving: [`LocalApprover`] applies the
//! single-VM policy (`policy.group-approval`, dry run, observe-only); [`CoordinatedApprover`]
//! adds the barrier for events that name this VM and others, and falls back to the local
//! policy while the barrier is unreachable. The barrier itself is behind [`Barrier`], so the
//! etcd task (`crate::coordination`) is one implementation and a test fake is another.

use std::time::SystemTime;

use forewarn_imds::ScheduledEvent;

use crate::pipeline::clock::unix_ms;
use crate::pipeline::policy::{self, ApprovalGate, GroupApproval, PolicyConfig};
use crate::pipeline::roster::Roster;
use crate::pipeline::state::{Approval, EventProgress, Handling, Lifecycle};

/// What the barrier says about an event waiting on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Keep waiting: for the other VMs, for leadership, or for etcd's first answer.
    Wait,
    /// This VM leads and claimed the approval in etcd: send it now. `why` is for the log.
    Approve {
        /// One line saying which VMs were ready and who leads.
        why: String,
    },
    /// The barrier cannot be reached: decide by the single-VM policy (`policy.group-approval`).
    Unreachable,
}

/// A cross-VM approval barrier, as the approval stage sees it: non-blocking questions about
/// state another task keeps up to date.
pub(crate) trait Barrier: Send {
    /// The verdict on `event`, whose plugins all approved on this VM. The first question
    /// about an event starts coordinating it (this VM is recorded ready).
    fn verdict(&mut self, event: &ScheduledEvent) -> Verdict;
    /// This VM is no longer ready for the event (it was rescheduled and prepares again).
    fn withdraw(&mut self, event_id: &str);
    /// IMDS accepted these approvals; the barrier records them for the other VMs.
    fn approval_sent(&mut self, event_ids: &[String]);
}

/// Decides the approval of events whose plugins all approved.
pub(crate) trait Approver: Send {
    /// The approval an event gets when every plugin on this VM approved it at `now`.
    fn decide(&mut self, event: &ScheduledEvent, now: SystemTime) -> Approval;
    /// Moves an event in [`Approval::Coordinating`] forward; returns whether it changed.
    fn advance(&mut self, progress: &mut EventProgress, now: SystemTime) -> bool;
    /// The event was rescheduled: this VM prepares it again.
    fn withdraw(&mut self, event_id: &str);
    /// IMDS accepted these approvals.
    fn approval_sent(&mut self, event_ids: &[String]);
}

/// Approval by this VM alone, under the policy.
#[derive(Debug, Clone)]
pub(crate) struct LocalApprover {
    vm_name: String,
    policy: PolicyConfig,
}

impl LocalApprover {
    /// The single-VM policy for `vm_name`.
    pub(crate) fn new(vm_name: &str, policy: &PolicyConfig) -> LocalApprover {
        LocalApprover {
            vm_name: vm_name.to_owned(),
            policy: policy.clone(),
        }
    }

    fn gate(&self, event: &ScheduledEvent) -> ApprovalGate {
        policy::approval_gate(event, &self.vm_name, &self.policy)
    }
}

impl Approver for LocalApprover {
    fn decide(&mut self, event: &ScheduledEvent, now: SystemTime) -> Approval {
        approval_of(self.gate(event), now)
    }

    fn advance(&mut self, _progress: &mut EventProgress, _now: SystemTime) -> bool {
        false
    }

    fn withdraw(&mut self, _event_id: &str) {}

    fn approval_sent(&mut self, _event_ids: &[String]) {}
}

/// Approval through a barrier for events that name this VM and another one; the local
/// policy for every other event, and for coordinated ones while the barrier is unreachable.
pub(crate) struct CoordinatedApprover<B> {
    local: LocalApprover,
    barrier: B,
}

impl<B: Barrier> CoordinatedApprover<B> {
    /// Coordinates through `barrier`; `local` decides what the barrier does not.
    pub(crate) fn new(local: LocalApprover, barrier: B) -> CoordinatedApprover<B> {
        CoordinatedApprover { local, barrier }
    }
}

impl<B: Barrier> Approver for CoordinatedApprover<B> {
    fn decide(&mut self, event: &ScheduledEvent, now: SystemTime) -> Approval {
        if !applies_to(event, &self.local.vm_name) {
            return self.local.decide(event, now);
        }
        match coordinated_gate(event, &self.local.vm_name, &self.local.policy) {
            ApprovalGate::Approve => Approval::Coordinating {
                since_unix_ms: unix_ms(now),
            },
            gate => approval_of(gate, now),
        }
    }

    fn advance(&mut self, progress: &mut EventProgress, now: SystemTime) -> bool {
        let id = progress.event.id.clone();
        match self.barrier.verdict(&progress.event) {
            Verdict::Wait => false,
            Verdict::Approve { why } => {
                tracing::info!(event_id = %id, "{why}");
                progress.approval = Approval::Due {
                    since_unix_ms: unix_ms(now),
                };
                true
            }
            Verdict::Unreachable => {
                if self.local.gate(&progress.event) != ApprovalGate::Approve {
                    return false;
                }
                tracing::warn!(
                    event_id = %id,
                    "etcd cannot be reached, and the single-VM policy (`policy.group-approval`) \
                     lets this VM approve event {id} on its own"
                );
                progress.approval = Approval::Due {
                    since_unix_ms: unix_ms(now),
                };
                true
            }
        }
    }

    fn withdraw(&mut self, event_id: &str) {
        self.barrier.withdraw(event_id);
    }

    fn approval_sent(&mut self, event_ids: &[String]) {
        self.barrier.approval_sent(event_ids);
    }
}

/// Why an event whose subscribers all approved may still not be approved: a plugin file
/// that failed to load counts as a subscriber that has not approved (unless its manifest
/// was read and says `on-failure = "approve"`), and nobody subscribing is not consent unless
/// `policy.approve-unsubscribed` says so. None: go on.
pub(crate) fn hold(
    event: &ScheduledEvent,
    subscribers: usize,
    roster: &Roster,
    policy: &PolicyConfig,
) -> Option<String> {
    let failed: Vec<String> = roster
        .load_errors()
        .keys()
        .filter(|path| roster.load_error_holds(path))
        .map(|path| path.display().to_string())
        .collect();
    if !failed.is_empty() {
        return Some(format!(
            "not approving event {}: plugin file(s) {} failed to load, and a plugin that \
             cannot run has not approved; fix or remove the file (`forewarn status` shows \
             why it failed) and the approval goes ahead",
            event.id,
            failed.join(", ")
        ));
    }
    if subscribers == 0 && !policy.approve_unsubscribed {
        return Some(format!(
            "not approving event {}: no plugin subscribes to {}, so nothing prepared this \
             VM and the event starts at NotBefore; add a plugin that subscribes to it, or \
             set `policy.approve-unsubscribed = true` to approve such events at once",
            event.id, event.event_type_raw
        ));
    }
    None
}

/// The quarantined plugins that hold `progress`: under `on-failure = "hold"`, subscribed to
/// its type and not approved, while the event waits for its plugins (Scheduled, pending).
pub(crate) fn held_by_quarantine(progress: &EventProgress, roster: &Roster) -> Vec<String> {
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

/// Why `progress` cannot be approved while quarantined plugins hold it (see
/// [`held_by_quarantine`]), for the log and the timeline. None: none holds it.
pub(crate) fn quarantine_hold(progress: &EventProgress, roster: &Roster) -> Option<String> {
    let held_by = held_by_quarantine(progress, roster);
    if held_by.is_empty() {
        return None;
    }
    Some(format!(
        "not approving event {}: held by quarantined plugin {}: its calls failed again and \
         again, it is no longer called, and its manifest says on-failure = \"hold\", so the \
         event starts at NotBefore; replace the plugin's .wasm or .toml with a fixed one to \
         lift the quarantine (`forewarn status` shows its last failure), or set \
         on-failure = \"approve\" if the plugin is advisory",
        progress.event.id,
        held_by.join(", ")
    ))
}

/// Whether the barrier coordinates `event` for `vm_name`: it names this VM and another one.
pub(crate) fn applies_to(event: &ScheduledEvent, vm_name: &str) -> bool {
    event.names_vm(vm_name)
        && event
            .resources
            .iter()
            .any(|resource| !forewarn_imds::is_vm_name(resource, vm_name))
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

fn approval_of(gate: ApprovalGate, now: SystemTime) -> Approval {
    match gate {
        ApprovalGate::Approve => Approval::Due {
            since_unix_ms: unix_ms(now),
        },
        ApprovalGate::DryRun { would } => Approval::DryRun { would },
        ApprovalGate::Withhold { rule, reason } => Approval::Withheld { reason, rule },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use forewarn_imds::{EventSource, EventStatus, EventType};

    use super::*;

    const VM: &str = "vm-a";

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn event(resources: &[&str]) -> ScheduledEvent {
        ScheduledEvent {
            id: "E1".into(),
            event_type: EventType::Reboot,
            event_type_raw: "Reboot".into(),
            resource_type: "VirtualMachine".into(),
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            status: EventStatus::Scheduled,
            not_before: Some(at(1_000)),
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds: None,
            unreadable: Vec::new(),
        }
    }

    /// A barrier that answers what the test sets, and records what it was told.
    #[derive(Default)]
    struct FakeBarrier {
        verdict: Option<Verdict>,
        asked: Vec<String>,
        withdrawn: Vec<String>,
        sent: Vec<String>,
    }

    impl Barrier for &mut FakeBarrier {
        fn verdict(&mut self, event: &ScheduledEvent) -> Verdict {
            self.asked.push(event.id.clone());
            self.verdict.clone().unwrap_or(Verdict::Wait)
        }
        fn withdraw(&mut self, event_id: &str) {
            self.withdrawn.push(event_id.to_owned());
        }
        fn approval_sent(&mut self, event_ids: &[String]) {
            self.sent.extend(event_ids.iter().cloned());
        }
    }

    fn policy(group: GroupApproval) -> PolicyConfig {
        PolicyConfig {
            group_approval: group,
            ..PolicyConfig::default()
        }
    }

    fn coordinating(resources: &[&str]) -> EventProgress {
        let mut progress = EventProgress::new(
            event(resources),
            Handling::Prepare {
                affects_this_vm: true,
            },
            Lifecycle::Scheduled,
        );
        progress.approval = Approval::Coordinating {
            since_unix_ms: unix_ms(at(10)),
        };
        progress
    }

    #[test]
    fn local_decisions_follow_the_policy() {
        let due = Approval::Due {
            since_unix_ms: unix_ms(at(10)),
        };
        // (resources, group-approval, observe-only, dry-run) → approval kind
        let rows: &[(&[&str], GroupApproval, bool, bool, &str)] = &[
            (&[VM], GroupApproval::Never, false, false, "due"),
            (
                &[VM, "vm-b"],
                GroupApproval::Never,
                false,
                false,
                "withheld",
            ),
            (&[VM, "vm-b"], GroupApproval::Always, false, false, "due"),
            (&[VM], GroupApproval::Never, true, false, "withheld"),
            (&[VM], GroupApproval::Never, false, true, "dry-run"),
        ];
        for (resources, group, observe_only, dry_run, expected) in rows {
            let config = PolicyConfig {
                observe_only: *observe_only,
                dry_run: *dry_run,
                ..policy(*group)
            };
            let approval = LocalApprover::new(VM, &config).decide(&event(resources), at(10));
            let kind = match &approval {
                Approval::Due { .. } => "due",
                Approval::Withheld { .. } => "withheld",
                Approval::DryRun { .. } => "dry-run",
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(
                kind, *expected,
                "{resources:?} {group:?} observe-only {observe_only} dry-run {dry_run}"
            );
            if kind == "due" {
                assert_eq!(approval, due);
            }
        }
    }

    #[test]
    fn events_naming_other_vms_wait_on_the_barrier_whatever_the_group_policy() {
        for group in [GroupApproval::Never, GroupApproval::Always] {
            let mut barrier = FakeBarrier::default();
            let mut approver =
                CoordinatedApprover::new(LocalApprover::new(VM, &policy(group)), &mut barrier);
            assert_eq!(
                approver.decide(&event(&[VM, "vm-b"]), at(10)),
                Approval::Coordinating {
                    since_unix_ms: unix_ms(at(10))
                }
            );
            // An event for this VM alone never waits on the barrier.
            assert!(matches!(
                approver.decide(&event(&[VM]), at(10)),
                Approval::Due { .. }
            ));
        }
    }

    #[test]
    fn the_barrier_verdict_moves_a_coordinating_event() {
        // (verdict, group-approval) → approval due afterwards?
        let rows = [
            (Verdict::Wait, GroupApproval::Always, false),
            (
                Verdict::Approve {
                    why: "all ready".into(),
                },
                GroupApproval::Never,
                true,
            ),
            (Verdict::Unreachable, GroupApproval::Never, false),
            (Verdict::Unreachable, GroupApproval::Always, true),
        ];
        for (verdict, group, due) in rows {
            let mut barrier = FakeBarrier {
                verdict: Some(verdict.clone()),
                ..FakeBarrier::default()
            };
            let mut approver =
                CoordinatedApprover::new(LocalApprover::new(VM, &policy(group)), &mut barrier);
            let mut progress = coordinating(&[VM, "vm-b"]);
            let changed = approver.advance(&mut progress, at(20));
            assert_eq!(changed, due, "{verdict:?} {group:?}");
            let expected = if due {
                Approval::Due {
                    since_unix_ms: unix_ms(at(20)),
                }
            } else {
                Approval::Coordinating {
                    since_unix_ms: unix_ms(at(10)),
                }
            };
            assert_eq!(progress.approval, expected, "{verdict:?} {group:?}");
            assert_eq!(barrier.asked, vec!["E1".to_owned()]);
        }
    }

    #[test]
    fn withdrawals_and_sent_approvals_reach_the_barrier() {
        let mut barrier = FakeBarrier::default();
        let mut approver = CoordinatedApprover::new(
            LocalApprover::new(VM, &PolicyConfig::default()),
            &mut barrier,
        );
        approver.withdraw("E1");
        approver.approval_sent(&["E2".to_owned()]);
        assert_eq!(barrier.withdrawn, vec!["E1".to_owned()]);
        assert_eq!(barrier.sent, vec!["E2".to_owned()]);
    }

    #[test]
    fn only_events_naming_this_vm_and_another_are_coordinated() {
        let rows: &[(&[&str], bool)] = &[
            (&[VM], false),
            (&["VM-A"], false),
            (&[VM, "vm-b"], true),
            (&["vm-b", "vm-c"], false),
            (&[], false),
        ];
        for (resources, expected) in rows {
            assert_eq!(
                applies_to(&event(resources), VM),
                *expected,
                "{resources:?}"
            );
        }
    }
}
