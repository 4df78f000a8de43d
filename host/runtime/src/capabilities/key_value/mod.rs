//! The durable key-value store: `state-get`, `state-set`, `state-delete` keep a plugin's
//! values across calls and restarts. Every plugin has it, within its quota and per-call
//! limits (writes and bytes per call, bytes on disk per call); an instance made ahead of
//! its call may not read or write it.

pub(crate) mod store;

pub use store::{
    DiskBudget, KeyValueStore, KeyValueStoreError, MemoryKeyValueStore, STATE_DISK_BYTES_PER_CALL,
};

use crate::call_state::CallState;
use crate::wit::latest::HostError;

/// Most state writes (sets and deletes) one call may make.
pub const STATE_WRITES_PER_CALL: u32 = 64;
/// Most bytes (keys and values) the state writes of one call may carry.
pub(crate) const STATE_WRITE_BYTES_PER_CALL: usize = 1024 * 1024;

/// The host function `state-get`: None while the instance is made ahead of its call.
pub(crate) fn get(call: &mut CallState, key: &str) -> Option<Vec<u8>> {
    if call.refuse_while_preparing() {
        return None;
    }
    call.services.key_value.get(&call.plugin, key)
}

/// The host function `state-set`: durable when it returns Ok.
pub(crate) async fn set(
    call: &mut CallState,
    key: String,
    value: Vec<u8>,
) -> Result<(), HostError> {
    call.not_while_preparing()?;
    take_write(call, key.len().saturating_add(value.len())).map_err(host_error)?;
    let store = call.services.key_value.clone();
    let plugin = call.plugin.clone();
    let budget = call.state_disk_budget;
    let write = move || store.set(&plugin, &key, &value, budget).map_err(host_error);
    let written = off_the_workers(write, call.deadline).await?;
    call.state_disk_budget = budget.after(written);
    Ok(())
}

/// The host function `state-delete`: no error when the key was absent.
pub(crate) async fn delete(call: &mut CallState, key: String) -> Result<(), HostError> {
    call.not_while_preparing()?;
    take_write(call, key.len()).map_err(host_error)?;
    let store = call.services.key_value.clone();
    let plugin = call.plugin.clone();
    let budget = call.state_disk_budget;
    let write = move || store.delete(&plugin, &key, budget).map_err(host_error);
    let written = off_the_workers(write, call.deadline).await?;
    call.state_disk_budget = budget.after(written);
    Ok(())
}

/// Counts one state write of `bytes` against the call's limits; Err names the limit.
fn take_write(call: &mut CallState, bytes: usize) -> Result<(), KeyValueStoreError> {
    if call.state_writes >= STATE_WRITES_PER_CALL {
        return Err(KeyValueStoreError::Refused(format!(
            "plugin `{}` made more than {STATE_WRITES_PER_CALL} state writes in one call; \
             keep related values under one key, or write once at the end of the call",
            call.plugin
        )));
    }
    let total = call.state_write_bytes.saturating_add(bytes);
    if total > STATE_WRITE_BYTES_PER_CALL {
        return Err(KeyValueStoreError::Refused(format!(
            "plugin `{}` wrote more than {STATE_WRITE_BYTES_PER_CALL} bytes of state in one \
             call; store less, or spread the writes over calls",
            call.plugin
        )));
    }
    call.state_writes += 1;
    call.state_write_bytes = total;
    Ok(())
}

/// Runs a blocking state write (it fsyncs) on the blocking pool, not on an async worker;
/// `timed-out` at the call's deadline (the write itself still completes, or not, on its own).
/// Ok holds the bytes the write put on disk.
async fn off_the_workers(
    write: impl FnOnce() -> Result<u64, HostError> + Send + 'static,
    deadline: std::time::Instant,
) -> Result<u64, HostError> {
    let task = tokio::task::spawn_blocking(write);
    match tokio::time::timeout_at(deadline.into(), task).await {
        Err(_elapsed) => Err(HostError::TimedOut),
        Ok(Err(join_error)) => Err(HostError::Failed(format!(
            "the state write failed: {join_error}"
        ))),
        Ok(Ok(result)) => result,
    }
}

