//! Keeps the journal going whatever the disk does: groups commits that nothing waits on, and
//! when a commit fails, keeps the newest state in memory and tries again with backoff
//! instead of stopping the daemon (docs/operations.md, "When the disk is full").
//!
//! The event loop asks [`JournalKeeper::record`] for every `Persist` the pipeline emits and
//! tells the pipeline when the journal stops or starts being durable: the pipeline then
//! holds early approvals (they need their record) and goes on calling plugins.
//!
//! - A commit the pipeline marks [`CommitWhen::Grouped`] (only deferral bookkeeping changed)
//!   is written at most [`GROUP_COMMIT_WINDOW`] after the last write, together with what
//!   came after it: a plugin deferring with retry 0 costs one sync a window, not two per
//!   answer. A [`CommitWhen::Now`] commit writes at once, the grouped ones with it.
//! - A failed commit starts a *streak*: one log line, the health in `/status` and
//!   `/metrics`, and retries after 1 s, 2 s, 4 s … up to [`RETRY_MAX`]. The state waiting
//!   is always the newest whole state, and the journal writes everything changed since the
//!   last commit that reached the disk, so nothing is lost and nothing written twice.

use forewarn_imds::millis;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::daemon::journal::{Journal, JournalIo};
use crate::durable_file::DurableFileError;
use crate::log_messages;
use crate::pipeline::state::DaemonState;
use crate::storage_health::{SpaceCause, SpaceProblem, StorageHealth};

/// Longest a grouped commit waits for the next write.
pub(crate) const GROUP_COMMIT_WINDOW: Duration = Duration::from_secs(1);
/// First wait before a failed journal is tried again; it doubles up to [`RETRY_MAX`].
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between two tries of a failed journal.
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(8);

/// When a commit must reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitWhen {
    /// Before the actions after it (a first call, an approval, any decision).
    Now,
    /// Within [`GROUP_COMMIT_WINDOW`]: nothing after it depends on it being on disk.
    Grouped,
}

/// What the keeper needs of a journal (the real one, or a fake that fails on demand).
pub(crate) trait CommitLog {
    /// Records `state` and `holds` durably, or fails leaving them to the next commit.
    fn commit(
        &mut self,
        state: &Arc<DaemonState>,
        holds: BTreeSet<String>,
    ) -> Result<(), DurableFileError>;
    /// Bytes set aside beyond the log's end.
    fn reserve_left(&self) -> u64;
    /// Why the journal could not compact or set space aside, if it could not.
    fn space_problem(&self) -> Option<SpaceProblem>;
    /// What it wrote and synced so far.
    fn io(&self) -> JournalIo;
}

impl CommitLog for Journal {
    fn commit(
        &mut self,
        state: &Arc<DaemonState>,
        holds: BTreeSet<String>,
    ) -> Result<(), DurableFileError> {
        Journal::commit(self, state, holds)
    }

    fn reserve_left(&self) -> u64 {
        Journal::reserve_left(self)
    }

    fn space_problem(&self) -> Option<SpaceProblem> {
        Journal::space_problem(self).cloned()
    }

    fn io(&self) -> JournalIo {
        Journal::io(self)
    }
}

/// The journal, its newest state not yet on disk, and how its writes fare.
pub(crate) struct JournalKeeper<J: CommitLog = Journal> {
    journal: J,
    health: Arc<StorageHealth>,
    pending: Option<Pending>,
    /// When the last commit reached the disk.
    last_write: Option<Instant>,
    failing: Option<Failing>,
    /// What the log last said of the journal's room: said once per change.
    room: Room,
}

/// Whether the journal can compact and set space aside, as last said in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// It can (or nothing was said yet).
    Enough,
    /// It cannot, for this cause.
    Short(SpaceCause),
}

impl Room {
    /// The room `problem` leaves.
    fn of(problem: Option<&SpaceProblem>) -> Room {
        match problem {
            None => Room::Enough,
            Some(problem) => Room::Short(problem.cause),
        }
    }

    /// Says the change from `self` to `now` in the log, if it is one.
    fn say_change(self, now: Room, problem: Option<&SpaceProblem>, reserve_left: u64) {
        match (self, now, problem) {
            (before, Room::Short(cause), Some(problem)) if before != now => tracing::warn!(
                problem = %problem.detail,
                reserve_left_bytes = reserve_left,
                "{}",
                cause.message()
            ),
            (Room::Short(_), Room::Enough, _) => tracing::info!(
                reserve_left_bytes = reserve_left,
                "{}",
                log_messages::JOURNAL_RESERVE_RESTORED
            ),
            _ => {}
        }
    }
}

