//! The built-in scenarios for what the Scheduled Events docs describe beyond the happy path,
//! played with [`Replay`] at chosen scenario instants: the exact documents served over time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use forewarn_imds::{Document, EventStatus, parse_document};
use forewarn_simulator::{Replay, Scenario, Transition, load_scenario};
use serde_json::Value;

const NEWEST: &str = "2020-07-01";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

fn started() -> SystemTime {
    UNIX_EPOCH + secs(1_000_000)
}

fn builtin(name: &str) -> Scenario {
    load_scenario(name).unwrap_or_else(|error| panic!("{error}"))
}

fn replay(scenario: &Scenario) -> Replay {
    Replay::new(scenario, started(), 1.0)
}

/// The document served at scenario time `at` to a client asking for api-version 2020-07-01.
fn document_at(replay: &mut Replay, at: Duration) -> Document {
    replay.advance(at);
    parse_document(&replay.document(NEWEST)).unwrap()
}

fn status_at(replay: &mut Replay, at: Duration) -> Vec<EventStatus> {
    document_at(replay, at)
        .events
        .iter()
        .map(|event| event.status)
        .collect()
}

/// When `event_id` made `transition`, in scenario ms.
fn transition_ms(replay: &Replay, event_id: &str, transition: Transition) -> Option<u64> {
    replay
        .history()
        .iter()
        .find(|record| record.event_id == event_id && record.transition == transition)
        .map(|record| record.at_scenario_ms)
}

#[test]
fn an_approval_starts_the_event_only_after_start_after_approval() {
    let scenario = builtin("approval-waits-for-host");
    let spec = &scenario.events[0];
    assert_eq!(spec.start_after_approval, Some(secs(20)));
    let id = forewarn_imds::EventId::from(spec.id());
    let mut replay = replay(&scenario);
    let before = document_at(&mut replay, secs(6));
    assert_eq!(before.events[0].status, EventStatus::Scheduled);

    replay.approve(secs(10), std::slice::from_ref(&id)).unwrap();
    let waiting = document_at(&mut replay, secs(10));
    assert_eq!(waiting.events[0].status, EventStatus::Scheduled);
    assert_eq!(
        waiting.incarnation, before.incarnation,
        "an approval that does not start the event changes nothing in the document"
    );
    // A second approval while waiting is a 200 that changes nothing.
    replay.approve(secs(20), std::slice::from_ref(&id)).unwrap();
    assert_eq!(
        status_at(&mut replay, ms(29_999)),
        vec![EventStatus::Scheduled]
    );

    let after = document_at(&mut replay, secs(30));
    assert_eq!(after.events[0].status, EventStatus::Started);
    assert_eq!(after.events[0].not_before, None);
    assert_eq!(after.incarnation, before.incarnation.map(|n| n + 1));
    assert_eq!(
        transition_ms(&replay, id.as_str(), Transition::Started),
        Some(30_000)
    );
}

#[test]
fn without_start_after_approval_an_approval_starts_the_event_at_once() {
    let scenario = builtin("user-reboot");
    assert_eq!(scenario.events[0].start_after_approval, None);
    let id = forewarn_imds::EventId::from(scenario.events[0].id());
    let mut replay = replay(&scenario);
    replay.approve(secs(10), std::slice::from_ref(&id)).unwrap();
    assert_eq!(status_at(&mut replay, secs(10)), vec![EventStatus::Started]);
}

#[test]
fn a_late_event_stays_scheduled_past_not_before_then_starts() {
    let scenario = builtin("starts-late");
    let spec = &scenario.events[0];
    let late_by = spec.starts_late_by.unwrap();
    assert_eq!(late_by, secs(60));
    let id = forewarn_imds::EventId::from(spec.id());
    let not_before = spec.appear_at + spec.notice_or_default();
    let mut replay = replay(&scenario);

    let at_not_before = document_at(&mut replay, not_before);
    assert_eq!(at_not_before.events[0].status, EventStatus::Scheduled);
    assert_eq!(
        at_not_before.events[0].not_before,
        Some(replay.wall_at(not_before))
    );
    let still = document_at(&mut replay, not_before + late_by - ms(1));
    assert_eq!(still.events[0].status, EventStatus::Scheduled);
    assert_eq!(
        still.events[0].not_before,
        Some(replay.wall_at(not_before)),
        "NotBefore stays where it was, in the past"
    );
    assert_eq!(still.incarnation, at_not_before.incarnation);

    assert_eq!(
        status_at(&mut replay, not_before + late_by),
        vec![EventStatus::Started]
    );
    let started_ms = u64::try_from((not_before + late_by).as_millis()).unwrap();
    assert_eq!(
        transition_ms(&replay, id.as_str(), Transition::Started),
        Some(started_ms)
    );
}

#[test]
fn an_approval_still_starts_a_late_event_at_once() {
    let scenario = builtin("starts-late");
    let id = forewarn_imds::EventId::from(scenario.events[0].id());
    let mut replay = replay(&scenario);
    replay.approve(secs(10), std::slice::from_ref(&id)).unwrap();
    assert_eq!(status_at(&mut replay, secs(10)), vec![EventStatus::Started]);
}

#[test]
fn spot_short_notice_gives_less_than_thirty_seconds_and_the_vm_goes_away() {
    for (name, notice) in [("spot-short-notice", 5), ("spot-short-notice-3s", 3)] {
        let scenario = builtin(name);
        let spec = &scenario.events[0];
        assert!(spec.vm_goes_away, "{name}");
        let mut replay = replay(&scenario);
        let document = document_at(&mut replay, spec.appear_at);
        let event = &document.events[0];
        assert_eq!(event.event_type_raw, "Preempt", "{name}");
        assert_eq!(
            event.not_before,
            Some(replay.wall_at(spec.appear_at + secs(notice))),
            "{name}: NotBefore is {notice} s after the event appears"
        );
        assert_eq!(
            status_at(&mut replay, spec.appear_at + secs(notice) - ms(1)),
            vec![EventStatus::Scheduled],
            "{name}"
        );
        assert_eq!(
            status_at(&mut replay, spec.appear_at + secs(notice)),
            vec![EventStatus::Started],
            "{name}"
        );
    }
}