/// How a state store's error reaches the plugin: a rule it broke is `invalid`, a store
/// that failed is `failed`.
fn host_error(error: KeyValueStoreError) -> HostError {
    match error {
        KeyValueStoreError::Refused(message) => HostError::Invalid(message),
        KeyValueStoreError::Failed(message) => HostError::Failed(message),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::capabilities::testing::call;
    use crate::services::HostServices;
    use forewarn_manifest::Capabilities;

    fn memory_call() -> CallState {
        let services = HostServices {
            key_value: Arc::new(MemoryKeyValueStore::default()),
            ..HostServices::default()
        };
        call(Capabilities::default(), services)
    }

    #[tokio::test]
    async fn values_are_stored_read_and_deleted_for_the_calling_plugin() {
        let mut first = memory_call();
        let store = first.services.key_value.clone();
        assert_eq!(get(&mut first, "k"), None);
        set(&mut first, "k".into(), b"v".to_vec())
            .await
            .expect("set");
        assert_eq!(get(&mut first, "k"), Some(b"v".to_vec()));
        assert_eq!(
            store.get("p", "k"),
            Some(b"v".to_vec()),
            "stored under the plugin"
        );
        assert_eq!(store.get("other", "k"), None);
        delete(&mut first, "k".into()).await.expect("delete");
        assert_eq!(get(&mut first, "k"), None);
        delete(&mut first, "absent".into())
            .await
            .expect("deleting nothing is fine");
    }

    #[tokio::test]
    async fn a_call_makes_at_most_its_number_of_writes() {
        let mut call = memory_call();
        for index in 0..STATE_WRITES_PER_CALL {
            set(&mut call, format!("k{index}"), vec![1])
                .await
                .expect("within the limit");
        }
        let over = set(&mut call, "one-more".into(), vec![1]).await;
        assert!(
            matches!(&over, Err(HostError::Invalid(message)) if message.contains("more than 64 state writes")),
            "{over:?}"
        );
        assert_eq!(get(&mut call, "one-more"), None);
    }

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

    /// A store whose every write rewrites a file of `FILE_BYTES`, as the daemon's does
    /// once a plugin holds its full quota, refusing what the budget does not allow.
    struct WholeFileStore;

    const FILE_BYTES: u64 = 1024 * 1024;

    impl KeyValueStore for WholeFileStore {
        fn get(&self, _plugin: &str, _key: &str) -> Option<Vec<u8>> {
            None
        }

        fn set(&self, _: &str, _: &str, _: &[u8], budget: DiskBudget) -> WriteResult {
            match budget.allows(FILE_BYTES) {
                true => Ok(FILE_BYTES),
                false => Err(KeyValueStoreError::Refused("over the disk budget".into())),
            }
        }

        fn delete(&self, plugin: &str, key: &str, budget: DiskBudget) -> WriteResult {
            self.set(plugin, key, b"", budget)
        }
    }

    type WriteResult = Result<u64, KeyValueStoreError>;

    #[tokio::test]
    async fn a_call_writes_to_disk_no_more_than_its_budget() {
        let mut call = memory_call();
        call.services.key_value = Arc::new(WholeFileStore);
        let mut written = 0;
        for index in 0..STATE_WRITES_PER_CALL {
            let write = match index % 2 {
                0 => set(&mut call, "k".into(), vec![1]).await,
                _ => delete(&mut call, "k".into()).await,
            };
            match write {
                Ok(()) => written += FILE_BYTES,
                Err(HostError::Invalid(_)) => break,
                Err(error) => panic!("write {index}: {error:?}"),
            }
        }
        assert_eq!(written, STATE_DISK_BYTES_PER_CALL);
    }
}
