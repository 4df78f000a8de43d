//! What the `forewarn events` commands share: fetching the outcome records from the running
//! daemon (`/status/events`), choosing them by age, and the record as text and as a
//! CloudEvent.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::Serialize;

use crate::cli::status_command::{DaemonArgs, fetch_admin};
use forewarn_daemon::ops::outcome_status::EventsView;
use forewarn_imds::ImdsTime;
use forewarn_pipeline::log_fields::rfc3339;
use forewarn_pipeline::outcome::host_move::HostChange;
use forewarn_pipeline::outcome::impact::Impact;
use forewarn_pipeline::outcome::record::{ApprovalRecord, OutcomeRecord};
use forewarn_pipeline::outcome::verdict::spoken;

/// Fetches `/status/events` from the daemon `daemon` names.
pub(crate) async fn fetch_records(daemon: &DaemonArgs) -> anyhow::Result<EventsView> {
    let url = daemon.url("/status/events")?;
    let (status, body) = fetch_admin(&url).await.with_context(|| {
        format!("cannot get the outcome records from {url}: is forewarn running (`systemctl status forewarn`)? If its admin endpoint listens elsewhere, pass --admin ADDRESS:PORT")
    })?;
    if !status.is_success() {
        anyhow::bail!(
            "{url} answered {status}: is it a forewarn older than `forewarn events`? Upgrade the daemon"
        );
    }
    serde_json::from_str(&body).with_context(|| {
        format!("{url} did not answer with forewarn's outcome records (is it a different forewarn version?)")
    })
}

/// When the record last changed: finished, ended, started, or first seen.
pub(crate) fn last_change(record: &OutcomeRecord) -> ImdsTime {
    let happened = &record.happened;
    happened
        .finished_unix_ms
        .or(happened.ended_unix_ms)
        .or(happened.started_unix_ms)
        .unwrap_or(record.handled.first_seen_unix_ms)
}

/// The records that changed within `since` of `now`.
pub(crate) fn changed_since(
    records: Vec<OutcomeRecord>,
    since: Option<Duration>,
    now: SystemTime,
) -> Vec<OutcomeRecord> {
    let Some(since) = since else {
        return records;
    };
    let cutoff = ImdsTime::from_system_time(now).saturating_sub(since);
    records
        .into_iter()
        .filter(|record| last_change(record) >= cutoff)
        .collect()
}

/// A CloudEvents 1.0 event in the structured JSON form (one per line of `events export
/// --format cloudevents`), with the record as its `data`.
#[derive(Debug, Serialize)]
pub(crate) struct CloudEvent<'a> {
    specversion: &'static str,
    id: String,
    source: String,
    #[serde(rename = "type")]
    event_type: &'static str,
    subject: &'a str,
    time: String,
    datacontenttype: &'static str,
    data: &'a OutcomeRecord,
}

/// The CloudEvents `type` of an outcome record.
pub(crate) const CLOUDEVENT_TYPE: &str = "io.forewarn.scheduled-event.outcome";

impl<'a> CloudEvent<'a> {
    /// `record` of the VM `vm_name` as a CloudEvent: its id is the record's (event id and
    /// first sight), its source the VM, its time the record's last change.
    pub(crate) fn of(record: &'a OutcomeRecord, vm_name: &str) -> CloudEvent<'a> {
        let vm: String = vm_name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let time = chrono::DateTime::<chrono::Utc>::from(last_change(record).system_time())
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string();
        CloudEvent {
            specversion: "1.0",
            id: format!(
                "{}@{}",
                record.event_id,
                record.handled.first_seen_unix_ms.unix_ms()
            ),
            source: format!("/forewarn/vm/{vm}"),
            event_type: CLOUDEVENT_TYPE,
            subject: record.event_id.as_str(),
            time,
            datacontenttype: "application/json",
            data: record,
        }
    }
}

/// One line of `events list`: first seen, id, type, stage, verdict.
pub(crate) fn list_line(record: &OutcomeRecord) -> String {
    format!(
        "{}  {:<38} {:<9} {:<9} {}",
        rfc3339(record.handled.first_seen_unix_ms),
        record.event_id,
        record.event_type_raw,
        stage_word(record),
        record.verdict.text
    )
}

fn stage_word(record: &OutcomeRecord) -> &'static str {
    use forewarn_pipeline::outcome::record::RecordStage;
    match record.stage {
        RecordStage::Announced => "announced",
        RecordStage::Started => "started",
        RecordStage::Ended => "ended",
        RecordStage::Canceled => "canceled",
        RecordStage::Finished { .. } => "finished",
    }
}

