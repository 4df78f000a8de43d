//! The fleet view's status record: each daemon with `[coordination]` publishes one small
//! JSON record at `PREFIX/fleet/VM` under its lease (it vanishes when the daemon dies and
//! the lease expires). The record's type ([`FleetRecord`]) is shared by the writer (this
//! module's [`spawn_publisher`]) and the readers (`coordination::fleet_reader`, `forewarn
//! fleet status`, the status page).
//!
//! A record is written when its content (apart from its timestamps) changes, at most every
//! [`FLEET_WRITE_MIN_INTERVAL`], and again every [`FLEET_REFRESH_EVERY`] so its last poll does
//! not go stale ([`Throttle`]); never on every IMDS poll. It is at most
//! [`FLEET_RECORD_MAX_BYTES`] ([`FleetRecord::encode_bounded`]). A failed write never touches
//! the barrier: it is logged once per streak of failures and tried again.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use forewarn_imds::PluginName;

use crate::coordination_status::CoordinationStatus;
use crate::etcd_access::EtcdAccess;
use forewarn_imds::unix_ms;
use forewarn_pipeline::log_messages;
use forewarn_pipeline::outcome::impact::Impact;
use forewarn_pipeline::outcome::verdict::PreparationOutcome;

/// The record's schema; a reader shows a record of another schema as unreadable.
pub const FLEET_RECORD_SCHEMA: u32 = 1;
/// The most bytes one record takes in etcd (its JSON).
pub const FLEET_RECORD_MAX_BYTES: usize = 4096;
/// The most events one record lists (`events_truncated` counts the others).
pub const FLEET_RECORD_EVENTS_MAX: usize = 8;
/// The most holders one event lists, and readiness holds one record lists.
pub const FLEET_RECORD_HOLDERS_MAX: usize = 8;
/// The most finished events one record lists (`last_outcomes`, the newest first).
pub const FLEET_RECORD_OUTCOMES_MAX: usize = 3;
/// The most reasons of an Unhealthy scale-set health one record lists.
pub const FLEET_RECORD_REASONS_MAX: usize = 8;
/// The most characters of one text field (event id, type, plugin name, NotBefore as sent).
pub const FLEET_RECORD_TEXT_MAX: usize = 96;
/// The most characters of a finished event's verdict line in the record.
pub const FLEET_RECORD_VERDICT_MAX: usize = 200;
/// A changed record is written at most this often.
pub const FLEET_WRITE_MIN_INTERVAL: Duration = Duration::from_secs(2);
/// An unchanged record is written again this often, so its last poll stays fresh.
pub const FLEET_REFRESH_EVERY: Duration = Duration::from_secs(30);

/// One VM's status record, as published at `PREFIX/fleet/VM`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetRecord {
    /// [`FLEET_RECORD_SCHEMA`].
    pub schema: u32,
    /// The VM's name as the barrier records it (lower case).
    pub vm: String,
    /// The forewarn version publishing it.
    pub version: String,
    /// The VM's last IMDS poll.
    pub imds: FleetImds,
    /// Whether `/readyz` answers 200 (no plugin holds the VM out of rotation).
    pub ready: bool,
    /// The plugins holding the VM out of rotation (at most [`FLEET_RECORD_HOLDERS_MAX`]).
    #[serde(default)]
    pub readiness_holds: Vec<String>,
    /// Readiness holds left out.
    #[serde(default)]
    pub readiness_holds_truncated: usize,
    /// The events the VM tracks (at most [`FLEET_RECORD_EVENTS_MAX`]).
    #[serde(default)]
    pub events: Vec<FleetEvent>,
    /// Events left out to keep the record small.
    #[serde(default)]
    pub events_truncated: usize,
    /// What `/health/scale-set` answers the scale set's Application Health extension; none
    /// in a record of a forewarn from before it (shown "unknown").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_set_health: Option<FleetScaleSetHealth>,
    /// The VM's last events that are over, from their outcome records, the newest first (at
    /// most [`FLEET_RECORD_OUTCOMES_MAX`]); none in a record of a forewarn from before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_outcomes: Vec<FleetOutcome>,
    /// When the record was written (ms since the Unix epoch, the VM's clock).
    pub published_at_unix_ms: u64,
}

