//! The operating system's shutdown with no Scheduled Event (docs/operations.md, "A last
//! chance when no event came"): forewarn's own Shutdown event prepared by the plugins that
//! prepare for a type taking the VM down, never approved at IMDS, released when prepared or
//! when the budget ends; a Scheduled Event already preparing this VM is not prepared twice;
//! a cancelled shutdown is undone; after the next start the plugins recover.

use std::time::Duration;

use forewarn_events::{EventType, PluginName};

use super::*;
use crate::host_shutdown::ShutdownRelease;
use crate::test_harness::{Harness, approve, defer, event, t0};

const SECOND: Duration = Duration::from_secs(1);
const BUDGET: Duration = Duration::from_secs(20);

/// `drain` for reboots, `stop` after it for every type, `freeze-only` for Freeze.
const PLUGINS: &[(&str, &str)] = &[
    (
        "drain",
        "subscribe = [\"Reboot\", \"Redeploy\"]\nbudget = \"5s\"\n",
    ),
    (
        "stop",
        "subscribe = [\"*\"]\nafter = [\"drain\"]\nbudget = \"5s\"\n",
    ),
    ("freeze-only", "subscribe = [\"Freeze\"]\nbudget = \"5s\"\n"),
];

fn policy() -> PolicyConfig {
    PolicyConfig {
        prepare_lead_time: crate::policy::LeadTime::Fixed(Duration::from_secs(3600)),
        ..PolicyConfig::default()
    }
}

/// The calls made for `event_id`: (plugin, phase).
fn calls_for(harness: &Harness, event_id: &str) -> Vec<(String, CallPhase)> {
    harness
        .log
        .iter()
        .filter_map(|executed| match &executed.action {
            Action::Call(call) if call.event_id.as_str() == event_id => {
                Some((call.plugin.to_string(), call.phase))
            }
            _ => None,
        })
        .collect()
}

fn own_event_id(harness: &Harness) -> EventId {
    harness
        .pipeline
        .state()
        .events
        .values()
        .find(|progress| progress.event.is_from_operating_system())
        .map(|progress| progress.event.id.clone())
        .expect("forewarn made no Shutdown event")
}

#[test]
fn a_shutdown_with_no_event_prepares_in_order_is_released_and_nothing_is_approved() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.document(&[]);
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(SECOND);
    let own = own_event_id(&harness);
    assert_eq!(
        calls_for(&harness, own.as_str()),
        [
            ("drain".to_owned(), CallPhase::Prepare),
            ("stop".to_owned(), CallPhase::Prepare)
        ],
        "the plugins preparing for a type that takes the VM down, in order; not freeze-only"
    );
    assert_eq!(
        harness.shutdown_releases(),
        [(
            t0(),
            ShutdownRelease::Prepared {
                event_id: own.clone()
            }
        )]
    );
    assert!(
        harness.approvals().is_empty(),
        "a Shutdown is never approved at IMDS"
    );
    let progress = &harness.pipeline.state().events[&own];
    assert!(matches!(progress.approval, Approval::NotAtImds { .. }));
    // Documents without it do not end it: the shutdown is not IMDS's.
    harness.document(&[]);
    harness.run_for(SECOND);
    assert!(harness.pipeline.state().events.contains_key(&own));
    assert_eq!(calls_for(&harness, own.as_str()).len(), 2);
}

#[test]
fn a_hanging_plugin_is_given_up_on_at_the_budget_s_end() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.script("stop", |_| defer(SECOND));
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(BUDGET - SECOND);
    assert!(
        harness.shutdown_releases().is_empty(),
        "released before the budget ended"
    );
    harness.run_for(2 * SECOND);
    let own = own_event_id(&harness);
    assert_eq!(
        harness.shutdown_releases(),
        [(
            t0() + BUDGET,
            ShutdownRelease::BudgetSpent {
                event_id: own,
                unprepared: vec![PluginName::from("stop")],
            }
        )]
    );
}

#[test]
fn a_scheduled_event_already_prepared_is_not_prepared_again() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.document(&[event("E1", EventType::Reboot, t0(), 600 * SECOND)]);
    harness.run_for(SECOND);
    assert_eq!(harness.approvals().len(), 1, "E1 approved at IMDS");
    let calls_before = harness.calls().len();
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(SECOND);
    assert_eq!(harness.calls().len(), calls_before, "nothing ran twice");
    assert_eq!(
        harness.shutdown_releases(),
        [(
            t0() + SECOND,
            ShutdownRelease::AlreadyPrepared {
                event_id: "E1".into()
            }
        )]
    );
}

