//! `forewarn plugin test PLUGIN.wasm`: plays built-in scenarios against the plugin (the
//! demo's simulator and daemon, in one process) and turns the timeline into a verdict.

use std::time::Duration;

use serde::Serialize;

use crate::cli::demo::{self, DemoOptions};
use crate::cli::plugin_files::PluginFile;
use crate::cli::verdict::Verdict;

/// The scenario `plugin test` plays when none is named.
pub const DEFAULT_SCENARIO: &str = forewarn_simulator::DEFAULT_SCENARIO;

/// The speed `plugin test` plays scenarios at when none is given: the default scenario
/// takes a few seconds.
pub const DEFAULT_SPEED: f64 = 60.0;

/// Options of `forewarn plugin test`, as the command line gives them.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// The plugin under test, its manifest and `--config` overrides.
    pub plugin: PluginFile,
    /// The scenarios to play, in order (one, or every built-in with `--all-scenarios`).
    pub scenarios: Vec<String>,
    /// How much faster than real time the scenarios run.
    pub speed: f64,
    /// Whether the bundled plugins run beside the plugin.
    pub with_bundled: bool,
    /// One JSON object per line instead of the timeline for people.
    pub json: bool,
    /// Whether to print every scenario's timeline (not with `--all-scenarios`).
    pub timeline: bool,
}

/// How `plugin test` ends, as its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestOutcome {
    /// Every scenario passed (or did not concern the plugin): exit 0.
    Passed,
    /// The plugin failed a scenario: exit 1.
    PluginFailed,
}

impl TestOutcome {
    /// The process exit code: 0 passed, 1 the plugin failed (2 is forewarn's own error).
    pub fn exit_code(self) -> u8 {
        match self {
            TestOutcome::Passed => 0,
            TestOutcome::PluginFailed => 1,
        }
    }
}

/// The exit code when `plugin test` could not test at all (the plugin does not load, an
/// unknown scenario): not the plugin's verdict.
pub const EXIT_ERROR: u8 = 2;

/// One scenario's result, printed as one line (a JSON object with `--json`).
#[derive(Debug, Clone, Serialize)]
struct ScenarioVerdict<'a> {
    kind: &'static str,
    plugin: &'a str,
    scenario: &'a str,
    #[serde(flatten)]
    verdict: &'a Verdict,
}

/// Plays every scenario and prints a verdict line each.
pub async fn run(options: TestOptions) -> anyhow::Result<TestOutcome> {
    let name = options.plugin.name()?;
    if let Some(notice) = name.notice(&options.plugin.wasm) {
        eprintln!("{notice}");
    }
    let name = name.name;
    let mut outcome = TestOutcome::Passed;
    for scenario in &options.scenarios {
        let played = demo::play(&DemoOptions {
            scenario: scenario.clone(),
            speed: options.speed,
            drain_seconds: 3,
            timeout: Duration::from_secs(300),
            json: options.json,
            extra_plugins: vec![options.plugin.clone()],
            bundled: options.with_bundled,
            quiet: !options.timeline,
        })
        .await?;
        let verdict = played.summary.verdicts.verdict(&name);
        if verdict.is_failure() {
            outcome = TestOutcome::PluginFailed;
        }
        print_verdict(&options, &name, scenario, &verdict);
    }
    Ok(outcome)
}

fn print_verdict(options: &TestOptions, plugin: &str, scenario: &str, verdict: &Verdict) {
    let line = if options.json {
        let line = ScenarioVerdict {
            kind: "verdict",
            plugin,
            scenario,
            verdict,
        };
        serde_json::to_string(&line).unwrap_or_default()
    } else {
        format!("{plugin} on {scenario:<28} {}", verdict.describe())
    };
    println!("{line}");
}
