//! Reading the fleet for `GET /status/fleet`: every VM's record under `PREFIX/fleet/`, read
//! by range in pages of [`FLEET_PAGE`] at most every [`FLEET_READ_EVERY`] while someone asks
//! (the answer is cached in between), and at most [`FLEET_VMS_MAX`] VMs. A VM this daemon saw
//! publishing whose key has since disappeared (its daemon stopped renewing its lease) is
//! shown as gone, with since when, for [`FLEET_GONE_KEPT`] ([`Seen`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::fleet_record::{FLEET_RECORD_MAX_BYTES, FLEET_RECORD_SCHEMA, FleetRecord, bounded_text};
use crate::etcd_access::EtcdAccess;
use crate::fleet_impact::ImpactByType;
use forewarn_etcd::EtcdError;
use forewarn_imds::unix_ms;

/// The most VMs one answer lists (the range read stops there; `truncated` says so).
pub const FLEET_VMS_MAX: usize = 1000;
/// Keys read per range request (at most 4 KiB each: well under the client's answer limit).
pub const FLEET_PAGE: usize = 200;
/// etcd is read at most this often; requests in between get the cached answer.
pub const FLEET_READ_EVERY: Duration = Duration::from_secs(2);
/// A record last written longer ago than this (four of its 30 s refreshes, on the writer's
/// clock against the reader's) is shown stale.
pub const FLEET_RECORD_STALE_AFTER: Duration = Duration::from_secs(120);
/// How long a VM whose record disappeared is still shown, as gone.
pub const FLEET_GONE_KEPT: Duration = Duration::from_secs(3600);

/// What `GET /status/fleet` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetView {
    /// This VM's name (lower case).
    pub vm: String,
    /// `coordination.prefix`: the records are under `PREFIX/fleet/`.
    pub prefix: String,
    /// When etcd was last read successfully (ms since the Unix epoch); none before.
    pub read_at_unix_ms: Option<u64>,
    /// The last read's error, while reads fail (the VMs are those of the last good read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every VM, by name: publishing, gone, or with a record forewarn cannot read.
    pub vms: Vec<FleetVm>,
    /// [`FLEET_VMS_MAX`]: the most VMs read.
    pub vms_max: usize,
    /// etcd holds more records than [`FLEET_VMS_MAX`]: the VMs after the last listed are
    /// left out.
    #[serde(default)]
    pub truncated: bool,
    /// The disruption budget of this VM's group as this VM last read it (slots, holders, the
    /// queue), when `coordination.disruption-budget` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::disruption_slots::BudgetStatus>,
    /// What maintenance cost, by event type, over the last events every VM's record lists.
    #[serde(default)]
    pub impact_by_type: Vec<ImpactByType>,
}

/// One VM of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetVm {
    /// The VM's name, from its key.
    pub vm: String,
    /// Whether its record is in etcd now.
    pub state: FleetVmState,
    /// Since when it is gone (ms since the Unix epoch): when this daemon first read etcd
    /// without its record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_since_unix_ms: Option<u64>,
    /// Its record (the last one read, for a gone VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<FleetRecord>,
    /// Why its record cannot be read (another schema, not JSON), cut to about 100 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Whether a VM publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FleetVmState {
    /// Its record is in etcd: its daemon holds its lease.
    Publishing,
    /// Its record is in etcd but was last written more than [`FLEET_RECORD_STALE_AFTER`]
    /// ago: its daemon keeps its lease but cannot write the record (or its clock is far off).
    Stale,
    /// Its record is in etcd but cannot be read (another forewarn version, or not forewarn's).
    Unreadable,
    /// Its record disappeared: its daemon stopped renewing its lease (stopped, crashed, cut
    /// off from etcd) for longer than `coordination.lease-ttl`.
    Gone,
}

impl FleetVmState {
    /// The name the table and the page show.
    pub fn as_str(self) -> &'static str {
        match self {
            FleetVmState::Publishing => "publishing",
            FleetVmState::Stale => "stale",
            FleetVmState::Unreadable => "unreadable",
            FleetVmState::Gone => "gone",
        }
    }
}

