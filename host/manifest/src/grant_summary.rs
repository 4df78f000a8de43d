//! What a plugin's manifest grants it, in the terms an operator consents to: the actions it
//! may run, readiness, the HTTP hosts and managed-identity resources it may reach, how much
//! of a response it may read, its memory cap, its budget and prepare-time, and what its
//! failure means (`on-failure`: `approve` lets the maintenance go ahead without it). The
//! same summary is claimed in the artifact's annotations, shown before install, recorded in
//! `plugins.lock`, and compared on upgrade. Every value is printed escaped
//! ([`crate::shown`]): a lock file edited by hand cannot rewrite a terminal either.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::{Capabilities, FailurePolicy, PluginManifest};

mod flat_summary;

/// The capabilities and limits a manifest grants: its `[capabilities]` table (lists sorted,
/// so two summaries compare and print the same way whatever order the manifest listed them
/// in) and the limits of its calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GrantSummary {
    /// The manifest's `[capabilities]`, lists sorted.
    pub capabilities: Capabilities,
    /// Its memory cap, e.g. "64 MiB".
    pub memory: bytesize::ByteSize,
    /// The longest one call may take.
    #[serde(with = "humantime_serde")]
    pub budget: Duration,
    /// How long its whole preparation takes, as the scheduler plans it (`prepare-time`;
    /// none: the budget). Absent from locks and claims written before issue 45.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub prepare_time: Option<Duration>,
    /// What a failed call means for the approval (`on-failure`): `approve` lets the
    /// maintenance go ahead without this plugin's preparation.
    #[serde(default)]
    pub on_failure: FailurePolicy,
}

impl GrantSummary {
    /// What `manifest` grants.
    pub fn of(manifest: &PluginManifest) -> GrantSummary {
        GrantSummary {
            capabilities: manifest.capabilities.sorted(),
            memory: manifest.memory,
            budget: manifest.budget,
            prepare_time: manifest.prepare_time,
            on_failure: manifest.on_failure,
        }
    }

    /// Reads a summary in either form: this one, or the flat one of lock files (version 1)
    /// and claims written before the `[capabilities]` table was kept whole.
    pub fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<GrantSummary, D::Error> {
        flat_summary::read(deserializer)
    }

    /// The prepare-time the scheduler plans with: `prepare-time`, else the budget.
    pub fn planned_prepare_time(&self) -> Duration {
        self.prepare_time.unwrap_or(self.budget)
    }

    /// Each way `self` grants more than `other`, in words ("actions: + stop-app"); empty
    /// when `self` grants nothing `other` does not.
    pub fn beyond(&self, other: &GrantSummary) -> Vec<String> {
        let mut wider = self.capabilities.beyond(&other.capabilities);
        if self.memory > other.memory {
            wider.push(format!("memory: {} -> {}", other.memory, self.memory));
        }
        if self.budget > other.budget {
            wider.push(format!(
                "budget: {} -> {}",
                humantime::format_duration(other.budget),
                humantime::format_duration(self.budget)
            ));
        }
        // Without a `prepare-time` on either side it is the budget, compared above.
        let prepare_time_set = self.prepare_time.is_some() || other.prepare_time.is_some();
        if prepare_time_set && self.planned_prepare_time() > other.planned_prepare_time() {
            wider.push(format!(
                "prepare-time: {} -> {}",
                humantime::format_duration(other.planned_prepare_time()),
                humantime::format_duration(self.planned_prepare_time())
            ));
        }
        wider.extend(self.capabilities.response_limit_beyond(&other.capabilities));
        if self.on_failure == FailurePolicy::Approve && other.on_failure != FailurePolicy::Approve {
            wider.push(format!(
                "on-failure: {} -> approve (a failed call lets the maintenance go ahead \
                 without this plugin)",
                other.on_failure.as_str()
            ));
        }
        wider
    }

