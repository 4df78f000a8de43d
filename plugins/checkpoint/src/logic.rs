//! checkpoint's decisions as pure functions: its settings from config and how to read the
//! workload's answers (HTTP status and body, or an action's exit code); tested natively.

use std::time::Duration;

use crate::blob::BlobSettings;

/// Exit code a checkpoint action uses to say "started, still running: ask me again"
/// (`EX_TEMPFAIL` from sysexits.h).
const STILL_RUNNING_EXIT_CODE: i32 = 75;

/// How the workload is asked to checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// POST to this URL; then poll `status_url` if set.
    Http {
        url: String,
        status_url: Option<String>,
    },
    /// Run this named action until it exits 0.
    Action(String),
    /// Nothing configured: approve at once.
    None,
}

/// How the workload is asked to restore after an event that started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restore {
    Http(String),
    Action(String),
    None,
}

/// checkpoint's configuration (the `[config]` table of `checkpoint.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckpointSettings {
    pub(crate) trigger: Trigger,
    pub(crate) restore: Restore,
    /// Time between two checks of a running checkpoint.
    pub(crate) retry: Duration,
    /// Blob mode: where the checkpoint's bytes are uploaded; `None` keeps them local.
    pub(crate) blob: Option<BlobSettings>,
}

impl CheckpointSettings {
    /// Reads `checkpoint-url`, `status-url`, `checkpoint-action`, `restore-url`,
    /// `restore-action`, `retry-seconds` (default 2) and the Blob mode keys (see
    /// [`BlobSettings::from_values`]) through `lookup`. A URL wins over an action when both
    /// are set.
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let value = |key: &str| lookup(key).filter(|value| !value.trim().is_empty());
        let trigger = match (value("checkpoint-url"), value("checkpoint-action")) {
            (Some(url), _) => Trigger::Http {
                url,
                status_url: value("status-url"),
            },
            (None, Some(action)) => Trigger::Action(action),
            (None, None) => Trigger::None,
        };
        let restore = match (value("restore-url"), value("restore-action")) {
            (Some(url), _) => Restore::Http(url),
            (None, Some(action)) => Restore::Action(action),
            (None, None) => Restore::None,
        };
        let retry_seconds = match value("retry-seconds") {
            None => 2,
            Some(text) => text.trim().parse().map_err(|_| {
                format!("checkpoint config `retry-seconds` = \"{text}\" is not a whole number")
            })?,
        };
        let blob = BlobSettings::from_values(value).map_err(|error| error.to_string())?;
        Ok(CheckpointSettings {
            trigger,
            restore,
            retry: Duration::from_secs(retry_seconds),
            blob,
        })
    }
}

/// How far the checkpoint for one event got; kept in the plugin's state across calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The workload was asked and is still checkpointing.
    Requested,
    /// The workload's checkpoint is done (on the VM).
    Taken,
    /// Blob mode: the checkpoint's bytes are in Blob Storage.
    Uploaded,
}

impl Stage {
    /// The text kept in state ("done" for `Taken`, as journals of earlier versions say).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stage::Requested => "requested",
            Stage::Taken => "done",
            Stage::Uploaded => "uploaded",
        }
    }

    /// The stage `text` names, if any.
    pub(crate) fn parse(text: &str) -> Option<Stage> {
        [Stage::Requested, Stage::Taken, Stage::Uploaded]
            .into_iter()
            .find(|stage| stage.as_str() == text)
    }

    /// Whether Prepare is answered: the checkpoint is where it has to be.
    pub(crate) fn is_final(self, blob_mode: bool) -> bool {
        match self {
            Stage::Requested => false,
            Stage::Taken => !blob_mode,
            Stage::Uploaded => true,
        }
    }
}

/// The warning for a checkpoint kept on disks that an eviction deletes (Spot VM, `Delete`
/// policy, a checkpoint configured, Blob mode off); `None` when there is nothing to warn of.
pub(crate) fn local_checkpoint_warning(
    eviction_deletes_disks: bool,
    checkpoints: bool,
    blob_mode: bool,
) -> Option<&'static str> {
    (eviction_deletes_disks && checkpoints && !blob_mode).then_some(
        "this Spot VM's eviction policy is Delete: a checkpoint kept on the VM's disks is deleted with them on eviction; set `blob-container-url` and `checkpoint-data-url` in checkpoint.toml [config] to upload it to Blob Storage",
    )
}

/// What the workload said about its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Progress {
    Done,
    Running(String),
    Failed(String),
}

/// Reads the answer to POST `checkpoint-url`: any 2xx means the request was taken (done at
/// once when there is no status URL to poll); anything else is a failure.
pub(crate) fn read_trigger_answer(status: u16, body: &str, has_status_url: bool) -> Progress {
    if !(200..300).contains(&status) {
        return Progress::Failed(format!(
            "checkpoint request answered {status}{}",
            excerpt(body)
        ));
    }
    if has_status_url {
        return Progress::Running("checkpoint started".into());
    }
    Progress::Done
}

/// Reads the answer to GET `status-url`: 200 with a body containing "done" is done; a
/// 5xx, or a body containing "failed", is a failure; anything else is still running.
pub(crate) fn read_status_answer(status: u16, body: &str) -> Progress {
    let lower = body.to_ascii_lowercase();
    if status >= 500 || lower.contains("failed") {
        return Progress::Failed(format!("the workload reports {status}{}", excerpt(body)));
    }
    if status == 200 && lower.contains("done") {
        return Progress::Done;
    }
    Progress::Running(format!("checkpoint running ({status}{})", excerpt(body)))
}

