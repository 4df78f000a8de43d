//! The scale set's rules on made-up probes and instants.

use std::time::Duration;

use super::*;

fn seconds(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

fn healthy(skip: bool) -> ProbeOutcome {
    ProbeOutcome::Answered {
        status: 200,
        body: format!(
            r#"{{"ApplicationHealthState":"Healthy","customMetrics":"{{\"rollingUpgrade\":{{\"SkipUpgrade\":{skip}}}}}"}}"#
        ),
    }
}

fn not_ready() -> ProbeOutcome {
    ProbeOutcome::Answered {
        status: 503,
        body: "not ready: held by lb-drain\n".into(),
    }
}

fn spec(vms: &[&str]) -> ScaleSetSpec {
    ScaleSetSpec {
        instances: vms
            .iter()
            .map(|vm| ((*vm).to_owned(), "127.0.0.1:1".to_owned()))
            .collect(),
        health_extension: HealthExtensionSpec::default(),
        automatic_repairs: Some(RepairsSpec {
            grace_period: seconds(600),
            repair_action: RepairAction::Replace,
            max_batch_percent: 5,
        }),
        rolling_upgrade: None,
    }
}

/// Probes `vm` every 5 s from `from` to `until` with `outcome`, advancing the model.
fn probe_for(model: &mut ScaleSetModel, vm: &str, from: u64, until: u64, outcome: &ProbeOutcome) {
    let mut at = from;
    while at < until {
        model.record_probe(vm, seconds(at), outcome);
        model.advance(seconds(at));
        at += 5;
    }
}

#[test]
fn the_extension_reads_rich_states_and_unknown() {
    let rows = [
        (healthy(true), ExtensionState::Healthy, true),
        (not_ready(), ExtensionState::Unknown, false),
        (ProbeOutcome::TimedOut, ExtensionState::Unknown, false),
        (
            ProbeOutcome::Failed("refused".into()),
            ExtensionState::Unknown,
            false,
        ),
        (
            ProbeOutcome::Answered {
                status: 200,
                body: "ok".into(),
            },
            ExtensionState::Unknown,
            false,
        ),
        (
            ProbeOutcome::Answered {
                status: 200,
                body: r#"{"ApplicationHealthState":"Unhealthy"}"#.into(),
            },
            ExtensionState::Unhealthy,
            false,
        ),
    ];
    for (outcome, state, skip) in rows {
        let reading = read_probe(&outcome);
        assert_eq!(
            (reading.state, reading.skip_upgrade),
            (state, skip),
            "{outcome:?}"
        );
    }
}

#[test]
fn a_state_changes_after_number_of_probes_agreeing_probes() {
    let mut spec = spec(&["vm-a"]);
    spec.health_extension.number_of_probes = 3;
    let mut model = ScaleSetModel::new(spec);
    for at in [0, 5] {
        model.record_probe("vm-a", seconds(at), &healthy(false));
    }
    assert_eq!(
        model.snapshot().instances[0].state,
        ExtensionState::Initializing
    );
    model.record_probe("vm-a", seconds(10), &healthy(false));
    assert_eq!(model.snapshot().instances[0].state, ExtensionState::Healthy);
}

#[test]
fn unknown_past_the_repairs_grace_is_replaced_and_healthy_never_is() {
    let mut model = ScaleSetModel::new(spec(&["vm-a", "vm-b"]));
    probe_for(&mut model, "vm-a", 0, 30, &healthy(false));
    probe_for(&mut model, "vm-b", 0, 30, &healthy(true));
    // vm-a answers 503 from 30 s on (its /readyz while it drains); vm-b stays Healthy.
    let mut at = 30;
    while at < 30 + 1200 {
        model.record_probe("vm-a", seconds(at), &not_ready());
        model.record_probe("vm-b", seconds(at), &healthy(true));
        model.advance(seconds(at));
        at += 5;
    }
    let snapshot = model.snapshot();
    assert!(snapshot.repairs_of("vm-b").is_empty());
    let repairs = snapshot.repairs_of("vm-a");
    assert_eq!(repairs.len(), 1, "{repairs:?}");
    assert_eq!(repairs[0].action, RepairAction::Replace);
    assert_eq!(repairs[0].state, ExtensionState::Unknown);
    assert_eq!(
        repairs[0].at_scenario_ms, 630_000,
        "10 min after the change at 30 s"
    );
}

#[test]
fn repairs_go_a_batch_at_a_time() {
    let mut model = ScaleSetModel::new(spec(&["vm-a", "vm-b", "vm-c"]));
    for vm in ["vm-a", "vm-b", "vm-c"] {
        model.record_probe(vm, seconds(0), &not_ready());
    }
    model.advance(seconds(600));
    // 5 % of three instances is one: one repaired, the others wait for it to be Healthy.
    assert_eq!(model.snapshot().repairs.len(), 1);
    model.record_probe("vm-a", seconds(610), &healthy(false));
    model.advance(seconds(610));
    assert_eq!(model.snapshot().repairs.len(), 2);
}

#[test]
fn initializing_past_the_extension_grace_is_unknown() {
    let mut model = ScaleSetModel::new(spec(&["vm-a"]));
    model.advance(seconds(599));
    assert_eq!(
        model.snapshot().instances[0].state,
        ExtensionState::Initializing
    );
    model.advance(seconds(600));
    assert_eq!(model.snapshot().instances[0].state, ExtensionState::Unknown);
}

/// vm-a and vm-b without repairs, a rolling upgrade of one at a time from 10 s.
fn upgrading_two() -> ScaleSetModel {
    let mut spec = spec(&["vm-a", "vm-b"]);
    spec.automatic_repairs = None;
    spec.rolling_upgrade = Some(RollingUpgradeSpec {
        start_at: seconds(10),
        max_batch_instance_percent: 50,
        upgrade_takes: seconds(60),
    });
    ScaleSetModel::new(spec)
}

#[test]
fn a_rolling_upgrade_skips_an_instance_that_asks_and_upgrades_it_after() {
    let mut model = upgrading_two();
    model.record_probe("vm-a", seconds(5), &healthy(true));
    model.record_probe("vm-b", seconds(5), &healthy(false));
    model.advance(seconds(10));
    model.advance(seconds(70));
    model.advance(seconds(80));
    let steps = model.snapshot().upgrade;
    assert!(
        steps.contains(&UpgradeStep::Skipped {
            at_scenario_ms: 10_000,
            vm: "vm-a".into()
        }),
        "{steps:?}"
    );
    assert!(
        steps.contains(&UpgradeStep::Upgraded {
            at_scenario_ms: 70_000,
            vm: "vm-b".into()
        }),
        "{steps:?}"
    );
    assert_eq!(
        model.snapshot().instance("vm-a").unwrap().upgraded_at_ms,
        None
    );
    model.record_probe("vm-a", seconds(90), &healthy(false));
    model.advance(seconds(90));
    model.advance(seconds(150));
    let snapshot = model.snapshot();
    assert_eq!(
        snapshot.instance("vm-a").unwrap().upgraded_at_ms,
        Some(150_000)
    );
    assert_eq!(
        snapshot.upgrade.last(),
        Some(&UpgradeStep::Completed {
            at_scenario_ms: 150_000
        })
    );
}

#[test]
fn a_rolling_upgrade_pauses_while_an_instance_is_unknown() {
    let mut model = upgrading_two();
    model.record_probe("vm-a", seconds(5), &not_ready());
    model.record_probe("vm-b", seconds(5), &healthy(false));
    model.advance(seconds(10));
    let snapshot = model.snapshot();
    assert_eq!(
        snapshot.pauses(),
        [&UpgradeStep::Paused {
            at_scenario_ms: 10_000,
            vms: vec!["vm-a".into()]
        }]
    );
    assert!(
        snapshot
            .instances
            .iter()
            .all(|instance| instance.upgraded_at_ms.is_none())
    );
}

#[test]
fn binary_states_read_2xx_as_healthy_and_anything_else_as_unhealthy() {
    let rows = [
        (not_ready(), ExtensionState::Unhealthy),
        (ProbeOutcome::TimedOut, ExtensionState::Unhealthy),
        (
            ProbeOutcome::Answered {
                status: 200,
                body: "ready\n".into(),
            },
            ExtensionState::Healthy,
        ),
    ];
    for (outcome, state) in rows {
        assert_eq!(
            read_probe_as(HealthStates::Binary, &outcome).state,
            state,
            "{outcome:?}"
        );
    }
    // The same "ready" body is Unknown to Rich Health States: it says no state.
    let ready = ProbeOutcome::Answered {
        status: 200,
        body: "ready\n".into(),
    };
    assert_eq!(
        read_probe_as(HealthStates::Rich, &ready).state,
        ExtensionState::Unknown
    );
}
