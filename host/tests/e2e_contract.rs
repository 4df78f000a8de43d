//! End-to-end tests of the plugin contract's versions in the real daemon: plugins built against
//! `forewarn:plugin@0.1.0` and `@0.2.0` keep working, and what 0.2.0 added reaches plugins
//! built since.
//!
//! The 0.1.0 plugins are the bundled ones as built at 73bd3b3, before 0.2.0 existed
//! (`host/tests/fixtures/wit-0.1.0`); the 0.2.0 ones as built at cf79ab5, before 0.3.0
//! (`host/tests/fixtures/wit-0.2.0`). What 0.2.0 added is checked with the probe guest's
//! modes `identity`, `vm` and `on-start`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_daemon::log_messages::PLUGIN_STARTED;
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    PluginDecision, ProbePlugin, TestEnv, accepted_approvals, wait_for,
};

/// A platform Reboot for vm-a, announced 2 s in with 10 minutes' notice, running 2 s once
/// approved.
const REBOOT: &str = r#"
name = "contract-reboot"
description = "A Reboot every plugin prepares for."
end_after = "3s"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "2s"
notice = "10m"
runs_for = "2s"
"#;

/// A Spot eviction of vm-a (so vm-a is a Spot VM with the Delete policy), 30 s of notice.
const PREEMPT: &str = r#"
name = "contract-preempt"
description = "A Spot eviction with 30 s of notice."
end_after = "3s"

[[events]]
type = "Preempt"
source = "Platform"
appear_at = "1s"
notice = "30s"
runs_for = "2s"
"#;

/// The bundled plugins kept as built against an older contract.
const OLD_PLUGINS: &[&str] = &["lb-drain", "checkpoint", "graceful-shutdown"];

/// The folder of the bundled plugins as built against contract `version`.
fn fixtures(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("wit-{version}"))
}

/// The prepare decisions of `plugin` so far.
fn prepares<'a>(decisions: &'a [PluginDecision], plugin: &str) -> Vec<&'a PluginDecision> {
    decisions
        .iter()
        .filter(|d| d.plugin == plugin && d.phase == "prepare")
        .collect()
}

#[test]
fn plugins_built_against_0_1_0_load_answer_and_see_an_event_through() {
    old_plugins_see_an_event_through("0.1.0");
}

#[test]
fn plugins_built_against_0_2_0_load_answer_and_see_an_event_through() {
    old_plugins_see_an_event_through("0.2.0");
}

/// The bundled plugins as built against contract `version` load into today's daemon, answer,
/// drive a Reboot to an approval at IMDS and recover; `on-start` (since 0.2.0) runs for them.
fn old_plugins_see_an_event_through(version: &str) {
    let fixtures = fixtures(version);
    let env = TestEnv::builder(forewarn_binary!())
        .scenario_text(REBOOT)
        .wait(Duration::from_secs(60))
        .prepare();
    let plugin_dir = env.dir.path().join("plugins");
    for name in OLD_PLUGINS {
        let wasm = std::fs::read(fixtures.join(format!("{name}.wasm"))).expect("fixture wasm");
        let handler = format!("forewarn:plugin/handler@{version}");
        assert!(
            wasm.windows(handler.len()).any(|w| w == handler.as_bytes()),
            "{name}: not a forewarn plugin of contract {version}"
        );
        std::fs::write(plugin_dir.join(format!("{name}.wasm")), wasm).expect("install");
    }
    // lb-drain with a short drain window; the others as they were shipped then.
    std::fs::write(
        plugin_dir.join("lb-drain.toml"),
        "budget = \"5s\"\n[config]\ndrain-seconds = 1\n[capabilities]\nreadiness = true\n",
    )
    .expect("lb-drain manifest");
    for name in ["checkpoint", "graceful-shutdown"] {
        std::fs::copy(
            fixtures.join(format!("{name}.toml")),
            plugin_dir.join(format!("{name}.toml")),
        )
        .expect("fixture manifest");
    }
    let mut daemon = env.start_daemon();
    let state = env.wait_finished(&mut daemon, Duration::from_secs(90));
    let event_id = state
        .history
        .first()
        .map(|entry| entry.event_id.clone())
        .expect("the scenario's event");
    assert_eq!(
        accepted_approvals(&state, &event_id).len(),
        1,
        "the {version} plugins' approval must reach IMDS: {}",
        daemon.describe_for_failure()
    );
    // The simulator can finish before the test has read the plugins' last decisions (their
    // recovery) from the daemon's output: wait for them, do not read once.
    let decisions = daemon.wait_for_decisions(
        Duration::from_secs(60),
        "every plugin called to recover",
        |decisions| {
            OLD_PLUGINS.iter().all(|name| {
                decisions
                    .iter()
                    .any(|d| d.plugin == *name && d.phase == "ended-after-start")
            })
        },
    );
    for name in OLD_PLUGINS {
        let answers = prepares(&decisions, name);
        assert_eq!(
            answers.last().map(|d| d.decision.as_str()),
            Some("approve"),
            "{name} must answer and approve: {answers:#?}"
        );
        assert!(
            decisions
                .iter()
                .any(|d| d.plugin == *name && d.phase == "ended-after-start"),
            "{name} must be called to recover: {decisions:#?}"
        );
        assert!(
            answers.iter().all(|d| d.failure.is_empty()),
            "{name} failed a call: {answers:#?}"
        );
    }
    // 0.1.0 has no on-start: nothing is called, nothing is logged for them; 0.2.0 has.
    let started: Vec<String> = daemon
        .lines_with_message(PLUGIN_STARTED)
        .iter()
        .map(|line| line.text("plugin").to_owned())
        .collect();
    if version == "0.1.0" {
        assert!(started.is_empty(), "{started:?}");
    } else {
        for name in OLD_PLUGINS {
            assert!(
                started.iter().any(|plugin| plugin == name),
                "{name}: {started:?}"
            );
        }
    }
}

