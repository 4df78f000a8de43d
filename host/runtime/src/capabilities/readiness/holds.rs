//! Who holds the VM out of rotation, and what the load balancers probing `/readyz` were
//! told: the service behind `set-ready`, `drain-progress` and `/readyz`.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Instant;

use super::probe_ledger::{ProbeAnswer, ProbeLedger, ProbeView, Prober};
use crate::mutex::lock;

/// The plugins holding the VM not ready, and since when it has been.
#[derive(Default)]
struct Holds {
    plugins: BTreeSet<String>,
    /// When the VM went from ready to not ready; none while it is ready.
    not_ready_since: Option<Instant>,
    /// The not-ready spell (its `not_ready_since`) last counted in `drains_without_probes`.
    counted_without_probes: Option<Instant>,
    /// Drains during which a plugin asked how the probers saw it and none had probed.
    drains_without_probes: u64,
}

/// The VM's readiness for load balancers: ready while no plugin has marked it not ready.
#[derive(Default)]
pub struct Readiness {
    holds: Mutex<Holds>,
    probes: Mutex<ProbeLedger>,
}

impl Readiness {
    /// Records `plugin`'s view: `false` holds the VM out of rotation until it says `true`.
    /// Returns whether it changed (a plugin that repeats itself on every call changes
    /// nothing).
    pub fn set(&self, plugin: &str, ready: bool) -> bool {
        self.set_at(plugin, ready, Instant::now())
    }

    /// [`Readiness::set`] at `now`.
    pub fn set_at(&self, plugin: &str, ready: bool, now: Instant) -> bool {
        let mut holds = lock(&self.holds);
        let changed = if ready {
            holds.plugins.remove(plugin)
        } else {
            holds.plugins.insert(plugin.to_owned())
        };
        if holds.plugins.is_empty() {
            holds.not_ready_since = None;
        } else if holds.not_ready_since.is_none() {
            holds.not_ready_since = Some(now);
        }
        changed
    }

    /// Whether every plugin considers the VM ready.
    pub fn is_ready(&self) -> bool {
        lock(&self.holds).plugins.is_empty()
    }

    /// The plugins currently holding the VM not ready, sorted.
    pub fn holders(&self) -> Vec<String> {
        lock(&self.holds).plugins.iter().cloned().collect()
    }

    /// When the VM was marked not ready; none while it is ready.
    pub fn not_ready_since(&self) -> Option<Instant> {
        lock(&self.holds).not_ready_since
    }

    /// Answers a probe of `/readyz` from `prober` at `now` and records the answer: true for
    /// ready (200), false for not ready (503).
    pub fn answer_probe(&self, prober: Prober, now: Instant) -> bool {
        let since = self.not_ready_since();
        let answer = match since {
            None => ProbeAnswer::Ready,
            Some(since) => ProbeAnswer::NotReady { since },
        };
        lock(&self.probes).record(prober, answer, now);
        since.is_none()
    }

    /// Where the current drain stands at the probers (none while the VM is ready) for a
    /// load balancer taking a VM out after `threshold` failed probes in a row.
    pub fn drain_view(&self, threshold: u32, now: Instant) -> Option<ProbeView> {
        let since = self.not_ready_since()?;
        Some(lock(&self.probes).view(threshold, since, now))
    }

    /// Counts the current drain as one no load balancer probed (once per drain).
    pub fn count_drain_without_probes(&self) {
        let mut holds = lock(&self.holds);
        if holds.not_ready_since.is_none() || holds.counted_without_probes == holds.not_ready_since
        {
            return;
        }
        holds.counted_without_probes = holds.not_ready_since;
        holds.drains_without_probes += 1;
    }

    /// How many drains found no load balancer probing `/readyz` (a metric).
    pub fn drains_without_probes(&self) -> u64 {
        lock(&self.holds).drains_without_probes
    }

    /// How many probers asked `/readyz` in the last minute.
    pub fn recent_probers(&self, now: Instant) -> usize {
        lock(&self.probes).recent_probers(now)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_drain_counts_from_the_first_plugin_that_marked_the_vm_not_ready() {
        let readiness = Readiness::default();
        let start = Instant::now();
        let prober = Prober::at(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(readiness.answer_probe(prober, start));
        assert_eq!(readiness.drain_view(1, start), None);
        readiness.set_at("lb-drain", false, start + Duration::from_secs(1));
        readiness.set_at("other", false, start + Duration::from_secs(2));
        assert_eq!(
            readiness.not_ready_since(),
            Some(start + Duration::from_secs(1))
        );
        let probe_at = start + Duration::from_millis(1_500);
        assert!(!readiness.answer_probe(prober, probe_at));
        let view = readiness
            .drain_view(1, start + Duration::from_secs(3))
            .expect("not ready");
        assert_eq!(view.all_drained_at, Some(probe_at));
        readiness.set_at("lb-drain", true, start + Duration::from_secs(4));
        assert!(
            readiness.not_ready_since().is_some(),
            "`other` still holds it"
        );
        readiness.set_at("other", true, start + Duration::from_secs(5));
        assert_eq!(readiness.not_ready_since(), None);
        assert_eq!(readiness.recent_probers(start + Duration::from_secs(5)), 1);
    }
}
