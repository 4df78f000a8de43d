//! What the maintenance did to the VM, measured from inside it: a Freeze's pause as the
//! largest gap a high-rate heartbeat saw on the monotonic clock ([`PauseMeter`]), a Reboot's
//! or Redeploy's downtime from the last durable heartbeat of the previous boot to the
//! daemon's start in the new one ([`Downtime::between`]). Pure: the shell reads the clocks
//! and hands the readings in.

use std::time::Duration;

use forewarn_events::ImdsTime;
use serde::{Deserialize, Serialize};

use crate::log_fields::millis;

/// A reading of a monotonic clock (the shell's `Instant`, as the time since an origin it
/// chose): it never steps when the wall clock is set, and it goes on while the process is
/// stopped or the VM paused, which is what makes a gap between two readings a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MonotonicTime(Duration);

impl MonotonicTime {
    /// The reading `since_origin` after the shell's origin.
    pub fn from_origin(since_origin: Duration) -> MonotonicTime {
        MonotonicTime(since_origin)
    }

    /// How long after `earlier` this reading is (zero when it is not later).
    pub fn duration_since(self, earlier: MonotonicTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// A stretch in which the heartbeat did not run: the process (or the whole VM) was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatGap {
    /// When the heartbeat ran again, on IMDS's clock.
    pub ended_unix_ms: ImdsTime,
    /// How long it did not run, on the monotonic clock, in milliseconds.
    pub length_ms: u64,
    /// How precise the length is: the heartbeat's period, in milliseconds.
    pub precision_ms: u64,
}

impl HeartbeatGap {
    /// When the gap began, on IMDS's clock.
    pub fn began(&self) -> ImdsTime {
        self.ended_unix_ms
            .saturating_sub(Duration::from_millis(self.length_ms))
    }

    /// Its length.
    pub fn length(&self) -> Duration {
        Duration::from_millis(self.length_ms)
    }
}

/// The pure part of the pause heartbeat: fed each beat's monotonic and wall readings, it
/// says when the time since the previous beat was a gap. Only the monotonic clock counts:
/// a wall clock set forward (NTP, an operator) is not a pause, and one set back hides none.
#[derive(Debug, Clone)]
pub struct PauseMeter {
    period: Duration,
    threshold: Duration,
    last: Option<MonotonicTime>,
}

/// The shortest gap reported: shorter stalls are scheduling noise on a loaded VM, not a
/// pause worth a line in the record.
pub const PAUSE_THRESHOLD_FLOOR: Duration = Duration::from_millis(250);

impl PauseMeter {
    /// A meter for a heartbeat beating every `period`: a gap is reported when two beats are
    /// more than five periods (and at least [`PAUSE_THRESHOLD_FLOOR`]) apart.
    pub fn new(period: Duration) -> PauseMeter {
        PauseMeter {
            period,
            threshold: (period * 5).max(PAUSE_THRESHOLD_FLOOR),
            last: None,
        }
    }

    /// The smallest gap reported.
    pub fn threshold(&self) -> Duration {
        self.threshold
    }

    /// One beat, read at `monotonic` (and `wall`, on IMDS's clock, to place the gap): the
    /// gap since the previous beat, when it is one. The gap is what exceeds one period (the
    /// beat's own sleep), so its precision is one period.
    pub fn beat(&mut self, monotonic: MonotonicTime, wall: ImdsTime) -> Option<HeartbeatGap> {
        let previous = self.last.replace(monotonic)?;
        let since = monotonic.duration_since(previous);
        if since <= self.threshold {
            return None;
        }
        Some(HeartbeatGap {
            ended_unix_ms: wall,
            length_ms: millis(since.saturating_sub(self.period)),
            precision_ms: millis(self.period),
        })
    }
}

/// A reboot's downtime: from the last durable heartbeat of the previous boot to the
/// daemon's start in this one, both on the VM's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Downtime {
    /// The last heartbeat the previous boot wrote (ms since the epoch, VM clock).
    pub last_heartbeat_unix_ms: u64,
    /// When the daemon started in the new boot (ms since the epoch, VM clock).
    pub daemon_started_unix_ms: u64,
    /// The estimate, in milliseconds: the span less half a heartbeat period (the VM went
    /// down somewhere in the period after the last beat).
    pub length_ms: u64,
    /// Half a heartbeat period, in milliseconds, plus the clock's resolution.
    pub precision_ms: u64,
}

