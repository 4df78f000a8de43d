//! Operator-defined actions for plugins (`run-action`), once granted: the command run without
//! a shell in a process tree of its own (a process group; a Job Object on Windows), output
//! capped, the tree killed at the timeout.

use std::ffi::OsString;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use forewarn_platform::action_env;
use forewarn_platform::process_tree::{self, Limits, ProcessTree};

use crate::wit::latest::{ActionOutput, HostError};
use forewarn_events::truncate;

/// An operator-defined command (`[actions.NAME]` in the daemon config): run without a
/// shell, killed after `timeout` (or at the calling plugin's deadline, if sooner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionSpec {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// How long it may run before its process group is killed.
    pub timeout: Duration,
}

/// Longest stdout (and stderr) handed back to a plugin; the rest is read and dropped.
pub(crate) const ACTION_OUTPUT_MAX_BYTES: usize = 64 * 1024;

/// How long, after the action's own process exited, its output pipes are still read: a
/// background process it started and that keeps them open cannot hold the call.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// Runs `spec` in its own process tree: stdin from the null device, an allow-listed
/// environment ([`action_env`]), stdout and stderr captured (each cut at 64 KiB). At
/// `min(spec.timeout, deadline)` (or when the call is dropped) the whole tree is killed and
/// the answer is `timed-out`. When
/// the action's own process exits in time, what it started in the background keeps running
/// (an action may start an app), and its output is read for `PIPE_GRACE` more at most.
pub(crate) async fn run(spec: &ActionSpec, deadline: Instant) -> Result<ActionOutput, HostError> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(HostError::Invalid("the action's argv is empty".into()));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(allowed_env(std::env::vars_os()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    process_tree::prepare(command.as_std_mut(), Limits::default());
    let mut child = command
        .spawn()
        .map_err(|error| HostError::Failed(format!("cannot start `{program}`: {error}")))?;
    let mut group = ProcessTree::adopt(&child, Limits::default()).map_err(|error| {
        HostError::Failed(format!(
            "cannot give `{program}` a process tree of its own: {error}"
        ))
    })?;
    let cutoff = checked_cutoff(deadline, spec.timeout);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let status = {
        let reading = read_both(
            child.stdout.take(),
            child.stderr.take(),
            &mut stdout,
            &mut stderr,
        );
        let mut reading = std::pin::pin!(reading);
        let mut reading_done = false;
        let exited = tokio::time::timeout_at(cutoff.into(), async {
            loop {
                tokio::select! {
                    status = child.wait() => return status,
                    () = &mut reading, if !reading_done => reading_done = true,
                }
            }
        })
        .await;
        let Ok(status) = exited else {
            // At the timeout, everything the action started dies with it; this also reaps
            // the action's own process at once.
            group.kill();
            let _ignored = child.kill().await;
            return Err(HostError::TimedOut);
        };
        // It exited in time: what it started in the background (an app it was asked to
        // start) keeps running; its output is read for a short grace only.
        group.disarm();
        if !reading_done {
            let _cut = tokio::time::timeout(PIPE_GRACE, &mut reading).await;
        }
        status
    };
    let status = status
        .map_err(|error| HostError::Failed(format!("waiting for `{program}` failed: {error}")))?;
    Ok(ActionOutput {
        exit_code: status.code(),
        stdout: capped_text(&stdout),
        stderr: capped_text(&stderr),
    })
}

/// `min(deadline, now + timeout)`, where a timeout too large to add means "the deadline".
fn checked_cutoff(deadline: Instant, timeout: Duration) -> Instant {
    Instant::now()
        .checked_add(timeout)
        .map_or(deadline, |end| end.min(deadline))
}

/// The variables of `vars` an action may see ([`action_env::is_allowed`]).
fn allowed_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (OsString, OsString)> {
    vars.filter(|(name, _)| name.to_str().is_some_and(action_env::is_allowed))
}

/// Reads both pipes to their ends into `stdout` and `stderr`, keeping the first 64 KiB of each.
async fn read_both(
    stdout: Option<impl AsyncRead + Unpin>,
    stderr: Option<impl AsyncRead + Unpin>,
    stdout_kept: &mut Vec<u8>,
    stderr_kept: &mut Vec<u8>,
) {
    tokio::join!(
        read_capped(stdout, stdout_kept),
        read_capped(stderr, stderr_kept)
    );
}

/// Reads a pipe to its end into `kept`, keeping the first 64 KiB; the rest is read and dropped.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, kept: &mut Vec<u8>) {
    let Some(mut pipe) = pipe else {
        return;
    };
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
}

/// The captured bytes as text, cut to 64 KiB on a character boundary.
fn capped_text(kept: &[u8]) -> String {
    let text = String::from_utf8_lossy(kept);
    truncate(&text, ACTION_OUTPUT_MAX_BYTES).to_owned()
}