/// One of a VM's last events, as its outcome record ended it: what the fleet view lists per
/// VM and sums up by event type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetOutcome {
    /// IMDS's EventId.
    pub id: String,
    /// IMDS's EventType as sent.
    pub event_type: String,
    /// When the daemon saw it gone (ms since the Unix epoch, IMDS's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_unix_ms: Option<u64>,
    /// How preparation went (`"preparation": "in-time", "before_ms": …`).
    #[serde(flatten)]
    pub preparation: PreparationOutcome,
    /// The impact measured inside the VM (`"impact": "pause", "milliseconds": …`).
    #[serde(flatten)]
    pub impact: FleetImpact,
    /// The record's verdict line, cut to [`FLEET_RECORD_VERDICT_MAX`].
    pub verdict: String,
}

/// An event's measured impact, as the fleet record carries it (the figure, not the method:
/// `forewarn events show` on the VM has that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "impact", rename_all = "kebab-case")]
pub enum FleetImpact {
    /// The VM was paused this long.
    Pause {
        /// Milliseconds.
        milliseconds: u64,
    },
    /// The VM was down this long.
    Downtime {
        /// Milliseconds.
        milliseconds: u64,
    },
    /// No pause over the heartbeat's threshold.
    NoPauseSeen,
    /// Not measured (the event did not start, the VM was evicted, …).
    NotMeasured,
}

impl FleetImpact {
    /// The impact of an outcome record (a pending one is not measured yet).
    pub fn of(impact: &Impact) -> FleetImpact {
        match impact {
            Impact::Pause(measured) => FleetImpact::Pause {
                milliseconds: measured.milliseconds,
            },
            Impact::Downtime(measured) => FleetImpact::Downtime {
                milliseconds: measured.milliseconds,
            },
            Impact::NoPauseSeen { .. } => FleetImpact::NoPauseSeen,
            Impact::Pending | Impact::NotMeasured { .. } => FleetImpact::NotMeasured,
        }
    }

    /// The figure in milliseconds: the pause or downtime, 0 for no pause seen, none when
    /// not measured.
    pub fn milliseconds(self) -> Option<u64> {
        match self {
            FleetImpact::Pause { milliseconds } | FleetImpact::Downtime { milliseconds } => {
                Some(milliseconds)
            }
            FleetImpact::NoPauseSeen => Some(0),
            FleetImpact::NotMeasured => None,
        }
    }

    /// In words, for the table and the page: "paused 3.5 s", "down 6.9 s", "no pause",
    /// "not measured".
    pub fn describe(self) -> String {
        let seconds = |milliseconds: u64| milliseconds as f64 / 1000.0;
        match self {
            FleetImpact::Pause { milliseconds } => format!("paused {:.1} s", seconds(milliseconds)),
            FleetImpact::Downtime { milliseconds } => {
                format!("down {:.1} s", seconds(milliseconds))
            }
            FleetImpact::NoPauseSeen => "no pause".into(),
            FleetImpact::NotMeasured => "not measured".into(),
        }
    }
}

/// The VM's last IMDS poll.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetImds {
    /// When the last poll was made (ms since the Unix epoch); none before the first one.
    pub last_poll_unix_ms: Option<u64>,
    /// Whether IMDS answered the last poll with a document.
    pub answered: bool,
}

/// A VM's scale-set health as its record carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetScaleSetHealth {
    /// The Rich Health States word: "Initializing", "Healthy" or "Unhealthy".
    pub state: String,
    /// While Unhealthy: why (at most [`FLEET_RECORD_REASONS_MAX`]).
    #[serde(default)]
    pub reasons: Vec<FleetHealthReason>,
}

/// One reason a VM is Unhealthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetHealthReason {
    /// Its code ("imds-unreachable", "journal-not-durable", …), what scripts key on.
    pub code: String,
    /// The reason in words as of the record's last write (cut to
    /// [`FLEET_RECORD_TEXT_MAX`]): the seconds in it are not a change worth a write.
    pub text: String,
}

impl FleetRecord {
    /// The scale-set health as the table and the page show it: "Healthy",
    /// "Unhealthy: imds-unreachable, …", or "unknown" for a record without it.
    pub fn scale_set_health_summary(&self) -> String {
        let Some(health) = &self.scale_set_health else {
            return "unknown".into();
        };
        if health.reasons.is_empty() {
            return health.state.clone();
        }
        let codes: Vec<&str> = health
            .reasons
            .iter()
            .map(|reason| reason.code.as_str())
            .collect();
        format!("{}: {}", health.state, codes.join(", "))
    }
}

