//! IMDS's clock as the VM sees it. Every answer's `Date` header bounds where Azure's clock
//! stood while the request was out: at least the second the header names, less the time
//! the answer took to come back. The bounds of recent answers, intersected, pin Azure's
//! clock to an interval, anchored to the VM's monotonic clock; "now on IMDS's clock" is the
//! VM's wall clock when it lies in that interval, else the nearest end of it. So a VM whose
//! clock is right is never corrected, one whose clock is off is corrected as far as IMDS's
//! answers prove, and a step of the VM's wall clock between two answers changes nothing.
//!
//! An answer that contradicts the ones before (the VM was paused by a Freeze, a clock was
//! stepped) keeps only the answers since: the estimate follows within one poll.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use forewarn_events::ImdsTime;

/// How stale a `Date` header may be, on top of naming a whole second: servers render it
/// at most once a second and reuse it (hyper does), so the second it names began up to two
/// seconds before the answer was made.
const DATE_STALENESS_MS: i64 = 1_000;
/// Answers whose bounds are intersected: the newest this many…
const SAMPLES_KEPT: usize = 64;
/// …and none older than this (so a slow drift of either clock is followed).
const SAMPLE_MAX_AGE: Duration = Duration::from_secs(600);
/// The largest offset believed: a `Date` header further off the VM's clock than this is
/// taken to be wrong, not the VM's clock, and no correction is made (said once, as an error).
pub const MAX_CLOCK_OFFSET: Duration = Duration::from_secs(3600);
/// An offset at least this large is logged (once, until it falls below half of it again).
pub const CLOCK_OFFSET_LOGGED: Duration = Duration::from_secs(2);

/// How far IMDS's clock is from the VM's, as estimated from IMDS's `Date` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClockSkew {
    /// IMDS's clock minus the VM's wall clock, in milliseconds, as corrected: positive when
    /// the VM's clock is behind (deadlines come that much sooner than it says), 0 when the
    /// VM's clock agrees with every answer.
    pub offset_ms: i64,
    /// IMDS's clock lies within this many milliseconds of the estimate either way, as far
    /// as the answers kept pin it.
    pub uncertainty_ms: u64,
    /// Answers the estimate rests on (since the last one that contradicted the others).
    pub samples: usize,
    /// The `Date` headers put IMDS more than [`MAX_CLOCK_OFFSET`] off the VM's clock: not
    /// believed, so deadlines are planned on the VM's own clock.
    pub beyond_bound: bool,
}

/// One answer's evidence: Azure's clock, read at a monotonic instant between `sent` and
/// `received` (ms since the estimator's base), named the second `date_ms` (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DateSample {
    pub(crate) sent_ms: i64,
    pub(crate) received_ms: i64,
    pub(crate) date_ms: i64,
}

/// The bounds one answer puts on Azure's clock at the monotonic base (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    low: i64,
    high: i64,
    received_ms: i64,
}

/// The arithmetic, on plain milliseconds so it can be tested without clocks.
#[derive(Debug, Default)]
pub(crate) struct SkewEstimator {
    samples: VecDeque<Bounds>,
    /// The intersection of the samples kept (Azure's clock at the base), and how many.
    pinned: Option<(i64, i64, usize)>,
    logged_large: bool,
    logged_beyond: bool,
}

impl SkewEstimator {
    /// Takes one answer's evidence: keeps it with the answers it agrees with, drops those
    /// older than the first it contradicts, and those too old.
    pub(crate) fn add(&mut self, sample: DateSample) {
        let bounds = Bounds {
            low: sample.date_ms - sample.received_ms,
            high: sample.date_ms + 1_000 + DATE_STALENESS_MS - sample.sent_ms,
            received_ms: sample.received_ms,
        };
        self.samples.push_front(bounds);
        let max_age = i64::try_from(SAMPLE_MAX_AGE.as_millis()).unwrap_or(i64::MAX);
        let (mut low, mut high) = (bounds.low, bounds.high);
        let mut kept = 0;
        for older in &self.samples {
            let fits = older.low.max(low) <= older.high.min(high);
            if !fits || sample.received_ms - older.received_ms > max_age || kept == SAMPLES_KEPT {
                break;
            }
            low = low.max(older.low);
            high = high.min(older.high);
            kept += 1;
        }
        self.samples.truncate(kept);
        self.pinned = Some((low, high, kept));
    }

