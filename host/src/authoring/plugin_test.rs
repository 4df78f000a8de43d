//! `forewarn plugin test PLUGIN.wasm`: plays built-in scenarios against the plugin (the
//! demo's simulator and daemon, in one process) and turns the timeline into a verdict.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::authoring::verdict::Verdict;
use crate::cli::demo::{self, DemoOptions};
use crate::cli::plugin_files::{PluginFile, parse_config_pair};
use forewarn_daemon::config::{ActionConfig, Config};
use forewarn_daemon::daemon::wiring;
use forewarn_pipeline::state::CallPhase;
use forewarn_simulator::{EventSpec, Scenario};

/// The scenario `plugin test` plays when none is named.
pub const DEFAULT_SCENARIO: &str = forewarn_simulator::DEFAULT_SCENARIO;

/// The speed `plugin test` plays scenarios at when none is given: the default scenario
/// takes a few seconds.
pub const DEFAULT_SPEED: f64 = 60.0;

/// How many scenarios play at once when `--jobs` is not given: every built-in one. Each
/// waits on its scenario's clock far more than it computes (on 2 cores, the probe guest's
/// 24 scenarios take 36 s 8 at a time and 26 s all at once, under load).
pub const DEFAULT_JOBS: u16 = 24;

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
    /// How many scenarios play at once.
    #[arg(long, default_value_t = DEFAULT_JOBS, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// A daemon config whose `[actions]` the plugin's `run-action` calls run, for real: an
    /// action tried against a local command. Its other settings are the test's own.
    #[arg(long, value_name = "FILE")]
    daemon_config: Option<PathBuf>,
}

impl Args {
    /// The test's options: the scenario named, or with `--all-scenarios` every built-in
    /// that ends (`idle`, the console's canvas, never does).
    fn options(self) -> anyhow::Result<TestOptions> {
        let scenarios = match self.all_scenarios {
            true => ending_builtin_scenarios(),
            false => vec![self.scenario],
        };
        let actions = match &self.daemon_config {
            Some(path) => Some(daemon_config_actions(path)?),
            None => None,
        };
        Ok(TestOptions {
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
            jobs: usize::from(self.jobs),
            actions,
        })
    }
}

