//! `on-start`, once per daemon run and plugin: started when a plugin first appears in the set,
//! and awaited by that plugin's first `on-event` call, so recovery always comes first.

use forewarn_imds::PluginName;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use forewarn_runtime::wit::latest::{StartContext, VmInfo};
use forewarn_runtime::{StartAnswer, StartOutcome};
use tokio::sync::OnceCell;

use crate::log_messages;
use crate::plugins::set::{LoadedPlugin, PluginSet};

/// The longest an `on-start` runs (or the plugin's budget, if shorter): a call of the plugin
/// waits for it, so recovery must leave a short notice its time.
pub(crate) const ON_START_BUDGET_MAX: Duration = Duration::from_secs(10);

/// The `on-start` of each plugin of this run, by name: done, running, or not begun.
pub(crate) struct PluginStarts {
    context: StartContext,
    starts: HashMap<PluginName, Arc<OnceCell<()>>>,
}

impl PluginStarts {
    /// Starts of this run on VM `vm_name`; `first_run` when the daemon found no journal.
    pub(crate) fn new(vm_name: &str, vm: VmInfo, first_run: bool) -> Self {
        PluginStarts {
            context: StartContext {
                vm_name: vm_name.to_owned(),
                vm,
                first_run,
                deadline_unix_ms: 0,
            },
            starts: HashMap::new(),
        }
    }

    /// Begins `on-start` for every plugin of `set` not seen before in this run.
    pub(crate) fn start_new(&mut self, set: &PluginSet) {
        for loaded in set.all() {
            if self.starts.contains_key(loaded.name()) {
                continue;
            }
            let gate = Arc::new(OnceCell::new());
            self.starts
                .insert(PluginName::from(loaded.name()), gate.clone());
            let loaded = loaded.clone();
            let context = self.context.clone();
            tokio::spawn(async move { run_once(&gate, &loaded, &context).await });
        }
    }

    /// What a call of `plugin` awaits before `on-event`: its `on-start`, run if not begun.
    pub(crate) fn gate(&self, plugin: &PluginName) -> Option<StartGate> {
        let gate = self.starts.get(plugin)?.clone();
        Some(StartGate {
            gate,
            context: self.context.clone(),
        })
    }
}

/// One plugin's `on-start`, to await (or run) before its first `on-event`.
pub(crate) struct StartGate {
    gate: Arc<OnceCell<()>>,
    context: StartContext,
}

impl StartGate {
    /// Returns once `loaded`'s `on-start` has run (here, or in the task that began it), or
    /// after `at_most`; how long it waited.
    pub(crate) async fn passed_within(&self, loaded: &LoadedPlugin, at_most: Duration) -> Duration {
        let started = tokio::time::Instant::now();
        let run = run_once(&self.gate, loaded, &self.context);
        let _done_or_not = tokio::time::timeout(at_most, run).await;
        started.elapsed()
    }
}

/// Runs `on-start` unless it already ran or is running (then waits for it).
async fn run_once(gate: &OnceCell<()>, loaded: &LoadedPlugin, context: &StartContext) {
    gate.get_or_init(|| async {
        let budget = loaded.manifest.budget.min(ON_START_BUDGET_MAX);
        let outcome = loaded.plugin.start(context, budget).await;
        log_outcome(loaded.name(), context.first_run, &outcome);
    })
    .await;
}

fn log_outcome(plugin: &str, first_run: bool, outcome: &StartOutcome) {
    let elapsed_ms = forewarn_imds::millis(outcome.elapsed);
    match &outcome.answer {
        Ok(StartAnswer::Done) => tracing::info!(
            plugin,
            first_run,
            elapsed_ms,
            "{}",
            log_messages::PLUGIN_STARTED
        ),
        Ok(StartAnswer::NotExported) => {}
        Err(failure) => tracing::warn!(
            plugin,
            first_run,
            elapsed_ms,
            outcome = failure.kind(),
            reason = %failure.reason(),
            "{}",
            log_messages::PLUGIN_START_FAILED
        ),
    }
}
