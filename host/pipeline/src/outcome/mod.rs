//! What maintenance cost: one outcome record per event (what IMDS announced, what forewarn
//! did, what happened and the impact measured from inside the VM), kept in an
//! [`OutcomeBook`] bounded in count and bytes.
//!
//! Pure and clock-injected like the rest of the pipeline: the shell's keeper
//! (`daemon/outcome_keeper.rs`) feeds it each `TimelineEntry` with its `now`, the pause
//! heartbeat's gaps and what it found at start-up about a reboot, then drains
//! [`OutcomeBook::poll_change`] (records to write, files to remove) and
//! [`OutcomeBook::poll_closed`] (events over, for the metrics). It reads no clock and
//! writes no file.
//!
//! - [`record`]: the record and how each entry changes it;
//! - [`impact`]: the heartbeat's gap ([`impact::PauseMeter`]) and a reboot's downtime;
//! - [`verdict`]: the record's verdict line and its typed parts.

pub mod host_move;
pub mod impact;
pub mod record;
pub mod verdict;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use forewarn_events::{EventId, EventType, ImdsTime};

use crate::timeline::TimelineEntry;
use crate::tracker::TransitionKind;
use host_move::HostChange;
use impact::{HeartbeatGap, RestartSeen};
use record::{CallAnswer, OutcomeRecord};
use verdict::{PreparationOutcome, Verdict};

/// How many records, and how many bytes of them, are kept (`[outcomes]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutcomeLimits {
    /// Most records kept; the oldest goes first.
    pub keep: usize,
    /// Most bytes the records' files may take together; the oldest goes first.
    pub max_total_bytes: u64,
}

/// Which record: an event id and when it was first seen (IMDS may list an id again).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordKey {
    /// When the event was first seen: records sort oldest first.
    pub first_seen: ImdsTime,
    /// The event.
    pub event_id: EventId,
}

impl RecordKey {
    /// The key of `record`.
    pub fn of(record: &OutcomeRecord) -> RecordKey {
        RecordKey {
            first_seen: record.handled.first_seen_unix_ms,
            event_id: record.event_id.clone(),
        }
    }

    /// A file name stem for the record: `FIRSTSEEN-ID`, the id reduced to letters, digits,
    /// `-` and `_` (at most 64 of them), since ids come from outside.
    pub fn file_stem(&self) -> String {
        let id: String = self
            .event_id
            .as_str()
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
                _ => '_',
            })
            .take(64)
            .collect();
        format!("{}-{id}", self.first_seen.unix_ms())
    }
}

/// What the shell must do to the records' files.
#[derive(Debug, Clone, PartialEq)]
pub enum BookChange {
    /// Write this record (new or changed); report its size with [`OutcomeBook::written`].
    Write(RecordKey, Box<OutcomeRecord>),
    /// Remove this record's file (evicted by the bounds).
    Remove(RecordKey),
}

/// An event that is over, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClosedOutcome {
    /// Its type.
    pub event_type: EventType,
    /// The measured impact in seconds (None: not measured).
    pub impact_seconds: Option<f64>,
    /// How preparation went.
    pub preparation: PreparationOutcome,
}

/// A record and the bytes its file takes (0 until written).
#[derive(Debug, Clone)]
struct KeptRecord {
    record: OutcomeRecord,
    bytes: u64,
}

/// Every outcome record kept, the pure fold of the timeline into them.
#[derive(Debug)]
pub struct OutcomeBook {
    vm_name: String,
    limits: OutcomeLimits,
    kept: BTreeMap<RecordKey, KeptRecord>,
    /// Each event id's newest record.
    current: HashMap<EventId, RecordKey>,
    /// The latest heartbeat gaps, for an event whose start the daemon sees after its pause.
    recent_gaps: VecDeque<HeartbeatGap>,
    dirty: BTreeSet<RecordKey>,
    removed: VecDeque<RecordKey>,
    closed: VecDeque<ClosedOutcome>,
}

/// Most recent heartbeat gaps kept for events not yet seen Started.
const RECENT_GAPS_KEPT: usize = 16;

impl OutcomeBook {
    /// An empty book for the VM `vm_name`.
    pub fn new(vm_name: &str, limits: OutcomeLimits) -> OutcomeBook {
        OutcomeBook {
            vm_name: vm_name.to_owned(),
            limits,
            kept: BTreeMap::new(),
            current: HashMap::new(),
            recent_gaps: VecDeque::new(),
            dirty: BTreeSet::new(),
            removed: VecDeque::new(),
            closed: VecDeque::new(),
        }
    }

