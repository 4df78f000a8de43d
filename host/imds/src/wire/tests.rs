//! Tests of the wire format: every example document of the IMDS docs, each lenient case,
//! each rejection, and a render → parse round-trip property.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;

use super::*;

const SEED_EMPTY_1: &str = include_str!("../../testdata/seed-2020-07-01-incarnation-1.json");
const SEED_SCHEDULED_2: &str = include_str!("../../testdata/seed-2020-07-01-incarnation-2.json");
const SEED_STARTED_3: &str = include_str!("../../testdata/seed-2020-07-01-incarnation-3.json");
const SEED_EMPTY_4: &str = include_str!("../../testdata/seed-2020-07-01-incarnation-4.json");
const SEED_2017: &str = include_str!("../../testdata/seed-2017-08-01-reboot.json");
const SEED_START_BASH: &str = include_str!("../../testdata/seed-start-requests-bash.json");
const SEED_START_TEMPLATE: &str = include_str!("../../testdata/seed-start-requests-template.json");

/// "Mon, 11 Apr 2022 22:26:58 GMT" as a SystemTime.
fn apr_11_2022() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_649_716_018)
}

/// The one event of the seed document with incarnation 2, with `not_before` adjustable.
fn seed_freeze(status: EventStatus, not_before: Option<SystemTime>) -> ScheduledEvent {
    ScheduledEvent {
        resources: vec!["WestNO_0".into(), "WestNO_1".into()],
        not_before,
        description: "Virtual machine is being paused because of a memory-preserving Live \
                      Migration operation."
            .into(),
        duration_seconds: Some(5),
        ..ScheduledEvent::new(
            "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
            EventType::Freeze,
            status,
        )
    }
}

