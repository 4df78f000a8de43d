//! The pipeline on a fake clock: ordering, deferral, budgets from NotBefore, recovery
//! order, approval, the journal-first rule, and resuming from a journaled state (resuming
//! from a journal the forewarn before this pipeline wrote is tested beside the journal's
//! schema, `forewarn-host`'s `daemon::journal_schema`).

use std::time::Duration;

use forewarn_events::{EventType, PluginName, ScheduledEvent};

use super::*;
use crate::approval::post::APPROVAL_RETRY;
use crate::approval::{BarrierRequest, BarrierVerdict};
use crate::policy::{LeadTime, PolicyConfig};
use crate::state::{AnswerOutcome, CallPhase};
use crate::test_harness::{Harness, approve, defer, event, reply, started, t0};

const SECOND: Duration = Duration::from_secs(1);

/// lb-drain, then checkpoint (after lb-drain), then graceful-shutdown (after both).
const CHAIN: &[(&str, &str)] = &[
    (
        "graceful-shutdown",
        "subscribe = [\"*\"]\nafter = [\"lb-drain\", \"checkpoint\"]\nbudget = \"10s\"\n",
    ),
    (
        "checkpoint",
        "subscribe = [\"*\"]\nafter = [\"lb-drain\"]\nbudget = \"10s\"\n",
    ),
    ("lb-drain", "subscribe = [\"*\"]\nbudget = \"10s\"\n"),
];

/// The default policy, but preparing as soon as an event appears (most tests' events are
/// announced 5 minutes ahead, beyond the automatic lead time).
fn at_once() -> PolicyConfig {
    PolicyConfig {
        prepare_lead_time: LeadTime::Fixed(Duration::from_secs(3600)),
        ..PolicyConfig::default()
    }
}

/// The timeline entries emitted so far.
fn timeline(harness: &Harness) -> Vec<TimelineEntry> {
    harness
        .log
        .iter()
        .filter_map(|executed| match &executed.action {
            Action::Emit(entry) => Some(entry.clone()),
            _ => None,
        })
        .collect()
}

fn names(order: &[(String, CallPhase)], phase: CallPhase) -> Vec<&str> {
    order
        .iter()
        .filter(|(_, p)| *p == phase)
        .map(|(name, _)| name.as_str())
        .collect()
}

#[test]
fn plugins_prepare_in_dependency_order_and_recover_in_reverse() {
    let mut harness = Harness::new(CHAIN, at_once());
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    assert_eq!(
        names(&harness.call_order(), CallPhase::Prepare),
        ["lb-drain", "checkpoint", "graceful-shutdown"]
    );
    assert_eq!(
        harness.approvals().len(),
        1,
        "approved once every plugin approved"
    );
    harness.document(&[started(&reboot)]);
    harness.document(&[]);
    let order = harness.call_order();
    assert_eq!(
        names(&order, CallPhase::Started),
        ["lb-drain", "checkpoint", "graceful-shutdown"]
    );
    assert_eq!(
        names(&order, CallPhase::EndedAfterStart),
        ["graceful-shutdown", "checkpoint", "lb-drain"]
    );
    assert!(
        harness.pipeline.state().events.is_empty(),
        "forgotten once recovered"
    );
}

#[test]
fn a_preempt_first_seen_started_still_asks_each_plugin_to_prepare_once() {
    // forewarn missed the Scheduled phase (down, or IMDS unreadable): the VM still runs, so
    // each plugin is asked to prepare (the stop action) before it hears of the start.
    let mut harness = Harness::new(CHAIN, at_once());
    harness.script("lb-drain", |_| defer(2 * SECOND));
    let preempt = event("E1", EventType::Preempt, t0(), 30 * SECOND);
    harness.document(&[started(&preempt)]);
    harness.run_for(10 * SECOND);
    let order = harness.call_order();
    for plugin in ["lb-drain", "checkpoint", "graceful-shutdown"] {
        let phases: Vec<CallPhase> = order
            .iter()
            .filter(|(name, _)| name == plugin)
            .map(|(_, phase)| *phase)
            .collect();
        assert_eq!(
            phases,
            [CallPhase::Prepare, CallPhase::Started],
            "{plugin}: once, even after a deferral"
        );
    }
    assert!(
        harness.approvals().is_empty(),
        "a started event is not approved"
    );
}

