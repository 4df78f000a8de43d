//! What a plugin's manifest grants it, in the terms an operator consents to: the actions it
//! may run, readiness, the HTTP hosts and managed-identity resources it may reach, how much
//! of a response it may read, its memory cap, its budget and prepare-time, and what its
//! failure means (`on-failure`: `approve` lets the maintenance go ahead without it). The
//! same summary is claimed in the artifact's annotations, shown before install, recorded in
//! `plugins.lock`, and compared on upgrade. Every value is printed escaped
//! ([`crate::shown`]): a lock file edited by hand cannot rewrite a terminal either.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capabilities::{
    actions, azure_identity, http_ca_file, http_hosts, http_response_limit, readiness,
};
use crate::{FailurePolicy, PluginManifest};

/// The capabilities and limits a manifest grants. Sets are sorted, so two summaries compare
/// and print the same way whatever order the manifest listed them in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GrantSummary {
    /// Names of operator-defined actions (`[actions.NAME]`) the plugin may run.
    pub actions: BTreeSet<String>,
    /// Whether it may mark the VM ready or not ready on `/readyz`.
    pub readiness: bool,
    /// `host:port` pairs it may send HTTP requests to.
    pub http: BTreeSet<String>,
    /// Resources it may get managed-identity tokens for.
    pub azure_identity: BTreeSet<String>,
    /// Whether it trusts extra CAs for https:// (`http-ca-file`).
    #[serde(default)]
    pub http_ca_file: bool,
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
    /// How much of an HTTP response body it may read (`http-response-limit`).
    #[serde(default = "default_response_limit")]
    pub http_response_limit: bytesize::ByteSize,
    /// What a failed call means for the approval (`on-failure`): `approve` lets the
    /// maintenance go ahead without this plugin's preparation.
    #[serde(default)]
    pub on_failure: FailurePolicy,
}

fn default_response_limit() -> bytesize::ByteSize {
    http_response_limit::default_summary()
}

impl GrantSummary {
    /// What `manifest` grants.
    pub fn of(manifest: &PluginManifest) -> GrantSummary {
        let capabilities = &manifest.capabilities;
        GrantSummary {
            actions: capabilities.actions.iter().cloned().collect(),
            readiness: capabilities.readiness,
            http: capabilities.http.iter().cloned().collect(),
            azure_identity: capabilities.azure_identity.iter().cloned().collect(),
            http_ca_file: capabilities.http_ca_file.is_some(),
            memory: manifest.memory,
            budget: manifest.budget,
            prepare_time: manifest.prepare_time,
            http_response_limit: http_response_limit::summary(capabilities.http_response_limit),
            on_failure: manifest.on_failure,
        }
    }

    /// The prepare-time the scheduler plans with: `prepare-time`, else the budget.
    pub fn planned_prepare_time(&self) -> Duration {
        self.prepare_time.unwrap_or(self.budget)
    }

    /// Each way `self` grants more than `other`, in words ("actions: + stop-app"); empty
    /// when `self` grants nothing `other` does not.
    pub fn beyond(&self, other: &GrantSummary) -> Vec<String> {
        let mut wider: Vec<String> = [
            actions::wider(&self.actions, &other.actions),
            http_hosts::wider(&self.http, &other.http),
            azure_identity::wider(&self.azure_identity, &other.azure_identity),
            readiness::wider(self.readiness, other.readiness),
            http_ca_file::wider(self.http_ca_file, other.http_ca_file),
        ]
        .into_iter()
        .flatten()
        .collect();
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
        wider.extend(http_response_limit::wider(
            self.http_response_limit,
            other.http_response_limit,
        ));
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
        let mut lines = vec![
            actions::consent(&self.actions),
            readiness::consent(self.readiness),
            http_hosts::consent(&self.http),
            azure_identity::consent(&self.azure_identity),
        ];
        lines.extend(http_ca_file::consent(self.http_ca_file));
        lines.push(http_response_limit::consent(self.http_response_limit));
        let mut out = String::new();
        for line in lines {
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
        let mut lines = actions::changes(&self.actions, &old.actions);
        lines.extend(http_hosts::changes(&self.http, &old.http));
        lines.extend(azure_identity::changes(
            &self.azure_identity,
            &old.azure_identity,
        ));
        lines.extend(readiness::changes(self.readiness, old.readiness));
        lines.extend(http_ca_file::changes(self.http_ca_file, old.http_ca_file));
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
        lines.extend(http_response_limit::changes(
            self.http_response_limit,
            old.http_response_limit,
        ));
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
        let mut parts: Vec<String> = [
            actions::one_line(&self.actions),
            readiness::one_line(self.readiness),
            http_hosts::one_line(&self.http),
            azure_identity::one_line(&self.azure_identity),
        ]
        .into_iter()
        .flatten()
        .collect();
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
