//! What the event cost, for its `ended` notice: its outcome record, read at the end from the
//! daemon's admin endpoint (`GET /status/events`, config `outcome-url`): the verdict line
//! ("prepared 41 s before NotBefore; approved 12 min early; paused 3.2 s, announced ≤ 9 s")
//! and the impact measured inside the VM with its precision (pure parsing, tested natively).

use serde_json::Value;

/// The part of an outcome record a notice shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The record's verdict line.
    pub(crate) verdict: String,
    /// The impact measured, in words: "paused 3.5 s ± 50 ms", "down 6.9 s ± 500 ms", "no
    /// pause seen", "not measured: …"; empty while it is being measured.
    pub(crate) measured: String,
    /// Whether the record's impact is final (the daemon saw the event over).
    pub(crate) settled: bool,
}

/// The newest record of `event_id` in a `/status/events` answer; None when it has none.
pub(crate) fn from_events_view(body: &str, event_id: &str) -> Option<Outcome> {
    let view: Value = serde_json::from_str(body).ok()?;
    let record = view["records"].as_array()?.iter().rev().find(|record| {
        record["event_id"]
            .as_str()
            .is_some_and(|id| id.eq_ignore_ascii_case(event_id))
    })?;
    let impact = &record["happened"]["impact"];
    Some(Outcome {
        verdict: record["verdict"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        measured: measured(impact),
        settled: impact["kind"]
            .as_str()
            .is_some_and(|kind| kind != "pending"),
    })
}

fn measured(impact: &Value) -> String {
    let figure = |verb: &str| {
        let milliseconds = impact["milliseconds"].as_u64().unwrap_or_default();
        let precision = impact["precision_ms"].as_u64().unwrap_or_default();
        format!(
            "{verb} {:.1} s ± {precision} ms",
            milliseconds as f64 / 1000.0
        )
    };
    match impact["kind"].as_str().unwrap_or_default() {
        "pause" => figure("paused"),
        "downtime" => figure("down"),
        "no-pause-seen" => "no pause seen".to_owned(),
        "not-measured" => format!(
            "not measured: {}",
            impact["why"].as_str().unwrap_or_default()
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIEW: &str = r#"{"vm_name":"vm-a","records":[
        {"event_id":"OLD","verdict":{"text":"old"},"happened":{"impact":{"kind":"pending"}}},
        {"event_id":"E1","verdict":{"text":"prepared 41 s before NotBefore; approved 12 min early; paused 3.2 s, announced ≤ 9 s"},
         "happened":{"impact":{"kind":"pause","milliseconds":3200,"precision_ms":50,"measured_by":"largest-heartbeat-gap","how":"…"}}},
        {"event_id":"E2","verdict":{"text":"prepared; under way"},"happened":{"impact":{"kind":"pending"}}}
    ],"keep":200,"max_bytes":1,"bytes":1}"#;

    #[test]
    fn the_record_of_the_event_gives_its_verdict_and_measured_impact() {
        assert_eq!(
            from_events_view(VIEW, "e1"),
            Some(Outcome {
                verdict: "prepared 41 s before NotBefore; approved 12 min early; paused 3.2 s, announced ≤ 9 s".into(),
                measured: "paused 3.2 s ± 50 ms".into(),
                settled: true,
            })
        );
        let pending = from_events_view(VIEW, "E2").expect("a record");
        assert!(!pending.settled);
        assert_eq!(pending.measured, "");
        assert_eq!(from_events_view(VIEW, "E9"), None);
        assert_eq!(from_events_view("<html>", "E1"), None);
    }

    #[test]
    fn each_impact_reads_in_words() {
        let words = |impact: &str| measured(&serde_json::from_str(impact).expect("JSON"));
        assert_eq!(
            words(r#"{"kind":"downtime","milliseconds":6927,"precision_ms":500}"#),
            "down 6.9 s ± 500 ms"
        );
        assert_eq!(
            words(r#"{"kind":"no-pause-seen","threshold_ms":250}"#),
            "no pause seen"
        );
        assert_eq!(
            words(r#"{"kind":"not-measured","why":"the VM is evicted"}"#),
            "not measured: the VM is evicted"
        );
    }
}
