//! Test guest `noop-guest`: the smallest forewarn plugin, approving every event at once.
//! The host's benchmarks use it to measure the bare cost of a call.

use forewarn_sdk::{Context, Decision, Event, Phase, Plugin};

struct Noop;

impl Plugin for Noop {
    fn on_event(_event: &Event, _phase: Phase, _ctx: &Context) -> Decision {
        Decision::approve()
    }
}

forewarn_sdk::export!(Noop);