/// Every built-in scenario that ends (`idle`, the console's canvas, never does): what
/// `--all-scenarios` plays.
pub(crate) fn ending_builtin_scenarios() -> Vec<String> {
    forewarn_simulator::builtin_scenarios()
        .into_iter()
        .filter(|(name, _)| {
            forewarn_simulator::load_scenario(name).is_ok_and(|scenario| !scenario.open_ended)
        })
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// The `[actions]` of the daemon config at `path` (`--daemon-config`), checked as the daemon
/// checks them.
pub(crate) fn daemon_config_actions(path: &Path) -> anyhow::Result<BTreeMap<String, ActionConfig>> {
    let config = Config::load(path).with_context(|| {
        format!(
            "cannot use `--daemon-config {}`: fix the file (`forewarn config check {}` checks \
             it as the daemon does), or leave the flag out to test with the demo's stop and \
             start actions",
            path.display(),
            path.display()
        )
    })?;
    Ok(config.actions)
}

/// Runs the test; the verdict is the exit code, and forewarn's own errors exit 2 (not 1,
/// which says the plugin failed).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let tested = match args.options() {
        Ok(options) => test_plugin(options).await,
        Err(error) => Err(error),
    };
    match tested {
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
    /// How many scenarios play at once (at least 1).
    pub jobs: usize,
    /// The actions the plugin runs (`--daemon-config`); `None`: the demo workload's.
    pub actions: Option<BTreeMap<String, ActionConfig>>,
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

/// Plays every scenario and prints a verdict line each, in the scenarios' order. The plugin
/// is compiled once into a compile cache every scenario's daemon loads it from, and the
/// scenarios play `jobs` at a time (each is a simulator and a daemon waiting on the
/// scenario's clock, not on the CPU).
pub async fn test_plugin(options: TestOptions) -> anyhow::Result<TestOutcome> {
    let name = options.plugin.name()?;
    if let Some(notice) = name.notice(&options.plugin.wasm) {
        eprintln!("{notice}");
    }
    let plugin = Arc::new(Plugin {
        name: name.name,
        budget: options.plugin.manifest()?.budget,
    });
    let name = plugin.name.clone();
    let cache = tempfile::tempdir().context("cannot create a temporary compile cache")?;
    let compiled_in = compile_once(&options.plugin, cache.path()).await?;
    if !options.timeline && !options.json {
        eprintln!(
            "{name}: compiled in {:.1} s; playing {} scenario(s) at {}x, {} at a time \
             (where the daemon only waits for an event to end or appear, the scenario skips \
             ahead; wherever a plugin is called, its own time is real time)",
            compiled_in.as_secs_f64(),
            options.scenarios.len(),
            options.speed,
            options.jobs.min(options.scenarios.len()),
        );
    }
    let options = Arc::new(options);
    let plays = spawn_plays(&options, &plugin, cache.path());
    print_in_order(plays, &options, &name).await
}

/// A scenario's index in the test's order, and its verdict.
type Play = (usize, anyhow::Result<Judged>);

/// Starts every scenario's play, `options.jobs` of them running at a time.
fn spawn_plays(
    options: &Arc<TestOptions>,
    plugin: &Arc<Plugin>,
    cache_dir: &Path,
) -> JoinSet<Play> {
    let jobs = Arc::new(Semaphore::new(options.jobs));
    let mut plays = JoinSet::new();
    for (index, scenario) in options.scenarios.iter().enumerate() {
        let (options, jobs, scenario) = (options.clone(), jobs.clone(), scenario.clone());
        let (plugin, cache_dir) = (plugin.clone(), cache_dir.to_path_buf());
        plays.spawn(async move {
            let _job = jobs.acquire_owned().await;
            let judged = judge(&options, &plugin, &scenario, &cache_dir).await;
            (index, judged)
        });
    }
    plays
}

/// Prints each verdict in the scenarios' order, as soon as it and those before it are in.
async fn print_in_order(
    mut plays: JoinSet<Play>,
    options: &TestOptions,
    name: &str,
) -> anyhow::Result<TestOutcome> {
    let mut outcome = TestOutcome::Passed;
    let mut done = BTreeMap::new();
    let mut next = 0;
    while let Some(joined) = plays.join_next().await {
        let (index, judged) = joined.context("a scenario's task failed")?;
        done.insert(index, judged?);
        while let Some(judged) = done.remove(&next) {
            if judged.verdict.is_failure() {
                outcome = TestOutcome::PluginFailed;
            }
            print_verdict(options, name, &judged);
            next += 1;
        }
    }
    Ok(outcome)
}

/// Compiles the plugin into `cache_dir` (and so checks that it loads), once for the run.
async fn compile_once(plugin: &PluginFile, cache_dir: &Path) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let state = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let config = Config {
        state_dir: state.path().to_path_buf(),
        ..Config::default()
    };
    let runtime = wiring::build_runtime_with_cache(&config, cache_dir)?.runtime;
    let plugin = plugin.clone();
    tokio::task::spawn_blocking(move || plugin.load(&runtime))
        .await
        .context("the plugin compiling task failed")??;
    Ok(started.elapsed())
}

/// One scenario's verdict: played at the test's speed, and when it failed in a way the
/// plugin's own real-time timing can cause ([`may_be_timing`]), played again at real time
/// where that is short enough ([`REPLAY_WITHIN`]); the real-time verdict is the one that
/// counts (a daemon runs at real time).
async fn judge(
    options: &TestOptions,
    plugin: &Plugin,
    scenario: &str,
    cache_dir: &Path,
) -> anyhow::Result<Judged> {
    let name = plugin.name.as_str();
    let fast = play(options, scenario, options.speed, None, cache_dir).await?;
    let verdict = fast
        .summary
        .verdicts
        .verdict_of_run(name, fast.finished, PLAY_LIMIT);
    let compiled = fast.compiled.iter().any(|compiled| compiled == name);
    let skipped = fast.skipped;
    let judged = |verdict, speed, check| Judged {
        scenario: scenario.to_owned(),
        verdict,
        speed,
        compiled,
        skipped,
        real_time_check: check,
    };
    let played = forewarn_simulator::load_scenario(scenario)?;
    if !may_be_timing(&verdict, &played, plugin.budget, options.speed) {
        return Ok(judged(verdict, options.speed, RealTimeCheck::NotNeeded));
    }
    let replay_for = replay_length(&played, &verdict);
    if replay_for > REPLAY_WITHIN {
        let check = RealTimeCheck::TooLong { takes: replay_for };
        return Ok(judged(verdict, options.speed, check));
    }
    let real = play(options, scenario, 1.0, Some(replay_for), cache_dir).await?;
    let real_verdict = real.summary.verdicts.verdict(name);
    let check = match real_verdict.is_failure() {
        true => RealTimeCheck::FailedToo,
        false => RealTimeCheck::PassedOnlyThere { fast: verdict },
    };
    Ok(judged(real_verdict, 1.0, check))
}

