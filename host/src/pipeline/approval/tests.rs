use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use forewarn_imds::{EventSource, EventStatus, EventType};

use super::decide::applies_to;
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

#[derive(Clone, Default)]
struct SharedFake(Arc<Mutex<FakeBarrier>>);

impl SharedFake {
    fn with<T>(&self, read: impl FnOnce(&mut FakeBarrier) -> T) -> T {
        let mut fake = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        read(&mut fake)
    }
}

impl Barrier for SharedFake {
    fn verdict(&mut self, event: &ScheduledEvent) -> Verdict {
        self.with(|fake| {
            fake.asked.push(event.id.clone());
            fake.verdict.clone().unwrap_or(Verdict::Wait)
        })
    }
    fn withdraw(&mut self, event_id: &str) {
        self.with(|fake| fake.withdrawn.push(event_id.to_owned()));
    }
    fn approval_sent(&mut self, event_ids: &[String]) {
        self.with(|fake| fake.sent.extend(event_ids.iter().cloned()));
    }
}

fn policy(group: GroupApproval) -> PolicyConfig {
    PolicyConfig {
        group_approval: group,
        ..PolicyConfig::default()
    }
}

fn stage(policy: &PolicyConfig, barrier: Option<&SharedFake>) -> ApprovalStage {
    let mut stage = ApprovalStage::new(VM, policy);
    if let Some(barrier) = barrier {
        stage.coordinate_with(Box::new(barrier.clone()));
    }
    stage
}

fn pending(event: ScheduledEvent) -> EventProgress {
    EventProgress::new(
        event,
        Handling::Prepare {
            affects_this_vm: true,
        },
        Lifecycle::Scheduled,
    )
}

fn coordinating(resources: &[&str]) -> EventProgress {
    let mut progress = pending(event(resources));
    progress.approval = Approval::Coordinating {
        since_unix_ms: unix_ms(at(10)),
    };
    progress
}

/// (resources, group-approval, coordinated, dry-run, observe-only, started, journal
/// durable, expected)
type DecisionRow = (
    &'static [&'static str],
    GroupApproval,
    bool,
    bool,
    bool,
    bool,
    bool,
    &'static str,
);

#[test]
fn decision_rows() {
    use GroupApproval::{Always, Never};
    let both: &[&str] = &[VM, "vm-b"];
    let alone: &[&str] = &[VM];
    // (resources, group-approval, coordinated, dry-run, observe-only, started, journal
    // durable) → the approval after every plugin approved ("held": still pending, a note)
    #[rustfmt::skip]
    let rows: &[DecisionRow] = &[
        (alone, Never, false, false, false, false, true, "due"),
        (both, Never, false, false, false, false, true, "withheld"),
        (both, Always, false, false, false, false, true, "due"),
        (alone, Never, false, false, true, false, true, "withheld"),
        (alone, Never, false, true, false, false, true, "dry-run"),
        (alone, Never, false, false, false, true, true, "withheld"),
        // Coordinated: an event naming other VMs waits on the barrier whatever the group
        // policy; one for this VM alone never does; every other rule still applies.
        (both, Never, true, false, false, false, true, "coordinating"),
        (both, Always, true, false, false, false, true, "coordinating"),
        (alone, Never, true, false, false, false, true, "due"),
        (both, Never, true, true, false, false, true, "dry-run"),
        (both, Never, true, false, true, false, true, "withheld"),
        (both, Never, true, false, false, true, true, "withheld"),
        // Nothing is decided while the journal cannot record it.
        (alone, Never, false, false, false, false, false, "held"),
        (both, Never, true, false, false, false, false, "held"),
    ];
    for (index, row) in rows.iter().enumerate() {
        let (resources, group, coordinated, dry_run, observe_only, started, durable, expected) =
            *row;
        let config = PolicyConfig {
            observe_only,
            dry_run,
            ..policy(group)
        };
        let barrier = SharedFake::default();
        let mut stage = stage(&config, coordinated.then_some(&barrier));
        let mut events = Events::new();
        stage.handle(ApprovalInput::JournalDurable(durable), at(10), &mut events);
        let mut listed = event(resources);
        if started {
            listed.status = EventStatus::Started;
        }
        let mut progress = pending(listed);
        let changed = stage.decide(&mut progress, at(10));
        let kind = match &progress.approval {
            Approval::Due { since_unix_ms } => {
                assert_eq!(*since_unix_ms, unix_ms(at(10)), "row {index}");
                "due"
            }
            Approval::Coordinating { .. } => "coordinating",
            Approval::Withheld { .. } => "withheld",
            Approval::DryRun { .. } => "dry-run",
            Approval::Pending => "held",
            other => panic!("row {index}: unexpected {other:?}"),
        };
        assert_eq!(kind, expected, "row {index}: {row:?}");
        assert_eq!(changed, kind != "held", "row {index}");
        let note = stage.poll_emit();
        let noted = matches!(note, Some(TimelineEntry::NotApproved { .. }));
        assert_eq!(
            noted,
            matches!(kind, "held" | "withheld" | "dry-run"),
            "row {index}: {note:?}"
        );
        // A note is said once: deciding again says nothing new.
        stage.decide(&mut progress, at(11));
        assert_eq!(stage.poll_emit(), None, "row {index}");
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
        let barrier = SharedFake::default();
        barrier.with(|fake| fake.verdict = Some(verdict.clone()));
        let mut stage = stage(&policy(group), Some(&barrier));
        let mut progress = coordinating(&[VM, "vm-b"]);
        let changed = stage.advance(&mut progress, at(20));
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
        assert_eq!(
            barrier.with(|fake| fake.asked.clone()),
            vec!["E1".to_owned()]
        );
    }
}

#[test]
fn withdrawals_and_sent_approvals_reach_the_barrier() {
    let barrier = SharedFake::default();
    let mut stage = stage(&PolicyConfig::default(), Some(&barrier));
    let mut events = Events::new();
    stage.withdraw("E1");
    stage.handle(
        ApprovalInput::Sent(vec!["E2".to_owned()]),
        at(10),
        &mut events,
    );
    assert_eq!(
        barrier.with(|fake| fake.withdrawn.clone()),
        vec!["E1".to_owned()]
    );
    assert_eq!(
        barrier.with(|fake| fake.sent.clone()),
        vec!["E2".to_owned()]
    );
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
