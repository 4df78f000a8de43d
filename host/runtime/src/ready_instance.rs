//! The next call's fresh instance, made ahead of time: after each call (and after loading) a
//! background task instantiates the plugin again, so the next call starts with it ready.
//!
//! Each instance still serves exactly one call; only the moment it is made moves. A call
//! that finds no ready instance (two calls back to back, or a failed preparation) makes one
//! itself, as it always did, and reports any failure as its own.

use std::sync::Mutex;
use std::time::Duration;

use tokio::task::JoinHandle;
use wasmtime::Store;

use crate::call_state::CallState;
use crate::mutex::lock;
use crate::wit::Handler;

/// Longest a preparation may run (a module's start function included). Instantiating even a
/// 18 MB Python component takes about 2 ms; one that takes longer is left to the next call,
/// which instantiates under its own budget and reports what went wrong.
pub const PREPARE_BUDGET: Duration = Duration::from_secs(1);

/// When a call's fresh instance is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InstanceTiming {
    /// Ahead of the call, in the background, right after the previous call (or the load):
    /// the call itself only runs the plugin.
    #[default]
    Ahead,
    /// At the start of the call, on its critical path (the baseline benchmarks compare with).
    AtCall,
}

/// An instance made ahead of time, with the store it lives in, waiting for its one call.
pub(crate) struct ReadyInstance {
    pub(crate) store: Store<CallState>,
    pub(crate) handler: Handler,
}

/// Holds at most one ready instance for one plugin version. Taking it never waits: the
/// slot's lock is held only to move an instance in or out, and a separate lock is held by
/// the one task making an instance.
#[derive(Default)]
pub(crate) struct NextInstance {
    slot: Mutex<Option<ReadyInstance>>,
    making: tokio::sync::Mutex<()>,
    /// The last background task that drops a used instance and makes the next one.
    background: Mutex<Option<JoinHandle<()>>>,
}

impl NextInstance {
    /// The ready instance, if one is waiting.
    pub(crate) fn take(&self) -> Option<ReadyInstance> {
        lock(&self.slot).take()
    }

    /// Makes an instance with `make` unless one is ready; waits for a task making one
    /// already. `make` returning None (the instance could not be made) leaves the slot empty.
    pub(crate) async fn fill<F>(&self, make: impl FnOnce() -> F)
    where
        F: Future<Output = Option<ReadyInstance>>,
    {
        let _making = self.making.lock().await;
        if lock(&self.slot).is_some() {
            return;
        }
        let made = make().await;
        *lock(&self.slot) = made;
    }

    /// Remembers the background task started after a call (replacing an older one, which
    /// runs on by itself).
    pub(crate) fn set_background(&self, task: JoinHandle<()>) {
        *lock(&self.background) = Some(task);
    }

    /// Waits until the last background task has ended (its used instance dropped, the
    /// next one made or given up).
    pub(crate) async fn settle(&self) {
        let task = lock(&self.background).take();
        if let Some(task) = task {
            let _ended = task.await;
        }
    }

    /// Whether an instance is ready, once any task making one has finished.
    pub(crate) async fn is_ready(&self) -> bool {
        let _making = self.making.lock().await;
        lock(&self.slot).is_some()
    }
}