/// One event a VM tracks, and where this VM stands on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetEvent {
    /// IMDS's EventId.
    pub id: String,
    /// IMDS's EventType as sent.
    pub event_type: String,
    /// IMDS's EventStatus as sent ("Scheduled", "Started").
    pub status: String,
    /// NotBefore as forewarn read it (RFC 3339, UTC); none when IMDS sent none or it could
    /// not be read.
    pub not_before: Option<String>,
    /// NotBefore as IMDS sent it, when forewarn could not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_raw: Option<String>,
    /// Where this VM stands on the event.
    pub stage: FleetStage,
    /// What holds this VM's approval (at most [`FLEET_RECORD_HOLDERS_MAX`]).
    #[serde(default)]
    pub holders: Vec<FleetHolder>,
    /// Holders left out.
    #[serde(default)]
    pub holders_truncated: usize,
}

/// Where a VM stands on an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FleetStage {
    /// Not for this VM (the policy ignores it).
    Ignored,
    /// Announced further ahead than `policy.prepare-lead-time`: no plugin asked yet.
    Scheduled,
    /// Plugins are preparing; some have not approved.
    Preparing,
    /// Every plugin approved; waiting on the etcd barrier for the other VMs.
    Ready,
    /// The approval is being sent to IMDS.
    Approving,
    /// The approval was sent.
    Approved,
    /// The approval is withheld (policy, dry run or given up).
    Withheld,
    /// The maintenance started.
    Started,
    /// The event is over; plugins recover.
    Recovering,
    /// The event is over.
    Ended,
}

impl FleetStage {
    /// The name the table and the page show ("preparing", …).
    pub fn as_str(self) -> &'static str {
        match self {
            FleetStage::Ignored => "ignored",
            FleetStage::Scheduled => "scheduled",
            FleetStage::Preparing => "preparing",
            FleetStage::Ready => "ready",
            FleetStage::Approving => "approving",
            FleetStage::Approved => "approved",
            FleetStage::Withheld => "withheld",
            FleetStage::Started => "started",
            FleetStage::Recovering => "recovering",
            FleetStage::Ended => "ended",
        }
    }
}

/// Something that holds a VM's approval of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetHolder {
    /// The plugin's name.
    pub plugin: PluginName,
    /// Why it holds.
    pub hold: FleetHold,
}

/// How a plugin holds an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FleetHold {
    /// It answered defer: it needs more time.
    Deferring,
    /// It was not asked yet, or has not answered.
    Pending,
    /// Its last call failed (trap, budget, memory): counted as a defer.
    Failed,
    /// It is in crash-loop quarantine under `on-failure = "hold"`.
    Quarantined,
}

impl FleetHold {
    /// The name the table and the page show.
    pub fn as_str(self) -> &'static str {
        match self {
            FleetHold::Deferring => "deferring",
            FleetHold::Pending => "pending",
            FleetHold::Failed => "failed",
            FleetHold::Quarantined => "quarantined",
        }
    }
}

/// Cuts `text` to [`FLEET_RECORD_TEXT_MAX`] characters (an ellipsis says it was cut).
pub fn bounded_text(text: &str) -> String {
    forewarn_events::cut_to_chars(text, FLEET_RECORD_TEXT_MAX)
}

impl FleetRecord {
    /// The record without what changes on every poll (its timestamps): what decides
    /// whether it must be written before [`FLEET_REFRESH_EVERY`].
    fn content(&self) -> FleetRecord {
        FleetRecord {
            published_at_unix_ms: 0,
            imds: FleetImds {
                last_poll_unix_ms: None,
                answered: self.imds.answered,
            },
            // A reason's words count the seconds it lasted: its code is what changes.
            scale_set_health: self
                .scale_set_health
                .as_ref()
                .map(|health| FleetScaleSetHealth {
                    state: health.state.clone(),
                    reasons: health
                        .reasons
                        .iter()
                        .map(|reason| FleetHealthReason {
                            code: reason.code.clone(),
                            text: String::new(),
                        })
                        .collect(),
                }),
            ..self.clone()
        }
    }