#[test]
fn a_scheduled_preempt_without_not_before_gets_every_turn_at_once() {
    // NotBefore blank while Scheduled: the event may start at any moment, so the stop
    // action does not wait for lb-drain's drain.
    let mut harness = Harness::new(CHAIN, at_once());
    harness.script("lb-drain", |_| defer(5 * SECOND));
    let preempt = ScheduledEvent {
        not_before: None,
        ..event("E1", EventType::Preempt, t0(), 30 * SECOND)
    };
    harness.document(&[preempt]);
    let first_round: Vec<PluginName> = harness
        .calls()
        .into_iter()
        .filter(|(at, _, phase, _, _)| *at == t0() && *phase == CallPhase::Prepare)
        .map(|(_, plugin, _, _, _)| plugin)
        .collect();
    assert!(
        first_round.contains(&"graceful-shutdown".into()),
        "{first_round:?}"
    );
}

#[test]
fn a_reboot_first_seen_started_is_only_told_it_started() {
    // The VM comes back from a Reboot (a hardware failure's): nothing to stop at the last
    // moment, as before.
    let mut harness = Harness::new(CHAIN, at_once());
    let reboot = event("E1", EventType::Reboot, t0(), 30 * SECOND);
    harness.document(&[started(&reboot)]);
    let order = harness.call_order();
    assert!(names(&order, CallPhase::Prepare).is_empty(), "{order:?}");
    assert_eq!(names(&order, CallPhase::Started).len(), 3);
}

#[test]
fn a_later_plugin_waits_while_an_earlier_one_defers() {
    let mut harness = Harness::new(CHAIN, at_once());
    harness.script("lb-drain", |call| {
        if call.attempt < 3 {
            defer(2 * SECOND)
        } else {
            approve()
        }
    });
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(10 * SECOND);
    let calls = harness.calls();
    let drain: Vec<_> = calls.iter().filter(|c| c.1 == "lb-drain").collect();
    assert_eq!(drain.len(), 3);
    // Asked again after the wait the deferral named, not sooner.
    assert_eq!(drain[1].0, drain[0].0 + 2 * SECOND);
    assert_eq!(drain[2].0, drain[1].0 + 2 * SECOND);
    let first_checkpoint = calls
        .iter()
        .find(|c| c.1 == "checkpoint")
        .expect("checkpoint asked");
    assert!(
        first_checkpoint.0 >= drain[2].0,
        "checkpoint was asked before lb-drain approved"
    );
    assert_eq!(harness.approvals().len(), 1);
}

#[test]
fn budgets_keep_a_short_notice_floor_and_retries_are_pulled_in() {
    // (manifest budget, notice, safety margin, plugin's retry-after) →
    // (first budget, second call's delay after the first)
    let rows = [
        ("10s", 300, 2_000, 60, 10 * SECOND, 60 * SECOND),
        // 6 s to the deadline: the call still gets the 10 s short-notice floor, and the
        // retry comes 1 s before the deadline.
        ("10s", 8, 2_000, 60, 10 * SECOND, 5 * SECOND),
        ("30s", 22, 2_000, 60, 20 * SECOND, 19 * SECOND),
        ("10s", 30, 5_000, 1, 10 * SECOND, SECOND),
        ("2s", 30, 2_000, 0, 2 * SECOND, Duration::from_millis(100)),
    ];
    for (budget, notice, margin_ms, retry_after, first_budget, second_after) in rows {
        let manifest = format!("subscribe = [\"*\"]\nbudget = \"{budget}\"\n");
        let policy = PolicyConfig {
            safety_margin_ms: margin_ms,
            ..at_once()
        };
        let mut harness = Harness::new(&[("p", &manifest)], policy);
        harness.script("p", move |call| {
            if call.attempt == 1 {
                defer(Duration::from_secs(retry_after))
            } else {
                approve()
            }
        });
        harness.document(&[event(
            "E1",
            EventType::Preempt,
            t0(),
            Duration::from_secs(notice),
        )]);
        harness.run_for(Duration::from_secs(notice));
        let calls = harness.calls();
        let row = format!(
            "budget {budget}, notice {notice}s, margin {margin_ms}ms, retry {retry_after}s"
        );
        assert_eq!(calls[0].4, first_budget, "{row}");
        assert_eq!(
            calls[1].0.checked_duration_since(calls[0].0),
            Some(second_after),
            "{row}"
        );
        let deadline = t0() + Duration::from_secs(notice) - Duration::from_millis(margin_ms);
        assert!(
            calls[1].0 < deadline,
            "{row}: asked again only after the deadline"
        );
    }
}

