//! Every state and reason of the scale-set health answer, on made-up instants.

use std::time::{Duration, SystemTime};

use super::*;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + seconds)
}

/// A daemon running since `at(0)`, IMDS answering at `at(100)`, one plugin loaded.
fn running() -> HealthInputs {
    HealthInputs {
        running: true,
        plugin_directory_loaded: true,
        polling_since: Some(at(0)),
        last_imds_answer: Some(at(100)),
        plugins_loaded: 1,
        ..HealthInputs::default()
    }
}

fn config() -> ScaleSetConfig {
    ScaleSetConfig::default()
}

fn state_at(inputs: &HealthInputs, now: SystemTime) -> ScaleSetHealthState {
    assess(inputs, &config(), now).state
}

fn codes(state: &ScaleSetHealthState) -> Vec<&'static str> {
    state.reasons().iter().map(UnhealthyReason::code).collect()
}

#[test]
fn initializing_until_the_daemon_runs_and_the_plugin_directory_loaded() {
    let starting = HealthInputs::default();
    assert_eq!(
        state_at(&starting, at(10)),
        ScaleSetHealthState::Initializing {
            waiting_for: InitializingFor::DaemonStart
        }
    );
    let no_plugin_directory = HealthInputs {
        plugin_directory_loaded: false,
        ..running()
    };
    assert_eq!(
        state_at(&no_plugin_directory, at(101)).rich_state(),
        "Initializing"
    );
}

#[test]
fn initializing_until_imds_first_answers_then_unhealthy_after_the_patience() {
    let waiting = HealthInputs {
        last_imds_answer: None,
        ..running()
    };
    assert_eq!(
        state_at(&waiting, at(299)),
        ScaleSetHealthState::Initializing {
            waiting_for: InitializingFor::FirstImdsAnswer
        }
    );
    let state = state_at(&waiting, at(300));
    assert_eq!(
        state,
        ScaleSetHealthState::Unhealthy {
            reasons: vec![UnhealthyReason::ImdsUnreachable {
                silent_seconds: 300,
                answered_before: false
            }]
        }
    );
    assert!(
        state.reasons()[0]
            .describe()
            .contains("since the first poll")
    );
}

#[test]
fn healthy_while_it_drains_and_prepares() {
    let draining = HealthInputs {
        preparing: vec![EventId::from("E1")],
        readiness_held_by: vec!["lb-drain".to_owned()],
        ..running()
    };
    // 20 minutes of preparation, IMDS answering all along.
    for second in [101, 600, 1300] {
        let inputs = HealthInputs {
            last_imds_answer: Some(at(second - 1)),
            ..draining.clone()
        };
        assert_eq!(state_at(&inputs, at(second)), ScaleSetHealthState::Healthy);
    }
}

#[test]
fn imds_silent_past_the_configured_time_is_unhealthy() {
    let inputs = running();
    assert_eq!(state_at(&inputs, at(399)), ScaleSetHealthState::Healthy);
    let state = state_at(&inputs, at(400));
    assert_eq!(codes(&state), ["imds-unreachable"]);
    assert!(state.reasons()[0].describe().contains("5m"), "{state:?}");
    let shorter = ScaleSetConfig {
        imds_unreachable_after: Duration::from_secs(60),
        ..config()
    };
    assert_eq!(
        assess(&inputs, &shorter, at(160)).state.rich_state(),
        "Unhealthy"
    );
}

#[test]
fn no_plugin_loadable_only_when_files_exist_and_none_loads() {
    let broken = HealthInputs {
        plugins_loaded: 0,
        plugin_load_errors: 2,
        ..running()
    };
    let state = state_at(&broken, at(101));
    assert_eq!(codes(&state), ["no-plugin-loadable"]);
    assert!(state.reasons()[0].describe().contains("2 plugin files"));
    let empty_directory = HealthInputs {
        plugins_loaded: 0,
        ..running()
    };
    assert_eq!(
        state_at(&empty_directory, at(101)),
        ScaleSetHealthState::Healthy
    );
    let one_of_two = HealthInputs {
        plugin_load_errors: 1,
        ..running()
    };
    assert_eq!(state_at(&one_of_two, at(101)), ScaleSetHealthState::Healthy);
}

#[test]
fn a_journal_not_durable_past_the_configured_time_is_unhealthy() {
    let failing = HealthInputs {
        journal_not_durable_since: Some(at(100)),
        last_imds_answer: Some(at(399)),
        ..running()
    };
    assert_eq!(state_at(&failing, at(399)), ScaleSetHealthState::Healthy);
    let state = state_at(&failing, at(400));
    assert_eq!(
        state,
        ScaleSetHealthState::Unhealthy {
            reasons: vec![UnhealthyReason::JournalNotDurable { seconds: 300 }]
        }
    );
}