    /// The summary as the lines an operator reads before consenting.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for line in self.capabilities.consent() {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "  memory: {}", self.memory);
        let _ = writeln!(
            out,
            "  budget per call: {}",
            humantime::format_duration(self.budget)
        );
        let _ = writeln!(
            out,
            "  prepare-time (planned before NotBefore): {}{}",
            humantime::format_duration(self.planned_prepare_time()),
            match self.prepare_time {
                Some(_) => "",
                None => " (the budget)",
            }
        );
        let _ = writeln!(
            out,
            "  on failure: {}{}",
            self.on_failure.as_str(),
            match self.on_failure {
                FailurePolicy::Hold => " (a failed call holds the approval)",
                FailurePolicy::Approve => {
                    " (A FAILED CALL COUNTS AS READY: the maintenance may go ahead without this \
                     plugin's preparation)"
                }
            }
        );
        out
    }

    /// The changes from `old` to `self`, one line each, `+`/`-` for added and removed grants;
    /// empty when nothing changed.
    pub fn diff_from(&self, old: &GrantSummary) -> Vec<String> {
        let mut lines = self.capabilities.changes_from(&old.capabilities);
        if self.memory != old.memory {
            lines.push(format!("~ memory: {} -> {}", old.memory, self.memory));
        }
        if self.budget != old.budget {
            lines.push(format!(
                "~ budget: {} -> {}",
                humantime::format_duration(old.budget),
                humantime::format_duration(self.budget)
            ));
        }
        let prepare_time_set = self.prepare_time.is_some() || old.prepare_time.is_some();
        if prepare_time_set && self.planned_prepare_time() != old.planned_prepare_time() {
            lines.push(format!(
                "~ prepare-time: {} -> {}",
                humantime::format_duration(old.planned_prepare_time()),
                humantime::format_duration(self.planned_prepare_time())
            ));
        }
        lines.extend(
            self.capabilities
                .response_limit_change_from(&old.capabilities),
        );
        if self.on_failure != old.on_failure {
            lines.push(format!(
                "~ on-failure: {} -> {}",
                old.on_failure.as_str(),
                self.on_failure.as_str()
            ));
        }
        lines
    }

    /// One line for `plugin list`: "actions: stop-app; readiness; http: 127.0.0.1:8080".
    pub fn one_line(&self) -> String {
        let mut parts = self.capabilities.one_line();
        if self.on_failure == FailurePolicy::Approve {
            parts.push("on-failure: approve".to_owned());
        }
        if parts.is_empty() {
            return "no capabilities".to_owned();
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(text: &str) -> GrantSummary {
        GrantSummary::of(&PluginManifest::parse(text).unwrap())
    }

    #[test]
    fn a_wider_grant_is_named_key_by_key() {
        let old = summary("[capabilities]\nactions = [\"stop-app\"]\nhttp = [\"127.0.0.1:80\"]\n");
        let new = summary(
            "budget = \"20s\"\nmemory = \"128MiB\"\n[capabilities]\nactions = [\"stop-app\", \"reboot-now\"]\nreadiness = true\n",
        );
        let wider = new.beyond(&old);
        assert_eq!(
            wider,
            [
                "actions: + reboot-now",
                "readiness: false -> true",
                "memory: 64.0 MiB -> 128.0 MiB",
                "budget: 10s -> 20s"
            ]
        );
        assert!(old.beyond(&old).is_empty());
        // Dropping http is narrower: nothing beyond the old grants on that key.
        assert!(!wider.iter().any(|line| line.starts_with("http")));
        let diff = new.diff_from(&old);
        assert!(
            diff.contains(&"- http: 127.0.0.1:80".to_owned()),
            "{diff:?}"
        );
        assert!(
            diff.contains(&"+ actions: reboot-now".to_owned()),
            "{diff:?}"
        );
    }

    #[test]
    fn the_response_limit_is_said_after_the_calls_limits() {
        let old = summary("");
        let new = summary(
            "memory = \"128MiB\"\non-failure = \"approve\"\n[capabilities]\nreadiness = true\n\
             http-response-limit = \"2MiB\"\n",
        );
        assert_eq!(
            new.beyond(&old),
            [
                "readiness: false -> true",
                "memory: 64.0 MiB -> 128.0 MiB",
                "http-response-limit: 1.0 MiB -> 2.0 MiB",
                "on-failure: hold -> approve (a failed call lets the maintenance go ahead \
                 without this plugin)"
            ]
        );
        assert_eq!(
            new.diff_from(&old),
            [
                "+ readiness",
                "~ memory: 64.0 MiB -> 128.0 MiB",
                "~ http-response-limit: 1.0 MiB -> 2.0 MiB",
                "~ on-failure: hold -> approve"
            ]
        );
    }

    #[test]
    fn the_summary_round_trips_through_toml() {
        let grants = summary(
            "[capabilities]\nactions = [\"b\", \"a\"]\nazure-identity = [\"https://storage.azure.com/\"]\n",
        );
        let text = toml::to_string(&grants).unwrap();
        assert_eq!(toml::from_str::<GrantSummary>(&text).unwrap(), grants);
        assert_eq!(
            grants.one_line(),
            "actions: a,b; identity: https://storage.azure.com/"
        );
    }
}
