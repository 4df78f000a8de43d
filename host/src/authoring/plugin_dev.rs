//! `forewarn plugin dev [DIR]`: the author's loop in one command. A local daemon runs against
//! the simulator (its console to make events with, the daemon's status page to watch the
//! plugin's decisions); the project is built with its language's own build command, checked
//! as `plugin check` checks it, loaded into that daemon through its plugin directory (the hot
//! reload an operator's VM does), and tested against the scenarios the author picks; then
//! again after every edit, until Ctrl-C. A build that fails leaves the last good one live.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::authoring::dev_daemon::DevDaemon;
use crate::authoring::plugin_dev_project::{Build, DevProject, Fingerprint};
use crate::authoring::plugin_test::{self, TestOptions};
use crate::cli::plugin_files::PluginFile;
use forewarn_manifest::PluginManifest;
use forewarn_supply::component_check::{ComponentRefused, check_component};

/// How long the project must be still after a change before the next round starts (an
/// editor's save is several writes; a formatter may follow it).
const QUIET: Duration = Duration::from_millis(300);

/// `forewarn plugin dev`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin project's folder (the one `plugin new` wrote, with NAME.toml in it).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// A scenario to test after each build: a built-in name (`forewarn simulate --list`) or a
    /// scenario file (repeatable). Default: full-lifecycle.
    #[arg(long = "scenario", value_name = "SCENARIO")]
    scenarios: Vec<String>,
    /// Test against every built-in scenario after each build.
    #[arg(long, conflicts_with = "scenarios")]
    all_scenarios: bool,
    /// Build, check and load only; no tests.
    #[arg(long, conflicts_with_all = ["scenarios", "all_scenarios"])]
    no_test: bool,
    /// The build command when it is not the language's own (run by the shell in DIR; it
    /// must write NAME.wasm there).
    #[arg(long, value_name = "COMMAND")]
    build: Option<String>,
    /// Where the dev daemon's status page (and /status, /metrics) listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where the simulated IMDS and its console listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    console_listen: SocketAddr,
    /// A daemon config whose `[actions]` the plugin's `run-action` calls run, in the dev
    /// daemon and the tests (default: the demo workload's stop and start).
    #[arg(long, value_name = "FILE")]
    daemon_config: Option<PathBuf>,
}

/// What one round ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// The build failed: the last good build stays live.
    BuildFailed,
    /// Built, but not a plugin the daemon would load.
    CheckFailed,
    /// Live in the dev daemon; tests passed (or were not asked for).
    Live,
    /// Live in the dev daemon; a scenario failed.
    LiveTestsFailed,
    /// The round could not finish (the build command cannot run, a test could not be set
    /// up): said, and the next edit starts another.
    Unfinished,
}

/// Runs the loop until Ctrl-C; forewarn's own errors (no project, the daemon cannot start)
/// end it with exit 2, as `plugin test`'s do.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    match dev(args).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            eprintln!("forewarn: {error:#}");
            Ok(ExitCode::from(plugin_test::EXIT_ERROR))
        }
    }
}