#[test]
fn past_the_deadline_plugins_are_still_asked_and_the_approval_still_goes_out() {
    let mut harness = Harness::new(CHAIN, at_once());
    // checkpoint needs 12 s; the Preempt's NotBefore is at 10 s and it stays Scheduled.
    harness.script("checkpoint", |call| {
        if call.attempt >= 13 {
            approve()
        } else {
            defer(SECOND)
        }
    });
    harness.document(&[event("E1", EventType::Preempt, t0(), 10 * SECOND)]);
    // The chain needs 30 s and 8 s are left: every plugin's turn has come at once, so the
    // stop (graceful-shutdown) runs at the notice, without waiting for the others.
    let first: Vec<(ImdsTime, PluginName)> = harness
        .calls()
        .into_iter()
        .map(|call| (call.0, call.1))
        .collect();
    assert_eq!(
        first,
        [
            (t0(), "lb-drain".into()),
            (t0(), "checkpoint".into()),
            (t0(), "graceful-shutdown".into()),
        ]
    );
    harness.run_for(20 * SECOND);
    let checkpoint_calls: Vec<ImdsTime> = harness
        .calls()
        .into_iter()
        .filter(|call| call.1 == "checkpoint")
        .map(|call| call.0)
        .collect();
    assert_eq!(checkpoint_calls.len(), 13, "asked until it approved");
    assert!(
        checkpoint_calls[12] > t0() + 10 * SECOND,
        "asked after NotBefore"
    );
    let approvals = harness.approvals();
    assert_eq!(approvals.len(), 1, "approved once everyone approved");
    assert_eq!(approvals[0].0, checkpoint_calls[12]);
    let entries = timeline(&harness);
    let shortened: Vec<(&str, &[PluginName])> = entries
        .iter()
        .filter_map(|entry| match entry {
            TimelineEntry::TurnShortened {
                plugin, cut_short, ..
            } => Some((plugin.as_str(), cut_short.as_slice())),
            _ => None,
        })
        .collect();
    assert_eq!(
        shortened,
        [
            ("checkpoint", &["lb-drain".into()][..]),
            (
                "graceful-shutdown",
                &["lb-drain".into(), "checkpoint".into()][..]
            ),
        ]
    );
    let late: Vec<&TimelineEntry> = entries
        .iter()
        .filter(|entry| matches!(entry, TimelineEntry::PreparingLate { .. }))
        .collect();
    assert_eq!(
        late,
        [&TimelineEntry::PreparingLate {
            event_id: "E1".into(),
            still_preparing: vec!["checkpoint".into()],
        }],
        "said once"
    );
}

#[test]
fn an_event_far_ahead_is_prepared_at_the_lead_time() {
    let mut harness = Harness::new(CHAIN, PolicyConfig::default());
    // A degraded-hardware Redeploy, announced two hours ahead.
    harness.document(&[event("E1", EventType::Reboot, t0(), 7200 * SECOND)]);
    assert!(harness.calls().is_empty(), "nothing prepared 2 h ahead");
    assert!(matches!(
        timeline(&harness).as_slice(),
        [
            TimelineEntry::Transition { .. },
            TimelineEntry::Handling { .. },
            TimelineEntry::PreparationWaits { .. }
        ]
    ));
    harness.run_for(7200 * SECOND);
    // auto: the chain needs 30 s, plus the 2 s margin, plus a minute, at least 15 minutes.
    let first = harness.calls()[0].0;
    assert_eq!(first, t0() + (7200 - 900) * SECOND);
    assert_eq!(harness.approvals().len(), 1);
}

#[test]
fn a_failed_call_is_retried_after_the_failure_wait_and_counts_as_a_defer() {
    let mut harness = Harness::new(
        &[("p", "subscribe = [\"*\"]\nbudget = \"1s\"\n")],
        at_once(),
    );
    harness.script("p", |call| {
        if call.attempt == 1 {
            reply(AnswerOutcome::Trap, Duration::ZERO)
        } else {
            approve()
        }
    });
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(10 * SECOND);
    let calls = harness.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].0.checked_duration_since(calls[0].0),
        Some(scheduler::FAILURE_RETRY)
    );
    assert_eq!(harness.approvals().len(), 1);
}