/// The record for people (`events show ID`).
pub(crate) fn render_record(record: &OutcomeRecord) -> String {
    let mut text = String::new();
    let at = |time: Option<ImdsTime>| time.map_or_else(|| "-".to_owned(), rfc3339);
    let announced = &record.announced;
    let handled = &record.handled;
    let happened = &record.happened;
    let _ = writeln!(
        text,
        "{} {} — {}",
        record.event_type_raw,
        record.event_id,
        stage_word(record)
    );
    let _ = writeln!(text, "verdict: {}", record.verdict.text);
    let _ = writeln!(text, "\nannounced");
    let _ = writeln!(text, "  source        {:?}", announced.source);
    let _ = writeln!(
        text,
        "  resources     {} ({})",
        announced.resources,
        if announced.names_this_vm {
            "this VM is one"
        } else {
            "not this VM"
        }
    );
    let duration = announced
        .duration_seconds
        .map_or_else(|| "unknown".to_owned(), |seconds| format!("{seconds} s"));
    let _ = writeln!(text, "  duration      {duration}");
    if !announced.description.is_empty() {
        let _ = writeln!(text, "  description   {}", announced.description);
    }
    for seen in &announced.not_before {
        let _ = writeln!(
            text,
            "  NotBefore     {} (seen {})",
            at(seen.not_before_unix_ms),
            rfc3339(seen.seen_unix_ms)
        );
    }
    for seen in &announced.statuses {
        let _ = writeln!(
            text,
            "  {:<13} {}",
            seen.transition.as_str(),
            rfc3339(seen.seen_unix_ms)
        );
    }
    let _ = writeln!(text, "\nforewarn");
    let _ = writeln!(
        text,
        "  first seen    {}",
        rfc3339(handled.first_seen_unix_ms)
    );
    let _ = writeln!(text, "  handling      {}", handled.handling);
    for call in &handled.calls {
        let answer = call.answer.as_ref().map_or_else(
            || "no answer".to_owned(),
            |answer| {
                format!(
                    "{} in {} ms {}",
                    answer.outcome.as_str(),
                    answer.elapsed_ms,
                    answer.reason
                )
            },
        );
        let _ = writeln!(
            text,
            "  call          {} {} #{}: {answer}",
            call.plugin,
            call.phase.as_str(),
            call.attempt
        );
    }
    if handled.calls_dropped > 0 {
        let _ = writeln!(text, "  …             {} more calls", handled.calls_dropped);
    }
    for hold in &handled.holds {
        let _ = writeln!(
            text,
            "  held          {} ({})",
            hold.reason,
            rfc3339(hold.at_unix_ms)
        );
    }
    let approval = match &handled.approval {
        ApprovalRecord::NotSent { failed_posts } => {
            format!("not sent ({failed_posts} POSTs failed)")
        }
        ApprovalRecord::Accepted {
            at_unix_ms,
            before_not_before_ms,
            ..
        } => format!(
            "accepted {}{}",
            rfc3339(*at_unix_ms),
            before_not_before_ms.map_or_else(String::new, |ms| format!(
                ", {} before NotBefore",
                spoken(ms)
            ))
        ),
    };
    let _ = writeln!(text, "  approval      {approval}");
    let _ = writeln!(text, "\nhappened");
    let _ = writeln!(text, "  started       {}", at(happened.started_unix_ms));
    let _ = writeln!(text, "  ended         {}", at(happened.ended_unix_ms));
    let impact = match &happened.impact {
        Impact::Pause(measured) | Impact::Downtime(measured) => format!(
            "{} ± {} ms ({})",
            spoken(measured.milliseconds),
            measured.precision_ms,
            measured.how
        ),
        Impact::Pending => "not over yet".to_owned(),
        Impact::NoPauseSeen { threshold_ms } => format!("no pause over {threshold_ms} ms seen"),
        Impact::NotMeasured { why } => format!("not measured: {why}"),
    };
    let _ = writeln!(text, "  impact        {impact}");
    if let Some(host) = &happened.host {
        let host = match host {
            HostChange::Moved { from, to } => format!("moved from {from} to {to}"),
            HostChange::SameHost { id } => format!("the same dedicated host, {id}"),
            HostChange::NotTold { why } => format!("not told: {why}"),
        };
        let _ = writeln!(text, "  host          {host}");
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use forewarn_imds::EventType;
    use forewarn_pipeline::outcome::{OutcomeBook, OutcomeLimits};
    use forewarn_pipeline::test_harness::{event, started, t0, transition_entry as transition};
    use forewarn_pipeline::timeline::TimelineEntry;
    use forewarn_pipeline::tracker::TransitionKind;

    /// A Reboot seen at t0, approved at t0 + 10 s, started at t0 + 60 s.
    fn started_reboot() -> OutcomeRecord {
        let limits = OutcomeLimits {
            keep: 10,
            max_total_bytes: u64::MAX,
        };
        let mut book = OutcomeBook::new("vm-a", limits);
        let reboot = event("R1", EventType::Reboot, t0(), Duration::from_secs(60));
        book.record(&transition(&reboot, TransitionKind::Scheduled), t0());
        let approved = TimelineEntry::Approved {
            event_ids: vec!["R1".into()],
        };
        book.record(&approved, t0() + Duration::from_secs(10));
        let start = transition(&started(&reboot), TransitionKind::Started);
        book.record(&start, t0() + Duration::from_secs(60));
        book.records().next().expect("a record").clone()
    }

    #[test]
    fn a_record_reads_for_people_and_as_a_cloudevent() {
        let record = started_reboot();
        let text = render_record(&record);
        assert!(text.starts_with("Reboot R1 — started\n"), "{text}");
        assert!(text.contains("approval      accepted "), "{text}");
        assert!(text.contains(", 50 s before NotBefore"), "{text}");
        assert!(text.contains("impact        not over yet"), "{text}");
        assert!(
            list_line(&record).contains(" R1 "),
            "{}",
            list_line(&record)
        );

        let cloudevent = serde_json::to_value(CloudEvent::of(&record, "vm a/1")).unwrap();
        assert_eq!(cloudevent["specversion"], "1.0");
        assert_eq!(cloudevent["source"], "/forewarn/vm/vm_a_1");
        assert_eq!(cloudevent["type"], CLOUDEVENT_TYPE);
        assert_eq!(cloudevent["subject"], "R1");
        assert_eq!(cloudevent["datacontenttype"], "application/json");
        assert_eq!(
            cloudevent["id"],
            format!("R1@{}", record.handled.first_seen_unix_ms.unix_ms())
        );
        assert_eq!(cloudevent["data"]["event_id"], "R1");
        let time = cloudevent["time"].as_str().unwrap();
        assert!(time.ends_with(".000Z"), "{time}");
    }

    #[test]
    fn since_keeps_the_records_changed_within_it() {
        let record = started_reboot();
        let changed = last_change(&record).system_time();
        let kept = |since, now| changed_since(vec![record.clone()], since, now).len();
        assert_eq!(kept(None, changed + Duration::from_secs(86_400)), 1);
        assert_eq!(
            kept(
                Some(Duration::from_secs(3600)),
                changed + Duration::from_secs(60)
            ),
            1
        );
        assert_eq!(
            kept(
                Some(Duration::from_secs(3600)),
                changed + Duration::from_secs(7200)
            ),
            0
        );
    }
}