/// A VM whose record was read at `now_ms`: publishing, or stale when its record is older
/// than [`FLEET_RECORD_STALE_AFTER`] (with how old, as its problem).
fn publishing_or_stale(vm: String, record: FleetRecord, now_ms: u64) -> FleetVm {
    let age_ms = now_ms.saturating_sub(record.published_at_unix_ms);
    let stale = age_ms > FLEET_RECORD_STALE_AFTER.as_millis() as u64;
    FleetVm {
        vm,
        state: match stale {
            true => FleetVmState::Stale,
            false => FleetVmState::Publishing,
        },
        gone_since_unix_ms: None,
        record: Some(record),
        problem: stale.then(|| {
            format!(
                "its record was last written {} s ago: its daemon holds its lease but cannot \
                 write the record (its log says why), or its clock is off",
                age_ms / 1000
            )
        }),
    }
}

/// One range read: each VM's record (or why it cannot be read), and whether etcd holds more.
#[derive(Debug, Default)]
pub struct FleetRead {
    /// VM name → its record.
    pub records: BTreeMap<String, Result<FleetRecord, UnreadableRecord>>,
    /// More records than [`FLEET_VMS_MAX`]: VMs sorting after the last one were not read.
    pub truncated: bool,
}

/// The VMs seen so far, with those gone. Pure: the caller passes the time.
#[derive(Debug, Default)]
pub struct Seen {
    vms: BTreeMap<String, FleetVm>,
    truncated: bool,
}

impl Seen {
    /// Takes in a read made at `now_ms`: VMs read publish, VMs seen before and missing are
    /// gone (since now, or since they first went missing), gone VMs older than
    /// [`FLEET_GONE_KEPT`] are dropped.
    pub fn update(&mut self, read: FleetRead, now_ms: u64) {
        let last_read = read.records.keys().next_back().cloned();
        for (name, vm) in &mut self.vms {
            if read.records.contains_key(name) || vm.state == FleetVmState::Gone {
                continue;
            }
            // A truncated read did not reach the names after its last one.
            if read.truncated && last_read.as_ref().is_none_or(|last| name > last) {
                continue;
            }
            vm.state = FleetVmState::Gone;
            vm.gone_since_unix_ms = Some(now_ms);
        }
        let kept = FLEET_GONE_KEPT.as_millis() as u64;
        self.vms.retain(|_, vm| {
            vm.gone_since_unix_ms
                .is_none_or(|since| now_ms.saturating_sub(since) < kept)
        });
        for (name, record) in read.records {
            let vm = match record {
                Ok(record) => publishing_or_stale(name.clone(), record, now_ms),
                Err(problem) => FleetVm {
                    vm: name.clone(),
                    state: FleetVmState::Unreadable,
                    gone_since_unix_ms: None,
                    record: None,
                    problem: Some(problem.to_string()),
                },
            };
            self.vms.insert(name, vm);
        }
        self.truncated = read.truncated;
        self.bound();
    }

    /// Keeps at most twice [`FLEET_VMS_MAX`] VMs: the gone ones longest gone go first.
    fn bound(&mut self) {
        let max = 2 * FLEET_VMS_MAX;
        while self.vms.len() > max {
            let oldest = self
                .vms
                .iter()
                .filter_map(|(name, vm)| vm.gone_since_unix_ms.map(|since| (since, name)))
                .min()
                .map(|(_, name)| name.clone());
            match oldest {
                Some(name) => self.vms.remove(&name),
                None => return,
            };
        }
    }

    /// Every VM, by name.
    pub fn vms(&self) -> Vec<FleetVm> {
        self.vms.values().cloned().collect()
    }
}

/// Why another VM's fleet record is not shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnreadableRecord {
    /// Larger than a forewarn writes: not parsed at all.
    #[error(
        "a record of {bytes} bytes, more than the {FLEET_RECORD_MAX_BYTES} a forewarn writes: not shown"
    )]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// A record of another schema (another forewarn version).
    #[error(
        "a record of schema {schema} (this forewarn reads schema {FLEET_RECORD_SCHEMA}): upgrade forewarn on this VM or on that one"
    )]
    OtherSchema {
        /// The schema it says it is.
        schema: u32,
    },
    /// Not JSON of a fleet record; the parser's words, cut.
    #[error("not a forewarn fleet record ({0})")]
    NotARecord(String),
}

