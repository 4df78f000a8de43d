//! How many log lines a plugin may cause over time, across its calls and reloads: a token
//! bucket per plugin name, which counts the lines it drops and says so once a minute at most.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::mutex::lock;
use crate::refusal_tally::{RefusalTally, Refused};

/// Lines a plugin may log at once after a quiet spell: five full calls' worth
/// (`LOG_LINES_PER_CALL`).
pub const LOG_BURST_LINES: u32 = 1000;
/// Lines a plugin may log per minute once its burst is spent: 10 a second, far above what
/// a bundled plugin logs and far below journald's default of 10 000 per 30 s per unit.
pub const LOG_LINES_PER_MINUTE: u32 = 600;
/// Fewest seconds between two summaries of one plugin's dropped lines.
pub(crate) const LOG_SUMMARY_INTERVAL: Duration = Duration::from_secs(60);

/// Time for one more line at `LOG_LINES_PER_MINUTE`.
const REFILL_EVERY: Duration = Duration::from_millis(60_000 / LOG_LINES_PER_MINUTE as u64);

/// One plugin's log budget, shared by its calls (also concurrent ones) and by every version
/// of it loaded into one runtime. Every method takes the time, so tests drive the clock.
pub(crate) struct LogBudget {
    bucket: Mutex<Bucket>,
}

struct Bucket {
    /// Lines the plugin may still log now.
    lines: u32,
    /// When `lines` was last topped up: whole refills since then are still due.
    refilled_at: Instant,
    /// Lines dropped since the plugin was first loaded.
    dropped_total: u64,
    /// Lines dropped since the last summary.
    unreported: RefusalTally,
}

impl LogBudget {
    /// A full budget at `now`.
    pub(crate) fn new(now: Instant) -> Self {
        LogBudget {
            bucket: Mutex::new(Bucket {
                lines: LOG_BURST_LINES,
                refilled_at: now,
                dropped_total: 0,
                unreported: RefusalTally::default(),
            }),
        }
    }

    /// Takes one line from the budget: false, and the line counted as dropped, when none
    /// is left.
    pub(crate) fn take(&self, now: Instant) -> bool {
        let mut bucket = lock(&self.bucket);
        bucket.refill(now);
        if bucket.lines == 0 {
            bucket.drop_line(now);
            return false;
        }
        bucket.lines -= 1;
        true
    }

    /// The lines dropped since the last summary, when there are some and no summary was
    /// due in the last `LOG_SUMMARY_INTERVAL`; they then count as reported.
    pub(crate) fn summary_due(&self, now: Instant) -> Option<Refused> {
        lock(&self.bucket)
            .unreported
            .report_due(now, LOG_SUMMARY_INTERVAL)
    }

    /// Writes one warning of the lines dropped since the last one, when it is due
    /// ([`LogBudget::summary_due`]).
    pub(crate) fn report_dropped(&self, plugin: &str, now: Instant) {
        let Some(dropped) = self.summary_due(now) else {
            return;
        };
        let over_ms = forewarn_events::millis(dropped.over);
        tracing::warn!(
            plugin,
            dropped_lines = dropped.count,
            over_ms,
            budget_lines_per_minute = LOG_LINES_PER_MINUTE,
            budget_burst_lines = LOG_BURST_LINES,
            "plugin {plugin}: {} log lines dropped over the last {:.1} s: over its log budget \
             of {LOG_LINES_PER_MINUTE} lines a minute (bursts of {LOG_BURST_LINES})",
            dropped.count,
            dropped.over.as_secs_f64()
        );
    }

    /// Lines dropped for being over the budget since the plugin was first loaded.
    pub(crate) fn dropped_total(&self) -> u64 {
        lock(&self.bucket).dropped_total
    }
}