// not on Windows: these actions are sh command lines; the Windows runner (Job Objects, cmd.exe) is tested under Wine by forewarn-platform's process-tree tests and host/tests/e2e_windows.rs
#[cfg(all(test, unix))]
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

    /// Timeouts tried in turn by the tests of an action cut off at its timeout: the action
    /// writes a pid file first, and on a loaded machine `sh` may not have written it by
    /// the first (short) timeout; the test then runs it again with a longer one. Every
    /// attempt must end `timed-out` (the action sleeps 30 s, longer than any of these).
    const TIMEOUTS: [Duration; 5] = [
        Duration::from_millis(300),
        Duration::from_secs(1),
        Duration::from_secs(3),
        Duration::from_secs(6),
        Duration::from_secs(12),
    ];

    /// Runs `sh -c SCRIPT` (SCRIPT from the pid file's path) at each of [`TIMEOUTS`] until
    /// the pid file was written before the action was killed; asserts every run ended
    /// `timed-out` and returns the pid read.
    async fn timed_out_with_pid(script: impl Fn(&std::path::Path) -> String) -> String {
        let dir = tempfile::tempdir().unwrap();
        for (attempt, timeout) in TIMEOUTS.into_iter().enumerate() {
            let pid_file = dir.path().join(format!("pid-{attempt}"));
            let action = spec(&["sh", "-c", &script(&pid_file)], timeout);
            let result = run(&action, far()).await;
            assert_eq!(result, Err(HostError::TimedOut), "timeout {timeout:?}");
            // `sh` writes the pid with one `echo`: once the file holds a line, it is whole.
            if let Ok(text) = std::fs::read_to_string(&pid_file)
                && text.ends_with('\n')
            {
                return text.trim().to_owned();
            }
        }
        panic!(
            "the action never wrote its pid file within {:?}: `sh` did not start",
            TIMEOUTS[TIMEOUTS.len() - 1]
        );
    }

    #[tokio::test]
    async fn a_slow_action_is_killed_at_its_timeout() {
        let pid = timed_out_with_pid(|pid_file| {
            format!("echo $$ > {}; exec sleep 30", pid_file.display())
        })
        .await;
        // The action's own process is reaped before `run` answers: gone, not a zombie.
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
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
        let deadline = Instant::now() + Duration::from_secs(20);
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

    /// Polls `/proc` until the process `pid` is gone or a zombie; false after 20 s.
    async fn ends_soon(pid: &str) -> bool {
        let stat = format!("/proc/{pid}/stat");
        let deadline = Instant::now() + Duration::from_secs(20);
        while running(&stat) {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    #[tokio::test]
    async fn a_grandchild_dies_with_its_action_at_the_timeout() {
        let pid = timed_out_with_pid(|pid_file| {
            format!(
                "sleep 30 > /dev/null 2>&1 & echo $! > {}; wait",
                pid_file.display()
            )
        })
        .await;
        assert!(
            ends_soon(&pid).await,
            "the action's grandchild {pid} outlived the action's timeout"
        );
    }

    #[tokio::test]
    async fn an_action_that_backgrounds_a_process_reports_its_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("background");
        // The background process keeps the action's stdout open.
        let script = format!("sleep 30 & echo $! > {}; echo started", pid_file.display());
        let action = spec(&["sh", "-c", &script], Duration::from_secs(60));
        let output = run(&action, far()).await.unwrap();
        assert_eq!(output.exit_code, Some(0));
        assert_eq!(output.stdout, "started\n");
        // What the action started in time keeps running (an action may start an app).
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let still_running = running(&stat);
        let _ignored = std::process::Command::new("kill").arg(pid.trim()).status();
        assert!(
            still_running,
            "the process {pid} the action started was killed"
        );
    }

    #[tokio::test]
    async fn an_action_sees_only_the_allowed_environment() {
        let action = spec(&["env"], Duration::from_secs(10));
        let output = run(&action, far()).await.unwrap();
        assert_eq!(output.exit_code, Some(0));
        for line in output.stdout.lines() {
            let name = line.split_once('=').map_or(line, |(name, _)| name);
            assert!(
                action_env::is_allowed(name),
                "the action inherited `{name}`"
            );
        }
    }

    #[test]
    fn systemd_and_secret_variables_are_not_passed_on() {
        let daemon_env = [
            ("NOTIFY_SOCKET", "/run/systemd/notify"),
            ("WATCHDOG_USEC", "30000000"),
            ("WATCHDOG_PID", "1"),
            ("INVOCATION_ID", "abc"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("PATH", "/usr/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("TZ", "UTC"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let names: Vec<OsString> = allowed_env(daemon_env.into_iter())
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, ["PATH", "LC_ALL", "TZ"].map(OsString::from));
    }

    #[test]
    fn a_huge_timeout_does_not_overflow() {
        let deadline = Instant::now() + Duration::from_secs(20);
        assert_eq!(checked_cutoff(deadline, Duration::MAX), deadline);
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
