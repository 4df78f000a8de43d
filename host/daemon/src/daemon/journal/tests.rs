use forewarn_imds::PluginName;
use std::fs::OpenOptions;
use std::io::Write;
use std::time::Duration;

use forewarn_imds::{EventType, ImdsTime};
use forewarn_test_support::small_disk_or_fail;

use super::*;
use crate::pipeline::state::{Handling, Lifecycle};
use crate::pipeline::test_harness::{event, t0};

fn progress(id: &str) -> Arc<EventProgress> {
    Arc::new(EventProgress::new(
        event(id, EventType::Reboot, t0(), Duration::from_secs(600)),
        Handling::Prepare {
            affects_this_vm: true,
        },
        Lifecycle::Scheduled,
    ))
}

fn state_with(ids: &[&str]) -> Arc<DaemonState> {
    let mut state = DaemonState::default();
    for id in ids {
        state.events.insert((*id).into(), progress(id));
    }
    Arc::new(state)
}

/// `state` with event `id` changed (one more prepare attempt of plugin "a").
fn changed(state: &Arc<DaemonState>, id: &str) -> Arc<DaemonState> {
    let mut next = (**state).clone();
    let event = next.events.get_mut(id).expect("the event exists");
    Arc::make_mut(event)
        .plugin_mut(&PluginName::from("a"))
        .prepare_attempts += 1;
    Arc::new(next)
}

/// Appends `bytes` to the change log as a crash or a bad disk might have left them.
fn append_raw(dir: &Path, bytes: &[u8]) {
    let mut log = OpenOptions::new()
        .append(true)
        .open(dir.join(CHANGE_LOG_FILE))
        .unwrap();
    log.write_all(bytes).unwrap();
}

/// The record a new start resumes from.
fn resumed(dir: &Path) -> JournalRecord {
    reopen(dir).1.record.expect("a record")
}

fn reopen(dir: &Path) -> (Journal, Opened) {
    Journal::open(dir).expect("opens")
}

fn log_lines(dir: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(dir.join(CHANGE_LOG_FILE))
        .expect("the log exists")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a whole line"))
        .collect()
}

#[test]
fn commits_survive_a_reopen_with_the_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, opened) = reopen(dir.path());
    assert!(opened.record.is_none());
    let first = state_with(&["E1", "E2"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    let second = changed(&first, "E2");
    let holds = BTreeSet::from(["lb-drain".to_owned()]);
    journal.commit(&second, holds.clone()).unwrap();
    drop(journal);
    let (_, opened) = reopen(dir.path());
    let record = opened.record.expect("a record");
    assert_eq!(record.state, second);
    assert_eq!(record.readiness_holds, holds);
}

#[test]
fn a_commit_writes_only_the_events_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let ids: Vec<String> = (0..100).map(|n| format!("E{n}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let many = state_with(&ids);
    journal.commit(&many, BTreeSet::new()).unwrap();
    let one_changed = changed(&many, "E42");
    journal.commit(&one_changed, BTreeSet::new()).unwrap();
    // Unchanged: nothing is written at all.
    journal.commit(&one_changed, BTreeSet::new()).unwrap();
    let lines = log_lines(dir.path());
    assert_eq!(lines.len(), 2, "{lines:?}");
    let events = lines[1]["events"].as_object().expect("events");
    assert_eq!(events.keys().collect::<Vec<_>>(), ["E42"]);
    assert!(lines[1].get("tracker").is_none());
}

#[test]
fn a_document_that_changes_one_of_many_tracked_events_writes_only_it() {
    use forewarn_imds::{Document, EventStatus, EventType, ScheduledEvent};
    let reboot = |id: String, not_before: u64| ScheduledEvent {
        resources: vec!["vm-a".into()],
        not_before: Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(not_before)),
        ..ScheduledEvent::new(id, EventType::Reboot, EventStatus::Scheduled)
    };
    let document = |moved: u64| Document {
        incarnation: Some(1),
        events: (0..1_000)
            .map(|n| reboot(format!("E{n:04}"), if n == 7 { moved } else { 1_000 }))
            .collect(),
        rejected: Vec::new(),
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let mut state = DaemonState::default();
    Arc::make_mut(&mut state.tracker).observe(&document(1_000), ImdsTime::UNIX_EPOCH);
    let first = Arc::new(state.clone());
    journal.commit(&first, BTreeSet::new()).unwrap();
    Arc::make_mut(&mut state.tracker).observe(&document(2_000), ImdsTime::UNIX_EPOCH);
    let second = Arc::new(state);
    journal.commit(&second, BTreeSet::new()).unwrap();
    let lines = log_lines(dir.path());
    let tracked = lines[1]["tracked"].as_object().expect("tracked events");
    assert_eq!(tracked.keys().collect::<Vec<_>>(), ["E0007"]);
    assert!(lines[1].get("tracker").is_none(), "not the whole tracker");
    drop(journal);
    assert_eq!(resumed(dir.path()).state, second);
}

#[test]
fn a_forgotten_event_stays_forgotten_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    journal
        .commit(&state_with(&["E1", "E2"]), BTreeSet::new())
        .unwrap();
    journal
        .commit(&state_with(&["E2"]), BTreeSet::new())
        .unwrap();
    drop(journal);
    let record = resumed(dir.path());
    assert_eq!(record.state.events.keys().collect::<Vec<_>>(), ["E2"]);
}

#[test]
fn the_first_commit_is_written_even_when_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    journal
        .commit(&Arc::new(DaemonState::default()), BTreeSet::new())
        .unwrap();
    drop(journal);
    assert!(reopen(dir.path()).1.record.is_some(), "not a first run");
}

