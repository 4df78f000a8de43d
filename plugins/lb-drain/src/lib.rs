//! Bundled plugin `lb-drain`: takes this VM out of its load balancer before maintenance that
//! takes it down (readiness 503 until every load balancer probing `/readyz` has noticed, then
//! the connection drain, within the drain window; optional deregistration) and back in after.

mod logic;
#[cfg(test)]
mod tests;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use forewarn_sdk::host::{self, http, log, state};
use forewarn_sdk::{Context, Decision, Event, EventIds, EventType, Phase, Plugin};

use logic::{
    DrainEnd, DrainSettings, DrainStep, NO_PROBES_SEEN, ProbeReport, drain_step, should_drain,
    waiting_reason,
};

/// State key holding the ids of the events this plugin drained for, one per line.
const DRAINING_KEY: &str = "draining-events";

/// The plugin; `forewarn_sdk::export!` makes it the component's handler.
struct LbDrain;

impl Plugin for LbDrain {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        let settings = match DrainSettings::from_lookup(host::config) {
            Ok(settings) => settings,
            Err(problem) => {
                log::error!("{problem}");
                return Decision::defer(problem, Duration::from_secs(30));
            }
        };
        match phase {
            Phase::Prepare => prepare(event, ctx, &settings),
            Phase::Started => {
                hold_while_started(event, ctx, &settings);
                Decision::approve()
            }
            Phase::EndedAfterStart | Phase::EndedWithoutStart => {
                recover(event, ctx, &settings);
                Decision::approve()
            }
        }
    }
}

fn prepare(event: &Event, ctx: &Context, settings: &DrainSettings) -> Decision {
    if !should_drain(event, ctx, settings) {
        log::info!(
            "{} {}: no drain needed (another VM, or a short Freeze)",
            type_name(event),
            event.id
        );
        return Decision::approve();
    }
    if let Err(error) = host::set_ready(false) {
        return Decision::defer(
            format!("cannot mark the VM not ready: {error}"),
            Duration::from_secs(10),
        );
    }
    let started_ms = match remember_drain(&event.id) {
        Ok(started_ms) => started_ms,
        Err(error) => {
            return Decision::defer(
                format!("cannot record the drain: {error}"),
                Duration::from_secs(5),
            );
        }
    };
    let probes = probe_report(settings);
    if ctx.attempt == 1 && probes.is_some_and(|probes| probes.probers == 0) {
        log::warn!(
            "{NO_PROBES_SEEN} Draining for the whole window ({} s) instead.",
            settings.drain.as_secs()
        );
    }
    let now = now_ms();
    match drain_step(started_ms, now, settings, probes) {
        DrainStep::Wait {
            left,
            retry_after,
            waiting_for,
        } => Decision::defer(
            waiting_reason(waiting_for, left, settings.unhealthy_threshold),
            retry_after,
        ),
        DrainStep::Done(end) => {
            log_drain_end(end, probes, now.saturating_sub(started_ms));
            finish_drain(event, settings)
        }
    }
}

/// What the load balancers probing `/readyz` have seen; `None` (the window decides) when the
/// host cannot tell.
fn probe_report(settings: &DrainSettings) -> Option<ProbeReport> {
    match host::drain_progress(settings.unhealthy_threshold) {
        Ok(progress) => Some(progress.into()),
        Err(error) => {
            log::warn!(
                "cannot tell what the load balancers saw ({error}): the drain window decides"
            );
            None
        }
    }
}

fn log_drain_end(end: DrainEnd, probes: Option<ProbeReport>, elapsed_ms: u64) {
    let seconds = elapsed_ms as f64 / 1000.0;
    match end {
        DrainEnd::LoadBalancersNoticed => log::info!(
            "every load balancer probing /readyz ({}) took the VM out and open connections \
             drained, {seconds:.1} s after the VM was marked not ready",
            probes.map_or(0, |probes| probes.probers)
        ),
        DrainEnd::WindowPassed => match probes.filter(|probes| probes.probers > 0) {
            Some(probes) => log::warn!(
                "the drain window passed with {} of {} load balancer probers not yet seeing \
                 the VM out of rotation ({seconds:.1} s): raise drain-seconds, or check \
                 unhealthy-threshold against the load balancer's",
                probes.probers - probes.drained,
                probes.probers
            ),
            None => log::info!("the drain window passed ({seconds:.1} s)"),
        },
    }
}

