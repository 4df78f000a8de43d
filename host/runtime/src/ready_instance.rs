//! The next call's fresh instance, made ahead of time: after each call (and after loading) a
//! background task instantiates the plugin again, so the next call starts with it ready.
//!
//! Each instance still serves exactly one call; only the moment it is made moves, and its
//! making is charged to that call's budget. A call that finds no ready instance (two calls
//! back to back) makes one itself, as it always did. A plugin whose instance cannot be made
//! ahead cleanly (too slow, failing, asking for host functions while being made, or holding
//! many memories) is made at each call from then on, exactly as before.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use wasmtime::Store;

use crate::call_state::CallState;
use crate::mutex::lock;
use crate::wit::Handler;

/// Longest a preparation may run (a module's start function included), and never longer than
/// the plugin's last call budget. Instantiating even an 18 MB Python component takes about
/// 1 ms; a plugin whose instance takes longer is made at each call instead.
pub const PREPARE_BUDGET: Duration = Duration::from_secs(1);

/// Most linear memories an instance made ahead may hold: each holds a slot of the shared
/// instance pool between calls. Rust, C, Python and JavaScript plugins have one to three; a
/// component with more is made at each call, holding its slots only while it runs.
pub(crate) const READY_MAX_MEMORIES: usize = 8;

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
    /// How long making it took: charged to the call that takes it.
    pub(crate) took: Duration,
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
    /// Set once an instance could not be made ahead cleanly: every call makes its own.
    given_up: AtomicBool,
    /// The budget of the last call, in milliseconds: the next preparation gets no more
    /// (0 until the first call, when the preparation gets [`PREPARE_BUDGET`]).
    last_budget_ms: AtomicU64,
    /// Used instances handed to background tasks and not dropped yet.
    pub(crate) pending_drops: PendingDrops,
}

/// Most used instances waiting for a background task to drop them; a call that finds this
/// many drops its own (calls in the daemon are seconds apart: only calls made back to back
/// get here). Each holds slots of the plugin's own pool until it is dropped.
pub(crate) const PENDING_DROPS_MAX: usize = 4;

/// Counts the used instances waiting to be dropped in the background.
#[derive(Default)]
pub(crate) struct PendingDrops(Arc<AtomicUsize>);

/// One used instance waiting to be dropped; dropping the ticket (after the instance) ends
/// the wait.
pub(crate) struct PendingDrop(Arc<AtomicUsize>);

impl PendingDrops {
    /// A ticket to drop one used instance in the background, or None when
    /// [`PENDING_DROPS_MAX`] already wait: the caller drops it at once.
    pub(crate) fn enter(&self) -> Option<PendingDrop> {
        let waiting = self.0.fetch_add(1, Ordering::AcqRel);
        if waiting >= PENDING_DROPS_MAX {
            self.0.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(PendingDrop(self.0.clone()))
    }
}

impl Drop for PendingDrop {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl NextInstance {
    /// The ready instance, if one is waiting.
    pub(crate) fn take(&self) -> Option<ReadyInstance> {
        lock(&self.slot).take()
    }

    /// Makes an instance with `make` unless one is ready or making them ahead was given up;
    /// waits for a task making one already. `make` returning None (the instance could not
    /// be made cleanly) gives up making instances ahead for this plugin version.
    pub(crate) async fn fill<F>(&self, make: impl FnOnce() -> F)
    where
        F: Future<Output = Option<ReadyInstance>>,
    {
        let _making = self.making.lock().await;
        if self.given_up() || lock(&self.slot).is_some() {
            return;
        }
        let made = make().await;
        if made.is_none() {
            self.given_up.store(true, Ordering::Relaxed);
        }
        *lock(&self.slot) = made;
    }

    /// Whether instances of this plugin version are made at each call from now on.
    fn given_up(&self) -> bool {
        self.given_up.load(Ordering::Relaxed)
    }

    /// Remembers a call's budget: the next preparation may not take longer.
    pub(crate) fn note_budget(&self, budget: Duration) {
        let millis = forewarn_events::millis(budget);
        self.last_budget_ms.store(millis, Ordering::Relaxed);
    }

    /// How long the next preparation may take: [`PREPARE_BUDGET`], or the last call's
    /// budget when that was shorter.
    pub(crate) fn prepare_budget(&self) -> Duration {
        match self.last_budget_ms.load(Ordering::Relaxed) {
            0 => PREPARE_BUDGET,
            millis => PREPARE_BUDGET.min(Duration::from_millis(millis)),
        }
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
