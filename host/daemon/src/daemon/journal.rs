//! The daemon's journal as a snapshot (`journal.json`) plus an append-only change log
//! (`journal.log`): a commit appends only the events that changed, so its cost does not grow
//! with the number of events.
//!
//! Each log line is one commit: the events changed (or removed) since the previous one, the
//! tracker and the readiness holds when they changed, and the snapshot's *generation*. When
//! the log outgrows the snapshot, the state is compacted: a new snapshot of generation
//! g + 1 is written crash-safely, then a fresh log takes the old one's place. A crash between
//! the two leaves lines of generation g, which are older than the snapshot and skipped,
//! never replayed over it. A line cut short by a crash (the last one, without its newline)
//! was never committed and is dropped; a damaged line elsewhere stops the replay there, and
//! the log is moved aside for a person to read.
//!
//! A write that fails never ends the journal (docs/operations.md, "When the disk is full"):
//! the commit fails, what it would have written stays to be written by the next one (which
//! writes everything changed since the last commit that reached the disk), and a line cut
//! short by the failure is overwritten by the next line, padded with spaces to cover it. The
//! log keeps [`JOURNAL_RESERVE_BYTES`] allocated beyond its end, so appends go on while the
//! filesystem is full; a compaction, which needs new files, waits until there is room.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use forewarn_imds::EventId;

use crate::daemon::journal_schema::{self, JOURNAL_NAME, JournalRecord};
use crate::durable_file::{self, DurableFileError};
use crate::pipeline::state::{DaemonState, EventProgress};
use crate::pipeline::tracker::{TrackedEvent, Tracker};
use crate::storage_health::{SpaceCause, SpaceProblem};
use forewarn_platform::disk_reserve;

/// The change log's file name in the state directory.
pub(crate) const CHANGE_LOG_FILE: &str = "journal.log";
/// Where a compaction prepares the fresh change log before it takes the old one's place.
const NEW_CHANGE_LOG_FILE: &str = "journal.log.new";
/// The log is compacted into a new snapshot once it is this many times the snapshot's size
/// (so the compaction's cost, in proportion to the state, is spread over as many bytes of
/// cheap appends)...
const COMPACT_RATIO: u64 = 4;
/// ...and at least this large, so a small state is not re-snapshotted every few commits.
const COMPACT_MIN_BYTES: u64 = 1024 * 1024;
/// After a compaction failed (no room for the new files), the next is tried once the log has
/// grown by this much.
const COMPACT_RETRY_BYTES: u64 = 64 * 1024;
/// Space kept allocated beyond the change log's end: what appends use once the filesystem
/// is full. At one grouped commit a second of a deferring plugin (about 1-2 KiB each) it
/// lasts over half an hour; an event's whole preparation takes a few dozen lines.
pub(crate) const JOURNAL_RESERVE_BYTES: u64 = 4 * 1024 * 1024;

/// One line of the change log: what one commit changed.
#[derive(Debug, Serialize, Deserialize)]
struct Change {
    /// The snapshot generation the change applies on top of.
    generation: u64,
    /// Events changed (Some) or forgotten (None) by this commit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    events: BTreeMap<EventId, Option<Arc<EventProgress>>>,
    /// The whole tracker: written by releases before `tracked`, still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracker: Option<Arc<Tracker>>,
    /// Tracked events changed (Some) or forgotten (None) by this commit: a document that
    /// changes one event of thousands writes that one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tracked: BTreeMap<EventId, Option<Arc<TrackedEvent>>>,
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
    /// Why the journal cannot be written now (a read-only, immutable or missing state
    /// directory): its commits fail until it can. None when the log is open for appends.
    pub unwritable: Option<DurableFileError>,
}

/// What the journal has put on disk since it was opened: for metrics and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JournalIo {
    /// `fsync`s and `fdatasync`s (files and directories).
    pub syncs: u64,
    /// Bytes written (log lines and snapshots).
    pub bytes: u64,
}

