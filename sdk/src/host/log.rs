//! Writing to the daemon's log under this plugin's name: `log::info("text")` functions and
//! `log::info!("format {}", args)` macros for each level.

use crate::Level;
use crate::host::imports as raw;

pub use crate::{debug, error, info, trace, warn};

/// Writes `message` to the daemon's log at `level`.
pub fn write(level: Level, message: &str) {
    raw::log(level, message);
}

/// Writes `message` at level trace.
pub fn trace(message: &str) {
    write(Level::Trace, message);
}

/// Writes `message` at level debug.
pub fn debug(message: &str) {
    write(Level::Debug, message);
}

/// Writes `message` at level info.
pub fn info(message: &str) {
    write(Level::Info, message);
}

/// Writes `message` at level warn.
pub fn warn(message: &str) {
    write(Level::Warn, message);
}

/// Writes `message` at level error.
pub fn error(message: &str) {
    write(Level::Error, message);
}

/// Formats and writes a line at level trace: `log::trace!("attempt {}", ctx.attempt)`.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::host::log::trace(&::std::format!($($arg)*)) };
}

/// Formats and writes a line at level debug: `log::debug!("attempt {}", ctx.attempt)`.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::host::log::debug(&::std::format!($($arg)*)) };
}

/// Formats and writes a line at level info: `log::info!("draining {}", name)`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::host::log::info(&::std::format!($($arg)*)) };
}

/// Formats and writes a line at level warn: `log::warn!("retrying: {}", error)`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::host::log::warn(&::std::format!($($arg)*)) };
}

/// Formats and writes a line at level error: `log::error!("gave up: {}", error)`.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::host::log::error(&::std::format!($($arg)*)) };
}
