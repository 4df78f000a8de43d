//! The crash-loop quarantine: a plugin whose calls fail `policy.quarantine-after-failures`
//! times within `policy.quarantine-window` is not called again until a new version of it is
//! loaded (its `.wasm` or its `.toml` changed) or the daemon restarts.
//!
//! Pure: failures are counted at the `now` the pipeline passes in. What a quarantined plugin
//! means for an event is the scheduler's and the approval stage's business (through
//! [`Roster::is_quarantined`]): never called for `prepare` or `started`, called once for each
//! recovery, and under `on-failure = "hold"` it holds every event it subscribes to.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use forewarn_events::ImdsTime;
use serde::{Deserialize, Serialize};

use forewarn_events::PluginName;

use crate::policy::PolicyConfig;
use crate::roster::FailurePolicy;
use crate::roster::{Member, Roster};
use crate::state::AnswerOutcome;

/// When a plugin is quarantined: this many failed calls within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantineRules {
    /// Failed calls that quarantine a plugin; 0: never.
    pub failures: u32,
    /// How far back failures count.
    pub window: Duration,
}

impl QuarantineRules {
    /// The rules of the `[policy]` section.
    pub fn of(policy: &PolicyConfig) -> QuarantineRules {
        QuarantineRules {
            failures: policy.quarantine_after_failures,
            window: policy.quarantine_window,
        }
    }
}

/// A plugin in quarantine, as `/status`, the status page and the timeline show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinedPlugin {
    /// The plugin's name.
    pub plugin: PluginName,
    /// Its manifest's `on-failure`: under `hold` it holds the events it subscribes to, under
    /// `approve` they go ahead without it.
    pub on_failure: FailurePolicy,
    /// When it was quarantined, in milliseconds since the Unix epoch.
    pub since_unix_ms: ImdsTime,
    /// The failed calls counted within the window.
    pub failures: u32,
    /// The window, in milliseconds.
    pub window_ms: u64,
    /// How the last call failed ("trap", "budget-exceeded", …).
    pub last_failure: AnswerOutcome,
    /// The last failure's reason, as the runtime reported it.
    pub reason: String,
}

/// One plugin's recent failures, and its quarantine if it is in one.
#[derive(Debug, Clone)]
struct Health {
    /// The version the failures were counted for: a new one starts afresh.
    version: Member,
    /// When its calls failed, oldest first, within the window.
    failed_at: VecDeque<ImdsTime>,
    quarantined: Option<QuarantinedPlugin>,
}

/// Every plugin's recent failures and quarantine. Not journaled: a restart lifts every
/// quarantine (it loads every plugin again).
#[derive(Debug, Clone)]
pub struct Quarantine {
    rules: QuarantineRules,
    health: BTreeMap<PluginName, Health>,
}

impl Quarantine {
    /// No plugin has failed yet.
    pub fn new(rules: QuarantineRules) -> Quarantine {
        Quarantine {
            rules,
            health: BTreeMap::new(),
        }
    }

    /// Counts a failed call of `member` at `now`; returns its quarantine when this failure
    /// is the one that starts it.
    pub fn record_failure(
        &mut self,
        member: &Member,
        outcome: AnswerOutcome,
        reason: &str,
        now: ImdsTime,
    ) -> Option<QuarantinedPlugin> {
        if self.rules.failures == 0 {
            return None;
        }
        let health = self
            .health
            .entry(member.name.clone())
            .or_insert_with(|| Health {
                version: member.clone(),
                failed_at: VecDeque::new(),
                quarantined: None,
            });
        if health.version != *member {
            // Reloaded since (the roster is reconciled first, so only a race gets here).
            health.version = member.clone();
            health.failed_at.clear();
            health.quarantined = None;
        }
        if health.quarantined.is_some() {
            return None;
        }
        health.failed_at.push_back(now);
        let oldest_counted = now.checked_sub(self.rules.window);
        while let Some(first) = health.failed_at.front()
            && oldest_counted.is_some_and(|oldest| *first <= oldest)
        {
            health.failed_at.pop_front();
        }
        let failures = u32::try_from(health.failed_at.len()).unwrap_or(u32::MAX);
        if failures < self.rules.failures {
            return None;
        }
        let quarantined = QuarantinedPlugin {
            plugin: member.name.clone(),
            on_failure: member.terms.on_failure,
            since_unix_ms: now,
            failures,
            window_ms: crate::log_fields::millis(self.rules.window),
            last_failure: outcome,
            reason: reason.to_owned(),
        };
        health.quarantined = Some(quarantined.clone());
        Some(quarantined)
    }

    /// The plugin set changed: a plugin loaded in a new version (its component or its
    /// manifest changed) or unloaded starts afresh. Returns the quarantines so lifted.
    pub fn reconcile(&mut self, roster: &Roster) -> Vec<QuarantinedPlugin> {
        let mut lifted = Vec::new();
        self.health.retain(|name, health| {
            let same = roster
                .get(name)
                .is_some_and(|member| *member == health.version);
            if !same && let Some(quarantined) = health.quarantined.take() {
                lifted.push(quarantined);
            }
            same
        });
        lifted
    }

