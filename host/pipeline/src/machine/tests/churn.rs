//! The pipeline on a fake clock when events churn: reschedules that drop this VM or keep a
//! sent approval, ids listed again during recovery, one call per plugin, refused batches.

use std::time::Duration;

use forewarn_events::{EventId, EventType, ScheduledEvent};

use super::*;
use crate::state::{AnswerOutcome, CallPhase};
use crate::test_harness::{Harness, approve, defer, event, reply, t0};

const SECOND: Duration = Duration::from_secs(1);

/// lb-drain, then graceful-shutdown (after lb-drain).
const PAIR: &[(&str, &str)] = &[
    (
        "graceful-shutdown",
        "subscribe = [\"*\"]\nafter = [\"lb-drain\"]\nbudget = \"10s\"\n",
    ),
    ("lb-drain", "subscribe = [\"*\"]\nbudget = \"10s\"\n"),
];

/// Every call started, in order, as "event plugin phase" joined by ", ".
fn calls_text(harness: &Harness) -> String {
    harness
        .log
        .iter()
        .filter_map(|executed| match &executed.action {
            Action::Call(call) => Some(format!("{} {} {}", call.event_id, call.plugin, call.phase)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn with_resources(event: &ScheduledEvent, resources: &[&str]) -> ScheduledEvent {
    ScheduledEvent {
        resources: resources.iter().map(|name| (*name).to_owned()).collect(),
        ..event.clone()
    }
}

#[test]
fn a_reschedule_that_drops_this_vm_recovers_the_prepared_plugins_then_handles_it_afresh() {
    let mut harness = Harness::new(PAIR, PolicyConfig::default());
    // graceful-shutdown keeps deferring: the event is mid-preparation when it moves.
    harness.script("graceful-shutdown", |call| match call.phase {
        CallPhase::Prepare => defer(10 * SECOND),
        _ => approve(),
    });
    let both = with_resources(
        &event("E1", EventType::Reboot, t0(), 300 * SECOND),
        &[VM_A, "vm-b"],
    );
    harness.document(std::slice::from_ref(&both));
    harness.run_for(SECOND);
    harness.document(&[with_resources(&both, &["vm-b"])]);
    harness.run_for(SECOND);
    assert_eq!(
        calls_text(&harness),
        "E1 lb-drain prepare, E1 graceful-shutdown prepare, E1 graceful-shutdown ended-without-start, E1 lb-drain ended-without-start",
        "the prepared plugins recover, in reverse order"
    );
    let progress = &harness.pipeline.state().events["E1"];
    assert!(
        matches!(progress.handling, Handling::Ignored { .. }),
        "handled afresh under the new plan: {:?}",
        progress.handling
    );
    assert_eq!(progress.lifecycle, Lifecycle::Scheduled);
    assert!(progress.relisted.is_none());
    assert!(harness.approvals().is_empty());
    // Its cancel is then the end of an ignored event: nobody is told twice.
    harness.document(&[]);
    assert_eq!(calls_text(&harness).matches(", ").count(), 3);
    assert!(harness.pipeline.state().events.is_empty());
}

const VM_A: &str = crate::test_harness::VM;

#[test]
fn a_reschedule_to_a_new_plan_recovers_first_whatever_the_new_plan() {
    let notify = PolicyConfig {
        notify_other_vms: true,
        ..PolicyConfig::default()
    };
    let short_freeze = PolicyConfig {
        approve_freeze_shorter_than: Some(9),
        ..PolicyConfig::default()
    };
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    let freeze = ScheduledEvent {
        event_type: EventType::Freeze,
        event_type_raw: "Freeze".into(),
        duration_seconds: Some(5),
        ..reboot.clone()
    };
    // (policy, the event as rescheduled, the new plan's label, calls after the recovery)
    let rows = [
        (
            notify,
            with_resources(&reboot, &["vm-b"]),
            "prepare (other VMs)",
            ", E1 lb-drain prepare, E1 graceful-shutdown prepare",
        ),
        (short_freeze, freeze, "approve at once (short-freeze)", ""),
    ];
    for (policy, rescheduled, label, afterwards) in rows {
        let mut harness = Harness::new(PAIR, policy);
        harness.script("graceful-shutdown", |call| match call.phase {
            CallPhase::Prepare => defer(10 * SECOND),
            _ => approve(),
        });
        harness.document(std::slice::from_ref(&reboot));
        harness.run_for(SECOND);
        harness.document(std::slice::from_ref(&rescheduled));
        harness.run_for(SECOND);
        assert_eq!(
            calls_text(&harness),
            format!(
                "E1 lb-drain prepare, E1 graceful-shutdown prepare, E1 graceful-shutdown \
                 ended-without-start, E1 lb-drain ended-without-start{afterwards}"
            ),
            "{label}"
        );
        let progress = &harness.pipeline.state().events["E1"];
        assert_eq!(progress.handling.label(), label);
    }
}

#[test]
fn a_sent_approval_survives_a_reschedule_without_preparing_or_posting_again() {
    let mut harness = Harness::new(PAIR, PolicyConfig::default());
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    assert_eq!(harness.approvals().len(), 1);
    let later = ScheduledEvent {
        not_before: Some((t0() + 900 * SECOND).system_time()),
        ..reboot
    };
    harness.document(&[later]);
    harness.run_for(30 * SECOND);
    assert_eq!(
        calls_text(&harness),
        "E1 lb-drain prepare, E1 graceful-shutdown prepare",
        "nobody prepares again"
    );
    assert_eq!(
        harness.approvals().len(),
        1,
        "the approval is not sent again"
    );
    assert!(matches!(
        harness.pipeline.state().events["E1"].approval,
        Approval::Sent { .. }
    ));
}

#[test]
fn only_plugins_that_ask_to_be_asked_again_prepare_again_then_the_approval_is_sent_again() {
    let plugins: &[(&str, &str)] = &[
        (
            "graceful-shutdown",
            "subscribe = [\"*\"]\nafter = [\"lb-drain\"]\nprepare-again-on-reschedule = true\n",
        ),
        ("lb-drain", "subscribe = [\"*\"]\n"),
    ];
    let mut harness = Harness::new(plugins, PolicyConfig::default());
    harness.script("graceful-shutdown", |call| {
        if call.attempt == 1 && call.event.not_before_time() > Some(t0() + 600 * SECOND) {
            defer(2 * SECOND)
        } else {
            approve()
        }
    });
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    harness.run_for(SECOND);
    let rescheduled_at = harness.now;
    harness.document(&[ScheduledEvent {
        not_before: Some((t0() + 900 * SECOND).system_time()),
        ..reboot
    }]);
    harness.run_for(10 * SECOND);
    assert_eq!(
        calls_text(&harness),
        "E1 lb-drain prepare, E1 graceful-shutdown prepare, E1 graceful-shutdown prepare, E1 graceful-shutdown prepare",
        "only graceful-shutdown is asked again"
    );
    let approvals = harness.approvals();
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert_eq!(
        approvals[1].0,
        rescheduled_at + 2 * SECOND,
        "sent again once it approved"
    );
}

#[test]
fn an_id_listed_again_while_it_recovers_is_handled_after_the_recovery() {
    let mut harness = Harness::new(
        &[("p", "subscribe = [\"*\"]\nbudget = \"1s\"\n")],
        PolicyConfig::default(),
    );
    harness.script("p", |call| match (call.phase, call.attempt) {
        (CallPhase::Prepare, _) => defer(60 * SECOND),
        (_, 1) => reply(AnswerOutcome::Trap, Duration::ZERO),
        _ => approve(),
    });
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    harness.document(&[]);
    // Recovery failed once and waits to be retried; the id comes back meanwhile.
    harness.document(std::slice::from_ref(&reboot));
    let progress = &harness.pipeline.state().events["E1"];
    assert!(progress.is_ended(), "the recovery was overwritten");
    assert!(progress.relisted.is_some());
    harness.run_for(10 * SECOND);
    assert_eq!(
        calls_text(&harness),
        "E1 p prepare, E1 p ended-without-start, E1 p ended-without-start, E1 p prepare"
    );
    let progress = &harness.pipeline.state().events["E1"];
    assert_eq!(progress.lifecycle, Lifecycle::Scheduled);
    assert_eq!(
        progress.plugin(&PluginName::from("p")).prepare_attempts,
        1,
        "a fresh record"
    );
}

#[test]
fn a_plugin_hears_the_new_event_before_the_old_one_ends_and_one_call_at_a_time() {
    let mut harness = Harness::new(PAIR, PolicyConfig::default());
    harness.script("lb-drain", |call| match call.phase {
        CallPhase::Prepare => defer(60 * SECOND),
        _ => approve(),
    });
    let old = event("A", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&old));
    harness.hold_answers();
    // One document: A is canceled, B appears.
    harness.document(&[event("B", EventType::Reboot, t0(), 300 * SECOND)]);
    let mut answered = Vec::new();
    loop {
        let round = harness.answer_held();
        if round.is_empty() {
            break;
        }
        let mut plugins: Vec<&str> = round.iter().map(|c| c.plugin.as_str()).collect();
        plugins.sort_unstable();
        let in_flight = plugins.len();
        plugins.dedup();
        assert_eq!(
            in_flight,
            plugins.len(),
            "two calls to one plugin at once: {round:?}"
        );
        answered.extend(round);
    }
    let drain: Vec<String> = answered
        .iter()
        .filter(|c| c.plugin == "lb-drain")
        .map(|c| format!("{} {}", c.event_id, c.phase))
        .collect();
    assert_eq!(
        drain,
        ["B prepare", "A ended-without-start"],
        "hold before release"
    );
}

#[test]
fn a_batch_refused_with_400_is_retried_one_by_one_and_vanished_ids_are_dropped() {
    // No plugin, and the policy approves such events: both are due in one round.
    let mut harness = Harness::new(&[], unsubscribed_approved());
    harness.imds_unknown.insert("E1".to_owned());
    let stale = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    let fresh = event("E2", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(&[stale, fresh.clone()]);
    let ids = |approvals: Vec<(ImdsTime, Vec<EventId>)>| -> Vec<Vec<EventId>> {
        approvals.into_iter().map(|(_, ids)| ids).collect()
    };
    let owned = |ids: &[&str]| ids.iter().map(|id| EventId::from(*id)).collect::<Vec<_>>();
    assert_eq!(
        ids(harness.approvals()),
        [owned(&["E1", "E2"]), owned(&["E1"]), owned(&["E2"])],
        "after the 400, each id alone"
    );
    assert!(matches!(
        harness.pipeline.state().events["E2"].approval,
        Approval::Sent { .. }
    ));
    // The stale id is gone from the next document: it is not retried.
    harness.document(&[fresh]);
    harness.run_for(10 * SECOND);
    assert_eq!(
        ids(harness.approvals()).len(),
        3,
        "{:?}",
        harness.approvals()
    );
}

#[test]
fn a_batch_that_failed_with_a_server_error_is_sent_again_whole() {
    // No plugin, and the policy approves such events: both are due in one round.
    let mut harness = Harness::new(&[], unsubscribed_approved());
    harness.imds_accepts = false;
    harness.document(&[
        event("E1", EventType::Reboot, t0(), 300 * SECOND),
        event("E2", EventType::Reboot, t0(), 300 * SECOND),
    ]);
    harness.imds_accepts = true;
    harness.run_for(5 * SECOND);
    let approvals = harness.approvals();
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert_eq!(
        approvals[1],
        (t0() + APPROVAL_RETRY, approvals[0].1.clone())
    );
}

fn unsubscribed_approved() -> PolicyConfig {
    PolicyConfig {
        approve_unsubscribed: true,
        ..PolicyConfig::default()
    }
}
