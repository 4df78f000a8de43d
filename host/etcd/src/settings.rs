//! What an [`EtcdClient`](crate::EtcdClient) connects with: endpoints, credentials and TLS
//! files, their checks, and the error that names the setting at fault.

use std::fmt;
use std::path::PathBuf;

/// Everything [`EtcdClient::connect`](crate::EtcdClient::connect) needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdSettings {
    /// etcd client URLs (`http://host:port` or `https://host:port`), tried in turn.
    pub endpoints: Vec<String>,
    /// User name and password for etcd's authentication, when it is on.
    pub credentials: Option<Credentials>,
    /// The certificate files for `https://` endpoints.
    pub tls: TlsFiles,
}

/// A user name and password for etcd's authentication (`/v3/auth/authenticate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The etcd user.
    pub user: String,
    /// The user's password.
    pub password: String,
}

/// PEM files for TLS to etcd. Without `ca_file`, the system's CA store is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificate(s) to verify `https://` endpoints with, instead of the system's.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (chain), for etcd's `--client-cert-auth`; needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// The private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    /// Whether any file is set.
    pub fn any(&self) -> bool {
        self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some()
    }
}

/// One setting of [`EtcdSettings`], named as a config file would (kebab-case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// [`EtcdSettings::endpoints`].
    Endpoints,
    /// [`Credentials::user`].
    Username,
    /// [`Credentials::password`].
    Password,
    /// [`TlsFiles::ca_file`].
    CaFile,
    /// [`TlsFiles::cert_file`].
    CertFile,
    /// [`TlsFiles::key_file`].
    KeyFile,
}

impl Setting {
    /// The setting's name: `endpoints`, `username`, `password`, `ca-file`, `cert-file`,
    /// `key-file`.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Endpoints => "endpoints",
            Setting::Username => "username",
            Setting::Password => "password",
            Setting::CaFile => "ca-file",
            Setting::CertFile => "cert-file",
            Setting::KeyFile => "key-file",
        }
    }

    /// The name under `section` (`coordination.ca-file`), or alone when `section` is empty.
    pub fn key(self, section: &str) -> String {
        if section.is_empty() {
            self.name().to_owned()
        } else {
            format!("{section}.{}", self.name())
        }
    }
}

/// Settings that cannot work, or TLS files that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// One setting (or two that go together) is wrong; `message` says how to fix it.
    #[error("{}", self.render(""))]
    Invalid {
        /// The settings at fault (one, or two that go together).
        settings: Vec<Setting>,
        /// What is wrong and the fix, e.g. "set both or neither".
        message: String,
    },
    /// rustls refused to build a client configuration.
    #[error("{}", self.render(""))]
    TlsSetup(String),
}

impl SettingsError {
    fn invalid(settings: &[Setting], message: impl Into<String>) -> SettingsError {
        SettingsError::Invalid {
            settings: settings.to_vec(),
            message: message.into(),
        }
    }

    /// The message with the settings named as keys of `section` — e.g. with
    /// `"coordination"`: ``key `coordination.ca-file`: …`` or
    /// ``keys `coordination.cert-file` and `coordination.key-file`: …``.
    pub fn render(&self, section: &str) -> String {
        match self {
            SettingsError::Invalid { settings, message } => {
                let keys: Vec<String> = settings
                    .iter()
                    .map(|setting| format!("`{}`", setting.key(section)))
                    .collect();
                match keys.as_slice() {
                    [] => message.clone(),
                    [one] => format!("key {one}: {message}"),
                    many => format!("keys {}: {message}", many.join(" and ")),
                }
            }
            SettingsError::TlsSetup(error) if section.is_empty() => format!("TLS setup: {error}"),
            SettingsError::TlsSetup(error) => format!("[{section}] TLS setup: {error}"),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl EtcdSettings {
    /// Whether TLS is asked for: an `https://` endpoint or a certificate file.
    pub fn wants_tls(&self) -> bool {
        self.endpoints.iter().any(|e| e.starts_with("https://")) || self.tls.any()
    }

    /// Checks the settings without reading files: at least one endpoint, each `http://` or
    /// `https://`; certificate and key together; certificate files with `https://`
    /// endpoints only (with them, an `http://` endpoint would send the credentials in the
    /// clear).
    pub fn check(&self) -> Result<(), SettingsError> {
        if self.endpoints.is_empty() {
            return Err(SettingsError::invalid(
                &[Setting::Endpoints],
                "name at least one etcd client URL, e.g. [\"http://10.0.0.4:2379\"]",
            ));
        }
        for endpoint in &self.endpoints {
            if !endpoint.starts_with("http://") && !endpoint.starts_with("https://") {
                return Err(SettingsError::invalid(
                    &[Setting::Endpoints],
                    format!("\"{endpoint}\" must start with http:// or https://"),
                ));
            }
        }
        if self.tls.cert_file.is_some() != self.tls.key_file.is_some() {
            return Err(SettingsError::invalid(
                &[Setting::CertFile, Setting::KeyFile],
                "set both or neither",
            ));
        }
        let plain = self.endpoints.iter().find(|e| e.starts_with("http://"));
        match plain {
            Some(endpoint) if self.tls.any() => Err(SettingsError::invalid(
                &[Setting::Endpoints],
                format!(
                    "\"{endpoint}\" is plain http:// but `ca-file`, `cert-file` or `key-file` \
                     is set; use https:// for every endpoint (or remove the certificate files)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The first `http://` endpoint, if any (credentials would travel to it in clear text).
    pub fn plain_endpoint(&self) -> Option<&str> {
        self.endpoints
            .iter()
            .find(|e| e.starts_with("http://"))
            .map(String::as_str)
    }
}

/// Settings with one endpoint and nothing else, for tests.
#[cfg(test)]
pub(crate) fn one_endpoint(endpoint: &str) -> EtcdSettings {
    EtcdSettings {
        endpoints: vec![endpoint.to_owned()],
        ..EtcdSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use one_endpoint as settings;

    #[test]
    fn endpoints_are_checked_and_named() {
        let error = EtcdSettings::default().check().unwrap_err();
        assert_eq!(
            error.render("coordination"),
            "key `coordination.endpoints`: name at least one etcd client URL, e.g. [\"http://10.0.0.4:2379\"]"
        );
        let error = settings("10.0.0.4:2379").check().unwrap_err();
        assert_eq!(
            error.to_string(),
            "key `endpoints`: \"10.0.0.4:2379\" must start with http:// or https://"
        );
        assert!(settings("https://a:2379").check().is_ok());
    }

    #[test]
    fn a_certificate_without_its_key_names_both_settings() {
        let mut settings = settings("https://127.0.0.1:2379");
        settings.tls.cert_file = Some("/etc/forewarn/client.pem".into());
        let error = settings.check().unwrap_err();
        assert_eq!(
            error.render("coordination"),
            "keys `coordination.cert-file` and `coordination.key-file`: set both or neither"
        );
    }

    #[test]
    fn certificate_files_with_a_plain_endpoint_are_refused() {
        let mut settings = settings("http://127.0.0.1:2379");
        settings.tls.ca_file = Some("/nonexistent/ca.pem".into());
        let error = settings.check().unwrap_err();
        assert!(
            matches!(&error, SettingsError::Invalid { settings, .. } if settings == &[Setting::Endpoints])
        );
        assert!(error.to_string().contains("use https://"), "{error}");
    }
}
