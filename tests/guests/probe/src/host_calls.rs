//! Modes that exercise host calls: "state" (a durable counter), "ready" (readiness, which
//! needs a grant) and "config" (a manifest value).

use forewarn_sdk::Decision;
use forewarn_sdk::host::{self, state};

use crate::defer_with;

/// Reads "counter" (0 if absent), stores it plus one, and reports the new value.
pub fn count_in_state() -> Decision {
    let count = state::get_u64("counter").unwrap_or(0) + 1;
    match state::set_u64("counter", count) {
        Ok(()) => defer_with(format!("count={count}")),
        Err(error) => defer_with(format!("state: {error}")),
    }
}

/// Marks the VM not ready and reports whether the host allowed it.
pub fn mark_not_ready() -> Decision {
    match host::set_ready(false) {
        Ok(()) => defer_with("ready: ok".to_owned()),
        Err(error) => defer_with(format!("ready: {error}")),
    }
}

/// Reports `config("greeting")`, or "none".
pub fn greeting() -> Decision {
    defer_with(host::config_or("greeting", "none"))
}
