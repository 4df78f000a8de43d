//! Forewarn plugin `{{name}}`: forewarn calls `on_event` at each transition of each Scheduled
//! Event that `{{name}}.toml` subscribes to; it logs a greeting and approves every phase.

use forewarn_sdk::prelude::*;

#[cfg(test)]
mod tests;

/// The `[config]` key of `{{name}}.toml` this plugin reads, and the value it uses without it.
const GREETING_KEY: &str = "greeting";
const DEFAULT_GREETING: &str = "hello from {{name}}";

/// The plugin; `forewarn_sdk::export!` at the end makes it the component's handler.
struct ThisPlugin;

impl Plugin for ThisPlugin {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        match phase {
            // The event was announced or rescheduled: the only phase whose answer matters.
            // Prepare the workload (drain, checkpoint, stop), then approve; or answer
            // `Decision::defer("why", Duration::from_secs(5))` to be asked again (keep what
            // the next attempt needs in `state`). Answer before `ctx.deadline()`.
            Phase::Prepare => prepare(event, ctx),
            // The maintenance has started. Informational: the answer is not used.
            Phase::Started => {
                log::info!("{} {} has started", event.event_type, event.id);
                Decision::approve()
            }
            // The event is over after it started: recover (rejoin the pool, restore, restart).
            Phase::EndedAfterStart => {
                log::info!("{} {} is over", event.event_type, event.id);
                Decision::approve()
            }
            // Azure canceled the event before it started: undo what Prepare did.
            Phase::EndedWithoutStart => {
                log::info!("{} {} was canceled", event.event_type, event.id);
                Decision::approve()
            }
        }
    }

    // Optional: `fn on_start(ctx: &StartContext)` runs once per daemon run, before the first
    // `on_event` (`ctx.first_run`: a new VM, e.g. re-created after a Spot eviction).
}

/// Logs the greeting and what is coming, then approves. Events for the other VMs of an
/// availability set or scale set arrive too: `ctx.affects_this_vm` tells them apart.
fn prepare(event: &Event, ctx: &Context) -> Decision {
    let greeting = host::config_or(GREETING_KEY, DEFAULT_GREETING);
    let whose = if ctx.affects_this_vm {
        "this VM"
    } else {
        "another VM"
    };
    let when = ctx.until_not_before().map_or_else(
        || "now".to_owned(),
        |left| format!("in {} s", left.as_secs()),
    );
    log::info!(
        "{greeting}: {} {} for {whose}, {when}",
        event.event_type,
        event.id
    );
    Decision::approve()
}

forewarn_sdk::export!(ThisPlugin);