/// Reads a checkpoint action's exit: 0 done, 75 still running, anything else (or a signal)
/// a failure with the last line of stderr.
pub(crate) fn read_action_exit(exit_code: Option<i32>, stderr: &str) -> Progress {
    match exit_code {
        Some(0) => Progress::Done,
        Some(STILL_RUNNING_EXIT_CODE) => {
            Progress::Running("checkpoint action still running".into())
        }
        Some(code) => Progress::Failed(format!(
            "checkpoint action exited {code}{}",
            excerpt(stderr)
        )),
        None => Progress::Failed("checkpoint action was killed by a signal".into()),
    }
}

/// ": <last non-empty line, at most 200 bytes>", or "" for an empty text.
fn excerpt(text: &str) -> String {
    let Some(line) = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
    else {
        return String::new();
    };
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!(": {}", &line[..end])
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<CheckpointSettings, String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        CheckpointSettings::from_lookup(|key| map.get(key).cloned())
    }

    #[test]
    fn nothing_configured_means_nothing_to_do() {
        let parsed = settings(&[]).unwrap();
        assert_eq!(parsed.trigger, Trigger::None);
        assert_eq!(parsed.restore, Restore::None);
        assert_eq!(parsed.retry, Duration::from_secs(2));
        assert_eq!(parsed.blob, None);
    }

    #[test]
    fn blob_mode_needs_a_data_url() {
        let problem =
            settings(&[("blob-container-url", "https://a.blob.core.windows.net/ckp")]).unwrap_err();
        assert!(problem.contains("checkpoint-data-url"), "{problem}");
        let parsed = settings(&[
            ("blob-container-url", "https://a.blob.core.windows.net/ckp"),
            ("checkpoint-data-url", "http://127.0.0.1:8080/data"),
        ])
        .unwrap();
        assert!(parsed.blob.is_some());
        assert_eq!(parsed.trigger, Trigger::None);
    }

    #[test]
    fn url_wins_over_action() {
        let parsed = settings(&[
            ("checkpoint-url", "http://127.0.0.1:8080/checkpoint"),
            ("status-url", "http://127.0.0.1:8080/status"),
            ("checkpoint-action", "ckpt"),
            ("restore-action", "restore"),
            ("retry-seconds", "1"),
        ])
        .unwrap();
        assert_eq!(
            parsed.trigger,
            Trigger::Http {
                url: "http://127.0.0.1:8080/checkpoint".into(),
                status_url: Some("http://127.0.0.1:8080/status".into())
            }
        );
        assert_eq!(parsed.restore, Restore::Action("restore".into()));
        assert_eq!(parsed.retry, Duration::from_secs(1));
        assert!(settings(&[("retry-seconds", "x")]).is_err());
    }

    #[test]
    fn stages_round_trip_and_say_when_prepare_is_done() {
        for stage in [Stage::Requested, Stage::Taken, Stage::Uploaded] {
            assert_eq!(Stage::parse(stage.as_str()), Some(stage));
        }
        assert_eq!(Stage::parse("done"), Some(Stage::Taken));
        assert_eq!(Stage::parse("junk"), None);
        assert!(Stage::Taken.is_final(false));
        assert!(!Stage::Taken.is_final(true));
        assert!(Stage::Uploaded.is_final(true));
        assert!(!Stage::Requested.is_final(false));
    }

    #[test]
    fn only_a_local_checkpoint_on_a_delete_vm_is_warned_of() {
        let warning = local_checkpoint_warning(true, true, false).unwrap();
        assert!(warning.contains("blob-container-url"), "{warning}");
        assert_eq!(local_checkpoint_warning(true, true, true), None);
        assert_eq!(local_checkpoint_warning(false, true, false), None);
        assert_eq!(local_checkpoint_warning(true, false, false), None);
    }

    #[test]
    fn trigger_answers() {
        assert_eq!(read_trigger_answer(200, "", false), Progress::Done);
        assert!(matches!(
            read_trigger_answer(202, "", true),
            Progress::Running(_)
        ));
        let failed = read_trigger_answer(503, "busy\n", false);
        assert_eq!(
            failed,
            Progress::Failed("checkpoint request answered 503: busy".into())
        );
    }

    #[test]
    fn status_answers() {
        assert_eq!(read_status_answer(200, "done"), Progress::Done);
        assert_eq!(read_status_answer(200, "Checkpoint DONE\n"), Progress::Done);
        assert!(matches!(
            read_status_answer(202, "done soon"),
            Progress::Running(_)
        ));
        assert!(matches!(
            read_status_answer(200, "running 40%"),
            Progress::Running(_)
        ));
        assert!(matches!(
            read_status_answer(200, "failed: disk full"),
            Progress::Failed(_)
        ));
        assert!(matches!(read_status_answer(500, ""), Progress::Failed(_)));
    }

    #[test]
    fn action_exits() {
        assert_eq!(read_action_exit(Some(0), ""), Progress::Done);
        assert!(matches!(
            read_action_exit(Some(75), ""),
            Progress::Running(_)
        ));
        assert_eq!(
            read_action_exit(Some(2), "starting\nno space left\n"),
            Progress::Failed("checkpoint action exited 2: no space left".into())
        );
        assert!(matches!(read_action_exit(None, ""), Progress::Failed(_)));
    }
}
