//! The outcome keeper: the shell around the pipeline's [`OutcomeBook`]. It follows the
//! timeline's broadcast (as `ops/event_history.rs` does), stamps each entry on IMDS's clock,
//! runs the two heartbeats the impact is measured by, and writes the records to
//! `STATE_DIR/outcomes/` — off the event loop, at most once a second, and never while the
//! journal cannot write (on a full disk the records are the first thing to wait).
//!
//! - The **pause heartbeat**: a thread that wakes every [`PAUSE_HEARTBEAT_PERIOD`] and
//!   hands its monotonic readings to a [`PauseMeter`]; a gap (the process or the VM stopped)
//!   goes to the book, which gives it to the events Started then.
//! - The **durable heartbeat**: `STATE_DIR/heartbeat.json` (the VM's wall time and this
//!   boot's id), rewritten every [`DURABLE_HEARTBEAT_PERIOD`]. At start the daemon reads the
//!   previous one: a new boot id means the VM rebooted, and the time since the last
//!   heartbeat is the downtime of the Reboot or Redeploy under way.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use forewarn_imds::{ImdsClock, unix_ms};
use forewarn_platform::boot_id::{BootId, BootIdReading};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::durable_file::{self, DurableFileError};
use crate::ops::admin::DaemonViews;
use crate::ops::outcome_metrics::OutcomeMetrics;
use crate::ops::outcome_status::OutcomeShelf;
use crate::pipeline::outcome::host_move::{HostChange, HostReading};
use crate::pipeline::outcome::impact::{
    Downtime, HeartbeatGap, MonotonicTime, PauseMeter, RestartSeen,
};
use crate::pipeline::outcome::record::{OUTCOME_SCHEMA, OutcomeRecord};
use crate::pipeline::outcome::{BookChange, OutcomeBook, OutcomeLimits, RecordKey};
use crate::pipeline::timeline::TimelineEntry;
use crate::storage_health::StorageHealth;

/// The records' directory under the state directory.
pub(crate) const OUTCOMES_DIR: &str = "outcomes";
/// The durable heartbeat's file under the state directory.
pub(crate) const HEARTBEAT_FILE: &str = "heartbeat.json";
/// How often the durable heartbeat is rewritten: a reboot's downtime is ± half of it.
pub(crate) const DURABLE_HEARTBEAT_PERIOD: Duration = Duration::from_secs(1);
/// How often the pause heartbeat wakes: a pause is ± this.
pub(crate) const PAUSE_HEARTBEAT_PERIOD: Duration = Duration::from_millis(50);
/// The longest a failed write waits before it is tried again.
const RETRY_MAX: Duration = Duration::from_secs(60);
/// The largest record file read at start (one is a few KiB; 64 calls fit in far less).
const RECORD_FILE_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// What the durable heartbeat file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DurableHeartbeat {
    /// The VM's wall clock when it was written, in ms since the epoch.
    wall_unix_ms: u64,
    /// The boot it was written in (empty when the boot id cannot be read).
    boot_id: String,
    /// The dedicated host IMDS named to that run (unread in a heartbeat written before
    /// forewarn kept the host, or before that run had resolved the VM).
    #[serde(default)]
    host: HostReading,
}

/// The keeper before it runs: the book loaded, what the start found about a reboot.
pub(crate) struct OutcomeKeeper {
    shelf: Arc<OutcomeShelf>,
    dir: PathBuf,
    heartbeat_path: PathBuf,
    boot_id: Option<BootId>,
    /// After a reboot found at start: the host the run before it read.
    host_before_reboot: Option<HostReading>,
}

/// What the running keeper reads from.
pub(crate) struct KeeperSources {
    /// The timeline, subscribed before the event loop starts.
    pub timeline: broadcast::Receiver<TimelineEntry>,
    /// IMDS's clock, which the records' times are on.
    pub clock: ImdsClock,
    /// The daemon's views: the VM's name once resolved (whether an event names this VM).
    pub views: watch::Receiver<Option<DaemonViews>>,
    /// The journal's health: records wait while it cannot write.
    pub storage: Arc<StorageHealth>,
    /// Fed when an event is over.
    pub metrics: OutcomeMetrics,
}

