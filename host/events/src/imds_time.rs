//! A point in time on IMDS's clock: the one time type the pipeline works in.

use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time on IMDS's clock (Azure's, as the daemon's `ImdsClock` estimates it from
/// IMDS's `Date` headers), in whole milliseconds since the Unix epoch. Deadlines, retries,
/// "preparing since" and every journaled `*_unix_ms` field are one of these.
///
/// It serializes as the integer milliseconds (`"at_unix_ms": 1700000000123`), so a journal
/// field that was a `u64` reads and writes exactly as before.
///
/// The arithmetic never panics: adding or subtracting a [`Duration`] saturates at the Unix
/// epoch and at `u64::MAX` milliseconds (the `checked_` forms say when it would have), and
/// [`duration_since`](ImdsTime::duration_since) is zero when the other time is later, like
/// [`std::time::Instant::duration_since`].
///
/// Converting from and to [`SystemTime`] happens at the edges only: `ImdsClock::now` turns
/// the VM's wall clock, corrected by IMDS's offset, into one; formatting turns one back. A
/// `SystemTime` built from an `ImdsTime` is still a time on IMDS's clock, not on the VM's:
/// where the VM's clock matters (the NotBefore plugins are shown), the caller shifts it by
/// the clock's offset explicitly (the daemon's `on_vm_clock`).
///
/// ```
/// use std::time::Duration;
/// use forewarn_events::ImdsTime;
///
/// let at = ImdsTime::from_unix_ms(1_700_000_000_123);
/// assert_eq!((at + Duration::from_secs(2)).unix_ms(), 1_700_000_002_123);
/// assert_eq!((at + Duration::from_secs(2)).duration_since(at), Duration::from_secs(2));
/// assert_eq!(at.duration_since(at + Duration::from_secs(2)), Duration::ZERO);
/// assert_eq!(serde_json::to_string(&at).unwrap(), "1700000000123");
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ImdsTime {
    unix_ms: u64,
}

/// A span in whole milliseconds (below), `u64::MAX` past it: the unit of every `*_ms` log
/// field, JSON field and counter. The one place the saturating conversion is written.
pub fn millis(span: Duration) -> u64 {
    u64::try_from(span.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch of a reading of any clock, to the millisecond below:
/// 0 before the epoch, `u64::MAX` past year 584 million. For times on the VM's own clock
/// (when a poll was tried, when a fleet record was published), which are not `ImdsTime`s.
pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, millis)
}

/// The latest time every platform's [`SystemTime`] holds (9999-12-31T23:59:59Z): where
/// [`ImdsTime::system_time`] saturates.
const SYSTEM_TIME_MAX_SECS: u64 = 253_402_300_799;

impl ImdsTime {
    /// The Unix epoch (1970-01-01T00:00:00Z): the earliest `ImdsTime`.
    pub const UNIX_EPOCH: ImdsTime = ImdsTime { unix_ms: 0 };
    /// The latest `ImdsTime`, `u64::MAX` milliseconds after the epoch.
    pub const MAX: ImdsTime = ImdsTime { unix_ms: u64::MAX };

    /// The time `unix_ms` milliseconds after the Unix epoch.
    pub const fn from_unix_ms(unix_ms: u64) -> ImdsTime {
        ImdsTime { unix_ms }
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_ms(self) -> u64 {
        self.unix_ms
    }

    /// `time`, a reading of IMDS's clock, to the millisecond below: the epoch when it is
    /// before the epoch, [`ImdsTime::MAX`] past year 584 million.
    pub fn from_system_time(time: SystemTime) -> ImdsTime {
        ImdsTime {
            unix_ms: unix_ms(time),
        }
    }

    /// This time as a [`SystemTime`] (still on IMDS's clock), for the edges that speak
    /// `SystemTime` (formatting, a timer); 9999-12-31T23:59:59Z for a time later than every
    /// platform's `SystemTime` holds.
    pub fn system_time(self) -> SystemTime {
        let since = Duration::from_millis(self.unix_ms);
        let max = Duration::from_secs(SYSTEM_TIME_MAX_SECS);
        UNIX_EPOCH + since.min(max)
    }

    /// `self + span`, or None past [`ImdsTime::MAX`].
    pub fn checked_add(self, span: Duration) -> Option<ImdsTime> {
        let span = u64::try_from(span.as_millis()).ok()?;
        self.unix_ms.checked_add(span).map(ImdsTime::from_unix_ms)
    }

    /// `self - span`, or None before the Unix epoch.
    pub fn checked_sub(self, span: Duration) -> Option<ImdsTime> {
        let span = u64::try_from(span.as_millis()).ok()?;
        self.unix_ms.checked_sub(span).map(ImdsTime::from_unix_ms)
    }

    /// `self + span`, [`ImdsTime::MAX`] past it.
    pub fn saturating_add(self, span: Duration) -> ImdsTime {
        self.checked_add(span).unwrap_or(ImdsTime::MAX)
    }

    /// `self - span`, the Unix epoch before it.
    pub fn saturating_sub(self, span: Duration) -> ImdsTime {
        self.checked_sub(span).unwrap_or(ImdsTime::UNIX_EPOCH)
    }

    /// How long after `earlier` this is; zero when `earlier` is later.
    pub fn duration_since(self, earlier: ImdsTime) -> Duration {
        self.checked_duration_since(earlier)
            .unwrap_or(Duration::ZERO)
    }

    /// How long after `earlier` this is; None when `earlier` is later.
    pub fn checked_duration_since(self, earlier: ImdsTime) -> Option<Duration> {
        self.unix_ms
            .checked_sub(earlier.unix_ms)
            .map(Duration::from_millis)
    }
}

impl From<SystemTime> for ImdsTime {
    fn from(time: SystemTime) -> ImdsTime {
        ImdsTime::from_system_time(time)
    }
}

impl From<ImdsTime> for SystemTime {
    fn from(time: ImdsTime) -> SystemTime {
        time.system_time()
    }
}

/// Saturates at [`ImdsTime::MAX`] (see [`ImdsTime::checked_add`]).
impl Add<Duration> for ImdsTime {
    type Output = ImdsTime;

