//! The store behind the key-value capability: the trait the daemon implements on disk, the
//! per-call disk budget, and an in-memory store for tests and `plugin check`.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::mutex::lock;

/// Why a [`KeyValueStore`] did not store or delete a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyValueStoreError {
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
/// The daemon implements it on disk; `MemoryKeyValueStore` serves tests and `plugin check`.
///
/// A write gets `disk_budget`, what its call may still write to disk
/// ([`STATE_DISK_BYTES_PER_CALL`] less what its earlier writes wrote), and answers how many
/// bytes it wrote. A write that would put more than `disk_budget` on disk is refused
/// ([`KeyValueStoreError::Refused`]) — unless it is its call's first, which is always allowed.
pub trait KeyValueStore: Send + Sync {
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
    ) -> Result<u64, KeyValueStoreError>;
    /// Removes `key`, with the bytes written to disk; no error if it was absent.
    fn delete(
        &self,
        plugin: &str,
        key: &str,
        disk_budget: DiskBudget,
    ) -> Result<u64, KeyValueStoreError>;
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

/// A `KeyValueStore` that forgets everything when dropped.
#[derive(Default)]
pub struct MemoryKeyValueStore {
    values: Mutex<HashMap<(String, String), Vec<u8>>>,
}

impl KeyValueStore for MemoryKeyValueStore {
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
    ) -> Result<u64, KeyValueStoreError> {
        lock(&self.values).insert((plugin.to_owned(), key.to_owned()), value.to_vec());
        Ok(0)
    }

    fn delete(
        &self,
        plugin: &str,
        key: &str,
        _disk_budget: DiskBudget,
    ) -> Result<u64, KeyValueStoreError> {
        lock(&self.values).remove(&(plugin.to_owned(), key.to_owned()));
        Ok(0)
    }
}
