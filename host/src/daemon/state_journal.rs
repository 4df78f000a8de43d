//! The daemon's journal as a snapshot (`journal.json`) plus an append-only change log
//! (`journal.log`): a commit appends only the events that changed, so its cost does not grow
//! with the number of events.
//!
//! Each log line is one commit: the events changed (or removed) since the previous one, the
//! tracker and the readiness holds when they changed, and the snapshot's *generation*. When
//! the log outgrows the snapshot, the state is compacted: a new snapshot of generation
//! g + 1 is written crash-safely, then the log is emptied. A crash between the two leaves
//! lines of generation g, which are older than the snapshot and skipped, never replayed over
//! it. A line cut short by a crash (the last one, without its newline) was never committed
//! and is dropped; a damaged line elsewhere stops the replay there, and the log is moved
//! aside for a person to read.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::daemon::journal::{self, Journal, JournalError};
use crate::daemon::journal_record::{self, JOURNAL_NAME, JournalRecord};
use crate::pipeline::state::{DaemonState, EventProgress};
use crate::pipeline::tracker::{TrackedEvent, Tracker};

/// The change log's file name in the state directory.
pub(crate) const CHANGE_LOG_FILE: &str = "journal.log";
/// The log is compacted into a new snapshot once it is this many times the snapshot's size
/// (so the compaction's cost, in proportion to the state, is spread over as many bytes of
/// cheap appends)...
const COMPACT_RATIO: u64 = 4;
/// ...and at least this large, so a small state is not re-snapshotted every few commits.
const COMPACT_MIN_BYTES: u64 = 1024 * 1024;

/// One line of the change log: what one commit changed.
#[derive(Debug, Serialize, Deserialize)]
struct Change {
    /// The snapshot generation the change applies on top of.
    generation: u64,
    /// Events changed (Some) or forgotten (None) by this commit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    events: BTreeMap<String, Option<Arc<EventProgress>>>,
    /// The whole tracker: written by releases before `tracked`, still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracker: Option<Arc<Tracker>>,
    /// Tracked events changed (Some) or forgotten (None) by this commit: a document that
    /// changes one event of thousands writes that one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tracked: BTreeMap<String, Option<Arc<TrackedEvent>>>,
    /// The readiness holds, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    readiness_holds: Option<BTreeSet<String>>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.tracker.is_none()
            && self.tracked.is_empty()
            && self.readiness_holds.is_none()
    }
}

/// What was replayed when the journal was opened.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The state and holds last committed, or None when there was no journal.
    pub record: Option<JournalRecord>,
    /// Where an unreadable snapshot was moved to (the daemon starts without it).
    pub quarantined: Option<PathBuf>,
    /// Where a change log damaged before its end was moved to (its good prefix was used).
    pub quarantined_log: Option<PathBuf>,
}

/// The state journal: the last commit survives a crash or power loss once `commit` returns.
#[derive(Debug)]
pub(crate) struct StateJournal {
    snapshot: Journal<JournalRecord>,
    log_path: PathBuf,
    log: File,
    generation: u64,
    /// The state and holds of the last commit: what the next commit is compared with.
    committed: JournalRecord,
    log_bytes: u64,
    snapshot_bytes: u64,
    /// Whether anything is on disk: the first commit is written even when it is the empty
    /// state, so the next start knows this VM has run forewarn before.
    written: bool,
    /// An append failed: every later commit fails too (the daemon stops on the first).
    failed: bool,
}

impl StateJournal {
    /// Opens the journal in `dir` (creating it, private, if needed), replays the change log
    /// over the snapshot, and compacts the result into a fresh snapshot with an empty log.
    pub(crate) fn open(dir: &Path) -> Result<(StateJournal, Opened), JournalError> {
        let (snapshot, outcome) = Journal::<JournalRecord>::open(dir, JOURNAL_NAME)?;
        let log_path = dir.join(CHANGE_LOG_FILE);
        let replayed = replay(outcome.value, &log_path)?;
        let opened = Opened {
            record: replayed.record,
            quarantined: outcome.quarantined,
            quarantined_log: replayed.quarantined_log,
        };
        let committed = journal_record::migrate(opened.record.clone().unwrap_or_default());
        let log = open_log(&log_path)?;
        let mut journal = StateJournal {
            snapshot,
            log_path,
            log,
            generation: committed.generation,
            committed,
            log_bytes: 0,
            snapshot_bytes: 0,
            written: opened.record.is_some(),
            failed: false,
        };
        match opened.record {
            Some(_) => journal.compact()?,
            // Nothing applicable in the log: drop whatever is there (a line cut short by a
            // crash, lines of a quarantined snapshot), so new lines start on a clean file.
            None => journal.reset_log()?,
        }
        Ok((journal, opened))
    }