async fn dev(args: Args) -> anyhow::Result<()> {
    let project = DevProject::find(&args.dir, args.build.is_some())?;
    let build = project.build(args.build.as_deref());
    let actions = match &args.daemon_config {
        Some(path) => Some(plugin_test::daemon_config_actions(path)?),
        None => None,
    };
    let scenarios = scenarios(&args);
    for scenario in &scenarios {
        forewarn_simulator::load_scenario(scenario).with_context(|| {
            format!(
                "cannot test against `--scenario {scenario}`: name a built-in one (`forewarn \
                 simulate --list`) or a scenario file"
            )
        })?;
    }
    let daemon = DevDaemon::start(args.listen, args.console_listen, actions.clone()).await?;
    print_header(&project, &build, &scenarios, &daemon);
    let (changes_in, mut changes) = mpsc::unbounded_channel();
    let _watcher = watch(&project, changes_in)?;
    let workdir = tempfile::tempdir().context("cannot create a folder for the build log")?;
    let log = workdir.path().join("build.log");
    let mut round = 1;
    loop {
        let sources = project.fingerprint();
        let ended = match one_round(&project, &build, &scenarios, &actions, &daemon, &log).await {
            Ok(ended) => ended,
            Err(error) => {
                say(&format!("round {round} could not finish: {error:#}"));
                Round::Unfinished
            }
        };
        say(&format!(
            "round {round}: {}; waiting for an edit (Ctrl-C ends)",
            describe(ended)
        ));
        let edited = tokio::select! {
            edited = next_edit(&project, &sources, &mut changes) => edited,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(edited) = edited else {
            break;
        };
        round += 1;
        say(&format!("round {round}: {edited}"));
    }
    daemon.shutdown().await;
    Ok(())
}

/// The scenarios each round tests against.
fn scenarios(args: &Args) -> Vec<String> {
    if args.no_test {
        return Vec::new();
    }
    if args.all_scenarios {
        return plugin_test::ending_builtin_scenarios();
    }
    match args.scenarios.is_empty() {
        true => vec![plugin_test::DEFAULT_SCENARIO.to_owned()],
        false => args.scenarios.clone(),
    }
}

fn describe(round: Round) -> &'static str {
    match round {
        Round::BuildFailed => "the build failed; the dev daemon keeps the last good build",
        Round::CheckFailed => "not a usable plugin; the dev daemon keeps the last good build",
        Round::Live => "live in the dev daemon",
        Round::LiveTestsFailed => "live in the dev daemon, but a scenario failed",
        Round::Unfinished => "not finished; the dev daemon keeps the last good build",
    }
}

fn print_header(project: &DevProject, build: &Build, scenarios: &[String], daemon: &DevDaemon) {
    let lang = project
        .lang
        .map_or_else(|| "own build".to_owned(), |lang| lang.to_string());
    let tests = match scenarios.is_empty() {
        true => "none (--no-test)".to_owned(),
        false => format!(
            "{} at {}x",
            scenarios.join(", "),
            plugin_test::DEFAULT_SPEED
        ),
    };
    say(&format!(
        "forewarn plugin dev: {} ({lang}) in {}\n  build:   {}\n  tests:   {tests}\n  console: {}/  (the simulated IMDS: make events, watch requests)\n  status:  {}/  (the dev daemon: the plugin's decisions, events, outcome records)",
        project.name,
        project.dir.display(),
        build.describe(),
        daemon.console_url(),
        daemon.status_url(),
    ));
}

/// Build, check, load, test.
async fn one_round(
    project: &DevProject,
    build: &Build,
    scenarios: &[String],
    actions: &Option<std::collections::BTreeMap<String, forewarn_daemon::config::ActionConfig>>,
    daemon: &DevDaemon,
    log: &Path,
) -> anyhow::Result<Round> {
    say(&format!("build: {}", build.describe()));
    let built = {
        let (build, project, log) = (build.clone(), project.clone(), log.to_path_buf());
        tokio::task::spawn_blocking(move || build.run(&project, &log))
            .await
            .context("the build task failed")?
    };
    let built = built.with_context(|| format!("cannot run `{}`", build.describe()))?;
    if !built.succeeded {
        say(&format!(
            "build failed after {:.1} s:",
            built.took.as_secs_f64()
        ));
        for line in &built.summary {
            say(&format!("  | {line}"));
        }
        say(&format!("  (the whole output: {})", log.display()));
        return Ok(Round::BuildFailed);
    }
    let bytes = std::fs::read(project.wasm())
        .with_context(|| format!("cannot read {}", project.wasm().display()))?;
    say(&format!(
        "built {}.wasm ({} KB) in {:.1} s",
        project.name,
        bytes.len() / 1024,
        built.took.as_secs_f64()
    ));
    let manifest = match PluginManifest::load(&project.manifest()) {
        Ok(manifest) => manifest,
        Err(error) => {
            say(&format!("{}: {error}", project.manifest().display()));
            return Ok(Round::CheckFailed);
        }
    };
    if let Err(problem) = check(&project.name, &bytes, &manifest).await? {
        say(&format!("check: {problem}"));
        return Ok(Round::CheckFailed);
    }
    say("check: a valid forewarn plugin");
    let hash = hex::encode(Sha256::digest(&bytes));
    match daemon
        .install(&project.name, &bytes, &project.manifest(), &hash)
        .await?
    {
        Ok(version) => say(&format!("loaded into the dev daemon: {version}")),
        Err(problem) => {
            say(&format!("the dev daemon did not load it: {problem}"));
            return Ok(Round::CheckFailed);
        }
    }
    if scenarios.is_empty() {
        return Ok(Round::Live);
    }
    let tested = plugin_test::test_plugin(TestOptions {
        plugin: PluginFile {
            wasm: project.wasm(),
            manifest: Some(project.manifest()),
            config: Vec::new(),
        },
        scenarios: scenarios.to_vec(),
        speed: plugin_test::DEFAULT_SPEED,
        with_bundled: false,
        json: false,
        timeline: false,
        jobs: usize::from(plugin_test::DEFAULT_JOBS),
        actions: actions.clone(),
    })
    .await?;
    Ok(match tested {
        plugin_test::TestOutcome::Passed => Round::Live,
        plugin_test::TestOutcome::PluginFailed => Round::LiveTestsFailed,
    })
}

