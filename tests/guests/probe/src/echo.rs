//! Mode "echo": defers with a JSON object holding every field of the event, the phase and
//! the context, so the host's tests can check what a plugin really receives.

use std::time::Duration;

use forewarn_sdk::{Context, Decision, Event, Phase};
use serde_json::json;

pub(crate) fn echo(event: &Event, phase: Phase, ctx: &Context) -> Decision {
    let retry_after = Duration::from_millis(1000 * u64::from(ctx.attempt));
    Decision::defer(describe(event, phase, ctx).to_string(), retry_after)
}

fn describe(event: &Event, phase: Phase, ctx: &Context) -> serde_json::Value {
    json!({
        "id": event.id,
        "event_type": event.event_type.as_str(),
        "event_type_raw": event.event_type_raw,
        "resource_type": event.resource_type,
        "resources": event.resources,
        "status": event.status.as_str(),
        "not_before_unix_ms": event.not_before_unix_ms,
        "description": event.description,
        "source": event.source.as_str(),
        "duration_seconds": event.duration_seconds,
        "phase": phase.as_str(),
        "vm_name": ctx.vm_name,
        "affects_this_vm": ctx.affects_this_vm,
        "deadline_unix_ms": ctx.deadline_unix_ms,
        "attempt": ctx.attempt,
    })
}