#[test]
fn a_quarantined_plugin_is_unhealthy_naming_it() {
    let inputs = HealthInputs {
        quarantined: vec![PluginName::from("notify"), PluginName::from("checkpoint")],
        ..running()
    };
    let state = state_at(&inputs, at(101));
    assert_eq!(codes(&state), ["plugin-quarantined"]);
    assert!(
        state.reasons()[0]
            .describe()
            .starts_with("plugin checkpoint, notify is quarantined"),
        "{state:?}"
    );
}

#[test]
fn every_reason_at_once_is_listed_in_a_fixed_order() {
    let inputs = HealthInputs {
        plugins_loaded: 0,
        plugin_load_errors: 1,
        journal_not_durable_since: Some(at(0)),
        quarantined: vec![PluginName::from("lb-drain")],
        ..running()
    };
    let state = state_at(&inputs, at(1000));
    assert_eq!(codes(&state), UnhealthyReason::CODES);
}

#[test]
fn skip_upgrade_follows_the_configured_rule() {
    let preparing = vec![EventId::from("E1")];
    let held = vec!["lb-drain".to_owned()];
    // (preparing, held, rule) → skip
    let rows = [
        (true, false, SkipUpgradeWhen::PreparingOrHeld, true),
        (false, true, SkipUpgradeWhen::PreparingOrHeld, true),
        (false, false, SkipUpgradeWhen::PreparingOrHeld, false),
        (true, false, SkipUpgradeWhen::Preparing, true),
        (false, true, SkipUpgradeWhen::Preparing, false),
        (true, true, SkipUpgradeWhen::Never, false),
    ];
    for (is_preparing, is_held, rule, skip) in rows {
        let inputs = HealthInputs {
            preparing: if is_preparing {
                preparing.clone()
            } else {
                Vec::new()
            },
            readiness_held_by: if is_held { held.clone() } else { Vec::new() },
            ..running()
        };
        let config = ScaleSetConfig {
            skip_upgrade: rule,
            ..config()
        };
        let health = assess(&inputs, &config, at(101));
        assert_eq!(
            health.skip_upgrade.is_some(),
            skip,
            "{is_preparing} {is_held} {rule:?}"
        );
    }
}

#[test]
fn the_body_is_rich_health_states_with_custom_metrics_as_a_json_string() {
    let inputs = HealthInputs {
        preparing: vec![EventId::from("E1")],
        ..running()
    };
    let config = ScaleSetConfig {
        phase_ordering_number: Some(2),
        ..config()
    };
    let body = serde_json::to_value(assess(&inputs, &config, at(101)).probe_body()).unwrap();
    assert_eq!(body["ApplicationHealthState"], "Healthy");
    let metrics = body["customMetrics"]
        .as_str()
        .expect("customMetrics is a string");
    let metrics: serde_json::Value = serde_json::from_str(metrics).unwrap();
    assert_eq!(
        metrics,
        serde_json::json!({"rollingUpgrade": {"SkipUpgrade": true, "PhaseOrderingNumber": 2}})
    );
    let idle = assess(&running(), &ScaleSetConfig::default(), at(101)).probe_body();
    assert_eq!(
        idle.custom_metrics,
        r#"{"rollingUpgrade":{"SkipUpgrade":false}}"#
    );
}

#[test]
fn the_status_view_names_each_reason_and_the_skip() {
    let inputs = HealthInputs {
        quarantined: vec![PluginName::from("notify")],
        readiness_held_by: vec!["lb-drain".to_owned()],
        ..running()
    };
    let view = assess(&inputs, &config(), at(101)).view();
    assert_eq!(view.state, "Unhealthy");
    assert_eq!(view.reasons.len(), 1);
    assert_eq!(view.reasons[0].code, "plugin-quarantined");
    assert_eq!(
        view.skip_upgrade.as_deref(),
        Some("plugin lb-drain holds the VM out of rotation")
    );
}

#[test]
fn the_log_hears_of_a_change_of_state_reason_or_skip_not_of_seconds() {
    let inputs = running();
    let first = assess(&inputs, &config(), at(400));
    let later = assess(&inputs, &config(), at(500));
    assert_ne!(first, later, "the seconds differ");
    assert!(same_for_the_log(&first, &later));
    let healthy = assess(&inputs, &config(), at(101));
    assert!(!same_for_the_log(&healthy, &first));
    let skipping = assess(
        &HealthInputs {
            preparing: vec![EventId::from("E1")],
            ..running()
        },
        &config(),
        at(101),
    );
    assert!(!same_for_the_log(&healthy, &skipping));
}
