//! `forewarn status`: asks the running daemon's admin endpoint for `/status` and prints it
//! as a table (`cli/status_table.rs`), or as the JSON it answered with `--json`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::cli::status_table::render_table;
use forewarn_daemon::config::Config;
use forewarn_daemon::ops::status::StatusSnapshot;

/// `forewarn status`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Which daemon to ask, and how to print its answer: shared by `forewarn status` and
/// `forewarn fleet status`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// The daemon's admin endpoint, as `[admin] listen` writes it (`127.0.0.1:9555`) or as a
    /// URL (`http://127.0.0.1:9555`). Default: `[admin] listen` from the config file.
    #[arg(long)]
    admin: Option<String>,
    /// Config file to read the admin address from. Default: /etc/forewarn/forewarn.toml if it exists.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Print the daemon's answer as JSON (for scripts) instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl DaemonArgs {
    /// The URL of `path` on the daemon's admin endpoint: `--admin` as given, or `[admin]
    /// listen` from the config file.
    pub(crate) fn url(&self, path: &str) -> anyhow::Result<String> {
        let base = match &self.admin {
            Some(address) => admin_base_url(address),
            None => admin_url(&Config::load_or_default(self.config.as_deref())?),
        };
        Ok(format!("{}{path}", base.trim_end_matches('/')))
    }

    /// The config file `--config` names (or the default one, or the defaults).
    pub(crate) fn config(&self) -> anyhow::Result<Config> {
        Ok(Config::load_or_default(self.config.as_deref())?)
    }
}

/// Fetches `/status` and prints it; fails naming the URL when the daemon does not answer.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let url = args.daemon.url("/status")?;
    let body = fetch_status(&url).await.with_context(|| {
        format!("cannot get the status from {url}: is forewarn running (`systemctl status forewarn`)? If its admin endpoint listens elsewhere, pass --admin ADDRESS:PORT")
    })?;
    if args.daemon.json {
        println!("{}", body.trim_end());
        return Ok(ExitCode::SUCCESS);
    }
    let snapshot: StatusSnapshot = serde_json::from_str(&body).with_context(|| {
        format!("{url} did not answer with a forewarn status (is it a different forewarn version?)")
    })?;
    print!("{}", render_table(&snapshot));
    Ok(ExitCode::SUCCESS)
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

async fn fetch_status(url: &str) -> anyhow::Result<String> {
    let (status, body) = fetch_admin(url).await?;
    if !status.is_success() {
        anyhow::bail!("HTTP status {status}");
    }
    Ok(body)
}

/// `GET url` on the admin endpoint (never through a proxy): its status and body.
pub(crate) async fn fetch_admin(url: &str) -> anyhow::Result<(reqwest::StatusCode, String)> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()?;
    let response = client.get(url).send().await?;
    let status = response.status();
    Ok((status, response.text().await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn the_admin_address_is_read_as_listen_writes_it_or_as_a_url() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["--admin", "127.0.0.1:9555", "--json"]).expect("parses");
        assert!(args.daemon.json);
        assert_eq!(
            admin_base_url(args.daemon.admin.as_deref().expect("given")),
            "http://127.0.0.1:9555"
        );
        assert_eq!(admin_base_url(" https://vm-a:9555/ "), "https://vm-a:9555/");
        let mut config = Config::default();
        config.admin.listen = "0.0.0.0:9555".parse().expect("an address");
        assert_eq!(admin_url(&config), "http://127.0.0.1:9555");
    }
}
