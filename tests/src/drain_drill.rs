//! A maintenance drill behind a real HAProxy, for the drain tests and the drain benchmark:
//! two app servers balanced by HAProxy, vm-a health-checked on its forewarn's `/readyz`
//! (`inter 1s fall 3 rise 2`), vm-b on its own; the daemon with an lb-drain (the shipped one,
//! or an older build) and graceful-shutdown, whose stop action kills vm-a's app and whose
//! start action starts it again; a client sending a request every 10 ms through HAProxy
//! without retries from before the event until vm-a answers again after it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_simulator::{StateSnapshot, Transition};

use crate::haproxy::{
    Balanced, Haproxy, HealthCheck, LoadClient, Sent, app_start_command, kill_pid_file, start_app,
    write_app_script,
};
use crate::harness::{
    Daemon, DaemonConfig, Simulator, free_loopback_address, http_get, install_bundled_plugin,
    summarize_state, transition_at_unix_ms, wait_for,
};

/// The lb-drain a drill runs: its component and its manifest.
pub struct LbDrain {
    /// The component's bytes.
    pub wasm: Vec<u8>,
    /// Its `lb-drain.toml`.
    pub manifest: String,
}

impl LbDrain {
    /// The bundled lb-drain with its shipped manifest.
    pub fn shipped() -> LbDrain {
        let plugin = bundled("lb-drain");
        LbDrain {
            wasm: plugin.wasm.to_vec(),
            manifest: plugin.manifest.to_owned(),
        }
    }

    /// `dir/lb-drain.wasm` with `dir/lb-drain.toml` (an older build kept as a fixture).
    pub fn from_dir(dir: &Path) -> LbDrain {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .unwrap_or_else(|error| panic!("{}: {error}", dir.join(name).display()))
        };
        LbDrain {
            wasm: read("lb-drain.wasm"),
            manifest: String::from_utf8(read("lb-drain.toml")).expect("a UTF-8 manifest"),
        }
    }
}

fn bundled(name: &str) -> forewarn_host::bundled::BundledPlugin {
    forewarn_host::bundled::bundled_plugins()
        .into_iter()
        .find(|plugin| plugin.name == name)
        .unwrap_or_else(|| panic!("{name} is not bundled"))
}

/// What one drill saw. Times are Unix ms.
pub struct DrillOutcome {
    /// Every request sent through HAProxy.
    pub sent: Vec<Sent>,
    /// The simulator's state once the event was over.
    pub state: StateSnapshot,
    /// The drilled event's id.
    pub event_id: String,
    /// vm-a's status changes as HAProxy reported them.
    pub haproxy_history: Vec<(u64, String)>,
    /// When the stop action ran.
    pub stopped_at: u64,
    /// When the start action ran.
    pub started_at: u64,
    /// `/metrics` after the event.
    pub metrics: String,
    /// The daemon (its log, for failure messages).
    pub daemon: Daemon,
    /// The drill's folder (state, config), kept while the daemon's record is read.
    pub dir: tempfile::TempDir,
}

impl DrillOutcome {
    /// When `transition` of the event happened at the simulator.
    pub fn at(&self, transition: Transition) -> u64 {
        transition_at(&self.state, &self.event_id, transition)
    }

    /// The requests that failed, as "MS after the event appeared: ERROR".
    pub fn failed(&self) -> Vec<String> {
        let appeared_at = self.at(Transition::Appeared) as i64;
        self.sent
            .iter()
            .filter_map(|sent| {
                let error = sent.outcome.as_ref().err()?;
                Some(format!("{} ms: {error}", sent.at as i64 - appeared_at))
            })
            .collect()
    }

    /// When HAProxy first reported vm-a DOWN after the event appeared.
    pub fn down_at(&self) -> Option<u64> {
        let appeared_at = self.at(Transition::Appeared);
        self.haproxy_history
            .iter()
            .find(|(at, status)| *at >= appeared_at && status == "DOWN")
            .map(|(at, _)| *at)
    }

    /// When IMDS first accepted an approval.
    pub fn approved_at(&self) -> Option<u64> {
        self.state
            .approvals
            .iter()
            .find(|approval| approval.accepted)
            .map(|approval| approval.at_unix_ms)
    }
}

fn transition_at(state: &StateSnapshot, event_id: &str, transition: Transition) -> u64 {
    transition_at_unix_ms(state, event_id, transition).unwrap_or_else(|| {
        panic!(
            "no {transition:?} of {event_id}: {}",
            summarize_state(state)
        )
    })
}

/// One event of `event_type` for vm-a with `notice`, appearing 6 s after the daemon's first
/// poll (HAProxy has seen vm-a UP for a while by then), running 3 s once approved.
pub fn scenario(event_type: &str, notice: &str, appear_at: &str) -> String {
    format!(
        "name = \"drain-{event_type}\"\ndescription = \"A {event_type} behind HAProxy.\"\n\
         end_after = \"3s\"\n\n[[events]]\ntype = \"{event_type}\"\nsource = \"Platform\"\n\
         appear_at = \"{appear_at}\"\nnotice = \"{notice}\"\nruns_for = \"3s\"\n"
    )
}

