use super::*;
use crate::pipeline::state::{AnswerOutcome, CallPhase};
use crate::pipeline::tracker::TransitionKind;

fn value_of(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// An EventType from IMDS that tries to end the label and write a series of its own.
const FORGED: &str = "Reboot\",transition=\"x\"} 1\nforewarn_approvals_total 1000\n#";

#[test]
fn an_event_type_from_imds_cannot_forge_a_series() {
    let metrics = Metrics::new();
    metrics.record_timeline(&TimelineEntry::Transition {
        event_id: "E1".into(),
        event_type: forewarn_imds::EventType::from_wire(FORGED),
        event_type_raw: FORGED.into(),
        transition: TransitionKind::Scheduled,
        detail: String::new(),
        announced: Box::new(crate::pipeline::test_harness::event(
            "E1",
            forewarn_imds::EventType::Reboot,
            crate::pipeline::test_harness::t0(),
            std::time::Duration::from_secs(60),
        )),
    });
    let text = metrics.encode();
    assert_eq!(
        value_of(
            &text,
            "forewarn_event_transitions_total{event_type=\"Unknown\",transition=\"scheduled\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_approvals_total"),
        Some(0.0),
        "{text}"
    );
    assert!(!text.contains("1000"), "{text}");
}

#[test]
fn timeline_entries_become_bounded_series() {
    let metrics = Metrics::new();
    for id in ["E1", "E2", "E3"] {
        metrics.record_timeline(&TimelineEntry::PluginAnswered {
            event_id: id.into(),
            plugin: "lb-drain".into(),
            phase: CallPhase::Prepare,
            outcome: AnswerOutcome::Approve,
            reason: String::new(),
            elapsed_ms: 4,
        });
    }
    metrics.record_timeline(&TimelineEntry::Approved {
        event_ids: vec!["E1".into(), "E2".into()],
    });
    metrics.record_timeline(&TimelineEntry::Transition {
        event_id: "E1".into(),
        event_type: forewarn_imds::EventType::Reboot,
        event_type_raw: "Reboot".into(),
        transition: TransitionKind::Scheduled,
        detail: String::new(),
        announced: Box::new(crate::pipeline::test_harness::event(
            "E1",
            forewarn_imds::EventType::Reboot,
            crate::pipeline::test_harness::t0(),
            std::time::Duration::from_secs(60),
        )),
    });
    let text = metrics.encode();
    assert_eq!(
        value_of(
            &text,
            "forewarn_plugin_calls_total{plugin=\"lb-drain\",phase=\"prepare\",outcome=\"approve\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_approvals_total"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value_of(
            &text,
            "forewarn_event_transitions_total{event_type=\"Reboot\",transition=\"scheduled\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value_of(
            &text,
            "forewarn_plugin_call_duration_seconds_count{plugin=\"lb-drain\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert!(
        !text.contains("E1"),
        "event ids must not become labels: {text}"
    );
}

#[test]
fn poll_status_deltas_accumulate() {
    let metrics = Metrics::new();
    let first = PollStatus {
        polls: 5,
        errors_by_kind: BTreeMap::from([("server", 1)]),
        consecutive_failures: 1,
        ..PollStatus::default()
    };
    let second = PollStatus {
        polls: 9,
        errors_by_kind: BTreeMap::from([("server", 1), ("throttled", 2)]),
        consecutive_failures: 0,
        ..PollStatus::default()
    };
    metrics.record_poll(&PollStatus::default(), &first);
    metrics.record_poll(&first, &second);
    let text = metrics.encode();
    assert_eq!(
        value_of(&text, "forewarn_imds_polls_total"),
        Some(9.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_imds_poll_errors_total{kind=\"throttled\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_imds_documents_total"),
        Some(6.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_imds_consecutive_failures"),
        Some(0.0),
        "{text}"
    );
}

#[test]
fn unreadable_fields_and_the_clock_offset_are_exported() {
    let metrics = Metrics::new();
    let first = PollStatus {
        unreadable_by_field: BTreeMap::from([("NotBefore", 2)]),
        clock: Some(forewarn_imds::ClockSkew {
            offset_ms: 10_250,
            uncertainty_ms: 300,
            samples: 4,
            beyond_bound: false,
        }),
        unchanged_documents: 7,
        ..PollStatus::default()
    };
    let second = PollStatus {
        unreadable_by_field: BTreeMap::from([("NotBefore", 3), ("EventType", 1)]),
        ..first.clone()
    };
    metrics.record_imds_reading(&PollStatus::default(), &first);
    metrics.record_imds_reading(&first, &second);
    let text = metrics.encode();
    assert_eq!(
        value_of(
            &text,
            "forewarn_events_unreadable_total{field=\"NotBefore\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        value_of(
            &text,
            "forewarn_events_unreadable_total{field=\"EventType\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_imds_clock_offset_seconds"),
        Some(10.25),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_imds_documents_unchanged_total"),
        Some(7.0),
        "{text}"
    );
}

#[test]
fn plugin_sets_count_reloads_and_new_failures() {
    let metrics = Metrics::new();
    let failing = BTreeMap::from([(PathBuf::from("/p/bad.wasm"), "broken".to_owned())]);
    let set = PluginSet::default().with_load_errors(failing.clone());
    metrics.record_plugin_set(&BTreeMap::new(), &PluginSet::default(), true);
    metrics.record_plugin_set(&BTreeMap::new(), &set, false);
    metrics.record_plugin_set(&failing, &set, false);
    let text = metrics.encode();
    assert_eq!(
        value_of(&text, "forewarn_plugin_reloads_total"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_plugin_load_failures_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_plugin_load_errors"),
        Some(1.0),
        "{text}"
    );
}

/// A reader that falls behind the timeline's buffer counts what it missed in
/// `forewarn_timeline_missed_total` (the end-to-end tests see it stay 0) and still counts
/// the entries it did read.
#[tokio::test]
async fn entries_the_reader_missed_are_counted_as_missed() {
    let metrics = Arc::new(Metrics::new());
    let (timeline, reader) = broadcast::channel(4);
    for index in 0..10 {
        let approved = TimelineEntry::Approved {
            event_ids: vec![format!("E{index}").into()],
        };
        timeline.send(approved).expect("the reader is subscribed");
    }
    drop(timeline);
    follow_timeline(metrics.clone(), reader, CancellationToken::new()).await;
    let text = metrics.encode();
    assert_eq!(
        value_of(&text, "forewarn_timeline_missed_total"),
        Some(6.0),
        "{text}"
    );
    assert_eq!(
        value_of(&text, "forewarn_approvals_total"),
        Some(4.0),
        "{text}"
    );
}
