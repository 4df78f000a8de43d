use std::collections::HashMap;
use std::time::Duration;

use forewarn_events::{EventId, EventType};
use proptest::prelude::*;

use super::*;

const FREEZE_ID: &str = "C7061BAC-AFDC-4513-B24B-AA5F13A16123";

/// The demo's timeline aligns transitions in a column (`{transition:<20}`).
#[test]
fn a_transition_kind_honours_the_width_it_is_printed_in() {
    assert_eq!(
        format!("{:<20}|", TransitionKind::Scheduled),
        "scheduled           |"
    );
}

fn at(secs: u64) -> ImdsTime {
    ImdsTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// Mon, 11 Apr 2022 22:26:58 GMT, the NotBefore of the seed's Freeze example.
fn freeze_not_before() -> ImdsTime {
    at(1_649_716_018)
}

/// The Freeze event of the WestNO_0 / WestNO_1 example in the current API docs.
fn westno_freeze(status: EventStatus) -> ScheduledEvent {
    ScheduledEvent {
        resources: vec!["WestNO_0".into(), "WestNO_1".into()],
        not_before: match status {
            EventStatus::Scheduled => Some(freeze_not_before().system_time()),
            EventStatus::Started => None,
        },
        description: "Virtual machine is being paused because of a memory-preserving Live \
                          Migration operation."
            .into(),
        duration_seconds: Some(5),
        ..ScheduledEvent::new(FREEZE_ID, EventType::Freeze, status)
    }
}

fn reboot(id: &str, status: EventStatus) -> ScheduledEvent {
    ScheduledEvent {
        resources: vec!["vm-a".into()],
        not_before: Some(at(1_000).system_time()),
        ..ScheduledEvent::new(id, EventType::Reboot, status)
    }
}

fn doc(incarnation: u64, events: Vec<ScheduledEvent>) -> Document {
    Document {
        incarnation: Some(incarnation),
        events,
        rejected: Vec::new(),
    }
}

#[test]
fn an_event_that_turns_unreadable_has_not_vanished() {
    let mut tracker = Tracker::default();
    let first = doc(
        1,
        vec![
            reboot("A", EventStatus::Scheduled),
            reboot("B", EventStatus::Scheduled),
        ],
    );
    assert_eq!(tracker.observe(&first, at(0)).len(), 2);
    let bad_time = forewarn_imds::parse_document(
            r#"{"DocumentIncarnation": 2, "Events": [{"EventId": "A", "EventType": "Reboot", "NotBefore": "soon"}]}"#,
        )
        .expect("kept");
    let transitions = tracker.observe(&bad_time, at(1));
    assert_eq!(
        kinds(&transitions),
        ["rescheduled", "ended-without-start"],
        "B vanished; A is kept, and may start at any moment"
    );
    assert_eq!(
        tracker
            .get(&EventId::from("A"))
            .unwrap()
            .event
            .not_before_time(),
        Some(at(1))
    );
    let no_id = forewarn_imds::parse_document(
        r#"{"DocumentIncarnation": 3, "Events": [{"EventType": "Reboot"}]}"#,
    )
    .expect("kept");
    assert!(tracker.observe(&no_id, at(2)).is_empty());
    assert!(
        tracker.get(&EventId::from("A")).is_some(),
        "an entry without EventId could be A"
    );
    assert_eq!(
        kinds(&tracker.observe(&doc(4, vec![]), at(3))),
        ["ended-without-start"]
    );
}

/// A Reboot for vm-a whose NotBefore IMDS sent as `text`, which forewarn cannot read.
fn unreadable_reboot(id: &str, text: &str) -> ScheduledEvent {
    ScheduledEvent {
        not_before: None,
        unreadable: vec![forewarn_events::UnreadableField {
            field: EventField::NotBefore,
            raw: text.into(),
        }],
        ..reboot(id, EventStatus::Scheduled)
    }
}

#[test]
fn an_unreadable_not_before_is_taken_as_the_instant_it_was_first_seen() {
    let mut tracker = Tracker::default();
    let odd = doc(1, vec![unreadable_reboot("A", "garbage")]);
    let transitions = tracker.observe(&odd, at(10));
    assert_eq!(kinds(&transitions), ["scheduled"]);
    assert_eq!(transitions[0].event().not_before_time(), Some(at(10)));
    // It stays where it was first seen: no reschedule while it stays unreadable.
    assert!(tracker.observe(&odd, at(11)).is_empty());
    let other_text = doc(2, vec![unreadable_reboot("A", "-1")]);
    assert!(tracker.observe(&other_text, at(12)).is_empty());
    assert_eq!(
        tracker
            .get(&EventId::from("A"))
            .unwrap()
            .event
            .not_before_time(),
        Some(at(10))
    );
    // Readable again: a reschedule to the NotBefore IMDS now sends.
    let readable = doc(3, vec![reboot("A", EventStatus::Scheduled)]);
    assert_eq!(kinds(&tracker.observe(&readable, at(13))), ["rescheduled"]);
    assert_eq!(
        tracker
            .get(&EventId::from("A"))
            .unwrap()
            .event
            .not_before_time(),
        Some(at(1_000))
    );
}

#[test]
fn a_not_before_that_turns_unreadable_is_a_reschedule_to_now() {
    let mut tracker = Tracker::default();
    tracker.observe(&doc(1, vec![reboot("A", EventStatus::Scheduled)]), at(5));
    let transitions = tracker.observe(&doc(2, vec![unreadable_reboot("A", "1649716018")]), at(7));
    assert_eq!(kinds(&transitions), ["rescheduled"]);
    assert_eq!(transitions[0].event().not_before_time(), Some(at(7)));
    // A NotBefore already sooner than now stays.
    let mut tracker = Tracker::default();
    let soon = ScheduledEvent {
        not_before: Some(at(3).system_time()),
        ..reboot("A", EventStatus::Scheduled)
    };
    tracker.observe(&doc(1, vec![soon]), at(1));
    let transitions = tracker.observe(&doc(2, vec![unreadable_reboot("A", "x")]), at(9));
    assert!(transitions.is_empty(), "{transitions:?}");
    assert_eq!(
        tracker
            .get(&EventId::from("A"))
            .unwrap()
            .event
            .not_before_time(),
        Some(at(3))
    );
}

fn kinds(transitions: &[Transition]) -> Vec<&'static str> {
    transitions.iter().map(|t| t.kind().as_str()).collect()
}

