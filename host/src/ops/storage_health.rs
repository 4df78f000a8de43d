//! How the daemon's writes to its state directory fare: the journal (durable, on its
//! reserve, or not durable) and the plugins' state store (writable or not, writes refused
//! over a plugin's disk write budget). The journal keeper and the state store write it;
//! `/status`, `forewarn status`, the status page and `/metrics` read it
//! (docs/operations.md, "When the disk is full").

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::log_fields::rfc3339;

/// The state directory's health, shared by its writers and its readers.
#[derive(Debug, Default)]
pub struct StorageHealth {
    journal: Mutex<JournalHealth>,
    plugin_state: Mutex<PluginStateHealth>,
}

/// How the journal's writes fare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JournalHealth {
    /// Whether the last commit reached the disk (false from the first failure until a
    /// retry succeeds).
    pub durable: bool,
    /// When the failing streak began.
    pub not_durable_since: Option<SystemTime>,
    /// The last error of the streak.
    pub last_error: Option<String>,
    /// When the journal is tried again.
    pub next_retry: Option<SystemTime>,
    /// Commits that failed since the start.
    pub write_failures: u64,
    /// Bytes still allocated beyond the change log's end (what appends use on a full disk).
    pub reserve_left: u64,
    /// Why the last compaction or top-up of the reserve failed; None once one succeeded.
    pub space_problem: Option<String>,
    /// `fsync`s and `fdatasync`s, and bytes written, since the start.
    pub syncs: u64,
    pub bytes: u64,
}

impl Default for JournalHealth {
    fn default() -> Self {
        JournalHealth {
            durable: true,
            not_durable_since: None,
            last_error: None,
            next_retry: None,
            write_failures: 0,
            reserve_left: 0,
            space_problem: None,
            syncs: 0,
            bytes: 0,
        }
    }
}

/// How the plugins' state writes fare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginStateHealth {
    /// Whether the last state write reached the disk.
    pub writable: bool,
    /// When writes began to fail.
    pub not_writable_since: Option<SystemTime>,
    /// The last error.
    pub last_error: Option<String>,
    /// State writes that failed since the start.
    pub write_failures: u64,
    /// Writes refused for being over the plugin's disk write budget, by plugin.
    pub refused_over_budget: BTreeMap<String, u64>,
    /// `fsync`s and bytes written for plugin state since the start.
    pub syncs: u64,
    pub bytes: u64,
}

impl Default for PluginStateHealth {
    fn default() -> Self {
        PluginStateHealth {
            writable: true,
            not_writable_since: None,
            last_error: None,
            write_failures: 0,
            refused_over_budget: BTreeMap::new(),
            syncs: 0,
            bytes: 0,
        }
    }
}

impl StorageHealth {
    /// The journal's health as of now.
    pub(crate) fn journal(&self) -> JournalHealth {
        lock(&self.journal).clone()
    }

    /// Changes the journal's health.
    pub(crate) fn update_journal(&self, change: impl FnOnce(&mut JournalHealth)) {
        change(&mut lock(&self.journal));
    }

    /// The plugin state store's health as of now.
    pub(crate) fn plugin_state(&self) -> PluginStateHealth {
        lock(&self.plugin_state).clone()
    }

    /// Changes the plugin state store's health.
    pub(crate) fn update_plugin_state(&self, change: impl FnOnce(&mut PluginStateHealth)) {
        change(&mut lock(&self.plugin_state));
    }

    /// What `/status` shows.
    pub(crate) fn view(&self) -> StorageView {
        let journal = self.journal();
        let plugin_state = self.plugin_state();
        StorageView {
            journal: JournalView {
                state: match (journal.durable, &journal.space_problem) {
                    (false, _) => JournalState::NotDurable,
                    (true, Some(_)) => JournalState::OnReserve,
                    (true, None) => JournalState::Durable,
                },
                not_durable_since: journal.not_durable_since.map(rfc3339),
                error: journal.last_error,
                next_retry: journal.next_retry.map(rfc3339),
                write_failures: journal.write_failures,
                reserve_left_bytes: journal.reserve_left,
                space_problem: journal.space_problem,
                refused: (!journal.durable).then(|| NOT_DURABLE_REFUSES.to_owned()),
            },
            plugin_state: PluginStateView {
                writable: plugin_state.writable,
                not_writable_since: plugin_state.not_writable_since.map(rfc3339),
                error: plugin_state.last_error,
                write_failures: plugin_state.write_failures,
                refused_over_budget: plugin_state.refused_over_budget,
            },
        }
    }
}

/// What forewarn refuses while the journal is not durable, as `/status` says it.
pub const NOT_DURABLE_REFUSES: &str = "early approvals: an event is approved at IMDS only once \
     its approval is journaled (a restart must know it was sent), so until the journal can be \
     written events start at their NotBefore; plugins are still called";

/// Where the journal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalState {
    /// Every commit reaches the disk, with its reserve for a full disk in place.
    #[default]
    Durable,
    /// Commits reach the disk, into the space set aside for them: the filesystem has no room
    /// for a compaction or a new reserve (`space_problem` says why).
    OnReserve,
    /// Commits fail (`error` says why): the state is kept in memory and written once the
    /// journal can be written again; early approvals wait until then.
    NotDurable,
}

/// The state directory in `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageView {
    /// The journal (`journal.json` and `journal.log`).
    pub journal: JournalView,
    /// The plugins' durable state (`plugin-state/`).
    pub plugin_state: PluginStateView,
}

/// The journal in `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalView {
    /// `durable`, `on-reserve` or `not-durable`.
    pub state: JournalState,
    /// When commits began to fail (RFC 3339); none while durable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_durable_since: Option<String>,
    /// The last write error, with its fix; none while durable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the journal is tried again (RFC 3339); none while durable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry: Option<String>,
    /// Commits that failed since the daemon started.
    pub write_failures: u64,
    /// Bytes still set aside beyond the change log's end for a full disk.
    pub reserve_left_bytes: u64,
    /// Why the journal could not compact or set space aside (a full disk); none otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_problem: Option<String>,
    /// What is refused while the journal is not durable; none while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The plugins' state store in `/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginStateView {
    /// Whether the last state write reached the disk. While false, `state-set` and
    /// `state-delete` fail with the error below; `state-get` still answers.
    pub writable: bool,
    /// When state writes began to fail (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_writable_since: Option<String>,
    /// The last write error, with its fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// State writes that failed since the daemon started.
    pub write_failures: u64,
    /// State writes refused for being over the plugin's disk write budget, by plugin.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_over_budget: BTreeMap<String, u64>,
}

impl Default for PluginStateView {
    fn default() -> Self {
        PluginStateView {
            writable: true,
            not_writable_since: None,
            error: None,
            write_failures: 0,
            refused_over_budget: BTreeMap::new(),
        }
    }
}

impl StorageView {
    /// Whether anything is worth an operator's attention.
    pub fn needs_attention(&self) -> bool {
        self.journal.state != JournalState::Durable
            || !self.plugin_state.writable
            || !self.plugin_state.refused_over_budget.is_empty()
    }
}

/// Locks `mutex`; what it guards is replaced field by field, so a poisoned lock is used as is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
