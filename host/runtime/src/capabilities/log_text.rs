//! How a host function's error reads in the daemon's log.

use crate::wit::latest::HostError;

/// A host error as a log field reads it: `not granted: …`, `invalid: …`, `failed: …`,
/// `timed out` (never Rust's `Debug` form).
pub(crate) fn describe(error: &HostError) -> String {
    match error {
        HostError::NotGranted(text) => format!("not granted: {text}"),
        HostError::Invalid(text) => format!("invalid: {text}"),
        HostError::Failed(text) => format!("failed: {text}"),
        HostError::TimedOut => "timed out".to_owned(),
    }
}