    /// Records `state` and `readiness_holds`: appends what changed since the last commit
    /// (nothing when nothing did) and syncs it; compacts when the log has grown enough.
    pub(crate) fn commit(
        &mut self,
        state: &Arc<DaemonState>,
        readiness_holds: BTreeSet<String>,
    ) -> Result<(), JournalError> {
        if self.failed {
            return Err(JournalError::Io {
                action: "append to",
                path: self.log_path.clone(),
                error: std::io::Error::other(
                    "an earlier write to the change log failed; restart forewarn to resume from the journal",
                ),
            });
        }
        let change = self.diff(state, &readiness_holds);
        if !change.is_empty() || !self.written {
            // A failed (possibly partial) append ends this journal: a later line written
            // after a partial one would join it into a damaged line mid-log.
            self.failed = true;
            self.append(&change)?;
            self.failed = false;
            self.written = true;
        }
        self.committed = JournalRecord::new(state.clone(), readiness_holds);
        self.committed.generation = self.generation;
        if self.log_bytes >= compaction_threshold(self.snapshot_bytes) {
            self.compact()?;
        }
        Ok(())
    }

    /// What changed from the last commit to `state` and `holds`. Events are compared by
    /// pointer first: the pipeline shares unchanged events with the previous state.
    fn diff(&self, state: &DaemonState, holds: &BTreeSet<String>) -> Change {
        let before = &self.committed.state;
        let events = changed_entries(&before.events, &state.events);
        let tracked = match Arc::ptr_eq(&before.tracker, &state.tracker) {
            true => BTreeMap::new(),
            false => changed_entries(before.tracker.entries(), state.tracker.entries()),
        };
        Change {
            generation: self.generation,
            events,
            tracker: None,
            tracked,
            readiness_holds: (*holds != self.committed.readiness_holds).then(|| holds.clone()),
        }
    }

    fn append(&mut self, change: &Change) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(change).map_err(|error| JournalError::Encode {
            path: self.log_path.clone(),
            error,
        })?;
        line.push(b'\n');
        self.log
            .write_all(&line)
            .map_err(|error| JournalError::Io {
                action: "append to",
                path: self.log_path.clone(),
                error,
            })?;
        self.log.sync_data().map_err(|error| JournalError::Io {
            action: "sync",
            path: self.log_path.clone(),
            error,
        })?;
        self.log_bytes += line.len() as u64;
        Ok(())
    }

    /// Writes the committed state as snapshot generation + 1, then empties the log (whose
    /// lines, of the older generation, would be skipped anyway).
    fn compact(&mut self) -> Result<(), JournalError> {
        let mut record = self.committed.clone();
        record.generation = self.generation + 1;
        let bytes = journal::encode_json(self.snapshot.path(), &record)?;
        journal::write_atomically(self.snapshot.path(), &bytes)?;
        self.generation = record.generation;
        self.committed = record;
        self.snapshot_bytes = bytes.len() as u64;
        self.reset_log()
    }

    fn reset_log(&mut self) -> Result<(), JournalError> {
        journal::write_atomically(&self.log_path, b"")?;
        self.log = open_log(&self.log_path)?;
        self.log_bytes = 0;
        Ok(())
    }
}

/// The entries (events, tracked events) of `after` that differ from `before` (Some) and
/// those gone from it (None). Both maps are sorted by id, so they are walked side by side:
/// one pass, no lookups; an entry still shared with `before` is equal without a look.
fn changed_entries<T: PartialEq>(
    before: &BTreeMap<String, Arc<T>>,
    after: &BTreeMap<String, Arc<T>>,
) -> BTreeMap<String, Option<Arc<T>>> {
    let mut changed = BTreeMap::new();
    let mut old = before.iter().peekable();
    for (id, progress) in after {
        while let Some((gone, _)) = old.next_if(|(old_id, _)| *old_id < id) {
            changed.insert(gone.clone(), None);
        }
        let same = old
            .next_if(|(old_id, _)| *old_id == id)
            .is_some_and(|(_, old)| Arc::ptr_eq(old, progress) || old == progress);
        if !same {
            changed.insert(id.clone(), Some(progress.clone()));
        }
    }
    for (gone, _) in old {
        changed.insert(gone.clone(), None);
    }
    changed
}

/// The log size that triggers a compaction: [`COMPACT_RATIO`] × the snapshot, at least
/// [`COMPACT_MIN_BYTES`], and at most half of what a reader accepts, so the log is always
/// readable at the next start.
fn compaction_threshold(snapshot_bytes: u64) -> u64 {
    (COMPACT_RATIO * snapshot_bytes).clamp(COMPACT_MIN_BYTES, journal::JOURNAL_MAX_BYTES / 2)
}