#[test]
fn every_call_and_approval_is_journaled_before_it_is_acted_on() {
    let mut harness = Harness::new(CHAIN, at_once());
    harness.script("checkpoint", |call| {
        if call.attempt == 1 {
            defer(SECOND)
        } else {
            approve()
        }
    });
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    harness.run_for(5 * SECOND);
    harness.document(&[started(&reboot)]);
    harness.document(&[]);
    // `durable`: what a Persist put on disk before the actions after it; `grouped`: what a
    // PersistGrouped handed the journal, written within the group window.
    let mut durable: Option<Arc<DaemonState>> = None;
    let mut grouped: Option<Arc<DaemonState>> = None;
    let mut reasks = 0;
    for executed in &harness.log {
        match &executed.action {
            Action::Persist(state) => {
                durable = Some(state.clone());
                grouped = Some(state.clone());
            }
            Action::PersistGrouped(state) => grouped = Some(state.clone()),
            Action::Call(call) => {
                let recorded = |state: &Arc<DaemonState>| {
                    let own = state.events[&call.event_id].plugin(&call.plugin);
                    match call.phase {
                        CallPhase::Prepare => own.prepare_attempts,
                        CallPhase::Started => 1,
                        _ => own.recovery_attempts,
                    }
                };
                let on_disk = durable.as_ref().expect("a call before any journal write");
                let handed = grouped.as_ref().expect("a call before any journal write");
                assert_eq!(
                    recorded(handed),
                    call.attempt,
                    "{call:?} not journaled first"
                );
                if call.attempt == 1 || call.phase == CallPhase::Started {
                    assert_eq!(
                        recorded(on_disk),
                        call.attempt,
                        "{call:?} not durable first"
                    );
                } else {
                    // Asked again after a deferral: its first attempt is on disk.
                    assert!(recorded(on_disk) >= 1, "{call:?}: no attempt on disk");
                    reasks += 1;
                }
            }
            Action::Approve(ids) => {
                let state = durable
                    .as_ref()
                    .expect("an approval before any journal write");
                for id in ids {
                    assert!(
                        matches!(state.events[id].approval, Approval::Due { .. }),
                        "approval of {id} sent before it was journaled as due"
                    );
                }
            }
            Action::Coordinate(BarrierRequest::Join(event)) => {
                let state = durable.as_ref().expect("a Join before any journal write");
                assert!(
                    matches!(
                        state.events[&event.id].approval,
                        Approval::Coordinating { .. }
                    ),
                    "{} joined the barrier before it was journaled waiting on it",
                    event.id
                );
            }
            Action::ReleaseShutdown(release) => {
                let state = durable
                    .as_ref()
                    .expect("a release before any journal write");
                assert!(
                    state.events.contains_key(release.event_id()),
                    "the shutdown was released before its event was journaled"
                );
            }
            Action::Coordinate(_) | Action::Emit(_) => {}
        }
    }
    assert!(
        reasks > 0,
        "no plugin was asked again: the grouped case is not tested"
    );
}

#[test]
fn a_failed_approval_is_sent_again_after_the_retry_wait() {
    let mut harness = Harness::new(
        &[("p", "subscribe = [\"*\"]\nbudget = \"1s\"\n")],
        at_once(),
    );
    harness.imds_accepts = false;
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    assert_eq!(harness.pipeline.poll_timeout(), Some(t0() + APPROVAL_RETRY));
    harness.imds_accepts = true;
    harness.run_for(5 * SECOND);
    let approvals = harness.approvals();
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert_eq!(approvals[1].0, t0() + APPROVAL_RETRY);
    assert!(matches!(
        harness.pipeline.state().events["E1"].approval,
        Approval::Sent { .. }
    ));
}

#[test]
fn a_restart_resumes_without_preparing_again() {
    let plugins: &[(&str, &str)] = &[
        ("drain", "subscribe = [\"*\"]\nbudget = \"5s\"\n"),
        ("stopper", "subscribe = [\"*\"]\nbudget = \"5s\"\n"),
    ];
    let mut first = Harness::new(plugins, at_once());
    first.script("stopper", |_| defer(3 * SECOND));
    first.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    let journaled = first.persisted.clone().expect("journaled");

    let mut second = Harness::resume(plugins, at_once(), (*journaled).clone(), first.now + SECOND);
    second.run_for(10 * SECOND);
    let calls = second.calls();
    assert!(
        calls.iter().all(|c| c.1 != "drain"),
        "drain prepared again: {calls:?}"
    );
    assert_eq!(calls[0].1, "stopper");
    assert_eq!(calls[0].3, 2, "the attempt count carries over");
    assert_eq!(
        calls[0].0,
        t0() + 3 * SECOND,
        "the journaled retry time is kept"
    );
    assert_eq!(second.approvals().len(), 1);
}

#[test]
fn an_event_canceled_before_approval_is_undone_without_a_start() {
    let mut harness = Harness::new(CHAIN, at_once());
    harness.script("graceful-shutdown", |_| defer(10 * SECOND));
    harness.document(&[event("E1", EventType::Redeploy, t0(), 300 * SECOND)]);
    harness.run_for(SECOND);
    harness.document(&[]);
    let order = harness.call_order();
    assert_eq!(
        names(&order, CallPhase::EndedWithoutStart),
        ["graceful-shutdown", "checkpoint", "lb-drain"]
    );
    assert!(names(&order, CallPhase::EndedAfterStart).is_empty());
    assert!(harness.approvals().is_empty());
}