/// Reads one record: JSON of [`FLEET_RECORD_SCHEMA`], or why not.
pub fn parse_record(value: &str) -> Result<FleetRecord, UnreadableRecord> {
    // Another VM wrote it: held to the bounds a forewarn writes within, whatever it holds.
    if value.len() > FLEET_RECORD_MAX_BYTES {
        return Err(UnreadableRecord::TooLarge { bytes: value.len() });
    }
    match serde_json::from_str::<FleetRecord>(value) {
        Ok(mut record) if record.schema == FLEET_RECORD_SCHEMA => {
            record.cut_lists();
            Ok(record)
        }
        Ok(record) => Err(UnreadableRecord::OtherSchema {
            schema: record.schema,
        }),
        Err(error) => Err(UnreadableRecord::NotARecord(bounded_text(
            &error.to_string(),
        ))),
    }
}

/// The handle `/status/fleet` reads through; cheap to clone.
#[derive(Clone)]
pub struct FleetReader {
    inner: Arc<EtcdAccess>,
    cache: Arc<Mutex<Cache>>,
}

#[derive(Default)]
struct Cache {
    seen: Seen,
    /// When etcd was last asked (read or failed).
    asked_at: Option<Instant>,
    /// A read is under way (at most one at a time).
    reading: bool,
    read_at_unix_ms: Option<u64>,
    error: Option<String>,
}

impl Cache {
    /// Whether a read should start now: none under way, and the last one older than
    /// [`FLEET_READ_EVERY`] (or none yet). Marks it under way when so.
    fn start_read(&mut self, now: Instant) -> bool {
        let fresh = self
            .asked_at
            .is_some_and(|at| now.duration_since(at) < FLEET_READ_EVERY);
        if self.reading || fresh {
            return false;
        }
        self.reading = true;
        true
    }

    /// Takes in the read that ended at `now` (`now_ms`): its VMs, or its error (described
    /// with the keys of `[coordination]`) beside the VMs of the last good read.
    fn finish_read(&mut self, outcome: Result<FleetRead, EtcdError>, now: Instant, now_ms: u64) {
        self.reading = false;
        self.asked_at = Some(now);
        match outcome {
            Ok(read) => {
                self.seen.update(read, now_ms);
                self.read_at_unix_ms = Some(now_ms);
                self.error = None;
            }
            Err(error) => self.error = Some(error.describe("coordination")),
        }
    }
}

/// How long the first request waits for the first read before answering without VMs. Later
/// requests never wait: they get the last read (`read_at_unix_ms` says how old) while a new
/// one runs in the background, so a slow etcd (12 s with every endpoint down) never holds
/// `/status/fleet`, nor stacks up reads.
pub const FLEET_FIRST_READ_WAIT: Duration = Duration::from_secs(3);

impl FleetReader {
    pub(super) fn new(inner: Arc<EtcdAccess>) -> FleetReader {
        FleetReader {
            inner,
            cache: Arc::default(),
        }
    }

    /// The fleet as of the last read; starts a read in the background when the last one is
    /// older than [`FLEET_READ_EVERY`] and none is under way. Only before the first read has
    /// ended does a request wait for it, at most [`FLEET_FIRST_READ_WAIT`].
    pub async fn view(&self) -> FleetView {
        let (start, never_read) = {
            let mut cache = self.cache_lock();
            (cache.start_read(Instant::now()), cache.asked_at.is_none())
        };
        if start {
            let reader = self.clone();
            let read = tokio::spawn(async move {
                let outcome = reader.read().await;
                let now_ms = unix_ms(SystemTime::now());
                reader
                    .cache_lock()
                    .finish_read(outcome, Instant::now(), now_ms);
            });
            if never_read {
                let _ = tokio::time::timeout(FLEET_FIRST_READ_WAIT, read).await;
            }
        }
        self.snapshot()
    }

