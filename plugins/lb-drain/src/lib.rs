//! Bundled plugin `lb-drain`: takes this VM out of its load balancer before maintenance.
//! For now a placeholder that logs each call and approves; its real logic comes later.

use forewarn_sdk::host::log;
use forewarn_sdk::{Context, Decision, Event, Phase, Plugin};

struct LbDrain;

impl Plugin for LbDrain {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        log::info!(
            "{} {}: {phase} (attempt {})",
            event.event_type,
            event.id,
            ctx.attempt
        );
        Decision::approve()
    }
}

forewarn_sdk::export!(LbDrain);
