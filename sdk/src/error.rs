//! `HostError`: why a host call (state, readiness, HTTP, actions) did not do what was asked.
//! It is the WIT `host-error` variant, with a `Display` written for the daemon's log.

use std::fmt;

/// Why a host call did not do what was asked (the WIT `host-error`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostError {
    /// The operator has not granted this capability to this plugin. The text names the
    /// manifest setting that would grant it.
    NotGranted(String),
    /// The request itself is wrong: a malformed URL, a key or value too large, an unknown
    /// action name.
    Invalid(String),
    /// The call was allowed but failed: connection refused, action could not start.
    Failed(String),
    /// The plugin's deadline passed before the operation finished.
    TimedOut,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::NotGranted(how) => write!(f, "not granted: {how}"),
            HostError::Invalid(why) => write!(f, "invalid request: {why}"),
            HostError::Failed(why) => write!(f, "failed: {why}"),
            HostError::TimedOut => f.write_str("timed out: the plugin's deadline passed"),
        }
    }
}

impl std::error::Error for HostError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_kind_and_the_detail() {
        let cases = [
            (
                HostError::NotGranted("set `[capabilities] readiness = true`".into()),
                "not granted: set `[capabilities] readiness = true`",
            ),
            (
                HostError::Invalid("key too long".into()),
                "invalid request: key too long",
            ),
            (
                HostError::Failed("connection refused".into()),
                "failed: connection refused",
            ),
            (
                HostError::TimedOut,
                "timed out: the plugin's deadline passed",
            ),
        ];
        for (error, shown) in cases {
            assert_eq!(error.to_string(), shown);
        }
    }
}
