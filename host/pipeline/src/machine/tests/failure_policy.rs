//! The plugin failure policy (`on-failure`) and the crash-loop quarantine on the fake clock:
//! what a failed call means for the approval, when a plugin is quarantined, what it is
//! still asked, and how a new version lifts it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use forewarn_events::EventId;

use super::*;
use crate::scheduler::CallReply;
use crate::test_harness::roster;

/// How a scripted plugin answers every call.
type Scripted = fn(&PlannedCall) -> CallReply;

/// Trap on every call.
fn trap(_: &PlannedCall) -> CallReply {
    reply(AnswerOutcome::Trap, Duration::ZERO)
}

/// The default policy preparing at once, quarantining after `failures` within `window`.
fn quarantine_after(failures: u32, window: Duration) -> PolicyConfig {
    PolicyConfig {
        quarantine_after_failures: failures,
        quarantine_window: window,
        ..at_once()
    }
}

/// The calls `plugin` got, by phase, in order.
fn calls_of(harness: &Harness, plugin: &str) -> Vec<CallPhase> {
    harness
        .call_order()
        .into_iter()
        .filter(|(name, _)| name == plugin)
        .map(|(_, phase)| phase)
        .collect()
}

fn quarantines(harness: &Harness) -> Vec<QuarantinedPlugin> {
    timeline(harness)
        .into_iter()
        .filter_map(|entry| match entry {
            TimelineEntry::PluginQuarantined(quarantined) => Some(quarantined),
            _ => None,
        })
        .collect()
}

