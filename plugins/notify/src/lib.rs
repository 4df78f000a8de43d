//! Bundled plugin `notify`: posts one message per transition of an event (scheduled, started,
//! ended, canceled) to Slack, Teams and/or a JSON webhook; it always approves.

mod logic;
mod message;
mod outcome;
mod template;
#[cfg(test)]
mod tests;

use forewarn_sdk::host::{self, http, log, state};
use forewarn_sdk::{Context, Decision, Event, HttpRequest, Phase, Plugin};

use logic::{SentMarks, Settings, Target, Transition, next_retry, sent_mark};
use message::Notice;

/// State key set once notify has said that no target is configured.
const UNCONFIGURED_NOTED_KEY: &str = "unconfigured-noted";

/// The plugin; `forewarn_sdk::export!` makes it the component's handler.
struct Notify;

impl Plugin for Notify {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        match Settings::from_lookup(host::config) {
            Ok(settings) => notify(event, phase, ctx, &settings),
            // A broken config must not hold maintenance up: say what to fix, and approve.
            Err(problem) => log::error!("{problem}; nothing is sent until it is fixed"),
        }
        Decision::approve()
    }
}

fn notify(event: &Event, phase: Phase, ctx: &Context, settings: &Settings) {
    if settings.targets.is_empty() {
        note_unconfigured();
        return;
    }
    if state::get(UNCONFIGURED_NOTED_KEY).is_some() {
        let _ignored = state::delete(UNCONFIGURED_NOTED_KEY);
    }
    if let Some(transition) = settings.wanted(phase, ctx) {
        send_once(event, ctx, settings, transition);
    }
    // The event is over: forget what was sent for it (even when its end is not reported).
    if Transition::of_phase(phase).is_final() {
        let _ignored = state::delete(&sent_key(event));
    }
}

/// Sends `transition` of `event` to every target, unless it was sent (or begun) before.
fn send_once(event: &Event, ctx: &Context, settings: &Settings, transition: Transition) {
    let key = sent_key(event);
    let mark = sent_mark(transition, event.not_before_unix_ms);
    let sent = SentMarks::parse(&state::get_string(&key).unwrap_or_default());
    if sent.contains(&mark) {
        log::debug!("{} of {} was sent already", transition.as_str(), event.id);
        return;
    }
    let mut notice = Notice::new(event, ctx, transition);
    notice.rescheduled = transition == Transition::Scheduled && sent.was_scheduled();
    if let (Transition::Ended, Some(url)) = (transition, &settings.outcome_url) {
        notice.outcome = outcome_of(url, event, ctx);
    }
    // Marked before sending: a call cut off mid-send is not sent again (at most once), so
    // a receiver that hangs cannot hold the event up call after call.
    remember_sent(&key, sent, mark);
    for target in &settings.targets {
        send_with_retries(target, &notice, ctx);
    }
}

/// The event's outcome record from the daemon's `/status/events` at `url`: asked again a few
/// times while its impact is still being measured (the record is updated as the daemon sees
/// the event over, beside this call), then taken as it is. None when it cannot be read.
fn outcome_of(url: &str, event: &Event, ctx: &Context) -> Option<outcome::Outcome> {
    let mut last = None;
    for attempt in 0..OUTCOME_TRIES {
        if attempt > 0 {
            if ctx.time_left() < OUTCOME_RETRY_AFTER * 2 {
                break;
            }
            std::thread::sleep(OUTCOME_RETRY_AFTER);
        }
        match http::get(url) {
            Ok(answer) if answer.is_success() => {
                let body = String::from_utf8_lossy(&answer.body).into_owned();
                last = outcome::from_events_view(&body, &event.id);
                if last.as_ref().is_some_and(|outcome| outcome.settled) {
                    break;
                }
            }
            Ok(answer) => {
                log::warn!(
                    "outcome-url answered {}: the ended notice says no more than that the event ended",
                    answer.status
                );
                return None;
            }
            Err(error) => {
                log::warn!(
                    "cannot read the outcome record from outcome-url ({error}): grant its host:port under [capabilities] http; the ended notice says no more than that the event ended"
                );
                return None;
            }
        }
    }
    last
}

/// How many times the outcome record is asked for while its impact is pending.
const OUTCOME_TRIES: u32 = 4;
/// The wait between those asks.
const OUTCOME_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// Says once (until a target is configured) that there is nowhere to send to.
fn note_unconfigured() {
    if state::get_bool(UNCONFIGURED_NOTED_KEY) == Some(true) {
        return;
    }
    log::info!(
        "no slack-webhook-url, teams-webhook-url or webhook-url configured: nothing to send; approving"
    );
    let _ignored = state::set_bool(UNCONFIGURED_NOTED_KEY, true);
}

/// State key listing what was sent for `event`, one mark a line.
fn sent_key(event: &Event) -> String {
    format!("sent/{}", event.id)
}

fn remember_sent(key: &str, mut sent: SentMarks, mark: String) {
    sent.insert(mark);
    if let Err(error) = state::set_string(key, &sent.render()) {
        log::warn!("cannot record what was sent for {key} ({error}); it may be sent again");
    }
}

/// POSTs `notice` to `target`, trying again after a failure while the backoff and the
/// call's deadline allow; then gives up (logged) and lets the caller approve.
fn send_with_retries(target: &Target, notice: &Notice, ctx: &Context) {
    let (headers, body) = target.request(notice);
    let mut request = HttpRequest::new("POST", &target.url).body(body);
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    let mut failures = 0;
    loop {
        let problem = match http::send(&request) {
            Ok(response) if response.is_success() => {
                log::info!("sent {} to {}", subject(notice), target.name());
                return;
            }
            Ok(response) => format!("answered {}", response.status),
            Err(error) => error.to_string(),
        };
        failures += 1;
        let Some(wait) = next_retry(failures, ctx.time_left()) else {
            log::error!(
                "gave up sending {} to {} after {failures} tries: {problem}",
                subject(notice),
                target.name()
            );
            return;
        };
        // The URL is not logged: a webhook URL is its own secret.
        log::warn!(
            "{}: {problem}; trying again in {} ms",
            target.name(),
            wait.as_millis()
        );
        std::thread::sleep(wait);
    }
}

/// "scheduled of <event id>", for the log.
fn subject(notice: &Notice) -> String {
    format!("{} of {}", notice.transition.as_str(), notice.event.id)
}

forewarn_sdk::export!(Notify);