/// `plugin check`'s checks, off the async threads: Ok(Err(problem)) when not usable.
async fn check(
    name: &str,
    bytes: &[u8],
    manifest: &PluginManifest,
) -> anyhow::Result<Result<(), ComponentRefused>> {
    let (name, bytes, manifest) = (name.to_owned(), bytes.to_vec(), manifest.clone());
    let checked =
        tokio::task::spawn_blocking(move || check_component(&name, &bytes, &manifest).map(|_| ()))
            .await
            .context("the check task failed")?;
    Ok(checked)
}

/// Watches the project folder; each changed source file (not build output) goes to
/// `changes`.
fn watch(
    project: &DevProject,
    changes: mpsc::UnboundedSender<PathBuf>,
) -> anyhow::Result<notify::RecommendedWatcher> {
    use notify::Watcher;
    let filter = project.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            return;
        };
        if matches!(event.kind, notify::EventKind::Access(_)) {
            return;
        }
        for path in event.paths {
            if filter.is_source_change(&path) {
                let _ignored = changes.send(path);
            }
        }
    })
    .context("cannot watch the project folder for changes")?;
    watcher
        .watch(&project.dir, notify::RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch {} for changes", project.dir.display()))?;
    Ok(watcher)
}

/// What was edited since the sources were `sources` ("src/lib.rs changed"), once the
/// project was still for [`QUIET`] (an editor's save is several writes); None when the
/// watcher ended. A change that leaves every source as it was (a build's temporary file) is
/// no edit.
async fn next_edit(
    project: &DevProject,
    sources: &Fingerprint,
    changes: &mut mpsc::UnboundedReceiver<PathBuf>,
) -> Option<String> {
    loop {
        changes.recv().await?;
        while let Ok(Some(_)) = tokio::time::timeout(QUIET, changes.recv()).await {}
        let changed = project.fingerprint().changed_since(sources);
        if let Some(first) = changed.first() {
            let shown = first.strip_prefix(&project.dir).unwrap_or(first).display();
            return Some(match changed.len() {
                1 => format!("{shown} changed"),
                more => format!("{shown} and {} more changed", more - 1),
            });
        }
    }
}

/// One line of the loop's own output.
fn say(text: &str) {
    crate::cli::demo::print_line(&format!("dev | {text}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn runs_in_the_current_folder_with_the_default_scenario() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&[]).expect("parses");
        assert_eq!(args.dir, PathBuf::from("."));
        assert_eq!(scenarios(&args), [plugin_test::DEFAULT_SCENARIO]);
        let args = parse::<Args>(&["p", "--scenario", "a", "--scenario", "b"]).expect("parses");
        assert_eq!(scenarios(&args), ["a", "b"]);
        let args = parse::<Args>(&["--no-test"]).expect("parses");
        assert!(scenarios(&args).is_empty());
        let args = parse::<Args>(&["--all-scenarios"]).expect("parses");
        assert!(scenarios(&args).len() > 10, "{:?}", scenarios(&args));
        assert!(parse::<Args>(&["--no-test", "--scenario", "a"]).is_err());
    }
}
