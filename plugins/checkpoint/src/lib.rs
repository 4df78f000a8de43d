//! Bundled plugin `checkpoint`: checkpoints the workload before maintenance.
//! For now a placeholder that logs each call and approves; its real logic comes later.

use forewarn_sdk::host::log;
use forewarn_sdk::{Context, Decision, Event, Phase, Plugin};

struct Checkpoint;

impl Plugin for Checkpoint {
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

forewarn_sdk::export!(Checkpoint);