/// Parses a document holding one event whose fields are `event_fields` (JSON members).
/// The one event of a document listing just it: parsed, or the reason it was set aside.
fn parse_one(event_fields: &str) -> Result<ScheduledEvent, ParseError> {
    let text = format!(r#"{{"DocumentIncarnation": 1, "Events": [{{{event_fields}}}]}}"#);
    let mut doc = parse_document(&text)?;
    if let Some(rejected) = doc.rejected.pop() {
        assert!(doc.events.is_empty());
        return Err(rejected);
    }
    assert_eq!(doc.events.len(), 1);
    Ok(doc.events.remove(0))
}

fn parse_one_ok(event_fields: &str) -> ScheduledEvent {
    parse_one(event_fields).expect("event parses")
}

#[test]
fn seed_empty_documents_parse() {
    let first = parse_document(SEED_EMPTY_1).unwrap();
    assert_eq!(first.incarnation, Some(1));
    assert!(first.events.is_empty());
    let last = parse_document(SEED_EMPTY_4).unwrap();
    assert_eq!(last.incarnation, Some(4));
    assert!(last.events.is_empty());
}

#[test]
fn seed_scheduled_freeze_parses_every_field() {
    let doc = parse_document(SEED_SCHEDULED_2).unwrap();
    assert_eq!(
        doc,
        Document {
            incarnation: Some(2),
            events: vec![seed_freeze(EventStatus::Scheduled, Some(apr_11_2022()))],
            rejected: Vec::new(),
        }
    );
}

#[test]
fn seed_started_freeze_has_no_not_before() {
    let doc = parse_document(SEED_STARTED_3).unwrap();
    assert_eq!(
        doc,
        Document {
            incarnation: Some(3),
            events: vec![seed_freeze(EventStatus::Started, None)],
            rejected: Vec::new(),
        }
    );
}

#[test]
fn seed_2017_document_lacks_newer_fields() {
    let doc = parse_document(SEED_2017).unwrap();
    assert_eq!(doc.incarnation, Some(7));
    let event = &doc.events[0];
    assert_eq!(event.id, "602d9444-d2cd-49c7-8624-8643e7171297");
    assert_eq!(event.event_type, EventType::Reboot);
    assert_eq!(event.resources, ["FrontEnd_IN_0", "BackEnd_IN_0"]);
    assert_eq!(event.status, EventStatus::Scheduled);
    assert_eq!(
        event.not_before,
        Some(UNIX_EPOCH + Duration::from_secs(1_474_309_787))
    );
    assert_eq!(event.description, "");
    assert_eq!(event.source, EventSource::Unknown);
    assert_eq!(event.duration_seconds, None);
}

#[test]
fn render_matches_the_2020_07_01_shape() {
    let doc = parse_document(SEED_SCHEDULED_2).unwrap();
    let expected = r#"{"DocumentIncarnation":2,"Events":[{"EventId":"C7061BAC-AFDC-4513-B24B-AA5F13A16123","EventStatus":"Scheduled","EventType":"Freeze","ResourceType":"VirtualMachine","Resources":["WestNO_0","WestNO_1"],"NotBefore":"Mon, 11 Apr 2022 22:26:58 GMT","Description":"Virtual machine is being paused because of a memory-preserving Live Migration operation.","EventSource":"Platform","DurationInSeconds":5}]}"#;
    assert_eq!(render_document(&doc), expected);
}

#[test]
fn render_equals_every_seed_document_as_json() {
    for seed in [SEED_EMPTY_1, SEED_SCHEDULED_2, SEED_STARTED_3, SEED_EMPTY_4] {
        let rendered = render_document(&parse_document(seed).unwrap());
        let rendered: Value = serde_json::from_str(&rendered).unwrap();
        let original: Value = serde_json::from_str(seed).unwrap();
        assert_eq!(rendered, original);
    }
}

#[test]
fn render_writes_blank_not_before_and_unknown_duration() {
    let mut event = seed_freeze(EventStatus::Started, None);
    event.duration_seconds = None;
    event.source = EventSource::User;
    let text = render_document(&Document {
        incarnation: Some(9),
        events: vec![event],
        rejected: Vec::new(),
    });
    assert!(text.contains(r#""NotBefore":"""#), "{text}");
    assert!(text.contains(r#""DurationInSeconds":-1"#), "{text}");
    assert!(text.contains(r#""EventSource":"User""#), "{text}");
}

#[test]
fn render_keeps_unknown_event_type_text() {
    let mut event = seed_freeze(EventStatus::Scheduled, None);
    event.event_type = EventType::Unknown;
    event.event_type_raw = "Hibernate".into();
    let text = render_document(&Document {
        incarnation: Some(1),
        events: vec![event],
        rejected: Vec::new(),
    });
    assert!(text.contains(r#""EventType":"Hibernate""#), "{text}");
}

#[test]
fn field_names_match_in_any_case() {
    let doc = parse_document(
        r#"{"documentincarnation": "12", "EVENTS": [{"eventid": "a", "eventtype": "reboot",
            "eventStatus": "STARTED", "resources": ["vm"], "notbefore": "",
            "eventsource": "user", "durationinseconds": 30}]}"#,
    )
    .unwrap();
    assert_eq!(doc.incarnation, Some(12));
    let event = &doc.events[0];
    assert_eq!(event.id, "a");
    assert_eq!(event.event_type, EventType::Reboot);
    assert_eq!(event.event_type_raw, "reboot");
    assert_eq!(event.status, EventStatus::Started);
    assert_eq!(event.source, EventSource::User);
    assert_eq!(event.duration_seconds, Some(30));
}

#[test]
fn unknown_fields_are_ignored() {
    let doc = parse_document(
        r#"{"DocumentIncarnation": 1, "Future": {"x": [1]}, "Events": [
            {"EventId": "a", "EventType": "Freeze", "Impact": "none", "Extra": null}]}"#,
    )
    .unwrap();
    assert_eq!(doc.events[0].id, "a");
}

#[test]
fn unknown_event_type_keeps_raw_text() {
    let event = parse_one_ok(r#""EventId": "a", "EventType": "Hibernate""#);
    assert_eq!(event.event_type, EventType::Unknown);
    assert_eq!(event.event_type_raw, "Hibernate");
}

#[test]
fn every_known_event_type_parses() {
    for known in EventType::KNOWN {
        let event = parse_one_ok(&format!(r#""EventId": "a", "EventType": "{known}""#));
        assert_eq!(event.event_type, known);
    }
}

#[test]
fn unknown_status_is_treated_as_scheduled_and_noted() {
    let event =
        parse_one_ok(r#""EventId": "a", "EventType": "Reboot", "EventStatus": "Completed""#);
    assert_eq!(event.status, EventStatus::Scheduled);
    assert_eq!(event.unreadable(EventField::EventStatus), Some("Completed"));
    let event = parse_one_ok(r#""EventId": "a", "EventType": "Reboot""#);
    assert_eq!(event.status, EventStatus::Scheduled);
    assert_eq!(event.unreadable(EventField::EventStatus), Some(""));
    let event = parse_one_ok(r#""EventId": "a", "EventType": "Reboot", "EventStatus": "started""#);
    assert!(event.unreadable.is_empty(), "{:?}", event.unreadable);
}

#[test]
fn an_unknown_event_type_is_kept_and_noted() {
    let event =
        parse_one_ok(r#""EventId": "a", "EventType": "Hibernate", "EventStatus": "Scheduled""#);
    assert_eq!(event.event_type, EventType::Unknown);
    assert_eq!(event.event_type_raw, "Hibernate");
    assert_eq!(
        event.unreadable,
        [UnreadableField {
            field: EventField::EventType,
            raw: "Hibernate".into()
        }]
    );
}

#[test]
fn not_before_absent_null_or_blank_is_none() {
    for fields in [
        r#""EventId": "a""#,
        r#""EventId": "a", "NotBefore": null"#,
        r#""EventId": "a", "NotBefore": "  ""#,
    ] {
        assert_eq!(parse_one_ok(fields).not_before, None, "{fields}");
    }
}

#[test]
fn not_before_reads_every_common_format() {
    let cases = [
        ("Mon, 11 Apr 2022 22:26:58 GMT", 0),
        ("Mon, 11 Apr 2022 22:26:58 +0000", 0),
        ("Tue, 12 Apr 2022 00:26:58 +0200", 0),
        ("11 Apr 2022 22:26:58 GMT", 0),
        ("Fri, 11 Apr 2022 22:26:58 GMT", 0),
        ("2022-04-11T22:26:58Z", 0),
        ("2022-04-11T22:26:58.250Z", 0),
        ("2022-04-12T00:26:58+02:00", 0),
        ("2022-04-12T00:26:58+0200", 0),
        ("2022-04-11T22:26:58", 0),
        ("2022-04-11 22:26:58", 0),
        ("2022-04-11 22:26:58Z", 0),
        ("2022-04-11 22:26:58 UTC", 0),
        ("2022-04-11 22:26:58 +00:00", 0),
        ("Monday, 11-Apr-22 22:26:58 GMT", 0),
        ("Mon Apr 11 22:26:58 2022", 0),
        ("2022-04-11T22:26", -58),
        // A date without a zone is UTC, as every time IMDS sends.
        ("Mon, 11 Apr 2022 22:26:58", 0),
        ("11 Apr 2022 22:26:58", 0),
        ("2022-04-11T22:26:58.999999", 0),
        ("2022-04-12T00:26:58.5+02:00", 0),
    ];
    for (text, offset_seconds) in cases {
        let parsed = parse_time(text).unwrap_or_else(|| panic!("cannot read {text:?}"));
        let event = parse_one_ok(&format!(
            r#""EventId": "a", "EventType": "Reboot", "EventStatus": "Scheduled", "NotBefore": "{text}""#
        ));
        assert_eq!(event.not_before, Some(parsed), "{text:?}");
        assert!(
            event.unreadable.is_empty(),
            "{text:?}: {:?}",
            event.unreadable
        );
        let whole_seconds = parsed.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
        assert_eq!(
            whole_seconds,
            1_649_716_018 + offset_seconds,
            "{text:?} read as {parsed:?}"
        );
    }
}

/// Every NotBefore form IMDS has used: RFC 1123 in both documentation editions and ISO 8601
/// from the 2017 docs.
#[test]
fn not_before_reads_the_forms_imds_has_used() {
    let cases = [
        ("Mon, 19 Sep 2016 18:29:47 GMT", 1_474_309_787),
        ("Mon, 11 Apr 2022 22:26:58 GMT", 1_649_716_018),
        ("2017-08-01T18:29:47Z", 1_501_612_187),
        ("2017-08-01T18:29:47.1234567Z", 1_501_612_187),
        ("2017-08-01T20:29:47+02:00", 1_501_612_187),
        ("2017-08-01T18:29:47", 1_501_612_187),
    ];
    for (text, unix) in cases {
        let parsed = parse_time(text).unwrap_or_else(|| panic!("cannot read {text:?}"));
        let seconds = parsed.duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(seconds, unix, "{text:?}");
    }
}

/// A NotBefore in no known form (epoch seconds, -1, garbage, an impossible date, a date
/// without a time) keeps the event: unknown NotBefore, the text noted as unreadable.
#[test]
fn an_unreadable_not_before_keeps_the_event_and_notes_the_text() {
    let odd = [
        (r#""1649716018""#, "1649716018"),
        ("1649716018", "1649716018"),
        (r#""-1""#, "-1"),
        ("-1", "-1"),
        (r#""garbage""#, "garbage"),
        (r#""2022-02-30T10:00:00Z""#, "2022-02-30T10:00:00Z"),
        (
            r#""Wed, 30 Feb 2022 10:00:00 GMT""#,
            "Wed, 30 Feb 2022 10:00:00 GMT",
        ),
        (r#""2022-04-11""#, "2022-04-11"),
        (r#""next tuesday""#, "next tuesday"),
        ("true", "true"),
    ];
    for (json, raw) in odd {
        let event = parse_one_ok(&format!(
            r#""EventId": "ev-1", "EventType": "Reboot", "EventStatus": "Scheduled", "NotBefore": {json}"#
        ));
        assert_eq!(event.not_before, None, "{json}");
        assert_eq!(
            event.unreadable,
            [UnreadableField {
                field: EventField::NotBefore,
                raw: raw.into()
            }],
            "{json}"
        );
    }
}

#[test]
fn an_unreadable_not_before_is_rendered_as_it_was_sent() {
    let text = r#"{"DocumentIncarnation": 2, "Events": [{"EventId": "e", "EventType": "Reboot", "EventStatus": "Scheduled", "NotBefore": "garbage"}]}"#;
    let document = parse_document(text).unwrap();
    let rendered = render_document(&document);
    assert!(rendered.contains(r#""NotBefore":"garbage""#), "{rendered}");
    assert_eq!(parse_document(&rendered).unwrap(), document);
}

#[test]
fn duration_reads_numbers_and_numeric_strings() {
    let cases = [
        (r#""DurationInSeconds": 5"#, Some(5)),
        (r#""DurationInSeconds": "7""#, Some(7)),
        (r#""DurationInSeconds": 9.0"#, Some(9)),
        (r#""DurationInSeconds": -1"#, None),
        (r#""DurationInSeconds": "-1""#, None),
        (r#""DurationInSeconds": null"#, None),
        (r#""DurationInSeconds": "soon""#, None),
        (r#""DurationInSeconds": -7"#, None),
        (r#""Other": 1"#, None),
    ];
    for (field, expected) in cases {
        let event = parse_one_ok(&format!(r#""EventId": "a", {field}"#));
        assert_eq!(event.duration_seconds, expected, "{field}");
    }
    let odd = parse_one_ok(r#""EventId": "a", "DurationInSeconds": "soon""#);
    assert_eq!(odd.unreadable(EventField::DurationInSeconds), Some("soon"));
    let negative = parse_one_ok(r#""EventId": "a", "DurationInSeconds": -7"#);
    assert_eq!(
        negative.unreadable(EventField::DurationInSeconds),
        Some("-7")
    );
    let unknown = parse_one_ok(r#""EventId": "a", "DurationInSeconds": -1"#);
    assert_eq!(unknown.unreadable(EventField::DurationInSeconds), None);
}

#[test]
fn incarnation_reads_numbers_and_numeric_strings() {
    let cases = [
        (r#""DocumentIncarnation": 3,"#, Some(3)),
        (r#""DocumentIncarnation": " 4 ","#, Some(4)),
        (r#""DocumentIncarnation": "x","#, None),
        (r#""DocumentIncarnation": -2,"#, None),
        ("", None),
    ];
    for (field, expected) in cases {
        let doc = parse_document(&format!(r#"{{{field} "Events": []}}"#)).unwrap();
        assert_eq!(doc.incarnation, expected, "{field}");
    }
}

#[test]
fn resources_and_strings_are_lenient() {
    let event = parse_one_ok(r#""EventId": 42, "Resources": "solo", "ResourceType": null"#);
    assert_eq!(event.id, "42");
    assert_eq!(event.resources, ["solo"]);
    assert_eq!(event.resource_type, "");
    let event = parse_one_ok(r#""EventId": "a""#);
    assert!(event.resources.is_empty());
    let odd = parse_one_ok(r#""EventId": "a", "Resources": [{"name": "vm"}]"#);
    assert!(odd.resources.is_empty());
    assert_eq!(
        odd.unreadable(EventField::Resources),
        Some(r#"[{"name":"vm"}]"#)
    );
}

#[test]
fn rejects_documents_that_are_not_objects() {
    for text in ["[]", "42", "\"Events\"", "null"] {
        let error = parse_document(text).unwrap_err();
        assert!(
            matches!(error, ParseError::NotAnObject { .. }),
            "{text}: {error}"
        );
    }
    let error = parse_document("<html>502 Bad Gateway</html>").unwrap_err();
    assert!(matches!(error, ParseError::NotJson { .. }), "{error}");
    assert!(error.to_string().contains("502 Bad Gateway"), "{error}");
}

#[test]
fn rejects_documents_without_an_events_array() {
    let error = parse_document(r#"{"error": "Bad request"}"#).unwrap_err();
    assert!(
        matches!(
            error,
            ParseError::MissingField {
                field: "Events",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("Bad request"), "{error}");
    let error = parse_document(r#"{"Events": null}"#).unwrap_err();
    assert!(matches!(error, ParseError::MissingField { .. }), "{error}");
    let error = parse_document(r#"{"Events": {"EventId": "a"}}"#).unwrap_err();
    assert!(
        matches!(
            error,
            ParseError::WrongType {
                field: "Events",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn one_unreadable_event_does_not_hide_the_others() {
    let text = r#"{"DocumentIncarnation": 5, "Events": [
        {"EventId": "good-1", "EventType": "Preempt", "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT"},
        {"EventType": "Reboot"},
        {"EventId": "bad-time", "EventType": "Reboot", "NotBefore": "next tuesday"},
        {"EventId": "bad-resources", "Resources": [{"name": "vm"}]},
        "just text",
        {"EventId": "good-2", "EventType": "Freeze"}
    ]}"#;
    let doc = parse_document(text).expect("the document is kept");
    let ids: Vec<&str> = doc.events.iter().map(|event| event.id.as_str()).collect();
    assert_eq!(ids, ["good-1", "bad-time", "bad-resources", "good-2"]);
    assert_eq!(doc.incarnation, Some(5));
    assert_eq!(doc.rejected.len(), 2, "{:?}", doc.rejected);
    assert!(matches!(
        doc.rejected[0],
        ParseError::MissingEventId { index: 1, .. }
    ));
    assert!(doc.rejected[0].to_string().contains("Reboot"));
    assert!(matches!(
        doc.rejected[1],
        ParseError::MissingEventId { index: 4, .. }
    ));
    assert_eq!(
        doc.events[1].unreadable(EventField::NotBefore),
        Some("next tuesday")
    );
    assert_eq!(
        doc.events[2].unreadable(EventField::Resources),
        Some(r#"[{"name":"vm"}]"#)
    );
    for bad in [r#"{"EventId": ""}"#, r#"{"EventId": null}"#] {
        let text = format!(r#"{{"Events": [{bad}]}}"#);
        let doc = parse_document(&text).expect("kept");
        assert!(doc.events.is_empty() && doc.rejected.len() == 1, "{text}");
    }
}

#[test]
fn error_messages_quote_at_most_about_200_characters() {
    let long = format!("<html>{}</html>", "x".repeat(5000));
    let message = parse_document(&long).unwrap_err().to_string();
    assert!(message.len() < 400, "{} chars", message.len());
    assert!(message.contains("<html>xxx"), "{message}");
}

#[test]
fn truncate_counts_characters_not_bytes() {
    assert_eq!(truncate("äöü", 2), "äö…");
    assert_eq!(truncate("äöü", 3), "äöü");
}

#[test]
fn start_requests_render_exactly() {
    let ids = vec![EventId::from("f020ba2e-3bc0-4c40-a10b-86575a9eabd5")];
    assert_eq!(
        render_start_requests(&ids),
        r#"{"StartRequests":[{"EventId":"f020ba2e-3bc0-4c40-a10b-86575a9eabd5"}]}"#
    );
    let two = StartRequests {
        event_ids: vec!["a".into(), "b".into()],
    };
    assert_eq!(
        two.render(),
        r#"{"StartRequests":[{"EventId":"a"},{"EventId":"b"}]}"#
    );
}

#[test]
fn start_requests_from_the_seeds_parse() {
    assert_eq!(
        parse_start_requests(SEED_START_BASH).unwrap(),
        ["f020ba2e-3bc0-4c40-a10b-86575a9eabd5"]
    );
    assert_eq!(
        StartRequests::parse(SEED_START_TEMPLATE).unwrap().event_ids,
        ["5DD55B64-45AD-49D3-BBC9-F57D4EA97BD7"]
    );
}

#[test]
fn start_requests_parse_strictly() {
    let bad_bodies = [
        "",
        "[]",
        "{}",
        r#"{"startrequests": [{"EventId": "a"}]}"#,
        r#"{"StartRequests": {"EventId": "a"}}"#,
        r#"{"StartRequests": [{}]}"#,
        r#"{"StartRequests": [{"eventid": "a"}]}"#,
        r#"{"StartRequests": [{"EventId": ""}]}"#,
        r#"{"StartRequests": [{"EventId": 5}]}"#,
        r#"{"StartRequests": ["a"]}"#,
    ];
    for body in bad_bodies {
        assert!(parse_start_requests(body).is_err(), "accepted {body:?}");
    }
}

fn arb_event_type() -> impl Strategy<Value = (EventType, String)> {
    prop_oneof![
        proptest::sample::select(EventType::KNOWN.to_vec())
            .prop_map(|known| (known, known.as_wire().to_string())),
        "[A-Za-z]{0,12}"
            .prop_filter("must not name a known type", |raw| {
                EventType::from_wire(raw) == EventType::Unknown
            })
            .prop_map(|raw| (EventType::Unknown, raw)),
    ]
}

fn arb_event() -> impl Strategy<Value = ScheduledEvent> {
    (
        "[A-Za-z0-9-]{1,40}",
        arb_event_type(),
        ".{0,20}",
        proptest::collection::vec(".{0,16}", 0..4),
        proptest::sample::select(vec![EventStatus::Scheduled, EventStatus::Started]),
        proptest::option::of(0u64..253_402_300_799),
        ".{0,60}",
        proptest::sample::select(vec![
            EventSource::Platform,
            EventSource::User,
            EventSource::Unknown,
        ]),
        proptest::option::of(0i64..=i64::MAX),
    )
        .prop_map(
            |(
                id,
                (event_type, event_type_raw),
                resource_type,
                resources,
                status,
                not_before,
                description,
                source,
                duration_seconds,
            )| ScheduledEvent {
                id: id.into(),
                event_type,
                resource_type,
                resources,
                status,
                not_before: not_before.map(|secs| UNIX_EPOCH + Duration::from_secs(secs)),
                description,
                source,
                duration_seconds,
                // An unknown type is kept, and noted as one forewarn does not know.
                unreadable: match event_type {
                    EventType::Unknown => vec![UnreadableField {
                        field: EventField::EventType,
                        raw: event_type_raw.clone(),
                    }],
                    _ => Vec::new(),
                },
                event_type_raw,
            },
        )
}

fn arb_document() -> impl Strategy<Value = Document> {
    (
        proptest::option::of(any::<u64>()),
        proptest::collection::vec(arb_event(), 0..5),
    )
        .prop_map(|(incarnation, events)| Document {
            incarnation,
            events,
            rejected: Vec::new(),
        })
}

proptest! {
    #[test]
    fn render_then_parse_round_trips(doc in arb_document()) {
        let text = render_document(&doc);
        prop_assert_eq!(parse_document(&text).unwrap(), doc);
    }

    #[test]
    fn start_requests_round_trip(ids in proptest::collection::vec("[A-Za-z0-9-]{1,40}", 0..5)) {
        let ids: Vec<EventId> = ids.into_iter().map(EventId::from).collect();
        prop_assert_eq!(parse_start_requests(&render_start_requests(&ids)).unwrap(), ids);
    }

    #[test]
    fn parse_never_panics(text in ".{0,300}") {
        let _ = parse_document(&text);
        let _ = parse_start_requests(&text);
    }
}