    /// Cuts the lists to their limits and every text to [`FLEET_RECORD_TEXT_MAX`].
    pub(crate) fn cut_lists(&mut self) {
        self.vm = bounded_text(&self.vm);
        self.version = bounded_text(&self.version);
        cut(
            &mut self.events,
            FLEET_RECORD_EVENTS_MAX,
            &mut self.events_truncated,
        );
        cut(
            &mut self.readiness_holds,
            FLEET_RECORD_HOLDERS_MAX,
            &mut self.readiness_holds_truncated,
        );
        for hold in &mut self.readiness_holds {
            *hold = bounded_text(hold);
        }
        self.last_outcomes.truncate(FLEET_RECORD_OUTCOMES_MAX);
        for outcome in &mut self.last_outcomes {
            outcome.id = bounded_text(&outcome.id);
            outcome.event_type = bounded_text(&outcome.event_type);
            outcome.verdict =
                forewarn_events::cut_to_chars(&outcome.verdict, FLEET_RECORD_VERDICT_MAX);
        }
        if let Some(health) = &mut self.scale_set_health {
            health.state = bounded_text(&health.state);
            health.reasons.truncate(FLEET_RECORD_REASONS_MAX);
            for reason in &mut health.reasons {
                reason.code = bounded_text(&reason.code);
                reason.text = bounded_text(&reason.text);
            }
        }
        for event in &mut self.events {
            event.id = bounded_text(&event.id);
            event.event_type = bounded_text(&event.event_type);
            event.status = bounded_text(&event.status);
            event.not_before = event.not_before.as_deref().map(bounded_text);
            event.not_before_raw = event.not_before_raw.as_deref().map(bounded_text);
            cut(
                &mut event.holders,
                FLEET_RECORD_HOLDERS_MAX,
                &mut event.holders_truncated,
            );
            for holder in &mut event.holders {
                holder.plugin = bounded_text(holder.plugin.as_str()).into();
            }
        }
    }

    /// The record as JSON of at most [`FLEET_RECORD_MAX_BYTES`]: lists cut to their limits,
    /// texts to [`FLEET_RECORD_TEXT_MAX`], then the oldest finished events left out (the
    /// past matters least), then the last events (counted in `events_truncated`), then
    /// readiness holds, then the health's reasons, until it fits. Returns the record as
    /// encoded.
    pub fn encode_bounded(mut self) -> (FleetRecord, String) {
        self.cut_lists();
        loop {
            let json = serde_json::to_string(&self).unwrap_or_default();
            if json.len() <= FLEET_RECORD_MAX_BYTES {
                return (self, json);
            }
            if self.last_outcomes.pop().is_some() {
                continue;
            }
            if self.events.pop().is_some() {
                self.events_truncated += 1;
                continue;
            }
            let held = self.readiness_holds.len();
            if held > 0 {
                self.readiness_holds.truncate(held / 2);
                self.readiness_holds_truncated += held - held / 2;
                continue;
            }
            // Then the health's last reasons (the state itself stays).
            if let Some(health) = &mut self.scale_set_health
                && health.reasons.pop().is_some()
            {
                continue;
            }
            // Every list is empty and every text bounded: it fits; this ends the loop anyway.
            return (self, json);
        }
    }
}

/// Keeps the first `max` of `items`, adding how many were dropped to `truncated`.
fn cut<T>(items: &mut Vec<T>, max: usize, truncated: &mut usize) {
    if items.len() > max {
        *truncated += items.len() - max;
        items.truncate(max);
    }
}

/// When to write the record: on a change (at most every [`FLEET_WRITE_MIN_INTERVAL`]),
/// under a new lease at once, and every [`FLEET_REFRESH_EVERY`] anyway. Pure: the caller
/// passes the time.
#[derive(Debug, Default)]
pub struct Throttle {
    /// The last write that succeeded: when, what (without timestamps), under which lease.
    written: Option<(Instant, FleetRecord, i64)>,
    /// The last write that failed: tried again after [`FLEET_WRITE_MIN_INTERVAL`].
    failed_at: Option<Instant>,
}

impl Throttle {
    /// When `record` should be written under `lease` (at or before `now`: at once).
    pub fn due_at(&self, record: &FleetRecord, lease: i64, now: Instant) -> Instant {
        let retry_at = self
            .failed_at
            .map_or(now, |failed| failed + FLEET_WRITE_MIN_INTERVAL);
        let Some((at, content, written_lease)) = &self.written else {
            return retry_at.max(now);
        };
        let due = if *written_lease != lease {
            now
        } else if *content != record.content() {
            *at + FLEET_WRITE_MIN_INTERVAL
        } else {
            *at + FLEET_REFRESH_EVERY
        };
        due.max(retry_at)
    }

    /// `record` was written under `lease` at `now`.
    pub fn wrote(&mut self, record: &FleetRecord, lease: i64, now: Instant) {
        self.written = Some((now, record.content(), lease));
        self.failed_at = None;
    }

    /// A write failed at `now`.
    pub fn failed(&mut self, now: Instant) {
        self.failed_at = Some(now);
    }
}