    /// Azure's clock at monotonic `mono_ms` and the VM's wall clock then (Unix ms): the
    /// correction to add to the wall clock, and the skew for status. None before any answer.
    pub(crate) fn skew(&self, mono_ms: i64, wall_ms: i64) -> Option<ClockSkew> {
        let (low, high, samples) = self.pinned?;
        let earliest = low + mono_ms - wall_ms;
        let latest = high + mono_ms - wall_ms;
        let offset = 0_i64.clamp(earliest, latest);
        let bound = i64::try_from(MAX_CLOCK_OFFSET.as_millis()).unwrap_or(i64::MAX);
        let beyond_bound = offset.abs() > bound;
        Some(ClockSkew {
            offset_ms: if beyond_bound { 0 } else { offset },
            uncertainty_ms: u64::try_from((latest - earliest) / 2).unwrap_or(0),
            samples,
            beyond_bound,
        })
    }

    /// Logs a large or unbelievable skew once (again after it went away).
    fn log(&mut self, skew: ClockSkew, raw_offset_ms: i64) {
        let logged = i64::try_from(CLOCK_OFFSET_LOGGED.as_millis()).unwrap_or(i64::MAX);
        if skew.beyond_bound && !self.logged_beyond {
            tracing::error!(
                offset_ms = raw_offset_ms,
                "IMDS's Date header is more than an hour off this VM's clock; forewarn does not believe it and plans deadlines on the VM's clock: check the VM's time sync (chronyc tracking)"
            );
        }
        self.logged_beyond = skew.beyond_bound;
        let large = skew.offset_ms.abs() >= logged;
        if large && !self.logged_large {
            let (how, by) = match skew.offset_ms {
                ahead if ahead > 0 => ("behind", ahead),
                behind => ("ahead of", -behind),
            };
            tracing::warn!(
                offset_ms = skew.offset_ms,
                uncertainty_ms = skew.uncertainty_ms,
                "this VM's clock is {:.1} s {how} IMDS's; forewarn plans every deadline on IMDS's clock (check the VM's time sync: chronyc tracking)",
                by as f64 / 1000.0
            );
        }
        if large {
            self.logged_large = true;
        } else if skew.offset_ms.abs() < logged / 2 {
            self.logged_large = false;
        }
    }
}

/// IMDS's clock, estimated from the `Date` headers of its answers. Cheap to clone; clones
/// share the estimate. The client feeds it every answer.
#[derive(Debug, Clone)]
pub struct ImdsClock {
    inner: Arc<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    /// The monotonic instant the estimator's milliseconds count from.
    base: Instant,
    estimator: Mutex<SkewEstimator>,
}

impl Default for ImdsClock {
    fn default() -> ImdsClock {
        ImdsClock::new()
    }
}

impl ImdsClock {
    /// A clock that has seen no answer yet (it reads the VM's wall clock).
    pub fn new() -> ImdsClock {
        ImdsClock {
            inner: Arc::new(ClockState {
                base: Instant::now(),
                estimator: Mutex::new(SkewEstimator::default()),
            }),
        }
    }

    /// Now, on IMDS's clock: the VM's wall clock, corrected as far as IMDS's answers show it
    /// is off (within [`MAX_CLOCK_OFFSET`]). The VM's wall clock until IMDS sent a `Date`.
    pub fn now(&self) -> ImdsTime {
        let wall = SystemTime::now();
        let Some(skew) = self.skew_at(Instant::now(), wall) else {
            return ImdsTime::from(wall);
        };
        ImdsTime::from(shift(wall, skew.offset_ms))
    }