    fn add(self, span: Duration) -> ImdsTime {
        self.saturating_add(span)
    }
}

impl AddAssign<Duration> for ImdsTime {
    fn add_assign(&mut self, span: Duration) {
        *self = *self + span;
    }
}

/// Saturates at the Unix epoch (see [`ImdsTime::checked_sub`]).
impl Sub<Duration> for ImdsTime {
    type Output = ImdsTime;

    fn sub(self, span: Duration) -> ImdsTime {
        self.saturating_sub(span)
    }
}

impl SubAssign<Duration> for ImdsTime {
    fn sub_assign(&mut self, span: Duration) {
        *self = *self - span;
    }
}

/// `#[serde(with = "forewarn_events::system_time_form")]`: an [`ImdsTime`] field journaled
/// in [`SystemTime`]'s serde form (`{"secs_since_epoch": …, "nanos_since_epoch": …}`), for
/// fields that were a `SystemTime` in earlier releases: their journals read as before
/// (below a millisecond is cut), and what is written reads in those releases too.
pub mod system_time_form {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::ImdsTime;

    /// Writes `time` as the `SystemTime` it stands for.
    pub fn serialize<S: Serializer>(time: &ImdsTime, serializer: S) -> Result<S::Ok, S::Error> {
        time.system_time().serialize(serializer)
    }

    /// Reads a `SystemTime`, to the millisecond below.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ImdsTime, D::Error> {
        SystemTime::deserialize(deserializer).map(ImdsTime::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: ImdsTime = ImdsTime::from_unix_ms(1_700_000_000_123);

    #[test]
    fn round_trips_through_system_time_and_milliseconds() {
        let system = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(ImdsTime::from(system), AT);
        assert_eq!(SystemTime::from(AT), system);
        assert_eq!(ImdsTime::from_unix_ms(AT.unix_ms()), AT);
        // Below a millisecond is cut, never rounded up.
        assert_eq!(ImdsTime::from(system + Duration::from_micros(999)), AT);
    }

    #[test]
    fn clamps_before_the_epoch_and_at_overflow() {
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(ImdsTime::from(before), ImdsTime::UNIX_EPOCH);
        assert_eq!(AT - Duration::from_secs(u64::MAX), ImdsTime::UNIX_EPOCH);
        assert_eq!(AT.checked_sub(Duration::from_secs(1_700_000_001)), None);
        assert_eq!(AT + Duration::MAX, ImdsTime::MAX);
        assert_eq!(ImdsTime::MAX + Duration::from_millis(1), ImdsTime::MAX);
        assert_eq!(ImdsTime::MAX.checked_add(Duration::from_millis(1)), None);
        assert_eq!(
            AT.checked_add(Duration::from_millis(1)),
            Some(ImdsTime::from_unix_ms(1_700_000_000_124))
        );
        // Later than any SystemTime holds everywhere: 9999-12-31T23:59:59Z.
        let last = UNIX_EPOCH + Duration::from_secs(SYSTEM_TIME_MAX_SECS);
        assert_eq!(ImdsTime::MAX.system_time(), last);
    }

    #[test]
    fn durations_between_times_are_never_negative() {
        let later = AT + Duration::from_millis(1_500);
        assert_eq!(later.duration_since(AT), Duration::from_millis(1_500));
        assert_eq!(AT.duration_since(later), Duration::ZERO);
        assert_eq!(AT.checked_duration_since(later), None);
        let mut moved = AT;
        moved += Duration::from_secs(1);
        moved -= Duration::from_millis(500);
        assert_eq!(moved, AT + Duration::from_millis(500));
        assert!(AT < later);
    }

    #[test]
    fn serializes_as_the_integer_milliseconds() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Answer {
            at_unix_ms: ImdsTime,
            retry_at_unix_ms: Option<ImdsTime>,
        }
        let answer = Answer {
            at_unix_ms: AT,
            retry_at_unix_ms: None,
        };
        let json = serde_json::to_string(&answer).unwrap();
        assert_eq!(
            json,
            r#"{"at_unix_ms":1700000000123,"retry_at_unix_ms":null}"#
        );
        assert_eq!(serde_json::from_str::<Answer>(&json).unwrap(), answer);
    }

    #[test]
    fn a_field_that_was_a_system_time_keeps_its_form() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Tracked {
            #[serde(with = "system_time_form")]
            first_seen: ImdsTime,
        }
        let old = r#"{"first_seen":{"secs_since_epoch":1700000000,"nanos_since_epoch":123456789}}"#;
        let read: Tracked = serde_json::from_str(old).unwrap();
        assert_eq!(read.first_seen, AT);
        let written = serde_json::to_string(&read).unwrap();
        assert_eq!(
            written,
            r#"{"first_seen":{"secs_since_epoch":1700000000,"nanos_since_epoch":123000000}}"#
        );
    }
}
