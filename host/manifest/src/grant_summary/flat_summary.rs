//! The flat form of a grant summary, which lock files of version 1 and the claims of
//! artifacts pushed before the `[capabilities]` table was kept whole still carry: each
//! capability a key of its own beside `memory` and `budget`, and `http-ca-file` only a
//! yes or no. Read, never written.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::GrantSummary;
use crate::capabilities::http_response_limit;
use crate::{Capabilities, FailurePolicy};

/// What a flat summary said of a CA file: that one was trusted, not which.
const UNNAMED_CA_FILE: &str = "(a CA file, not named by a lock of version 1)";

/// A summary as version 1 wrote it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FlatSummary {
    actions: BTreeSet<String>,
    readiness: bool,
    http: BTreeSet<String>,
    azure_identity: BTreeSet<String>,
    #[serde(default)]
    http_ca_file: bool,
    memory: ByteSize,
    #[serde(with = "humantime_serde")]
    budget: Duration,
    #[serde(default, with = "humantime_serde::option")]
    prepare_time: Option<Duration>,
    #[serde(default)]
    http_response_limit: Option<ByteSize>,
    #[serde(default)]
    on_failure: FailurePolicy,
}

impl From<FlatSummary> for GrantSummary {
    // A capability added after version 1 was not in its form: its default (denied).
    #[allow(clippy::needless_update)]
    fn from(flat: FlatSummary) -> GrantSummary {
        GrantSummary {
            capabilities: Capabilities {
                readiness: flat.readiness,
                http: flat.http.into_iter().collect(),
                actions: flat.actions.into_iter().collect(),
                azure_identity: flat.azure_identity.into_iter().collect(),
                http_ca_file: flat.http_ca_file.then(|| PathBuf::from(UNNAMED_CA_FILE)),
                // Version 1 wrote the limit in force, the default too; a default one is unset.
                http_response_limit: flat
                    .http_response_limit
                    .filter(|limit| *limit != http_response_limit::summary(None)),
                ..Capabilities::default()
            },
            memory: flat.memory,
            budget: flat.budget,
            prepare_time: flat.prepare_time,
            on_failure: flat.on_failure,
        }
    }
}

/// Reads either form: the flat one when it has the keys of one and no `capabilities`.
pub(super) fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<GrantSummary, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    let flat = value.get("capabilities").is_none() && value.get("actions").is_some();
    let summary = match flat {
        true => FlatSummary::deserialize(value).map(GrantSummary::from),
        false => GrantSummary::deserialize(value),
    };
    summary.map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_summary_reads_as_the_table_it_described() {
        let flat = "actions = [\"stop-app\", \"a\"]\nreadiness = true\nhttp = []\n\
                    azure-identity = []\nhttp-ca-file = true\nmemory = \"64.0 MiB\"\n\
                    budget = \"10s\"\nhttp-response-limit = \"1.0 MiB\"\n";
        let summary = GrantSummary::read(toml::Deserializer::parse(flat).unwrap()).unwrap();
        assert_eq!(summary.capabilities.actions, ["a", "stop-app"]);
        assert!(summary.capabilities.readiness);
        assert!(summary.capabilities.http_ca_file.is_some());
        assert_eq!(
            summary.capabilities.http_response_limit, None,
            "the default, unset"
        );
        assert_eq!(summary.budget, Duration::from_secs(10));
        assert_eq!(
            summary.one_line(),
            "actions: a,stop-app; readiness",
            "the same words as before"
        );
        let current = toml::to_string(&summary).unwrap();
        let again = GrantSummary::read(toml::Deserializer::parse(&current).unwrap()).unwrap();
        assert_eq!(again, summary);
    }

    #[test]
    fn an_unknown_key_in_either_form_is_named() {
        for text in [
            "actions = []\nreadiness = false\nhttp = []\nazure-identity = []\n\
             memory = \"64 MiB\"\nbudget = \"10s\"\nroot = true\n",
            "memory = \"64 MiB\"\nbudget = \"10s\"\n[capabilities]\nroot = true\n",
        ] {
            let error = GrantSummary::read(toml::Deserializer::parse(text).unwrap())
                .unwrap_err()
                .to_string();
            assert!(error.contains("unknown field `root`"), "{error}");
        }
    }
}