/// The newest state, not on disk yet.
struct Pending {
    state: Arc<DaemonState>,
    holds: BTreeSet<String>,
    /// When it is written if nothing writes it sooner (a grouped commit's window).
    due: Instant,
}

/// A streak of failed commits.
struct Failing {
    since: Instant,
    since_wall: SystemTime,
    failures: u64,
    wait: Duration,
    retry_at: Instant,
}

impl<J: CommitLog> JournalKeeper<J> {
    /// Keeps `journal`, reporting to `health`. `unwritable`: the journal could be read but
    /// not written when it was opened; the keeper starts failing, and tries again soon.
    pub(crate) fn new(
        journal: J,
        health: Arc<StorageHealth>,
        unwritable: Option<&DurableFileError>,
        now: Instant,
    ) -> Self {
        let mut keeper = JournalKeeper {
            journal,
            health,
            pending: None,
            last_write: None,
            failing: None,
            room: Room::Enough,
        };
        if let Some(error) = unwritable {
            keeper.failed(error, now, true);
        }
        keeper.publish();
        keeper
    }

    /// Whether every commit so far reached the disk (grouped ones waiting their window
    /// count: they are written within it). False from a failed commit until a retry works.
    pub(crate) fn is_durable(&self) -> bool {
        self.failing.is_none()
    }

    /// Records `state` (with the readiness `holds`) `when` the pipeline asked: at once, or
    /// within the group window. While failing, it is written at the next retry. Returns
    /// whether the journal is durable afterwards.
    pub(crate) fn record(
        &mut self,
        state: Arc<DaemonState>,
        holds: BTreeSet<String>,
        when: CommitWhen,
        now: Instant,
    ) -> bool {
        let window_ends = self.last_write.map(|at| at + GROUP_COMMIT_WINDOW);
        let due = match (when, window_ends) {
            (CommitWhen::Grouped, Some(ends)) if now < ends => ends,
            _ => now,
        };
        // A grouped state never waits longer than the one already waiting.
        let due = self
            .pending
            .as_ref()
            .map_or(due, |older| older.due.min(due));
        self.pending = Some(Pending { state, holds, due });
        self.tick(now);
        self.is_durable()
    }

