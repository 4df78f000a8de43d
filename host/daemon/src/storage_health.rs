//! How the daemon's writes to its state directory fare: the journal (durable, on its
//! reserve, or not durable) and the plugins' state store (writable or not, writes refused
//! over a plugin's disk write budget). The journal keeper and the state store write it;
//! `/status`, `forewarn status`, the status page and `/metrics` read it
//! (docs/operations.md, "When the disk is full").

use std::collections::BTreeMap;
use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::log_fields::rfc3339;
use crate::log_messages;

/// The state directory's health, shared by its writers and its readers.
#[derive(Debug, Default)]
pub struct StorageHealth {
    journal: Mutex<JournalHealth>,
    plugin_state: Mutex<PluginStateHealth>,
}

/// How the journal's writes fare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalHealth {
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
    pub(crate) space_problem: Option<SpaceProblem>,
    /// `fsync`s and `fdatasync`s since the start.
    pub syncs: u64,
    /// Bytes written since the start.
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
    pub fn update_journal(&self, change: impl FnOnce(&mut JournalHealth)) {
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
    pub fn view(&self) -> StorageView {
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
                space_problem_cause: journal.space_problem.as_ref().map(|problem| problem.cause),
                space_problem: journal.space_problem.map(|problem| problem.detail),
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
    /// Commits reach the disk, into the space set aside for them: the journal cannot compact
    /// or set a new reserve aside (`space_problem_cause` says why: a full disk, a directory
    /// it may not create files in, a read-only filesystem, …; `space_problem` the details).
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
    /// Why the journal could not compact or set space aside, in a word; none otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_problem_cause: Option<SpaceCause>,
    /// What the system answered when the journal could not compact or set space aside, with
    /// the fix; none otherwise.
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

/// Why the journal could not compact or set space aside: what the operating system answered,
/// in a word, and its fix ([`SpaceCause::message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpaceCause {
    /// No room (ENOSPC, EDQUOT): the journal writes into its reserve.
    Full,
    /// Not permitted (EPERM, EACCES): an immutable directory (`chattr +i`), or one the
    /// daemon's user may not write.
    NotPermitted,
    /// A read-only filesystem (EROFS).
    ReadOnly,
    /// The filesystem cannot preallocate: no reserve for a full disk.
    NoPreallocation,
    /// The disk reports an I/O error, or anything else (`space_problem` says what).
    Other,
}

impl SpaceCause {
    /// The cause of `error`, by its kind (which std decodes from the raw OS error: ENOSPC
    /// and EDQUOT, EPERM and EACCES, EROFS; on Windows ERROR_DISK_FULL, ERROR_ACCESS_DENIED,
    /// ERROR_WRITE_PROTECT).
    pub(crate) fn of(error: &io::Error) -> SpaceCause {
        match error.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => SpaceCause::Full,
            io::ErrorKind::PermissionDenied => SpaceCause::NotPermitted,
            io::ErrorKind::ReadOnlyFilesystem => SpaceCause::ReadOnly,
            _ => SpaceCause::Other,
        }
    }

    /// What the log says, and `forewarn status`: the problem, then the fix.
    pub fn message(self) -> &'static str {
        match self {
            SpaceCause::Full => log_messages::JOURNAL_ON_RESERVE,
            SpaceCause::NotPermitted => log_messages::JOURNAL_DIR_NOT_PERMITTED,
            SpaceCause::ReadOnly => log_messages::JOURNAL_DIR_READ_ONLY,
            SpaceCause::NoPreallocation => log_messages::JOURNAL_NO_PREALLOCATION,
            SpaceCause::Other => log_messages::JOURNAL_CANNOT_COMPACT,
        }
    }
}

/// Why the journal could not compact or set space aside: the cause, and what the system
/// answered with its fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpaceProblem {
    pub cause: SpaceCause,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 45 part 6: an immutable state directory (EPERM) was said to be full.
    #[test]
    fn a_space_problem_is_named_by_the_errors_kind_and_says_its_fix() {
        let kinds = [
            (io::ErrorKind::StorageFull, SpaceCause::Full),
            (io::ErrorKind::QuotaExceeded, SpaceCause::Full),
            (io::ErrorKind::PermissionDenied, SpaceCause::NotPermitted),
            (io::ErrorKind::ReadOnlyFilesystem, SpaceCause::ReadOnly),
            (io::ErrorKind::Other, SpaceCause::Other),
        ];
        for (kind, cause) in kinds {
            assert_eq!(SpaceCause::of(&io::Error::from(kind)), cause, "{kind:?}");
        }
        // What the system answers: EPERM (`chattr +i`), EACCES, EROFS, ENOSPC, EDQUOT, EIO.
        let raw: &[(i32, SpaceCause)] = match cfg!(unix) {
            true => &[
                (1, SpaceCause::NotPermitted),
                (13, SpaceCause::NotPermitted),
                (30, SpaceCause::ReadOnly),
                (28, SpaceCause::Full),
                (122, SpaceCause::Full),
                (5, SpaceCause::Other),
            ],
            // ERROR_ACCESS_DENIED, ERROR_DISK_FULL.
            false => &[(5, SpaceCause::NotPermitted), (112, SpaceCause::Full)],
        };
        for (code, cause) in raw {
            let error = io::Error::from_raw_os_error(*code);
            assert_eq!(SpaceCause::of(&error), *cause, "{error}");
        }
        // Each says the problem, then the fix; only a full disk is called full.
        for (cause, problem, fix) in [
            (SpaceCause::Full, "is full", "until there is room"),
            (SpaceCause::NotPermitted, "immutable", "chattr -i"),
            (SpaceCause::ReadOnly, "read-only", "remount,rw"),
            (
                SpaceCause::NoPreallocation,
                "cannot set space aside",
                "ext4",
            ),
            (SpaceCause::Other, "cannot compact", "what to do"),
        ] {
            let message = cause.message();
            assert!(message.contains(problem), "{cause:?}: {message}");
            assert!(message.contains(fix), "{cause:?}: {message}");
            assert_eq!(
                message.contains("full:"),
                cause == SpaceCause::Full,
                "{cause:?}: {message}"
            );
        }
    }

    #[test]
    fn status_shows_the_cause_beside_the_details() {
        let health = StorageHealth::default();
        health.update_journal(|journal| {
            journal.space_problem = Some(SpaceProblem {
                cause: SpaceCause::NotPermitted,
                detail: "could not open /state/journal.log.new: Operation not permitted".into(),
            });
        });
        let view = health.view().journal;
        assert_eq!(view.state, JournalState::OnReserve);
        assert_eq!(view.space_problem_cause, Some(SpaceCause::NotPermitted));
        let json = serde_json::to_value(&view).expect("JSON");
        assert_eq!(json["space_problem_cause"], "not-permitted");
        assert!(
            json["space_problem"]
                .as_str()
                .is_some_and(|detail| detail.contains("Operation not permitted")),
            "{json}"
        );
    }
}