#[test]
fn the_vm_goes_away_only_where_the_scenario_says_so() {
    for name in ["spot-eviction-vm-gone", "scaleset-terminate-vm-gone"] {
        let scenario = builtin(name);
        assert!(
            scenario.events.iter().all(|event| event.vm_goes_away),
            "{name}"
        );
        let types: Vec<&str> = scenario
            .events
            .iter()
            .map(|event| event.event_type.as_str())
            .collect();
        assert!(
            types.iter().all(|t| *t == "Preempt" || *t == "Terminate"),
            "{name}: {types:?}"
        );
    }
    for name in ["spot-preemption", "scaleset-terminate", "user-reboot"] {
        assert!(!builtin(name).events[0].vm_goes_away, "{name}");
    }
}

/// The first event of the document served at `at` to a client asking for `api_version`, as raw JSON.
fn raw_event(
    replay: &mut Replay,
    at: Duration,
    api_version: &str,
) -> serde_json::Map<String, Value> {
    replay.advance(at);
    let document: Value = serde_json::from_str(&replay.document(api_version)).unwrap();
    document["Events"][0].as_object().unwrap().clone()
}

#[test]
fn old_shapes_leave_out_newer_fields_and_2017_03_01_prefixes_names() {
    let newer = ["EventSource", "Description", "DurationInSeconds"];
    for (name, resource) in [("api-2017-08-01", "vm-a"), ("api-2017-03-01", "_vm-a")] {
        let scenario = builtin(name);
        let mut replay = replay(&scenario);
        let event = raw_event(&mut replay, secs(5), NEWEST);
        for field in newer {
            assert!(!event.contains_key(field), "{name}: {field} in {event:?}");
        }
        assert_eq!(event["Resources"], serde_json::json!([resource]), "{name}");
        assert_eq!(event["EventStatus"], "Scheduled", "{name}");
        // The daemon's parser reads it and finds this VM in it.
        let document = parse_document(&replay.document(NEWEST)).unwrap();
        assert!(document.rejected.is_empty(), "{name}");
        assert!(document.events[0].names_vm("vm-a"), "{name}");
    }
}

#[test]
fn a_client_asking_for_an_old_api_version_gets_the_old_shape() {
    let scenario = builtin("user-reboot");
    let mut replay = replay(&scenario);
    let newest = raw_event(&mut replay, secs(5), NEWEST);
    assert_eq!(newest["EventSource"], "User");
    assert!(newest.contains_key("DurationInSeconds"));
    let old = raw_event(&mut replay, secs(5), "2017-03-01");
    assert!(!old.contains_key("EventSource"), "{old:?}");
    assert_eq!(old["Resources"], serde_json::json!(["_vm-a"]));
    let middle = raw_event(&mut replay, secs(5), "2019-08-01");
    assert_eq!(middle["EventSource"], "User");
    assert!(!middle.contains_key("DurationInSeconds"), "{middle:?}");
}

#[test]
fn an_unknown_shape_is_refused_naming_the_key() {
    let text =
        "name = \"s\"\nshape = \"2018-01-01\"\n[[events]]\ntype = \"Reboot\"\nappear_at = \"1s\"\n";
    let error = Scenario::from_toml(text, "s.toml").unwrap_err().to_string();
    assert!(error.contains("shape"), "{error}");
    assert!(error.contains("2017-08-01"), "{error}");
}

#[test]
fn new_id_on_start_swaps_a_scheduled_id_for_a_started_one_in_one_document() {
    let scenario = builtin("new-id-on-start");
    let (old, new) = (&scenario.events[0], &scenario.events[1]);
    let swap = old.cancel_at.unwrap();
    assert_eq!(
        swap,
        old.appear_at + old.notice_or_default(),
        "at NotBefore"
    );
    let mut replay = replay(&scenario);

    let before = document_at(&mut replay, swap - ms(1));
    assert_eq!(before.events.len(), 1);
    assert!(before.events[0].id.as_str().eq_ignore_ascii_case(old.id()));
    assert_eq!(before.events[0].status, EventStatus::Scheduled);

    let after = document_at(&mut replay, swap);
    assert_eq!(
        after.events.len(),
        1,
        "the old id is gone in the same document"
    );
    let started = &after.events[0];
    assert!(started.id.as_str().eq_ignore_ascii_case(new.id()));
    assert!(!started.id.as_str().eq_ignore_ascii_case(old.id()));
    assert_eq!(started.status, EventStatus::Started);
    assert_eq!(started.event_type, before.events[0].event_type);
    assert_eq!(started.resources, before.events[0].resources);
    assert_eq!(
        after.incarnation,
        before.incarnation.map(|n| n + 1),
        "one new document"
    );
    let swap_ms = u64::try_from(swap.as_millis()).unwrap();
    assert_eq!(
        transition_ms(&replay, old.id(), Transition::Canceled),
        Some(swap_ms)
    );
    assert_eq!(
        transition_ms(&replay, new.id(), Transition::Appeared),
        Some(swap_ms)
    );
    assert_eq!(transition_ms(&replay, old.id(), Transition::Started), None);

    let gone = swap + new.runs_for_or_default();
    assert!(document_at(&mut replay, gone).events.is_empty());
}