fn not_approved_reasons(harness: &Harness) -> Vec<String> {
    timeline(harness)
        .into_iter()
        .filter_map(|entry| match entry {
            TimelineEntry::NotApproved { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_failure_holds_by_default_counts_as_consent_under_approve_and_a_defer_always_holds() {
    // (on-failure, how the plugin answers) → approved at once?
    let rows: &[(&str, Scripted, bool)] = &[
        ("", trap, false),
        ("on-failure = \"hold\"", trap, false),
        ("on-failure = \"approve\"", trap, true),
        (
            "on-failure = \"approve\"",
            |_| reply(AnswerOutcome::BudgetExceeded, Duration::ZERO),
            true,
        ),
        (
            "on-failure = \"approve\"",
            |_| reply(AnswerOutcome::MemoryExceeded, Duration::ZERO),
            true,
        ),
        (
            "on-failure = \"approve\"",
            |_| reply(AnswerOutcome::Instantiation, Duration::ZERO),
            true,
        ),
        ("on-failure = \"approve\"", |_| defer(2 * SECOND), false),
    ];
    for (manifest, answer, approved) in rows {
        let mut harness = Harness::new(&[("advisory", manifest), ("guard", "")], at_once());
        harness.script("advisory", *answer);
        let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
        harness.document(std::slice::from_ref(&reboot));
        harness.run_for(30 * SECOND);
        assert_eq!(
            !harness.approvals().is_empty(),
            *approved,
            "{manifest:?}: {:?}",
            harness.call_order()
        );
        let asked = calls_of(&harness, "advisory").len();
        if *approved {
            assert_eq!(asked, 1, "{manifest:?}: consent is not asked again");
        } else {
            assert!(asked > 1, "{manifest:?}: asked again ({asked})");
        }
    }
}

#[test]
fn n_failures_in_the_window_quarantine_a_plugin_that_then_holds_without_being_called() {
    let policy = quarantine_after(3, 60 * SECOND);
    let mut harness = Harness::new(&[("crashy", ""), ("guard", "")], policy);
    harness.script("crashy", trap);
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    harness.run_for(120 * SECOND);
    let failed_at: Vec<ImdsTime> = harness
        .calls()
        .into_iter()
        .filter(|(_, plugin, ..)| plugin == "crashy")
        .map(|(at, ..)| at)
        .collect();
    assert_eq!(
        failed_at,
        [
            t0(),
            t0() + scheduler::FAILURE_RETRY,
            t0() + 2 * scheduler::FAILURE_RETRY
        ],
        "three calls, then none"
    );
    let quarantined = quarantines(&harness);
    assert_eq!(quarantined.len(), 1);
    assert_eq!(quarantined[0].plugin, "crashy");
    assert_eq!(quarantined[0].failures, 3);
    assert_eq!(
        quarantined[0].since_unix_ms,
        t0() + 2 * scheduler::FAILURE_RETRY
    );
    assert_eq!(harness.pipeline.quarantined(), quarantined);
    assert!(harness.approvals().is_empty(), "held until NotBefore");
    let reasons = not_approved_reasons(&harness);
    assert_eq!(reasons.len(), 1, "said once: {reasons:?}");
    assert!(
        reasons[0].contains("held by quarantined plugin crashy"),
        "{reasons:?}"
    );
    // Nothing wakes the loop for the quarantined plugin: the next timeout is the deadline.
    let deadline = scheduler::deadline(&reboot, at_once().safety_margin());
    assert_eq!(harness.pipeline.poll_timeout(), deadline);
}

#[test]
fn the_window_counts_on_the_clock_passed_in() {
    // Failures 5 s apart never reach 3 within 8 s: the plugin is asked until the end.
    let mut harness = Harness::new(&[("crashy", "")], quarantine_after(3, 8 * SECOND));
    harness.script("crashy", trap);
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(60 * SECOND);
    assert!(quarantines(&harness).is_empty());
    assert!(calls_of(&harness, "crashy").len() >= 12);
    // The same failures within a 12 s window quarantine it at the third.
    let mut harness = Harness::new(&[("crashy", "")], quarantine_after(3, 12 * SECOND));
    harness.script("crashy", trap);
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(60 * SECOND);
    assert_eq!(quarantines(&harness).len(), 1);
    assert_eq!(calls_of(&harness, "crashy").len(), 3);
}

#[test]
fn a_quarantined_plugin_under_approve_stops_holding_and_is_not_called() {
    let policy = quarantine_after(2, 60 * SECOND);
    let mut harness = Harness::new(
        &[("notify", "on-failure = \"approve\""), ("guard", "")],
        policy,
    );
    harness.script("notify", trap);
    let first = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&first));
    let second = event("E2", EventType::Reboot, t0(), 300 * SECOND);
    harness.run_for(SECOND);
    harness.document(&[first.clone(), second.clone()]);
    assert_eq!(quarantines(&harness).len(), 1, "the second failure");
    assert_eq!(calls_of(&harness, "notify").len(), 2);
    harness.run_for(SECOND);
    let third = event("E3", EventType::Reboot, harness.now, 300 * SECOND);
    harness.document(&[first, second, third]);
    harness.run_for(10 * SECOND);
    assert_eq!(calls_of(&harness, "notify").len(), 2, "not called for E3");
    let approved: BTreeSet<EventId> = harness
        .approvals()
        .into_iter()
        .flat_map(|(_, ids)| ids)
        .collect();
    assert_eq!(
        approved,
        BTreeSet::from(["E1".into(), "E2".into(), "E3".into()])
    );
    assert!(not_approved_reasons(&harness).is_empty());
}

#[test]
fn a_quarantined_plugin_is_not_told_of_the_start_and_gets_one_recovery_call() {
    let policy = quarantine_after(2, 60 * SECOND);
    let mut harness = Harness::new(&[("crashy", ""), ("guard", "")], policy);
    harness.script("crashy", trap);
    let reboot = event("E1", EventType::Reboot, t0(), 30 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    harness.run_for(40 * SECOND);
    assert_eq!(quarantines(&harness).len(), 1);
    harness.document(&[started(&reboot)]);
    harness.run_for(5 * SECOND);
    harness.document(&[]);
    harness.run_for(60 * SECOND);
    assert_eq!(
        calls_of(&harness, "crashy"),
        [
            CallPhase::Prepare,
            CallPhase::Prepare,
            CallPhase::EndedAfterStart
        ],
        "no started call, one recovery call that is not retried"
    );
    assert_eq!(
        calls_of(&harness, "guard"),
        [
            CallPhase::Prepare,
            CallPhase::Started,
            CallPhase::EndedAfterStart
        ]
    );
    assert!(
        harness.pipeline.state().events.is_empty(),
        "the event is handled to the end"
    );
}

#[test]
fn a_new_version_lifts_the_quarantine_and_the_same_version_does_not() {
    let policy = quarantine_after(2, 60 * SECOND);
    let plugins = [("crashy", ""), ("guard", "")];
    let mut harness = Harness::new(&plugins, policy);
    harness.script("crashy", trap);
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(20 * SECOND);
    assert_eq!(quarantines(&harness).len(), 1);
    // Another reload of the same files: still quarantined, still not called.
    harness.script("crashy", |_| approve());
    harness.input(Input::Plugins(Arc::new(roster(&plugins))));
    harness.run_for(20 * SECOND);
    assert_eq!(calls_of(&harness, "crashy").len(), 2);
    assert!(harness.approvals().is_empty());
    // A new component: lifted, asked again at once, and the approval goes out.
    let mut fixed = roster(&plugins);
    fixed.set_versions(&BTreeMap::from([("crashy".into(), "fixed".into())]));
    let reloaded_at = harness.now;
    harness.input(Input::Plugins(Arc::new(fixed)));
    harness.run_for(SECOND);
    assert!(timeline(&harness).iter().any(
        |entry| matches!(entry, TimelineEntry::QuarantineLifted { plugin } if plugin == "crashy")
    ));
    assert!(harness.pipeline.quarantined().is_empty());
    assert_eq!(calls_of(&harness, "crashy").len(), 3);
    assert_eq!(harness.approvals().len(), 1);
    assert_eq!(harness.approvals()[0].0, reloaded_at);
}

#[test]
fn a_load_error_holds_unless_its_manifest_says_approve() {
    for advisory in [false, true] {
        let mut harness = Harness::new(&[("guard", "")], at_once());
        let file = PathBuf::from("/plugins/notify.wasm");
        let mut failing = roster(&[("guard", "")]);
        failing.set_load_errors(BTreeMap::from([(file.clone(), "not a component".into())]));
        if advisory {
            failing.set_advisory_load_errors(BTreeSet::from([file]));
        }
        harness.input(Input::Plugins(Arc::new(failing)));
        harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
        assert_eq!(
            !harness.approvals().is_empty(),
            advisory,
            "advisory {advisory}"
        );
    }
}

#[test]
fn under_approve_only_a_failed_prepare_is_consent() {
    use crate::roster::FailurePolicy;
    use crate::scheduler::record_reply;

    // (phase, outcome, policy) → (prepared, retry pending)
    let rows = [
        (
            CallPhase::Prepare,
            AnswerOutcome::Trap,
            FailurePolicy::Approve,
            (true, false),
        ),
        (
            CallPhase::Prepare,
            AnswerOutcome::Trap,
            FailurePolicy::Hold,
            (false, true),
        ),
        (
            CallPhase::Prepare,
            AnswerOutcome::Defer,
            FailurePolicy::Approve,
            (false, true),
        ),
        (
            CallPhase::Prepare,
            AnswerOutcome::Approve,
            FailurePolicy::Hold,
            (true, false),
        ),
        // A failed recovery is retried whatever the policy.
        (
            CallPhase::EndedAfterStart,
            AnswerOutcome::Trap,
            FailurePolicy::Approve,
            (false, true),
        ),
    ];
    for (phase, outcome, policy, (prepared, retried)) in rows {
        let mut progress = EventProgress::new(
            event("E1", EventType::Reboot, t0(), 300 * SECOND),
            Handling::Prepare {
                affects_this_vm: true,
            },
            Lifecycle::Scheduled,
        );
        progress
            .plugin_mut(&PluginName::from("p"))
            .recovery_attempts = 1;
        let answer = reply(outcome, SECOND);
        record_reply(
            &mut progress,
            &PluginName::from("p"),
            phase,
            &answer,
            t0(),
            SECOND,
            policy,
        );
        let own = progress.plugin(&PluginName::from("p"));
        let row = format!("{phase} {outcome} {policy}");
        assert_eq!(own.prepared, prepared, "{row}");
        assert_eq!(own.retry_at_unix_ms.is_some(), retried, "{row}");
    }
}
