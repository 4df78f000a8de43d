use std::sync::Arc;
use std::time::Duration;

use forewarn_events::{EventStatus, EventType, ScheduledEvent};

use super::decide::applies_to;
use super::*;
use crate::policy::{GroupApproval, PolicyConfig};
use crate::state::{Handling, Lifecycle};

const VM: &str = "vm-a";

fn at(seconds: u64) -> ImdsTime {
    ImdsTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn event(resources: &[&str]) -> ScheduledEvent {
    ScheduledEvent {
        resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        not_before: Some(at(1_000).system_time()),
        ..ScheduledEvent::new("E1", EventType::Reboot, EventStatus::Scheduled)
    }
}

fn policy(group: GroupApproval) -> PolicyConfig {
    PolicyConfig {
        group_approval: group,
        ..PolicyConfig::default()
    }
}

fn stage(policy: &PolicyConfig, coordinated: bool) -> ApprovalStage {
    let mut stage = ApprovalStage::new(VM, policy);
    if coordinated {
        stage.coordinate_with_barrier();
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
        since_unix_ms: at(10),
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
        let mut stage = stage(&config, coordinated);
        stage.journal_durability(durable, || false);
        let mut listed = event(resources);
        if started {
            listed.status = EventStatus::Started;
        }
        let mut progress = pending(listed);
        let changed = stage.decide(&mut progress, at(10));
        let kind = match &progress.approval {
            Approval::Due { since_unix_ms } => {
                assert_eq!(*since_unix_ms, at(10), "row {index}");
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

/// One step of a barrier row.
#[derive(Debug, Clone)]
enum Step {
    /// The event is visited as it stands.
    Visit,
    /// The event started, then is visited.
    Started,
    /// The event is gone (handled to the end), then its id is visited.
    Gone,
    /// The machine forgets the event.
    Forget,
    /// The event was rescheduled: withdrawn, then prepared again (waiting on the barrier).
    Reschedule,
    /// The coordinator's verdict arrives; the event is then visited (the input touched it).
    Verdict(BarrierVerdict),
    /// IMDS accepted the approval.
    Sent,
}

#[test]
fn barrier_rows() {
    use BarrierVerdict::{Unreachable, Wait};
    use Step::{Forget, Gone, Reschedule, Sent, Started, Verdict, Visit};
    let approve = || BarrierVerdict::Approve {
        why: "all ready".into(),
    };
    // (group-approval, steps) → (the requests, by kind; the approval after)
    use GroupApproval::{Always, Never};
    #[rustfmt::skip]
    let coordinated: Vec<(GroupApproval, Vec<Step>, &str, &str)> = vec![
        // A waiting event joins once, however often it is visited (a restart's first
        // round visits everything: a resumed Coordinating event joins again).
        (Never, vec![Visit, Visit, Visit], "join", "coordinating"),
        // Verdicts: Wait keeps it waiting, Approve makes it due, Unreachable follows the
        // single-VM policy.
        (Always, vec![Visit, Verdict(Wait)], "join", "coordinating"),
        (Never, vec![Visit, Verdict(approve())], "join", "due"),
        (Never, vec![Visit, Verdict(Unreachable)], "join", "coordinating"),
        (Always, vec![Visit, Verdict(Unreachable)], "join", "due"),
        // A verdict for an event not joined is dropped.
        (Never, vec![Verdict(approve())], "", "coordinating"),
        // Due and sent, it stays joined (the sent approval is recorded) until it starts.
        (Never, vec![Visit, Verdict(approve()), Sent, Visit], "join sent", "sent"),
        (Never, vec![Visit, Verdict(approve()), Sent, Started], "join sent leave", "sent"),
        // Rescheduled: withdrawn; its old verdict is gone with it.
        (Never, vec![Visit, Verdict(approve()), Reschedule, Visit, Visit], "join withdraw join", "coordinating"),
        // Started, gone or forgotten: left, once.
        (Never, vec![Visit, Started, Visit], "join leave", "coordinating"),
        (Never, vec![Visit, Gone], "join leave", "coordinating"),
        (Never, vec![Visit, Forget, Gone], "join leave", "coordinating"),
        // Never joined: nothing to withdraw or leave.
        (Never, vec![Reschedule, Forget, Started], "", "coordinating"),
    ];
    // Without [coordination] (a journal from a run that had it): no request, and the
    // single-VM policy decides.
    #[rustfmt::skip]
    let alone: Vec<(GroupApproval, Vec<Step>, &str, &str)> = vec![
        (Never, vec![Visit, Verdict(approve())], "", "coordinating"),
        (Always, vec![Visit], "", "due"),
    ];
    let rows = coordinated.into_iter().map(|row| (true, row));
    let rows = rows.chain(alone.into_iter().map(|row| (false, row)));
    for (index, (with_barrier, (group, steps, requests, approval))) in rows.enumerate() {
        let mut stage = stage(&policy(group), with_barrier);
        let mut progress = coordinating(&[VM, "vm-b"]);
        let mut events = Events::new();
        for step in &steps {
            match step {
                Visit => {
                    stage.advance(&mut progress, at(20));
                    stage.reconcile(&EventId::from("E1"), Some(&progress));
                }
                Started => {
                    progress.lifecycle = Lifecycle::Started;
                    stage.reconcile(&EventId::from("E1"), Some(&progress));
                }
                Gone => stage.reconcile(&EventId::from("E1"), None),
                Forget => stage.forget(&EventId::from("E1"), Some(&progress.event)),
                Reschedule => {
                    stage.withdraw(&EventId::from("E1"));
                    // Its plugins prepare again, and it waits on the barrier again.
                    progress = coordinating(&[VM, "vm-b"]);
                }
                Verdict(verdict) => {
                    let input = ApprovalInput::Verdict {
                        event_id: "E1".into(),
                        verdict: verdict.clone(),
                    };
                    let touched = stage.handle(input, at(20), &mut events);
                    if !touched.is_empty() {
                        stage.advance(&mut progress, at(20));
                        stage.reconcile(&EventId::from("E1"), Some(&progress));
                    }
                }
                Sent => {
                    events.insert("E1".into(), Arc::new(progress.clone()));
                    stage.handle(ApprovalInput::Sent(vec!["E1".into()]), at(30), &mut events);
                    progress = (*events["E1"]).clone();
                }
            }
        }
        let mut kinds = Vec::new();
        while let Some(request) = stage.poll_request() {
            kinds.push(match request {
                BarrierRequest::Join(event) => {
                    assert_eq!(event.id, "E1");
                    "join"
                }
                BarrierRequest::Withdraw(_) => "withdraw",
                BarrierRequest::Leave(_) => "leave",
                BarrierRequest::Sent(_) => "sent",
                BarrierRequest::Occupy(_) => "occupy",
                BarrierRequest::Recovered(_) => "recovered",
            });
        }
        let kind = match &progress.approval {
            Approval::Coordinating { .. } => "coordinating",
            Approval::Due { since_unix_ms } => {
                assert_eq!(*since_unix_ms, at(20), "row {index}");
                "due"
            }
            Approval::Sent { .. } => "sent",
            other => panic!("row {index}: unexpected {other:?}"),
        };
        assert_eq!(
            kinds.join(" "),
            requests,
            "row {index}: {group:?} {steps:?}"
        );
        assert_eq!(kind, approval, "row {index}: {group:?} {steps:?}");
    }
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

fn budgeted_stage() -> ApprovalStage {
    let mut stage = stage(&PolicyConfig::default(), true);
    stage.keep_to_disruption_budget();
    stage
}

fn requests(stage: &mut ApprovalStage) -> Vec<BarrierRequest> {
    std::iter::from_fn(|| stage.poll_request()).collect()
}

#[test]
fn under_a_budget_an_event_naming_only_this_vm_waits_for_a_slot_then_joins() {
    let mut stage = budgeted_stage();
    let mut progress = pending(event(&[VM]));
    assert!(stage.decide(&mut progress, at(10)));
    assert_eq!(
        progress.approval,
        Approval::Coordinating {
            since_unix_ms: at(10)
        }
    );
    stage.reconcile(&EventId::from("E1"), Some(&progress));
    assert!(matches!(
        requests(&mut stage).as_slice(),
        [BarrierRequest::Join(joined)] if joined.id == "E1"
    ));
    // Without a budget the same event is due at once.
    let mut alone = stage_without_budget();
    let mut progress = pending(event(&[VM]));
    alone.decide(&mut progress, at(10));
    assert!(matches!(progress.approval, Approval::Due { .. }));
}

fn stage_without_budget() -> ApprovalStage {
    stage(&PolicyConfig::default(), true)
}

#[test]
fn a_spot_eviction_is_approved_at_once_and_takes_a_slot_without_waiting() {
    let mut stage = budgeted_stage();
    let spot = ScheduledEvent {
        event_type: EventType::Preempt,
        ..event(&[VM])
    };
    let mut progress = pending(spot);
    stage.decide(&mut progress, at(10));
    assert_eq!(
        progress.approval,
        Approval::Due {
            since_unix_ms: at(10)
        }
    );
    assert!(matches!(
        requests(&mut stage).as_slice(),
        [BarrierRequest::Occupy(taken)] if taken.id == "E1"
    ));
    // A Reboot 20 s away: too short to wait.
    let mut stage = budgeted_stage();
    let mut progress = pending(event(&[VM]));
    stage.decide(&mut progress, at(980));
    assert!(matches!(progress.approval, Approval::Due { .. }));
    assert!(matches!(
        requests(&mut stage).as_slice(),
        [BarrierRequest::Occupy(_)]
    ));
}

#[test]
fn an_event_naming_several_vms_stays_on_the_barrier_and_takes_no_slot() {
    let mut stage = budgeted_stage();
    let mut progress = pending(event(&[VM, "vm-b"]));
    stage.decide(&mut progress, at(10));
    assert!(matches!(progress.approval, Approval::Coordinating { .. }));
    assert_eq!(
        stage.rules.slot_need(&progress.event, at(10)),
        SlotNeed::None
    );
}

#[test]
fn an_event_handled_to_the_end_gives_its_slot_back_only_under_a_budget() {
    let mut stage = budgeted_stage();
    stage.forget(&EventId::from("E1"), Some(&event(&[VM])));
    assert_eq!(
        requests(&mut stage),
        vec![BarrierRequest::Recovered(EventId::from("E1"))]
    );
    // Another VM's event, or one the barrier coordinated, held no slot here: nothing asked
    // of etcd (a fleet of N would otherwise give back N × N slots).
    stage.forget(&EventId::from("E1"), Some(&event(&["vm-b"])));
    stage.forget(&EventId::from("E1"), Some(&event(&[VM, "vm-b"])));
    stage.forget(&EventId::from("E1"), None);
    assert!(requests(&mut stage).is_empty());
    let mut alone = stage_without_budget();
    alone.forget(&EventId::from("E1"), Some(&event(&[VM])));
    assert!(requests(&mut alone).is_empty());
}

/// The stage keeps which approvals are due itself (as its `PostQueue` keeps the retries):
/// a visit that leaves an event's approval due queues it for the next POST, and a visit
/// that finds it gone, or a forgotten event, takes it out.
#[test]
fn the_stage_posts_the_approvals_its_visits_left_due() {
    let mut stage = stage(&PolicyConfig::default(), false);
    let mut progress = pending(event(&[VM]));
    progress.approval = Approval::Due {
        since_unix_ms: at(10),
    };
    let id = progress.event.id.clone();
    let mut state = DaemonState::default();
    let document = forewarn_events::Document {
        incarnation: Some(1),
        events: vec![progress.event.clone()],
        rejected: Vec::new(),
    };
    Arc::make_mut(&mut state.tracker).observe(&document, at(10));
    state.events.insert(id.clone(), Arc::new(progress.clone()));

    assert_eq!(stage.poll_post(&state, false, at(20)), None, "no visit yet");
    stage.reconcile(&id, Some(&progress));
    assert_eq!(
        stage.poll_post(&state, false, at(20)),
        Some(vec![id.clone()])
    );
    stage.handle(
        ApprovalInput::Failed {
            event_ids: vec![id.clone()],
            rejected: false,
            error: "IMDS answered 500".into(),
        },
        at(21),
        &mut state.events,
    );
    stage.reconcile(&id, None);
    assert_eq!(
        stage.poll_post(&state, false, at(60)),
        None,
        "a visit that found the event gone takes its approval out"
    );
    stage.reconcile(&id, Some(&progress));
    stage.forget(&id, Some(&progress.event));
    assert_eq!(stage.poll_post(&state, false, at(60)), None, "forgotten");
}
