//! End-to-end tests of the bundled plugins in the real `forewarn` binary against real parts:
//! HAProxy health-checking `/readyz` (lb-drain), a local HTTP workload (checkpoint), real
//! processes stopped and started by actions (graceful-shutdown), and refused capabilities.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::haproxy::{Haproxy, HealthCheck, find_haproxy};
use forewarn_test_support::harness::{
    Daemon, PREPARE_AT_ONCE, PluginDecision, RawRequest, Simulator, free_loopback_address,
    http_get, install_bundled_plugin, now_unix_ms, read_request, same_id, summarize_state,
    transition_at_unix_ms, wait_for,
};

/// Scenario speed: scenario time runs this many times faster than the wall clock.
const SPEED: f64 = 10.0;

/// A platform Reboot for vm-a appearing 6 s (wall) after the daemon's first poll, with a 90 s
/// (wall) notice, running 3 s (wall) once approved, then removed.
const REBOOT_SCENARIO: &str = r#"
name = "bundled-plugins-reboot"
description = "A platform Reboot that starts when approved and ends 30 s (scenario) later."
end_after = "5s"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "60s"
notice = "15m"
description = "Virtual machine is going to be restarted because of planned host maintenance."
runs_for = "30s"
"#;

/// Everything one test runs: a temporary directory with the scenario, plugin dir, state dir
/// and daemon config, the simulator, and the daemon once started.
struct Setup {
    dir: tempfile::TempDir,
    simulator: Simulator,
}

impl Setup {
    fn new(scenario: &str) -> Setup {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("plugins")).expect("create the plugin dir");
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(scenario)
            .speed(SPEED)
            .start_on_first_poll()
            .start();
        Setup { dir, simulator }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Installs the bundled plugin `name` with `manifest` as its NAME.toml.
    fn install_plugin(&self, name: &str, manifest: &str) {
        install_bundled_plugin(&self.path("plugins"), name, Some(manifest));
    }

    /// Writes the daemon config (admin on an ephemeral loopback port, `extra` appended) and
    /// starts `forewarn run`.
    fn start_daemon(&self, extra: &str) -> Daemon {
        self.start_daemon_listening("127.0.0.1:0", extra)
    }

    /// [`Setup::start_daemon`] with the admin endpoint on `admin`.
    fn start_daemon_listening(&self, admin: &str, extra: &str) -> Daemon {
        let config = format!(
            "vm-name = \"vm-a\"\nstate-dir = \"{}\"\nplugin-dir = \"{}\"\n\n[imds]\nurl = \"{}\"\n\
             poll-interval = \"250ms\"\n\n[admin]\nlisten = \"{admin}\"\n\n[policy]\n\
             prepare-lead-time = \"{PREPARE_AT_ONCE}\"\n\n{extra}\n",
            self.path("state").display(),
            self.path("plugins").display(),
            self.simulator.base_url,
        );
        let config_path = self.path("forewarn.toml");
        std::fs::write(&config_path, config).expect("write the daemon config");
        Daemon::start(forewarn_binary!(), &config_path)
    }
}

/// The admin endpoint's `host:port`, from the daemon's log.
fn admin_address(daemon: &Daemon) -> String {
    daemon.admin_address(Duration::from_secs(30))
}

/// When the simulator first accepted an approval POST (Unix ms, as it arrived): the
/// approval at IMDS itself, not the daemon's word for it.
fn approval_time(simulator: &Simulator, daemon: &Daemon) -> u64 {
    wait_for(
        Duration::from_secs(60),
        "an accepted approval at IMDS",
        || {
            simulator
                .state()
                .approvals
                .iter()
                .find(|approval| approval.accepted)
                .map(|approval| approval.at_unix_ms)
                .ok_or_else(|| daemon.describe_for_failure())
        },
    )
}

/// Waits for `plugin`'s first decision in `phase` and returns it.
fn wait_for_phase(daemon: &Daemon, plugin: &str, phase: &str, timeout: Duration) -> PluginDecision {
    daemon
        .wait_for_phase(timeout, None, plugin, phase)
        .into_iter()
        .find(|d| d.plugin == plugin && d.phase == phase)
        .expect("found above")
}

