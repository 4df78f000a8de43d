//! Bundled plugin `graceful-shutdown`: runs the operator's stop action before maintenance that
//! takes the VM down, approves once it has finished, and runs the start action afterwards.

mod logic;
#[cfg(test)]
mod tests;

use std::time::Duration;

use forewarn_sdk::host::{self, log, state};
use forewarn_sdk::{Context, Decision, Event, EventIds, HostError, Phase, Plugin};

use logic::{ShutdownSettings, should_start};

/// State key holding the ids of the events the app was stopped for, one per line.
const STOPPED_KEY: &str = "stopped-for";

/// How soon to try a failed stop action again.
const RETRY: Duration = Duration::from_secs(2);

/// The plugin; `forewarn_sdk::export!` makes it the component's handler.
struct GracefulShutdown;

impl Plugin for GracefulShutdown {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        let settings = ShutdownSettings::from_lookup(host::config);
        if !ctx.affects_this_vm || !settings.stops_for(event) {
            return Decision::approve();
        }
        match phase {
            Phase::Prepare => stop(event, &settings),
            Phase::Started => Decision::approve(),
            Phase::EndedAfterStart => {
                recover(event, &settings, true);
                Decision::approve()
            }
            Phase::EndedWithoutStart => {
                recover(event, &settings, false);
                Decision::approve()
            }
        }
    }
}

fn stopped_for() -> EventIds {
    EventIds::parse(&state::get_string(STOPPED_KEY).unwrap_or_default())
}

fn stop(event: &Event, settings: &ShutdownSettings) -> Decision {
    let mut stopped = stopped_for();
    if stopped.contains(&event.id) {
        return Decision::approve();
    }
    let Some(action) = &settings.stop_action else {
        log::warn!(
            "no stop-action configured: approving {} without stopping anything",
            event.id
        );
        return Decision::approve();
    };
    match host::run_action(action) {
        Ok(output) if output.succeeded() => {
            stopped.insert(&event.id);
            if let Err(error) = state::set_string(STOPPED_KEY, &stopped.render()) {
                log::error!("the app is stopped, but recording it failed: {error}");
            }
            log::info!(
                "stopped the app (`{action}`) for {} {}",
                event.event_type,
                event.id
            );
            Decision::approve()
        }
        Ok(output) => Decision::defer(
            format!(
                "stop action `{action}` exited {}: {}",
                output
                    .exit_code
                    .map_or_else(|| "on a signal".to_owned(), |code| code.to_string()),
                last_line(&output.stderr)
            ),
            RETRY,
        ),
        Err(HostError::TimedOut) => Decision::defer(
            format!("stop action `{action}` did not finish within the budget; it was killed"),
            RETRY,
        ),
        Err(error) => Decision::defer(format!("stop action `{action}`: {error}"), RETRY),
    }
}

fn recover(event: &Event, settings: &ShutdownSettings, ended_after_start: bool) {
    let mut stopped = stopped_for();
    let was_stopped = stopped.remove(&event.id);
    if was_stopped && let Err(error) = state::set_string(STOPPED_KEY, &stopped.render()) {
        log::error!("cannot update the stopped-for list: {error}");
    }
    if !should_start(ended_after_start, was_stopped, !stopped.is_empty()) {
        return;
    }
    let Some(action) = &settings.start_action else {
        log::info!("{} is over; no start-action configured", event.id);
        return;
    };
    match host::run_action(action) {
        Ok(output) if output.succeeded() => {
            log::info!("started the app (`{action}`) after {}", event.id)
        }
        Ok(output) => log::error!(
            "start action `{action}` exited {:?}: {}",
            output.exit_code,
            last_line(&output.stderr)
        ),
        Err(error) => log::error!("start action `{action}`: {error}"),
    }
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

forewarn_sdk::export!(GracefulShutdown);
