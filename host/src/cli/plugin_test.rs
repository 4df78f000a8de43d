//! `forewarn plugin test PLUGIN.wasm`: plays built-in scenarios against the plugin (the
//! demo's simulator and daemon, in one process) and turns the timeline into a verdict.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::cli::demo::{self, DemoOptions};
use crate::cli::plugin_files::{PluginFile, parse_config_pair};
use crate::cli::verdict::Verdict;

/// The scenario `plugin test` plays when none is named.
pub const DEFAULT_SCENARIO: &str = forewarn_simulator::DEFAULT_SCENARIO;

/// The speed `plugin test` plays scenarios at when none is given: the default scenario
/// takes a few seconds.
pub const DEFAULT_SPEED: f64 = 60.0;

/// `forewarn plugin test`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin component to test.
    plugin: PathBuf,
    /// Its manifest. Default: NAME.toml beside the component if present, else the defaults.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Scenario: a built-in name (see `forewarn simulate --list`) or a scenario file.
    #[arg(long, default_value = DEFAULT_SCENARIO, conflicts_with = "all_scenarios")]
    scenario: String,
    /// How many times faster than real time the scenario runs.
    #[arg(long, default_value_t = DEFAULT_SPEED)]
    speed: f64,
    /// Set or replace a `[config]` value of the manifest (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_config_pair)]
    config: Vec<(String, String)>,
    /// Run the bundled plugins beside it.
    #[arg(long)]
    with_bundled: bool,
    /// Run every built-in scenario and print one verdict line each (no timelines).
    #[arg(long)]
    all_scenarios: bool,
    /// Print JSON lines (timeline entries, then one `verdict` object per scenario).
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The test's options: the scenario named, or with `--all-scenarios` every built-in
    /// that ends (`idle`, the console's canvas, never does).
    fn options(self) -> TestOptions {
        let scenarios = match self.all_scenarios {
            true => forewarn_simulator::builtin_scenarios()
                .into_iter()
                .filter(|(name, _)| {
                    forewarn_simulator::load_scenario(name)
                        .is_ok_and(|scenario| !scenario.open_ended)
                })
                .map(|(name, _)| name.to_owned())
                .collect(),
            false => vec![self.scenario],
        };
        TestOptions {
            plugin: PluginFile {
                wasm: self.plugin,
                manifest: self.manifest,
                config: self.config,
            },
            scenarios,
            speed: self.speed,
            with_bundled: self.with_bundled,
            json: self.json,
            timeline: !self.all_scenarios,
        }
    }
}

/// Runs the test; the verdict is the exit code, and forewarn's own errors exit 2 (not 1,
/// which says the plugin failed).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    match test_plugin(args.options()).await {
        Ok(outcome) => Ok(ExitCode::from(outcome.exit_code())),
        Err(error) => {
            eprintln!("forewarn: {error:#}");
            Ok(ExitCode::from(EXIT_ERROR))
        }
    }
}

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
pub async fn test_plugin(options: TestOptions) -> anyhow::Result<TestOutcome> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn one_scenario_with_its_timeline_or_every_one_that_ends_without() {
        assert_consistent::<Args>();
        let options = parse::<Args>(&["p.wasm", "--config", "port=8080"])
            .expect("parses")
            .options();
        assert_eq!(options.scenarios, [DEFAULT_SCENARIO]);
        assert_eq!(options.speed, DEFAULT_SPEED);
        assert_eq!(options.plugin.config, [("port".into(), "8080".into())]);
        assert!(options.timeline);
        let options = parse::<Args>(&["p.wasm", "--all-scenarios"])
            .expect("parses")
            .options();
        assert!(!options.timeline);
        assert!(options.scenarios.len() > 1, "{:?}", options.scenarios);
        assert!(!options.scenarios.iter().any(|name| name == "idle"));
        let error =
            parse::<Args>(&["p.wasm", "--all-scenarios", "--scenario", "reboot"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
    }
}
