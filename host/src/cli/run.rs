//! `forewarn run`: the daemon. Reads the config (overridden by the flags), loads the plugin
//! directory, and runs until SIGINT or SIGTERM (on Windows: Ctrl-C, Ctrl-Break, the console closing).

use std::path::PathBuf;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use forewarn_daemon::config::Config;
use forewarn_daemon::daemon::wiring;

/// `forewarn run`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
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

impl Args {
    /// The config file (or the defaults) with the flags applied on top.
    fn config(self) -> anyhow::Result<Config> {
        let mut config = Config::load_or_default(self.config.as_deref())?;
        if let Some(url) = self.imds_url {
            config.imds.url = url;
        }
        if let Some(dir) = self.plugins {
            config.plugin_dir = dir;
        }
        if let Some(dir) = self.state_dir {
            config.state_dir = dir;
        }
        if let Some(name) = self.vm_name {
            config.vm_name = name;
        }
        Ok(config)
    }
}

/// Runs the daemon until a signal stops it.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_stop_request(shutdown.clone()));
    wiring::serve(&config, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// Cancels `shutdown` when the system asks forewarn to stop (SIGINT or SIGTERM; on
/// Windows Ctrl-C, Ctrl-Break, the console closing or shutdown).
async fn cancel_on_stop_request(shutdown: CancellationToken) {
    let request = forewarn_platform::stop_request::wait(|what, error| {
        tracing::error!(%error, "cannot listen for {what}; only Ctrl-C stops forewarn");
    })
    .await;
    tracing::info!("{request} received, stopping");
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn flags_override_the_config_file() {
        assert_consistent::<Args>();
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("forewarn.toml");
        std::fs::write(
            &file,
            "vm-name = \"from-file\"\nplugin-dir = \"/from/file\"\n",
        )
        .expect("write");
        let file = file.to_str().expect("utf-8 path");
        let config = parse::<Args>(&["-c", file, "--vm-name", "from-flag"])
            .expect("parses")
            .config()
            .expect("loads");
        assert_eq!(config.vm_name, "from-flag");
        assert_eq!(config.plugin_dir, PathBuf::from("/from/file"));
        let config = parse::<Args>(&["--config", file, "--imds-url", "http://127.0.0.1:1"])
            .expect("parses")
            .config()
            .expect("loads");
        assert_eq!(config.vm_name, "from-file");
        assert_eq!(config.imds.url, "http://127.0.0.1:1");
    }
}