/// The state journal: the last commit survives a crash or power loss once `commit` returns.
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    snapshot_path: PathBuf,
    log_path: PathBuf,
    /// The change log, written at `log_len`; None while it cannot be opened for writing.
    log: Option<File>,
    /// Bytes of the log up to the end of its last whole line: where the next line goes.
    /// Anything after it was left by a failed write and is overwritten.
    log_len: u64,
    /// Whether the log on disk may take new lines after its old ones (see [`Replayed`]).
    old_log_reusable: bool,
    /// Where the space allocated to the log ends, as far as this journal knows.
    reserved_to: u64,
    /// How much to keep allocated beyond `log_len` ([`JOURNAL_RESERVE_BYTES`]).
    reserve: u64,
    generation: u64,
    /// The state and holds of the last commit that reached the disk: what the next commit
    /// is compared with, so a failed one is written by the next.
    committed: JournalRecord,
    snapshot_bytes: u64,
    /// Whether anything is on disk: the first commit is written even when it is the empty
    /// state, so the next start knows this VM has run forewarn before.
    written: bool,
    /// The log length at which the next compaction is tried.
    compact_at: u64,
    /// Why the last compaction or top-up of the reserve failed; None once one succeeded.
    space_problem: Option<SpaceProblem>,
    io: JournalIo,
}

impl Journal {
    /// Opens the journal in `dir` (creating it, private, if needed), replays the change log
    /// over the snapshot, and compacts the result into a fresh snapshot and log.
    ///
    /// Fails only when the journal cannot be read, or is unreadable and cannot be moved
    /// aside: a journal that can be read but not written (a full, read-only or immutable
    /// state directory) opens, says so in [`Opened::unwritable`], and keeps appending to
    /// the old log while there is room in it.
    pub(crate) fn open(dir: &Path) -> Result<(Journal, Opened), DurableFileError> {
        Journal::open_with_reserve(dir, JOURNAL_RESERVE_BYTES)
    }

    /// [`Journal::open`] keeping `reserve` bytes allocated beyond the log's end.
    pub(crate) fn open_with_reserve(
        dir: &Path,
        reserve: u64,
    ) -> Result<(Journal, Opened), DurableFileError> {
        let dir_problem = match durable_file::create_private_dir(dir) {
            Ok(()) => None,
            Err(error @ DurableFileError::Io { .. }) => Some(error),
            Err(untrusted) => return Err(untrusted),
        };
        let snapshot_path = dir.join(format!("{JOURNAL_NAME}.json"));
        let log_path = dir.join(CHANGE_LOG_FILE);
        remove_leftovers(&[
            durable_file::tmp_path(&snapshot_path),
            durable_file::tmp_path(&log_path),
            dir.join(NEW_CHANGE_LOG_FILE),
        ]);
        let (snapshot, quarantined) = load_snapshot(&snapshot_path)?;
        if let Some(version) = snapshot
            .as_ref()
            .map(|record| record.version)
            .filter(|version| *version > journal_schema::JOURNAL_VERSION)
        {
            keep_newer_journal(version, &[&snapshot_path, &log_path]);
        }
        let replayed = replay(snapshot, &log_path)?;
        let opened_record = replayed.record;
        let committed = journal_schema::migrate(opened_record.clone().unwrap_or_default());
        let mut journal = Journal {
            dir: dir.to_path_buf(),
            snapshot_path,
            log_path,
            log: None,
            log_len: replayed.whole_lines,
            old_log_reusable: replayed.reusable,
            reserved_to: 0,
            reserve,
            generation: committed.generation,
            committed,
            snapshot_bytes: 0,
            written: opened_record.is_some(),
            compact_at: compaction_threshold(0),
            space_problem: None,
            io: JournalIo::default(),
        };
        // A fresh snapshot and log (with its reserve) when there is room; otherwise the old
        // log is appended to (its reserve, from the last run, is still allocated).
        let unwritable = match dir_problem {
            Some(problem) => Some(problem),
            None => journal.start_fresh().err(),
        };
        let opened = Opened {
            record: opened_record,
            quarantined,
            quarantined_log: replayed.quarantined_log,
            unwritable: match journal.log {
                Some(_) => None,
                None => unwritable,
            },
        };
        Ok((journal, opened))
    }

