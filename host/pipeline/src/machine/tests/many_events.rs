//! The pipeline with many events listed: a round visits what changed, not every event; a
//! plugin that is free again goes to the event that starts first; and events whose
//! NotBefore or type forewarn cannot read are prepared at once.

use std::sync::Arc;
use std::time::Duration;

use forewarn_imds::{EventId, EventType, PluginName, parse_document};

use super::*;
use crate::state::CallPhase;
use crate::test_harness::{Harness, approve, defer, event, t0};

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);

/// `count` Reboots for this VM, 15 minutes ahead, ids `reboot-0000`, ….
fn reboots(count: usize) -> Vec<ScheduledEvent> {
    (0..count)
        .map(|index| {
            event(
                &format!("reboot-{index:04}"),
                EventType::Reboot,
                t0(),
                15 * MINUTE,
            )
        })
        .collect()
}

#[test]
fn an_answer_among_a_thousand_events_visits_only_what_it_changed() {
    let mut harness = Harness::new(&[("slow", "subscribe = [\"Reboot\"]\n")], at_once());
    // Every event is asked once, one call at a time (one plugin), then again in 10 minutes.
    harness.script("slow", |_| defer(10 * MINUTE));
    let events = reboots(1_000);
    harness.document(&events);
    let calls = harness.calls().len();
    assert_eq!(calls, 1_000, "each event asked once");
    let visits = harness.pipeline.visits;
    // The first round visits every event (each new); after it, each answer visits the event
    // it answered and the next one waiting for the plugin.
    assert!(
        visits <= 1_000 + 3 * 1_000,
        "{visits} visits for {calls} answers: a round visited events nothing changed"
    );
    // The same document again, and a quiet second: nothing is visited.
    let before = harness.pipeline.visits;
    harness.document(&events);
    harness.run_for(SECOND);
    assert_eq!(
        harness.pipeline.visits, before,
        "nothing changed, nothing visited"
    );
}

#[test]
fn a_plugin_free_again_goes_to_the_event_that_starts_first() {
    let mut harness = Harness::new(&[("stop", "subscribe = [\"*\"]\n")], at_once());
    harness.hold_answers();
    let mut listed = reboots(20);
    harness.document(&listed);
    let first = harness.calls();
    assert_eq!(first.len(), 1, "one call at a time: {first:?}");
    // A Preempt 30 s ahead appears while the plugin is busy with a Reboot; its id sorts
    // after every Reboot's.
    listed.push(event("zz-preempt", EventType::Preempt, t0(), 30 * SECOND));
    harness.document(&listed);
    harness.answer_held();
    let order: Vec<EventId> = harness
        .log
        .iter()
        .filter_map(|executed| match &executed.action {
            Action::Call(call) => Some(call.event_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        order[1], "zz-preempt",
        "the Preempt goes before the Reboots listed with it: {order:?}"
    );
}

/// A document of the real wire format, for `vm-a`.
fn parsed(events: &str) -> Document {
    parse_document(&format!(
        r#"{{"DocumentIncarnation": 1, "Events": [{events}]}}"#
    ))
    .expect("a document")
}

#[test]
fn an_event_whose_not_before_cannot_be_read_is_prepared_at_once_and_approved() {
    // The default lead time: an event 15 minutes ahead would be prepared at once too, so
    // the plugin here asks for a 10-minute lead; a readable NotBefore 30 min ahead waits.
    let mut harness = Harness::new(
        &[("drain", "subscribe = [\"Reboot\"]\nprepare-time = \"1s\"\n")],
        PolicyConfig {
            prepare_lead_time: LeadTime::Fixed(10 * MINUTE),
            ..PolicyConfig::default()
        },
    );
    for odd in [
        "1649716018",
        "-1",
        "garbage",
        "2022-02-30T10:00:00Z",
        "2022-04-11",
    ] {
        let id = format!("odd-{odd}");
        let document = parsed(&format!(
            r#"{{"EventId": "{id}", "EventType": "Reboot", "EventStatus": "Scheduled", "Resources": ["vm-a"], "NotBefore": "{odd}"}}"#
        ));
        harness.input(Input::Document(Arc::new(document)));
        let called = harness
            .log
            .iter()
            .any(|executed| matches!(&executed.action, Action::Call(call) if call.event_id == id && call.phase == CallPhase::Prepare && executed.at == harness.now));
        assert!(called, "{odd:?}: not prepared at once");
        let progress = &harness.pipeline.state().events[id.as_str()];
        assert_eq!(
            progress.event.not_before_time(),
            Some(harness.now),
            "{odd:?}"
        );
        assert_eq!(
            progress
                .event
                .unreadable(forewarn_events::EventField::NotBefore),
            Some(odd)
        );
        harness.run_for(SECOND);
    }
    assert_eq!(harness.approvals().len(), 5, "each approved once prepared");
}

#[test]
fn an_unknown_event_type_is_prepared_by_every_plugin_that_prepares_for_any_type() {
    let mut harness = Harness::new(
        &[
            ("drain", "subscribe = [\"Reboot\"]\n"),
            ("stop", "subscribe = [\"Preempt\", \"Terminate\"]\n"),
            ("idle", "subscribe = []\n"),
        ],
        at_once(),
    );
    harness.document(&[event("odd", EventType::Unknown, t0(), 5 * MINUTE)]);
    let mut called: Vec<PluginName> = harness
        .calls()
        .into_iter()
        .map(|(_, plugin, _, _, _)| plugin)
        .collect();
    called.sort();
    assert_eq!(called, ["drain", "stop"]);
    assert_eq!(harness.approvals().len(), 1);
    let _ = approve();
}