/// Whether a failure at `speed` may come from the plugin's own timing, which is real time:
/// a faster scenario shortens the notice, not the plugin's waits and retries. Still
/// deferring at NotBefore may; running out of budget may when the deadline, not the
/// plugin's own `budget`, cut the call short (a call's budget ends
/// [`BUDGET_ENDS_BEFORE_NOT_BEFORE`] before NotBefore). Not when the test runs at real time.
fn may_be_timing(verdict: &Verdict, scenario: &Scenario, budget: Duration, speed: f64) -> bool {
    if speed <= 1.0 {
        return false;
    }
    match verdict {
        Verdict::StillDeferringAtNotBefore { .. } => true,
        Verdict::OutOfBudget { .. } => {
            let shortest_notice = scenario
                .events
                .iter()
                .map(EventSpec::notice_or_default)
                .min()
                .unwrap_or_default();
            shortest_notice.div_f64(speed) < budget + BUDGET_ENDS_BEFORE_NOT_BEFORE
        }
        _ => false,
    }
}

/// How long a real-time replay must run to judge `verdict` again: until the scenario's
/// last event has started (a preparation verdict), else the whole scenario, plus a margin.
fn replay_length(scenario: &Scenario, verdict: &Verdict) -> Duration {
    let until_started = scenario
        .events
        .iter()
        .map(|event| {
            event.appear_at + event.notice_or_default() + event.starts_late_by.unwrap_or_default()
        })
        .max()
        .unwrap_or_default();
    let whole = match verdict.phase() {
        Some(CallPhase::Started | CallPhase::EndedAfterStart | CallPhase::EndedWithoutStart) => {
            scenario.longest_run()
        }
        _ => until_started,
    };
    whole + REPLAY_MARGIN
}

/// The longest one scenario plays at the test's speed; a run cut here fails
/// ([`Verdict::ScenarioUnfinished`]).
const PLAY_LIMIT: Duration = Duration::from_secs(300);

/// Plays one scenario at `speed`, stopping after `stop_after` when given.
async fn play(
    options: &TestOptions,
    scenario: &str,
    speed: f64,
    stop_after: Option<Duration>,
    cache_dir: &Path,
) -> anyhow::Result<demo::Played> {
    demo::play(&DemoOptions {
        scenario: scenario.to_owned(),
        speed,
        drain_seconds: 3,
        timeout: stop_after.unwrap_or(PLAY_LIMIT),
        json: options.json,
        extra_plugins: vec![options.plugin.clone()],
        bundled: options.with_bundled,
        quiet: !options.timeline,
        compile_cache: Some(cache_dir.to_path_buf()),
        actions: options.actions.clone(),
        skip_quiet_stretches: true,
    })
    .await
}

/// A real-time replay must end within this to be played (a Spot eviction's 30 s notice is;
/// a Reboot's 15 minutes is not): otherwise the verdict line says how to check.
const REPLAY_WITHIN: Duration = Duration::from_secs(120);

/// Beyond the last event's start, for the daemon to see it and the plugin's last answer.
const REPLAY_MARGIN: Duration = Duration::from_secs(5);

/// How long before NotBefore a call's budget ends (the policy's default safety margin).
const BUDGET_ENDS_BEFORE_NOT_BEFORE: Duration = Duration::from_secs(2);

/// The plugin under test, as the verdicts need it.
#[derive(Debug)]
struct Plugin {
    /// The name it is known by (and its verdicts are keyed by).
    name: String,
    /// Its budget per call (`budget` in the manifest).
    budget: Duration,
}

