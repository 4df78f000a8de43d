//! The `forewarn` command line: `run` the daemon, `demo` it against the simulator,
//! `simulate` IMDS on its own, and `plugin check` a component.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use forewarn_host::cli::demo;
use forewarn_host::config::{Config, DEFAULT_CONFIG_PATH};
use forewarn_host::daemon::wiring as app;
use forewarn_host::ops::{malloc_arenas, status};
use forewarn_host::pipeline::timeline;
use tokio_util::sync::CancellationToken;

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

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: poll IMDS, call plugins, approve events.
    Run(RunArgs),
    /// Run the built-in simulator and the daemon with the bundled plugins, and print what happens.
    Demo(DemoArgs),
    /// Serve a simulated IMDS Scheduled Events endpoint that plays a scenario.
    Simulate(SimulateArgs),
    /// Work with plugin components.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Show what the running daemon is doing: events, plugin decisions, plugins, IMDS polls.
    Status(StatusArgs),
    /// Print the example configuration, or check a configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The demo's workload (its app process, and the stop/start actions); used by `demo`.
    #[command(subcommand, hide = true)]
    DemoWorkload(DemoWorkloadCommand),
    /// Compile a plugin component (stdin) to the daemon's compiled form (stdout); the daemon
    /// runs this in a child so the compiler never stays in its memory.
    #[command(hide = true)]
    CompilePlugin {
        /// The daemon engine's instance allocation (`pooling` or `on-demand`).
        #[arg(long, default_value = "pooling")]
        allocation: String,
    },
}

#[derive(Subcommand)]
enum DemoWorkloadCommand {
    /// Run the demo's app until SIGTERM.
    App,
    /// Ask the demo workload to stop its app.
    Stop {
        #[arg(long)]
        control: String,
    },
    /// Ask the demo workload to start its app.
    Start {
        #[arg(long)]
        control: String,
    },
}