impl OutcomeKeeper {
    /// At the daemon's start (`started`, on the VM's clock): loads the records of
    /// `STATE_DIR/outcomes/` and reads the previous run's durable heartbeat. Never fails:
    /// what cannot be read is logged and left out (the daemon protects the VM regardless).
    pub(crate) fn open(state_dir: &Path, limits: OutcomeLimits, started: SystemTime) -> Self {
        let dir = state_dir.join(OUTCOMES_DIR);
        let heartbeat_path = state_dir.join(HEARTBEAT_FILE);
        let mut book = OutcomeBook::new("", limits);
        book.restore(load_records(&dir));
        let reading = BootId::current();
        let previous = read_heartbeat(&heartbeat_path);
        let previous_host = previous.as_ref().map(|beat| beat.host.clone());
        let restart = restart_seen(previous, &reading, started);
        match &restart {
            RestartSeen::Rebooted(downtime) => tracing::info!(
                downtime_ms = downtime.length_ms,
                "the VM rebooted while forewarn was down (a new boot id): the downtime goes to the Reboot or Redeploy under way"
            ),
            RestartSeen::SameBoot => {}
            RestartSeen::Unknown { why } => {
                tracing::debug!(%why, "cannot tell whether the VM rebooted");
            }
        }
        book.restarted(&restart);
        let host_before_reboot = match restart {
            RestartSeen::Rebooted(_) => previous_host,
            RestartSeen::SameBoot | RestartSeen::Unknown { .. } => None,
        };
        let boot_id = match reading {
            BootIdReading::Known(id) => Some(id),
            BootIdReading::Unknown(_) => None,
        };
        OutcomeKeeper {
            shelf: Arc::new(OutcomeShelf::new(book, limits)),
            dir,
            heartbeat_path,
            boot_id,
            host_before_reboot,
        }
    }

    /// The book, for the admin endpoint.
    pub(crate) fn shelf(&self) -> Arc<OutcomeShelf> {
        self.shelf.clone()
    }

    /// Runs the keeper until `stop` (or the timeline closes), then writes what is left.
    pub(crate) fn spawn(
        self,
        sources: KeeperSources,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let (gaps_sender, gaps) = mpsc::channel(64);
        let clock = sources.clock.clone();
        let heartbeat = std::thread::Builder::new()
            .name("forewarn-pause-heartbeat".into())
            .spawn(move || pause_heartbeat(&gaps_sender, &clock));
        if let Err(error) = heartbeat {
            tracing::error!(%error, "cannot start the pause heartbeat: Freezes' pauses are not measured");
        }
        tokio::spawn(self.run(sources, gaps, stop))
    }

    async fn run(
        self,
        mut sources: KeeperSources,
        mut gaps: mpsc::Receiver<HeartbeatGap>,
        stop: CancellationToken,
    ) {
        let mut writer = Writer::new(
            self.dir.clone(),
            self.heartbeat_path.clone(),
            self.boot_id.clone(),
        );
        let mut tick = tokio::time::interval(DURABLE_HEARTBEAT_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut vm_name_known = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                received = sources.timeline.recv() => match received {
                    Ok(entry) => {
                        if !vm_name_known {
                            vm_name_known = self.take_vm(&sources.views, &mut writer);
                        }
                        let now = sources.clock.now();
                        let mut book = self.shelf.book();
                        book.record(&entry, now);
                        while let Some(closed) = book.poll_closed() {
                            sources.metrics.record(&closed);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => tracing::warn!(
                        missed,
                        "the outcome records missed timeline entries (a burst larger than the timeline's buffer): some calls or changes are not recorded"
                    ),
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                Some(gap) = gaps.recv() => {
                    let mut book = self.shelf.book();
                    book.heartbeat_gap(gap);
                    while let Some(closed) = book.poll_closed() {
                        sources.metrics.record(&closed);
                    }
                }
                _ = tick.tick() => writer.write(&self.shelf, &sources.storage).await,
            }
        }
        writer.write(&self.shelf, &sources.storage).await;
    }

    /// Gives the book the VM's name and the heartbeat the host once the daemon resolved
    /// them, and after a reboot says whether the VM came back on another host; whether the
    /// daemon had resolved them.
    fn take_vm(&self, views: &watch::Receiver<Option<DaemonViews>>, writer: &mut Writer) -> bool {
        let Some((vm_name, host)) = views
            .borrow()
            .as_ref()
            .map(|views| (views.vm_name.clone(), views.host.clone()))
        else {
            return false;
        };
        let mut book = self.shelf.book();
        book.set_vm_name(&vm_name);
        if let Some(before) = &self.host_before_reboot {
            let change = HostChange::between(before, &host);
            if let HostChange::Moved { from, to } = &change {
                tracing::info!(%from, %to, "the VM came back from its reboot on another dedicated host");
            }
            book.host_after_reboot(&change);
        }
        writer.host = host;
        true
    }
}

/// What the daemon found about the time it was down: the previous run's heartbeat against
/// this boot's id, the start at `started`.
fn restart_seen(
    previous: Option<DurableHeartbeat>,
    current: &BootIdReading,
    started: SystemTime,
) -> RestartSeen {
    let Some(previous) = previous else {
        return RestartSeen::Unknown {
            why: format!(
                "no heartbeat of a previous run in the state directory ({HEARTBEAT_FILE})"
            ),
        };
    };
    match current {
        BootIdReading::Unknown(why) => RestartSeen::Unknown { why: why.clone() },
        BootIdReading::Known(id) if id.same_boot(&previous.boot_id) => RestartSeen::SameBoot,
        BootIdReading::Known(_) if previous.boot_id.is_empty() => RestartSeen::Unknown {
            why: "the previous run could not read its boot id".into(),
        },
        BootIdReading::Known(_) => RestartSeen::Rebooted(Downtime::between(
            previous.wall_unix_ms,
            unix_ms(started),
            DURABLE_HEARTBEAT_PERIOD,
        )),
    }
}

/// The previous run's heartbeat, if one is there and readable.
fn read_heartbeat(path: &Path) -> Option<DurableHeartbeat> {
    match durable_file::read_if_exists(path) {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).ok(),
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(%error, "cannot read the previous run's heartbeat: a reboot's downtime is not measured");
            None
        }
    }
}