/// The event's type for a log line: a type forewarn does not know (an OS image upgrade of a
/// scale set, say) by the text IMDS sent, not as "unknown".
fn type_name(event: &Event) -> String {
    if event.event_type == EventType::Unknown {
        return event.event_type_raw.clone();
    }
    event.event_type.to_string()
}

/// After the drain window: deregister (once, if configured), then approve.
fn finish_drain(event: &Event, settings: &DrainSettings) -> Decision {
    let done_key = format!("deregistered/{}", event.id);
    if let Some(url) = &settings.deregister_url
        && state::get_bool(&done_key) != Some(true)
    {
        match http::post(url, "application/json", event.notice_json()) {
            Ok(response) if response.is_success() => {
                log::info!("deregistered from the load balancer ({url})");
                let _ignored = state::set_bool(&done_key, true);
            }
            Ok(response) => {
                return Decision::defer(
                    format!("deregistration at {url} answered {}", response.status),
                    Duration::from_secs(2),
                );
            }
            Err(error) => {
                return Decision::defer(
                    format!("deregistration at {url} failed: {error}"),
                    Duration::from_secs(2),
                );
            }
        }
    }
    log::info!("drained for {} {}", type_name(event), event.id);
    Decision::approve()
}

/// The event that takes this VM down has started: hold the VM out of rotation until it
/// ends, prepared or not. Some IMDS implementations give an event a new id when it starts,
/// so the id drained for may already have ended (and been released) while this one runs.
fn hold_while_started(event: &Event, ctx: &Context, settings: &DrainSettings) {
    if !should_drain(event, ctx, settings) {
        return;
    }
    if let Err(error) = host::set_ready(false) {
        log::error!(
            "cannot mark the VM not ready while {} runs: {error}",
            event.id
        );
    }
    let mut draining = EventIds::parse(&state::get_string(DRAINING_KEY).unwrap_or_default());
    if draining.insert(&event.id) {
        if let Err(error) = state::set_string(DRAINING_KEY, &draining.render()) {
            log::error!("cannot record that {} holds the VM: {error}", event.id);
        }
        log::info!(
            "{} {} started: the VM stays out of rotation until it ends",
            type_name(event),
            event.id
        );
    }
}

/// The event is over: forget it, and when no other drained event is still in progress,
/// register again (if configured) and mark the VM ready. An event it drained for but could
/// not record (its state write failed: a full or read-only disk) releases the VM too.
fn recover(event: &Event, ctx: &Context, settings: &DrainSettings) {
    let mut draining = EventIds::parse(&state::get_string(DRAINING_KEY).unwrap_or_default());
    let recorded = draining.remove(&event.id);
    if !recorded && !should_drain(event, ctx, settings) {
        return;
    }
    if recorded {
        if let Err(error) = state::set_string(DRAINING_KEY, &draining.render()) {
            log::error!("cannot record that {} is over: {error}", event.id);
        }
        let _ignored = state::delete(&format!("drain-start/{}", event.id));
        let _ignored = state::delete(&format!("deregistered/{}", event.id));
    }
    if !draining.is_empty() {
        log::info!(
            "{} is over, but still drained for {}",
            event.id,
            draining.render().replace('\n', ", ")
        );
        return;
    }
    if let Some(url) = settings.register_url.as_ref().filter(|_| recorded) {
        match http::post(url, "application/json", event.notice_json()) {
            Ok(response) if response.is_success() => log::info!("registered again ({url})"),
            Ok(response) => log::error!("registration at {url} answered {}", response.status),
            Err(error) => log::error!("registration at {url} failed: {error}"),
        }
    }
    match host::set_ready(true) {
        Ok(()) => log::info!("{} is over: the VM is ready again", event.id),
        Err(error) => log::error!("cannot mark the VM ready again: {error}"),
    }
}

/// Adds the event to the drained set and returns when its drain started (now, the first time).
fn remember_drain(event_id: &str) -> Result<u64, forewarn_sdk::HostError> {
    let mut draining = EventIds::parse(&state::get_string(DRAINING_KEY).unwrap_or_default());
    if draining.insert(event_id) {
        state::set_string(DRAINING_KEY, &draining.render())?;
    }
    let start_key = format!("drain-start/{event_id}");
    if let Some(started_ms) = state::get_u64(&start_key) {
        return Ok(started_ms);
    }
    let started_ms = now_ms();
    state::set_u64(&start_key, started_ms)?;
    log::info!("marked not ready; draining for {event_id}");
    Ok(started_ms)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

forewarn_sdk::export!(LbDrain);
