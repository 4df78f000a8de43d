//! The clock that lets wasmtime interrupt plugins: a thread that advances the epoch of every
//! engine with a plugin call running every millisecond, and sleeps while none runs. Each
//! plugin version has an engine of its own (plugin_engine.rs); one thread ticks them all.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread;
use std::time::Duration;

use wasmtime::Engine;

use crate::mutex::lock;

/// How often the epoch advances while calls run: the granularity of budget enforcement.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Advances the epoch of engines with calls running. Dropping it stops the thread.
pub(crate) struct EpochTicker {
    shared: Arc<TickerShared>,
}

struct TickerShared {
    /// Each engine with calls running, and how many.
    active: Mutex<Vec<(Engine, usize)>>,
    wake: Condvar,
}

/// Held for the length of one plugin call; the ticker advances its engine's epoch while
/// any guard of that engine is alive.
pub(crate) struct ActiveCall {
    shared: Arc<TickerShared>,
    engine: Engine,
}

impl EpochTicker {
    /// Starts the ticker thread.
    pub(crate) fn start() -> std::io::Result<EpochTicker> {
        let shared = Arc::new(TickerShared {
            active: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        });
        let weak = Arc::downgrade(&shared);
        thread::Builder::new()
            .name("forewarn-epoch".into())
            .spawn(move || tick_while_alive(weak))?;
        Ok(EpochTicker { shared })
    }

    /// Marks a call on `engine` as running until the returned guard is dropped.
    pub(crate) fn enter(&self, engine: &Engine) -> ActiveCall {
        let mut active = lock(&self.shared.active);
        match active
            .iter_mut()
            .find(|(running, _)| Engine::same(running, engine))
        {
            Some((_, calls)) => *calls += 1,
            None => active.push((engine.clone(), 1)),
        }
        // Only the first call in wakes the ticker; while calls overlap it is already ticking.
        if active.len() == 1 {
            self.shared.wake.notify_all();
        }
        ActiveCall {
            shared: self.shared.clone(),
            engine: engine.clone(),
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
        let mut active = lock(&self.shared.active);
        // The engine leaves the list with its last call, so a dropped plugin version's
        // engine (and its instance pool) is not kept alive by the ticker.
        active.retain_mut(|(running, calls)| {
            if Engine::same(running, &self.engine) {
                *calls = calls.saturating_sub(1);
            }
            *calls > 0
        });
    }
}

fn tick_while_alive(shared: Weak<TickerShared>) {
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let active = lock(&shared.active);
        if active.is_empty() {
            // Sleep until a call starts; wake now and then to notice a dropped ticker.
            let _unused = shared.wake.wait_timeout(active, Duration::from_millis(500));
            continue;
        }
        let engines: Vec<Engine> = active.iter().map(|(engine, _)| engine.clone()).collect();
        drop(active);
        drop(shared);
        thread::sleep(TICK);
        for engine in engines {
            engine.increment_epoch();
        }
    }
}
