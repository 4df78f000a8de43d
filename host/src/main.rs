//! The `forewarn` command line: the clap types and one dispatch line a command. Each
//! command lives in `forewarn_host::cli::<command>` (an author's in
//! `forewarn_host::authoring::<command>`): its `Args` and its `run`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use forewarn_daemon::ops::malloc_arenas;
use forewarn_host::cli::logging::{LogFormat, LogTarget};
use forewarn_host::{authoring, cli};

/// forewarn: prepares this VM for Azure maintenance through sandboxed WebAssembly plugins.
#[derive(Parser)]
#[command(name = "forewarn", version, about, long_about = None)]
struct Cli {
    /// Log format: human-readable text, or one JSON object per line (for journald and collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: poll IMDS, call plugins, approve events.
    Run(cli::run::Args),
    #[cfg(feature = "simulator")]
    /// Run the built-in simulator and the daemon with the bundled plugins, and print what happens.
    Demo(cli::demo::Args),
    #[cfg(feature = "simulator")]
    /// Serve a simulated IMDS Scheduled Events endpoint that plays a scenario.
    Simulate(cli::simulate::Args),
    /// Work with plugin components.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// The plugin SDKs this forewarn carries: write one out, or run a step of a C plugin's build.
    #[command(subcommand)]
    Sdk(SdkCommand),
    /// Show what the running daemon is doing: events, plugin decisions, plugins, IMDS polls.
    Status(cli::status_command::Args),
    /// What each event cost: the outcome records (announced, done, measured impact, verdict).
    #[command(subcommand)]
    Events(EventsCommand),
    /// Rehearse maintenance for real: ask Azure to evict, restart or redeploy this VM, and
    /// follow the event to its outcome record.
    Drill(cli::drill::Args),
    /// The VMs coordinating through etcd with this one (`[coordination]`).
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Print the example configuration, or check a configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Install, remove, start or stop the Windows service.
    Service(cli::service::Args),
    #[cfg(feature = "simulator")]
    /// The demo's workload (its app process, and the stop/start actions); used by `demo`.
    #[command(subcommand, hide = true)]
    DemoWorkload(cli::demo_workload::WorkloadCommand),
    /// Compile a plugin component (stdin) to the daemon's compiled form (stdout); the daemon
    /// runs this in a child so the compiler never stays in its memory.
    #[command(hide = true)]
    CompilePlugin(cli::compile_plugin::Args),
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Check that a file is a valid forewarn plugin component and show its imports and exports.
    Check(cli::plugin_check::Args),
    #[cfg(feature = "simulator")]
    /// The author's loop: build, check, load into a local daemon against the simulator, and
    /// test, again after every edit (the console and the status page show the decisions).
    Dev(authoring::plugin_dev::Args),
    /// Start a plugin project from a template: `plugin new NAME --lang rust|c|python|js
    /// [--template minimal|http-drain] [DIR]`; `plugin new --list` lists the templates.
    New(authoring::plugin_new::Args),
    #[cfg(feature = "simulator")]
    /// Run a plugin against the simulator: exit 0 when it answered in time in every scenario,
    /// 1 when it trapped, ran out of budget or memory, or still deferred at NotBefore, 2 when
    /// it could not be tested.
    Test(authoring::plugin_test::Args),
    /// Publish a plugin to an OCI registry (a Wasm OCI artifact), signed with an SSH key.
    Push(cli::plugin_push::Args),
    /// Install a plugin from a registry or an OCI layout: verified, checked, consented to.
    Install(cli::plugin_install::Args),
    /// Upgrade an installed plugin; asks again only when its grants widen.
    Upgrade(cli::plugin_upgrade::Args),
    /// Put back the version of a plugin installed before the last install or upgrade.
    Rollback(cli::plugin_rollback::Args),
    /// Remove a plugin and its plugins.lock entry.
    Remove(cli::plugin_remove::Args),
    /// List the plugin directory with each plugin's provenance (source, digest, signer, grants).
    List(cli::plugin_list::Args),
    /// Copy a plugin and its signatures from a registry into an OCI layout directory.
    Pull(cli::plugin_pull::Args),
    /// Write the plugins bundled in this binary (NAME.wasm and NAME.toml) into a directory.
    ExportBundled(cli::plugin_export_bundled::Args),
}