// ---------------------------------------------------------------------------------------
// lb-drain with HAProxy

/// HAProxy checking `/readyz` on `readyz` every 100 ms (down after 2 failures, up after 2
/// successes).
fn start_haproxy(dir: &Path, readyz: &str) -> Haproxy {
    let check = HealthCheck {
        readyz: readyz.to_owned(),
        inter: "100ms",
        fall: 2,
        rise: 2,
    };
    Haproxy::start(dir, &check, None)
}

fn readyz(address: &str) -> String {
    match http_get(address, "/readyz") {
        Ok(_) => "200".to_owned(),
        Err(error) => error,
    }
}

#[test]
fn lb_drain_takes_the_vm_out_of_haproxy_before_approval_and_back_after() {
    find_haproxy();
    let setup = Setup::new(REBOOT_SCENARIO);
    setup.install_plugin(
        "lb-drain",
        "subscribe = [\"Freeze\", \"Reboot\", \"Redeploy\", \"Preempt\", \"Terminate\"]\n\
         budget = \"5s\"\n[config]\ndrain-seconds = 3\n[capabilities]\nreadiness = true\n",
    );
    // HAProxy first, checking the admin address the daemon is about to take: it sees vm-a
    // UP as soon as the daemon answers, long before the event appears (6 s after the
    // daemon's first poll).
    let admin = free_loopback_address();
    let haproxy = start_haproxy(setup.dir.path(), &admin);
    let daemon = setup.start_daemon_listening(&admin, "");
    assert_eq!(admin_address(&daemon), admin);
    let up_at = wait_for(
        Duration::from_secs(30),
        "HAProxy to see vm-a UP",
        || match haproxy.status().as_str() {
            "UP" => Ok(now_unix_ms()),
            other => Err(other.to_owned()),
        },
    );

    let first_defer = wait_for_phase(&daemon, "lb-drain", "prepare", Duration::from_secs(30));
    assert_eq!(first_defer.decision, "defer", "{first_defer:?}");
    assert!(
        first_defer.reason.starts_with("draining: "),
        "{first_defer:?}"
    );
    let appeared_at = transition_unix_ms(
        &setup.simulator.state(),
        &first_defer.event_id,
        Transition::Appeared,
    );
    assert!(
        up_at < appeared_at,
        "the event appeared at {appeared_at}, before HAProxy saw vm-a UP at {up_at}"
    );
    let approved_at = approval_time(&setup.simulator, &daemon);
    let history_at_approval: Vec<_> = haproxy
        .history()
        .into_iter()
        .filter(|(at, _)| *at >= appeared_at && *at <= approved_at)
        .collect();
    assert!(
        history_at_approval
            .iter()
            .any(|(_, status)| status == "DOWN"),
        "HAProxy never saw vm-a DOWN between the event's appearance at {appeared_at} and the \
         approval at {approved_at}: {:?}",
        haproxy.history()
    );
    assert_eq!(
        history_at_approval
            .last()
            .map(|(_, status)| status.as_str()),
        Some("DOWN"),
        "vm-a must still be DOWN when the event is approved: {history_at_approval:?}"
    );

    // The maintenance as IMDS saw it: the approval started the event, which ran and was
    // removed. HAProxy must keep vm-a out of rotation all that time: its first UP after
    // the drain comes only once the event is over.
    let state = setup.simulator.wait_for_transition(
        Duration::from_secs(30),
        &first_defer.event_id,
        Transition::Removed,
    );
    let started_at = transition_unix_ms(&state, &first_defer.event_id, Transition::Started);
    let removed_at = transition_unix_ms(&state, &first_defer.event_id, Transition::Removed);
    assert!(
        approved_at <= started_at,
        "the event started at {started_at}, before the approval at {approved_at}"
    );
    let drained_at = history_at_approval
        .iter()
        .find(|(_, status)| status == "DOWN")
        .map(|(at, _)| *at)
        .expect("checked above");
    let back_up = haproxy.wait_status_since(drained_at, "UP", Duration::from_secs(30));
    assert!(
        back_up >= removed_at,
        "HAProxy put vm-a back in rotation at {}, before the event was over at the simulator \
         (started {started_at}, removed {removed_at}): {:?}",
        back_up,
        haproxy.history()
    );
    assert_eq!(readyz(&admin), "200", "/readyz after the event");
}

