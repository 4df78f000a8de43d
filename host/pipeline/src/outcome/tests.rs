//! The outcome book on made-up instants: what each entry does to a record, the verdict
//! line, the heartbeat's gaps, a reboot's downtime, and the bounds.

use std::time::Duration;

use forewarn_events::{EventId, EventStatus, EventType, ImdsTime, ScheduledEvent};

use super::host_move::{HostChange, HostReading};
use super::impact::{Downtime, HeartbeatGap, Impact, MonotonicTime, PauseMeter, RestartSeen};
use super::record::{ApprovalRecord, RecordStage};
use super::verdict::{PreparationOutcome, VerdictPart};
use super::{BookChange, OutcomeBook, OutcomeLimits, RecordKey};
use crate::state::{AnswerOutcome, CallPhase};
use crate::test_harness::{event, started, t0, transition_entry as transition};
use crate::timeline::TimelineEntry;
use crate::tracker::TransitionKind;

const ROOMY: OutcomeLimits = OutcomeLimits {
    keep: 100,
    max_total_bytes: u64::MAX,
};

fn at(seconds: u64) -> ImdsTime {
    t0() + Duration::from_secs(seconds)
}

fn called(id: &str, phase: CallPhase) -> TimelineEntry {
    TimelineEntry::PluginCalled {
        event_id: id.into(),
        plugin: "drain".into(),
        phase,
        attempt: 1,
        budget_ms: 10_000,
    }
}

fn answered(id: &str, phase: CallPhase, outcome: AnswerOutcome) -> TimelineEntry {
    TimelineEntry::PluginAnswered {
        event_id: id.into(),
        plugin: "drain".into(),
        phase,
        outcome,
        reason: "drained".into(),
        elapsed_ms: 1_200,
    }
}

fn approved(id: &str) -> TimelineEntry {
    TimelineEntry::Approved {
        event_ids: vec![id.into()],
    }
}

fn gap(ended: ImdsTime, length_ms: u64) -> HeartbeatGap {
    HeartbeatGap {
        ended_unix_ms: ended,
        length_ms,
        precision_ms: 50,
    }
}

/// A Freeze announced at t0 for NotBefore t0 + 15 min, DurationInSeconds 9.
fn freeze() -> ScheduledEvent {
    let mut freeze = event("F1", EventType::Freeze, t0(), Duration::from_secs(15 * 60));
    freeze.duration_seconds = Some(9);
    freeze.resources = vec!["vm-a".into(), "vm-b".into()];
    freeze
}

/// `event` seen Started at `started`, then gone at `ended`.
fn start_and_end(
    book: &mut OutcomeBook,
    event: &ScheduledEvent,
    started_at: ImdsTime,
    ended_at: ImdsTime,
) {
    book.record(
        &transition(&started(event), TransitionKind::Started),
        started_at,
    );
    book.record(
        &transition(event, TransitionKind::EndedAfterStart),
        ended_at,
    );
}

fn only_record(book: &OutcomeBook) -> &super::record::OutcomeRecord {
    let records: Vec<_> = book.records().collect();
    assert_eq!(records.len(), 1, "{records:#?}");
    records[0]
}

