//! The clock that lets wasmtime interrupt plugins: a thread that advances the engine's
//! epoch every millisecond while at least one plugin call is running, and sleeps otherwise.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread;
use std::time::Duration;

use wasmtime::Engine;

use crate::mutex::lock;

/// How often the epoch advances while calls run: the granularity of budget enforcement.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Advances an engine's epoch while calls are active. Dropping it stops the thread.
pub(crate) struct EpochTicker {
    shared: Arc<TickerShared>,
}

struct TickerShared {
    active_calls: Mutex<usize>,
    wake: Condvar,
}

/// Held for the length of one plugin call; the ticker runs while any guard is alive.
pub(crate) struct ActiveCall {
    shared: Arc<TickerShared>,
}

impl EpochTicker {
    /// Starts the ticker thread for `engine`.
    pub(crate) fn start(engine: Engine) -> std::io::Result<EpochTicker> {
        let shared = Arc::new(TickerShared {
            active_calls: Mutex::new(0),
            wake: Condvar::new(),
        });
        let weak = Arc::downgrade(&shared);
        thread::Builder::new()
            .name("forewarn-epoch".into())
            .spawn(move || tick_while_alive(engine, weak))?;
        Ok(EpochTicker { shared })
    }

    /// Marks a call as running until the returned guard is dropped.
    pub(crate) fn enter(&self) -> ActiveCall {
        let mut active = lock(&self.shared.active_calls);
        *active += 1;
        // Only the first call in wakes the ticker; while calls overlap it is already ticking.
        if *active == 1 {
            self.shared.wake.notify_all();
        }
        ActiveCall {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        // Wake the thread so it notices the ticker is gone (its Weak no longer upgrades
        // once every ActiveCall is dropped too).
        self.shared.wake.notify_all();
    }
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        let mut active = lock(&self.shared.active_calls);
        *active = active.saturating_sub(1);
    }
}

fn tick_while_alive(engine: Engine, shared: Weak<TickerShared>) {
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let active = lock(&shared.active_calls);
        if *active == 0 {
            // Sleep until a call starts; wake now and then to notice a dropped ticker.
            let _unused = shared.wake.wait_timeout(active, Duration::from_millis(500));
            continue;
        }
        drop(active);
        drop(shared);
        thread::sleep(TICK);
        engine.increment_epoch();
    }
}
