//! Probe modes for what contract 0.2.0 added: identity tokens, the VM's priority and the time
//! to NotBefore in the context, and `on-start` (recorded in state, reported by a later call).

use forewarn_sdk::host::{identity, state};
use forewarn_sdk::{Context, Decision, StartContext};

use crate::defer_with;

/// The state key `on_start` writes.
const ON_START_KEY: &str = "on-start";

/// Asks a token for `config("resource")` (default Storage); reports "identity: TOKEN" or the
/// error.
pub(crate) fn token() -> Decision {
    let resource = forewarn_sdk::host::config_or("resource", identity::STORAGE);
    match identity::access_token(&resource) {
        Ok(token) => defer_with(format!(
            "identity: {} expires {}",
            token.token, token.expires_on_unix_ms
        )),
        Err(error) => defer_with(format!("identity: {error}")),
    }
}

/// Reports the VM info and whether the context says how long until NotBefore:
/// "vm: priority=Spot eviction=Some(Delete) until-not-before=true deletes-disks=true".
pub(crate) fn vm(ctx: &Context) -> Decision {
    defer_with(format!(
        "vm: priority={:?} eviction={:?} until-not-before={} deletes-disks={}",
        ctx.vm.priority,
        ctx.vm.eviction_policy,
        ctx.until_not_before().is_some(),
        ctx.vm.eviction_deletes_disks()
    ))
}

/// Records in state that `on-start` ran and whether it was the daemon's first run.
pub(crate) fn record_start(ctx: &StartContext) {
    let text = format!("first-run={}", ctx.first_run);
    let _ignored = state::set(ON_START_KEY, text.as_bytes());
}

/// Reports what `on-start` recorded before this call: "on-start: first-run=true", or
/// "on-start: none".
pub(crate) fn started() -> Decision {
    let recorded = state::get(ON_START_KEY)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_else(|| "none".to_owned());
    defer_with(format!("on-start: {recorded}"))
}
