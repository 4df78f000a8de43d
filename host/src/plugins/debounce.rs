//! The reload's quiet periods: a plugin is reloaded once its files have been still for the
//! debounce time. Pure: the reload loop passes `now`, so the rule is tested without waiting.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Plugins whose files changed, each with the instant its quiet period ends.
#[derive(Debug, Clone)]
pub(crate) struct Debounce {
    quiet: Duration,
    pending: BTreeMap<String, Instant>,
}

impl Debounce {
    /// Quiet periods of `quiet`.
    pub(crate) fn new(quiet: Duration) -> Debounce {
        Debounce {
            quiet,
            pending: BTreeMap::new(),
        }
    }

    /// `plugin`'s files changed at `now`: its quiet period starts (again).
    pub(crate) fn mark(&mut self, plugin: String, now: Instant) {
        self.pending.insert(plugin, now + self.quiet);
    }

    /// When the next quiet period ends, if any plugin is waiting.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.pending.values().min().copied()
    }

    /// The plugins whose quiet period is over at `now`, no longer waiting.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<String> {
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(plugin, _)| plugin.clone())
            .collect();
        for plugin in &due {
            self.pending.remove(plugin);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_reloads_once_its_files_were_still_for_the_quiet_period() {
        let quiet = Duration::from_millis(200);
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut debounce = Debounce::new(quiet);
        debounce.mark("a".into(), at(0));
        debounce.mark("b".into(), at(50));
        debounce.mark("a".into(), at(100)); // a changes again: its period restarts
        // (now in ms) → plugins due
        let rows: [(u64, &[&str]); 4] = [(199, &[]), (250, &["b"]), (299, &[]), (300, &["a"])];
        for (now, expected) in rows {
            assert_eq!(debounce.take_due(at(now)), *expected, "at {now} ms");
        }
        assert_eq!(debounce.next_due(), None);
    }
}