    /// How far IMDS's clock is from the VM's now; None until IMDS sent a `Date` header.
    pub fn skew(&self) -> Option<ClockSkew> {
        self.skew_at(Instant::now(), SystemTime::now())
    }

    /// Takes the `Date` header of an answer to a request sent at `sent` and answered at
    /// `received` (monotonic instants).
    pub(crate) fn observe(&self, sent: Instant, received: Instant, date: SystemTime) {
        let sample = DateSample {
            sent_ms: self.mono_ms(sent),
            received_ms: self.mono_ms(received),
            date_ms: unix_ms(date),
        };
        let mut estimator = self.lock();
        estimator.add(sample);
        let wall = SystemTime::now();
        let mono = self.mono_ms(Instant::now());
        if let Some(skew) = estimator.skew(mono, unix_ms(wall)) {
            let raw = estimator
                .pinned
                .map_or(0, |(low, _, _)| low + mono - unix_ms(wall));
            estimator.log(skew, raw);
        }
    }

    fn skew_at(&self, at: Instant, wall: SystemTime) -> Option<ClockSkew> {
        self.lock().skew(self.mono_ms(at), unix_ms(wall))
    }

    fn mono_ms(&self, at: Instant) -> i64 {
        let since = at.saturating_duration_since(self.inner.base);
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, SkewEstimator> {
        // The estimator is plain arithmetic: a panic mid-update leaves nothing half-done
        // that matters more than reading the wall clock would.
        self.inner
            .estimator
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `time` moved by `ms` milliseconds (either way): the VM's clock on IMDS's, given IMDS's
/// offset; `time` itself when the result cannot be represented.
pub fn shift(time: SystemTime, ms: i64) -> SystemTime {
    let by = Duration::from_millis(ms.unsigned_abs());
    let moved = if ms >= 0 {
        time.checked_add(by)
    } else {
        time.checked_sub(by)
    };
    moved.unwrap_or(time)
}

/// Milliseconds since the Unix epoch, negative before it.
fn unix_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Reads an HTTP `Date` header ("Mon, 11 Apr 2022 22:26:58 GMT").
pub(crate) fn parse_date_header(text: &str) -> Option<SystemTime> {
    chrono::DateTime::parse_from_rfc2822(text.trim())
        .ok()
        .map(|time| SystemTime::from(time.to_utc()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of a wall instant well after the epoch.
    const T0: i64 = 1_700_000_000_000;

    /// An answer sent at monotonic `at` ms, back `rtt` ms later, from a server whose clock is
    /// `offset` ms ahead of a VM wall clock that reads `T0 + mono`; its Date names the whole
    /// second (fresh).
    fn answer(at: i64, rtt: i64, offset: i64) -> DateSample {
        let stamped = at + rtt / 2;
        let azure = T0 + stamped + offset;
        DateSample {
            sent_ms: at,
            received_ms: at + rtt,
            date_ms: azure - azure.rem_euclid(1_000),
        }
    }

    /// The offset the estimator settles on at monotonic `at` for a VM whose wall clock reads
    /// `T0 + at + wall_step`.
    fn offset_at(estimator: &SkewEstimator, at: i64, wall_step: i64) -> i64 {
        estimator
            .skew(at, T0 + at + wall_step)
            .expect("an estimate")
            .offset_ms
    }

    /// Polls once a second, each at a different phase of the second.
    fn poll(estimator: &mut SkewEstimator, from: i64, count: i64, offset: i64) -> i64 {
        let mut at = from;
        for index in 0..count {
            at = from + index * 1_000 + (index * 137) % 1_000;
            estimator.add(answer(at, 4, offset));
        }
        at
    }

    #[test]
    fn a_vm_clock_that_agrees_is_never_corrected() {
        let mut estimator = SkewEstimator::default();
        assert!(estimator.skew(0, T0).is_none());
        let at = poll(&mut estimator, 0, 30, 0);
        assert_eq!(offset_at(&estimator, at, 0), 0);
        // A clock 300 ms off is within what one-second Date headers can tell apart.
        let mut estimator = SkewEstimator::default();
        let at = poll(&mut estimator, 0, 30, 300);
        assert!(offset_at(&estimator, at, 0).abs() <= 300);
    }

    #[test]
    fn a_vm_clock_ten_seconds_behind_is_corrected_within_the_answers_precision() {
        let mut estimator = SkewEstimator::default();
        estimator.add(answer(0, 4, 10_000));
        let first = offset_at(&estimator, 4, 0);
        assert!(
            (8_000..=10_000).contains(&first),
            "one answer pins it to about a second and a half: {first}"
        );
        let at = poll(&mut estimator, 1_000, 30, 10_000);
        let settled = offset_at(&estimator, at, 0);
        assert!(
            (9_950..=10_000).contains(&settled),
            "answers at many phases of the second pin it: {settled}"
        );
        let ahead = {
            let mut estimator = SkewEstimator::default();
            let at = poll(&mut estimator, 0, 30, -10_000);
            offset_at(&estimator, at, 0)
        };
        assert!(
            (-10_000..=-8_900).contains(&ahead),
            "a VM ahead is corrected at least as far as the answers prove: {ahead}"
        );
    }

    #[test]
    fn a_step_of_imds_time_is_followed_after_one_answer() {
        let mut estimator = SkewEstimator::default();
        let at = poll(&mut estimator, 0, 20, 0);
        assert_eq!(offset_at(&estimator, at, 0), 0);
        // A Freeze paused the VM's clocks 25 s: Azure's is 25 s ahead from now on.
        estimator.add(answer(at + 1_000, 4, 25_000));
        let after = offset_at(&estimator, at + 1_004, 0);
        assert!((23_000..=25_000).contains(&after), "{after}");
        assert_eq!(estimator.pinned.map(|(_, _, kept)| kept), Some(1));
        let at = poll(&mut estimator, at + 2_000, 20, 25_000);
        assert!((24_950..=25_000).contains(&offset_at(&estimator, at, 0)));
    }

    #[test]
    fn a_step_of_the_vm_wall_clock_alone_changes_nothing_on_imds_time() {
        let mut estimator = SkewEstimator::default();
        let at = poll(&mut estimator, 0, 30, 0);
        // The wall clock jumps 40 s ahead; the monotonic clock and Azure's go on.
        let offset = offset_at(&estimator, at + 10, 40_000);
        assert!(
            (-40_010..=-38_900).contains(&offset),
            "IMDS time stays where the answers put it: {offset}"
        );
    }

    #[test]
    fn an_offset_beyond_the_bound_is_not_believed() {
        let mut estimator = SkewEstimator::default();
        let at = poll(&mut estimator, 0, 5, 2 * 3_600_000);
        let skew = estimator.skew(at, T0 + at).unwrap();
        assert!(skew.beyond_bound);
        assert_eq!(skew.offset_ms, 0);
    }

    #[test]
    fn old_answers_are_forgotten() {
        let mut estimator = SkewEstimator::default();
        poll(&mut estimator, 0, 5, 0);
        estimator.add(answer(700_000, 4, 0));
        assert_eq!(estimator.pinned.map(|(_, _, kept)| kept), Some(1));
    }

    #[test]
    fn a_stale_date_header_is_not_a_contradiction() {
        // A server that renders Date once a second and reuses it: up to 2 s stale.
        let mut estimator = SkewEstimator::default();
        for index in 0..40 {
            let at = index * 1_000 + (index * 311) % 1_000;
            let mut sample = answer(at, 4, 0);
            sample.date_ms -= if index % 2 == 0 { 1_000 } else { 0 };
            estimator.add(sample);
        }
        assert!(estimator.pinned.map(|(_, _, kept)| kept).unwrap() > 30);
    }

    #[test]
    fn the_date_header_parses() {
        let parsed = parse_date_header("Mon, 11 Apr 2022 22:26:58 GMT").unwrap();
        assert_eq!(unix_ms(parsed), 1_649_716_018_000);
        assert!(parse_date_header("yesterday").is_none());
    }
}
