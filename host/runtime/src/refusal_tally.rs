//! What a budget refused since it last said so, and when it may say so again: the plugin
//! log budget's dropped lines and the key-value store's refused writes are each reported in
//! one warning at most once an interval, not one line per refusal.

use std::time::{Duration, Instant};

/// Refusals counted since the last report. Every method takes the time, so tests drive the
/// clock.
#[derive(Debug, Default, Clone)]
pub struct RefusalTally {
    /// Refused since the last report, and when the first of them was.
    unreported: u64,
    unreported_since: Option<Instant>,
    last_report: Option<Instant>,
}

/// What one report says: how many were refused, over how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// How many were refused.
    pub count: u64,
    /// From the first of them to the report.
    pub over: Duration,
}

impl RefusalTally {
    /// Counts one refusal at `now`.
    pub fn count(&mut self, now: Instant) {
        self.unreported = self.unreported.saturating_add(1);
        self.unreported_since.get_or_insert(now);
    }

    /// The refusals since the last report, when there are some and no report was given in
    /// the last `interval`; they then count as reported.
    pub fn report_due(&mut self, now: Instant, interval: Duration) -> Option<Refused> {
        let since = self.unreported_since?;
        let recent = self
            .last_report
            .is_some_and(|last| now.saturating_duration_since(last) < interval);
        if recent {
            return None;
        }
        let report = Refused {
            count: self.unreported,
            over: now.saturating_duration_since(since),
        };
        self.unreported = 0;
        self.unreported_since = None;
        self.last_report = Some(now);
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_report_counts_since_the_first_refusal_and_waits_an_interval_for_the_next() {
        let start = Instant::now();
        let mut tally = RefusalTally::default();
        assert_eq!(tally.report_due(start, MINUTE), None, "nothing refused");
        tally.count(start);
        tally.count(start + Duration::from_secs(2));
        let first = tally.report_due(start + Duration::from_secs(5), MINUTE);
        assert_eq!(
            first,
            Some(Refused {
                count: 2,
                over: Duration::from_secs(5)
            })
        );
        tally.count(start + Duration::from_secs(10));
        assert_eq!(
            tally.report_due(start + Duration::from_secs(30), MINUTE),
            None,
            "a report was given less than a minute ago"
        );
        let second = tally.report_due(start + Duration::from_secs(65), MINUTE);
        assert_eq!(
            second,
            Some(Refused {
                count: 1,
                over: Duration::from_secs(55)
            })
        );
        assert_eq!(tally.report_due(start + MINUTE * 5, MINUTE), None);
    }
}
