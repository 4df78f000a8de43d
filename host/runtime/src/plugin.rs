//! A loaded plugin and one call into it: a fresh store and instance per call (made ahead of
//! time), under a memory cap and a deadline enforced by epoch interruption and a timeout.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use wasmtime::Trap;

use crate::call_env::CallEnv;
use crate::call_state::{CallState, LOG_LINE_MAX_BYTES, LOG_LINES_PER_CALL};
use crate::log_budget::LogBudget;
use crate::plugin_engine::PluginEngine;
use crate::plugin_log::{LogLevel, PLUGIN_LOG_TARGET, PluginLogLine};
use crate::ready_instance::{InstanceTiming, NextInstance, READY_MAX_MEMORIES, ReadyInstance};
use crate::wit::latest::{Context, Decision, Phase, ScheduledEvent, StartContext, VmInfo};
use crate::wit::{Handler, HandlerPre};
use forewarn_events::log_safe;
use forewarn_manifest::PluginSettings;

/// Longest budget a call gets, whatever it asks for: a day. Manifests are bounded far lower
/// at parse time; this keeps `Instant + budget` from overflowing for any caller.
pub(crate) const MAX_CALL_BUDGET: Duration = Duration::from_secs(24 * 60 * 60);

/// Longest defer reason kept from a plugin; longer ones are cut.
pub const REASON_MAX_BYTES: usize = 1024;

/// A plugin ready to be called. Cheap to clone; calls in flight keep their version alive
/// when a newer one replaces it.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

struct PluginInner {
    env: CallEnv,
    name: Arc<str>,
    content_hash: String,
    loaded_from_cache: bool,
    pre: HandlerPre<CallState>,
    settings: Arc<PluginSettings>,
    /// How much the plugin may log over time; shared with its other versions.
    log_budget: Arc<LogBudget>,
    /// The next call's instance, when it was made ahead of time.
    next: NextInstance,
    /// This version's own engine and instance pool, unmapped when the version is dropped
    /// (last: the fields above hold parts of it).
    engine: PluginEngine,
}

/// The facts of a call that are not the event itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// This VM's name as it appears in the event's resources.
    pub vm_name: String,
    /// Whether the event's resources name this VM.
    pub affects_this_vm: bool,
    /// 1 on the first call for this event and phase, then 2, 3, … on each retry.
    pub attempt: u32,
    /// This VM's priority and eviction policy, from the instance metadata.
    pub vm: VmInfo,
}

/// What came of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// The plugin's decision, or why there is none.
    pub answer: Result<Decision, CallFailure>,
    /// How long the call took, instantiation included (also when its instance was made
    /// ahead of the call).
    pub elapsed: Duration,
    /// What the plugin logged through `log` and printed on stdout/stderr, in order of
    /// source (log lines first), within the per-call caps.
    pub logs: Vec<PluginLogLine>,
}

/// What came of an `on-start` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartOutcome {
    /// Whether it ran, or why it failed.
    pub answer: Result<StartAnswer, CallFailure>,
    /// How long the call took, instantiation included.
    pub elapsed: Duration,
    /// What the plugin logged and printed, as for `on-event`.
    pub logs: Vec<PluginLogLine>,
}

/// How an `on-start` call ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAnswer {
    /// The plugin's `on-start` returned.
    Done,
    /// The plugin's contract (0.1.0) has no `on-start`: nothing was called.
    NotExported,
}

/// Why a call produced no decision. The dispatcher counts each as a defer with `reason()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The call ran past its budget and was cut off.
    BudgetExceeded {
        /// The budget it was given.
        budget: Duration,
    },
    /// The plugin asked for more memory than its cap.
    MemoryExceeded {
        /// The plugin's memory cap.
        limit_bytes: u64,
    },
    /// The plugin trapped: a panic, a stack overflow, an `unreachable`, a host-call error.
    Trapped {
        /// The trap, with the guest's last stderr line (a panic message) when it wrote one.
        message: String,
    },
    /// A new instance could not be created.
    Instantiation {
        /// wasmtime's error.
        message: String,
    },
}