/// When `transition` of `event_id` happened at the simulator (Unix ms).
fn transition_unix_ms(state: &StateSnapshot, event_id: &str, transition: Transition) -> u64 {
    transition_at_unix_ms(state, event_id, transition).unwrap_or_else(|| {
        panic!(
            "no {transition:?} of {event_id}: {}",
            summarize_state(state)
        )
    })
}

#[test]
fn lb_drain_approves_a_short_freeze_without_draining() {
    let setup = Setup::new(
        r#"
name = "short-freeze"
end_after = "5s"

[[events]]
type = "Freeze"
appear_at = "20s"
notice = "15m"
duration_seconds = 5
runs_for = "20s"
"#,
    );
    setup.install_plugin(
        "lb-drain",
        "budget = \"5s\"\n[config]\ndrain-seconds = 60\nfreeze-threshold-seconds = 10\n\
         [capabilities]\nreadiness = true\n",
    );
    let daemon = setup.start_daemon("");
    let admin = admin_address(&daemon);
    let prepare = wait_for_phase(&daemon, "lb-drain", "prepare", Duration::from_secs(30));
    assert_eq!(prepare.decision, "approve", "{prepare:?}");
    let approved_at = approval_time(&setup.simulator, &daemon);
    let state = setup.simulator.state();
    let appeared_at = transition_unix_ms(&state, &prepare.event_id, Transition::Appeared);
    assert!(
        state
            .approvals
            .iter()
            .any(|approval| approval.accepted && same_id(&approval.event_id, &prepare.event_id)),
        "the Freeze itself was approved at IMDS: {}",
        summarize_state(&state)
    );
    // A drain would have held the approval for its 60 s window.
    assert!(
        approved_at < appeared_at + 60_000,
        "approved {} ms after the Freeze appeared: it waited out the drain window",
        approved_at.saturating_sub(appeared_at)
    );
    assert_eq!(
        readyz(&admin),
        "200",
        "a short Freeze must not take the VM out of rotation"
    );
}

// ---------------------------------------------------------------------------------------
// checkpoint with a local HTTP workload

/// One request the workload received.
#[derive(Debug, Clone)]
struct Received {
    at_unix_ms: u64,
    method: String,
    path: String,
    body: String,
}