/// One scenario's final verdict and how it was reached.
#[derive(Debug, Clone)]
struct Judged {
    scenario: String,
    verdict: Verdict,
    /// The speed the verdict was reached at.
    speed: f64,
    /// Whether the scenario's daemon compiled the plugin itself rather than loading it
    /// from the run's compile cache (it should never have to).
    compiled: bool,
    /// The scenario time skipped while the daemon only waited (at the test's speed).
    skipped: Duration,
    real_time_check: RealTimeCheck,
}

/// Whether a failure at the test's speed was checked at real time, and what came of it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
enum RealTimeCheck {
    /// Passed at the test's speed, or failed for a reason timing does not change.
    NotNeeded,
    /// Failed at the test's speed, passed at real time: the verdict is the real-time one.
    PassedOnlyThere {
        /// The verdict at the test's speed.
        fast: Verdict,
    },
    /// Failed at real time too.
    FailedToo,
    /// Not replayed: at real time it would take this long.
    TooLong {
        #[serde(with = "humantime_serde")]
        takes: Duration,
    },
}

/// One scenario's result, printed as one line (a JSON object with `--json`).
#[derive(Debug, Clone, Serialize)]
struct ScenarioVerdict<'a> {
    kind: &'static str,
    plugin: &'a str,
    scenario: &'a str,
    speed: f64,
    compiled: bool,
    /// Scenario seconds skipped while the daemon only waited.
    skipped_scenario_s: f64,
    #[serde(flatten)]
    verdict: &'a Verdict,
    #[serde(skip_serializing_if = "RealTimeCheck::is_not_needed")]
    real_time_check: &'a RealTimeCheck,
}

impl RealTimeCheck {
    fn is_not_needed(&self) -> bool {
        matches!(self, RealTimeCheck::NotNeeded)
    }

    /// What the check adds to the verdict line, for people.
    fn describe(&self, test_speed: f64, scenario: &str) -> String {
        match self {
            RealTimeCheck::NotNeeded => String::new(),
            RealTimeCheck::PassedOnlyThere { fast } => format!(
                " at --speed 1; at {test_speed}x it {}: the plugin's own timing (its sleeps, \
                 waits and budget) is real time, which the scenario's faster clock does not \
                 shorten",
                fast.describe().replacen("FAILED", "failed", 1)
            ),
            RealTimeCheck::FailedToo => " (at --speed 1 too)".to_owned(),
            RealTimeCheck::TooLong { takes } => format!(
                "; at {test_speed}x the plugin's own timing is real time, so this may pass in \
                 a daemon: check with `--scenario {scenario} --speed 1` (about {} s)",
                takes.as_secs()
            ),
        }
    }
}