    /// Records `state` and `readiness_holds`: appends what changed since the last commit that
    /// reached the disk (nothing when nothing did) and syncs it; compacts when the log has
    /// grown enough and there is room. On Err nothing is lost: the next commit writes it.
    pub(crate) fn commit(
        &mut self,
        state: &Arc<DaemonState>,
        readiness_holds: BTreeSet<String>,
    ) -> Result<(), DurableFileError> {
        // First: opening the log may compact, which starts a new generation.
        self.ensure_log()?;
        let change = self.diff(state, &readiness_holds);
        if !change.is_empty() || !self.written {
            self.append(&change)?;
            self.written = true;
        }
        self.committed = JournalRecord::new(state.clone(), readiness_holds);
        self.committed.generation = self.generation;
        if self.log_len >= self.compact_at {
            self.try_compact();
        }
        Ok(())
    }

    /// Bytes still allocated beyond the log's end: what appends can use on a full disk.
    pub(crate) fn reserve_left(&self) -> u64 {
        self.reserved_to.saturating_sub(self.log_len)
    }

    /// Why the last compaction or top-up of the reserve failed (None once one succeeded).
    pub(crate) fn space_problem(&self) -> Option<&SpaceProblem> {
        self.space_problem.as_ref()
    }

    /// What the journal has written and synced since it was opened.
    pub(crate) fn io(&self) -> JournalIo {
        self.io
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

    /// Writes `change` as the log's next line, at the end of its last whole line, and syncs
    /// it. Bytes a failed write left after that end are overwritten: the line is padded with
    /// spaces (JSON allows them) to cover them, so they never join the line after it.
    fn append(&mut self, change: &Change) -> Result<(), DurableFileError> {
        let Some(log) = &self.log else {
            return Err(self.io_error("open", io::Error::from(io::ErrorKind::NotFound)));
        };
        let mut line = serde_json::to_vec(change).map_err(|error| DurableFileError::Encode {
            path: self.log_path.clone(),
            error,
        })?;
        let end = log
            .metadata()
            .map_err(|error| self.io_error("inspect", error))?
            .len();
        let left_over = usize::try_from(end.saturating_sub(self.log_len)).unwrap_or(usize::MAX);
        if line.len() < left_over {
            line.resize(left_over, b' ');
        }
        line.push(b'\n');
        forewarn_platform::file_access::write_all_at(log, &line, self.log_len)
            .map_err(|error| self.io_error("append to", error))?;
        log.sync_data()
            .map_err(|error| self.io_error("sync", error))?;
        self.io.syncs += 1;
        self.io.bytes += line.len() as u64;
        self.log_len += line.len() as u64;
        self.top_up_reserve();
        Ok(())
    }

    /// Opens the log for writing when it is not: a fresh snapshot and log if there is room,
    /// else the log as it is.
    fn ensure_log(&mut self) -> Result<(), DurableFileError> {
        if self.log.is_some() {
            return Ok(());
        }
        durable_file::create_private_dir(&self.dir)?;
        self.start_fresh()
    }

    /// Compacts into a fresh snapshot and a fresh log with its reserve; when that fails and
    /// the old log may take new lines, opens it to append to it instead. Err when neither
    /// worked: the log stays closed.
    fn start_fresh(&mut self) -> Result<(), DurableFileError> {
        // Before the first commit nothing is snapshotted: the next start must still see a
        // first run.
        let fresh = match self.written {
            true => self.compact(),
            false => self.install_fresh_log(),
        };
        let Err(error) = fresh else {
            return Ok(());
        };
        self.note_space_problem(&error);
        if !self.old_log_reusable {
            return Err(error);
        }
        match open_log(&self.log_path) {
            Ok(log) => {
                self.reserved_to = disk_reserve::allocated_end(&log).unwrap_or(self.log_len);
                self.log = Some(log);
                self.compact_at = self.log_len + COMPACT_RETRY_BYTES;
                Ok(())
            }
            Err(_) => Err(error),
        }
    }

    /// Compacts when there is room; otherwise tries again after the log grew by
    /// [`COMPACT_RETRY_BYTES`]. The commit that asked stands either way.
    fn try_compact(&mut self) {
        if let Err(error) = self.compact() {
            self.note_space_problem(&error);
            self.compact_at = self.log_len + COMPACT_RETRY_BYTES;
        }
    }

    /// Writes the committed state as snapshot generation + 1, then puts a fresh log (its
    /// reserve allocated) in place of the old one, whose lines, of the older generation,
    /// would be skipped anyway. Needs room for both: when the fresh log's reserve cannot be
    /// allocated, nothing changes (the old log keeps its reserve).
    fn compact(&mut self) -> Result<(), DurableFileError> {
        let fresh_path = self.log_path.with_file_name(NEW_CHANGE_LOG_FILE);
        let fresh = self.reserved_log(&fresh_path)?;
        let mut record = self.committed.clone();
        record.generation = self.generation + 1;
        let snapshot = durable_file::encode_json(&self.snapshot_path, &record).and_then(|bytes| {
            durable_file::write_atomically(&self.snapshot_path, &bytes).map(|()| bytes)
        });
        let bytes = match snapshot {
            Ok(bytes) => bytes,
            Err(error) => {
                let _ignored = fs::remove_file(&fresh_path);
                return Err(error);
            }
        };
        self.io.syncs += 2;
        self.io.bytes += bytes.len() as u64;
        // Whatever the old log holds is of an older generation now: new lines may follow it.
        self.old_log_reusable = true;
        self.generation = record.generation;
        self.committed = record;
        self.snapshot_bytes = bytes.len() as u64;
        self.compact_at = compaction_threshold(self.snapshot_bytes);
        // The snapshot is in place: lines of the old generation are skipped from now on, so
        // if the fresh log cannot take the old one's place, new lines still go to the old.
        self.put_fresh_log_in_place(fresh)
    }

    /// Puts a fresh, reserved log in place of the old one without a new snapshot (before the
    /// first commit, when there is nothing to snapshot).
    fn install_fresh_log(&mut self) -> Result<(), DurableFileError> {
        let fresh_path = self.log_path.with_file_name(NEW_CHANGE_LOG_FILE);
        let fresh = self.reserved_log(&fresh_path)?;
        self.put_fresh_log_in_place(fresh)
    }

    /// Renames the fresh log over the old one and appends to it from now on. When the rename
    /// fails, the old log (opened if it was not) goes on taking the lines.
    fn put_fresh_log_in_place(&mut self, fresh: ReservedLog) -> Result<(), DurableFileError> {
        let fresh_path = self.log_path.with_file_name(NEW_CHANGE_LOG_FILE);
        // The old log is closed first: Windows (without POSIX rename semantics, as under
        // Wine) refuses to rename over a file that is open. A failed rename reopens it.
        self.log = None;
        let replaced = fs::rename(&fresh_path, &self.log_path)
            .map_err(|error| DurableFileError::io("rename into place", &fresh_path, error))
            .and_then(|()| durable_file::sync_parent_dir(&self.log_path));
        if let Err(error) = replaced {
            let _ignored = fs::remove_file(&fresh_path);
            if self.log.is_none() {
                self.log = open_log(&self.log_path).ok();
            }
            return Err(error);
        }
        self.io.syncs += 1;
        self.log = Some(fresh.file);
        self.old_log_reusable = true;
        self.log_len = 0;
        self.reserved_to = fresh.reserved;
        self.space_problem = fresh.problem;
        Ok(())
    }

    /// Creates the empty log at `path` with [`JOURNAL_RESERVE_BYTES`] allocated, synced.
    /// Fails when the filesystem has no room for the reserve; a filesystem that cannot
    /// preallocate gets a log without one (said in `problem`).
    fn reserved_log(&mut self, path: &Path) -> Result<ReservedLog, DurableFileError> {
        let file = open_log(path)?;
        let mut problem = None;
        let preallocated = match self.reserve {
            0 => Ok(()),
            reserve => disk_reserve::preallocate(&file, 0, reserve),
        };
        let reserved = match preallocated {
            Ok(()) => self.reserve,
            Err(error) if error.kind() == io::ErrorKind::Unsupported => {
                problem = Some(SpaceProblem {
                    cause: SpaceCause::NoPreallocation,
                    detail: format!(
                        "could not set space aside for {}: {error}; the journal has no reserve \
                         for a full disk",
                        path.display()
                    ),
                });
                0
            }
            Err(error) => {
                drop(file);
                let _ignored = fs::remove_file(path);
                return Err(DurableFileError::io("set space aside for", path, error));
            }
        };
        if let Err(error) = file.sync_all() {
            drop(file);
            let _ignored = fs::remove_file(path);
            return Err(DurableFileError::io("flush to disk", path, error));
        }
        self.io.syncs += 1;
        Ok(ReservedLog {
            file,
            reserved,
            problem,
        })
    }

    /// Keeps [`JOURNAL_RESERVE_BYTES`] allocated beyond the log's end once a quarter of it
    /// was used; on a full disk what is left is used up first.
    fn top_up_reserve(&mut self) {
        if self.reserve == 0 || self.reserve_left() >= self.reserve * 3 / 4 {
            return;
        }
        let Some(log) = &self.log else {
            return;
        };
        match disk_reserve::preallocate(log, self.log_len, self.reserve) {
            Ok(()) => self.reserved_to = self.log_len + self.reserve,
            Err(error) if error.kind() == io::ErrorKind::Unsupported => self.reserve = 0,
            Err(error) => {
                let error = self.io_error("set space aside for", error);
                self.note_space_problem(&error);
            }
        }
    }

    fn note_space_problem(&mut self, error: &DurableFileError) {
        self.space_problem = Some(error.space_problem());
    }

    fn io_error(&self, action: &'static str, error: io::Error) -> DurableFileError {
        DurableFileError::io(action, &self.log_path, error)
    }
}

/// A fresh, empty change log with its reserve allocated.
struct ReservedLog {
    file: File,
    reserved: u64,
    problem: Option<SpaceProblem>,
}

/// Removes files a crash left (best effort: a read-only directory keeps them, and they are
/// replaced by the next write anyway).
fn remove_leftovers(paths: &[PathBuf]) {
    for path in paths {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => tracing::warn!(
                path = %path.display(),
                %error,
                "cannot remove a file a crash left in the state directory; it is replaced by the next write"
            ),
        }
    }
}