#[test]
fn an_approved_event_that_vanishes_is_recovered_as_after_a_start() {
    let mut harness = Harness::new(CHAIN, at_once());
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    assert_eq!(harness.approvals().len(), 1);
    harness.document(&[]);
    let order = harness.call_order();
    assert_eq!(names(&order, CallPhase::EndedAfterStart).len(), 3);
    assert!(names(&order, CallPhase::EndedWithoutStart).is_empty());
}

#[test]
fn nothing_new_starts_once_shutdown_began() {
    let mut harness = Harness::new(CHAIN, at_once());
    harness.input(Input::ShutdownStarted);
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    assert!(harness.calls().is_empty());
    assert!(
        harness.persisted.is_some(),
        "the transition is still journaled"
    );
}

/// A coordinated pipeline shown a Reboot naming this VM and vm-b; returns the event.
fn waiting_on_the_barrier() -> (ScheduledEvent, Harness) {
    let mut harness = Harness::coordinated(CHAIN, at_once());
    let mut both = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    both.resources.push("vm-b".into());
    harness.document(std::slice::from_ref(&both));
    (both, harness)
}

fn verdict(harness: &mut Harness, verdict: BarrierVerdict) {
    harness.input(Input::BarrierVerdict {
        event_id: "E1".into(),
        verdict,
    });
}

#[test]
fn an_event_naming_two_vms_waits_for_the_barrier() {
    let (both, mut harness) = waiting_on_the_barrier();
    // Joined once, after the journal recorded it waiting on the barrier.
    assert_eq!(
        harness.barrier_requests(),
        vec![BarrierRequest::Join(Arc::new(both))]
    );
    let join = harness
        .log
        .iter()
        .position(|executed| matches!(executed.action, Action::Coordinate(_)))
        .unwrap_or_default();
    let journaled = harness.log[..join]
        .iter()
        .rev()
        .find_map(|executed| match &executed.action {
            Action::Persist(state) => Some(state.events["E1"].approval.clone()),
            _ => None,
        });
    assert!(
        matches!(journaled, Some(Approval::Coordinating { .. })),
        "the Join before its record: {journaled:?}"
    );
    harness.run_for(5 * SECOND);
    verdict(&mut harness, BarrierVerdict::Wait);
    assert!(
        harness.approvals().is_empty(),
        "approved before the barrier said so"
    );
    let why = "vm-a and vm-b are ready".to_owned();
    verdict(&mut harness, BarrierVerdict::Approve { why });
    assert_eq!(harness.approvals().len(), 1);
    assert_eq!(
        harness.barrier_requests().last(),
        Some(&BarrierRequest::Sent(vec!["E1".into()])),
        "the sent approval is recorded at the barrier"
    );
}

/// Nothing about a waiting barrier depends on rounds or documents: with no input at all
/// for 60 s (IMDS silent), the event stays joined, nothing wakes the pipeline, and the
/// verdict when it comes approves it.
#[test]
fn a_waiting_barrier_survives_60_s_of_imds_silence() {
    let (_, mut harness) = waiting_on_the_barrier();
    harness.run_for(60 * SECOND);
    assert_eq!(
        harness.pipeline.poll_timeout(),
        None,
        "nothing to wake for while the barrier decides"
    );
    let requests = harness.barrier_requests();
    assert!(
        matches!(requests.as_slice(), [BarrierRequest::Join(_)]),
        "one Join, nothing else: {requests:?}"
    );
    let why = "every VM is ready".to_owned();
    verdict(&mut harness, BarrierVerdict::Approve { why });
    assert_eq!(harness.approvals().len(), 1);
}

#[test]
fn an_approval_that_failed_for_an_event_that_then_started_does_not_wake_the_loop() {
    let mut harness = Harness::new(CHAIN, at_once());
    harness.imds_accepts = false;
    let reboot = event("E1", EventType::Reboot, t0(), 300 * SECOND);
    harness.document(std::slice::from_ref(&reboot));
    assert_eq!(
        harness.approvals().len(),
        1,
        "approved, and IMDS refused it"
    );
    harness.document(&[started(&reboot)]);
    // The harness asserts after every round that the next timeout is in the future.
    harness.run_for(10 * SECOND);
    assert_eq!(
        harness.approvals().len(),
        1,
        "not sent again for a started event"
    );
    assert_eq!(harness.pipeline.poll_timeout(), None);
}

mod churn;
mod failure_policy;
mod host_shutdown;
mod journal_durability;
mod many_events;