    fn snapshot(&self) -> FleetView {
        let cache = self.cache_lock();
        let vms = cache.seen.vms();
        FleetView {
            vm: self.inner.vm.clone(),
            prefix: self.inner.config.prefix.clone(),
            read_at_unix_ms: cache.read_at_unix_ms,
            error: cache.error.clone(),
            impact_by_type: ImpactByType::of_fleet(&vms),
            vms,
            vms_max: FLEET_VMS_MAX,
            truncated: cache.seen.truncated,
            budget: None,
        }
    }

    /// The cache; a panic elsewhere while it was held leaves data that is still whole.
    fn cache_lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every record under `PREFIX/fleet/`, in pages, up to [`FLEET_VMS_MAX`].
    async fn read(&self) -> Result<FleetRead, EtcdError> {
        let prefix = self.inner.fleet_prefix();
        let mut read = FleetRead::default();
        let mut after: Option<String> = None;
        loop {
            let room = FLEET_VMS_MAX - read.records.len();
            let (page, more) = self
                .inner
                .client
                .list_page(&prefix, after.as_deref(), FLEET_PAGE.min(room))
                .await?;
            after = page.last().map(|kv| kv.key.clone());
            for kv in page {
                let Some(vm) = kv.key.strip_prefix(&prefix) else {
                    continue;
                };
                read.records
                    .insert(bounded_text(vm), parse_record(&kv.value));
            }
            if !more || after.is_none() {
                return Ok(read);
            }
            if read.records.len() >= FLEET_VMS_MAX {
                read.truncated = true;
                return Ok(read);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet_record::FleetImds;

    fn record(vm: &str) -> FleetRecord {
        FleetRecord {
            schema: FLEET_RECORD_SCHEMA,
            vm: vm.into(),
            version: "1".into(),
            imds: FleetImds::default(),
            ready: true,
            readiness_holds: Vec::new(),
            readiness_holds_truncated: 0,
            events: Vec::new(),
            events_truncated: 0,
            scale_set_health: None,
            // Written "in the future": never stale in the tests that are not about it.
            last_outcomes: Vec::new(),
            published_at_unix_ms: u64::MAX,
        }
    }

    #[test]
    fn a_record_from_another_vm_is_held_to_the_bounds_a_forewarn_writes_within() {
        // Over the byte cap: not parsed at all.
        let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(FLEET_RECORD_MAX_BYTES));
        let refused = parse_record(&huge)
            .expect_err("a record over the cap")
            .to_string();
        assert!(refused.contains("more than the 4096"), "{refused}");
        // Within the cap but with more readiness holds than a forewarn lists: cut on read.
        let mut many = record("vm-evil");
        many.readiness_holds = (0..40).map(|n| format!("p{n}")).collect();
        let text = serde_json::to_string(&many).expect("encode");
        assert!(text.len() <= FLEET_RECORD_MAX_BYTES, "{} bytes", text.len());
        let parsed = parse_record(&text).expect("a readable record");
        assert_eq!(parsed.readiness_holds.len(), 8);
        assert_eq!(parsed.readiness_holds_truncated, 32);
    }

    fn read(vms: &[&str]) -> FleetRead {
        FleetRead {
            records: vms
                .iter()
                .map(|vm| ((*vm).to_owned(), Ok(record(vm))))
                .collect(),
            truncated: false,
        }
    }

    fn states(seen: &Seen) -> Vec<(String, &'static str, Option<u64>)> {
        seen.vms()
            .into_iter()
            .map(|vm| (vm.vm, vm.state.as_str(), vm.gone_since_unix_ms))
            .collect()
    }

    #[test]
    fn a_vm_whose_record_disappears_is_gone_since_then_for_an_hour() {
        let mut seen = Seen::default();
        seen.update(read(&["vm-a", "vm-b"]), 1_000);
        seen.update(read(&["vm-a"]), 2_000);
        seen.update(read(&["vm-a"]), 3_000);
        assert_eq!(
            states(&seen),
            [
                ("vm-a".into(), "publishing", None),
                ("vm-b".into(), "gone", Some(2_000)),
            ]
        );
        // Its last record is kept, to show where it stood.
        assert!(seen.vms()[1].record.is_some());
        // Back: publishing again.
        seen.update(read(&["vm-a", "vm-b"]), 4_000);
        assert_eq!(states(&seen)[1], ("vm-b".into(), "publishing", None));
        // Gone for an hour: dropped.
        seen.update(read(&["vm-a"]), 5_000);
        seen.update(read(&["vm-a"]), 5_000 + 3_600_000);
        assert_eq!(states(&seen), [("vm-a".into(), "publishing", None)]);
    }

    #[test]
    fn a_truncated_read_does_not_make_the_vms_after_it_gone() {
        let mut seen = Seen::default();
        seen.update(read(&["vm-a", "vm-b", "vm-c"]), 1_000);
        let mut truncated = read(&["vm-b"]);
        truncated.truncated = true;
        seen.update(truncated, 2_000);
        assert_eq!(
            states(&seen),
            [
                ("vm-a".into(), "gone", Some(2_000)),
                ("vm-b".into(), "publishing", None),
                ("vm-c".into(), "publishing", None),
            ]
        );
    }

    #[test]
    fn one_read_at_a_time_and_a_failed_one_keeps_the_last_vms() {
        let t0 = Instant::now();
        let mut cache = Cache::default();
        assert!(cache.start_read(t0), "no read yet: one starts");
        // etcd is slow: requests meanwhile answer from the cache and start no second read,
        // however long it takes.
        for later in [1, 2, 30] {
            assert!(
                !cache.start_read(t0 + Duration::from_secs(later)),
                "{later} s"
            );
        }
        cache.finish_read(
            Ok(read(&["vm-a", "vm-b"])),
            t0 + Duration::from_secs(30),
            1_000,
        );
        assert!(
            !cache.start_read(t0 + Duration::from_secs(31)),
            "fresh for 2 s"
        );
        assert!(cache.start_read(t0 + Duration::from_secs(32)));
        let timed_out = EtcdError::Unreachable {
            endpoint: "http://a:2379".into(),
            message: "timed out".into(),
            certificate: false,
        };
        cache.finish_read(Err(timed_out), t0 + Duration::from_secs(40), 2_000);
        assert_eq!(
            cache.error.as_deref(),
            Some(
                "cannot reach etcd at http://a:2379: timed out (is etcd running, and is \
                 `coordination.endpoints` right?)"
            )
        );
        assert_eq!(
            cache.read_at_unix_ms,
            Some(1_000),
            "the last good read's time"
        );
        assert_eq!(cache.seen.vms().len(), 2, "the last good read's VMs");
    }

    #[test]
    fn a_record_not_rewritten_for_two_minutes_is_stale_not_publishing() {
        let mut seen = Seen::default();
        let mut old = record("vm-a");
        old.published_at_unix_ms = 1_000_000;
        let mut new = record("vm-b");
        new.published_at_unix_ms = 1_000_000 + 100_000;
        let read = FleetRead {
            records: [("vm-a".to_owned(), Ok(old)), ("vm-b".to_owned(), Ok(new))].into(),
            truncated: false,
        };
        seen.update(read, 1_000_000 + 121_000);
        let states: Vec<_> = seen
            .vms()
            .iter()
            .map(|vm| (vm.vm.clone(), vm.state))
            .collect();
        assert_eq!(
            states,
            [
                ("vm-a".to_owned(), FleetVmState::Stale),
                ("vm-b".to_owned(), FleetVmState::Publishing)
            ]
        );
        let problem = seen.vms()[0].problem.clone().unwrap_or_default();
        assert!(problem.contains("121 s ago"), "{problem}");
    }

    #[test]
    fn a_record_of_another_schema_or_not_json_says_so() {
        let other = serde_json::to_string(&FleetRecord {
            schema: 99,
            ..record("vm-a")
        })
        .unwrap();
        assert!(
            parse_record(&other)
                .unwrap_err()
                .to_string()
                .contains("schema 99")
        );
        assert!(
            parse_record("<html>")
                .unwrap_err()
                .to_string()
                .starts_with("not a forewarn fleet record")
        );
        let good = serde_json::to_string(&record("vm-a")).unwrap();
        assert_eq!(parse_record(&good), Ok(record("vm-a")));
    }
}
