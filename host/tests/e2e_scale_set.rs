//! End-to-end tests of forewarn in a scale set (issue 47), against the simulator's model of
//! it (`host/simulator/src/scale_set.rs`: the Application Health extension probing each
//! instance, automatic repairs, a rolling upgrade), with the bundled plugins as shipped.
//! Every outcome is asserted at the simulator's state: what it repaired and upgraded.
//!
//! Scenario time runs 60 times faster than the wall: lb-drain's drain window of 20 s (wall,
//! the plugin's clock) is 20 minutes on the scenario's clock, on which the extension probes
//! every 5 s and the repairs' grace period is 10 minutes.

use std::path::Path;
use std::time::Duration;

use forewarn_daemon::ops::status::StatusSnapshot;
use forewarn_simulator::{ExtensionState, RepairAction, StateSnapshot, Transition, UpgradeStep};
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Simulator, free_loopback_address, http_get,
    install_bundled_plugin, wait_for, write_plugin_dir,
};
use forewarn_test_support::{forewarn_binary, guests};

const SPEED: f64 = 60.0;
const WAIT: Duration = Duration::from_secs(120);
/// The repairs' grace period of the scenarios (Azure's least: 10 minutes).
const REPAIR_GRACE_MS: u64 = 10 * 60 * 1000;

fn forewarn() -> &'static Path {
    forewarn_binary!()
}

/// lb-drain as shipped, with a drain window of 20 s (wall) = 20 minutes of scenario time.
const LB_DRAIN_20_MINUTES: &str = r#"subscribe = ["Freeze", "Reboot", "Redeploy", "Preempt", "Terminate"]
budget = "5s"
prepare-time = "20s"

[config]
drain-seconds = 20
freeze-threshold-seconds = 10

[capabilities]
readiness = true
"#;

/// One VM of a scale set, its daemon's admin endpoint at `admin`, probed on `probe_path`.
/// With `reboot`, a Platform Reboot appears at 5 s with 40 minutes' notice; a rolling upgrade
/// starts at 10 minutes (`upgrade`).
fn scenario(admin: &str, probe_path: &str, reboot: bool, upgrade: bool) -> String {
    // /readyz is what the old recipe made the scale set's health (`--health-probe
    // app-readyz`): read as a load balancer's probe is, 2xx Healthy and else Unhealthy.
    let states = if probe_path == "/readyz" {
        "binary"
    } else {
        "rich"
    };
    let mut text = format!(
        r#"name = "scale-set"
description = "vm-a in a scale set: the Application Health extension, automatic repairs"
vms = ["vm-a"]
vm_scale_set = "vmss-sim"
open_ended = true

[scale_set.instances]
vm-a = "{admin}"

[scale_set.health_extension]
request_path = "{probe_path}"
interval = "5s"
number_of_probes = 1
grace_period = "10m"
probe_timeout = "2s"
health_states = "{states}"

[scale_set.automatic_repairs]
grace_period = "10m"
repair_action = "Replace"
"#
    );
    if upgrade {
        text.push_str(
            r#"
[scale_set.rolling_upgrade]
start_at = "10m"
max_batch_instance_percent = 100
upgrade_takes = "1m"
"#,
        );
    }
    if reboot {
        text.push_str(
            r#"
[[events]]
id = "B6A0E2C1-3D4F-4A5B-8C7D-000000000047"
type = "Reboot"
source = "Platform"
appear_at = "5s"
notice = "40m"
description = "Virtual machine is going to be restarted because of planned host maintenance."
runs_for = "2m"
"#,
        );
    }
    text
}

/// A running simulator and vm-a's daemon with the bundled lb-drain, and `plugins` (the probe
/// guest) beside it.
struct ScaleSetRun {
    _dir: tempfile::TempDir,
    simulator: Simulator,
    daemon: Daemon,
    admin: String,
}

fn start(
    probe_path: &str,
    reboot: bool,
    upgrade: bool,
    scale_set_config: &str,
    plugins: &[ProbePlugin],
) -> ScaleSetRun {
    let dir = tempfile::tempdir().expect("temp dir");
    let admin = free_loopback_address();
    let simulator = Simulator::builder(forewarn())
        .scenario_text(&scenario(&admin, probe_path, reboot, upgrade))
        .speed(SPEED)
        .start_on_first_poll()
        .start();
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    install_bundled_plugin(&plugin_dir, "lb-drain", Some(LB_DRAIN_20_MINUTES));
    write_plugin_dir(&plugin_dir, Path::new(guests::PROBE), plugins);
    let config = dir.path().join("forewarn.toml");
    let text = DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url)
        .to_toml()
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{admin}\""));
    std::fs::write(&config, format!("{text}\n{scale_set_config}\n")).expect("config");
    let daemon = Daemon::start(forewarn(), &config);
    let bound = daemon.admin_address(WAIT);
    assert_eq!(
        bound, admin,
        "the daemon listens where the extension probes"
    );
    ScaleSetRun {
        _dir: dir,
        simulator,
        daemon,
        admin,
    }
}