#[test]
fn seed_freeze_example_goes_scheduled_started_ended() {
    let mut tracker = Tracker::new();
    assert!(tracker.observe(&doc(1, vec![]), at(1)).is_empty());

    let scheduled = tracker.observe(&doc(2, vec![westno_freeze(EventStatus::Scheduled)]), at(2));
    assert_eq!(
        scheduled,
        vec![Transition::Scheduled(westno_freeze(EventStatus::Scheduled))]
    );

    let started = tracker.observe(&doc(3, vec![westno_freeze(EventStatus::Started)]), at(3));
    assert_eq!(
        started,
        vec![Transition::Started {
            event: westno_freeze(EventStatus::Started),
            was_scheduled: true
        }]
    );
    let tracked = tracker
        .get(&EventId::from(FREEZE_ID))
        .expect("still tracked");
    assert!(tracked.seen_started);
    assert_eq!(tracked.first_seen, at(2));

    let ended = tracker.observe(&doc(4, vec![]), at(4));
    assert_eq!(
        ended,
        vec![Transition::EndedAfterStart(westno_freeze(
            EventStatus::Started
        ))]
    );
    assert_eq!(tracker.events().count(), 0);
}

#[test]
fn not_before_change_is_rescheduled() {
    let mut tracker = Tracker::new();
    let first = westno_freeze(EventStatus::Scheduled);
    tracker.observe(&doc(2, vec![first.clone()]), at(1));
    let later = ScheduledEvent {
        not_before: Some((freeze_not_before() + Duration::from_secs(600)).system_time()),
        ..first.clone()
    };
    let transitions = tracker.observe(&doc(3, vec![later.clone()]), at(2));
    assert_eq!(
        transitions,
        vec![Transition::Rescheduled {
            event: later,
            previous: first
        }]
    );
}

