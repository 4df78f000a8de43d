//! Modes for the daemon's end-to-end tests and benchmarks: "defer-until-attempt" defers
//! prepare until the daemon's attempt counter (journaled, so it survives a restart) reaches
//! `attempts`; "count-then-panic" counts each call in its own state, then traps;
//! "state-hammer" rewrites its state as much as one call may, then defers with retry 0.

use std::time::Duration;

use forewarn_sdk::host::{self, state};
use forewarn_sdk::{Context, Decision, Phase};

/// Prepare: defers until `ctx.attempt` reaches config `attempts` (default 3), then approves.
/// Every other phase approves at once.
pub(crate) fn defer_until_attempt(phase: Phase, ctx: &Context) -> Decision {
    if phase != Phase::Prepare {
        return Decision::approve();
    }
    let wanted = config_number("attempts", 3);
    if u64::from(ctx.attempt) >= wanted {
        return Decision::approve();
    }
    Decision::defer(format!("attempt={}", ctx.attempt), retry_after())
}

/// Config `retry-ms` (default 200) as the defer's retry-after.
fn retry_after() -> Duration {
    Duration::from_millis(config_number("retry-ms", 200))
}

fn config_number(key: &str, default: u64) -> u64 {
    host::config(key)
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// The state key "count-then-panic" counts calls under: the plugin's own record, which the
/// tests read from its state file (`plugin-state/NAME.json`), not from the daemon's log.
pub(crate) const CALLS_KEY: &str = "calls";

/// Adds one to the calls counted in state (a durable write, kept whatever follows), then
/// panics: a plugin that traps on every call, whose calls can be counted.
pub(crate) fn count_then_panic() -> Decision {
    let calls = state::get_u64(CALLS_KEY).unwrap_or(0) + 1;
    let _ignored = state::set_u64(CALLS_KEY, calls);
    panic!("probe call {calls}: panicking on purpose");
}

/// Writes changing 16 KiB values under 8 rotating keys until the host refuses one (the
/// call's state caps), then defers with retry 0: a plugin within its caps that hammers its
/// state, asked again and again (`bench-disk-writes`).
pub(crate) fn hammer_state() -> Decision {
    let round = state::get_u64("round").unwrap_or(0) + 1;
    let mut writes = 0;
    for index in 0..64u64 {
        let value = vec![(round + index) as u8; 16 * 1024];
        if state::set(&format!("hammer-{}", index % 8), &value).is_err() {
            break;
        }
        writes += 1;
    }
    let _ignored = state::set_u64("round", round);
    Decision::defer(format!("state-hammer: {writes} writes"), Duration::ZERO)
}
