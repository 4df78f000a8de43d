//! TLS to etcd: the rustls client configuration (ring provider) built from the
//! [`TlsFiles`](crate::TlsFiles) of an [`EtcdSettings`], with errors that name the setting.
//!
//! Trust: with `ca-file`, only the CAs in it (etcd clusters usually have a private CA);
//! without it, the system's CA store. The server certificate must name the endpoint's host
//! (a DNS name or an IP address in its subjectAltName).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use crate::settings::{EtcdSettings, Setting, SettingsError};

/// The TLS client configuration for etcd; the settings are checked and every file is read.
/// Without TLS settings it trusts nothing (it is never used: every endpoint is `http://`).
pub(crate) fn client_config(settings: &EtcdSettings) -> Result<ClientConfig, SettingsError> {
    settings.check()?;
    let files = &settings.tls;
    let identity = match (&files.cert_file, &files.key_file) {
        (Some(cert_file), Some(key_file)) => Some((
            certificates(cert_file, Setting::CertFile)?,
            private_key(key_file)?,
        )),
        _ => None,
    };
    let roots = if settings.wants_tls() {
        trusted_roots(files.ca_file.as_deref())?
    } else {
        RootCertStore::empty()
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| SettingsError::TlsSetup(error.to_string()))?
        .with_root_certificates(roots);
    let Some((chain, key)) = identity else {
        return Ok(builder.with_no_client_auth());
    };
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|error| SettingsError::Invalid {
            settings: vec![Setting::CertFile, Setting::KeyFile],
            message: format!("{error} (is the key the one of that certificate?)"),
        })
}

fn invalid(setting: Setting, message: String) -> SettingsError {
    SettingsError::Invalid {
        settings: vec![setting],
        message,
    }
}

fn trusted_roots(ca_file: Option<&Path>) -> Result<RootCertStore, SettingsError> {
    let mut roots = RootCertStore::empty();
    let Some(ca_file) = ca_file else {
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            return Err(invalid(
                Setting::CaFile,
                "the system has no CA certificates to verify https:// endpoints with; set \
                 `ca-file` to the PEM file of etcd's CA"
                    .into(),
            ));
        }
        return Ok(roots);
    };
    for certificate in certificates(ca_file, Setting::CaFile)? {
        roots.add(certificate).map_err(|error| {
            invalid(
                Setting::CaFile,
                format!(
                    "{}: not a usable CA certificate: {error}",
                    ca_file.display()
                ),
            )
        })?;
    }
    Ok(roots)
}

/// Every certificate in a PEM file; at least one.
fn certificates(
    path: &Path,
    setting: Setting,
) -> Result<Vec<CertificateDer<'static>>, SettingsError> {
    let unreadable = |error: rustls::pki_types::pem::Error| {
        invalid(
            setting,
            format!("cannot read certificates from {}: {error}", path.display()),
        )
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(unreadable)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(unreadable)?;
    if chain.is_empty() {
        return Err(invalid(
            setting,
            format!(
                "{} holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")",
                path.display()
            ),
        ));
    }
    Ok(chain)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, SettingsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| {
        invalid(
            Setting::KeyFile,
            format!("cannot read a private key from {}: {error}", path.display()),
        )
    })
}

impl EtcdSettings {
    /// [`check`](Self::check), then reads and checks the TLS files (`ca-file`, `cert-file`,
    /// `key-file`), as [`EtcdClient::connect`](crate::EtcdClient::connect) would.
    pub fn check_files(&self) -> Result<(), SettingsError> {
        client_config(self).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::one_endpoint as settings;

    #[test]
    fn plain_http_needs_no_files() {
        assert!(client_config(&settings("http://127.0.0.1:2379")).is_ok());
    }

    #[test]
    fn certificate_files_with_a_plain_endpoint_are_refused() {
        let mut settings = settings("http://127.0.0.1:2379");
        settings.tls.ca_file = Some("/nonexistent/ca.pem".into());
        let error = client_config(&settings).unwrap_err();
        assert!(error.to_string().contains("use https://"), "{error}");
    }

    #[test]
    fn missing_and_empty_files_name_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no pem here\n").unwrap();
        let mut settings = settings("https://127.0.0.1:2379");
        settings.tls.ca_file = Some(dir.path().join("missing.pem"));
        let error = settings.check_files().unwrap_err();
        assert!(
            error
                .render("coordination")
                .starts_with("key `coordination.ca-file`: cannot read certificates from "),
            "{error}"
        );
        settings.tls.ca_file = Some(empty.clone());
        let error = settings.check_files().unwrap_err();
        assert!(
            error.to_string().contains("holds no PEM certificate"),
            "{error}"
        );
        settings.tls.ca_file = None;
        settings.tls.cert_file = Some(empty.clone());
        settings.tls.key_file = Some(empty);
        let error = settings.check_files().unwrap_err();
        assert!(
            matches!(&error, SettingsError::Invalid { settings, .. } if settings == &[Setting::CertFile]),
            "{error:?}"
        );
        assert!(
            error
                .render("coordination")
                .contains("coordination.cert-file"),
            "{error}"
        );
    }

    #[test]
    fn a_certificate_without_its_key_is_refused() {
        let mut settings = settings("https://127.0.0.1:2379");
        settings.tls.cert_file = Some("/etc/forewarn/client.pem".into());
        let error = client_config(&settings).unwrap_err();
        assert!(error.to_string().contains("set both or neither"), "{error}");
    }
}