/// Keeps the files of a journal written by a newer forewarn (schema `version`) as they are,
/// beside them as `<file>.v<version>-<unix-secs>`, before this forewarn's first write (the
/// compaction at start) replaces them: a hard link where the filesystem has them (no space
/// needed, so a full disk keeps it too; the compaction renames new files over the names, so
/// the linked ones stay as they were, and where it cannot, new lines only follow the old
/// log's), else a copy. Says where, and what to do.
fn keep_newer_journal(version: u32, paths: &[&Path]) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let mut kept = Vec::new();
    for path in paths {
        if !path.exists() {
            continue;
        }
        let base = format!("{}.v{version}-{secs}", path.display());
        let mut target = PathBuf::from(&base);
        let mut counter = 1;
        while target.exists() {
            target = PathBuf::from(format!("{base}-{counter}"));
            counter += 1;
        }
        let result = fs::hard_link(path, &target)
            .or_else(|_| fs::copy(path, &target).map(|_| ()))
            .and_then(|()| match durable_file::sync_parent_dir(&target) {
                Ok(()) => Ok(()),
                Err(error) => Err(io::Error::other(error.to_string())),
            });
        match result {
            Ok(()) => kept.push(target.display().to_string()),
            Err(error) => {
                let _ignored = fs::remove_file(&target);
                tracing::error!(
                    version,
                    path = %path.display(),
                    %error,
                    "{}",
                    crate::log_messages::JOURNAL_FROM_A_NEWER_FOREWARN_NOT_KEPT
                );
            }
        }
    }
    tracing::warn!(
        version,
        supported = journal_schema::JOURNAL_VERSION,
        kept = %kept.join(", "),
        "{}",
        crate::log_messages::JOURNAL_FROM_A_NEWER_FOREWARN
    );
}

