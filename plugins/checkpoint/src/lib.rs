//! Bundled plugin `checkpoint`: asks the workload to checkpoint before maintenance (HTTP or a
//! named action), defers while it runs, approves when done; asks it to restore afterwards.

mod logic;

use std::time::Duration;

use forewarn_sdk::host::{self, http, log, state};
use forewarn_sdk::{Context, Decision, Event, HostError, Phase, Plugin};

use logic::{
    CheckpointSettings, Progress, Restore, Trigger, read_action_exit, read_status_answer,
    read_trigger_answer,
};

/// The plugin; `forewarn_sdk::export!` makes it the component's handler.
struct Checkpoint;

impl Plugin for Checkpoint {
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
        if !ctx.affects_this_vm {
            return Decision::approve();
        }
        let settings = match CheckpointSettings::from_lookup(host::config) {
            Ok(settings) => settings,
            Err(problem) => {
                log::error!("{problem}");
                return Decision::defer(problem, Duration::from_secs(30));
            }
        };
        match phase {
            Phase::Prepare => prepare(event, &settings),
            Phase::Started => Decision::approve(),
            Phase::EndedAfterStart => {
                restore(event, &settings);
                Decision::approve()
            }
            Phase::EndedWithoutStart => {
                log::info!(
                    "{} was canceled: the checkpoint is kept, nothing to restore",
                    event.id
                );
                forget(event);
                Decision::approve()
            }
        }
    }
}

/// State key: "requested" while a checkpoint for the event runs, "done" once it is taken.
fn progress_key(event: &Event) -> String {
    format!("checkpoint/{}", event.id)
}

fn prepare(event: &Event, settings: &CheckpointSettings) -> Decision {
    let key = progress_key(event);
    let recorded = state::get_string(&key);
    if recorded.as_deref() == Some("done") {
        return Decision::approve();
    }
    let progress = match &settings.trigger {
        Trigger::None => {
            log::warn!(
                "no checkpoint-url or checkpoint-action configured: approving without a checkpoint"
            );
            return Decision::approve();
        }
        Trigger::Http { url, status_url } => {
            http_progress(event, url, status_url.as_deref(), recorded.is_some())
        }
        Trigger::Action(name) => action_progress(name),
    };
    match progress {
        Progress::Done => {
            let _ignored = state::set_string(&key, "done");
            log::info!("checkpoint taken for {} {}", event.event_type, event.id);
            Decision::approve()
        }
        Progress::Running(why) => {
            let _ignored = state::set_string(&key, "requested");
            Decision::defer(why, settings.retry)
        }
        Progress::Failed(why) => {
            // Ask again from the start next time.
            let _ignored = state::delete(&key);
            log::warn!("checkpoint for {} not taken: {why}", event.id);
            Decision::defer(format!("checkpoint not taken: {why}"), settings.retry)
        }
    }
}

/// Triggers the checkpoint (unless already requested), then reads the status URL if any.
fn http_progress(event: &Event, url: &str, status_url: Option<&str>, requested: bool) -> Progress {
    if !requested {
        let answer = http::post(url, "application/json", event.notice_json());
        let progress = match answer {
            Ok(response) => {
                read_trigger_answer(response.status, &response.text(), status_url.is_some())
            }
            Err(error) => Progress::Failed(host_error_text(url, &error)),
        };
        if !matches!(progress, Progress::Running(_)) {
            return progress;
        }
        log::info!("checkpoint requested at {url}");
    }
    let Some(status_url) = status_url else {
        return Progress::Done;
    };
    match http::get(status_url) {
        Ok(response) => read_status_answer(response.status, &response.text()),
        Err(HostError::TimedOut) => Progress::Running("status check timed out".into()),
        Err(error) => Progress::Failed(host_error_text(status_url, &error)),
    }
}

fn action_progress(name: &str) -> Progress {
    match host::run_action(name) {
        Ok(output) => read_action_exit(output.exit_code, &output.stderr),
        Err(HostError::TimedOut) => Progress::Failed(format!(
            "action `{name}` ran past the deadline and was stopped"
        )),
        Err(error) => Progress::Failed(format!("action `{name}`: {error}")),
    }
}

fn restore(event: &Event, settings: &CheckpointSettings) {
    forget(event);
    match &settings.restore {
        Restore::None => log::info!(
            "{} is over; no restore-url or restore-action configured",
            event.id
        ),
        Restore::Http(url) => match http::post(url, "application/json", event.notice_json()) {
            Ok(response) if response.is_success() => log::info!("restore requested at {url}"),
            Ok(response) => log::error!("restore request to {url} answered {}", response.status),
            Err(error) => log::error!("{}", host_error_text(url, &error)),
        },
        Restore::Action(name) => match host::run_action(name) {
            Ok(output) if output.succeeded() => log::info!("restore action `{name}` succeeded"),
            Ok(output) => log::error!(
                "restore action `{name}` exited {:?}: {}",
                output.exit_code,
                output.stderr.trim()
            ),
            Err(error) => log::error!("restore action `{name}`: {error}"),
        },
    }
}

fn forget(event: &Event) {
    let _ignored = state::delete(&progress_key(event));
}

fn host_error_text(url: &str, error: &HostError) -> String {
    format!("request to {url}: {error}")
}

forewarn_sdk::export!(Checkpoint);