    /// Writes the waiting state if it is due: its group window ended, or the retry of a
    /// failing journal came.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.wake_at().is_some_and(|at| at <= now) {
            self.write(now);
        }
    }

    /// Writes the waiting state now, whatever its window or the backoff (at shutdown).
    pub(crate) fn flush(&mut self, now: Instant) -> bool {
        if self.pending.is_some() {
            self.write(now);
        }
        self.is_durable()
    }

    /// When [`JournalKeeper::tick`] has something to do.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let pending = self.pending.as_ref()?;
        Some(match &self.failing {
            Some(failing) => failing.retry_at,
            None => pending.due,
        })
    }

    fn write(&mut self, now: Instant) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        match self.journal.commit(&pending.state, pending.holds.clone()) {
            Ok(()) => {
                self.last_write = Some(now);
                self.recovered(now);
            }
            Err(error) => {
                self.pending = Some(pending);
                self.failed(&error, now, false);
            }
        }
        self.publish();
    }

    /// A commit failed: starts the streak (one log line) or continues it, and backs off.
    fn failed(&mut self, error: &DurableFileError, now: Instant, at_start: bool) {
        let failing = self.failing.get_or_insert_with(|| Failing {
            since: now,
            since_wall: SystemTime::now(),
            failures: 0,
            wait: RETRY_FIRST / 2,
            retry_at: now,
        });
        failing.failures += 1;
        failing.wait = (failing.wait * 2).min(RETRY_MAX);
        failing.retry_at = now + failing.wait;
        let first = failing.failures == 1;
        let retry_in_ms = millis(failing.wait);
        self.health.update_journal(|health| {
            health.write_failures += u64::from(!at_start);
            health.last_error = Some(error.to_string());
        });
        if first {
            tracing::error!(
                %error,
                at_start,
                retry_in_ms,
                reserve_left_bytes = self.journal.reserve_left(),
                "{}",
                log_messages::JOURNAL_NOT_DURABLE
            );
        }
    }

    /// A commit reached the disk: ends the streak, if there was one (one log line).
    fn recovered(&mut self, now: Instant) {
        let Some(failing) = self.failing.take() else {
            return;
        };
        tracing::warn!(
            failed_writes = failing.failures,
            not_durable_ms = millis(now.saturating_duration_since(failing.since)),
            "{}",
            log_messages::JOURNAL_DURABLE_AGAIN
        );
    }

    /// Tells the health what the journal looks like now; says once when it cannot compact
    /// or set space aside (why: full, not permitted, read-only, …) and when it can again.
    fn publish(&mut self) {
        let problem = self.journal.space_problem();
        let reserve_left = self.journal.reserve_left();
        let room = Room::of(problem.as_ref());
        self.room.say_change(room, problem.as_ref(), reserve_left);
        self.room = room;
        let io = self.journal.io();
        let failing = self.failing.as_ref();
        let next_retry = failing.map(|failing| {
            SystemTime::now() + failing.retry_at.saturating_duration_since(Instant::now())
        });
        self.health.update_journal(|health| {
            health.durable = failing.is_none();
            health.not_durable_since = failing.map(|failing| failing.since_wall);
            health.next_retry = next_retry;
            if failing.is_none() {
                health.last_error = None;
            }
            health.reserve_left = reserve_left;
            health.space_problem = problem;
            health.syncs = io.syncs;
            health.bytes = io.bytes;
        });
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// A journal that records what it committed and fails while told to.
    #[derive(Default, Clone)]
    struct FakeJournal {
        inner: Rc<RefCell<FakeInner>>,
    }

    #[derive(Default)]
    struct FakeInner {
        failing: bool,
        commits: Vec<Arc<DaemonState>>,
        attempts: u32,
        space_problem: Option<SpaceProblem>,
    }

    impl FakeJournal {
        fn fail(&self, failing: bool) {
            self.inner.borrow_mut().failing = failing;
        }
        fn commits(&self) -> Vec<Arc<DaemonState>> {
            self.inner.borrow().commits.clone()
        }
        fn attempts(&self) -> u32 {
            self.inner.borrow().attempts
        }
        fn short_of_room(&self, problem: Option<SpaceProblem>) {
            self.inner.borrow_mut().space_problem = problem;
        }
    }

    impl CommitLog for FakeJournal {
        fn commit(
            &mut self,
            state: &Arc<DaemonState>,
            _holds: BTreeSet<String>,
        ) -> Result<(), DurableFileError> {
            let mut inner = self.inner.borrow_mut();
            inner.attempts += 1;
            if inner.failing {
                return Err(DurableFileError::io(
                    "append to",
                    std::path::Path::new("/state/journal.log"),
                    std::io::Error::from(std::io::ErrorKind::StorageFull),
                ));
            }
            inner.commits.push(state.clone());
            Ok(())
        }
        fn reserve_left(&self) -> u64 {
            0
        }
        fn space_problem(&self) -> Option<SpaceProblem> {
            self.inner.borrow().space_problem.clone()
        }
        fn io(&self) -> JournalIo {
            JournalIo::default()
        }
    }

    /// A state told apart from others by its tracker's document count.
    fn state(number: usize) -> Arc<DaemonState> {
        let mut state = DaemonState::default();
        for index in 0..number {
            let id = format!("E{index}");
            let event = crate::pipeline::test_harness::event(
                &id,
                forewarn_imds::EventType::Reboot,
                crate::pipeline::test_harness::t0(),
                Duration::from_secs(600),
            );
            state.events.insert(
                id.into(),
                Arc::new(crate::pipeline::state::EventProgress::new(
                    event,
                    crate::pipeline::state::Handling::Prepare {
                        affects_this_vm: true,
                    },
                    crate::pipeline::state::Lifecycle::Scheduled,
                )),
            );
        }
        Arc::new(state)
    }

    fn keeper(journal: &FakeJournal, now: Instant) -> JournalKeeper<FakeJournal> {
        JournalKeeper::new(journal.clone(), Arc::default(), None, now)
    }

    #[test]
    fn grouped_commits_within_a_window_are_written_once_with_the_newest_state() {
        let journal = FakeJournal::default();
        let start = Instant::now();
        let mut keeper = keeper(&journal, start);
        assert!(keeper.record(state(1), BTreeSet::new(), CommitWhen::Now, start));
        for step in 1..=9 {
            let now = start + Duration::from_millis(100 * step);
            assert!(keeper.record(state(2), BTreeSet::new(), CommitWhen::Grouped, now));
        }
        assert_eq!(
            journal.commits().len(),
            1,
            "grouped commits were written at once"
        );
        assert_eq!(keeper.wake_at(), Some(start + GROUP_COMMIT_WINDOW));
        keeper.tick(start + GROUP_COMMIT_WINDOW);
        assert_eq!(journal.commits().len(), 2);
        assert_eq!(journal.commits()[1], state(2));
        assert_eq!(keeper.wake_at(), None);
    }

    #[test]
    fn a_commit_needed_now_writes_the_grouped_ones_with_it() {
        let journal = FakeJournal::default();
        let start = Instant::now();
        let mut keeper = keeper(&journal, start);
        keeper.record(state(1), BTreeSet::new(), CommitWhen::Now, start);
        let soon = start + Duration::from_millis(100);
        keeper.record(state(2), BTreeSet::new(), CommitWhen::Grouped, soon);
        keeper.record(state(3), BTreeSet::new(), CommitWhen::Now, soon);
        assert_eq!(journal.commits(), vec![state(1), state(3)]);
        assert_eq!(keeper.wake_at(), None, "nothing left waiting");
    }

    #[test]
    fn a_failing_journal_keeps_the_newest_state_retries_with_backoff_and_recovers_whole() {
        let journal = FakeJournal::default();
        let start = Instant::now();
        let health = Arc::new(StorageHealth::default());
        let mut keeper = JournalKeeper::new(journal.clone(), health.clone(), None, start);
        keeper.record(state(1), BTreeSet::new(), CommitWhen::Now, start);
        journal.fail(true);
        assert!(!keeper.record(state(2), BTreeSet::new(), CommitWhen::Now, start));
        assert!(!health.journal().durable);
        assert_eq!(health.journal().write_failures, 1);
        // Rounds in between do not touch the disk: only the retries do.
        let attempts = journal.attempts();
        for step in 1..10 {
            let now = start + Duration::from_millis(50 * step);
            assert!(!keeper.record(state(3), BTreeSet::new(), CommitWhen::Now, now));
        }
        assert_eq!(journal.attempts(), attempts, "retried on every round");
        // Backoff: 1 s, 2 s, 4 s, 8 s, 8 s.
        let mut at = start;
        for wait in [1, 2, 4, 8, 8] {
            at += Duration::from_secs(wait);
            assert_eq!(keeper.wake_at(), Some(at));
            keeper.tick(at);
        }
        assert_eq!(journal.attempts(), attempts + 5);
        journal.fail(false);
        at += RETRY_MAX;
        keeper.tick(at);
        assert!(keeper.is_durable());
        assert!(health.journal().durable);
        assert_eq!(
            journal.commits(),
            vec![state(1), state(3)],
            "the newest state, once"
        );
    }

    #[test]
    fn a_journal_unwritable_at_start_is_tried_again() {
        let journal = FakeJournal::default();
        let start = Instant::now();
        let error = DurableFileError::io(
            "open",
            std::path::Path::new("/state/journal.log"),
            std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem),
        );
        let health = Arc::new(StorageHealth::default());
        let mut keeper = JournalKeeper::new(journal.clone(), health.clone(), Some(&error), start);
        assert!(!keeper.is_durable());
        assert!(
            health
                .journal()
                .last_error
                .is_some_and(|e| e.contains("read-only"))
        );
        assert!(!keeper.record(state(1), BTreeSet::new(), CommitWhen::Now, start));
        keeper.tick(start + RETRY_FIRST);
        assert!(keeper.is_durable());
        assert_eq!(journal.commits(), vec![state(1)]);
    }

    /// Issue 45 part 6: an immutable state directory was reported as a full one.
    #[test]
    fn the_health_says_why_the_journal_cannot_compact_by_the_errors_kind() {
        let journal = FakeJournal::default();
        let start = Instant::now();
        let health = Arc::new(StorageHealth::default());
        let mut keeper = JournalKeeper::new(journal.clone(), health.clone(), None, start);
        for (kind, cause) in [
            (
                std::io::ErrorKind::PermissionDenied,
                SpaceCause::NotPermitted,
            ),
            (std::io::ErrorKind::ReadOnlyFilesystem, SpaceCause::ReadOnly),
            (std::io::ErrorKind::StorageFull, SpaceCause::Full),
        ] {
            let error = DurableFileError::io(
                "open",
                std::path::Path::new("/state/journal.log.new"),
                std::io::Error::from(kind),
            );
            journal.short_of_room(Some(error.space_problem()));
            assert!(keeper.record(state(1), BTreeSet::new(), CommitWhen::Now, start));
            let view = health.view().journal;
            assert_eq!(view.state, crate::storage_health::JournalState::OnReserve);
            assert_eq!(view.space_problem_cause, Some(cause), "{kind:?}");
            assert_eq!(keeper.room, Room::Short(cause));
        }
        journal.short_of_room(None);
        keeper.record(state(2), BTreeSet::new(), CommitWhen::Now, start);
        assert_eq!(health.view().journal.space_problem_cause, None);
        assert_eq!(keeper.room, Room::Enough);
    }
}