/// The snapshot in `path`, or None; an unreadable one is moved aside (and said where).
fn load_snapshot(
    path: &Path,
) -> Result<(Option<JournalRecord>, Option<PathBuf>), DurableFileError> {
    let Some(bytes) = durable_file::read_if_exists(path)? else {
        return Ok((None, None));
    };
    match serde_json::from_slice(&bytes) {
        Ok(record) => Ok((Some(record), None)),
        Err(_) => Ok((None, Some(durable_file::quarantine(path)?))),
    }
}

/// The entries (events, tracked events) of `after` that differ from `before` (Some) and
/// those gone from it (None). Both maps are sorted by id, so they are walked side by side:
/// one pass, no lookups; an entry still shared with `before` is equal without a look.
fn changed_entries<T: PartialEq>(
    before: &BTreeMap<EventId, Arc<T>>,
    after: &BTreeMap<EventId, Arc<T>>,
) -> BTreeMap<EventId, Option<Arc<T>>> {
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
    (COMPACT_RATIO * snapshot_bytes)
        .clamp(COMPACT_MIN_BYTES, durable_file::DURABLE_FILE_MAX_BYTES / 2)
}

/// Reads the journal in `dir` without changing anything: the snapshot with the change log
/// replayed over it (None when absent or unreadable). For readers that run beside the
/// daemon's own journal, such as the readiness holds restored at start.
pub(crate) fn peek(dir: &Path) -> Option<JournalRecord> {
    let bytes = durable_file::read_if_exists(&dir.join(format!("{JOURNAL_NAME}.json")))
        .ok()
        .flatten();
    let snapshot = bytes.and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let log = fs::read(dir.join(CHANGE_LOG_FILE)).unwrap_or_default();
    apply_log(snapshot, &log).record
}