impl CallFailure {
    /// A one-line reason for the log and the status output.
    pub fn reason(&self) -> String {
        match self {
            CallFailure::BudgetExceeded { budget } => {
                format!("budget exceeded ({} ms)", budget.as_millis())
            }
            CallFailure::MemoryExceeded { limit_bytes } => {
                format!(
                    "memory limit exceeded ({} MiB)",
                    limit_bytes / (1024 * 1024)
                )
            }
            CallFailure::Trapped { message } => format!("plugin trapped: {message}"),
            CallFailure::Instantiation { message } => {
                format!("plugin could not be instantiated: {message}")
            }
        }
    }

    /// A short label for metrics: "budget-exceeded", "memory-exceeded", "trap", "instantiation".
    pub fn kind(&self) -> &'static str {
        match self {
            CallFailure::BudgetExceeded { .. } => "budget-exceeded",
            CallFailure::MemoryExceeded { .. } => "memory-exceeded",
            CallFailure::Trapped { .. } => "trap",
            CallFailure::Instantiation { .. } => "instantiation",
        }
    }
}

impl Plugin {
    pub(crate) fn new(
        env: CallEnv,
        engine: PluginEngine,
        name: &str,
        content_hash: String,
        loaded_from_cache: bool,
        pre: HandlerPre<CallState>,
        settings: PluginSettings,
    ) -> Plugin {
        Plugin {
            inner: Arc::new(PluginInner {
                log_budget: env.log_budget(name),
                env,
                name: Arc::from(name),
                content_hash,
                loaded_from_cache,
                pre,
                settings: Arc::new(settings),
                next: NextInstance::default(),
                engine,
            }),
        }
    }

    /// The plugin's name (its file name without `.wasm`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Hex SHA-256 of the component bytes.
    pub fn content_hash(&self) -> &str {
        &self.inner.content_hash
    }

    /// Whether the compiled code came from the on-disk cache.
    pub fn loaded_from_cache(&self) -> bool {
        self.inner.loaded_from_cache
    }

    /// The memory cap, config and grants every call of this plugin runs under.
    pub fn settings(&self) -> &PluginSettings {
        &self.inner.settings
    }

    /// Log lines of this plugin dropped for being over its log budget over time
    /// ([`LOG_LINES_PER_MINUTE`](crate::LOG_LINES_PER_MINUTE)), counted since a plugin of
    /// this name was first loaded into the runtime (a reload keeps the count).
    pub fn log_lines_over_budget(&self) -> u64 {
        self.inner.log_budget.dropped_total()
    }

    /// Calls `on-event` in a fresh instance. Never fails: whatever the plugin does
    /// (loop, trap, exhaust memory, block in a host call) ends within `budget` as a
    /// `CallFailure`, and the next call starts clean.
    pub async fn call(
        &self,
        event: &ScheduledEvent,
        phase: Phase,
        context: &CallContext,
        budget: Duration,
    ) -> CallOutcome {
        let budget = budget.min(MAX_CALL_BUDGET);
        let now = SystemTime::now();
        let wit_context = Context {
            vm_name: context.vm_name.clone(),
            affects_this_vm: context.affects_this_vm,
            deadline_unix_ms: unix_ms(now.checked_add(budget)),
            attempt: context.attempt,
            until_not_before_ms: until_not_before_ms(event, now),
            vm: context.vm,
        };
        let (answer, elapsed, logs) = self
            .invoke(Entry::Event(event, phase, &wit_context), budget)
            .await;
        let answer = answer.map(|returned| match returned {
            Returned::Decision(decision) => sanitize(decision),
            Returned::Started(_) => Decision::Approve,
        });
        CallOutcome {
            answer,
            elapsed,
            logs,
        }
    }

    /// Calls `on-start` in a fresh instance, under the same rules as [`Plugin::call`]. A
    /// plugin built against a contract without `on-start` (0.1.0) is not called.
    pub async fn start(&self, context: &StartContext, budget: Duration) -> StartOutcome {
        if !self.inner.pre.has_on_start() {
            // Nothing to call: still make the first call's instance ahead of it.
            self.prepare_in_background();
            return StartOutcome {
                answer: Ok(StartAnswer::NotExported),
                elapsed: Duration::ZERO,
                logs: Vec::new(),
            };
        }
        let budget = budget.min(MAX_CALL_BUDGET);
        let context = StartContext {
            deadline_unix_ms: unix_ms(SystemTime::now().checked_add(budget)),
            ..context.clone()
        };
        let (answer, elapsed, logs) = self.invoke(Entry::Start(&context), budget).await;
        let answer = answer.map(|returned| match returned {
            Returned::Started(false) => StartAnswer::NotExported,
            Returned::Started(true) | Returned::Decision(_) => StartAnswer::Done,
        });
        StartOutcome {
            answer,
            elapsed,
            logs,
        }
    }

