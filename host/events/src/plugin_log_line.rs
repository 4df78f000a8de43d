//! A line a plugin logged during one call: written by the runtime (escaped and cut), kept
//! by the pipeline in the event's timeline beside the plugin's answer.

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

/// One line, already cut to the per-line cap.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PluginLogLine {
    /// How important the plugin said it is.
    pub level: LogLevel,
    /// The text, escaped and cut like the daemon log's copy.
    pub message: String,
}

impl PluginLogLine {
    /// A line at `level` with `message`'s text.
    pub fn new(level: LogLevel, message: &str) -> Self {
        PluginLogLine {
            level,
            message: message.to_owned(),
        }
    }
}
