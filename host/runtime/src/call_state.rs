//! What a plugin call's `Store` holds: the WASI context, the resource table, the limits,
//! and everything the `host` interface needs to answer that plugin for that call.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::limits::InstanceLimits;
use crate::plugin_log::PluginLogLine;
use crate::sandbox::{self, CapturedOutput};
use crate::services::{HostServices, PluginSettings};

/// How much a plugin may log through the `log` host function in one call.
pub const LOG_LINES_PER_CALL: u32 = 200;
/// Longest log line kept; longer ones are cut.
pub const LOG_LINE_MAX_BYTES: usize = 4096;

/// The data of one call's store. Built fresh for every call and dropped after it.
pub struct CallState {
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
    /// What the plugin logged (and printed) in this call, handed back with its answer.
    pub(crate) logged: Vec<PluginLogLine>,
    pub(crate) stdout: CapturedOutput,
    pub(crate) stderr: CapturedOutput,
}

impl CallState {
    pub(crate) fn new(
        plugin: Arc<str>,
        settings: Arc<PluginSettings>,
        services: HostServices,
        deadline: Instant,
    ) -> Self {
        let stdout = CapturedOutput::default();
        let stderr = CapturedOutput::default();
        CallState {
            wasi: sandbox::wasi_context(&stdout, &stderr),
            table: ResourceTable::new(),
            limits: InstanceLimits::new(settings.memory_limit_bytes),
            plugin,
            settings,
            services,
            deadline,
            log_lines: 0,
            log_lines_dropped: 0,
            logged: Vec::new(),
            stdout,
            stderr,
        }
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
