//! `[coordination]` read through the whole file: defaults, mistakes named by key, TLS files.

use std::time::Duration;

use forewarn_coordination::CoordinationConfig;
use forewarn_pipeline::barrier::DeadVm;
use forewarn_pipeline::disruption_budget::{BudgetUnreachable, DisruptionBudget};

fn config() -> CoordinationConfig {
    super::Config::parse("[coordination]\nendpoints = [\"http://127.0.0.1:2379\"]\n")
        .unwrap()
        .coordination
        .unwrap()
}

#[test]
fn defaults_are_documented_ones() {
    let config = config();
    assert_eq!(config.prefix, "/forewarn");
    assert_eq!(config.lease_ttl, Duration::from_secs(10));
    assert_eq!(config.dead_vm, DeadVm::Hold);
    assert_eq!(config.deadline, None);
    assert_eq!(config.disruption_budget, None);
    assert_eq!(config.disruption_group, "fleet");
    assert_eq!(config.slot_timeout, Duration::from_secs(1800));
    assert_eq!(config.budget_unreachable, BudgetUnreachable::Wait);
}

#[test]
fn a_disruption_budget_reads_and_its_mistakes_name_the_key_and_the_fix() {
    let parsed = super::Config::parse(
        "[coordination]\nendpoints = [\"http://a:2379\"]\ndisruption-budget = \"10%\"\n\
         disruption-group = \"web\"\nslot-timeout = \"20m\"\nbudget-unreachable = \"approve-alone\"\n",
    )
    .unwrap()
    .coordination
    .unwrap();
    assert_eq!(
        parsed.disruption_budget,
        Some(DisruptionBudget::Percent(10))
    );
    assert_eq!(parsed.disruption_group, "web");
    assert_eq!(parsed.budget_unreachable, BudgetUnreachable::ApproveAlone);
    let cases = [
        ("disruption-budget = 0", "lets no VM approve early"),
        ("disruption-budget = \"200%\"", "at most \"100%\""),
        ("disruption-budget = \"some\"", "neither a number of VMs"),
        (
            "disruption-group = \"web tier\"",
            "coordination.disruption-group",
        ),
        ("slot-timeout = \"5s\"", "shorter than `lease-ttl`"),
        ("slot-timeout = \"2h\"", "coordination.slot-timeout"),
        ("budget-unreachable = \"approve\"", "budget-unreachable"),
    ];
    for (body, needle) in cases {
        let text = format!("[coordination]\nendpoints = [\"http://a:2379\"]\n{body}\n");
        let error = super::Config::parse(&text).expect_err(body).to_string();
        assert!(error.contains(needle), "{body}: {error}");
    }
}

#[test]
fn validation_names_the_key() {
    let cases = [
        ("endpoints = []", "coordination.endpoints"),
        ("endpoints = [\"10.0.0.4:2379\"]", "must start with http://"),
        (
            "endpoints = [\"http://a:2379\"]\nlease-ttl = \"1s\"",
            "coordination.lease-ttl",
        ),
        (
            "endpoints = [\"https://a:2379\"]\nusername = \"u\"",
            "coordination.password",
        ),
        (
            "endpoints = [\"https://a:2379\", \"http://b:2379\"]\nusername = \"u\"\npassword = \"p\"",
            "key `coordination.username`: the password would go to \"http://b:2379\" in clear text",
        ),
        (
            "endpoints = [\"http://a:2379\"]\nprefix = \"forewarn\"",
            "coordination.prefix",
        ),
        (
            "endpoints = [\"http://a:2379\"]\ndead-vm = \"ignore\"",
            "dead-vm",
        ),
    ];
    for (body, needle) in cases {
        let error = super::Config::parse(&format!("[coordination]\n{body}\n"))
            .expect_err(body)
            .to_string();
        assert!(error.contains(needle), "{body}: {error}");
    }
    let parsed = super::Config::parse(
        "[coordination]\nendpoints = [\"http://a:2379\"]\ndead-vm = \"counts-as-ready\"\ndeadline = \"2m\"\n",
    )
    .unwrap()
    .coordination
    .unwrap();
    assert_eq!(parsed.dead_vm, DeadVm::CountsAsReady);
    assert_eq!(parsed.deadline, Some(Duration::from_secs(120)));
}

#[test]
fn tls_settings_are_checked_with_the_config_and_its_files_on_load() {
    let mixed = super::Config::parse(
        "[coordination]\nendpoints = [\"http://127.0.0.1:2379\"]\nca-file = \"/etc/ca.pem\"\n",
    )
    .expect_err("certificate files with a plain endpoint")
    .to_string();
    assert!(mixed.contains("use https://"), "{mixed}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forewarn.toml");
    std::fs::write(
        &path,
        "[coordination]\nendpoints = [\"https://127.0.0.1:2379\"]\nca-file = \"/nonexistent/ca.pem\"\n",
    )
    .unwrap();
    let error = super::Config::load(&path)
        .expect_err("a missing ca-file")
        .to_string();
    assert!(error.contains("coordination.ca-file"), "{error}");
    assert!(error.contains("/nonexistent/ca.pem"), "{error}");
}