impl Downtime {
    /// The downtime between the last heartbeat at `last_heartbeat_unix_ms` and the start at
    /// `started_unix_ms` for a heartbeat written every `period`. A start before the last
    /// heartbeat (a VM clock set back across the reboot) gives zero.
    pub fn between(
        last_heartbeat_unix_ms: u64,
        started_unix_ms: u64,
        period: Duration,
    ) -> Downtime {
        let half = millis(period) / 2;
        let span = started_unix_ms.saturating_sub(last_heartbeat_unix_ms);
        Downtime {
            last_heartbeat_unix_ms,
            daemon_started_unix_ms: started_unix_ms,
            length_ms: span.saturating_sub(half),
            precision_ms: half,
        }
    }
}

/// What the daemon found when it started, about the time it was not running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RestartSeen {
    /// A new boot id: the VM rebooted (or moved, for a Redeploy) while the daemon was down.
    Rebooted(Downtime),
    /// The same boot: only the daemon restarted.
    SameBoot,
    /// No heartbeat of a previous run, or the boot id cannot be read; why, in words.
    Unknown {
        /// Why nothing can be said.
        why: String,
    },
}

/// How a figure was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MeasuredBy {
    /// The largest gap of the daemon's heartbeat (every 50 ms) on the monotonic clock while
    /// the event was Started.
    LargestHeartbeatGap,
    /// From the last durable heartbeat (the state directory's `heartbeat.json`, every 1 s)
    /// to the daemon's start in a new boot.
    LastHeartbeatToStart,
}

impl MeasuredBy {
    /// The method in words, for the record and people.
    pub fn describe(self) -> &'static str {
        match self {
            MeasuredBy::LargestHeartbeatGap => {
                "largest gap of the daemon's heartbeat on the monotonic clock while Started"
            }
            MeasuredBy::LastHeartbeatToStart => {
                "last durable heartbeat before the reboot to the daemon's start after it (new boot id)"
            }
        }
    }
}

/// One measured figure, with how it was measured and how precise it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    /// The figure, in milliseconds.
    pub milliseconds: u64,
    /// ± this many milliseconds.
    pub precision_ms: u64,
    /// The method.
    pub measured_by: MeasuredBy,
    /// The method in words (the same as `measured_by`, for people reading the file).
    pub how: String,
}

impl Measured {
    /// A figure measured by `measured_by`.
    pub fn new(milliseconds: u64, precision_ms: u64, measured_by: MeasuredBy) -> Measured {
        Measured {
            milliseconds,
            precision_ms,
            measured_by,
            how: measured_by.describe().to_owned(),
        }
    }

    /// The figure as a span.
    pub fn span(&self) -> Duration {
        Duration::from_millis(self.milliseconds)
    }
}

/// The measured impact of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Impact {
    /// The event is not over: nothing final to say yet.
    Pending,
    /// The VM (the daemon with it) was paused this long.
    Pause(Measured),
    /// The VM was down this long (a reboot or a move to another host).
    Downtime(Measured),
    /// The heartbeat saw no gap above the threshold while the event was Started.
    NoPauseSeen {
        /// The smallest gap that counts, in milliseconds.
        threshold_ms: u64,
    },
    /// Not measured; why, in words.
    NotMeasured {
        /// Why.
        why: String,
    },
}

impl Impact {
    /// The figure, when one was measured.
    pub fn measured(&self) -> Option<&Measured> {
        match self {
            Impact::Pause(measured) | Impact::Downtime(measured) => Some(measured),
            Impact::Pending | Impact::NoPauseSeen { .. } | Impact::NotMeasured { .. } => None,
        }
    }

    /// The impact in seconds for the metric: the figure, zero when no pause was seen, None
    /// when nothing was measured.
    pub fn seconds(&self) -> Option<f64> {
        match self {
            Impact::Pause(measured) | Impact::Downtime(measured) => {
                Some(measured.span().as_secs_f64())
            }
            Impact::NoPauseSeen { .. } => Some(0.0),
            Impact::Pending | Impact::NotMeasured { .. } => None,
        }
    }
}
