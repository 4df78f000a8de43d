//! A plugin that logs every phase and, before maintenance that takes the VM down,
//! asks twice for a little more time before it approves.

use std::time::Duration;

use forewarn_sdk::prelude::*;

struct Notice;

impl Plugin for Notice {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        log::info(&format!(
            "{} {} is in phase {phase}",
            event.event_type, event.id
        ));
        if phase == Phase::Prepare && event.takes_vm_down() && ctx.attempt < 3 {
            return Decision::defer("finishing the current batch", Duration::from_secs(5));
        }
        Decision::approve()
    }
}

forewarn_sdk::export!(Notice);
