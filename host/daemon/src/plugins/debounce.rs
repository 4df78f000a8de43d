//! The reload's quiet periods: a plugin is reloaded once its files have been still for the
//! debounce time, or at once when a file was renamed into place. Pure: the loop passes `now`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Plugins whose files changed, each with the instant its quiet period ends.
#[derive(Debug, Clone)]
pub(crate) struct Debounce {
    quiet: Duration,
    settle: Duration,
    pending: BTreeMap<String, Instant>,
}

impl Debounce {
    /// Quiet periods of `quiet` after a change, `settle` after a rename into place (so that
    /// a manifest and a component renamed one after the other load together).
    pub(crate) fn new(quiet: Duration, settle: Duration) -> Debounce {
        Debounce {
            quiet,
            settle,
            pending: BTreeMap::new(),
        }
    }

    /// `plugin`'s files changed at `now`: its quiet period starts (again).
    pub(crate) fn mark(&mut self, plugin: String, now: Instant) {
        self.pending.insert(plugin, now + self.quiet);
    }

    /// `plugin`'s file arrived complete at `now` (renamed into place): due after the short
    /// settle time, unless a period is already running for it (its other file is still
    /// being written, or was renamed in just before: the first rename's time stands).
    pub(crate) fn mark_complete(&mut self, plugin: String, now: Instant) {
        self.pending.entry(plugin).or_insert(now + self.settle);
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

    const QUIET: Duration = Duration::from_millis(200);
    const SETTLE: Duration = Duration::from_millis(20);

    #[test]
    fn a_plugin_reloads_once_its_files_were_still_for_the_quiet_period() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut debounce = Debounce::new(QUIET, SETTLE);
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

    #[test]
    fn a_file_renamed_into_place_is_due_after_the_settle_time_unless_a_period_runs() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut debounce = Debounce::new(QUIET, SETTLE);
        let none = Vec::<String>::new();
        // (what happens, then: now in ms → plugins due)
        debounce.mark_complete("a".into(), at(0)); // a.toml renamed in
        debounce.mark_complete("a".into(), at(15)); // then a.wasm: loads with it, not later
        assert_eq!(debounce.take_due(at(19)), none);
        assert_eq!(debounce.take_due(at(20)), ["a"]);
        debounce.mark("b".into(), at(100)); // b.toml written in place
        debounce.mark_complete("b".into(), at(110)); // then b.wasm renamed in: waits for it
        assert_eq!(debounce.take_due(at(130)), none);
        assert_eq!(debounce.take_due(at(300)), ["b"]);
        debounce.mark_complete("c".into(), at(400));
        debounce.mark("c".into(), at(401)); // written in place right after: quiet again
        assert_eq!(debounce.take_due(at(420)), none);
        assert_eq!(debounce.take_due(at(601)), ["c"]);
    }
}
