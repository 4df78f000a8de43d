//! Test guest `probe-guest`: one plugin whose behaviour is chosen by `config("mode")`, so the
//! host's tests exercise every answer, trap, resource abuse and sandbox probe with one component.

mod contract_v0_2;
mod daemon_modes;
mod echo;
mod host_calls;
mod misbehave;
mod sandbox;

use std::time::Duration;

use forewarn_sdk::{Context, Decision, Event, Phase, Plugin, StartContext, host};

struct Probe;

impl Plugin for Probe {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        let mode = host::config("mode");
        run_mode(mode.as_deref().unwrap_or("approve"), event, phase, ctx)
    }

    fn on_start(ctx: &StartContext) {
        if host::config("on-start").as_deref() == Some("record") {
            contract_v0_2::record_start(ctx);
        }
    }
}

forewarn_sdk::export!(Probe);

fn run_mode(mode: &str, event: &Event, phase: Phase, ctx: &Context) -> Decision {
    match mode {
        "approve" => Decision::approve(),
        "defer" => Decision::defer("not yet", Duration::from_millis(1500)),
        "echo" => echo::echo(event, phase, ctx),
        "loop" => misbehave::spin_forever(),
        "loop-first-attempt" => misbehave::spin_on_first_attempt(ctx),
        "oom" => misbehave::allocate_forever(),
        "stack-overflow" => misbehave::overflow_stack(),
        "call-stack-overflow" => misbehave::overflow_call_stack(),
        "panic" => misbehave::panic_with_message(),
        "log-flood" => misbehave::flood_log(),
        "log-forge" => misbehave::forge_log_lines(),
        "stdout-flood" => misbehave::flood_stdout(),
        "host-call-loop" => misbehave::call_host_forever(),
        "huge-reason" => misbehave::huge_reason(),
        "sleep" => misbehave::sleep_an_hour(),
        "slow" => misbehave::busy_until_near_deadline(ctx),
        "read-file" => sandbox::read_file(),
        "list-root" => sandbox::list_root(),
        "tcp" => sandbox::tcp(),
        "env" => sandbox::env(),
        "args" => sandbox::args(),
        "instance-calls" => sandbox::instance_calls(),
        "leftover-pages" => sandbox::leftover_pages(),
        "state" => host_calls::count_in_state(),
        "state-flood" => host_calls::flood_state(),
        "state-loop" => host_calls::state_set_forever(),
        "ready" => host_calls::mark_not_ready(),
        "config" => host_calls::greeting(),
        "http" => host_calls::http(),
        "identity" => contract_v0_2::token(),
        "vm" => contract_v0_2::vm(ctx),
        "on-start" => contract_v0_2::started(),
        "defer-until-attempt" => daemon_modes::defer_until_attempt(phase, ctx),
        "count-then-panic" => daemon_modes::count_then_panic(),
        "state-hammer" => daemon_modes::hammer_state(),
        unknown => defer_with(format!("unknown probe mode: {unknown}")),
    }
}

/// A defer carrying a probe's finding, asked again after one second.
pub(crate) fn defer_with(reason: String) -> Decision {
    Decision::defer(reason, Duration::from_millis(1000))
}
