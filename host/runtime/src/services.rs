//! What the daemon lends to plugins through the `host` interface, and what each plugin is
//! allowed to use of it: durable state, readiness, HTTP, operator actions, per-plugin grants.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http::HttpClient;
use crate::identity::ManagedIdentity;
use crate::mutex::lock;
use crate::permissions::Grants;

/// Why a [`StateStore`] did not store or delete a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateStoreError {
    /// The operation breaks a rule the plugin can keep (over its quota, too many writes in
    /// one call): the plugin sees `invalid` with this text.
    #[error("{0}")]
    Refused(String),
    /// The store could not do it (disk full, I/O error): not the plugin's doing; the plugin
    /// sees `failed` with this text.
    #[error("{0}")]
    Failed(String),
}

/// Most bytes the state writes of one call may put on disk (a store that rewrites a whole
/// file per write counts the whole file each time). The first write of a call is allowed
/// whatever its size, so that a plugin whose state has grown past this can still shrink it.
pub const STATE_DISK_BYTES_PER_CALL: u64 = 4 * 1024 * 1024;

/// Durable per-plugin key/value storage behind `state-get`, `state-set`, `state-delete`.
/// The daemon implements it on disk; `MemoryStateStore` serves tests and `plugin check`.
///
/// A write gets `disk_budget`, what its call may still write to disk
/// ([`STATE_DISK_BYTES_PER_CALL`] less what its earlier writes wrote), and answers how many
/// bytes it wrote. A write that would put more than `disk_budget` on disk is refused
/// ([`StateStoreError::Refused`]) — unless it is its call's first, which is always allowed.
pub trait StateStore: Send + Sync {
    /// The value stored under `key` for `plugin`, if any. Never waits for a write.
    fn get(&self, plugin: &str, key: &str) -> Option<Vec<u8>>;
    /// Stores `value`; durable when this returns Ok, with the bytes written to disk. Err
    /// says why not (over quota, over `disk_budget`, disk error).
    fn set(
        &self,
        plugin: &str,
        key: &str,
        value: &[u8],
        disk_budget: DiskBudget,
    ) -> Result<u64, StateStoreError>;
    /// Removes `key`, with the bytes written to disk; no error if it was absent.
    fn delete(
        &self,
        plugin: &str,
        key: &str,
        disk_budget: DiskBudget,
    ) -> Result<u64, StateStoreError>;
}

/// What one state write may put on disk: the rest of its call's
/// [`STATE_DISK_BYTES_PER_CALL`], and whether it is the call's first write (always allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskBudget {
    /// Bytes the call may still write.
    pub remaining: u64,
    /// Whether the call has written nothing yet.
    pub first_write: bool,
}

impl DiskBudget {
    /// A call's budget before its first write.
    pub const fn per_call() -> DiskBudget {
        DiskBudget {
            remaining: STATE_DISK_BYTES_PER_CALL,
            first_write: true,
        }
    }

    /// Whether a write of `bytes` fits.
    pub fn allows(self, bytes: u64) -> bool {
        self.first_write || bytes <= self.remaining
    }

    /// The budget left after a write of `bytes`.
    pub fn after(self, bytes: u64) -> DiskBudget {
        DiskBudget {
            remaining: self.remaining.saturating_sub(bytes),
            first_write: self.first_write && bytes == 0,
        }
    }
}

/// A `StateStore` that forgets everything when dropped.
#[derive(Default)]
pub struct MemoryStateStore {
    values: Mutex<HashMap<(String, String), Vec<u8>>>,
}

impl StateStore for MemoryStateStore {
    fn get(&self, plugin: &str, key: &str) -> Option<Vec<u8>> {
        lock(&self.values)
            .get(&(plugin.to_owned(), key.to_owned()))
            .cloned()
    }

    /// Writes nothing to disk: the budget is never used.
    fn set(
        &self,
        plugin: &str,
        key: &str,
        value: &[u8],
        _disk_budget: DiskBudget,
    ) -> Result<u64, StateStoreError> {
        lock(&self.values).insert((plugin.to_owned(), key.to_owned()), value.to_vec());
        Ok(0)
    }