/// Reads the journal in `dir` without changing anything: the snapshot with the change log
/// replayed over it (None when absent or unreadable). For readers that run beside the
/// daemon's own journal, such as the readiness holds restored at start.
pub(crate) fn peek(dir: &Path) -> Option<JournalRecord> {
    let bytes = journal::read_if_exists(&dir.join(format!("{JOURNAL_NAME}.json")))
        .ok()
        .flatten();
    let snapshot = bytes.and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let log = fs::read(dir.join(CHANGE_LOG_FILE)).unwrap_or_default();
    let (record, _) = apply_log(snapshot, &log);
    record
}

struct Replayed {
    record: Option<JournalRecord>,
    quarantined_log: Option<PathBuf>,
}

/// The snapshot with the log at `log_path` replayed over it; a log damaged before its end
/// is moved aside after its good lines are used.
fn replay(snapshot: Option<JournalRecord>, log_path: &Path) -> Result<Replayed, JournalError> {
    let log = journal::read_if_exists(log_path)?.unwrap_or_default();
    let (record, damaged) = apply_log(snapshot, &log);
    let quarantined_log = match damaged {
        true => Some(journal::quarantine(log_path)?),
        false => None,
    };
    Ok(Replayed {
        record,
        quarantined_log,
    })
}

/// Applies the complete lines of `log` of the snapshot's generation to it. Returns the
/// result and whether a complete line was unreadable (the replay stops there).
fn apply_log(snapshot: Option<JournalRecord>, log: &[u8]) -> (Option<JournalRecord>, bool) {
    let mut record = snapshot;
    if record
        .as_ref()
        .is_some_and(|record| record.version < journal_record::JOURNAL_VERSION)
    {
        // A snapshot from a forewarn without the change log (written after a downgrade):
        // it is newer than any line left in the log.
        return (record, false);
    }
    let generation = record.as_ref().map_or(0, |record| record.generation);
    let complete = match log.iter().rposition(|&byte| byte == b'\n') {
        Some(end) => &log[..=end],
        // No newline at all: at most one line cut short by a crash, never committed.
        None => &[][..],
    };
    let lines: Vec<&[u8]> = complete
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .collect();
    for (index, line) in lines.iter().enumerate() {
        let Ok(change) = serde_json::from_slice::<Change>(line) else {
            // The last line may be one a power loss cut short after its newline reached
            // the disk: never committed, so dropped like a line without its newline.
            let last = index + 1 == lines.len();
            return (record, !last);
        };
        if change.generation != generation {
            // Left by a crash between a compaction's snapshot and its emptying of the log.
            continue;
        }
        let current = record.get_or_insert_with(JournalRecord::default);
        apply(current, change);
    }
    (record, false)
}

fn apply(record: &mut JournalRecord, change: Change) {
    let state = Arc::make_mut(&mut record.state);
    for (id, progress) in change.events {
        match progress {
            Some(progress) => state.events.insert(id, progress),
            None => state.events.remove(&id),
        };
    }
    if let Some(tracker) = change.tracker {
        state.tracker = tracker;
    }
    if !change.tracked.is_empty() {
        let tracker = Arc::make_mut(&mut state.tracker);
        for (id, tracked) in change.tracked {
            tracker.restore(id, tracked);
        }
    }
    if let Some(holds) = change.readiness_holds {
        record.readiness_holds = holds;
    }
}

/// Opens the change log for appending (created private to the daemon's user).
fn open_log(path: &Path) -> Result<File, JournalError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        // Like every file the daemon writes: a planted symbolic link is not followed.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|error| JournalError::Io {
            action: "open",
            path: path.to_path_buf(),
            error,
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use forewarn_imds::EventType;

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
            state.events.insert((*id).to_owned(), progress(id));
        }
        Arc::new(state)
    }

    /// `state` with event `id` changed (one more prepare attempt of plugin "a").
    fn changed(state: &Arc<DaemonState>, id: &str) -> Arc<DaemonState> {
        let mut next = (**state).clone();
        let event = next.events.get_mut(id).expect("the event exists");
        Arc::make_mut(event).plugin_mut("a").prepare_attempts += 1;
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

    fn reopen(dir: &Path) -> (StateJournal, Opened) {
        StateJournal::open(dir).expect("opens")
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
        use forewarn_imds::{Document, EventSource, EventStatus, EventType, ScheduledEvent};
        let reboot = |id: String, not_before: u64| ScheduledEvent {
            id,
            event_type: EventType::Reboot,
            event_type_raw: "Reboot".into(),
            resource_type: String::new(),
            resources: vec!["vm-a".into()],
            status: EventStatus::Scheduled,
            not_before: Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(not_before)),
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds: None,
            unreadable: Vec::new(),
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
        Arc::make_mut(&mut state.tracker).observe(&document(1_000), std::time::UNIX_EPOCH);
        let first = Arc::new(state.clone());
        journal.commit(&first, BTreeSet::new()).unwrap();
        Arc::make_mut(&mut state.tracker).observe(&document(2_000), std::time::UNIX_EPOCH);
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
        assert!(compaction_threshold(1 << 40) <= journal::JOURNAL_MAX_BYTES / 2);
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
}
