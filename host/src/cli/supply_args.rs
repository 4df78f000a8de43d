//! What the `plugin push/install/upgrade/rollback/remove/list/pull` commands share: the
//! config and plugin directory, how to reach a registry, and the operator at the terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use forewarn_daemon::config::Config;
use forewarn_manifest::shown;
use forewarn_supply::SupplyError;
use forewarn_supply::fetch::FetchLimits;
use forewarn_supply::install::Operator;
use forewarn_supply::registry::RegistryOptions;
use forewarn_supply::signature::TrustedKeys;

/// The config file and the plugin directory.
#[derive(Debug, Clone, clap::Args)]
pub struct DirArgs {
    /// Config file (for `plugin-dir`, `[plugins] trusted-keys` and the size limits).
    /// Default: /etc/forewarn/forewarn.toml if it exists, else built-in defaults.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// The plugin directory (overrides `plugin-dir`).
    #[arg(long)]
    pub plugins: Option<PathBuf>,
}

impl DirArgs {
    /// The config, with `--plugins` applied.
    pub fn load(&self) -> anyhow::Result<Config> {
        let mut config = load_config(self.config.as_ref())?;
        if let Some(dir) = &self.plugins {
            config.plugin_dir = dir.clone();
        }
        Ok(config)
    }
}

/// Loads the config file (or the defaults when none is given and the default path is missing).
pub fn load_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    Ok(Config::load_or_default(path.map(PathBuf::as_path))?)
}

/// The size limits of a config's plugin files.
pub fn fetch_limits(config: &Config) -> FetchLimits {
    FetchLimits {
        wasm: config.max_plugin_size.as_u64(),
        manifest_toml: config.max_manifest_size.as_u64(),
    }
}

/// The trusted keys of a config.
pub fn trusted_keys(config: &Config) -> anyhow::Result<TrustedKeys> {
    config
        .plugins
        .trusted_keys()
        .map_err(anyhow::Error::msg)
        .context("the config's [plugins] section")
}

/// Where the registry commands' credentials come from, shown under their `--help`
/// (`after_help`): otherwise only a registry's 401 would tell.
pub const REGISTRY_CREDENTIALS_HELP: &str = "\
Registry credentials: FOREWARN_REGISTRY_USER and FOREWARN_REGISTRY_PASSWORD (a password or an \
access token), else the registry's entry in docker's config ($DOCKER_CONFIG/config.json or \
~/.docker/config.json, as `docker login REGISTRY` writes it; credential helpers are not run). \
None are needed for a registry that allows anonymous access.";

/// How to reach the registry.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// Speak plain http:// to the registry (a registry on loopback); default https://.
    #[arg(long)]
    pub plain_http: bool,
    /// A PEM file of CAs to trust for the registry's certificate, besides the system's.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// The longest the whole download (or upload) may take, e.g. "30s", "30m": a registry
    /// that stalls or sends a byte at a time is given up on then, and nothing is installed.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

impl RegistryArgs {
    /// The registry options (credentials from FOREWARN_REGISTRY_USER/PASSWORD or docker's config).
    pub fn options(&self) -> RegistryOptions {
        RegistryOptions {
            plain_http: self.plain_http,
            ca_file: self.ca_file.clone(),
            credentials: None,
        }
    }

    /// These flags as they would be typed again (` --plain-http`, ` --ca-file /abs/CA.pem`),
    /// for a command line printed to be pasted (`plugin push`'s install line): the CA file
    /// by its absolute path, so the line works from any directory.
    pub fn repeated(&self) -> String {
        let mut flags = String::new();
        if self.plain_http {
            flags.push_str(" --plain-http");
        }
        if let Some(ca_file) = &self.ca_file {
            let absolute = std::path::absolute(ca_file).unwrap_or_else(|_| ca_file.clone());
            flags.push_str(" --ca-file ");
            flags.push_str(&shell_word(&absolute.display().to_string()));
        }
        flags
    }
}

/// `word` as one POSIX shell word: as it is when it has nothing the shell would read,
/// else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=%".contains(c));
    match plain {
        true => word.to_owned(),
        false => format!("'{}'", word.replace('\'', "'\\''")),
    }
}

/// A supply-chain error for the terminal: it quotes what a registry, an artifact or a lock
/// said, so it is escaped line by line ([`shown::message`]) before `main` prints it.
pub fn shown_error(error: SupplyError) -> anyhow::Error {
    anyhow::Error::msg(shown::message(&error.to_string()))
}

/// The operator at the terminal: told on stderr, asked on stdin (`--yes` answers for them;
/// without a terminal and without `--yes` nothing is installed).
pub struct TerminalOperator {
    /// `--yes`: consent given in advance.
    pub assume_yes: bool,
}

impl Operator for TerminalOperator {
    fn say(&mut self, text: &str) {
        // Its parts from outside are escaped already; escaped once more as a whole, nothing
        // but its own line breaks reaches the terminal.
        let _ = std::io::stderr()
            .lock()
            .write_all(shown::message(text).as_bytes());
    }

    fn consent(&mut self, question: &str) -> Result<bool, SupplyError> {
        let question = shown::message(question);
        let mut err = std::io::stderr().lock();
        if self.assume_yes {
            let _ = writeln!(err, "{question} yes (--yes)");
            return Ok(true);
        }
        if !std::io::stdin().is_terminal() {
            return Err(SupplyError::NoConsent(format!(
                "{question} There is no terminal to ask on, so nothing was changed: review the \
                 grants above and pass --yes to agree (for automation)"
            )));
        }
        let _ = write!(err, "{question} [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|error| SupplyError::NoConsent(format!("cannot read the answer: {error}")))?;
        Ok(matches!(
            answer.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(plain_http: bool, ca_file: Option<&str>) -> RegistryArgs {
        RegistryArgs {
            plain_http,
            ca_file: ca_file.map(PathBuf::from),
            timeout: Duration::from_secs(600),
        }
    }

    #[test]
    fn the_flags_are_repeated_as_typed_again_with_the_ca_file_absolute_and_quoted() {
        assert_eq!(registry(false, None).repeated(), "");
        assert_eq!(registry(true, None).repeated(), " --plain-http");
        let relative = registry(false, Some("ca.pem")).repeated();
        let expected = std::env::current_dir().unwrap().join("ca.pem");
        assert_eq!(
            relative,
            format!(" --ca-file {}", shell_word(&expected.display().to_string()))
        );
        // Absolute as the platform makes it (`Z:\\etc\\…` under Wine), quoted for a shell.
        let spaced = "/etc/my ca/it's.pem";
        let absolute = std::path::absolute(spaced).unwrap();
        assert_eq!(
            registry(true, Some(spaced)).repeated(),
            format!(
                " --plain-http --ca-file {}",
                shell_word(&absolute.display().to_string())
            )
        );
        assert_eq!(shell_word(spaced), "'/etc/my ca/it'\\''s.pem'");
    }
}