#[test]
fn a_freeze_is_recorded_from_announcement_to_its_measured_pause() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let freeze = freeze();
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    book.record(
        &TimelineEntry::Handling {
            event_id: "F1".into(),
            handling: "plugins prepare this VM".into(),
        },
        t0(),
    );
    book.record(&called("F1", CallPhase::Prepare), at(1));
    book.record(
        &answered("F1", CallPhase::Prepare, AnswerOutcome::Defer),
        at(2),
    );
    book.record(&called("F1", CallPhase::Prepare), at(100));
    // Prepared 41 s before NotBefore; approved 12 min before it.
    book.record(
        &answered("F1", CallPhase::Prepare, AnswerOutcome::Approve),
        at(15 * 60 - 41),
    );
    book.record(&approved("F1"), at(3 * 60));
    assert_eq!(
        only_record(&book).handled.prepared_unix_ms,
        Some(at(15 * 60 - 41))
    );
    book.record(
        &transition(&started(&freeze), TransitionKind::Started),
        at(15 * 60),
    );
    // Gaps outside the Started window do not count; the largest inside does.
    book.heartbeat_gap(gap(at(15 * 60 + 2), 800));
    book.heartbeat_gap(gap(at(15 * 60 + 6), 3_200));
    book.heartbeat_gap(gap(at(15 * 60 + 9), 1_000));
    book.record(
        &transition(&freeze, TransitionKind::EndedAfterStart),
        at(15 * 60 + 20),
    );
    book.heartbeat_gap(gap(at(15 * 60 + 40), 9_000));
    book.record(
        &TimelineEntry::Finished {
            event_id: "F1".into(),
        },
        at(15 * 60 + 30),
    );

    let record = only_record(&book);
    assert_eq!(record.stage, RecordStage::Finished { started: true });
    assert_eq!(record.announced.resources, 2);
    assert!(record.announced.names_this_vm);
    assert_eq!(record.announced.duration_seconds, Some(9));
    assert_eq!(record.handled.handling, "plugins prepare this VM");
    assert_eq!(record.handled.calls.len(), 2);
    let first = record.handled.calls[0].answer.as_ref().unwrap();
    assert_eq!(
        (first.outcome, first.elapsed_ms),
        (AnswerOutcome::Defer, 1_200)
    );
    assert!(matches!(
        record.handled.approval,
        ApprovalRecord::Accepted {
            before_not_before_ms: Some(720_000),
            ..
        }
    ));
    let Impact::Pause(pause) = &record.happened.impact else {
        panic!("no pause: {:?}", record.happened.impact);
    };
    assert_eq!((pause.milliseconds, pause.precision_ms), (3_200, 50));
    assert_eq!(
        record.verdict.text,
        "prepared 41 s before NotBefore; approved 12 min early; paused 3.2 s, announced ≤ 9 s"
    );
    assert_eq!(
        record.verdict.preparation(),
        PreparationOutcome::InTime {
            before_ms: Some(41_000)
        }
    );
    let closed = book.poll_closed().expect("the event closed");
    assert_eq!(closed.event_type, EventType::Freeze);
    assert_eq!(closed.impact_seconds, Some(3.2));
    assert!(book.poll_closed().is_none(), "closed once");
}

#[test]
fn every_reschedule_and_status_change_is_kept() {
    let mut book = OutcomeBook::new("vm-z", ROOMY);
    let first = freeze();
    book.record(&transition(&first, TransitionKind::Scheduled), t0());
    let mut later = first.clone();
    later.not_before = Some((t0() + Duration::from_secs(3600)).system_time());
    book.record(&transition(&later, TransitionKind::Rescheduled), at(60));
    book.record(
        &transition(&started(&later), TransitionKind::Started),
        at(3600),
    );
    let record = only_record(&book);
    assert!(!record.announced.names_this_vm, "vm-z is not named");
    let not_befores: Vec<_> = record
        .announced
        .not_before
        .iter()
        .map(|seen| (seen.seen_unix_ms, seen.not_before_unix_ms))
        .collect();
    assert_eq!(
        not_befores,
        [(t0(), Some(at(15 * 60))), (at(60), Some(at(3600)))]
    );
    let statuses: Vec<_> = record
        .announced
        .statuses
        .iter()
        .map(|seen| (seen.transition, seen.status))
        .collect();
    assert_eq!(
        statuses,
        [
            (TransitionKind::Scheduled, Some(EventStatus::Scheduled)),
            (TransitionKind::Rescheduled, Some(EventStatus::Scheduled)),
            (TransitionKind::Started, Some(EventStatus::Started)),
        ]
    );
}

#[test]
fn a_wall_clock_step_is_not_a_pause_and_a_monotonic_gap_is() {
    let period = Duration::from_millis(50);
    let mut meter = PauseMeter::new(period);
    let mono = |ms| MonotonicTime::from_origin(Duration::from_millis(ms));
    assert_eq!(
        meter.beat(mono(0), at(0)),
        None,
        "the first beat has no previous"
    );
    assert_eq!(meter.beat(mono(50), at(0)), None);
    // The wall clock is set an hour forward between two beats 50 ms apart.
    assert_eq!(meter.beat(mono(100), at(3600)), None);
    // And back again.
    assert_eq!(meter.beat(mono(150), at(0)), None);
    // A stop of the process: 5 s pass on the monotonic clock, the wall clock steps too.
    let gap = meter.beat(mono(5_200), at(7)).expect("a gap");
    assert_eq!(gap.length_ms, 5_000, "less the beat's own period");
    assert_eq!(gap.precision_ms, 50);
    assert_eq!(gap.ended_unix_ms, at(7));
    // Scheduling noise below the threshold is not reported.
    assert_eq!(meter.beat(mono(5_200 + 240), at(7)), None);
}

