//! Operator-defined actions for plugins (`run-action`): the grant check, then the command run
//! without a shell, output captured and capped, killed at its timeout or the call's deadline.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::bindings::{ActionOutput, HostError};
use crate::services::ActionSpec;

/// Longest stdout (and stderr) handed back to a plugin; the rest is read and dropped.
pub const ACTION_OUTPUT_MAX_BYTES: usize = 64 * 1024;

/// The action `name` when the plugin may run it: granted in its manifest and defined in the
/// daemon config. Err names the missing setting.
pub fn resolve<'a>(
    plugin: &str,
    name: &str,
    granted: &[String],
    defined: &'a BTreeMap<String, ActionSpec>,
) -> Result<&'a ActionSpec, HostError> {
    if !granted.iter().any(|grant| grant == name) {
        return Err(HostError::NotGranted(format!(
            "plugin `{plugin}` may not run action `{name}`: add \"{name}\" to \
             [capabilities] actions in {plugin}.toml"
        )));
    }
    defined.get(name).ok_or_else(|| {
        HostError::Invalid(format!(
            "action `{name}` is granted to plugin `{plugin}` but not defined: add \
             [actions.{name}] with argv = [\"program\", \"arg\", …] to the daemon config"
        ))
    })
}

/// Runs `spec`: stdin from /dev/null, stdout and stderr captured (each cut at 64 KiB), the
/// process killed at `min(spec.timeout, deadline)` with `timed-out` as the answer.
pub async fn run(spec: &ActionSpec, deadline: Instant) -> Result<ActionOutput, HostError> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(HostError::Invalid("the action's argv is empty".into()));
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| HostError::Failed(format!("cannot start `{program}`: {error}")))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let cutoff = deadline.min(Instant::now() + spec.timeout);
    let finished = async {
        let (status, stdout, stderr) =
            tokio::join!(child.wait(), read_capped(stdout), read_capped(stderr));
        (status, stdout, stderr)
    };
    let (status, stdout, stderr) = match tokio::time::timeout_at(cutoff.into(), finished).await {
        Ok(done) => done,
        Err(_elapsed) => {
            // kill_on_drop would do it too; killing here also reaps the process at once.
            let _ignored = child.kill().await;
            return Err(HostError::TimedOut);
        }
    };
    let status = status
        .map_err(|error| HostError::Failed(format!("waiting for `{program}` failed: {error}")))?;
    Ok(ActionOutput {
        exit_code: status.code(),
        stdout,
        stderr,
    })
}

/// Reads a pipe to its end, keeping the first 64 KiB (on a character boundary).
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let room = ACTION_OUTPUT_MAX_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..read.min(room)]);
            }
        }
    }
    let text = String::from_utf8_lossy(&kept).into_owned();
    crate::host_api::truncate(&text, ACTION_OUTPUT_MAX_BYTES).to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn spec(argv: &[&str], timeout: Duration) -> ActionSpec {
        ActionSpec {
            argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
            timeout,
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn only_granted_and_defined_actions_resolve() {
        let defined = BTreeMap::from([("stop-app".to_owned(), spec(&["true"], Duration::ZERO))]);
        let granted = vec!["stop-app".to_owned(), "start-app".to_owned()];
        assert!(resolve("p", "stop-app", &granted, &defined).is_ok());
        let error = resolve("p", "reboot-now", &granted, &defined).unwrap_err();
        assert!(
            matches!(&error, HostError::NotGranted(text) if text.contains("[capabilities] actions in p.toml")),
            "{error:?}"
        );
        let error = resolve("p", "start-app", &granted, &defined).unwrap_err();
        assert!(
            matches!(&error, HostError::Invalid(text) if text.contains("[actions.start-app]")),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn exit_code_and_output_come_back() {
        let action = spec(
            &["sh", "-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(10),
        );
        let output = run(&action, far()).await.unwrap();
        assert_eq!(output.exit_code, Some(3));
        assert_eq!(output.stdout, "out\n");
        assert_eq!(output.stderr, "err\n");
    }

    #[tokio::test]
    async fn output_is_capped() {
        let action = spec(
            &["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"],
            Duration::from_secs(10),
        );
        let output = run(&action, far()).await.unwrap();
        assert_eq!(output.exit_code, Some(0));
        assert_eq!(output.stdout.len(), ACTION_OUTPUT_MAX_BYTES);
    }

    #[tokio::test]
    async fn a_slow_action_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
        let action = spec(&["sh", "-c", &script], Duration::from_millis(300));
        let result = run(&action, far()).await;
        assert_eq!(result, Err(HostError::TimedOut));
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let alive = std::path::Path::new(&format!("/proc/{}", pid.trim())).exists();
        assert!(!alive, "the action's process {pid} still runs");
    }

    #[tokio::test]
    async fn a_call_cut_off_mid_action_leaves_no_process_behind() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
        let action = spec(&["sh", "-c", &script], Duration::from_secs(60));
        let call = tokio::spawn(async move { run(&action, far()).await });
        let pid = loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file)
                && !text.trim().is_empty()
            {
                break text.trim().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        // What the runtime does when a call runs past its budget: drop the call's future.
        call.abort();
        let _ignored = call.await;
        let stat = format!("/proc/{pid}/stat");
        let deadline = Instant::now() + Duration::from_secs(5);
        while running(&stat) {
            assert!(
                Instant::now() < deadline,
                "the action's process {pid} still runs"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether the process behind `/proc/PID/stat` exists and is not a zombie.
    fn running(stat: &str) -> bool {
        std::fs::read_to_string(stat)
            .ok()
            .and_then(|text| {
                text.rsplit_once(") ")
                    .map(|(_, rest)| !rest.starts_with('Z'))
            })
            .unwrap_or(false)
    }

    #[tokio::test]
    async fn the_call_deadline_cuts_an_action_too() {
        let action = spec(&["sleep", "30"], Duration::from_secs(60));
        let deadline = Instant::now() + Duration::from_millis(200);
        assert_eq!(run(&action, deadline).await, Err(HostError::TimedOut));
    }

    #[tokio::test]
    async fn a_missing_program_is_failed() {
        let action = spec(&["/nonexistent/forewarn-test"], Duration::from_secs(1));
        let result = run(&action, far()).await;
        assert!(matches!(result, Err(HostError::Failed(_))), "{result:?}");
    }
}
