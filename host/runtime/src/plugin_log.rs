//! A line a plugin wrote during one call (through `log`, or on stdout/stderr), returned with
//! the call's outcome so the daemon can show it beside the plugin's answer.

pub use forewarn_events::{LogLevel, PluginLogLine};

/// The target plugin log lines are written under, so operators can filter them.
pub const PLUGIN_LOG_TARGET: &str = "forewarn::plugin";

/// Writes one plugin log line to the daemon log at the matching tracing level.
pub(crate) fn write_plugin_log(plugin: &str, level: LogLevel, message: &str) {
    match level {
        LogLevel::Trace => tracing::trace!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        LogLevel::Debug => tracing::debug!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        LogLevel::Info => tracing::info!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        LogLevel::Warn => tracing::warn!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        LogLevel::Error => tracing::error!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
    }
}