#[test]
fn identity_tokens_reach_granted_plugins_only_and_are_fetched_once() {
    let storage = ProbePlugin::new("storage", "identity")
        .budget("2s")
        .capability("azure-identity = [\"https://storage.azure.com/\"]");
    let vault = ProbePlugin::new("vault", "identity")
        .budget("2s")
        .config("resource", "\"https://vault.azure.net\"")
        .capability("azure-identity = [\"https://storage.azure.com/\"]");
    let env = TestEnv::builder(forewarn_binary!())
        .scenario_text(REBOOT)
        .plugins(&[storage, vault])
        .start();
    let decisions = env.daemon.wait_for_decisions(
        Duration::from_secs(30),
        "three prepare answers from the storage probe",
        |decisions| prepares(decisions, "storage").len() >= 3,
    );
    let tokens: Vec<&str> = prepares(&decisions, "storage")
        .iter()
        .map(|d| d.reason.as_str())
        .collect();
    let first = tokens[0];
    let token = first
        .strip_prefix("identity: ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no token in {first:?}"));
    assert_eq!(
        token.split('.').count(),
        3,
        "a JWT like Azure's, got {first:?}"
    );
    assert!(
        tokens.iter().all(|reason| *reason == first),
        "every call must get the cached token: {tokens:#?}"
    );
    let refused = prepares(&decisions, "vault");
    let reason = &refused.first().expect("the vault probe answered").reason;
    assert!(
        reason.starts_with("identity: not granted:")
            && reason.contains("add \"https://vault.azure.net\" to [capabilities] azure-identity"),
        "{reason}"
    );
    let fetches = env.state().identity_requests().len();
    assert_eq!(
        fetches, 1,
        "the daemon must fetch the storage token once and cache it"
    );
}

#[test]
fn a_plugin_sees_a_spot_vm_that_is_deleted_and_the_time_to_not_before() {
    let env = TestEnv::builder(forewarn_binary!())
        .scenario_text(PREEMPT)
        .plugins(&[ProbePlugin::new("vm", "vm").budget("2s")])
        .start();
    let decisions = env.daemon.wait_for_decisions(
        Duration::from_secs(30),
        "the vm probe's prepare answer",
        |decisions| !prepares(decisions, "vm").is_empty(),
    );
    assert_eq!(
        prepares(&decisions, "vm")[0].reason,
        "vm: priority=VmPriority::Spot eviction=Some(EvictionPolicy::Delete) until-not-before=true \
         deletes-disks=true"
    );
}

#[test]
fn on_start_runs_before_the_first_call_and_knows_a_first_run_from_a_restart() {
    let probe = ProbePlugin::new("starter", "on-start")
        .budget("2s")
        .config("on-start", "\"record\"");
    let mut env = TestEnv::builder(forewarn_binary!())
        .scenario_text(REBOOT)
        .plugins(&[probe])
        .start();
    let decisions = env.daemon.wait_for_decisions(
        Duration::from_secs(30),
        "the starter probe's prepare answer",
        |decisions| !prepares(decisions, "starter").is_empty(),
    );
    assert_eq!(
        prepares(&decisions, "starter")[0].reason,
        "on-start: first-run=true",
        "on-start must have run, on a first run, before the first call"
    );
    let started = env.daemon.lines_with_message(PLUGIN_STARTED);
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0].fields["first_run"], true);

    env.restart_daemon();
    let restarted = wait_for(
        Duration::from_secs(30),
        "on-start after the restart",
        || {
            env.daemon
                .lines_with_message(PLUGIN_STARTED)
                .into_iter()
                .next()
                .ok_or_else(|| env.daemon.describe_for_failure())
        },
    );
    assert_eq!(
        restarted.fields["first_run"], false,
        "the journal survived: not a first run"
    );
}