#[test]
fn a_pause_just_before_the_daemon_saw_the_start_counts() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let freeze = freeze();
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    // The freeze began as IMDS said Started; the daemon's poll saw it after the pause.
    book.heartbeat_gap(gap(at(899), 4_000));
    book.heartbeat_gap(gap(at(100), 7_000));
    start_and_end(&mut book, &freeze, at(900), at(920));
    let record = only_record(&book);
    assert_eq!(
        record.happened.largest_gap.map(|gap| gap.length_ms),
        Some(4_000)
    );
}

#[test]
fn a_freeze_without_a_gap_says_no_pause_was_seen() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let freeze = freeze();
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    start_and_end(&mut book, &freeze, at(900), at(920));
    let record = only_record(&book);
    assert_eq!(
        record.happened.impact,
        Impact::NoPauseSeen { threshold_ms: 250 }
    );
    assert!(
        record
            .verdict
            .text
            .ends_with("no pause over 0.25 s seen, announced ≤ 9 s"),
        "{}",
        record.verdict.text
    );
}

/// With plugins in turns (`after`), the event is prepared when the last turn approved, not
/// when the first did: a later plugin's first call takes "prepared" back.
#[test]
fn an_event_is_prepared_when_the_last_turn_approved() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let freeze = freeze();
    let id = freeze.id.as_str().to_owned();
    let turn = |plugin: &str, entry: TimelineEntry| match entry {
        TimelineEntry::PluginCalled {
            event_id,
            phase,
            attempt,
            budget_ms,
            ..
        } => TimelineEntry::PluginCalled {
            event_id,
            plugin: plugin.into(),
            phase,
            attempt,
            budget_ms,
        },
        TimelineEntry::PluginAnswered {
            event_id,
            phase,
            outcome,
            reason,
            elapsed_ms,
            ..
        } => TimelineEntry::PluginAnswered {
            event_id,
            plugin: plugin.into(),
            phase,
            outcome,
            reason,
            elapsed_ms,
        },
        other => other,
    };
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    book.record(&turn("drain", called(&id, CallPhase::Prepare)), at(1));
    book.record(
        &turn(
            "drain",
            answered(&id, CallPhase::Prepare, AnswerOutcome::Approve),
        ),
        at(2),
    );
    book.record(&turn("checkpoint", called(&id, CallPhase::Prepare)), at(2));
    assert_eq!(
        only_record(&book).handled.prepared_unix_ms,
        None,
        "checkpoint has not answered"
    );
    book.record(
        &turn(
            "checkpoint",
            answered(&id, CallPhase::Prepare, AnswerOutcome::Defer),
        ),
        at(3),
    );
    book.record(&turn("checkpoint", called(&id, CallPhase::Prepare)), at(8));
    book.record(
        &turn(
            "checkpoint",
            answered(&id, CallPhase::Prepare, AnswerOutcome::Approve),
        ),
        at(9),
    );
    assert_eq!(only_record(&book).handled.prepared_unix_ms, Some(at(9)));
}

/// An event naming several VMs that started without this VM's POST is not called Azure's own
/// start: with `[coordination]` another VM of those named approved it for all.
#[test]
fn a_started_event_of_several_vms_not_sent_here_is_not_blamed_on_azure() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let freeze = freeze();
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    start_and_end(&mut book, &freeze, at(60), at(70));
    let text = &only_record(&book).verdict.text;
    assert!(
        text.contains("not approved: not sent by this VM (the event names 2 VMs: one approves for all, or Azure started it)"),
        "{text}"
    );
    let mut alone = freeze.clone();
    alone.resources = vec!["vm-a".into()];
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    book.record(&transition(&alone, TransitionKind::Scheduled), t0());
    start_and_end(&mut book, &alone, at(60), at(70));
    let text = &only_record(&book).verdict.text;
    assert!(
        text.contains("not approved: Azure started it without forewarn's approval"),
        "{text}"
    );
}