    /// The VM's name, once the daemon knows it (records of events seen from now on say
    /// whether they name it).
    pub fn set_vm_name(&mut self, vm_name: &str) {
        vm_name.clone_into(&mut self.vm_name);
    }

    /// The VM's name ("" until the daemon knows it).
    pub fn vm_name(&self) -> &str {
        &self.vm_name
    }

    /// Takes in the records of a previous run (each with the bytes its file takes); those
    /// over the bounds are evicted (see [`OutcomeBook::poll_change`]).
    pub fn restore(&mut self, records: Vec<(OutcomeRecord, u64)>) {
        for (record, bytes) in records {
            let key = RecordKey::of(&record);
            self.current.insert(record.event_id.clone(), key.clone());
            self.kept.insert(key, KeptRecord { record, bytes });
        }
        // `current` holds the newest record of each id: keys iterate oldest first.
        let newest: Vec<RecordKey> = self.kept.keys().cloned().collect();
        for key in newest {
            self.current.insert(key.event_id.clone(), key);
        }
        self.evict();
    }

    /// Folds one timeline entry, reported at `now`, into the records.
    pub fn record(&mut self, entry: &TimelineEntry, now: ImdsTime) {
        match entry {
            TimelineEntry::Transition {
                announced,
                transition,
                ..
            } => self.transition(announced, *transition, now),
            TimelineEntry::Handling { event_id, handling } => {
                self.change(event_id, |record| record.handling(handling));
            }
            TimelineEntry::PreparationWaits {
                event_id,
                starts_at_unix_ms,
            } => self.change(event_id, |record| {
                record.preparation_waits(*starts_at_unix_ms);
            }),
            TimelineEntry::PreparingLate {
                event_id,
                still_preparing,
            } => self.change(event_id, |record| {
                record.preparing_late(still_preparing, now);
            }),
            TimelineEntry::PluginCalled {
                event_id,
                plugin,
                phase,
                attempt,
                ..
            } => self.change(event_id, |record| {
                record.called(plugin, *phase, *attempt, now);
            }),
            TimelineEntry::PluginAnswered {
                event_id,
                plugin,
                phase,
                outcome,
                reason,
                elapsed_ms,
            } => self.change(event_id, |record| {
                let answer = CallAnswer {
                    outcome: *outcome,
                    reason: reason.clone(),
                    elapsed_ms: *elapsed_ms,
                };
                record.answered(plugin, *phase, answer, now);
            }),
            TimelineEntry::Approved { event_ids } => {
                for event_id in event_ids {
                    self.change(event_id, |record| record.approved(now));
                }
            }
            TimelineEntry::ApprovalFailed { event_ids, .. } => {
                for event_id in event_ids {
                    self.change(event_id, OutcomeRecord::approval_failed);
                }
            }
            TimelineEntry::NotApproved { event_id, reason } => {
                self.change(event_id, |record| record.held(reason, now));
            }
            TimelineEntry::Finished { event_id } => {
                self.change(event_id, |record| record.finished(now));
            }
            TimelineEntry::HostShutdownReleased { event_id, .. } => {
                self.change(event_id, |record| record.shutdown_went_on(now));
            }
            // Not about the event's outcome: a plugin's log lines stay in the history; the
            // turn and quarantine notes in the log and `/status`.
            TimelineEntry::PluginLog { .. }
            | TimelineEntry::TurnShortened { .. }
            | TimelineEntry::PluginQuarantined(_)
            | TimelineEntry::QuarantineLifted { .. }
            | TimelineEntry::HostShutdownBegan { .. } => {}
        }
    }

    fn transition(
        &mut self,
        event: &forewarn_events::ScheduledEvent,
        transition: TransitionKind,
        now: ImdsTime,
    ) {
        let listed_again = self
            .current_record(&event.id)
            .is_none_or(|record| record.stage.is_over());
        if transition == TransitionKind::Scheduled && listed_again
            || self.current_record(&event.id).is_none()
        {
            let record = OutcomeRecord::new(event, &self.vm_name, now);
            let key = RecordKey::of(&record);
            self.current.insert(event.id.clone(), key.clone());
            self.kept.insert(key, KeptRecord { record, bytes: 0 });
            self.evict();
        }
        let gaps: Vec<HeartbeatGap> = self.recent_gaps.iter().copied().collect();
        self.change(&event.id, |record| {
            record.transition(event, transition, now);
            if transition == TransitionKind::Started {
                for gap in &gaps {
                    if record.covers(gap) {
                        record.gap(*gap);
                    }
                }
            }
        });
    }

