//! How much a plugin may write to disk over time through `state-set` and `state-delete`:
//! a budget of writes (each rewrites its state file and syncs it and its directory) and of
//! bytes per minute, per plugin name, across its calls and reloads — like the log budget
//! (`host/runtime/src/log_budget.rs`), both reporting what they refused through
//! `forewarn_runtime::RefusalTally`. Every method takes the time, so tests drive the clock.
//!
//! A write is allowed while the plugin has a write and some bytes left; its bytes are then
//! taken whatever its size (the bytes budget may go below zero, and refills from there), so
//! a plugin whose state file is larger than what is left can still write it, later.

use std::time::{Duration, Instant};

use forewarn_runtime::{RefusalTally, Refused};

/// State writes a plugin may make at once after a quiet spell: four calls' worth
/// (`STATE_WRITES_PER_CALL`), and what lb-drain writes for some 60 events coming and going
/// in a few seconds (about four per event).
pub(crate) const STATE_WRITE_BURST: u32 = 256;
/// State writes a plugin may make per minute once its burst is spent: two a second. Each
/// is two syncs (the file and its directory).
pub(crate) const STATE_WRITES_PER_MINUTE: u32 = 120;
/// Bytes a plugin may write at once after a quiet spell: two calls' worth
/// (`STATE_DISK_BYTES_PER_CALL`).
pub(crate) const STATE_WRITE_BURST_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes a plugin may write per minute once its burst is spent.
pub(crate) const STATE_WRITE_BYTES_PER_MINUTE: u64 = 8 * 1024 * 1024;

const MINUTE: Duration = Duration::from_secs(60);

/// One plugin's disk write budget.
#[derive(Debug)]
pub(crate) struct StateWriteRate {
    /// Writes left now, in millionths of a write (so refills are exact).
    writes_micro: u64,
    /// Bytes left now; below zero after a write larger than what was left.
    bytes: i64,
    refilled_at: Instant,
    /// Writes refused since the last summary.
    unreported: RefusalTally,
}

/// Why a write was refused: what the plugin is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OverBudget {
    /// How long until the next write would be allowed.
    pub(crate) retry_in: Duration,
}

const MICRO: u64 = 1_000_000;

impl StateWriteRate {
    /// A full budget at `now`.
    pub(crate) fn new(now: Instant) -> Self {
        StateWriteRate {
            writes_micro: u64::from(STATE_WRITE_BURST) * MICRO,
            bytes: burst_bytes(),
            refilled_at: now,
            unreported: RefusalTally::default(),
        }
    }

    /// Whether a write may go ahead at `now`; a refused one is counted for the summary.
    pub(crate) fn check(&mut self, now: Instant) -> Result<(), OverBudget> {
        self.refill(now);
        if self.writes_micro >= MICRO && self.bytes > 0 {
            return Ok(());
        }
        self.unreported.count(now);
        Err(OverBudget {
            retry_in: self.time_to_next_write(),
        })
    }