#[test]
fn a_reboot_across_a_new_boot_records_its_downtime() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let reboot = event("R1", EventType::Reboot, t0(), Duration::from_secs(300));
    book.record(&transition(&reboot, TransitionKind::Scheduled), t0());
    book.record(&approved("R1"), at(10));
    book.record(
        &transition(&started(&reboot), TransitionKind::Started),
        at(11),
    );
    // The daemon restarts: a new book from the saved records, then what it found.
    let saved: Vec<_> = book
        .records()
        .cloned()
        .map(|record| (record, 100))
        .collect();
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    book.restore(saved);
    let down = Downtime::between(1_000_000, 1_008_400, Duration::from_secs(1));
    assert_eq!((down.length_ms, down.precision_ms), (7_900, 500));
    book.restarted(&RestartSeen::Rebooted(down));
    book.record(
        &transition(&reboot, TransitionKind::EndedAfterStart),
        at(30),
    );
    let record = only_record(&book);
    let Impact::Downtime(measured) = &record.happened.impact else {
        panic!("no downtime: {:?}", record.happened.impact);
    };
    assert_eq!(measured.milliseconds, 7_900);
    assert!(
        record.verdict.text.ends_with("down 7.9 s"),
        "{}",
        record.verdict.text
    );
    assert!(
        record
            .verdict
            .parts
            .contains(&VerdictPart::Preparation(PreparationOutcome::NotNeeded)),
        "{:?}",
        record.verdict.parts
    );
}

#[test]
fn a_redeploy_that_came_back_on_another_dedicated_host_says_so() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let redeploy = event("D1", EventType::Redeploy, t0(), Duration::from_secs(300));
    let freeze = freeze();
    book.record(&transition(&redeploy, TransitionKind::Scheduled), t0());
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    book.record(
        &transition(&started(&redeploy), TransitionKind::Started),
        at(11),
    );
    let host = |id: &str| HostReading::Dedicated { id: id.into() };
    // Before the restart is known, no record takes a host.
    book.host_after_reboot(&HostChange::between(
        &host("hg/hosts/h1"),
        &host("hg/hosts/h2"),
    ));
    assert!(book.records().all(|record| record.happened.host.is_none()));
    let down = Downtime::between(1_000_000, 1_030_000, Duration::from_secs(1));
    book.restarted(&RestartSeen::Rebooted(down));
    book.host_after_reboot(&HostChange::between(
        &host("hg/hosts/h1"),
        &host("hg/hosts/h2"),
    ));
    book.record(
        &transition(&redeploy, TransitionKind::EndedAfterStart),
        at(60),
    );
    let record = book
        .records()
        .find(|record| record.event_type == EventType::Redeploy)
        .expect("the Redeploy's record");
    assert_eq!(
        record.happened.host,
        Some(HostChange::Moved {
            from: "hg/hosts/h1".into(),
            to: "hg/hosts/h2".into()
        })
    );
    assert!(
        record
            .verdict
            .text
            .ends_with("down 30 s; moved to dedicated host h2"),
        "{}",
        record.verdict.text
    );
    let freeze_record = book
        .records()
        .find(|record| record.event_type == EventType::Freeze)
        .expect("the Freeze's record");
    assert_eq!(freeze_record.happened.host, None);
}

#[test]
fn a_restart_in_the_same_boot_or_a_freeze_is_no_downtime() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let reboot = event("R1", EventType::Reboot, t0(), Duration::from_secs(300));
    let freeze = freeze();
    book.record(&transition(&reboot, TransitionKind::Scheduled), t0());
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    book.record(
        &transition(&started(&reboot), TransitionKind::Started),
        at(11),
    );
    book.record(
        &transition(&started(&freeze), TransitionKind::Started),
        at(11),
    );
    book.restarted(&RestartSeen::SameBoot);
    book.record(
        &transition(&reboot, TransitionKind::EndedAfterStart),
        at(30),
    );
    book.record(
        &transition(&freeze, TransitionKind::EndedAfterStart),
        at(30),
    );
    for record in book.records() {
        assert!(
            !matches!(record.happened.impact, Impact::Downtime(_)),
            "{record:?}"
        );
    }
    let freeze_record = book
        .records()
        .find(|record| record.event_id == "F1")
        .unwrap();
    assert_eq!(
        freeze_record.happened.restart, None,
        "a freeze takes no restart"
    );
}