    /// Runs one export in a fresh instance within `budget`: the one made ahead of time when
    /// it is ready, else one made now. Then, in the background, the used instance is dropped
    /// and the next one made.
    async fn invoke(
        &self,
        entry: Entry<'_>,
        budget: Duration,
    ) -> (Result<Returned, CallFailure>, Duration, Vec<PluginLogLine>) {
        let started = Instant::now();
        self.inner.next.note_budget(budget);
        let _ticking = self.inner.env.enter_call(self.inner.engine.engine());
        // An instance made ahead is charged the time its making took against this budget.
        let (mut store, ready, took) = match self.inner.next.take() {
            Some(ReadyInstance {
                store,
                handler,
                took,
            }) => (store, Some(handler), took),
            None => (self.new_store(started + budget), None, Duration::ZERO),
        };
        let deadline = started + budget.saturating_sub(took);
        CallEnv::begin_call(&mut store, deadline);
        let mut instantiated = false;
        let result = tokio::time::timeout_at(deadline.into(), async {
            let instance = match ready {
                Some(handler) => handler,
                None => self
                    .inner
                    .pre
                    .instantiate_async(&mut store)
                    .await
                    .map_err(CallError::Instantiate)?,
            };
            instantiated = true;
            let returned = match entry {
                Entry::Event(event, phase, context) => instance
                    .call_on_event(&mut store, event, phase, context)
                    .await
                    .map(Returned::Decision),
                Entry::Start(context) => instance
                    .call_on_start(&mut store, context)
                    .await
                    .map(Returned::Started),
            };
            returned.map_err(CallError::Run)
        })
        .await;
        let answer = match result {
            Err(_elapsed) => Err(CallFailure::BudgetExceeded { budget }),
            Ok(Ok(returned)) => Ok(returned),
            Ok(Err(error)) => Err(classify(error, store.data(), budget)),
        };
        let logs = self.forward_output(store.data_mut());
        let elapsed = started.elapsed() + took;
        self.recycle(store, instantiated);
        (answer, elapsed, logs)
    }

    /// A fresh store for one call of this plugin, interrupted at `deadline`.
    fn new_store(&self, deadline: Instant) -> wasmtime::Store<CallState> {
        self.inner.env.new_store(
            self.inner.engine.engine(),
            self.inner.name.clone(),
            self.inner.settings.clone(),
            self.inner.log_budget.clone(),
            deadline,
        )
    }