#[test]
fn resources_change_is_rescheduled() {
    let mut tracker = Tracker::new();
    let first = westno_freeze(EventStatus::Scheduled);
    tracker.observe(&doc(2, vec![first.clone()]), at(1));
    let fewer = ScheduledEvent {
        resources: vec!["WestNO_0".into()],
        ..first
    };
    let transitions = tracker.observe(&doc(3, vec![fewer]), at(2));
    assert_eq!(kinds(&transitions), ["rescheduled"]);
}

#[test]
fn description_and_duration_changes_update_without_transition() {
    let mut tracker = Tracker::new();
    let first = westno_freeze(EventStatus::Scheduled);
    tracker.observe(&doc(2, vec![first.clone()]), at(1));
    let reworded = ScheduledEvent {
        description: "reworded".into(),
        duration_seconds: Some(9),
        ..first
    };
    assert!(
        tracker
            .observe(&doc(3, vec![reworded.clone()]), at(2))
            .is_empty()
    );
    assert_eq!(
        tracker
            .get(&EventId::from(FREEZE_ID))
            .expect("tracked")
            .event,
        reworded
    );
}

#[test]
fn new_started_event_is_hardware_failure() {
    let mut tracker = Tracker::new();
    let event = reboot("hw", EventStatus::Started);
    let transitions = tracker.observe(&doc(1, vec![event.clone()]), at(1));
    assert_eq!(
        transitions,
        vec![Transition::Started {
            event: event.clone(),
            was_scheduled: false
        }]
    );
    let ended = tracker.observe(&doc(2, vec![]), at(2));
    assert_eq!(ended, vec![Transition::EndedAfterStart(event)]);
}

#[test]
fn a_scheduled_event_without_not_before_may_start_at_once() {
    let mut tracker = Tracker::new();
    let blank = ScheduledEvent {
        not_before: None,
        ..reboot("blank", EventStatus::Scheduled)
    };
    let transitions = tracker.observe(&doc(1, vec![blank.clone()]), at(5));
    let taken = ScheduledEvent {
        not_before: Some(at(5).system_time()),
        ..blank.clone()
    };
    assert_eq!(transitions, vec![Transition::Scheduled(taken)]);
    assert!(
        tracker
            .observe(&doc(2, vec![blank.clone()]), at(9))
            .is_empty(),
        "still blank: no reschedule"
    );
    // A known NotBefore that turns blank is kept.
    let dated = reboot("dated", EventStatus::Scheduled);
    tracker.observe(&doc(3, vec![blank.clone(), dated.clone()]), at(10));
    let turned_blank = ScheduledEvent {
        not_before: None,
        ..dated.clone()
    };
    assert!(
        tracker
            .observe(&doc(4, vec![blank, turned_blank]), at(11))
            .is_empty()
    );
    assert_eq!(
        tracker
            .get(&EventId::from("dated"))
            .unwrap()
            .event
            .not_before,
        dated.not_before
    );
}

#[test]
fn disappearing_while_scheduled_is_canceled() {
    let mut tracker = Tracker::new();
    let event = westno_freeze(EventStatus::Scheduled);
    tracker.observe(&doc(2, vec![event.clone()]), at(1));
    let transitions = tracker.observe(&doc(3, vec![]), at(2));
    assert_eq!(transitions, vec![Transition::EndedWithoutStart(event)]);
}

#[test]
fn started_going_back_to_scheduled_stays_started() {
    let mut tracker = Tracker::new();
    tracker.observe(&doc(1, vec![reboot("r", EventStatus::Scheduled)]), at(1));
    tracker.observe(&doc(2, vec![reboot("r", EventStatus::Started)]), at(2));
    let regressed = ScheduledEvent {
        description: "odd".into(),
        ..reboot("r", EventStatus::Scheduled)
    };
    assert!(tracker.observe(&doc(3, vec![regressed]), at(3)).is_empty());
    let tracked = tracker.get(&EventId::from("r")).expect("tracked");
    assert_eq!(tracked.event.status, EventStatus::Started);
    assert_eq!(tracked.event.description, "odd");
    assert!(
        tracker
            .observe(&doc(4, vec![reboot("r", EventStatus::Started)]), at(4))
            .is_empty()
    );
    assert_eq!(
        kinds(&tracker.observe(&doc(5, vec![]), at(5))),
        ["ended-after-start"]
    );
}