/// Writes this VM's record from `records` under the daemon's lease until `shutdown`.
/// `status` says the lease.
pub(super) fn spawn_publisher(
    inner: Arc<EtcdAccess>,
    status: watch::Receiver<CoordinationStatus>,
    records: watch::Receiver<Option<FleetRecord>>,
    shutdown: CancellationToken,
) {
    tokio::spawn(publish(inner, status, records, shutdown));
}

async fn publish(
    inner: Arc<EtcdAccess>,
    mut status: watch::Receiver<CoordinationStatus>,
    mut records: watch::Receiver<Option<FleetRecord>>,
    shutdown: CancellationToken,
) {
    let key = inner.fleet_key(&inner.vm);
    let mut throttle = Throttle::default();
    let mut failing = false;
    loop {
        let record = records.borrow_and_update().clone();
        let lease = status.borrow_and_update().lease_id;
        let mut wake_at = None;
        if let (Some(record), Some(lease)) = (record, lease) {
            let now = Instant::now();
            let due = throttle.due_at(&record, lease, now);
            if due <= now {
                // The throttle compares what the daemon offers next with what it offered
                // last, not with what was written: a record that had to be cut would
                // otherwise differ every time and be rewritten every 2 s.
                let offered = record.clone();
                let record = FleetRecord {
                    published_at_unix_ms: unix_ms(SystemTime::now()),
                    ..record
                };
                let (_, json) = record.encode_bounded();
                match inner.client.put(&key, &json, lease).await {
                    Ok(()) => {
                        if failing {
                            tracing::info!("this VM's fleet record is written to etcd again");
                        }
                        failing = false;
                        throttle.wrote(&offered, lease, Instant::now());
                    }
                    Err(error) => {
                        if !failing {
                            let error = error.describe("coordination");
                            tracing::warn!(%error, "{}", log_messages::FLEET_RECORD_WRITE_FAILED);
                        }
                        failing = true;
                        throttle.failed(Instant::now());
                    }
                }
                continue;
            }
            wake_at = Some(due);
        }
        let sleep = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = records.changed() => if changed.is_err() { return },
            changed = status.changed() => if changed.is_err() { return },
            () = sleep => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(events: usize, holders: usize, name_len: usize) -> FleetRecord {
        let name = "p".repeat(name_len);
        FleetRecord {
            schema: FLEET_RECORD_SCHEMA,
            vm: "vm-a".into(),
            version: "1.0.0".into(),
            imds: FleetImds {
                last_poll_unix_ms: Some(1_800_000_000_000),
                answered: true,
            },
            ready: holders == 0,
            readiness_holds: (0..holders).map(|i| format!("{name}{i}")).collect(),
            readiness_holds_truncated: 0,
            events: (0..events)
                .map(|i| FleetEvent {
                    id: format!("{}-{i}", "e".repeat(name_len)),
                    event_type: "Reboot".into(),
                    status: "Scheduled".into(),
                    not_before: Some("2027-01-15T08:00:00Z".into()),
                    not_before_raw: Some("x".repeat(name_len)),
                    stage: FleetStage::Preparing,
                    holders: (0..holders)
                        .map(|h| FleetHolder {
                            plugin: format!("{name}{h}").into(),
                            hold: FleetHold::Deferring,
                        })
                        .collect(),
                    holders_truncated: 0,
                })
                .collect(),
            events_truncated: 0,
            scale_set_health: None,
            last_outcomes: Vec::new(),
            published_at_unix_ms: 1_800_000_000_000,
        }
    }

    #[test]
    fn a_small_record_is_written_whole() {
        let small = record(2, 2, 8);
        let (written, json) = small.clone().encode_bounded();
        assert_eq!(written, small);
        let back: FleetRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, small);
    }

    /// Hundreds of events with long ids, each held by many plugins with long names, still
    /// make a record of at most the cap, saying what it left out.
    #[test]
    fn a_huge_status_makes_a_record_within_the_cap() {
        let huge = record(300, 60, 2_000);
        let (written, json) = huge.encode_bounded();
        assert!(json.len() <= FLEET_RECORD_MAX_BYTES, "{} bytes", json.len());
        assert!(!written.events.is_empty(), "some events are kept");
        assert_eq!(written.events.len() + written.events_truncated, 300);
        assert_eq!(
            written.readiness_holds.len() + written.readiness_holds_truncated,
            60
        );
        for event in &written.events {
            assert_eq!(event.holders.len(), FLEET_RECORD_HOLDERS_MAX);
            assert_eq!(event.holders_truncated, 60 - FLEET_RECORD_HOLDERS_MAX);
            assert!(event.id.chars().count() <= FLEET_RECORD_TEXT_MAX + 1);
        }
        let back: FleetRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, written);
    }

    /// A record written by a forewarn from before the scale-set health reads back without
    /// it, shown "unknown"; one with it says the state and the reasons' codes.
    #[test]
    fn the_scale_set_health_is_optional_in_the_record_and_summarised_by_its_codes() {
        let mut older = serde_json::to_value(record(1, 0, 4)).unwrap();
        assert!(older.get("scale_set_health").is_none());
        older.as_object_mut().unwrap().remove("scale_set_health");
        let older: FleetRecord = serde_json::from_value(older).unwrap();
        assert_eq!(older.scale_set_health, None);
        assert_eq!(older.scale_set_health_summary(), "unknown");
        let mut unhealthy = record(1, 0, 4);
        unhealthy.scale_set_health = Some(FleetScaleSetHealth {
            state: "Unhealthy".into(),
            reasons: ["imds-unreachable", "journal-not-durable"]
                .into_iter()
                .map(|code| FleetHealthReason {
                    code: code.into(),
                    text: "x".repeat(500),
                })
                .collect(),
        });
        assert_eq!(
            unhealthy.scale_set_health_summary(),
            "Unhealthy: imds-unreachable, journal-not-durable"
        );
        let (written, _) = unhealthy.encode_bounded();
        let reasons = &written.scale_set_health.as_ref().unwrap().reasons;
        assert!(reasons[0].text.chars().count() <= FLEET_RECORD_TEXT_MAX + 1);
    }

    /// The seconds a reason's words count change no record: its code does.
    #[test]
    fn a_reason_whose_words_alone_change_waits_for_the_refresh() {
        let start = Instant::now();
        let with_reason = |code: &str, text: &str| FleetRecord {
            scale_set_health: Some(FleetScaleSetHealth {
                state: "Unhealthy".into(),
                reasons: vec![FleetHealthReason {
                    code: code.into(),
                    text: text.into(),
                }],
            }),
            ..record(1, 0, 4)
        };
        let mut throttle = Throttle::default();
        throttle.wrote(&with_reason("imds-unreachable", "for 31s"), 7, start);
        assert_eq!(
            throttle.due_at(&with_reason("imds-unreachable", "for 40s"), 7, start),
            start + FLEET_REFRESH_EVERY
        );
        assert_eq!(
            throttle.due_at(&with_reason("journal-not-durable", "for 40s"), 7, start),
            start + FLEET_WRITE_MIN_INTERVAL
        );
    }

    #[test]
    fn the_throttle_writes_changes_at_most_every_two_seconds_and_refreshes_every_thirty() {
        let start = Instant::now();
        let at = |seconds: f64| start + Duration::from_secs_f64(seconds);
        let mut throttle = Throttle::default();
        let first = record(1, 1, 4);
        // Never written: at once.
        assert_eq!(throttle.due_at(&first, 7, at(0.0)), at(0.0));
        throttle.wrote(&first, 7, at(0.0));
        // A new poll (only timestamps change): not before the refresh.
        let polled = FleetRecord {
            imds: FleetImds {
                last_poll_unix_ms: Some(1_800_000_001_000),
                answered: true,
            },
            published_at_unix_ms: 1_800_000_001_000,
            ..first.clone()
        };
        assert_eq!(throttle.due_at(&polled, 7, at(1.0)), at(30.0));
        // A change: two seconds after the last write, not at once.
        let changed = record(1, 0, 4);
        assert_eq!(throttle.due_at(&changed, 7, at(0.5)), at(2.0));
        assert_eq!(throttle.due_at(&changed, 7, at(5.0)), at(5.0));
        // IMDS stopped answering: a change.
        let silent = FleetRecord {
            imds: FleetImds {
                last_poll_unix_ms: Some(1_800_000_001_000),
                answered: false,
            },
            ..first.clone()
        };
        assert_eq!(throttle.due_at(&silent, 7, at(1.0)), at(2.0));
        // A new lease (the old one expired with the key): at once.
        assert_eq!(throttle.due_at(&polled, 8, at(1.0)), at(1.0));
        // A failed write is tried again two seconds later, not in a loop.
        throttle.failed(at(1.0));
        assert_eq!(throttle.due_at(&polled, 8, at(1.5)), at(3.0));
        throttle.wrote(&polled, 8, at(3.0));
        assert_eq!(throttle.due_at(&polled, 8, at(3.5)), at(33.0));
    }
}