struct Replayed {
    record: Option<JournalRecord>,
    quarantined_log: Option<PathBuf>,
    /// Bytes of the log up to the end of its last readable line (0 once moved aside).
    whole_lines: u64,
    /// Whether new lines may follow the old ones: not after a snapshot written by a
    /// forewarn without the change log, which the old lines would undo.
    reusable: bool,
}

/// The snapshot with the log at `log_path` replayed over it; a log damaged before its end
/// is moved aside after its good lines are used.
fn replay(snapshot: Option<JournalRecord>, log_path: &Path) -> Result<Replayed, DurableFileError> {
    let log = durable_file::read_if_exists(log_path)?.unwrap_or_default();
    let applied = apply_log(snapshot, &log);
    let quarantined_log = match applied.damaged {
        true => Some(durable_file::quarantine(log_path)?),
        false => None,
    };
    Ok(Replayed {
        record: applied.record,
        whole_lines: match quarantined_log {
            Some(_) => 0,
            None => applied.whole_lines,
        },
        quarantined_log,
        reusable: applied.reusable,
    })
}

/// What replaying a change log over a snapshot came to.
struct Applied {
    record: Option<JournalRecord>,
    /// A complete line before the last was unreadable (the replay stopped there).
    damaged: bool,
    /// Bytes up to the end of the last readable line.
    whole_lines: u64,
    reusable: bool,
}

/// Applies the complete lines of `log` of the snapshot's generation to it.
fn apply_log(snapshot: Option<JournalRecord>, log: &[u8]) -> Applied {
    let mut record = snapshot;
    if record
        .as_ref()
        .is_some_and(|record| record.version < journal_schema::JOURNAL_VERSION)
    {
        // A snapshot from a forewarn without the change log (written after a downgrade):
        // it is newer than any line left in the log.
        return Applied {
            record,
            damaged: false,
            whole_lines: 0,
            reusable: false,
        };
    }
    let generation = record.as_ref().map_or(0, |record| record.generation);
    // Each complete line with the offset just past its newline; bytes after the last
    // newline are at most one line cut short by a crash, never committed.
    let mut lines = Vec::new();
    let mut start = 0;
    for (index, byte) in log.iter().enumerate() {
        if *byte == b'\n' {
            if index > start {
                lines.push((&log[start..index], index + 1));
            }
            start = index + 1;
        }
    }
    let mut whole_lines = 0;
    for (index, (line, end)) in lines.iter().enumerate() {
        let Ok(change) = serde_json::from_slice::<Change>(line) else {
            // The last line may be one a power loss cut short after its newline reached
            // the disk: never committed, so dropped like a line without its newline.
            let last = index + 1 == lines.len();
            return Applied {
                record,
                damaged: !last,
                whole_lines,
                reusable: true,
            };
        };
        whole_lines = *end as u64;
        if change.generation != generation {
            // Left by a crash between a compaction's snapshot and its emptying of the log.
            continue;
        }
        let current = record.get_or_insert_with(JournalRecord::default);
        apply(current, change);
    }
    Applied {
        record,
        damaged: false,
        whole_lines,
        reusable: true,
    }
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

/// Opens the change log for writing at chosen offsets (created private to the daemon's
/// user; never truncated).
fn open_log(path: &Path) -> Result<File, DurableFileError> {
    // Like every file the daemon writes: private, and a planted link is not followed.
    forewarn_platform::file_access::write_options()
        .open(path)
        .map_err(|error| DurableFileError::Io {
            action: "open",
            path: path.to_path_buf(),
            error,
        })
}

#[cfg(test)]
mod tests;