    /// Drops a used store and makes the next call's instance, off the caller's path. A
    /// plugin whose instance could not be made in this call gets no new one ahead of time:
    /// its next call tries again under its own budget (so a failing start function costs
    /// one budget per call, not two).
    fn recycle(&self, used: wasmtime::Store<CallState>, prepare_next: bool) {
        if self.inner.env.timing() == InstanceTiming::AtCall {
            // The baseline: everything on the call's path, the drop included.
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // The task does not keep the plugin alive: a version replaced or removed meanwhile
        // gets no new instance.
        let plugin = Arc::downgrade(&self.inner);
        // Calls made back to back faster than used instances are dropped would hold more
        // and more of the plugin's pool: past a few, the call drops its own.
        let used = match self.inner.next.pending_drops.enter() {
            Some(ticket) => Some((used, ticket)),
            None => {
                drop(used);
                None
            }
        };
        let task = runtime.spawn(async move {
            drop(used);
            let Some(inner) = plugin.upgrade() else {
                return;
            };
            if prepare_next {
                Plugin { inner }.make_next().await;
            }
        });
        self.inner.next.set_background(task);
    }

    /// Starts making the next call's instance in the background (nothing without a tokio
    /// runtime, or when instances are made at the call).
    fn prepare_in_background(&self) {
        if self.inner.env.timing() != InstanceTiming::Ahead {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let plugin = self.clone();
        let task = runtime.spawn(async move { plugin.make_next().await });
        self.inner.next.set_background(task);
    }

    /// Waits for the background work after the last call (the used instance dropped, the
    /// next one made), then makes the next call's instance if none is ready. An instance
    /// that cannot be made cleanly (within the preparation budget, at most
    /// [`PREPARE_BUDGET`](crate::PREPARE_BUDGET)) is not kept, and this plugin version is made at each call from
    /// then on, where any failure is reported as the call's own.
    pub async fn prepare_next(&self) {
        self.inner.next.settle().await;
        self.make_next().await;
    }

    /// Makes the next call's instance unless one is ready (or being made). Only an instance
    /// made cleanly is kept: within the preparation budget, without asking for host
    /// functions (refused while it is made) and holding few memories.
    async fn make_next(&self) {
        self.inner
            .next
            .fill(|| async {
                let started = Instant::now();
                let deadline = started + self.inner.next.prepare_budget();
                let mut store = self.new_store(deadline);
                store.data_mut().preparing = true;
                let _ticking = self.inner.env.enter_call(self.inner.engine.engine());
                let made = tokio::time::timeout_at(
                    deadline.into(),
                    self.inner.pre.instantiate_async(&mut store),
                )
                .await;
                let handler: Handler = made.ok()?.ok()?;
                let state = store.data();
                if state.host_called_while_preparing
                    || state.limits.memories_created() > READY_MAX_MEMORIES
                {
                    return None;
                }
                Some(ReadyInstance {
                    store,
                    handler,
                    took: started.elapsed(),
                })
            })
            .await;
    }

    /// The resident bytes of this plugin's linear memories in `resident` (read from
    /// `/proc/self/smaps`): every page of its instance pool in RAM. None when its pool's
    /// place is unknown (instances allocated on demand).
    pub fn resident_bytes(&self, resident: &crate::ResidentMemory) -> Option<u64> {
        let pool = self.memory_pool()?;
        Some(resident.within(&pool))
    }

    /// Where this version's instance pool keeps its linear memories, when known
    /// ([`ResidentMemory`](crate::ResidentMemory) measures it).
    pub(crate) fn memory_pool(&self) -> Option<std::ops::Range<usize>> {
        self.inner.engine.memory_pool()
    }

    /// Whether the next call's instance is ready, once a preparation under way has ended
    /// (for tests and benchmarks).
    pub async fn has_ready_instance(&self) -> bool {
        self.inner.next.is_ready().await
    }

    /// Writes what the plugin printed, and what it was not allowed to log, to the daemon log;
    /// returns everything it logged and printed in this call. Printed lines count against
    /// the call's log lines and are escaped like `log` text; the notices of what was dropped
    /// count against the plugin's log budget, which says what it dropped once a minute at
    /// most.
    fn forward_output(&self, state: &mut CallState) -> Vec<PluginLogLine> {
        let plugin = &*self.inner.name;
        let mut logged = std::mem::take(&mut state.logged);
        let streams = [
            ("stdout", state.stdout.clone(), LogLevel::Info),
            ("stderr", state.stderr.clone(), LogLevel::Warn),
        ];
        for (stream, output, level) in streams {
            let (kept, dropped) = output.take();
            let text = String::from_utf8_lossy(&kept);
            for line in text.lines().filter(|line| !line.trim().is_empty()) {
                if !state.take_log_line() {
                    continue;
                }
                let line = log_safe(line, LOG_LINE_MAX_BYTES);
                tracing::info!(target: PLUGIN_LOG_TARGET, plugin, stream, "{line}");
                logged.push(PluginLogLine::new(level, &line));
            }
            if dropped > 0 && state.log_budget.take(Instant::now()) {
                tracing::warn!(
                    plugin,
                    stream,
                    dropped_bytes = dropped,
                    "plugin output over the limit was dropped"
                );
            }
        }
        if state.log_lines_dropped > 0 && state.log_budget.take(Instant::now()) {
            tracing::warn!(
                plugin,
                dropped_lines = state.log_lines_dropped,
                "plugin logged more than {} lines in one call; the rest were dropped",
                LOG_LINES_PER_CALL
            );
        }
        state.log_budget.report_dropped(plugin, Instant::now());
        logged
    }
}

/// Which export a call runs.
enum Entry<'a> {
    Event(&'a ScheduledEvent, Phase, &'a Context),
    Start(&'a StartContext),
}

/// What an export returned: `on-event`'s decision, or whether `on-start` was called.
enum Returned {
    Decision(Decision),
    Started(bool),
}

enum CallError {
    Instantiate(wasmtime::Error),
    Run(wasmtime::Error),
}

fn classify(error: CallError, state: &CallState, budget: Duration) -> CallFailure {
    if state.limits.memory_cap_hit() {
        return CallFailure::MemoryExceeded {
            limit_bytes: state.settings.memory_limit_bytes,
        };
    }
    let error = match error {
        CallError::Instantiate(error) => {
            return CallFailure::Instantiation {
                message: error_text(&error),
            };
        }
        CallError::Run(error) => error,
    };
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallFailure::BudgetExceeded { budget },
        Some(Trap::StackOverflow) => CallFailure::Trapped {
            message: "stack overflow".into(),
        },
        Some(trap) => CallFailure::Trapped {
            message: with_crash_detail(trap.to_string(), state, &error),
        },
        None => CallFailure::Trapped {
            message: error_text(&error),
        },
    }
}

/// wasmtime's error on one line: its backtrace may name the component's own functions,
/// which the plugin chose, so it is escaped like a log line.
fn error_text(error: &wasmtime::Error) -> String {
    log_safe(&format!("{error:#}"), LOG_LINE_MAX_BYTES)
}

/// Adds why the guest failed, escaped like a log line (the plugin chose it, and the reason is
/// logged and printed): the line it wrote to stderr as it failed (a Rust panic with its
/// location, the SDKs' line for an uncaught Python or JavaScript exception), else the function
/// of the plugin's that trapped (a C `abort()` writes nothing).
fn with_crash_detail(trap: String, state: &CallState, error: &wasmtime::Error) -> String {
    if let Some(line) = state.stderr.crash_line() {
        return format!("{trap} ({})", log_safe(&line, REASON_MAX_BYTES));
    }
    match trapping_function(error) {
        Some(function) => format!("{trap} (in {})", log_safe(&function, REASON_MAX_BYTES)),
        None => trap,
    }
}

/// The innermost function of the plugin's own code in the trap's backtrace: the C library's
/// `abort`/`exit` and the toolchains' `__`-prefixed helpers are skipped.
fn trapping_function(error: &wasmtime::Error) -> Option<String> {
    let backtrace = error.downcast_ref::<wasmtime::WasmBacktrace>()?;
    backtrace
        .frames()
        .iter()
        .filter_map(|frame| frame.func_name())
        .find(|name| !is_runtime_function(name))
        .map(str::to_owned)
}

fn is_runtime_function(name: &str) -> bool {
    name.starts_with("__")
        || matches!(
            name,
            "abort" | "exit" | "_Exit" | "_exit" | "raise" | "assert_fail"
        )
}

/// The plugin's decision with its defer reason made safe for one log line and the status
/// output: control characters escaped (`\n`, `\u{1b}`), cut at [`REASON_MAX_BYTES`].
fn sanitize(decision: Decision) -> Decision {
    match decision {
        Decision::Approve => Decision::Approve,
        Decision::Defer(mut deferral) => {
            deferral.reason = log_safe(&deferral.reason, REASON_MAX_BYTES);
            Decision::Defer(deferral)
        }
    }
}

/// Milliseconds from `now` to the event's `NotBefore` (0 once it has passed); none when the
/// event has none.
fn until_not_before_ms(event: &ScheduledEvent, now: SystemTime) -> Option<u64> {
    let not_before = event.not_before_unix_ms?;
    Some(not_before.saturating_sub(unix_ms(Some(now))))
}

/// Milliseconds since the Unix epoch; a time too far ahead to represent is `u64::MAX`.
fn unix_ms(time: Option<SystemTime>) -> u64 {
    time.map_or(u64::MAX, forewarn_events::unix_ms)
}