    fn delete(
        &self,
        plugin: &str,
        key: &str,
        _disk_budget: DiskBudget,
    ) -> Result<u64, StateStoreError> {
        lock(&self.values).remove(&(plugin.to_owned(), key.to_owned()));
        Ok(0)
    }
}

/// The VM's readiness for load balancers: ready while no plugin has marked it not ready.
#[derive(Default)]
pub struct Readiness {
    not_ready: Mutex<BTreeSet<String>>,
}

impl Readiness {
    /// Records `plugin`'s view: `false` holds the VM out of rotation until it says `true`.
    /// Records `plugin`'s view; returns whether it changed (a plugin that repeats itself on
    /// every call changes nothing).
    pub fn set(&self, plugin: &str, ready: bool) -> bool {
        let mut not_ready = lock(&self.not_ready);
        if ready {
            not_ready.remove(plugin)
        } else {
            not_ready.insert(plugin.to_owned())
        }
    }

    /// Whether every plugin considers the VM ready.
    pub fn is_ready(&self) -> bool {
        lock(&self.not_ready).is_empty()
    }

    /// The plugins currently holding the VM not ready, sorted.
    pub fn holders(&self) -> Vec<String> {
        lock(&self.not_ready).iter().cloned().collect()
    }
}

/// An operator-defined command (`[actions.NAME]` in the daemon config): run without a
/// shell, killed after `timeout` (or at the calling plugin's deadline, if sooner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionSpec {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// How long it may run before its process group is killed.
    pub timeout: Duration,
}

/// The services shared by every plugin of one daemon.
#[derive(Clone)]
pub struct HostServices {
    /// Where plugins' durable state lives.
    pub state: Arc<dyn StateStore>,
    /// The VM's readiness, as plugins set it.
    pub readiness: Arc<Readiness>,
    /// The actions the operator defined, by name. A plugin may run one only when its
    /// grants name it too.
    pub actions: Arc<BTreeMap<String, ActionSpec>>,
    /// The client behind `http-send` (no proxy, no redirects).
    pub http: HttpClient,
    /// The VM's managed identity behind `azure-access-token`; none when the daemon has no
    /// identity endpoint.
    pub identity: Option<Arc<ManagedIdentity>>,
}

impl Default for HostServices {
    fn default() -> Self {
        HostServices {
            state: Arc::new(MemoryStateStore::default()),
            readiness: Arc::new(Readiness::default()),
            actions: Arc::new(BTreeMap::new()),
            http: HttpClient::default(),
            identity: None,
        }
    }
}

/// Per-plugin settings the runtime enforces on every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSettings {
    /// Cap on the plugin's linear memory, in bytes.
    pub memory_limit_bytes: u64,
    /// Values returned by the `config` host function.
    pub config: BTreeMap<String, String>,
    /// What the plugin may use of the host.
    pub grants: Grants,
}

/// The default memory cap: 64 MiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 * 1024 * 1024;

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            memory_limit_bytes: DEFAULT_MEMORY_LIMIT,
            config: BTreeMap::new(),
            grants: Grants::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_first_state_write_is_allowed_whatever_its_size_the_rest_share_the_budget() {
        let first = DiskBudget::per_call();
        assert!(first.allows(10 * STATE_DISK_BYTES_PER_CALL));
        let unchanged = first.after(0);
        assert!(
            unchanged.first_write,
            "a write that wrote nothing is not counted"
        );
        let rest = first.after(STATE_DISK_BYTES_PER_CALL - 100);
        assert!(rest.allows(100));
        assert!(!rest.allows(101));
        let spent = first.after(10 * STATE_DISK_BYTES_PER_CALL);
        assert_eq!(spent.remaining, 0);
        assert!(!spent.allows(1));
        assert!(spent.allows(0));
    }

    #[test]
    fn readiness_is_held_by_any_plugin() {
        let readiness = Readiness::default();
        readiness.set("lb-drain", false);
        readiness.set("other", false);
        readiness.set("lb-drain", true);
        assert!(!readiness.is_ready());
        assert_eq!(readiness.holders(), vec!["other".to_owned()]);
        readiness.set("other", true);
        assert!(readiness.is_ready());
    }
}