    /// The names of the plugins in quarantine.
    pub fn names(&self) -> BTreeSet<PluginName> {
        self.health
            .iter()
            .filter(|(_, health)| health.quarantined.is_some())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The plugins in quarantine, by name.
    pub fn quarantined(&self) -> Vec<QuarantinedPlugin> {
        self.health
            .values()
            .filter_map(|health| health.quarantined.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_harness::{roster, t0};

    const SECOND: Duration = Duration::from_secs(1);

    fn rules(failures: u32, window: Duration) -> QuarantineRules {
        QuarantineRules { failures, window }
    }

    fn member(roster: &Roster) -> Member {
        roster
            .get(&PluginName::from("p"))
            .expect("p is in the roster")
            .clone()
    }

    /// Fails `p` at each of these seconds after t0; returns the second that quarantined it.
    fn fail_at(quarantine: &mut Quarantine, roster: &Roster, seconds: &[u64]) -> Option<u64> {
        seconds.iter().copied().find(|second| {
            let now = t0() + SECOND * u32::try_from(*second).expect("a few seconds");
            let trap = AnswerOutcome::Trap;
            quarantine
                .record_failure(&member(roster), trap, "boom", now)
                .is_some()
        })
    }

    #[test]
    fn n_failures_within_the_window_quarantine_and_older_ones_do_not_count() {
        let roster = roster(&[("p", "")]);
        // (failures, window, failure instants in seconds) → quarantined at
        let rows: &[(u32, u64, &[u64], Option<u64>)] = &[
            (5, 60, &[0, 5, 10, 15, 20], Some(20)),
            (5, 60, &[0, 5, 10, 15], None),
            (3, 60, &[0, 5, 10, 15], Some(10)),
            // One every 20 s: at most three within any 60 s (the oldest falls out).
            (4, 60, &[0, 20, 40, 60, 80, 100], None),
            (4, 60, &[0, 20, 40, 59], Some(59)),
            (1, 60, &[7], Some(7)),
            (0, 60, &[0, 1, 2, 3, 4, 5, 6, 7], None),
        ];
        for (failures, window, instants, expected) in rows {
            let window_s = Duration::from_secs(*window);
            let mut quarantine = Quarantine::new(rules(*failures, window_s));
            let at = fail_at(&mut quarantine, &roster, instants);
            assert_eq!(
                at, *expected,
                "{failures} in {window}s, failing at {instants:?}"
            );
            assert_eq!(quarantine.names().contains("p"), expected.is_some());
        }
    }

    #[test]
    fn the_quarantine_says_what_it_counted() {
        let roster = roster(&[("p", "on-failure = \"approve\"")]);
        let mut quarantine = Quarantine::new(rules(2, 60 * SECOND));
        let p = member(&roster);
        let first = t0();
        assert!(
            quarantine
                .record_failure(&p, AnswerOutcome::Trap, "panic", first)
                .is_none()
        );
        let second = first + 5 * SECOND;
        let quarantined = quarantine
            .record_failure(&p, AnswerOutcome::BudgetExceeded, "cut off", second)
            .expect("quarantined at the second failure");
        assert_eq!(
            quarantined,
            QuarantinedPlugin {
                plugin: "p".into(),
                on_failure: FailurePolicy::Approve,
                since_unix_ms: second,
                failures: 2,
                window_ms: 60_000,
                last_failure: AnswerOutcome::BudgetExceeded,
                reason: "cut off".into(),
            }
        );
        // Once in quarantine, further failures (a recovery call) do not quarantine again.
        let third = second + SECOND;
        assert!(
            quarantine
                .record_failure(&p, AnswerOutcome::Trap, "panic", third)
                .is_none()
        );
        assert_eq!(quarantine.quarantined(), [quarantined]);
    }

    #[test]
    fn a_new_version_or_an_unload_lifts_the_quarantine_and_the_same_version_does_not() {
        let mut quarantine = Quarantine::new(rules(1, 60 * SECOND));
        let loaded = roster(&[("p", ""), ("q", "")]);
        assert_eq!(fail_at(&mut quarantine, &loaded, &[0]), Some(0));
        // Another plugin reloaded: p is the same version and stays quarantined.
        let same = roster(&[("p", ""), ("q", "budget = \"3s\"")]);
        assert!(quarantine.reconcile(&same).is_empty());
        assert!(quarantine.names().contains("p"));
        // A new component (its hash changed): lifted, and its count starts again.
        let mut new_component = same.clone();
        new_component.set_versions(&BTreeMap::from([("p".into(), "abc".into())]));
        let lifted = quarantine.reconcile(&new_component);
        assert_eq!(lifted.len(), 1);
        assert_eq!(lifted[0].plugin, "p");
        assert!(quarantine.names().is_empty());
        // A new manifest also counts as a new version.
        assert_eq!(fail_at(&mut quarantine, &new_component, &[10]), Some(10));
        let mut new_manifest = roster(&[("p", "on-failure = \"approve\""), ("q", "")]);
        new_manifest.set_versions(&BTreeMap::from([("p".into(), "abc".into())]));
        assert_eq!(quarantine.reconcile(&new_manifest).len(), 1);
        // Unloaded: forgotten.
        assert_eq!(fail_at(&mut quarantine, &new_manifest, &[20]), Some(20));
        assert_eq!(quarantine.reconcile(&roster(&[("q", "")])).len(), 1);
        assert!(quarantine.quarantined().is_empty());
    }
}