#[derive(Subcommand)]
enum SdkCommand {
    /// Write the SDK of a language, as its registry package, into DIR (for vendoring).
    Export(authoring::sdk_export::Args),
    /// Wrap a core wasm module built by clang into a plugin component (the C SDK's last step).
    ComponentNew(authoring::sdk_component_new::Args),
}

#[derive(Subcommand)]
enum FleetCommand {
    /// List every VM of the coordination group: publishing or gone, its last IMDS poll, its
    /// events with its stage on each, and what holds it.
    Status(cli::fleet_status::Args),
}

#[derive(Subcommand)]
enum EventsCommand {
    /// One line per event the daemon keeps a record of: first seen, id, type, stage, verdict.
    List(cli::events_list::Args),
    /// One event's outcome record: what IMDS announced, what forewarn did, what happened.
    Show(cli::events_show::Args),
    /// The records as JSON Lines, or as CloudEvents 1.0 (`--format cloudevents`).
    Export(cli::events_export::Args),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print a fully commented configuration with every option at its default.
    Example(cli::config_example::Args),
    /// Validate a configuration file; errors name the line and the key.
    Check(cli::config_check::Args),
}

fn main() -> ExitCode {
    let parsed = Cli::parse();
    if let Command::CompilePlugin(args) = parsed.command {
        // Before logging and the async runtime: the child does one thing and exits.
        return report(cli::compile_plugin::run(args));
    }
    if let Command::Service(args) = parsed.command {
        // Its own process set-up: the Service Control Manager runs the daemon on its thread.
        return report(cli::service::run(args, parsed.log_format));
    }
    // Before any thread exists: the async runtime below starts the first ones.
    malloc_arenas::limit();
    cli::logging::init(parsed.command.log_target(parsed.log_format));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("forewarn: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let format = parsed.log_format;
    let outcome = runtime.block_on(dispatch(parsed.command));
    outcome.unwrap_or_else(|error| {
        report_fatal(format, &error);
        ExitCode::FAILURE
    })
}

impl Command {
    /// `demo` and `plugin test` print a timeline, and the log joins it.
    fn log_target(&self, format: LogFormat) -> LogTarget {
        match self {
            #[cfg(feature = "simulator")]
            Command::Demo(_) | Command::Plugin(PluginCommand::Test(_) | PluginCommand::Dev(_)) => {
                LogTarget::Timeline
            }
            _ => LogTarget::Stderr(format),
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => cli::run::run(args).await,
        #[cfg(feature = "simulator")]
        Command::Demo(args) => cli::demo::run(args).await,
        #[cfg(feature = "simulator")]
        Command::Simulate(args) => cli::simulate::run(args).await,
        Command::Plugin(PluginCommand::Check(args)) => cli::plugin_check::run(args).await,
        Command::Plugin(PluginCommand::New(args)) => authoring::plugin_new::run(args).await,
        #[cfg(feature = "simulator")]
        Command::Plugin(PluginCommand::Dev(args)) => authoring::plugin_dev::run(args).await,
        #[cfg(feature = "simulator")]
        Command::Plugin(PluginCommand::Test(args)) => authoring::plugin_test::run(args).await,
        Command::Plugin(PluginCommand::Push(args)) => cli::plugin_push::run(args).await,
        Command::Plugin(PluginCommand::Install(args)) => cli::plugin_install::run(args).await,
        Command::Plugin(PluginCommand::Upgrade(args)) => cli::plugin_upgrade::run(args).await,
        Command::Plugin(PluginCommand::Rollback(args)) => cli::plugin_rollback::run(args).await,
        Command::Plugin(PluginCommand::Remove(args)) => cli::plugin_remove::run(args).await,
        Command::Plugin(PluginCommand::List(args)) => cli::plugin_list::run(args).await,
        Command::Plugin(PluginCommand::Pull(args)) => cli::plugin_pull::run(args).await,
        Command::Plugin(PluginCommand::ExportBundled(args)) => {
            cli::plugin_export_bundled::run(args).await
        }
        Command::Sdk(SdkCommand::Export(args)) => authoring::sdk_export::run(args).await,
        Command::Sdk(SdkCommand::ComponentNew(args)) => {
            authoring::sdk_component_new::run(args).await
        }
        Command::Status(args) => cli::status_command::run(args).await,
        Command::Fleet(FleetCommand::Status(args)) => cli::fleet_status::run(args).await,
        Command::Drill(args) => cli::drill::run(args).await,
        Command::Events(EventsCommand::List(args)) => cli::events_list::run(args).await,
        Command::Events(EventsCommand::Show(args)) => cli::events_show::run(args).await,
        Command::Events(EventsCommand::Export(args)) => cli::events_export::run(args).await,
        Command::Config(ConfigCommand::Example(args)) => cli::config_example::run(args).await,
        Command::Config(ConfigCommand::Check(args)) => cli::config_check::run(args).await,
        #[cfg(feature = "simulator")]
        Command::DemoWorkload(command) => cli::demo_workload::run(command).await,
        Command::CompilePlugin(args) => cli::compile_plugin::run(args),
        Command::Service(args) => cli::service::run(args, LogFormat::Text),
    }
}

/// Says why forewarn stops: one JSON log line with `--log-format json` (collectors parse
/// every line), else the error and its causes on stderr.
fn report_fatal(format: LogFormat, error: &anyhow::Error) {
    match format {
        LogFormat::Json => tracing::error!(error = %format!("{error:#}"), "forewarn stopped"),
        LogFormat::Text => eprintln!("forewarn: {error:#}"),
    }
}

/// The exit code, or `forewarn: ERROR` (with its causes) and exit 1.
fn report(outcome: anyhow::Result<ExitCode>) -> ExitCode {
    outcome.unwrap_or_else(|error| {
        eprintln!("forewarn: {error:#}");
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// `forewarn --help` says what each visible command does, in its own words (a doc line
    /// once slipped onto the wrong variant and `service` read as the demo's workload).
    #[test]
    fn each_command_s_help_is_its_own() {
        let cli = Cli::command();
        let about = |name: &str| {
            let command = cli.find_subcommand(name).expect("a subcommand");
            command
                .get_about()
                .map(ToString::to_string)
                .unwrap_or_default()
        };
        assert_eq!(
            about("service"),
            "Install, remove, start or stop the Windows service"
        );
        let visible: Vec<_> = cli.get_subcommands().filter(|c| !c.is_hide_set()).collect();
        for command in visible {
            let about = command
                .get_about()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                !about.is_empty() && !about.contains("used by `demo`"),
                "`forewarn {}` says {about:?}",
                command.get_name()
            );
        }
    }

    #[cfg(feature = "simulator")]
    #[test]
    fn demo_and_plugin_test_log_into_their_timeline() {
        let target = |argv: &[&str]| {
            let parsed = Cli::try_parse_from(argv).expect("parses");
            parsed.command.log_target(parsed.log_format)
        };
        assert_eq!(target(&["forewarn", "demo"]), LogTarget::Timeline);
        assert_eq!(
            target(&["forewarn", "plugin", "test", "p.wasm"]),
            LogTarget::Timeline
        );
        assert_eq!(
            target(&["forewarn", "run", "--log-format", "json"]),
            LogTarget::Stderr(LogFormat::Json)
        );
    }
}
