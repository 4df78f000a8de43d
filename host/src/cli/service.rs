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

use crate::cli::logging::{self, LogFormat};
use forewarn_daemon::config::{Config, default_config_path};
use forewarn_daemon::service_manager::{self, InstallOptions, SERVICE_NAME};

/// `forewarn service …`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ServiceCommand,
}

#[derive(Debug, clap::Subcommand)]
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

#[derive(Debug, clap::Args)]
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

/// Runs `forewarn service …`; `log_format`: `--log-format`, for the service's log file.
/// Not async: the Service Control Manager runs the daemon (and its async runtime) on a
/// thread of its own.
pub fn run(args: Args, log_format: LogFormat) -> anyhow::Result<ExitCode> {
    let json_log = log_format == LogFormat::Json;
    match args.command {
        ServiceCommand::Install(install) => install_and_start(install, json_log)?,
        ServiceCommand::Uninstall => {
            service_manager::uninstall()?;
            println!("the {SERVICE_NAME} service is removed (config, plugins and state are kept)");
        }
        ServiceCommand::Start => {
            service_manager::start()?;
            println!("the {SERVICE_NAME} service is running");
        }
        ServiceCommand::Stop => {
            service_manager::stop()?;
            println!("the {SERVICE_NAME} service is stopped");
        }
        ServiceCommand::Run { config } => run_service(config, log_format)?,
    }
    Ok(ExitCode::SUCCESS)
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
        std::fs::write(
            config,
            forewarn_daemon::config::example::for_this_platform(),
        )
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
fn run_service(config: Option<PathBuf>, log_format: LogFormat) -> anyhow::Result<()> {
    if let Some(writer) = service_manager::log_file_writer()? {
        logging::init_file(log_format, writer);
    }
    let config = config.unwrap_or_else(default_config_path);
    let body = Box::new(move |shutdown: CancellationToken| -> anyhow::Result<()> {
        let settings = Config::load(&config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(forewarn_daemon::daemon::wiring::serve(&settings, shutdown))
    });
    service_manager::run_dispatcher(body)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn install_takes_an_account_and_a_config() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&[
            "install",
            "--config",
            "C:\\forewarn.toml",
            "--account",
            "NT SERVICE\\forewarn",
            "--no-start",
        ])
        .expect("parses");
        let ServiceCommand::Install(install) = args.command else {
            panic!("not install: {args:?}");
        };
        assert_eq!(install.account.as_deref(), Some("NT SERVICE\\forewarn"));
        assert!(install.no_start);
        assert!(parse::<Args>(&["run", "--config", "x.toml"]).is_ok());
        assert!(parse::<Args>(&["restart"]).is_err());
    }
}