#[test]
fn a_scheduled_event_still_preparing_is_waited_for_not_doubled() {
    let mut harness = Harness::new(PLUGINS, policy());
    let ready_at = t0() + 5 * SECOND;
    harness.script("stop", move |call| {
        if call.attempt < 3 {
            defer(2 * SECOND)
        } else {
            approve()
        }
    });
    harness.document(&[event("E1", EventType::Reboot, t0(), 600 * SECOND)]);
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(10 * SECOND);
    assert!(
        harness
            .pipeline
            .state()
            .events
            .values()
            .all(|p| !p.event.is_from_operating_system()),
        "forewarn made its own event beside E1's preparation"
    );
    let releases = harness.shutdown_releases();
    assert_eq!(releases.len(), 1);
    assert_eq!(
        releases[0].1,
        ShutdownRelease::AlreadyPrepared {
            event_id: "E1".into()
        }
    );
    assert!(
        releases[0].0 >= ready_at - SECOND,
        "released before E1 was prepared"
    );
}

#[test]
fn a_freeze_in_preparation_does_not_stand_for_the_shutdown() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.script("freeze-only", |_| defer(SECOND));
    harness.document(&[event("F1", EventType::Freeze, t0(), 600 * SECOND)]);
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(SECOND);
    let own = own_event_id(&harness);
    assert_eq!(calls_for(&harness, own.as_str()).len(), 2);
    assert_eq!(
        harness.shutdown_releases(),
        [(t0(), ShutdownRelease::Prepared { event_id: own })]
    );
}

#[test]
fn a_cancelled_shutdown_is_undone_in_reverse_order() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(SECOND);
    let own = own_event_id(&harness);
    harness.input(Input::HostShutdownCancelled);
    harness.run_for(SECOND);
    assert_eq!(
        calls_for(&harness, own.as_str()),
        [
            ("drain".to_owned(), CallPhase::Prepare),
            ("stop".to_owned(), CallPhase::Prepare),
            ("stop".to_owned(), CallPhase::EndedWithoutStart),
            ("drain".to_owned(), CallPhase::EndedWithoutStart),
        ]
    );
    assert!(
        !harness.pipeline.state().events.contains_key(&own),
        "not forgotten"
    );
    // A new shutdown after the cancelled one is prepared afresh.
    harness.input(Input::HostShutdown { budget: BUDGET });
    assert_eq!(harness.shutdown_releases().len(), 2);
}

#[test]
fn after_the_next_start_the_plugins_recover_from_the_shutdown() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(SECOND);
    let own = own_event_id(&harness);
    let journaled = harness.persisted.clone().expect("nothing journaled");
    assert!(
        journaled.events.contains_key(&own),
        "the Shutdown event was not journaled"
    );
    let mut restarted =
        Harness::resume(PLUGINS, policy(), (*journaled).clone(), t0() + 60 * SECOND);
    restarted.document(&[]);
    restarted.run_for(SECOND);
    assert_eq!(
        calls_for(&restarted, own.as_str()),
        [
            ("stop".to_owned(), CallPhase::EndedAfterStart),
            ("drain".to_owned(), CallPhase::EndedAfterStart),
        ]
    );
    assert!(restarted.pipeline.state().events.is_empty());
    assert!(restarted.shutdown_releases().is_empty());
}

#[test]
fn a_scheduled_event_cancelled_while_the_shutdown_waits_for_it_is_replaced_at_once() {
    let mut harness = Harness::new(PLUGINS, policy());
    harness.script("stop", |call| {
        if call.event_id.as_str() == "E1" {
            defer(60 * SECOND)
        } else {
            approve()
        }
    });
    harness.document(&[event("E1", EventType::Reboot, t0(), 600 * SECOND)]);
    harness.input(Input::HostShutdown { budget: BUDGET });
    harness.run_for(SECOND);
    assert!(
        harness.shutdown_releases().is_empty(),
        "released while E1 prepared"
    );
    // Azure cancels E1: the shutdown prepares on its own, in the same round.
    harness.document(&[]);
    let cancelled_at = harness.now;
    let own = own_event_id(&harness);
    assert_eq!(
        calls_for(&harness, own.as_str()),
        [
            ("drain".to_owned(), CallPhase::Prepare),
            ("stop".to_owned(), CallPhase::Prepare)
        ]
    );
    assert_eq!(
        harness.shutdown_releases(),
        [(cancelled_at, ShutdownRelease::Prepared { event_id: own })]
    );
}
