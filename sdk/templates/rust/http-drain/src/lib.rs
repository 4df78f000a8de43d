//! Forewarn plugin `{{name}}`: before maintenance of this VM it takes the VM out of rotation
//! (the daemon's `/readyz` answers 503, so the load balancer probing it stops sending traffic),
//! tells a local service over HTTP (a POST to `drain-url`), and approves once the service
//! answered 2xx; when the event is over it puts the VM back in rotation.

use std::time::Duration;

use forewarn_sdk::prelude::*;

#[cfg(test)]
mod tests;

/// The `[config]` key of `{{name}}.toml` naming the service's drain endpoint, and the URL used
/// without it. Its `host:port` must be granted in `[capabilities] http`.
const DRAIN_URL_KEY: &str = "drain-url";
const DEFAULT_DRAIN_URL: &str = "http://127.0.0.1:8080/drain";

/// How long forewarn waits before asking again when a step failed.
const RETRY: Duration = Duration::from_secs(5);

/// The plugin; `forewarn_sdk::export!` at the end makes it the component's handler.
struct ThisPlugin;

impl Plugin for ThisPlugin {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        if !ctx.affects_this_vm {
            // The event is for another VM of the availability set or scale set: nothing to
            // drain here, and nothing to put back.
            return Decision::approve();
        }
        match phase {
            // The event was announced or rescheduled: the only phase whose answer matters.
            Phase::Prepare => drain(event),
            // The maintenance has started: the VM stays out of rotation. Informational.
            Phase::Started => {
                log::info!("{} {} has started", event.event_type, event.id);
                Decision::approve()
            }
            // The event is over (after it started, or canceled before): back in rotation.
            Phase::EndedAfterStart | Phase::EndedWithoutStart => {
                back_in_rotation(event);
                Decision::approve()
            }
        }
    }
}

/// Out of rotation, then the POST to the drain URL; approves once the service answered 2xx,
/// else defers with the reason (forewarn asks again after [`RETRY`], and the VM stays out of
/// rotation meanwhile). The service is told again at every attempt: make its drain idempotent.
fn drain(event: &Event) -> Decision {
    // `/readyz` answers 503 from now on, until this plugin calls `set_ready(true)`.
    if let Err(error) = host::set_ready(false) {
        return Decision::defer(
            format!("cannot take the VM out of rotation: {error}"),
            RETRY,
        );
    }
    let url = host::config_or(DRAIN_URL_KEY, DEFAULT_DRAIN_URL);
    // `{"event_id":"…","event_type":"reboot"}`
    match http::post(&url, "application/json", event.notice_json()) {
        Ok(response) if response.is_success() => {
            log::info!(
                "out of rotation, and {url} answered {}: ready for {} {}",
                response.status,
                event.event_type,
                event.id
            );
            Decision::approve()
        }
        Ok(response) => Decision::defer(
            format!("the drain at {url} answered {}", response.status),
            RETRY,
        ),
        // Not granted, refused, timed out: `error` says which, and what to do about it.
        Err(error) => Decision::defer(format!("the drain at {url}: {error}"), RETRY),
    }
}

/// Puts the VM back in rotation; a failure is logged (the answer of these phases is not used).
/// With several events in flight at once this releases the VM at the first one's end: the
/// bundled lb-drain plugin keeps the set of events it drained for in `state` instead.
fn back_in_rotation(event: &Event) {
    match host::set_ready(true) {
        Ok(()) => log::info!(
            "{} {} is over: back in rotation",
            event.event_type,
            event.id
        ),
        Err(error) => log::error!("cannot put the VM back in rotation: {error}"),
    }
}

forewarn_sdk::export!(ThisPlugin);