fn print_verdict(options: &TestOptions, plugin: &str, judged: &Judged) {
    let line = if options.json {
        let line = ScenarioVerdict {
            kind: "verdict",
            plugin,
            scenario: &judged.scenario,
            speed: judged.speed,
            compiled: judged.compiled,
            skipped_scenario_s: judged.skipped.as_secs_f64(),
            verdict: &judged.verdict,
            real_time_check: &judged.real_time_check,
        };
        serde_json::to_string(&line).unwrap_or_default()
    } else {
        format!(
            "{plugin} on {:<28} {}{}",
            judged.scenario,
            judged.verdict.describe(),
            judged
                .real_time_check
                .describe(options.speed, &judged.scenario)
        )
    };
    demo::print_line(&line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};
    use forewarn_imds::EventId;

    #[test]
    fn one_scenario_with_its_timeline_or_every_one_that_ends_without() {
        assert_consistent::<Args>();
        let options = parse::<Args>(&["p.wasm", "--config", "port=8080"])
            .expect("parses")
            .options()
            .expect("no file to read");
        assert_eq!(options.scenarios, [DEFAULT_SCENARIO]);
        assert_eq!(options.speed, DEFAULT_SPEED);
        assert_eq!(options.plugin.config, [("port".into(), "8080".into())]);
        assert!(options.timeline);
        let options = parse::<Args>(&["p.wasm", "--all-scenarios"])
            .expect("parses")
            .options()
            .expect("no file to read");
        assert!(!options.timeline);
        assert!(options.scenarios.len() > 1, "{:?}", options.scenarios);
        assert!(!options.scenarios.iter().any(|name| name == "idle"));
        let error =
            parse::<Args>(&["p.wasm", "--all-scenarios", "--scenario", "reboot"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn a_daemon_config_gives_its_actions_and_a_wrong_one_names_the_fix() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("forewarn.toml");
        std::fs::write(&file, "[actions.stop-app]\nargv = [\"true\"]\n").expect("write");
        let file_arg = file.to_str().expect("a UTF-8 path");
        let options = parse::<Args>(&["p.wasm", "--daemon-config", file_arg])
            .expect("parses")
            .options()
            .expect("a valid config");
        let actions = options.actions.expect("the file's actions");
        assert_eq!(actions.keys().collect::<Vec<_>>(), ["stop-app"]);
        assert_eq!(actions["stop-app"].argv, ["true"]);
        std::fs::write(&file, "[actions.stop-app]\nargv = \"true\"\n").expect("write");
        let error = parse::<Args>(&["p.wasm", "--daemon-config", file_arg])
            .expect("parses")
            .options()
            .expect_err("argv must be a list");
        let message = format!("{error:#}");
        assert!(
            message.contains("--daemon-config") && message.contains("forewarn config check"),
            "{message}"
        );
    }

    fn scenario(name: &str) -> Scenario {
        forewarn_simulator::load_scenario(name).expect("a built-in scenario")
    }

    fn still_deferring() -> Verdict {
        Verdict::StillDeferringAtNotBefore {
            event_id: EventId::from("e1"),
            reason: "not yet".into(),
        }
    }

    fn out_of_budget(phase: CallPhase) -> Verdict {
        Verdict::OutOfBudget {
            event_id: EventId::from("e1"),
            phase,
            reason: "cut off".into(),
        }
    }

    #[test]
    fn only_failures_that_real_time_could_undo_are_played_again() {
        let spot = scenario("spot-preemption");
        let budget = Duration::from_secs(10);
        assert!(may_be_timing(&still_deferring(), &spot, budget, 60.0));
        assert!(!may_be_timing(&still_deferring(), &spot, budget, 1.0));
        // At 60x the 30 s notice is half a second: the deadline cut the 10 s budget.
        assert!(may_be_timing(
            &out_of_budget(CallPhase::Prepare),
            &spot,
            budget,
            60.0
        ));
        // At 2x it is 15 s, more than the 300 ms budget and the margin: the plugin's own.
        let short = Duration::from_millis(300);
        assert!(!may_be_timing(
            &out_of_budget(CallPhase::Prepare),
            &spot,
            short,
            2.0
        ));
        let trapped = Verdict::Trapped {
            event_id: EventId::from("e1"),
            phase: CallPhase::Prepare,
            reason: "panic".into(),
        };
        assert!(!may_be_timing(&trapped, &spot, budget, 60.0));
    }

    #[test]
    fn a_replay_runs_until_the_last_start_or_through_recovery() {
        let spot = scenario("spot-preemption");
        // Appears at 5 s with 30 s notice: started at 35 s.
        assert_eq!(
            replay_length(&spot, &still_deferring()),
            Duration::from_secs(35) + REPLAY_MARGIN
        );
        // Recovery needs the whole run: 35 s + 2 min, then 10 s of end_after.
        assert_eq!(
            replay_length(&spot, &out_of_budget(CallPhase::EndedAfterStart)),
            Duration::from_secs(35 + 120 + 10) + REPLAY_MARGIN
        );
        assert!(replay_length(&spot, &still_deferring()) <= REPLAY_WITHIN);
        let reboot = scenario(DEFAULT_SCENARIO);
        assert!(
            replay_length(&reboot, &still_deferring()) > REPLAY_WITHIN,
            "a Reboot's 15 minutes are too long to replay"
        );
    }

    #[test]
    fn the_verdict_line_says_what_real_time_changed_and_how_to_check() {
        let passed = RealTimeCheck::PassedOnlyThere {
            fast: still_deferring(),
        };
        let text = passed.describe(60.0, "spot-preemption");
        assert!(
            text.starts_with(" at --speed 1; at 60x it failed: still deferring"),
            "{text}"
        );
        assert!(text.contains("real time"), "{text}");
        let long = RealTimeCheck::TooLong {
            takes: Duration::from_secs(905),
        };
        let text = long.describe(60.0, "full-lifecycle");
        assert!(
            text.contains("`--scenario full-lifecycle --speed 1` (about 905 s)"),
            "{text}"
        );
    }
}