#[test]
fn events_in_one_document_are_independent_and_ordered() {
    let mut tracker = Tracker::new();
    tracker.observe(
        &doc(
            1,
            vec![
                reboot("z-gone", EventStatus::Scheduled),
                reboot("a-gone", EventStatus::Started),
                reboot("starts", EventStatus::Scheduled),
            ],
        ),
        at(1),
    );
    let transitions = tracker.observe(
        &doc(
            2,
            vec![
                reboot("new", EventStatus::Scheduled),
                reboot("starts", EventStatus::Started),
            ],
        ),
        at(2),
    );
    let summary: Vec<(&str, &str)> = transitions
        .iter()
        .map(|t| (t.kind().as_str(), t.event().id.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("scheduled", "new"),
            ("started", "starts"),
            ("ended-after-start", "a-gone"),
            ("ended-without-start", "z-gone"),
        ]
    );
}

#[test]
fn incarnation_reset_with_same_events_is_quiet() {
    let mut tracker = Tracker::new();
    let events = vec![westno_freeze(EventStatus::Scheduled)];
    tracker.observe(&doc(57, events.clone()), at(1));
    assert!(tracker.observe(&doc(1, events.clone()), at(2)).is_empty());
    let no_incarnation = Document {
        incarnation: None,
        events,
        rejected: Vec::new(),
    };
    assert!(tracker.observe(&no_incarnation, at(3)).is_empty());
}

#[test]
fn same_incarnation_with_different_events_is_not_skipped() {
    let mut tracker = Tracker::new();
    tracker.observe(&doc(5, vec![]), at(1));
    let transitions = tracker.observe(&doc(5, vec![reboot("r", EventStatus::Scheduled)]), at(2));
    assert_eq!(kinds(&transitions), ["scheduled"]);
}

#[test]
fn duplicate_id_in_one_document_first_wins() {
    let mut tracker = Tracker::new();
    let transitions = tracker.observe(
        &doc(
            1,
            vec![
                reboot("r", EventStatus::Scheduled),
                reboot("r", EventStatus::Started),
            ],
        ),
        at(1),
    );
    assert_eq!(kinds(&transitions), ["scheduled"]);
}

#[test]
fn id_reappearing_after_end_starts_over() {
    let mut tracker = Tracker::new();
    tracker.observe(&doc(1, vec![reboot("r", EventStatus::Scheduled)]), at(1));
    tracker.observe(&doc(2, vec![]), at(2));
    let again = tracker.observe(&doc(3, vec![reboot("r", EventStatus::Scheduled)]), at(3));
    assert_eq!(kinds(&again), ["scheduled"]);
    assert_eq!(
        tracker
            .get(&EventId::from("r"))
            .expect("tracked")
            .first_seen,
        at(3)
    );
}

#[test]
fn survives_a_json_round_trip() {
    let mut tracker = Tracker::new();
    tracker.observe(&doc(2, vec![westno_freeze(EventStatus::Scheduled)]), at(1));
    let json = serde_json::to_string(&tracker).expect("serializes");
    let mut restored: Tracker = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(restored, tracker);
    let started = restored.observe(&doc(3, vec![westno_freeze(EventStatus::Started)]), at(2));
    assert_eq!(kinds(&started), ["started"]);
}

// ---- property tests ----

/// Where one id is in its lifecycle, per the grammar in the module docs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Absent,
    Scheduled,
    Started,
}

/// Advances `phase` by one transition, or panics naming the grammar violation.
fn step(phase: Phase, transition: &Transition) -> Phase {
    match (phase, transition) {
        (Phase::Absent, Transition::Scheduled(_)) => Phase::Scheduled,
        (
            Phase::Absent,
            Transition::Started {
                was_scheduled: false,
                ..
            },
        ) => Phase::Started,
        (Phase::Scheduled, Transition::Rescheduled { .. }) => Phase::Scheduled,
        (
            Phase::Scheduled,
            Transition::Started {
                was_scheduled: true,
                ..
            },
        ) => Phase::Started,
        (Phase::Scheduled, Transition::EndedWithoutStart(_)) => Phase::Absent,
        (Phase::Started, Transition::EndedAfterStart(_)) => Phase::Absent,
        (phase, transition) => {
            panic!("{} after {phase:?} breaks the lifecycle", transition.kind())
        }
    }
}

