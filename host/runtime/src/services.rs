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

/// Durable per-plugin key/value storage behind `state-get`, `state-set`, `state-delete`.
/// The daemon implements it on disk; `MemoryStateStore` serves tests and `plugin check`.
pub trait StateStore: Send + Sync {
    /// The value stored under `key` for `plugin`, if any.
    fn get(&self, plugin: &str, key: &str) -> Option<Vec<u8>>;
    /// Stores `value`; durable when this returns Ok. Err says why (over quota, disk error).
    fn set(&self, plugin: &str, key: &str, value: &[u8]) -> Result<(), StateStoreError>;
    /// Removes `key`; no error if it was absent.
    fn delete(&self, plugin: &str, key: &str) -> Result<(), StateStoreError>;
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

    fn set(&self, plugin: &str, key: &str, value: &[u8]) -> Result<(), StateStoreError> {
        lock(&self.values).insert((plugin.to_owned(), key.to_owned()), value.to_vec());
        Ok(())
    }

    fn delete(&self, plugin: &str, key: &str) -> Result<(), StateStoreError> {
        lock(&self.values).remove(&(plugin.to_owned(), key.to_owned()));
        Ok(())
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