    /// Takes a write of `bytes` that went ahead (after [`StateWriteRate::check`]).
    pub(crate) fn charge(&mut self, bytes: u64, now: Instant) {
        self.refill(now);
        self.writes_micro = self.writes_micro.saturating_sub(MICRO);
        self.bytes = self
            .bytes
            .saturating_sub(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The writes refused since the last summary, when there are some and no summary was
    /// given in the last minute; they then count as reported.
    pub(crate) fn summary_due(&mut self, now: Instant) -> Option<Refused> {
        self.unreported.report_due(now, MINUTE)
    }

    /// Adds what was earned since the last refill, up to the bursts.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at);
        self.refilled_at = now;
        let elapsed_nanos = elapsed.as_nanos();
        let minute_nanos = MINUTE.as_nanos();
        let writes =
            elapsed_nanos * u128::from(STATE_WRITES_PER_MINUTE) * u128::from(MICRO) / minute_nanos;
        let burst = u64::from(STATE_WRITE_BURST) * MICRO;
        self.writes_micro = u64::try_from(u128::from(self.writes_micro) + writes)
            .unwrap_or(u64::MAX)
            .min(burst);
        let bytes = elapsed_nanos * u128::from(STATE_WRITE_BYTES_PER_MINUTE) / minute_nanos;
        self.bytes = self
            .bytes
            .saturating_add(i64::try_from(bytes).unwrap_or(i64::MAX))
            .min(burst_bytes());
    }

    /// How long until both a write and a byte are available again.
    fn time_to_next_write(&self) -> Duration {
        let writes_short = MICRO.saturating_sub(self.writes_micro);
        let for_writes = MINUTE.as_nanos() * u128::from(writes_short)
            / (u128::from(STATE_WRITES_PER_MINUTE) * u128::from(MICRO));
        let bytes_short = u128::try_from(1 - self.bytes.min(1)).unwrap_or(0);
        let for_bytes = MINUTE.as_nanos() * bytes_short / u128::from(STATE_WRITE_BYTES_PER_MINUTE);
        let nanos = for_writes.max(for_bytes);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

fn burst_bytes() -> i64 {
    i64::try_from(STATE_WRITE_BURST_BYTES).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `count` times `bytes` at `now`; how many were allowed.
    fn write(rate: &mut StateWriteRate, count: u32, bytes: u64, now: Instant) -> u32 {
        let mut allowed = 0;
        for _ in 0..count {
            if rate.check(now).is_ok() {
                rate.charge(bytes, now);
                allowed += 1;
            }
        }
        allowed
    }

    #[test]
    fn a_burst_of_writes_then_two_a_second() {
        let start = Instant::now();
        let mut rate = StateWriteRate::new(start);
        assert_eq!(write(&mut rate, 1000, 10, start), STATE_WRITE_BURST);
        let refused = rate.check(start).expect_err("over the budget");
        assert_eq!(refused.retry_in, Duration::from_millis(500));
        let later = start + Duration::from_secs(60);
        assert_eq!(write(&mut rate, 1000, 10, later), STATE_WRITES_PER_MINUTE);
        assert_eq!(
            write(&mut rate, 10, 10, later + Duration::from_millis(499)),
            0
        );
        assert_eq!(
            write(&mut rate, 10, 10, later + Duration::from_millis(500)),
            1
        );
    }

    #[test]
    fn bytes_are_budgeted_and_a_large_write_goes_into_debt_but_is_never_stuck() {
        let start = Instant::now();
        let mut rate = StateWriteRate::new(start);
        let mib = 1024 * 1024;
        // 2 MiB files: four fit the burst, the fifth is refused.
        assert_eq!(write(&mut rate, 10, 2 * mib, start), 4);
        // 15 s later a quarter of a minute's bytes came back: one more write, into debt.
        let later = start + Duration::from_secs(15);
        assert_eq!(write(&mut rate, 10, 5 * mib, later), 1);
        let refused = rate.check(later).expect_err("in debt");
        // The debt (3 MiB) is paid back at 8 MiB a minute: 22.5 s.
        assert!(
            refused.retry_in > Duration::from_secs(22)
                && refused.retry_in <= Duration::from_secs(23),
            "{:?}",
            refused.retry_in
        );
        assert_eq!(write(&mut rate, 1, 10, later + Duration::from_secs(23)), 1);
    }

    #[test]
    fn refused_writes_are_summarised_at_most_once_a_minute() {
        let start = Instant::now();
        let mut rate = StateWriteRate::new(start);
        write(&mut rate, STATE_WRITE_BURST + 5, 1, start);
        assert_eq!(
            rate.summary_due(start),
            Some(Refused {
                count: 5,
                over: Duration::ZERO
            })
        );
        write(&mut rate, 70, 1, start + Duration::from_millis(10));
        assert_eq!(rate.summary_due(start + Duration::from_secs(1)), None);
        let summary = rate
            .summary_due(start + Duration::from_secs(60))
            .expect("due");
        assert_eq!(summary.count, 70);
    }
}