/// Kills the app servers when the drill ends, passed or not.
struct Apps(Vec<PathBuf>);

impl Drop for Apps {
    fn drop(&mut self) {
        for pid_file in &self.0 {
            kill_pid_file(pid_file);
        }
    }
}

/// The times an action wrote to `file`, one per line.
fn action_times(file: &Path) -> Vec<u64> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// graceful-shutdown's shipped manifest with the stop and start actions named and granted,
/// and the stop's `prepare-time` the operator knows it takes (a `kill`: 2 s is plenty).
pub fn graceful_shutdown_manifest() -> String {
    let configured = bundled("graceful-shutdown")
        .manifest
        .replace("# stop-action = ", "stop-action = ")
        .replace("# start-action = ", "start-action = ")
        .replace("# actions = ", "actions = ")
        .replace(
            "budget = \"10s\"",
            "budget = \"10s\"\nprepare-time = \"2s\"",
        );
    assert!(
        configured.contains("\nstop-action = \"stop-app\"")
            && configured.contains("\nactions = [\"stop-app\", \"start-app\"]")
            && configured.contains("prepare-time = \"2s\""),
        "the shipped graceful-shutdown.toml changed shape: {configured}"
    );
    configured
}

fn toml_argv(argv: &[&str]) -> String {
    let quoted: Vec<String> = argv.iter().map(|arg| format!("{arg:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The app servers and HAProxy in front of them, in `dir`; vm-a's pid file.
struct Balancer {
    haproxy: Haproxy,
    _apps: Apps,
    script: PathBuf,
    vm_a_app: String,
    a_pid: PathBuf,
    frontend: String,
}

fn start_balancer(dir: &Path, admin: &str) -> Balancer {
    let script = write_app_script(dir);
    let (vm_a_app, vm_b_app) = (free_loopback_address(), free_loopback_address());
    let frontend = free_loopback_address();
    let (a_pid, b_pid) = (dir.join("vm-a.pid"), dir.join("vm-b.pid"));
    let apps = Apps(vec![a_pid.clone(), b_pid.clone()]);
    start_app(&script, &vm_b_app, "vm-b", &b_pid);
    start_app(&script, &vm_a_app, "vm-a", &a_pid);
    let check = HealthCheck {
        readyz: admin.to_owned(),
        inter: "1s",
        fall: 3,
        rise: 2,
    };
    let balanced = Balanced {
        frontend: frontend.clone(),
        vm_a_app: vm_a_app.clone(),
        vm_b_app,
    };
    Balancer {
        haproxy: Haproxy::start(dir, &check, Some(&balanced)),
        _apps: apps,
        script,
        vm_a_app,
        a_pid,
        frontend,
    }
}

/// The daemon config's `[actions]`: the stop action records its time and kills vm-a's app,
/// the start action starts it again and records its time.
fn actions(balancer: &Balancer, stop_times: &Path, start_times: &Path) -> String {
    let stop = format!(
        "date +%s%3N >> {}; kill $(cat {})",
        stop_times.display(),
        balancer.a_pid.display()
    );
    let start = format!(
        "{}; date +%s%3N >> {}",
        app_start_command(
            &balancer.script,
            &balancer.vm_a_app,
            "vm-a",
            &balancer.a_pid
        ),
        start_times.display()
    );
    format!(
        "[actions.stop-app]\nargv = {}\ntimeout = \"5s\"\n\n[actions.start-app]\nargv = {}\n\
         timeout = \"5s\"\n",
        toml_argv(&["sh", "-c", &stop]),
        toml_argv(&["sh", "-c", &start]),
    )
}

/// Runs `event_type` with `notice` behind HAProxy with requests flowing, until vm-a is back
/// in rotation and has answered 5 requests again; `forewarn` is the daemon's binary.
pub fn run_drill(
    forewarn: &Path,
    event_type: &str,
    notice: &str,
    lb_drain: &LbDrain,
) -> DrillOutcome {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let admin = free_loopback_address();
    let balancer = start_balancer(dir.path(), &admin);
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    std::fs::write(plugin_dir.join("lb-drain.wasm"), &lb_drain.wasm).expect("lb-drain.wasm");
    std::fs::write(plugin_dir.join("lb-drain.toml"), &lb_drain.manifest).expect("lb-drain.toml");
    install_bundled_plugin(
        &plugin_dir,
        "graceful-shutdown",
        Some(&graceful_shutdown_manifest()),
    );
    let (stop_times, start_times) = (dir.path().join("stopped"), dir.path().join("started"));
    let simulator = Simulator::builder(forewarn)
        .scenario_text(&scenario(event_type, notice, "6s"))
        .speed(1.0)
        .start_on_first_poll()
        .start();
    let config = DaemonConfig {
        extra: actions(&balancer, &stop_times, &start_times),
        ..DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url)
    }
    .to_toml()
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{admin}\""));
    let config_path = dir.path().join("forewarn.toml");
    std::fs::write(&config_path, config).expect("write the daemon config");
    let daemon = Daemon::start(forewarn, &config_path);

    let haproxy = &balancer.haproxy;
    let up_at = haproxy.wait_up(Duration::from_secs(30));
    haproxy.wait_server_up("vm-b", Duration::from_secs(30));
    let client = LoadClient::start(&balancer.frontend, Duration::from_millis(10));
    let event_id = wait_for(Duration::from_secs(60), "the event to appear", || {
        simulator
            .state()
            .history
            .first()
            .map(|entry| entry.event_id.clone())
            .ok_or_else(|| daemon.describe_for_failure())
    });
    let state =
        simulator.wait_for_transition(Duration::from_secs(90), &event_id, Transition::Removed);
    let appeared_at = transition_at(&state, &event_id, Transition::Appeared);
    assert!(
        up_at < appeared_at,
        "HAProxy saw vm-a UP at {up_at}, after the event appeared at {appeared_at}: the drill \
         did not start from a VM in rotation"
    );
    let removed_at = transition_at(&state, &event_id, Transition::Removed);
    let back_up = haproxy.wait_status_since(removed_at, "UP", Duration::from_secs(30));
    client.wait_answered_by("vm-a", back_up, 5, Duration::from_secs(30));
    let sent = client.stop();
    let metrics = http_get(&admin, "/metrics").unwrap_or_else(|error| error);
    let first = |file: &Path, what: &str| {
        action_times(file).first().copied().unwrap_or_else(|| {
            panic!(
                "the {what} action never ran: {}",
                daemon.describe_for_failure()
            )
        })
    };
    let (stopped_at, started_at) = (first(&stop_times, "stop"), first(&start_times, "start"));
    DrillOutcome {
        sent,
        state,
        event_id,
        haproxy_history: haproxy.history(),
        stopped_at,
        started_at,
        metrics,
        daemon,
        dir,
    }
}

