//! `forewarn service install|uninstall|start|stop`: forewarn as a Windows service (on
//! Linux the systemd unit does this, and these commands say so). `install` prepares
//! `%ProgramData%\forewarn` (private to SYSTEM and the Administrators, the default config
//! written when missing, an empty `plugins.d`), registers the service (automatic start,
//! restarted after a failure, LocalSystem unless `--account`) and starts it. The Service
//! Control Manager runs `forewarn service run --config PATH`, hidden here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, default_config_path};
use crate::service_manager::{self, InstallOptions, SERVICE_NAME};

/// `forewarn service …`.
#[derive(clap::Args)]
pub struct ServiceArgs {
    #[command(subcommand)]
    command: ServiceCommand,
}

#[derive(clap::Subcommand)]
enum ServiceCommand {
    /// Register forewarn as a Windows service and start it: automatic start, restarted after
    /// a failure, the default config written to %ProgramData%\forewarn when missing.
    Install(InstallArgs),
    /// Stop and remove the Windows service (the config, plugins and state stay).
    Uninstall,
    /// Start the Windows service; returns once it runs (IMDS has answered its first poll).
    Start,
    /// Stop the Windows service; returns once it has stopped.
    Stop,
    /// Run as the Windows service (what the Service Control Manager launches).
    #[command(hide = true)]
    Run {
        /// The config file.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct InstallArgs {
    /// The config file the service reads. Default: %ProgramData%\forewarn\forewarn.toml
    /// (written with every option at its default when missing).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// The account the service runs as (`NT AUTHORITY\LocalService`, `NT SERVICE\forewarn`,
    /// `DOMAIN\user`). Default: LocalSystem, which actions such as `net stop` need.
    #[arg(long)]
    account: Option<String>,
    /// That account's password, for a user account (virtual and built-in accounts have none).
    #[arg(long, env = "FOREWARN_SERVICE_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Register the service without starting it.
    #[arg(long)]
    no_start: bool,
}

/// Runs `forewarn service …`; `json_log`: `--log-format json` for the service's log file.
pub fn run(args: ServiceArgs, json_log: bool) -> ExitCode {
    let result = match args.command {
        ServiceCommand::Install(install) => install_and_start(install, json_log),
        ServiceCommand::Uninstall => service_manager::uninstall()
            .map(|()| {
                println!(
                    "the {SERVICE_NAME} service is removed (config, plugins and state are kept)"
                )
            })
            .map_err(anyhow::Error::from),
        ServiceCommand::Start => service_manager::start()
            .map(|()| println!("the {SERVICE_NAME} service is running"))
            .map_err(anyhow::Error::from),
        ServiceCommand::Stop => service_manager::stop()
            .map(|()| println!("the {SERVICE_NAME} service is stopped"))
            .map_err(anyhow::Error::from),
        ServiceCommand::Run { config } => run_service(config, json_log),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("forewarn: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn install_and_start(args: InstallArgs, json_log: bool) -> anyhow::Result<()> {
    let config = args.config.unwrap_or_else(default_config_path);
    let executable = std::env::current_exe()
        .and_then(std::path::absolute)
        .context("cannot tell where this forewarn executable is")?;
    prepare_config(&config)?;
    service_manager::install(&InstallOptions {
        executable: executable.clone(),
        config: std::path::absolute(&config).unwrap_or(config.clone()),
        account: args.account,
        password: args.password,
        json_log,
    })?;
    println!(
        "the {SERVICE_NAME} service is installed: {} service run --config {}",
        executable.display(),
        config.display()
    );
    if args.no_start {
        println!("start it with `forewarn service start`");
        return Ok(());
    }
    service_manager::start()?;
    println!("the {SERVICE_NAME} service is running; `forewarn status` shows what it does");
    Ok(())
}

/// Writes the platform's example config at `config` when missing (its directory created
/// private), and creates the plugin directory it names.
fn prepare_config(config: &Path) -> anyhow::Result<()> {
    if let Some(dir) = config.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        forewarn_platform::file_access::create_private_dir(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if !config.exists() {
        std::fs::write(config, crate::config::example::for_this_platform())
            .with_context(|| format!("cannot write the default config to {}", config.display()))?;
        println!("wrote the default config to {}", config.display());
    }
    let settings = Config::load(config)?;
    forewarn_platform::file_access::create_private_dir(&settings.plugin_dir).with_context(
        || {
            format!(
                "cannot create the plugin directory {}",
                settings.plugin_dir.display()
            )
        },
    )?;
    Ok(())
}

/// `forewarn service run`: logs to the service's rotating file, then hands the process to
/// the Service Control Manager, which runs the daemon until Stop, Shutdown or Pre-shutdown.
fn run_service(config: Option<PathBuf>, json_log: bool) -> anyhow::Result<()> {
    init_service_log(json_log)?;
    let config = config.unwrap_or_else(default_config_path);
    let body = Box::new(move |shutdown: CancellationToken| -> anyhow::Result<()> {
        let settings = Config::load(&config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(crate::daemon::wiring::serve(&settings, shutdown))
    });
    service_manager::run_dispatcher(body)?;
    Ok(())
}

fn init_service_log(json: bool) -> anyhow::Result<()> {
    let Some(writer) = service_manager::log_file_writer()? else {
        return Ok(());
    };
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(crate::log_filter::daemon_filter())
        .with_writer(writer);
    let _already = match json {
        true => builder.json().flatten_event(true).try_init(),
        false => builder.try_init(),
    };
    Ok(())
}