#[derive(clap::Args)]
struct StatusArgs {
    /// The daemon's admin endpoint, as `[admin] listen` writes it (`127.0.0.1:9555`) or as a
    /// URL (`http://127.0.0.1:9555`). Default: `[admin] listen` from the config file.
    #[arg(long)]
    admin: Option<String>,
    /// Config file to read the admin address from. Default: /etc/forewarn/forewarn.toml if it exists.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Print the status as JSON (for scripts) instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print a fully commented configuration with every option at its default.
    Example,
    /// Validate a configuration file; errors name the line and the key.
    Check {
        /// The TOML file.
        path: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Config file (TOML). Default: /etc/forewarn/forewarn.toml if it exists, else built-in defaults.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// IMDS base URL (overrides `imds.url`).
    #[arg(long)]
    imds_url: Option<String>,
    /// Plugin directory (overrides `plugin-dir`).
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// State directory for the journal, plugin state and compile cache (overrides `state-dir`).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// This VM's name as IMDS lists it in Resources (overrides `vm-name`).
    #[arg(long)]
    vm_name: Option<String>,
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Scenario: a built-in name (see `forewarn simulate --list`) or a scenario file.
    #[arg(long, default_value = forewarn_simulator::DEFAULT_SCENARIO)]
    scenario: String,
    /// How many times faster than real time the scenario runs.
    #[arg(long, default_value_t = 10.0)]
    speed: f64,
    /// lb-drain's drain window in seconds (real time).
    #[arg(long, default_value_t = 3)]
    drain_seconds: u64,
    /// Print the timeline as JSON lines (one object per entry, a summary last).
    #[arg(long)]
    json: bool,
    /// Also run the plugins in DIR (each NAME.wasm with its NAME.toml, if present).
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,
}

#[derive(clap::Args)]
struct PluginTestArgs {
    /// The plugin component to test.
    plugin: PathBuf,
    /// Its manifest. Default: NAME.toml beside the component if present, else the defaults.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Scenario: a built-in name (see `forewarn simulate --list`) or a scenario file.
    #[arg(long, default_value = forewarn_host::cli::plugin_test::DEFAULT_SCENARIO, conflicts_with = "all_scenarios")]
    scenario: String,
    /// How many times faster than real time the scenario runs.
    #[arg(long, default_value_t = forewarn_host::cli::plugin_test::DEFAULT_SPEED)]
    speed: f64,
    /// Set or replace a `[config]` value of the manifest (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = forewarn_host::cli::plugin_files::parse_config_pair)]
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

#[derive(clap::Args)]
struct SimulateArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Scenario: a built-in name or a path to a TOML or JSON scenario file.
    #[arg(long, default_value = forewarn_simulator::DEFAULT_SCENARIO)]
    scenario: String,
    /// How many times faster than real time the scenario runs.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Keep serving after the scenario is over (until Ctrl-C).
    #[arg(long)]
    stay: bool,
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Check that a file is a valid forewarn plugin component and show its imports and exports.
    Check {
        /// The .wasm component.
        path: PathBuf,
    },
    /// Start a plugin project from a template: `plugin new NAME --lang rust|c|python|js [DIR]`.
    New(NewArgs),
    /// Run a plugin against the simulator: exit 0 when it answered in time in every scenario,
    /// 1 when it trapped, ran out of budget or memory, or still deferred at NotBefore, 2 when
    /// it could not be tested.
    Test(PluginTestArgs),
    /// Write the plugins bundled in this binary (NAME.wasm and NAME.toml) into a directory.
    ExportBundled {
        /// Where to write them (created if missing).
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct NewArgs {
    /// The plugin's name: lower-case kebab-case (`[a-z][a-z0-9-]*`, at most 48 characters).
    name: String,
    /// The language of the template.
    #[arg(long, value_enum)]
    lang: LangArg,
    /// Where to write the project (must be missing or empty). Default: ./NAME.
    dir: Option<PathBuf>,
    /// The `sdk/` directory of a forewarn checkout. Default: the checkout this forewarn was
    /// built from, when it still exists.
    #[arg(long)]
    sdk: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LangArg {
    Rust,
    C,
    Python,
    Js,
}

impl From<LangArg> for forewarn_host::plugins::templates::Lang {
    fn from(lang: LangArg) -> Self {
        use forewarn_host::plugins::templates::Lang;
        match lang {
            LangArg::Rust => Lang::Rust,
            LangArg::C => Lang::C,
            LangArg::Python => Lang::Python,
            LangArg::Js => Lang::Js,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::CompilePlugin { allocation } = &cli.command {
        // Before logging and the async runtime: the child does one thing and exits (its
        // parallel compile keeps glibc's default arenas).
        return compile_plugin(allocation);
    }
    // Before any thread exists: the async runtime below starts the first ones.
    malloc_arenas::limit();
    let demo_like = matches!(
        cli.command,
        Command::Demo(_) | Command::Plugin(PluginCommand::Test(_))
    );
    init_logging(cli.log_format, demo_like);
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
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("forewarn: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Demo(args) => demo::run(demo::DemoOptions {
            scenario: args.scenario,
            speed: args.speed,
            drain_seconds: args.drain_seconds,
            timeout: Duration::from_secs(300),
            json: args.json,
            extra_plugins: match &args.plugins {
                Some(dir) => forewarn_host::cli::plugin_files::in_dir(dir)?,
                None => Vec::new(),
            },
            bundled: true,
            quiet: false,
        })
        .await
        .map(|_summary| ExitCode::SUCCESS),
        Command::Simulate(args) => simulate(args).await.map(|()| ExitCode::SUCCESS),
        Command::Plugin(PluginCommand::Check { path }) => plugin_check(&path).await,
        Command::Plugin(PluginCommand::Test(args)) => Ok(plugin_test(args).await),
        Command::Plugin(PluginCommand::New(args)) => plugin_new(args).map(|()| ExitCode::SUCCESS),
        Command::Plugin(PluginCommand::ExportBundled { dir }) => {
            export_bundled(&dir).map(|()| ExitCode::SUCCESS)
        }
        Command::Status(args) => status(args).await.map(|()| ExitCode::SUCCESS),
        Command::Config(ConfigCommand::Example) => {
            print!("{}", forewarn_host::config::example::CONFIG_EXAMPLE);
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCommand::Check { path }) => Ok(config_check(&path)),
        Command::DemoWorkload(command) => demo_workload(command).await.map(|()| ExitCode::SUCCESS),
        Command::CompilePlugin { allocation } => Ok(compile_plugin(&allocation)),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut config = load_config(args.config.as_deref())?;
    if let Some(url) = args.imds_url {
        config.imds.url = url;
    }
    if let Some(dir) = args.plugins {
        config.plugin_dir = dir;
    }
    if let Some(dir) = args.state_dir {
        config.state_dir = dir;
    }
    if let Some(name) = args.vm_name {
        config.vm_name = name;
    }
    let prepared = app::build_runtime(&config)?;
    let plugins = forewarn_host::plugins::reload::PluginDirectory::start(
        prepared.runtime.clone(),
        &config.plugin_dir,
        forewarn_host::plugins::reload::ReloadOptions {
            file_limits: config.plugin_file_limits(),
            ..Default::default()
        },
    )
    .await?;
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    tracing::info!(imds = %config.imds.url, plugin_dir = %config.plugin_dir.display(), state_dir = %config.state_dir.display(), "forewarn starting");
    app::run_daemon(
        &config,
        plugins.subscribe(),
        timeline::new_timeline(),
        prepared.readiness.clone(),
        shutdown,
    )
    .await?;
    tracing::info!("forewarn stopped");
    Ok(())
}

/// `forewarn status`: fetches `/status` from the admin endpoint and prints it.
async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let base = match args.admin {
        Some(address) => admin_base_url(&address),
        None => admin_url(&load_config(args.config.as_deref())?),
    };
    let url = format!("{}/status", base.trim_end_matches('/'));
    let body = fetch_status(&url).await.with_context(|| {
        format!("cannot get the status from {url}: is forewarn running (`systemctl status forewarn`)? If its admin endpoint listens elsewhere, pass --admin ADDRESS:PORT")
    })?;
    if args.json {
        println!("{}", body.trim_end());
        return Ok(());
    }
    let snapshot: status::StatusSnapshot = serde_json::from_str(&body).with_context(|| {
        format!("{url} did not answer with a forewarn status (is it a different forewarn version?)")
    })?;
    print!("{}", status::render_table(&snapshot));
    Ok(())
}

/// The admin endpoint's URL from the config, reaching a wildcard address over loopback.
fn admin_url(config: &Config) -> String {
    let mut address = config.admin.listen;
    if address.ip().is_unspecified() {
        address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("http://{address}")
}

/// `--admin` as given: a URL is kept, a bare `host:port` (the form of `[admin] listen`)
/// gets `http://`.
fn admin_base_url(address: &str) -> String {
    let address = address.trim();
    match address.contains("://") {
        true => address.to_owned(),
        false => format!("http://{address}"),
    }
}

/// `forewarn compile-plugin`: component on stdin, compiled form on stdout; exit status
/// `EXIT_INVALID_COMPONENT` with wasmtime's message on stderr when the component is invalid.
fn compile_plugin(allocation: &str) -> ExitCode {
    use forewarn_runtime::{
        EXIT_INVALID_COMPONENT, InstanceAllocation, LoadError, compile_to_bytes,
    };
    use std::io::Read;
    let Some(allocation) = InstanceAllocation::from_arg(allocation) else {
        eprintln!(
            "forewarn compile-plugin: --allocation must be `pooling` or `on-demand`, not {allocation:?}"
        );
        return ExitCode::FAILURE;
    };
    let mut component = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut component) {
        eprintln!("forewarn compile-plugin: cannot read the component from stdin: {error}");
        return ExitCode::FAILURE;
    }
    let compiled = match compile_to_bytes(&component, allocation) {
        Ok(compiled) => compiled,
        Err(LoadError::Compile { message }) => {
            // The daemon wraps this as its own LoadError::Compile.
            eprintln!("{message}");
            return ExitCode::from(EXIT_INVALID_COMPONENT as u8);
        }
        Err(error) => {
            eprintln!("forewarn compile-plugin: {error}");
            return ExitCode::FAILURE;
        }
    };
    match std::io::stdout().lock().write_all(&compiled) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("forewarn compile-plugin: cannot write the compiled form: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn demo_workload(command: DemoWorkloadCommand) -> anyhow::Result<()> {
    use forewarn_host::cli::demo_workload::{run_app, run_control};
    match command {
        DemoWorkloadCommand::App => run_app().await,
        DemoWorkloadCommand::Stop { control } => run_control("stop", &control).await,
        DemoWorkloadCommand::Start { control } => run_control("start", &control).await,
    }
}

async fn fetch_status(url: &str) -> anyhow::Result<String> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()?;
    let response = client.get(url).send().await?.error_for_status()?;
    Ok(response.text().await?)
}

/// `forewarn config check`: "PATH: ok", or the error naming the line and key.
fn config_check(path: &std::path::Path) -> ExitCode {
    match Config::load(path) {
        Ok(_) => {
            println!("{}: ok", path.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("forewarn: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `forewarn plugin test`: the verdict as the exit code; forewarn's own errors exit 2.
async fn plugin_test(args: PluginTestArgs) -> ExitCode {
    use forewarn_host::cli::plugin_files::PluginFile;
    use forewarn_host::cli::plugin_test;
    let scenarios = match args.all_scenarios {
        // Every built-in that ends: `idle` (the console's canvas) never does.
        true => forewarn_simulator::builtin_scenarios()
            .into_iter()
            .filter(|(name, _)| {
                forewarn_simulator::load_scenario(name).is_ok_and(|scenario| !scenario.open_ended)
            })
            .map(|(name, _)| name.to_owned())
            .collect(),
        false => vec![args.scenario],
    };
    let options = plugin_test::TestOptions {
        plugin: PluginFile {
            wasm: args.plugin,
            manifest: args.manifest,
            config: args.config,
        },
        scenarios,
        speed: args.speed,
        with_bundled: args.with_bundled,
        json: args.json,
        timeline: !args.all_scenarios,
    };
    match plugin_test::run(options).await {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(error) => {
            eprintln!("forewarn: {error:#}");
            ExitCode::from(plugin_test::EXIT_ERROR)
        }
    }
}

/// `forewarn plugin new`: writes the template and prints the files and next commands.
fn plugin_new(args: NewArgs) -> anyhow::Result<()> {
    use forewarn_host::cli::plugin_new;
    let written = plugin_new::create(&plugin_new::NewOptions {
        name: args.name,
        lang: args.lang.into(),
        dir: args.dir,
        sdk: args.sdk,
    })?;
    print!("{}", plugin_new::report(&written));
    Ok(())
}

/// `forewarn plugin export-bundled DIR`: writes each bundled plugin's component and manifest.
fn export_bundled(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for plugin in forewarn_host::plugins::bundled::bundled_plugins() {
        let wasm = dir.join(format!("{}.wasm", plugin.name));
        let manifest = dir.join(format!("{}.toml", plugin.name));
        std::fs::write(&wasm, plugin.wasm)
            .with_context(|| format!("cannot write {}", wasm.display()))?;
        std::fs::write(&manifest, plugin.manifest)
            .with_context(|| format!("cannot write {}", manifest.display()))?;
        println!("{}", wasm.display());
        println!("{}", manifest.display());
    }
    Ok(())
}

fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
    if let Some(path) = path {
        return Ok(Config::load(path)?);
    }
    let default = std::path::Path::new(DEFAULT_CONFIG_PATH);
    if default.exists() {
        return Ok(Config::load(default)?);
    }
    Ok(Config::default())
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn cancel_on_signal(shutdown: CancellationToken) {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM; only Ctrl-C stops forewarn");
                let _ignored = interrupt.await;
                shutdown.cancel();
                return;
            }
        };
        tokio::select! {
            _ = interrupt => tracing::info!("SIGINT received, stopping"),
            _ = terminate.recv() => tracing::info!("SIGTERM received, stopping"),
        }
    }
    #[cfg(not(unix))]
    {
        let _ignored = interrupt.await;
    }
    shutdown.cancel();
}

async fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    if args.list {
        let mut out = std::io::stdout().lock();
        for (name, description) in forewarn_simulator::builtin_scenarios() {
            // A closed pipe (`| head`) just ends the listing.
            if writeln!(out, "{name:<24} {description}").is_err() {
                break;
            }
        }
        return Ok(());
    }
    let scenario = forewarn_simulator::load_scenario(&args.scenario)?;
    let simulator = forewarn_simulator::spawn(forewarn_simulator::SimulatorConfig {
        listen: args.listen,
        scenario,
        speed: args.speed,
    })
    .await
    .context("cannot start the simulator")?;
    say(&format!(
        "simulating IMDS at {} (scenario {}, speed {}x)",
        simulator.base_url(),
        args.scenario,
        args.speed
    ));
    say(&format!(
        "console: {}/ (start scenarios, generate events, inject faults, watch requests)",
        simulator.base_url()
    ));
    let interrupted = async {
        let _ignored = tokio::signal::ctrl_c().await;
    };
    if args.stay {
        interrupted.await;
    } else {
        tokio::select! {
            () = simulator.finished() => say("scenario finished"),
            () = interrupted => {}
        }
    }
    simulator.shutdown().await;
    Ok(())
}

/// A line on stdout; a reader that went away (a test that read the address and closed the
/// pipe, `| head`) must not stop the simulator.
fn say(line: &str) {
    let _ignored = writeln!(std::io::stdout().lock(), "{line}");
}

async fn plugin_check(path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let runtime = forewarn_runtime::Runtime::new(
        forewarn_runtime::RuntimeConfig::default(),
        forewarn_runtime::HostServices::default(),
    )?;
    // As the daemon would load it: under the memory cap of `NAME.toml` beside it, if any.
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let beside = path.with_extension("toml");
    let settings = if beside.is_file() {
        forewarn_host::plugins::manifest::PluginManifest::load(&beside)?.runtime_settings()
    } else {
        forewarn_runtime::PluginSettings::default()
    };
    let cap = settings.memory_limit_bytes;
    let report =
        tokio::task::spawn_blocking(move || runtime.inspect(&name, &bytes, &settings)).await?;
    match report {
        Ok(report) => {
            let version = report
                .exports
                .iter()
                .find_map(|name| name.strip_prefix("forewarn:plugin/handler@"))
                .unwrap_or("?");
            println!(
                "{}: a valid forewarn plugin (world forewarn:plugin/event-handler@{version})",
                path.display()
            );
            println!("  size:    {} bytes", report.size_bytes);
            println!("  sha256:  {}", report.content_hash);
            println!(
                "  memory:  {:.1} MiB at start (cap {:.1} MiB)",
                report.initial_memory_bytes as f64 / 1_048_576.0,
                cap as f64 / 1_048_576.0
            );
            println!("  exports: {}", report.exports.join(", "));
            println!("  imports:");
            for import in &report.imports {
                println!("    {import}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("{}: not a usable forewarn plugin: {error}", path.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The daemon's log on stderr; for `demo`, warnings and errors routed into its timeline
/// instead (plugins' own lines reach the timeline through the daemon).
fn init_logging(format: LogFormat, demo: bool) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    if demo {
        let filter = EnvFilter::try_from_env("FOREWARN_LOG")
            .unwrap_or_else(|_| EnvFilter::new("warn"))
            .add_directive(forewarn_directive(
                forewarn_runtime::PLUGIN_LOG_TARGET,
                "off",
            ));
        let _ignored = tracing_subscriber::registry()
            .with(filter)
            .with(forewarn_host::cli::demo_log::DemoLogLayer)
            .try_init();
        return;
    }
    let filter = EnvFilter::try_from_env("FOREWARN_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info"))
        // At trace level wasmtime-wasi logs every host call with its arguments, which
        // would let a plugin's stdout flood reach the log unbounded.
        .add_directive(
            "wasmtime_wasi=debug"
                .parse()
                .expect("a valid static directive"),
        )
        // notify reports a deleted plugin directory at INFO; forewarn logs that itself.
        .add_directive("notify=warn".parse().expect("a valid static directive"));
    let builder = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Every field value escaped and cut, whatever it holds (log_format.rs).
    match format {
        LogFormat::Text => builder
            .fmt_fields(forewarn_host::log_format::EscapedFields)
            .init(),
        LogFormat::Json => builder
            .event_format(forewarn_host::log_format::EscapedJson)
            .init(),
    }
}

/// `target=level` as a filter directive.
fn forewarn_directive(target: &str, level: &str) -> tracing_subscriber::filter::Directive {
    format!("{target}={level}")
        .parse()
        .expect("a target and a level make a valid directive")
}