const EVENT: &str = "B6A0E2C1-3D4F-4A5B-8C7D-000000000047";

fn scale_set_of(state: &StateSnapshot) -> &forewarn_simulator::ScaleSetSnapshot {
    state
        .scale_set
        .as_ref()
        .expect("the scenario has a scale set")
}

/// When the event ended in the simulator (scenario ms), waiting for it.
fn wait_for_the_end_of_the_reboot(run: &ScaleSetRun) -> StateSnapshot {
    run.simulator
        .wait_for_state(WAIT, "the Reboot to end after its drain", |state| {
            state.transitions_of(EVENT).contains(&Transition::Removed)
        })
}

/// The whole answer (status line, headers, body) to a GET of `path` naming `host`.
fn get_with_host(admin: &str, path: &str, host: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(admin).expect("connect to the admin endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    answer
}

fn status(admin: &str) -> StatusSnapshot {
    let body = http_get(admin, "/status").unwrap_or_else(|error| panic!("GET /status: {error}"));
    serde_json::from_str(&body).unwrap_or_else(|error| panic!("bad /status ({error}): {body}"))
}

#[test]
fn a_20_minute_drain_probed_on_the_scale_set_endpoint_is_never_repaired_and_never_pauses_the_upgrade()
 {
    let run = start("/health/scale-set", true, true, "", &[]);
    // While lb-drain drains: /readyz is 503, /health/scale-set Healthy and SkipUpgrade.
    let draining = wait_for(WAIT, "lb-drain holding the VM out of rotation", || {
        let snapshot = status(&run.admin);
        if snapshot.readiness.held_by == ["lb-drain"] {
            Ok(snapshot)
        } else {
            Err(format!("{:?}", snapshot.readiness))
        }
    });
    assert_eq!(draining.scale_set_health.state, "Healthy");
    assert!(
        draining.scale_set_health.skip_upgrade.is_some(),
        "{:?}",
        draining.scale_set_health
    );
    let answer = get_with_host(&run.admin, "/health/scale-set", "probe.invalid");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let refused = get_with_host(&run.admin, "/status", "probe.invalid");
    assert!(refused.starts_with("HTTP/1.1 421"), "{refused}");
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(body.trim()).expect("a JSON body");
    assert_eq!(body["ApplicationHealthState"], "Healthy");
    let metrics: serde_json::Value =
        serde_json::from_str(body["customMetrics"].as_str().expect("a string")).unwrap();
    assert_eq!(metrics["rollingUpgrade"]["SkipUpgrade"], true);

    let ended = wait_for_the_end_of_the_reboot(&run);
    let started = ended
        .history
        .iter()
        .find(|record| record.transition == Transition::Started)
        .map(|record| record.at_scenario_ms)
        .expect("the Reboot started");
    let appeared = ended
        .history
        .iter()
        .find(|record| record.transition == Transition::Appeared)
        .map(|record| record.at_scenario_ms)
        .expect("the Reboot appeared");
    assert!(
        started - appeared >= 19 * 60 * 1000,
        "the drain lasted {} scenario ms",
        started - appeared
    );
    // The upgrade went around vm-a while it prepared, and upgrades it once it no longer does.
    let upgraded = run
        .simulator
        .wait_for_state(WAIT, "the rolling upgrade to complete", |state| {
            scale_set_of(state)
                .upgrade
                .iter()
                .any(|step| matches!(step, UpgradeStep::Completed { .. }))
        });
    let scale_set = scale_set_of(&upgraded);
    assert!(scale_set.repairs.is_empty(), "{:?}", scale_set.repairs);
    assert!(scale_set.pauses().is_empty(), "{:?}", scale_set.upgrade);
    let skipped_at = scale_set
        .upgrade
        .iter()
        .find_map(|step| match step {
            UpgradeStep::Skipped { at_scenario_ms, vm } if vm == "vm-a" => Some(*at_scenario_ms),
            _ => None,
        })
        .expect("vm-a skipped while it prepared");
    assert!(
        skipped_at < started,
        "skipped at {skipped_at}, started {started}"
    );
    let instance = scale_set.instance("vm-a").expect("vm-a");
    let upgraded_at = instance.upgraded_at_ms.expect("vm-a upgraded after");
    assert!(
        upgraded_at > started,
        "upgraded at {upgraded_at}, started {started}"
    );
    assert_eq!(instance.state, ExtensionState::Healthy);
    assert!(instance.probes > 100, "{} probes", instance.probes);
    println!(
        "/health/scale-set: drain {} min, repairs {}, upgrade pauses {}, skipped at {} s, upgraded at {} s",
        (started - appeared) / 60_000,
        scale_set.repairs.len(),
        scale_set.pauses().len(),
        skipped_at / 1000,
        upgraded_at / 1000
    );
}

#[test]
fn the_same_drain_probed_on_readyz_is_repaired_and_pauses_the_upgrade() {
    // The extension probing /readyz is a prober lb-drain counts: its drain ends once the
    // extension saw 3 failures. What keeps this VM drained for long here is a preparation
    // that takes longer than the repairs' grace (`checkpoint-job`, deferring until NotBefore,
    // 40 minutes away), as a long checkpoint would.
    let checkpoint_job = ProbePlugin::new("checkpoint-job", "defer").subscribe(&["Reboot"]);
    let run = start("/readyz", true, true, "", &[checkpoint_job]);
    let repaired = run
        .simulator
        .wait_for_state(WAIT, "vm-a repaired", |state| {
            !scale_set_of(state).repairs_of("vm-a").is_empty()
        });
    let repair = scale_set_of(&repaired).repairs_of("vm-a")[0].clone();
    assert_eq!(repair.action, RepairAction::Replace);
    assert_eq!(repair.state, ExtensionState::Unhealthy);
    // Healthy until the drain began (the Reboot appeared at 5 s), Unhealthy from then on.
    assert!(repair.state_since_ms >= 5_000, "{repair:?}");
    assert!(
        repair.at_scenario_ms - repair.state_since_ms >= REPAIR_GRACE_MS,
        "{repair:?}"
    );
    // It was replaced while it drained, before the maintenance it prepared for began.
    assert!(
        !repaired
            .transitions_of(EVENT)
            .contains(&Transition::Started),
        "{:?}",
        repaired.history
    );
    let paused =
        run.simulator
            .wait_for_state(WAIT, "the rolling upgrade paused on vm-a", |state| {
                !scale_set_of(state).pauses().is_empty()
            });
    let pauses: Vec<UpgradeStep> = scale_set_of(&paused)
        .pauses()
        .into_iter()
        .cloned()
        .collect();
    assert!(
        matches!(&pauses[0], UpgradeStep::Paused { vms, .. } if vms == &["vm-a".to_owned()]),
        "{pauses:?}"
    );
    println!(
        "/readyz: Unhealthy from {} s (the drain), {:?} at {} s; the upgrade paused: {:?}",
        repair.state_since_ms / 1000,
        repair.action,
        repair.at_scenario_ms / 1000,
        pauses
    );
}

#[test]
fn a_daemon_killed_with_sigkill_is_seen_unknown_and_repaired_after_the_grace() {
    let mut run = start("/health/scale-set", false, false, "", &[]);
    run.simulator.wait_for_state(WAIT, "vm-a Healthy", |state| {
        scale_set_of(state)
            .instance("vm-a")
            .is_some_and(|instance| instance.state == ExtensionState::Healthy)
    });
    // A minute of scenario time Healthy, and no repair.
    let healthy_since = scale_set_of(&run.simulator.state())
        .instance("vm-a")
        .map(|instance| instance.state_since_ms)
        .unwrap_or_default();
    let before = run
        .simulator
        .wait_for_state(WAIT, "a minute of scenario time Healthy", |state| {
            state.now_scenario_ms >= healthy_since + 60_000
        });
    assert!(scale_set_of(&before).repairs.is_empty());
    assert_eq!(
        scale_set_of(&before)
            .instance("vm-a")
            .map(|instance| instance.state),
        Some(ExtensionState::Healthy)
    );
    let killed_at_ms = before.now_scenario_ms;
    run.daemon.kill();
    let unknown = run.simulator.wait_for_state(WAIT, "vm-a Unknown", |state| {
        scale_set_of(state)
            .instance("vm-a")
            .is_some_and(|instance| instance.state == ExtensionState::Unknown)
    });
    let instance = scale_set_of(&unknown).instance("vm-a").unwrap().clone();
    assert!(instance.state_since_ms >= killed_at_ms, "{instance:?}");
    let reading = instance
        .last_reading
        .clone()
        .expect("a probe after the kill");
    assert!(
        reading
            .unknown_because
            .is_some_and(|because| because.starts_with("no answer")),
        "{instance:?}"
    );
    let repaired = run
        .simulator
        .wait_for_state(WAIT, "vm-a repaired", |state| {
            !scale_set_of(state).repairs_of("vm-a").is_empty()
        });
    let repair = scale_set_of(&repaired).repairs_of("vm-a")[0].clone();
    assert_eq!(repair.state, ExtensionState::Unknown);
    assert_eq!(repair.state_since_ms, instance.state_since_ms);
    assert!(
        repair.at_scenario_ms - repair.state_since_ms >= REPAIR_GRACE_MS,
        "{repair:?}"
    );
    assert!(
        repair.at_scenario_ms - repair.state_since_ms < REPAIR_GRACE_MS + 60_000,
        "repaired within a minute after the grace: {repair:?}"
    );
}

// ---- the terminate notification: one delete of three instances -------------------------

/// lb-drain as shipped with a drain window of `seconds` (wall).
fn lb_drain_for(seconds: u64) -> String {
    format!(
        "subscribe = [\"Freeze\", \"Reboot\", \"Redeploy\", \"Preempt\", \"Terminate\"]\nbudget = \"5s\"\nprepare-time = \"{seconds}s\"\n\n[config]\ndrain-seconds = {seconds}\nfreeze-threshold-seconds = 10\n\n[capabilities]\nreadiness = true\n"
    )
}

/// A daemon for `vm` against the simulator's `/vm/VM` URLs, lb-drain draining `drain` s.
fn start_instance(dir: &Path, simulator: &Simulator, vm: &str, drain: u64) -> Daemon {
    let home = dir.join(vm);
    let plugin_dir = home.join("plugins");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    install_bundled_plugin(&plugin_dir, "lb-drain", Some(&lb_drain_for(drain)));
    let config = home.join("forewarn.toml");
    DaemonConfig {
        vm_name: vm.to_owned(),
        ..DaemonConfig::vm_a(
            &home,
            plugin_dir,
            &format!("{}/vm/{vm}", simulator.base_url),
        )
    }
    .write(&config);
    Daemon::start(forewarn(), &config)
}

#[test]
fn a_scale_in_of_three_waits_for_the_deferring_instance_and_all_three_are_deleted_together() {
    let dir = tempfile::tempdir().expect("temp dir");
    let simulator = Simulator::builder(forewarn())
        .scenario("scaleset-scale-in")
        .speed(20.0)
        .start_on_first_poll()
        .start();
    // vm-b's lb-drain defers for 15 s (wall, 5 min of scenario time); the others drain 2 s.
    let daemons: Vec<(&str, Daemon)> = [("vm-a", 2), ("vm-b", 15), ("vm-c", 2)]
        .into_iter()
        .map(|(vm, drain)| (vm, start_instance(dir.path(), &simulator, vm, drain)))
        .collect();
    let admin_of = |vm: &str| {
        daemons
            .iter()
            .find(|(name, _)| *name == vm)
            .map(|(_, daemon)| daemon.admin_address(WAIT))
            .expect("a daemon of the VM")
    };
    let id_of = |vm: &str| -> String {
        let scenario = forewarn_simulator::load_scenario("scaleset-scale-in").expect("built in");
        scenario
            .events
            .iter()
            .find(|event| event.resources.as_deref() == Some(&[vm.to_owned()][..]))
            .map(|event| event.id().to_owned())
            .expect("a Terminate of the VM")
    };
    // vm-a and vm-c approve early; Azure holds them for vm-b, and /status says so.
    for vm in ["vm-a", "vm-c"] {
        let admin = admin_of(vm);
        let id = id_of(vm);
        let line = wait_for(
            WAIT,
            "the early approval shown waiting for the delete",
            || {
                let snapshot = status(&admin);
                let event = snapshot
                    .events
                    .iter()
                    .find(|event| event.id.as_str().eq_ignore_ascii_case(&id));
                match event {
                    Some(event)
                        if event.approval.starts_with(
                            forewarn_daemon::ops::status::APPROVED_WAITING_FOR_THE_DELETE,
                        ) =>
                    {
                        Ok(event.approval.clone())
                    }
                    other => Err(format!("{other:?}")),
                }
            },
        );
        assert!(line.contains("sent at"), "{line}");
    }
    let waiting = simulator.state();
    assert!(
        !waiting
            .history
            .iter()
            .any(|record| record.transition == Transition::Started),
        "nothing deleted while vm-b defers: {:?}",
        waiting.history
    );
    let started = simulator.wait_for_state(WAIT, "all three deleted", |state| {
        state
            .history
            .iter()
            .filter(|record| record.transition == Transition::Started)
            .count()
            == 3
    });
    let starts: Vec<u64> = started
        .history
        .iter()
        .filter(|record| record.transition == Transition::Started)
        .map(|record| record.at_scenario_ms)
        .collect();
    assert!(starts.iter().all(|at| *at == starts[0]), "{starts:?}");
    let approval_of = |vm: &str| {
        let id = id_of(vm);
        started
            .approvals
            .iter()
            .find(|approval| approval.accepted && approval.event_id.eq_ignore_ascii_case(&id))
            .map(|approval| approval.at_scenario_ms)
            .unwrap_or_else(|| panic!("no accepted approval of {vm}: {:?}", started.approvals))
    };
    let (a, b, c) = (
        approval_of("vm-a"),
        approval_of("vm-b"),
        approval_of("vm-c"),
    );
    assert!(a < b && c < b, "vm-b approves last: a {a} b {b} c {c}");
    assert_eq!(starts[0], b, "the last approval starts the whole delete");
    let not_before_ms = 5_000 + 10 * 60 * 1000;
    assert!(starts[0] < not_before_ms, "early, before NotBefore");
    println!(
        "scale-in: appeared 5 s; approved vm-a {} s, vm-c {} s, vm-b {} s; all three deleted at {} s; NotBefore {} s",
        a / 1000,
        c / 1000,
        b / 1000,
        starts[0] / 1000,
        not_before_ms / 1000
    );
    drop(daemons);
}

// ---- an OS image upgrade: a type forewarn does not know ----------------------------------

#[test]
fn an_os_image_upgrade_of_an_unknown_type_is_prepared_like_a_reboot_and_reaches_plugins_raw() {
    let dir = tempfile::tempdir().expect("temp dir");
    let simulator = Simulator::builder(forewarn())
        .scenario("scaleset-os-image-upgrade")
        .speed(20.0)
        .start_on_first_poll()
        .start();
    let daemon = start_instance(dir.path(), &simulator, "vm-a", 3);
    let admin = daemon.admin_address(WAIT);
    let id = forewarn_simulator::load_scenario("scaleset-os-image-upgrade")
        .expect("built in")
        .events[0]
        .id()
        .to_owned();
    let preparing = wait_for(WAIT, "the event prepared, lb-drain draining", || {
        let snapshot = status(&admin);
        let event = snapshot
            .events
            .iter()
            .find(|event| event.id.as_str().eq_ignore_ascii_case(&id))
            .cloned();
        match event {
            Some(event) if snapshot.readiness.held_by == ["lb-drain"] => Ok(event),
            other => Err(format!("{other:?} {:?}", snapshot.readiness)),
        }
    });
    assert_eq!(preparing.event_type, "OSImageUpgrade");
    assert!(
        preparing.handling.starts_with("prepare"),
        "{}",
        preparing.handling
    );
    let started = simulator.wait_for_transition(WAIT, &id, Transition::Started);
    let approval = started
        .approvals
        .iter()
        .find(|approval| approval.accepted && approval.event_id.eq_ignore_ascii_case(&id))
        .expect("approved at IMDS");
    let appeared = started
        .history
        .iter()
        .find(|record| record.transition == Transition::Appeared)
        .map(|record| record.at_scenario_ms)
        .expect("appeared");
    // Approved after the drain (3 s wall = 60 s of scenario time), long before NotBefore.
    assert!(approval.at_scenario_ms - appeared >= 55_000, "{approval:?}");
    assert!(approval.at_scenario_ms < appeared + 15 * 60 * 1000);
    let drained = format!("drained for OSImageUpgrade {id}");
    let heard = wait_for(WAIT, "lb-drain's own line naming the raw type", || {
        daemon
            .lines()
            .into_iter()
            .find(|line| line.text("plugin") == "lb-drain" && line.message() == drained)
            .ok_or_else(|| {
                let said: Vec<String> = daemon
                    .lines()
                    .into_iter()
                    .filter(|line| line.text("plugin") == "lb-drain")
                    .map(|line| line.fields.to_string())
                    .collect();
                format!("lb-drain's lines: {said:?}")
            })
    });
    assert_eq!(heard.text("plugin"), "lb-drain");
}
