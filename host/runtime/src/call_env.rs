//! What every call of every plugin shares — the epoch ticker, the host services — and the
//! fresh store each call runs in (on the plugin version's own engine), under the plugin's
//! memory cap and deadline.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Engine, Store, UpdateDeadline};

use crate::call_state::CallState;
use crate::epoch::{ActiveCall, EpochTicker};
use crate::log_budget::{LogBudget, LogBudgets};
use crate::ready_instance::InstanceTiming;
use crate::services::HostServices;
use forewarn_manifest::PluginSettings;

/// Shared by the runtime and every plugin it loaded: cheap to clone.
#[derive(Clone)]
pub(crate) struct CallEnv {
    inner: Arc<CallEnvInner>,
}

struct CallEnvInner {
    ticker: EpochTicker,
    services: HostServices,
    timing: InstanceTiming,
    log_budgets: LogBudgets,
}

impl CallEnv {
    /// Bundles the running epoch ticker, the services plugins share and when each call's
    /// instance is made.
    pub(crate) fn new(ticker: EpochTicker, services: HostServices, timing: InstanceTiming) -> Self {
        CallEnv {
            inner: Arc::new(CallEnvInner {
                ticker,
                services,
                timing,
                log_budgets: LogBudgets::default(),
            }),
        }
    }

    /// When each call's fresh instance is made.
    pub(crate) fn timing(&self) -> InstanceTiming {
        self.inner.timing
    }

    /// Keeps `engine`'s epoch ticking until the returned guard is dropped.
    pub(crate) fn enter_call(&self, engine: &Engine) -> ActiveCall {
        self.inner.ticker.enter(engine)
    }

    /// The log budget of the plugin `name`, kept across its versions (log_budget.rs).
    pub(crate) fn log_budget(&self, name: &str) -> Arc<LogBudget> {
        self.inner.log_budgets.of(name)
    }

    /// A fresh store on `engine` (the plugin version's) for one call of `plugin`: its
    /// memory cap and log budget, and interrupted at `deadline`.
    pub(crate) fn new_store(
        &self,
        engine: &Engine,
        plugin: Arc<str>,
        settings: Arc<PluginSettings>,
        log_budget: Arc<LogBudget>,
        deadline: Instant,
    ) -> Store<CallState> {
        let services = self.inner.services.clone();
        let state = CallState::with_log_budget(plugin, settings, services, log_budget, deadline);
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limits);
        // Every epoch tick (1 ms) the plugin yields to the executor, so the wall-clock
        // timeout can fire; at the deadline the plugin is interrupted with a trap.
        // The deadline is read from the store's data, so an instance made ahead of its call
        // (ready_instance.rs) runs under the deadline the call sets when it takes it.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|store| {
            if Instant::now() >= store.data().deadline {
                return Ok(UpdateDeadline::Interrupt);
            }
            Ok(UpdateDeadline::Yield(1))
        });
        store
    }

    /// Gives a store made ahead of time the deadline of the call that takes it, and the
    /// host functions that were refused while it was made.
    pub(crate) fn begin_call(store: &mut Store<CallState>, deadline: Instant) {
        let state = store.data_mut();
        state.deadline = deadline;
        state.preparing = false;
        store.set_epoch_deadline(1);
    }
}
