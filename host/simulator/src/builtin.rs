//! The scenarios shipped inside the binary (TOML files under `scenarios/`), and loading a
//! scenario by built-in name or by path.

use std::path::Path;

use crate::scenario::{Scenario, ScenarioError};

/// (name, TOML text) of every built-in scenario, in the order they are listed.
const BUILTINS: &[(&str, &str)] = &[
    (
        "full-lifecycle",
        include_str!("../scenarios/full-lifecycle.toml"),
    ),
    (
        "live-migration",
        include_str!("../scenarios/live-migration.toml"),
    ),
    (
        "host-agent-maintenance",
        include_str!("../scenarios/host-agent-maintenance.toml"),
    ),
    ("user-reboot", include_str!("../scenarios/user-reboot.toml")),
    (
        "platform-redeploy",
        include_str!("../scenarios/platform-redeploy.toml"),
    ),
    (
        "user-redeploy",
        include_str!("../scenarios/user-redeploy.toml"),
    ),
    (
        "canceled-maintenance",
        include_str!("../scenarios/canceled-maintenance.toml"),
    ),
    (
        "spot-preemption",
        include_str!("../scenarios/spot-preemption.toml"),
    ),
    (
        "scaleset-terminate",
        include_str!("../scenarios/scaleset-terminate.toml"),
    ),
    (
        "scaleset-scale-in",
        include_str!("../scenarios/scaleset-scale-in.toml"),
    ),
    (
        "scaleset-os-image-upgrade",
        include_str!("../scenarios/scaleset-os-image-upgrade.toml"),
    ),
    (
        "hardware-failure",
        include_str!("../scenarios/hardware-failure.toml"),
    ),
    ("multi-vm", include_str!("../scenarios/multi-vm.toml")),
    ("rescheduled", include_str!("../scenarios/rescheduled.toml")),
    ("two-events", include_str!("../scenarios/two-events.toml")),
    (
        "approval-waits-for-host",
        include_str!("../scenarios/approval-waits-for-host.toml"),
    ),
    ("starts-late", include_str!("../scenarios/starts-late.toml")),
    (
        "spot-short-notice",
        include_str!("../scenarios/spot-short-notice.toml"),
    ),
    (
        "spot-short-notice-3s",
        include_str!("../scenarios/spot-short-notice-3s.toml"),
    ),
    (
        "spot-eviction-vm-gone",
        include_str!("../scenarios/spot-eviction-vm-gone.toml"),
    ),
    (
        "scaleset-terminate-vm-gone",
        include_str!("../scenarios/scaleset-terminate-vm-gone.toml"),
    ),
    (
        "api-2017-08-01",
        include_str!("../scenarios/api-2017-08-01.toml"),
    ),
    (
        "api-2017-03-01",
        include_str!("../scenarios/api-2017-03-01.toml"),
    ),
    (
        "new-id-on-start",
        include_str!("../scenarios/new-id-on-start.toml"),
    ),
    ("idle", include_str!("../scenarios/idle.toml")),
];

/// The scenario `forewarn simulate` runs when none is named.
pub const DEFAULT_SCENARIO: &str = "full-lifecycle";

/// (name, description) of every built-in scenario.
pub fn builtin_scenarios() -> Vec<(&'static str, &'static str)> {
    BUILTINS
        .iter()
        .map(|(name, text)| (*name, description_line(text)))
        .collect()
}

/// The TOML text of a built-in scenario, for users who want to copy and edit one.
pub(crate) fn builtin_scenario_text(name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, text)| *text)
}

/// A built-in scenario, parsed.
pub(crate) fn builtin_scenario(name: &str) -> Result<Scenario, ScenarioError> {
    match builtin_scenario_text(name) {
        Some(text) => Scenario::from_toml(text, &format!("built-in scenario {name}")),
        None => Err(not_found(name)),
    }
}

/// A built-in scenario by name, or else a TOML (or `.json`) file at that path.
pub fn load_scenario(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    if builtin_scenario_text(name_or_path).is_some() {
        return builtin_scenario(name_or_path);
    }
    let path = Path::new(name_or_path);
    if !path.exists() {
        return Err(not_found(name_or_path));
    }
    Scenario::from_path(path)
}

fn not_found(name: &str) -> ScenarioError {
    let builtins: Vec<&str> = BUILTINS.iter().map(|(name, _)| *name).collect();
    ScenarioError::NotFound {
        name: name.to_string(),
        builtins: builtins.join(", "),
    }
}

/// The `description = "…"` of a built-in file, read without parsing the whole file
/// (the tests check it matches the parsed one).
fn description_line(text: &str) -> &str {
    text.lines()
        .find_map(|line| line.strip_prefix("description = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm_priority::{EvictionPolicy, VmPriority};

    #[test]
    fn every_builtin_parses_and_lists_its_description() {
        let listed = builtin_scenarios();
        assert_eq!(listed.len(), BUILTINS.len());
        for (name, description) in listed {
            let scenario = builtin_scenario(name).unwrap_or_else(|error| panic!("{error}"));
            assert_eq!(scenario.name, name, "file name and `name` must agree");
            assert_eq!(scenario.description, description);
            // `idle` is the console's blank canvas: no events, and it never finishes.
            assert_eq!(
                scenario.events.is_empty(),
                scenario.open_ended,
                "{name}: only an open-ended scenario may have no events"
            );
        }
    }

    #[test]
    fn every_scenario_file_on_disk_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            assert!(
                builtin_scenario_text(&stem).is_some(),
                "{stem} is not listed"
            );
            assert_eq!(Scenario::from_path(&path).unwrap().name, stem);
        }
    }

    #[test]
    fn builtins_with_a_preempt_are_spot_vms_that_are_deleted() {
        for (name, _) in builtin_scenarios() {
            let scenario = builtin_scenario(name).unwrap();
            let preempted = scenario
                .events
                .iter()
                .any(|event| event.event_type == "Preempt");
            let expected = if preempted {
                (VmPriority::Spot, Some(EvictionPolicy::Delete))
            } else {
                (VmPriority::Regular, None)
            };
            assert_eq!(
                (scenario.priority(), scenario.eviction_policy),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn unknown_name_lists_the_builtins() {
        let error = load_scenario("no-such-scenario").unwrap_err().to_string();
        assert!(error.contains("no-such-scenario"), "{error}");
        assert!(error.contains("full-lifecycle"), "{error}");
        assert!(error.contains("spot-preemption"), "{error}");
    }

    #[test]
    fn default_scenario_is_built_in() {
        assert!(builtin_scenario(DEFAULT_SCENARIO).is_ok());
    }
}
