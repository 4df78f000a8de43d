use std::time::Duration;

use forewarn_imds::{EventSource, EventStatus, EventType};

use super::*;
use crate::pipeline::policy::{GroupApproval, PolicyConfig};
use crate::pipeline::state::{Handling, Lifecycle};

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
