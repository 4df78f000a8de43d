//! Bundled plugin `checkpoint`: asks the workload to checkpoint before maintenance (HTTP or a
//! named action), defers while it runs, approves when done (uploaded to Blob Storage in Blob
//! mode); asks it to restore afterwards, and on a new VM from the uploaded checkpoint.

mod blob;
mod logic;
#[cfg(test)]
mod tests;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use forewarn_sdk::host::{self, http, identity, log, state};
use forewarn_sdk::{
    Context, Decision, Event, HostError, HttpRequest, HttpResponse, Phase, Plugin, StartContext,
};

use blob::{BlobSettings, Download, Upload};
use logic::{
    CheckpointSettings, Progress, Restore, Stage, Trigger, local_checkpoint_warning,
    read_action_exit, read_status_answer, read_trigger_answer,
};

/// State key: the ETag of the last blob handed back to the workload, so that one checkpoint
/// is restored once.
const RESTORED_ETAG_KEY: &str = "checkpoint/blob-restored-etag";

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
            Phase::Prepare => {
                if ctx.attempt == 1 {
                    warn_if_local_only(ctx.vm.eviction_deletes_disks(), &settings);
                }
                prepare(event, &ctx.vm_name, &settings)
            }
            Phase::Started => Decision::approve(),
            Phase::EndedAfterStart => {
                if let Some(blob) = &settings.blob {
                    report_restore(restore_from_blob(blob, &ctx.vm_name), &event.id);
                }
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

    fn on_start(ctx: &StartContext) {
        let settings = match CheckpointSettings::from_lookup(host::config) {
            Ok(settings) => settings,
            Err(problem) => {
                log::error!("{problem}");
                return;
            }
        };
        warn_if_local_only(ctx.vm.eviction_deletes_disks(), &settings);
        let Some(blob) = &settings.blob else {
            return;
        };
        if !ctx.first_run {
            log::info!("the daemon's journal survived (not a new VM): nothing to restore at start");
            return;
        }
        report_restore(restore_from_blob(blob, &ctx.vm_name), "a new VM");
    }
}

fn warn_if_local_only(eviction_deletes_disks: bool, settings: &CheckpointSettings) {
    let checkpoints = settings.trigger != Trigger::None;
    if let Some(warning) =
        local_checkpoint_warning(eviction_deletes_disks, checkpoints, settings.blob.is_some())
    {
        log::warn!("{warning}");
    }
}

/// State key: the event's [`Stage`].
fn progress_key(event: &Event) -> String {
    format!("checkpoint/{}", event.id)
}