/// What a shutdown drill saw: the operating system shut down with no Scheduled Event. Times
/// are Unix ms.
pub struct ShutdownDrillOutcome {
    /// Every request the client sent, from before the shutdown until its release.
    pub sent: Vec<Sent>,
    /// When `PrepareForShutdown(true)` was sent.
    pub signalled_at: u64,
    /// When forewarn's delay lock was closed (logind would go on with the shutdown).
    pub released_at: u64,
    /// When HAProxy marked vm-a DOWN after the signal.
    pub down_at: u64,
    /// When the stop action ran (every run).
    pub stopped_at: Vec<u64>,
    /// The daemon, still running.
    pub daemon: Daemon,
    /// The drill's directory (the state directory is `state` in it).
    pub dir: tempfile::TempDir,
    /// The admin endpoint's address.
    pub admin: String,
}

/// A shutdown with no event behind HAProxy: the shipped lb-drain and graceful-shutdown, the
/// daemon on `logind`'s bus with `[shutdown] budget = budget`; requests flow through HAProxy
/// from before the signal until the lock is released.
pub fn run_shutdown_drill(
    forewarn: &Path,
    logind: &crate::logind::FakeLogind,
    budget: &str,
) -> ShutdownDrillOutcome {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let admin = free_loopback_address();
    let balancer = start_balancer(dir.path(), &admin);
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    install_bundled_plugin(&plugin_dir, "lb-drain", None);
    install_bundled_plugin(
        &plugin_dir,
        "graceful-shutdown",
        Some(&graceful_shutdown_manifest()),
    );
    let (stop_times, start_times) = (dir.path().join("stopped"), dir.path().join("started"));
    let simulator = Simulator::builder(forewarn).scenario("idle").start();
    let config = DaemonConfig {
        extra: format!(
            "{}\n[shutdown]\nbudget = \"{budget}\"\n",
            actions(&balancer, &stop_times, &start_times)
        ),
        ..DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url)
    }
    .to_toml()
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{admin}\""));
    let config_path = dir.path().join("forewarn.toml");
    std::fs::write(&config_path, config).expect("write the daemon config");
    let daemon = Daemon::start_with_env(
        forewarn,
        &config_path,
        &[("DBUS_SYSTEM_BUS_ADDRESS", logind.address())],
    );
    let haproxy = &balancer.haproxy;
    haproxy.wait_up(Duration::from_secs(30));
    haproxy.wait_server_up("vm-b", Duration::from_secs(30));
    logind.wait_for_delay_lock("forewarn", Duration::from_secs(60));
    let client = LoadClient::start(&balancer.frontend, Duration::from_millis(10));
    client.wait_answered_by("vm-a", unix_ms_now(), 5, Duration::from_secs(30));
    let signalled_at = logind.prepare_for_shutdown(true);
    let released_at = logind.wait_all_released(Duration::from_secs(120));
    let sent = client.stop();
    let down_at = haproxy
        .first_since(signalled_at, "DOWN")
        .unwrap_or_else(|| {
            panic!(
                "HAProxy never marked vm-a DOWN after the shutdown began: {:?}; {}",
                haproxy.history(),
                daemon.describe_for_failure()
            )
        });
    ShutdownDrillOutcome {
        sent,
        signalled_at,
        released_at,
        down_at,
        stopped_at: action_times(&stop_times),
        daemon,
        dir,
        admin,
    }
}

fn unix_ms_now() -> u64 {
    crate::harness::now_unix_ms()
}
