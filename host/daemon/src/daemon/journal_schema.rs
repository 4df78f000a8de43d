//! What the daemon journals: the pipeline's state and the readiness holds, under a schema
//! version. A journal from an older forewarn is migrated on load, never quarantined. One from
//! a newer forewarn is read for the fields this version knows, so events resume, and its
//! files are kept as written beside it before this version's first write (see `journal`).
//!
//! | version | written by | shape |
//! | --- | --- | --- |
//! | 1 (no `version` field) | forewarn before the pipeline split | `tracker`, `events`, `readiness_holds` |
//! | 2 | forewarn 0.1 before issue 19 | the same fields plus `version`; answers' `phase` and `outcome` typed |
//! | 3 | this forewarn | the same fields plus `generation`: the change log (`journal.log`, see `journal`) of that generation applies on top |
//!
//! Every field has a default, so a field added later loads from an older file as its
//! default; a change that defaults cannot express gets a new version and a step in
//! [`migrate`].

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::pipeline::state::DaemonState;

/// The journal's file name in the state directory (`journal.json`).
pub(crate) const JOURNAL_NAME: &str = "journal";
/// The schema version this forewarn writes.
pub(crate) const JOURNAL_VERSION: u32 = 3;
/// The version of a journal written before the schema had one.
const UNVERSIONED: u32 = 1;

/// One journal file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JournalRecord {
    /// The schema version the file was written with.
    #[serde(default = "unversioned")]
    pub version: u32,
    /// The snapshot's generation: the change-log lines of the same generation apply on top
    /// of it (0 in journals written before the change log existed, which had none).
    #[serde(default)]
    pub generation: u64,
    /// The pipeline's state (shared with the snapshot the status page reads, not copied).
    #[serde(flatten)]
    pub state: Arc<DaemonState>,
    /// Plugins holding the VM not ready (`set-ready(false)`) at the commit: restored at
    /// start, so `/readyz` stays 503 across a restart mid-drain.
    #[serde(default)]
    pub readiness_holds: BTreeSet<String>,
}

fn unversioned() -> u32 {
    UNVERSIONED
}

impl Default for JournalRecord {
    /// The empty state of the current version, with no holds.
    fn default() -> JournalRecord {
        JournalRecord::new(Arc::default(), BTreeSet::new())
    }
}

impl JournalRecord {
    /// A record of the current version.
    pub(crate) fn new(state: Arc<DaemonState>, readiness_holds: BTreeSet<String>) -> JournalRecord {
        JournalRecord {
            version: JOURNAL_VERSION,
            generation: 0,
            state,
            readiness_holds,
        }
    }
}

/// The state to resume from: the journal's, migrated to this version, or an empty one.
pub(crate) fn resume(record: Option<JournalRecord>) -> DaemonState {
    let Some(record) = record else {
        return DaemonState::default();
    };
    let record = migrate(record);
    if !record.state.events.is_empty() {
        tracing::info!(
            events = record.state.events.len(),
            version = record.version,
            "resuming from the journal"
        );
    }
    Arc::unwrap_or_clone(record.state)
}

/// Brings a record of any version to [`JOURNAL_VERSION`]. A record of a newer version was
/// read for the fields this version knows: it is this version's record now (the journal
/// kept its files as written when it opened them, see `journal`).
pub(crate) fn migrate(mut record: JournalRecord) -> JournalRecord {
    // Version 1 had the same fields, and answers' phase and outcome were the same strings
    // the typed enums read; version 2 had no change log, so its snapshot is generation 0:
    // nothing to convert. A newer one keeps only the fields this version reads.
    record.version = JOURNAL_VERSION;
    record
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pipeline::policy::{LeadTime, PolicyConfig};
    use crate::pipeline::test_harness::Harness;
    use forewarn_imds::PluginName;

    const SECOND: Duration = Duration::from_secs(1);

    /// The default policy, but preparing as soon as an event appears.
    fn at_once() -> PolicyConfig {
        PolicyConfig {
            prepare_lead_time: LeadTime::Fixed(Duration::from_secs(3600)),
            ..PolicyConfig::default()
        }
    }

    #[test]
    fn an_unversioned_journal_reads_as_version_one_and_migrates() {
        let record: JournalRecord =
            serde_json::from_str(r#"{"tracker":{"events":{}},"events":{}}"#).expect("parses");
        assert_eq!(record.version, 1);
        assert!(record.readiness_holds.is_empty());
        assert_eq!(migrate(record).version, JOURNAL_VERSION);
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let record: JournalRecord = serde_json::from_str("{}").expect("parses");
        assert_eq!(*record.state, DaemonState::default());
    }

    #[test]
    fn a_record_round_trips_with_its_version() {
        let holds = BTreeSet::from(["lb-drain".to_owned()]);
        let record = JournalRecord::new(Arc::default(), holds);
        let text = serde_json::to_string(&record).expect("encodes");
        assert!(text.contains(r#""version":3"#), "{text}");
        let back: JournalRecord = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, record);
    }

    /// `host/tests/fixtures/journal-v1-mid-preparation.json` was written by forewarn at commit
    /// 4e650df (before the journal had a version): `forewarn run` against `forewarn simulate
    /// --scenario user-reboot`, with two probe plugins, `drain` (approves) and `stopper`
    /// (defers 1.5 s), killed with SIGKILL after stopper's second deferral.
    #[test]
    fn a_journal_from_the_previous_release_resumes_without_preparing_again() {
        let text = include_str!("../../../tests/fixtures/journal-v1-mid-preparation.json");
        let record: JournalRecord = serde_json::from_str(text).expect("the old journal parses");
        assert_eq!(record.version, 1);
        let state = resume(Some(record));
        let (id, progress) = state.events.iter().next().expect("one event");
        let id = id.clone();
        assert!(progress.plugin(&PluginName::from("drain")).prepared);
        let stopper_attempts = progress
            .plugin(&PluginName::from("stopper"))
            .prepare_attempts;
        assert!(stopper_attempts >= 1);
        let answered_at = progress
            .plugins
            .values()
            .filter_map(|own| own.last_answer.as_ref())
            .map(|answer| answer.at_unix_ms)
            .max()
            .expect("answers journaled");

        let plugins: &[(&str, &str)] = &[
            ("drain", "subscribe = [\"*\"]\nbudget = \"5s\"\n"),
            ("stopper", "subscribe = [\"*\"]\nbudget = \"5s\"\n"),
        ];
        let restart = answered_at + SECOND;
        let mut harness = Harness::resume(plugins, at_once(), state, restart);
        harness.run_for(10 * SECOND);
        let calls = harness.calls();
        assert!(
            calls.iter().all(|c| c.1 != "drain"),
            "drain prepared again: {calls:?}"
        );
        assert_eq!(
            calls.first().map(|c| (c.1.as_str(), c.3)),
            Some(("stopper", stopper_attempts + 1))
        );
        assert_eq!(harness.approvals(), vec![(calls[0].0, vec![id])]);
        // The next commit writes the current version.
        let record = JournalRecord::new(
            harness.persisted.clone().expect("persisted"),
            Default::default(),
        );
        assert_eq!(record.version, JOURNAL_VERSION);
    }
}