/// The records of `dir`, each with its file's size; unreadable files are moved aside.
/// The outcome records kept in `state_dir`, the oldest first (`forewarn demo` prints them
/// once its daemon has stopped).
pub fn records_in(state_dir: &Path) -> Vec<OutcomeRecord> {
    let mut records: Vec<OutcomeRecord> = load_records(&state_dir.join(OUTCOMES_DIR))
        .into_iter()
        .map(|(record, _)| record)
        .collect();
    records.sort_by_key(|record| record.handled.first_seen_unix_ms);
    records
}

fn load_records(dir: &Path) -> Vec<(OutcomeRecord, u64)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => {
            tracing::error!(dir = %dir.display(), %error, "cannot read the outcome records: starting without them (check the state directory's permissions)");
            return Vec::new();
        }
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        match read_record(&path) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => {}
            Err(problem) => {
                let moved = durable_file::quarantine(&path)
                    .map_or_else(|error| error.to_string(), |to| to.display().to_string());
                tracing::warn!(path = %path.display(), %problem, moved_to = %moved, "an outcome record cannot be read: moved aside");
            }
        }
    }
    records
}

/// Why a record file cannot be read (it is moved aside).
#[derive(Debug, thiserror::Error)]
enum UnreadableRecord {
    /// Its size could not be read.
    #[error(transparent)]
    Size(std::io::Error),
    /// Larger than a record takes.
    #[error("{0} bytes, more than a record takes")]
    TooLarge(u64),
    /// It could not be read.
    #[error(transparent)]
    Read(#[from] DurableFileError),
    /// Not JSON of an outcome record.
    #[error(transparent)]
    NotARecord(#[from] serde_json::Error),
}

/// One record file: Ok(None) for a record of another schema (left as it is).
fn read_record(path: &Path) -> Result<Option<(OutcomeRecord, u64)>, UnreadableRecord> {
    let size = std::fs::metadata(path)
        .map_err(UnreadableRecord::Size)?
        .len();
    if size > RECORD_FILE_MAX_BYTES {
        return Err(UnreadableRecord::TooLarge(size));
    }
    let bytes = durable_file::read_if_exists(path)?.unwrap_or_default();
    let value: serde_json::Value = serde_json::from_slice(&bytes)?;
    if value.get("schema").and_then(serde_json::Value::as_u64) != Some(u64::from(OUTCOME_SCHEMA)) {
        tracing::info!(path = %path.display(), "an outcome record of another forewarn version: left as it is");
        return Ok(None);
    }
    let record = serde_json::from_value(value)?;
    Ok(Some((record, size)))
}

/// The path of a record's file.
fn record_path(dir: &Path, key: &RecordKey) -> PathBuf {
    dir.join(format!("{}.json", key.file_stem()))
}

/// What the pause heartbeat thread does until the keeper is gone.
fn pause_heartbeat(gaps: &mpsc::Sender<HeartbeatGap>, clock: &ImdsClock) {
    let origin = Instant::now();
    let mut meter = PauseMeter::new(PAUSE_HEARTBEAT_PERIOD);
    while !gaps.is_closed() {
        std::thread::sleep(PAUSE_HEARTBEAT_PERIOD);
        let monotonic = MonotonicTime::from_origin(origin.elapsed());
        if let Some(gap) = meter.beat(monotonic, clock.now()) {
            // A full channel means the keeper is far behind: a gap more or less changes
            // nothing it has not seen.
            let _ignored = gaps.try_send(gap);
        }
    }
}

/// Writes the records and the durable heartbeat, off the event loop.
struct Writer {
    dir: PathBuf,
    heartbeat_path: PathBuf,
    boot_id: Option<BootId>,
    /// The dedicated host IMDS named, once the daemon resolved the VM.
    host: HostReading,
    /// While writes fail: when to try again, and how long the next wait is.
    retry: Option<(Instant, Duration)>,
    /// Whether the last round waited for the journal (logged once a streak).
    waiting_for_journal: bool,
}

/// What one file operation gave.
enum Written {
    Record(RecordKey, Result<u64, DurableFileError>),
    Removed(RecordKey, std::io::Result<()>),
}

impl Writer {
    fn new(dir: PathBuf, heartbeat_path: PathBuf, boot_id: Option<BootId>) -> Writer {
        Writer {
            dir,
            heartbeat_path,
            boot_id,
            host: HostReading::Unread,
            retry: None,
            waiting_for_journal: false,
        }
    }

    /// One round: the heartbeat, then the records changed since the last round. Skipped
    /// while the journal cannot write or a failed write waits for its retry.
    async fn write(&mut self, shelf: &Arc<OutcomeShelf>, storage: &StorageHealth) {
        let journal = storage.journal();
        let journal_needs_the_disk = !journal.durable || journal.space_problem.is_some();
        if journal_needs_the_disk != self.waiting_for_journal {
            self.waiting_for_journal = journal_needs_the_disk;
            if journal_needs_the_disk {
                tracing::warn!(
                    "outcome records wait: the journal cannot write, and it has the disk first (docs/operations.md, \"When the disk is full\")"
                );
            }
        }
        if journal_needs_the_disk || self.retry.is_some_and(|(at, _)| Instant::now() < at) {
            return;
        }
        let changes: Vec<BookChange> = {
            let mut book = shelf.book();
            std::iter::from_fn(|| book.poll_change()).collect()
        };
        let heartbeat = DurableHeartbeat {
            wall_unix_ms: unix_ms(SystemTime::now()),
            boot_id: self
                .boot_id
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            host: self.host.clone(),
        };
        let (dir, heartbeat_path) = (self.dir.clone(), self.heartbeat_path.clone());
        let done = tokio::task::spawn_blocking(move || {
            let beat = durable_file::encode_json(&heartbeat_path, &heartbeat)
                .and_then(|bytes| durable_file::write_atomically(&heartbeat_path, &bytes));
            (beat, apply(&dir, changes))
        })
        .await;
        let Ok((beat, written)) = done else {
            tracing::error!("the outcome records' writer panicked: retried");
            return;
        };
        let mut failure = beat.err();
        let mut book = shelf.book();
        for outcome in written {
            match outcome {
                Written::Record(key, Ok(bytes)) => book.written(&key, bytes),
                Written::Record(key, Err(error)) => {
                    book.not_written(key);
                    failure.get_or_insert(error);
                }
                Written::Removed(key, Err(error)) => tracing::warn!(
                    record = %key.file_stem(),
                    %error,
                    "cannot remove an evicted outcome record's file"
                ),
                Written::Removed(_, Ok(())) => {}
            }
        }
        drop(book);
        self.settle(failure);
    }

    /// Backs off after a failure (one log line a streak), or clears the streak.
    fn settle(&mut self, failure: Option<DurableFileError>) {
        match (failure, self.retry) {
            (None, Some(_)) => {
                tracing::info!("outcome records are written again");
                self.retry = None;
            }
            (None, None) => {}
            (Some(error), None) => {
                tracing::warn!(%error, "cannot write the outcome records or the heartbeat: kept in memory, retried with backoff");
                self.retry = Some((
                    Instant::now() + Duration::from_secs(1),
                    Duration::from_secs(2),
                ));
            }
            (Some(_), Some((_, wait))) => {
                self.retry = Some((Instant::now() + wait, (wait * 2).min(RETRY_MAX)));
            }
        }
    }
}

/// Applies `changes` to the files of `dir` (blocking).
fn apply(dir: &Path, changes: Vec<BookChange>) -> Vec<Written> {
    let created = durable_file::create_private_dir(dir);
    changes
        .into_iter()
        .map(|change| match change {
            BookChange::Write(key, record) => {
                let path = record_path(dir, &key);
                let written = match &created {
                    Err(error) => Err(DurableFileError::io(
                        "create the directory",
                        dir,
                        std::io::Error::other(error.to_string()),
                    )),
                    Ok(()) => durable_file::encode_json(&path, &record).and_then(|bytes| {
                        durable_file::write_atomically(&path, &bytes).map(|()| bytes.len() as u64)
                    }),
                };
                Written::Record(key, written)
            }
            BookChange::Remove(key) => {
                let removed = match std::fs::remove_file(record_path(dir, &key)) {
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    other => other,
                };
                Written::Removed(key, removed)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn beat(wall_unix_ms: u64, boot_id: &str) -> Option<DurableHeartbeat> {
        Some(DurableHeartbeat {
            wall_unix_ms,
            boot_id: boot_id.into(),
            host: HostReading::Unread,
        })
    }

    fn known(id: &str) -> BootIdReading {
        BootIdReading::Known(BootId::from_text(id).unwrap())
    }

    #[test]
    fn a_new_boot_id_is_a_reboot_and_the_same_one_a_restart() {
        let started = UNIX_EPOCH + Duration::from_millis(1_008_700);
        let RestartSeen::Rebooted(down) = restart_seen(beat(1_000_000, "a"), &known("b"), started)
        else {
            panic!("a new boot id is a reboot");
        };
        assert_eq!((down.length_ms, down.precision_ms), (8_200, 500));
        assert_eq!(
            restart_seen(beat(1_000_000, "a"), &known("a"), started),
            RestartSeen::SameBoot
        );
        assert!(matches!(
            restart_seen(None, &known("a"), started),
            RestartSeen::Unknown { .. }
        ));
        assert!(matches!(
            restart_seen(beat(1, "a"), &BootIdReading::Unknown("no".into()), started),
            RestartSeen::Unknown { .. }
        ));
    }

    #[test]
    fn records_are_written_read_back_and_evicted_files_removed() {
        let dir = tempfile::tempdir().unwrap();
        let outcomes = dir.path().join(OUTCOMES_DIR);
        let limits = OutcomeLimits {
            keep: 1,
            max_total_bytes: u64::MAX,
        };
        let mut book = OutcomeBook::new("vm-a", limits);
        let t0 = crate::pipeline::test_harness::t0();
        for (index, id) in ["A", "B"].into_iter().enumerate() {
            let at = t0 + Duration::from_secs(index as u64);
            let event = crate::pipeline::test_harness::event(
                id,
                forewarn_imds::EventType::Reboot,
                at,
                Duration::from_secs(60),
            );
            let scheduled = crate::pipeline::test_harness::transition_entry(
                &event,
                crate::pipeline::tracker::TransitionKind::Scheduled,
            );
            book.record(&scheduled, at);
        }
        let changes: Vec<_> = std::iter::from_fn(|| book.poll_change()).collect();
        // A is evicted before it was ever written: its removal finds no file.
        for outcome in apply(&outcomes, changes) {
            match outcome {
                Written::Record(key, written) => book.written(&key, written.unwrap()),
                Written::Removed(_, removed) => removed.unwrap(),
            }
        }
        let loaded = load_records(&outcomes);
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].0.event_id, "B");
        std::fs::write(outcomes.join("broken.json"), "{").unwrap();
        assert_eq!(
            load_records(&outcomes).len(),
            1,
            "the broken file is left out"
        );
        assert!(!outcomes.join("broken.json").exists(), "and moved aside");
    }
}