fn prepare(event: &Event, vm_name: &str, settings: &CheckpointSettings) -> Decision {
    let key = progress_key(event);
    let recorded = state::get_string(&key).as_deref().and_then(Stage::parse);
    match (recorded, &settings.blob) {
        (Some(stage), _) if stage.is_final(settings.blob.is_some()) => {
            return Decision::approve();
        }
        (Some(Stage::Taken), Some(blob)) => return upload_step(event, vm_name, settings, blob),
        _ => {}
    }
    let progress = match &settings.trigger {
        // Blob mode with checkpoint-data-url alone: the bytes are ready at any time.
        Trigger::None if settings.blob.is_some() => Progress::Done,
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
            let _ignored = state::set_string(&key, Stage::Taken.as_str());
            log::info!("checkpoint taken for {} {}", event.event_type, event.id);
            match &settings.blob {
                None => Decision::approve(),
                Some(blob) => upload_step(event, vm_name, settings, blob),
            }
        }
        Progress::Running(why) => {
            let _ignored = state::set_string(&key, Stage::Requested.as_str());
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

/// Uploads the taken checkpoint; approves once it is stored, else defers (the daemon asks
/// again until the event starts: a checkpoint that is not off the VM is not approved).
fn upload_step(
    event: &Event,
    vm_name: &str,
    settings: &CheckpointSettings,
    blob: &BlobSettings,
) -> Decision {
    match upload(blob, vm_name) {
        Ok((url, size)) => {
            let _ignored = state::set_string(&progress_key(event), Stage::Uploaded.as_str());
            log::info!(
                "checkpoint for {} uploaded to {url} ({size} bytes)",
                event.id
            );
            Decision::approve()
        }
        Err(why) => {
            log::warn!(
                "checkpoint for {} not uploaded, asking again in {} s: {why}",
                event.id,
                settings.retry.as_secs()
            );
            Decision::defer(format!("checkpoint not uploaded: {why}"), settings.retry)
        }
    }
}

/// GETs the checkpoint's bytes from the workload and PUTs them into the blob, creating the
/// container once if it is missing; the blob's URL and size.
fn upload(blob: &BlobSettings, vm_name: &str) -> Result<(String, usize), String> {
    let url = blob.blob_url(vm_name).map_err(|error| error.to_string())?;
    let bytes = fetch_checkpoint_bytes(&blob.data_url)?;
    let token = storage_token()?;
    let put = |bytes: &[u8]| {
        let request = storage_request("PUT", &url, &token)
            .header("x-ms-blob-type", "BlockBlob")
            .header("content-type", "application/octet-stream")
            .body(bytes);
        send(&request).map(|answer| blob::read_upload_answer(answer.status, error_code(&answer)))
    };
    let outcome = match put(&bytes)? {
        Upload::NoContainer => {
            create_container(blob, &token)?;
            put(&bytes)?
        }
        other => other,
    };
    match outcome {
        Upload::Stored => Ok((url, bytes.len())),
        Upload::NoContainer => Err(format!(
            "the container of {url} is still missing after it was created"
        )),
        Upload::Failed(why) => Err(why),
    }
}

fn create_container(blob: &BlobSettings, token: &str) -> Result<(), String> {
    let url = blob.create_container_url();
    let answer = send(&storage_request("PUT", &url, token))?;
    blob::read_create_container_answer(answer.status, error_code(&answer))?;
    log::info!("created the container {}", blob.container_url);
    Ok(())
}

/// GET checkpoint-data-url: the whole body of a 2xx answer.
fn fetch_checkpoint_bytes(url: &str) -> Result<Vec<u8>, String> {
    let answer = send(&HttpRequest::new("GET", url))?;
    if !answer.is_success() {
        return Err(format!(
            "checkpoint-data-url {url} answered {}",
            answer.status
        ));
    }
    blob::check_complete(answer.header("content-length"), answer.body.len())
        .map_err(|why| format!("checkpoint-data-url {url}: {why}"))?;
    Ok(answer.body)
}

/// What a restore from Blob Storage came to.
enum BlobRestore {
    Handed { url: String, size: usize },
    NothingStored(String),
    AlreadyHanded(String),
    NoTarget,
}

/// GETs the blob and, unless it is the one restored last, PUTs its bytes to restore-data-url.
fn restore_from_blob(blob: &BlobSettings, vm_name: &str) -> Result<BlobRestore, String> {
    let Some(target) = &blob.restore_data_url else {
        return Ok(BlobRestore::NoTarget);
    };
    let url = blob.blob_url(vm_name).map_err(|error| error.to_string())?;
    let token = storage_token()?;
    let answer = send(&storage_request("GET", &url, &token))?;
    match blob::read_download_answer(answer.status, error_code(&answer)) {
        Download::Found => {}
        Download::Nothing => return Ok(BlobRestore::NothingStored(url)),
        Download::Failed(why) => return Err(why),
    }
    blob::check_complete(answer.header("content-length"), answer.body.len())
        .map_err(|why| format!("{url}: {why}"))?;
    let etag = answer.header("etag").unwrap_or_default().to_owned();
    if !etag.is_empty() && state::get_string(RESTORED_ETAG_KEY).as_deref() == Some(&etag) {
        return Ok(BlobRestore::AlreadyHanded(url));
    }
    let request = HttpRequest::new("PUT", target)
        .header("content-type", "application/octet-stream")
        .body(answer.body.as_slice());
    let handed = send(&request)?;
    if !handed.is_success() {
        return Err(format!(
            "restore-data-url {target} answered {}",
            handed.status
        ));
    }
    let _ignored = state::set_string(RESTORED_ETAG_KEY, &etag);
    Ok(BlobRestore::Handed {
        url: target.clone(),
        size: answer.body.len(),
    })
}

fn report_restore(outcome: Result<BlobRestore, String>, occasion: &str) {
    match outcome {
        Ok(BlobRestore::Handed { url, size }) => {
            log::info!("restored the checkpoint for {occasion}: {size} bytes handed to {url}");
        }
        Ok(BlobRestore::NothingStored(url)) => {
            log::info!("no checkpoint to restore for {occasion}: {url} does not exist");
        }
        Ok(BlobRestore::AlreadyHanded(url)) => {
            log::info!("the checkpoint at {url} was already restored; not again for {occasion}");
        }
        Ok(BlobRestore::NoTarget) => log::info!(
            "no restore-data-url configured: the checkpoint stays in Blob Storage ({occasion})"
        ),
        Err(why) => log::error!("checkpoint not restored for {occasion}: {why}"),
    }
}

/// A Blob service request with the managed identity's token and the version headers.
fn storage_request(method: &str, url: &str, token: &str) -> HttpRequest {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    HttpRequest::new(method, url)
        .header("authorization", &format!("Bearer {token}"))
        .header("x-ms-version", blob::STORAGE_VERSION)
        .header("x-ms-date", &forewarn_sdk::time::http_date(now))
}

fn storage_token() -> Result<String, String> {
    identity::access_token(identity::STORAGE)
        .map(|token| token.token)
        .map_err(|error| {
            format!(
                "no managed identity token for {}: {error}",
                identity::STORAGE
            )
        })
}

fn error_code(answer: &HttpResponse) -> Option<&str> {
    answer.header("x-ms-error-code")
}

fn send(request: &HttpRequest) -> Result<HttpResponse, String> {
    http::send(request).map_err(|error| host_error_text(&request.url, &error))
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