#[test]
fn the_bounds_evict_the_oldest_records() {
    let limits = OutcomeLimits {
        keep: 2,
        max_total_bytes: 1_000,
    };
    let mut book = OutcomeBook::new("vm-a", limits);
    for (index, id) in ["A", "B", "C"].into_iter().enumerate() {
        let seen = at(index as u64);
        book.record(
            &transition(
                &event(id, EventType::Reboot, seen, Duration::from_secs(60)),
                TransitionKind::Scheduled,
            ),
            seen,
        );
    }
    let key = |id: &str, seconds| RecordKey {
        first_seen: at(seconds),
        event_id: EventId::from(id),
    };
    assert_eq!(book.poll_change(), Some(BookChange::Remove(key("A", 0))));
    let written: Vec<RecordKey> = std::iter::from_fn(|| book.poll_change())
        .map(|change| match change {
            BookChange::Write(key, _) => key,
            BookChange::Remove(key) => panic!("removed {key:?} too"),
        })
        .collect();
    assert_eq!(written, [key("B", 1), key("C", 2)]);
    // B's file is large: with C's, over the byte bound, so B goes too.
    book.written(&key("B", 1), 600);
    assert_eq!(book.poll_change(), None);
    book.written(&key("C", 2), 600);
    assert_eq!(book.poll_change(), Some(BookChange::Remove(key("B", 1))));
    let left: Vec<_> = book
        .records()
        .map(|record| record.event_id.clone())
        .collect();
    assert_eq!(left, ["C"]);
    // The newest is kept even over the bound.
    book.written(&key("C", 2), 5_000);
    assert_eq!(book.records().count(), 1);
}

#[test]
fn restored_records_over_the_bound_go_oldest_first() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    for (index, id) in ["A", "B", "C"].into_iter().enumerate() {
        let seen = at(index as u64);
        book.record(
            &transition(
                &event(id, EventType::Reboot, seen, Duration::from_secs(60)),
                TransitionKind::Scheduled,
            ),
            seen,
        );
    }
    let saved: Vec<_> = book.records().cloned().map(|record| (record, 10)).collect();
    let mut smaller = OutcomeBook::new("vm-a", OutcomeLimits { keep: 2, ..ROOMY });
    smaller.restore(saved.into_iter().rev().collect());
    let left: Vec<_> = smaller
        .records()
        .map(|record| record.event_id.clone())
        .collect();
    assert_eq!(left, ["B", "C"]);
    assert!(matches!(smaller.poll_change(), Some(BookChange::Remove(key)) if key.event_id == "A"));
}

#[test]
fn an_id_listed_again_after_it_finished_starts_a_new_record() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let reboot = event("R1", EventType::Reboot, t0(), Duration::from_secs(300));
    book.record(&transition(&reboot, TransitionKind::Scheduled), t0());
    book.record(
        &transition(&reboot, TransitionKind::EndedWithoutStart),
        at(5),
    );
    book.record(
        &TimelineEntry::Finished {
            event_id: "R1".into(),
        },
        at(6),
    );
    book.record(&transition(&reboot, TransitionKind::Scheduled), at(7));
    let stages: Vec<_> = book.records().map(|record| record.stage).collect();
    assert_eq!(
        stages,
        [
            RecordStage::Finished { started: false },
            RecordStage::Announced
        ]
    );
    let canceled = book.records().next().unwrap();
    assert!(
        canceled.verdict.text.contains("canceled before it started"),
        "{}",
        canceled.verdict.text
    );
}

#[test]
fn a_record_reads_back_as_it_was_written() {
    let mut book = OutcomeBook::new("vm-a", ROOMY);
    let freeze = freeze();
    book.record(&transition(&freeze, TransitionKind::Scheduled), t0());
    book.record(&called("F1", CallPhase::Prepare), at(1));
    book.record(
        &answered("F1", CallPhase::Prepare, AnswerOutcome::Approve),
        at(2),
    );
    book.record(
        &TimelineEntry::NotApproved {
            event_id: "F1".into(),
            reason: "dry run".into(),
        },
        at(3),
    );
    let record = only_record(&book).clone();
    let json = serde_json::to_string(&record).unwrap();
    let read: super::record::OutcomeRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(read, record);
    assert!(json.contains("\"verdict\""), "{json}");
    assert!(
        record.verdict.text.contains("not approved: dry run"),
        "{}",
        record.verdict.text
    );
}

#[test]
fn spans_read_in_human_units() {
    use super::verdict::spoken;
    let rows = [
        (250, "0.25 s"),
        (3_200, "3.2 s"),
        (41_000, "41 s"),
        (720_000, "12 min"),
        (7_500_000, "2 h 5 min"),
        (3 * 86_400_000 + 4 * 3_600_000, "3 d 4 h"),
    ];
    for (ms, text) in rows {
        assert_eq!(spoken(ms), text, "{ms}");
    }
}
