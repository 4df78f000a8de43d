//! What a plugin call's `Store` holds: the WASI context, the resource table, the limits,
//! and everything the `host` interface needs to answer that plugin for that call.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::limits::InstanceLimits;
use crate::log_budget::LogBudget;
use crate::plugin_log::PluginLogLine;
use crate::sandbox::{self, CapturedOutput};
use crate::services::HostServices;
use crate::wit::latest::HostError;
use forewarn_manifest::PluginSettings;

/// How many lines a plugin may put in the daemon log in one call (its own `log` lines, its
/// stdout and stderr, refused host calls); over time, its `LogBudget` bounds them too.
pub const LOG_LINES_PER_CALL: u32 = 200;
/// Longest log line kept; longer ones are cut.
pub const LOG_LINE_MAX_BYTES: usize = 4096;

/// Longest plugin-chosen value (URL, action name, error text) in a daemon log line.
pub(crate) const LOG_FIELD_MAX_BYTES: usize = 512;

/// The data of one call's store. Built fresh for every call and dropped after it.
pub(crate) struct CallState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: InstanceLimits,
    pub(crate) plugin: Arc<str>,
    pub(crate) settings: Arc<PluginSettings>,
    pub(crate) services: HostServices,
    /// When the call is cut off: host calls that wait (HTTP, actions) end by then too.
    pub(crate) deadline: Instant,
    pub(crate) log_lines: u32,
    pub(crate) log_lines_dropped: u32,
    /// The plugin's log budget over time, shared with its other calls.
    pub(crate) log_budget: Arc<LogBudget>,
    /// What the plugin logged (and printed) in this call, handed back with its answer.
    pub(crate) logged: Vec<PluginLogLine>,
    pub(crate) state_writes: u32,
    pub(crate) state_write_bytes: usize,
    pub(crate) state_disk_budget: crate::capabilities::key_value::store::DiskBudget,
    pub(crate) stdout: CapturedOutput,
    pub(crate) stderr: CapturedOutput,
    /// True while the instance is made ahead of its call: the plugin's own host functions
    /// (state, readiness, HTTP, identity, actions) are refused then (ready_instance.rs).
    pub(crate) preparing: bool,
    /// Whether the instance asked for one of those while it was being made ahead.
    pub(crate) host_called_while_preparing: bool,
}

impl CallState {
    /// A call's state with a full log budget of its own (for tests of the host functions).
    #[cfg(test)]
    pub(crate) fn new(
        plugin: Arc<str>,
        settings: Arc<PluginSettings>,
        services: HostServices,
        deadline: Instant,
    ) -> Self {
        let log_budget = Arc::new(LogBudget::new(Instant::now()));
        Self::with_log_budget(plugin, settings, services, log_budget, deadline)
    }

    /// A call's state, its log lines counted against the plugin's `log_budget`.
    pub(crate) fn with_log_budget(
        plugin: Arc<str>,
        settings: Arc<PluginSettings>,
        services: HostServices,
        log_budget: Arc<LogBudget>,
        deadline: Instant,
    ) -> Self {
        let stdout = CapturedOutput::default();
        let stderr = CapturedOutput::default();
        CallState {
            wasi: sandbox::wasi_context(&stdout, &stderr),
            table: resource_table(),
            limits: InstanceLimits::new(settings.memory_limit_bytes),
            plugin,
            settings,
            services,
            deadline,
            log_lines: 0,
            log_lines_dropped: 0,
            log_budget,
            logged: Vec::new(),
            state_writes: 0,
            state_write_bytes: 0,
            state_disk_budget: crate::capabilities::key_value::store::DiskBudget::per_call(),
            stdout,
            stderr,
            preparing: false,
            host_called_while_preparing: false,
        }
    }

    /// Whether a host function with effects (or that reads state) must be refused because
    /// the instance is being made ahead of its call; remembers that it was asked for.
    pub(crate) fn refuse_while_preparing(&mut self) -> bool {
        if self.preparing {
            self.host_called_while_preparing = true;
        }
        self.preparing
    }

    /// Refuses a host function while the instance is made ahead of its call: such an
    /// instance is then not kept, and the call makes its own instance, where it is allowed.
    pub(crate) fn not_while_preparing(&mut self) -> Result<(), HostError> {
        if self.refuse_while_preparing() {
            return Err(HostError::Failed(
                "not available while the instance is being made ahead of its call".into(),
            ));
        }
        Ok(())
    }
}

/// The call's WASI resource table, bounded so a plugin cannot make the host allocate
/// entries without end.
fn resource_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(crate::limits::MAX_RESOURCES);
    table
}

impl CallState {
    /// Counts one log line written on the plugin's behalf (its own `log`, refused or
    /// failed host calls, its stdout and stderr): false, and counted as dropped, once the
    /// call has used its `LOG_LINES_PER_CALL`, or the plugin its log budget (which counts
    /// those drops itself).
    pub(crate) fn take_log_line(&mut self) -> bool {
        if self.log_lines >= LOG_LINES_PER_CALL {
            self.log_lines_dropped = self.log_lines_dropped.saturating_add(1);
            return false;
        }
        if !self.log_budget.take(Instant::now()) {
            return false;
        }
        self.log_lines += 1;
        true
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