fn arb_event() -> impl Strategy<Value = ScheduledEvent> {
    (
        prop::sample::select(vec!["e1", "e2", "e3"]),
        prop::sample::select(vec![EventType::Freeze, EventType::Reboot]),
        prop::collection::vec(prop::sample::select(vec!["vm-a", "vm-b"]), 0..3),
        prop::bool::ANY,
        prop::option::of(0u64..3),
        prop::sample::select(vec!["", "text"]),
        prop::option::of(-1i64..3),
    )
        .prop_map(
            |(id, event_type, resources, started, not_before, description, duration)| {
                let status = if started {
                    EventStatus::Started
                } else {
                    EventStatus::Scheduled
                };
                ScheduledEvent {
                    resources: resources.into_iter().map(String::from).collect(),
                    not_before: not_before.map(|secs| at(secs).system_time()),
                    description: description.into(),
                    duration_seconds: duration,
                    ..ScheduledEvent::new(id, event_type, status)
                }
            },
        )
}

fn arb_document() -> impl Strategy<Value = Document> {
    (
        prop::option::of(0u64..4),
        prop::collection::vec(arb_event(), 0..4),
    )
        .prop_map(|(incarnation, events)| Document {
            incarnation,
            events,
            rejected: Vec::new(),
        })
}

proptest! {
    #[test]
    fn transitions_follow_the_lifecycle_grammar(
        documents in prop::collection::vec(arb_document(), 1..12)
    ) {
        let mut tracker = Tracker::new();
        let mut phases: HashMap<EventId, Phase> = HashMap::new();
        for (tick, document) in documents.iter().enumerate() {
            for transition in tracker.observe(document, at(tick as u64)) {
                let phase = phases.entry(transition.event().id.clone()).or_insert(Phase::Absent);
                *phase = step(*phase, &transition);
            }
            for tracked in tracker.events() {
                let phase = phases.get(&tracked.event.id).copied().unwrap_or(Phase::Absent);
                let expected = if tracked.seen_started { Phase::Started } else { Phase::Scheduled };
                prop_assert_eq!(phase, expected);
            }
            let listed: HashSet<&str> = document.events.iter().map(|e| e.id.as_str()).collect();
            let tracked: HashSet<&str> = tracker.events().map(|t| t.event.id.as_str()).collect();
            prop_assert_eq!(listed, tracked);
        }
    }

    #[test]
    fn the_same_document_twice_is_quiet(
        history in prop::collection::vec(arb_document(), 0..6),
        document in arb_document(),
        reset_incarnation in prop::option::of(0u64..2),
    ) {
        let mut tracker = Tracker::new();
        for (tick, earlier) in history.iter().enumerate() {
            tracker.observe(earlier, at(tick as u64));
        }
        tracker.observe(&document, at(100));
        let state = tracker.clone();
        let again = Document { incarnation: reset_incarnation, ..document };
        prop_assert_eq!(tracker.observe(&again, at(101)), vec![]);
        prop_assert_eq!(tracker, state);
    }

    #[test]
    fn state_survives_serialization_mid_sequence(
        documents in prop::collection::vec(arb_document(), 2..8),
        split in 1usize..7,
    ) {
        let split = split.min(documents.len() - 1);
        let mut straight = Tracker::new();
        let mut resumed = Tracker::new();
        let mut straight_out = Vec::new();
        let mut resumed_out = Vec::new();
        for (tick, document) in documents.iter().enumerate() {
            straight_out.extend(straight.observe(document, at(tick as u64)));
            if tick == split {
                let json = serde_json::to_string(&resumed).expect("serializes");
                resumed = serde_json::from_str(&json).expect("deserializes");
            }
            resumed_out.extend(resumed.observe(document, at(tick as u64)));
        }
        prop_assert_eq!(straight_out, resumed_out);
    }
}
