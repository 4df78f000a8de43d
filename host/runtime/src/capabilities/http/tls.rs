//! TLS for plugins' `http-send`: rustls (ring provider) trusting the system's CA store, loaded
//! once per process, plus the CAs of the plugin's `http-ca-file`. Verification is never skipped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};

use crate::mutex::lock;
use crate::wit::latest::HostError;

/// The system's CA certificates, loaded on first use: the store, or why there is none.
static SYSTEM_ROOTS: OnceLock<Result<RootCertStore, NoSystemRoots>> = OnceLock::new();

/// Why the system's CA store gave no certificate.
#[derive(Debug, thiserror::Error)]
enum NoSystemRoots {
    /// It was read and holds none.
    #[error("it found none")]
    NoneFound,
    /// What went wrong reading it, each error.
    #[error("{}", .0.join("; "))]
    Unreadable(Vec<String>),
}

/// Most client configurations one [`TlsConfigs`] keeps; past it, it starts afresh.
const CONFIGS_KEPT: usize = 64;

/// The TLS client configurations of one HTTP client, one per set of extra CAs. Each has
/// its own session cache, so a session verified under one plugin's CAs is never resumed
/// under another plugin's trust.
#[derive(Default)]
pub(crate) struct TlsConfigs {
    configs: Mutex<HashMap<Vec<CertificateDer<'static>>, Arc<ClientConfig>>>,
}

impl TlsConfigs {
    /// The configuration trusting the system's CAs and `extra`; `plugin` is named in errors.
    pub(crate) async fn config(
        &self,
        extra: &[CertificateDer<'static>],
        plugin: &str,
    ) -> Result<Arc<ClientConfig>, HostError> {
        if let Some(config) = lock(&self.configs).get(extra) {
            return Ok(Arc::clone(config));
        }
        let config = Arc::new(client_config(system_roots().await, extra, plugin)?);
        let mut configs = lock(&self.configs);
        if configs.len() >= CONFIGS_KEPT {
            configs.clear();
        }
        configs.insert(extra.to_vec(), Arc::clone(&config));
        Ok(config)
    }
}

/// The system's CA store, read from disk on the first call of the process (off the async
/// worker threads).
async fn system_roots() -> &'static Result<RootCertStore, NoSystemRoots> {
    if let Some(roots) = SYSTEM_ROOTS.get() {
        return roots;
    }
    let loading = tokio::task::spawn_blocking(|| SYSTEM_ROOTS.get_or_init(load_system_roots));
    match loading.await {
        Ok(roots) => roots,
        Err(_panicked) => SYSTEM_ROOTS.get_or_init(load_system_roots),
    }
}

fn load_system_roots() -> Result<RootCertStore, NoSystemRoots> {
    let native = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _unusable) = roots.add_parsable_certificates(native.certs);
    if added > 0 {
        return Ok(roots);
    }
    let errors: Vec<String> = native.errors.iter().map(ToString::to_string).collect();
    Err(if errors.is_empty() {
        NoSystemRoots::NoneFound
    } else {
        NoSystemRoots::Unreadable(errors)
    })
}

fn client_config(
    system: &Result<RootCertStore, NoSystemRoots>,
    extra: &[CertificateDer<'static>],
    plugin: &str,
) -> Result<ClientConfig, HostError> {
    let mut roots = match system {
        Ok(roots) => roots.clone(),
        Err(why) if extra.is_empty() => {
            return Err(HostError::Failed(format!(
                "this system has no CA certificates to verify https:// servers with ({why}); \
                 install the system's CA store (Debian/Ubuntu: the ca-certificates package), \
                 or add the server's CA with `http-ca-file` in [capabilities] of {plugin}.toml"
            )));
        }
        Err(_) => RootCertStore::empty(),
    };
    for certificate in extra {
        roots.add(certificate.clone()).map_err(|error| {
            HostError::Failed(format!(
                "a CA of `http-ca-file` in {plugin}.toml is not usable: {error}"
            ))
        })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| HostError::Failed(format!("the daemon's TLS setup failed: {error}")))?;
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// The name the server's certificate must carry: the URL's DNS name or IP address.
pub(crate) fn server_name(host: &url::Host<&str>) -> Result<ServerName<'static>, HostError> {
    match host {
        url::Host::Domain(name) => ServerName::try_from((*name).to_owned()).map_err(|_| {
            HostError::Invalid(format!(
                "`{name}` is not a name a TLS certificate can carry"
            ))
        }),
        url::Host::Ipv4(ip) => Ok(ServerName::IpAddress(std::net::IpAddr::V4(*ip).into())),
        url::Host::Ipv6(ip) => Ok(ServerName::IpAddress(std::net::IpAddr::V6(*ip).into())),
    }
}

/// What the plugin sees of a failed TLS handshake with `host`: the problem and its fix.
pub(crate) fn handshake_error(error: &std::io::Error, host: &str, plugin: &str) -> HostError {
    let rustls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let Some(rustls_error) = rustls_error else {
        return HostError::Failed(format!("the TLS handshake with {host} failed: {error}"));
    };
    let text = match rustls_error {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "the TLS certificate for {host} is not trusted: {rustls_error} (no CA of the \
             system's store nor of the plugin's `http-ca-file` signed it); if {host} uses a \
             private CA, add its CA with `http-ca-file = \"path/to/ca.pem\"` in [capabilities] \
             of {plugin}.toml"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "the TLS certificate for {host} does not name {host}: {rustls_error}; use a name \
             the certificate is issued for in the URL (and in [capabilities] http of \
             {plugin}.toml)"
        ),
        rustls::Error::InvalidCertificate(_) => {
            format!("the TLS certificate for {host} is refused: {rustls_error}")
        }
        other => format!("the TLS handshake with {host} failed: {other}"),
    };
    HostError::Failed(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_system_cas_an_https_call_says_so_and_names_the_fix() {
        let none = Err(NoSystemRoots::NoneFound);
        let error = client_config(&none, &[], "p").unwrap_err();
        let HostError::Failed(text) = error else {
            panic!("expected failed, got {error:?}");
        };
        assert!(
            text.starts_with("this system has no CA certificates to verify https:// servers"),
            "{text}"
        );
        assert!(text.contains("(it found none)"), "{text}");
        assert!(
            text.contains("`http-ca-file` in [capabilities] of p.toml"),
            "{text}"
        );
    }

    #[test]
    fn without_system_cas_the_plugins_own_cas_still_serve() {
        let extra = forewarn_manifest::capabilities::http_ca_file::ca_certificates(
            super::super::https_tests::TEST_CA,
        )
        .unwrap();
        assert_eq!(extra.len(), 1);
        let none = Err(NoSystemRoots::NoneFound);
        assert!(client_config(&none, &extra, "p").is_ok());
    }
}
