//! A line a plugin wrote during one call (through `log`, or on stdout/stderr), returned with
//! the call's outcome so the daemon can show it beside the plugin's answer.

use crate::bindings::Level;

/// How important a plugin's log line is, as the plugin said (stdout counts as info,
/// stderr as warn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
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

impl From<Level> for LogLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Trace => LogLevel::Trace,
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        }
    }
}

/// One line, already cut to the per-line cap.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PluginLogLine {
    pub level: LogLevel,
    pub message: String,
}

impl PluginLogLine {
    pub fn new(level: LogLevel, message: &str) -> Self {
        PluginLogLine {
            level,
            message: message.to_owned(),
        }
    }
}