impl Bucket {
    /// Adds the lines earned since `refilled_at`, up to the burst.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at);
        let earned = elapsed.as_nanos() / REFILL_EVERY.as_nanos();
        let room = LOG_BURST_LINES - self.lines;
        if earned >= u128::from(room) {
            self.lines = LOG_BURST_LINES;
            self.refilled_at = now;
            return;
        }
        // Less than the room, which is a u32: the casts are lossless.
        self.lines += earned as u32;
        self.refilled_at += REFILL_EVERY * earned as u32;
    }

    fn drop_line(&mut self, now: Instant) {
        self.dropped_total = self.dropped_total.saturating_add(1);
        self.unreported.count(now);
    }
}

/// The log budget of every plugin name a runtime loaded: a reloaded plugin keeps the budget
/// its earlier version left, so reloading does not refill it.
#[derive(Default)]
pub(crate) struct LogBudgets {
    by_name: Mutex<HashMap<Arc<str>, Arc<LogBudget>>>,
}

impl LogBudgets {
    /// The budget of the plugin `name`, full if it is new.
    pub(crate) fn of(&self, name: &str) -> Arc<LogBudget> {
        let mut by_name = lock(&self.by_name);
        if let Some(budget) = by_name.get(name) {
            return budget.clone();
        }
        let budget = Arc::new(LogBudget::new(Instant::now()));
        by_name.insert(Arc::from(name), budget.clone());
        budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `count` lines at `now`; returns how many were allowed.
    fn take_lines(budget: &LogBudget, count: u32, now: Instant) -> u32 {
        (0..count).filter(|_| budget.take(now)).count() as u32
    }

    #[test]
    fn a_burst_is_allowed_then_lines_are_dropped_and_counted() {
        let start = Instant::now();
        let budget = LogBudget::new(start);
        assert_eq!(
            take_lines(&budget, LOG_BURST_LINES + 250, start),
            LOG_BURST_LINES
        );
        assert_eq!(budget.dropped_total(), 250);
    }

    #[test]
    fn the_budget_refills_at_its_rate_up_to_the_burst() {
        let start = Instant::now();
        let budget = LogBudget::new(start);
        take_lines(&budget, LOG_BURST_LINES, start);
        // A minute later: one minute's lines, not a burst.
        let later = start + Duration::from_secs(60);
        assert_eq!(take_lines(&budget, 5000, later), LOG_LINES_PER_MINUTE);
        // Half a line's time earns nothing; the other half completes it.
        let half = REFILL_EVERY / 2;
        assert_eq!(take_lines(&budget, 10, later + half), 0);
        assert_eq!(take_lines(&budget, 10, later + REFILL_EVERY), 1);
        // An hour of quiet refills the burst and no more.
        let hour = later + Duration::from_secs(3600);
        assert_eq!(take_lines(&budget, 5000, hour), LOG_BURST_LINES);
    }

    #[test]
    fn dropped_lines_are_summarised_once_per_interval() {
        let start = Instant::now();
        let budget = LogBudget::new(start);
        assert_eq!(budget.summary_due(start), None, "nothing dropped yet");
        take_lines(&budget, LOG_BURST_LINES + 10, start);
        let first = start + Duration::from_millis(500);
        assert_eq!(
            budget.summary_due(first),
            Some(Refused {
                count: 10,
                over: Duration::from_millis(500)
            })
        );
        // More drops right after: held back until the interval has passed.
        let soon = first + Duration::from_secs(1);
        let allowed = take_lines(&budget, 100, soon);
        assert!(allowed < 100, "{allowed} lines allowed");
        assert_eq!(budget.summary_due(soon), None);
        let next = first + LOG_SUMMARY_INTERVAL;
        assert_eq!(
            budget.summary_due(next),
            Some(Refused {
                count: u64::from(100 - allowed),
                over: next - soon
            })
        );
        // Reported: nothing more to say.
        assert_eq!(budget.summary_due(next + LOG_SUMMARY_INTERVAL), None);
    }

    #[test]
    fn a_name_keeps_its_budget_across_lookups() {
        let budgets = LogBudgets::default();
        let chatty = budgets.of("chatty");
        assert!(Arc::ptr_eq(&chatty, &budgets.of("chatty")));
        assert!(!Arc::ptr_eq(&chatty, &budgets.of("quiet")));
    }
}