#[test]
fn a_line_cut_short_by_a_crash_is_dropped_and_later_commits_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let first = state_with(&["E1"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    drop(journal);
    append_raw(dir.path(), br#"{"generation":0,"events":{"E9":nu"#);
    let (mut journal, opened) = reopen(dir.path());
    assert_eq!(opened.record.expect("a record").state, first);
    assert!(opened.quarantined_log.is_none());
    let second = changed(&first, "E1");
    journal.commit(&second, BTreeSet::new()).unwrap();
    drop(journal);
    assert_eq!(resumed(dir.path()).state, second);
}

#[test]
fn lines_older_than_the_snapshot_are_not_replayed_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let first = state_with(&["E1"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    drop(journal);
    let (journal, _) = reopen(dir.path());
    assert_eq!(journal.generation, 1);
    drop(journal);
    // The reopen compacted into generation 1. A crash after a compaction's snapshot and
    // before the log was emptied leaves generation-0 lines that would forget E1.
    let stale = br#"{"generation":0,"events":{"E1":null}}"#;
    let log_path = dir.path().join(CHANGE_LOG_FILE);
    fs::write(&log_path, [&stale[..], b"\n"].concat()).unwrap();
    let (_, opened) = reopen(dir.path());
    assert_eq!(opened.record.expect("a record").state, first);
}

#[test]
fn a_damaged_line_before_the_end_keeps_the_changes_before_it_and_moves_the_log_aside() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let first = state_with(&["E1"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    let generation = journal.generation;
    drop(journal);
    let log_path = dir.path().join(CHANGE_LOG_FILE);
    let good = format!(r#"{{"generation":{generation},"events":{{"E1":null}}}}"#);
    let later = format!(r#"{{"generation":{generation},"readiness_holds":["x"]}}"#);
    fs::write(&log_path, format!("{good}\nnot json\n{later}\n")).unwrap();
    let (_, opened) = reopen(dir.path());
    let record = opened.record.expect("a record");
    assert!(record.state.events.is_empty(), "the good line was applied");
    assert!(
        record.readiness_holds.is_empty(),
        "replay stopped at the damage"
    );
    let moved = opened.quarantined_log.expect("the log was moved aside");
    assert!(fs::read_to_string(moved).unwrap().contains("not json"));
}

#[test]
fn a_damaged_last_line_is_dropped_without_moving_the_log_aside() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let first = state_with(&["E1"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    drop(journal);
    append_raw(dir.path(), b"\0\0\0\0\n");
    let (_, opened) = reopen(dir.path());
    assert_eq!(opened.record.expect("a record").state, first);
    assert!(opened.quarantined_log.is_none());
}

#[test]
fn a_snapshot_written_after_a_downgrade_is_not_overwritten_by_old_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    journal
        .commit(&state_with(&["E1", "E2"]), BTreeSet::new())
        .unwrap();
    drop(journal);
    fs::write(
        dir.path().join(CHANGE_LOG_FILE),
        "{\"generation\":0,\"events\":{\"E2\":null}}\n",
    )
    .unwrap();
    // An older forewarn wrote this version-2 snapshot (generation 0) and no log lines.
    let mut older = JournalRecord::new(state_with(&["E1", "E2"]), BTreeSet::new());
    older.version = 2;
    fs::write(
        dir.path().join("journal.json"),
        serde_json::to_vec(&older).unwrap(),
    )
    .unwrap();
    let record = resumed(dir.path());
    assert_eq!(record.state, state_with(&["E1", "E2"]));
}

#[test]
fn compaction_keeps_the_log_readable() {
    assert_eq!(compaction_threshold(0), COMPACT_MIN_BYTES);
    assert_eq!(compaction_threshold(1 << 20), 4 << 20);
    assert!(compaction_threshold(1 << 40) <= durable_file::DURABLE_FILE_MAX_BYTES / 2);
}

#[test]
fn a_journal_from_before_the_change_log_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let mut record = JournalRecord::new(state_with(&["E1"]), BTreeSet::new());
    record.version = 2;
    let text = serde_json::to_string(&record)
        .unwrap()
        .replace(r#""generation":0,"#, "");
    assert!(!text.contains("generation"), "{text}");
    fs::write(dir.path().join("journal.json"), text).unwrap();
    let (_, opened) = reopen(dir.path());
    let record = opened.record.expect("a record");
    assert_eq!(record.state, state_with(&["E1"]));
    assert_eq!(peek(dir.path()).expect("peek").state, record.state);
}

#[test]
fn a_long_run_compacts_and_still_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let mut state = state_with(&["E1", "E2", "E3"]);
    for round in 0..3000 {
        let id = ["E1", "E2", "E3"][round % 3];
        state = changed(&state, id);
        journal.commit(&state, BTreeSet::new()).unwrap();
    }
    assert!(journal.generation > 0, "never compacted");
    let log_size = fs::metadata(dir.path().join(CHANGE_LOG_FILE))
        .unwrap()
        .len();
    assert!(log_size < 2 * COMPACT_MIN_BYTES, "{log_size} bytes");
    drop(journal);
    assert_eq!(resumed(dir.path()).state, state);
    assert_eq!(peek(dir.path()).expect("peek").state, state);
}

/// Writes `bytes` after the log's last whole line, as a write that failed part-way (or
/// whose sync failed) leaves them.
fn leave_after_the_log(dir: &Path, bytes: &[u8]) {
    append_raw(dir, bytes);
}

#[test]
fn bytes_a_failed_append_left_never_join_or_replay_as_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = reopen(dir.path());
    let first = state_with(&["E1", "E2"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    let generation = journal.generation;
    // Two attempts whose writes reached the page cache but whose syncs failed, the
    // second shorter than the first: never committed, each would forget an event.
    let long = "h".repeat(200);
    let first_try = format!(
        r#"{{"generation":{generation},"events":{{"E1":null}},"readiness_holds":["{long}"]}}"#
    );
    let shorter = "h".repeat(100);
    let second_try = format!(
        r#"{{"generation":{generation},"events":{{"E2":null}},"readiness_holds":["{shorter}"]}}"#
    );
    // The second overwrote the start of the first: both are left after the last line.
    let left = format!("{second_try}\n{}\n", &first_try[second_try.len() + 1..]);
    leave_after_the_log(dir.path(), left.as_bytes());
    // The next commit, a short line, goes where the last committed line ended.
    let holds = BTreeSet::from(["x".to_owned()]);
    journal.commit(&first, holds.clone()).unwrap();
    drop(journal);
    let (_, opened) = reopen(dir.path());
    assert!(opened.quarantined_log.is_none(), "the log was damaged");
    let record = opened.record.expect("a record");
    assert_eq!(record.state, first, "an event was forgotten");
    assert_eq!(record.readiness_holds, holds);
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs a tmpfs of its own to fill (mount -t tmpfs): Windows has none; run on Linux"
)]
fn a_full_disk_is_written_through_the_reserve_and_nothing_is_lost_when_room_returns() {
    let disk = small_disk_or_fail!("2m");
    let dir = disk.path().join("state");
    let (mut journal, opened) = Journal::open_with_reserve(&dir, 128 * 1024).unwrap();
    assert!(opened.unwritable.is_none());
    let mut state = state_with(&["E1", "E2"]);
    journal.commit(&state, BTreeSet::new()).unwrap();
    disk.fill();
    // Appends land in the reserve...
    let mut durable = 0;
    let error = loop {
        let next = changed(&state, "E1");
        match journal.commit(&next, BTreeSet::new()) {
            Ok(()) => {
                state = next;
                durable += 1;
            }
            Err(error) => break error,
        }
        assert!(durable < 10_000, "never ran out of room");
    };
    assert!(durable > 50, "only {durable} commits went into the reserve");
    assert!(error.to_string().contains("disk is full"), "{error}");
    // ...until it is used up; what failed is written by the next commit that can.
    let failed = changed(&state, "E2");
    assert!(journal.commit(&failed, BTreeSet::new()).is_err());
    disk.free();
    let last = changed(&failed, "E1");
    journal.commit(&last, BTreeSet::new()).expect("room again");
    drop(journal);
    let (_, opened) = reopen(&dir);
    assert!(opened.quarantined_log.is_none());
    assert_eq!(opened.record.expect("a record").state, last);
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs a tmpfs of its own to fill (mount -t tmpfs): Windows has none; run on Linux"
)]
fn a_journal_opened_on_a_full_disk_appends_to_its_old_log_and_compacts_later() {
    let disk = small_disk_or_fail!("2m");
    let dir = disk.path().join("state");
    let (mut journal, _) = Journal::open_with_reserve(&dir, 128 * 1024).unwrap();
    let first = state_with(&["E1"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    drop(journal);
    disk.fill();
    // No room for a new snapshot or a fresh log: the old one (and its reserve) goes on.
    let (mut journal, opened) = Journal::open_with_reserve(&dir, 128 * 1024).unwrap();
    assert!(opened.unwritable.is_none(), "{:?}", opened.unwritable);
    assert_eq!(opened.record.expect("a record").state, first);
    assert!(journal.space_problem().is_some());
    let second = changed(&first, "E1");
    journal
        .commit(&second, BTreeSet::new())
        .expect("into the reserve");
    drop(journal);
    disk.free();
    let (journal, opened) = Journal::open_with_reserve(&dir, 128 * 1024).unwrap();
    assert_eq!(opened.record.expect("a record").state, second);
    assert!(
        journal.space_problem().is_none(),
        "compacted once there was room"
    );
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs a tmpfs of its own to fill (mount -t tmpfs): Windows has none; run on Linux"
)]
fn a_read_only_journal_opens_with_its_state_and_is_written_once_writable() {
    let disk = small_disk_or_fail!("8m");
    let dir = disk.path().join("state");
    let (mut journal, _) = Journal::open(&dir).unwrap();
    let first = state_with(&["E1"]);
    journal.commit(&first, BTreeSet::new()).unwrap();
    drop(journal);
    disk.read_only().expect("remount read-only");
    let (mut journal, opened) = Journal::open(&dir).expect("opens read-only");
    assert_eq!(opened.record.expect("a record").state, first);
    let unwritable = opened.unwritable.expect("says it cannot write").to_string();
    assert!(unwritable.contains("read-only"), "{unwritable}");
    let second = changed(&first, "E1");
    assert!(journal.commit(&second, BTreeSet::new()).is_err());
    disk.writable().expect("remount read-write");
    journal
        .commit(&second, BTreeSet::new())
        .expect("writable again");
    drop(journal);
    assert_eq!(resumed(&dir).state, second);
}