    /// The pause heartbeat saw `gap`: each event Started then takes it (the largest counts).
    pub fn heartbeat_gap(&mut self, gap: HeartbeatGap) {
        if self.recent_gaps.len() == RECENT_GAPS_KEPT {
            self.recent_gaps.pop_front();
        }
        self.recent_gaps.push_back(gap);
        let covering: Vec<EventId> = self
            .current
            .iter()
            .filter(|(_, key)| {
                self.kept
                    .get(*key)
                    .is_some_and(|kept| kept.record.covers(&gap))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for event_id in covering {
            self.change(&event_id, |record| record.gap(gap));
        }
    }

    /// What the daemon found at start-up about the time it was down: each Reboot or
    /// Redeploy under way takes it (a new boot is its downtime).
    pub fn restarted(&mut self, restart: &RestartSeen) {
        for event_id in self.current_where(OutcomeRecord::may_have_rebooted) {
            self.change(&event_id, |record| record.restarted(restart.clone()));
        }
    }

    /// Where IMDS tells it, whether the reboot found at start-up brought the VM back on
    /// another host: each Reboot or Redeploy under way whose restart was a new boot takes it.
    pub fn host_after_reboot(&mut self, change: &HostChange) {
        for event_id in self.current_where(OutcomeRecord::rebooted_during) {
            self.change(&event_id, |record| record.host_after_reboot(change.clone()));
        }
    }

    /// The events whose newest record matches `matches`.
    fn current_where(&self, matches: impl Fn(&OutcomeRecord) -> bool) -> Vec<EventId> {
        self.current
            .iter()
            .filter(|(_, key)| {
                self.kept
                    .get(*key)
                    .is_some_and(|kept| matches(&kept.record))
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Changes `event_id`'s newest record, marks it to be written, and notes when the
    /// event came to be over.
    fn change(&mut self, event_id: &EventId, change: impl FnOnce(&mut OutcomeRecord)) {
        let Some(key) = self.current.get(event_id) else {
            return;
        };
        let Some(kept) = self.kept.get_mut(key) else {
            return;
        };
        let record = &mut kept.record;
        let was_over = record.stage.is_over();
        change(record);
        record.verdict = Verdict::of(record);
        if !was_over && record.stage.is_over() {
            self.closed.push_back(ClosedOutcome {
                event_type: record.event_type,
                impact_seconds: record.happened.impact.seconds(),
                preparation: record.verdict.preparation(),
            });
        }
        self.dirty.insert(key.clone());
    }

    fn current_record(&self, event_id: &EventId) -> Option<&OutcomeRecord> {
        let key = self.current.get(event_id)?;
        self.kept.get(key).map(|kept| &kept.record)
    }

    /// The next change for the shell to make to the files: removals first, then the
    /// records changed since they were last handed out.
    #[must_use]
    pub fn poll_change(&mut self) -> Option<BookChange> {
        if let Some(key) = self.removed.pop_front() {
            return Some(BookChange::Remove(key));
        }
        let key = self.dirty.pop_first()?;
        let record = self.kept.get(&key)?.record.clone();
        Some(BookChange::Write(key, Box::new(record)))
    }

    /// A record handed out by [`OutcomeBook::poll_change`] could not be written: it is
    /// handed out again.
    pub fn not_written(&mut self, key: RecordKey) {
        if self.kept.contains_key(&key) {
            self.dirty.insert(key);
        }
    }

    /// The record of `key` was written and takes `bytes`: the bounds are applied.
    pub fn written(&mut self, key: &RecordKey, bytes: u64) {
        if let Some(kept) = self.kept.get_mut(key) {
            kept.bytes = bytes;
        }
        self.evict();
    }

    /// The next event that came to be over, for the metrics.
    #[must_use]
    pub fn poll_closed(&mut self) -> Option<ClosedOutcome> {
        self.closed.pop_front()
    }

    /// Every record, the oldest first.
    pub fn records(&self) -> impl Iterator<Item = &OutcomeRecord> {
        self.kept.values().map(|kept| &kept.record)
    }

    /// The bytes the records' files take.
    pub fn total_bytes(&self) -> u64 {
        self.kept.values().map(|kept| kept.bytes).sum()
    }

    /// Drops the oldest records while there are more than `keep` or they take more than
    /// `max_total_bytes` (the newest is always kept).
    fn evict(&mut self) {
        while self.kept.len() > self.limits.keep.max(1)
            || (self.total_bytes() > self.limits.max_total_bytes && self.kept.len() > 1)
        {
            let victim = self.kept.keys().next().cloned();
            let Some(victim) = victim else {
                return;
            };
            self.kept.remove(&victim);
            self.dirty.remove(&victim);
            if self.current.get(&victim.event_id) == Some(&victim) {
                self.current.remove(&victim.event_id);
            }
            self.removed.push_back(victim);
        }
    }
}

#[cfg(test)]
mod tests;