/// A tiny HTTP/1.1 workload on 127.0.0.1:0: POST /checkpoint answers 202, GET /status answers
/// "running" until it has been asked `running_polls` times and "done" after, POST /restore
/// answers 200. Every request is recorded.
struct Workload {
    address: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Workload {
    fn start(running_polls: usize) -> Workload {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the workload");
        let address = listener.local_addr().expect("local address").to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        std::thread::spawn({
            let received = received.clone();
            move || {
                for stream in listener.incoming().flatten() {
                    let _ignored = serve_one(stream, &received, running_polls);
                }
            }
        });
        Workload { address, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    fn count(&self, method: &str, path: &str) -> usize {
        self.received()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }
}

fn serve_one(
    stream: TcpStream,
    received: &Mutex<Vec<Received>>,
    running_polls: usize,
) -> std::io::Result<()> {
    let RawRequest { method, path, body } = read_request(&mut BufReader::new(stream.try_clone()?))?;
    let (status, text) = {
        let mut received = received.lock().expect("lock");
        let polls_so_far = received.iter().filter(|r| r.path == "/status").count();
        received.push(Received {
            at_unix_ms: now_unix_ms(),
            method: method.clone(),
            path: path.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        match (method.as_str(), path.as_str()) {
            ("POST", "/checkpoint") => ("202 Accepted", "started"),
            ("GET", "/status") if polls_so_far < running_polls => ("200 OK", "running"),
            ("GET", "/status") => ("200 OK", "done"),
            ("POST", "/restore") => ("200 OK", "restored"),
            _ => ("404 Not Found", "no such thing"),
        }
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )?;
    stream.flush()
}

#[test]
fn checkpoint_asks_the_workload_waits_for_it_and_restores_after_the_event() {
    let workload = Workload::start(2);
    let setup = Setup::new(REBOOT_SCENARIO);
    let base = format!("http://{}", workload.address);
    setup.install_plugin(
        "checkpoint",
        &format!(
            "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n[config]\n\
             checkpoint-url = \"{base}/checkpoint\"\nstatus-url = \"{base}/status\"\n\
             restore-url = \"{base}/restore\"\nretry-seconds = 1\n\
             [capabilities]\nhttp = [\"{}\"]\n",
            workload.address
        ),
    );
    let daemon = setup.start_daemon("");
    let approved_at = approval_time(&setup.simulator, &daemon);
    // The approval can reach IMDS before the test has read the plugin's approval from the
    // daemon's output: wait for it, do not read once.
    let decisions = daemon.wait_for_decisions(
        Duration::from_secs(30),
        "checkpoint approving the prepare",
        |decisions| {
            decisions
                .iter()
                .any(|d| d.phase == "prepare" && d.decision == "approve")
        },
    );
    let prepare: Vec<_> = decisions.iter().filter(|d| d.phase == "prepare").collect();
    assert!(
        prepare.len() >= 3
            && prepare[..prepare.len() - 1]
                .iter()
                .all(|d| d.decision == "defer" && d.reason.contains("running")),
        "the plugin must defer while the checkpoint runs: {prepare:#?}"
    );
    assert_eq!(prepare.last().map(|d| d.decision.as_str()), Some("approve"));
    assert_eq!(
        workload.count("POST", "/checkpoint"),
        1,
        "{:#?}",
        workload.received()
    );
    let done_at = workload
        .received()
        .iter()
        .filter(|r| r.path == "/status")
        .nth(2)
        .map(|r| r.at_unix_ms)
        .expect("a third status poll, answered done");
    assert!(
        done_at <= approved_at,
        "approved before the workload said done"
    );
    let event_id = &prepare[0].event_id;
    let checkpoint_body = &workload.received()[0].body;
    assert!(
        checkpoint_body.contains(event_id.as_str()),
        "{checkpoint_body}"
    );

    wait_for_phase(
        &daemon,
        "checkpoint",
        "ended-after-start",
        Duration::from_secs(30),
    );
    wait_for(
        Duration::from_secs(10),
        "the restore request",
        || match workload.count("POST", "/restore") {
            1 => Ok(()),
            n => Err(format!("{n} restore requests: {:#?}", workload.received())),
        },
    );
}

// ---------------------------------------------------------------------------------------
// graceful-shutdown with real processes

/// Shell text that starts `sleep 1000` detached (its output closed, so the action ends at
/// once) and writes its pid to `pid_file`.
fn start_app_script(pid_file: &Path) -> String {
    format!(
        "sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {}",
        pid_file.display()
    )
}

fn read_pid(pid_file: &Path) -> Option<u32> {
    std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()
}

/// Whether `pid` runs (exists and is not a zombie).
fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Kills whatever pid the file names when dropped, so a failing test leaves nothing behind.
struct KillOnDrop(PathBuf);

/// Starts the app (pid file `app.pid` in the setup's dir): the pid file, the guard that kills
/// the app at the end of the test, and the app's pid.
fn start_app(setup: &Setup) -> (PathBuf, KillOnDrop, u32) {
    let pid_file = setup.path("app.pid");
    let cleanup = KillOnDrop(pid_file.clone());
    let status = Command::new("sh")
        .arg("-c")
        .arg(start_app_script(&pid_file))
        .status()
        .expect("start the app");
    assert!(status.success());
    let pid = read_pid(&pid_file).expect("the app's pid");
    (pid_file, cleanup, pid)
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = read_pid(&self.0) {
            let _ignored = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}

fn toml_argv(argv: &[&str]) -> String {
    let quoted: Vec<String> = argv.iter().map(|arg| format!("{arg:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

#[test]
fn graceful_shutdown_stops_the_app_before_approval_and_starts_it_after() {
    let setup = Setup::new(REBOOT_SCENARIO);
    let (pid_file, _cleanup, first_pid) = start_app(&setup);
    assert!(is_running(first_pid));

    let stop_script = format!("kill $(cat {})", pid_file.display());
    let start_script = start_app_script(&pid_file);
    let actions = format!(
        "[actions.stop-app]\nargv = {}\ntimeout = \"5s\"\n\n[actions.start-app]\nargv = {}\ntimeout = \"5s\"\n",
        toml_argv(&["sh", "-c", &stop_script]),
        toml_argv(&["sh", "-c", &start_script]),
    );
    setup.install_plugin(
        "graceful-shutdown",
        "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n[config]\nstop-action = \"stop-app\"\n\
         start-action = \"start-app\"\n[capabilities]\nactions = [\"stop-app\", \"start-app\"]\n",
    );
    let daemon = setup.start_daemon(&actions);

    let prepare = wait_for_phase(
        &daemon,
        "graceful-shutdown",
        "prepare",
        Duration::from_secs(30),
    );
    assert_eq!(
        prepare.decision,
        "approve",
        "{}",
        daemon.describe_for_failure()
    );
    wait_for(Duration::from_secs(30), "the app to die", || {
        if is_running(first_pid) {
            Err(format!("pid {first_pid} still runs"))
        } else {
            Ok(())
        }
    });
    let action_lines = daemon.lines_with_message("action finished");
    assert!(
        action_lines
            .iter()
            .any(|line| line.text("action") == "stop-app" && line.text("exit_code") == "0"),
        "the stop action's exit status is logged: {:?}",
        action_lines.iter().map(|l| &l.fields).collect::<Vec<_>>()
    );
    approval_time(&setup.simulator, &daemon);

    wait_for_phase(
        &daemon,
        "graceful-shutdown",
        "ended-after-start",
        Duration::from_secs(30),
    );
    let second_pid = wait_for(
        Duration::from_secs(10),
        "a new app process",
        || match read_pid(&pid_file) {
            Some(pid) if pid != first_pid && is_running(pid) => Ok(pid),
            other => Err(format!("pid file says {other:?}")),
        },
    );
    let cmdline = std::fs::read(format!("/proc/{second_pid}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).starts_with("sleep"),
        "{cmdline:?}"
    );
}

// ---------------------------------------------------------------------------------------
// refusals

#[test]
fn plugins_are_refused_hosts_and_actions_they_were_not_granted() {
    let workload = Workload::start(0);
    let setup = Setup::new(REBOOT_SCENARIO);
    let (pid_file, _cleanup, pid) = start_app(&setup);
    // checkpoint may reach another port only; graceful-shutdown is granted no action.
    setup.install_plugin(
        "checkpoint",
        &format!(
            "subscribe = [\"Reboot\"]\n[config]\ncheckpoint-url = \"http://{}/checkpoint\"\n\
             [capabilities]\nhttp = [\"127.0.0.1:1\"]\n",
            workload.address
        ),
    );
    setup.install_plugin(
        "graceful-shutdown",
        "subscribe = [\"Reboot\"]\n[config]\nstop-action = \"stop-app\"\n",
    );
    let actions = format!(
        "[actions.stop-app]\nargv = {}\n",
        toml_argv(&["sh", "-c", &format!("kill $(cat {})", pid_file.display())])
    );
    let daemon = setup.start_daemon(&actions);

    let checkpoint = wait_for_phase(&daemon, "checkpoint", "prepare", Duration::from_secs(30));
    assert_eq!(checkpoint.decision, "defer");
    let expected = format!(
        "add \"{}\" to [capabilities] http in checkpoint.toml",
        workload.address
    );
    assert!(
        checkpoint.reason.contains("not granted") && checkpoint.reason.contains(&expected),
        "{checkpoint:?}"
    );
    let shutdown = wait_for_phase(
        &daemon,
        "graceful-shutdown",
        "prepare",
        Duration::from_secs(30),
    );
    assert_eq!(shutdown.decision, "defer");
    assert!(
        shutdown.reason.contains("not granted")
            && shutdown
                .reason
                .contains("add \"stop-app\" to [capabilities] actions in graceful-shutdown.toml"),
        "{shutdown:?}"
    );
    assert!(workload.received().is_empty(), "{:?}", workload.received());
    assert!(
        is_running(pid),
        "an action that was not granted must not run"
    );
    let approvals = setup.simulator.state().approvals;
    assert!(
        approvals.is_empty(),
        "nothing may be approved: {approvals:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Readiness across a restart (docs/operations.md, "Readiness across restarts")

/// A platform Reboot appearing 6 s (wall) after the daemon's first poll that runs 60 s (wall)
/// once approved, unless the test ends it sooner: room to kill and restart the daemon while
/// the VM is about to reboot, however slowly the restarted daemon comes up.
const LONG_REBOOT_SCENARIO: &str = r#"
name = "bundled-plugins-long-reboot"
end_after = "5s"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "60s"
notice = "15m"
runs_for = "10m"
"#;

#[test]
fn readiness_hold_survives_a_sigkill_mid_drain_and_haproxy_keeps_the_vm_down() {
    find_haproxy();
    let setup = Setup::new(LONG_REBOOT_SCENARIO);
    setup.install_plugin(
        "lb-drain",
        "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n[config]\ndrain-seconds = 1\n\
         [capabilities]\nreadiness = true\n",
    );
    let admin = free_loopback_address();
    let mut first = setup.start_daemon_listening(&admin, "");
    assert_eq!(admin_address(&first), admin);
    let haproxy = start_haproxy(setup.dir.path(), &admin);
    wait_for(Duration::from_secs(30), "HAProxy to see vm-a UP", || {
        let status = haproxy.status();
        if status == "UP" { Ok(()) } else { Err(status) }
    });

    // The approval went out, so the journal says lb-drain prepared (and holds readiness).
    approval_time(&setup.simulator, &first);
    let event_id = setup.simulator.state().approvals[0].event_id.clone();
    first.kill();
    let killed_at = now_unix_ms();

    let second = setup.start_daemon_listening(&admin, "");
    admin_address(&second);
    let first_readyz = wait_for(
        Duration::from_secs(30),
        "the restarted admin endpoint",
        || {
            http_get(&admin, "/healthz")?;
            Ok::<_, String>(readyz(&admin))
        },
    );
    // The reboot is over only now, whatever the restart took.
    setup.simulator.end_event(&event_id);
    let ended = wait_for_phase(
        &second,
        "lb-drain",
        "ended-after-start",
        Duration::from_secs(60),
    );
    assert!(
        first_readyz != "200",
        "/readyz answered 200 after the restart, before the event ended: {first_readyz}"
    );
    assert!(
        second
            .decisions()
            .iter()
            .all(|decision| decision.phase != "prepare"),
        "lb-drain was asked to prepare again, so this test did not restart mid-event: {}",
        second.describe_for_failure()
    );
    let history = haproxy.history();
    let up_while_rebooting: Vec<_> = history
        .iter()
        .filter(|(at, status)| {
            *at >= killed_at && *at < ended.at_unix_ms && status.starts_with("UP")
        })
        .collect();
    assert!(
        up_while_rebooting.is_empty(),
        "HAProxy saw vm-a UP between the SIGKILL and the end of the event: {history:?}"
    );
    haproxy.wait_status_since(ended.at_unix_ms, "UP", Duration::from_secs(30));
}
