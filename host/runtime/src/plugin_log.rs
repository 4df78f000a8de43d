//! A line a plugin wrote during one call (through `log`, or on stdout/stderr), returned with
//! the call's outcome so the daemon can show it beside the plugin's answer.

/// The target plugin log lines are written under, so operators can filter them.
pub const PLUGIN_LOG_TARGET: &str = "forewarn::plugin";

/// How important a plugin's log line is, as the plugin said (stdout counts as info,
/// stderr as warn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogLevel {
    /// Detail for debugging the plugin.
    Trace,
    /// Detail for debugging a deployment.
    Debug,
    /// What the plugin did (stdout too).
    Info,
    /// Something the operator should look at (stderr too).
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    /// The lower-case name: `info`, `warn`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

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

/// One line, already cut to the per-line cap.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PluginLogLine {
    /// How important the plugin said it is.
    pub level: LogLevel,
    /// The text, escaped and cut like the daemon log's copy.
    pub message: String,
}

impl PluginLogLine {
    pub(crate) fn new(level: LogLevel, message: &str) -> Self {
        PluginLogLine {
            level,
            message: message.to_owned(),
        }
    }
}
