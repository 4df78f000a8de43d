//! TLS to etcd: the rustls client configuration (ring provider) built from
//! `coordination.ca-file`, `cert-file` and `key-file`, with errors that name the key.
//!
//! Trust: with `ca-file`, only the CAs in it (etcd clusters usually have a private CA);
//! without it, the system's CA store. The server certificate must name the endpoint's host
//! (a DNS name or an IP address in its subjectAltName).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use crate::config::CoordinationConfig;

/// Whether the section asks for TLS: an `https://` endpoint or a certificate file.
pub fn wanted(config: &CoordinationConfig) -> bool {
    config.endpoints.iter().any(|e| e.starts_with("https://"))
        || config.ca_file.is_some()
        || config.cert_file.is_some()
        || config.key_file.is_some()
}

/// The TLS client configuration for etcd; every file is read and checked. Without TLS
/// settings it trusts nothing (it is never used: every endpoint is `http://`).
pub fn client_config(config: &CoordinationConfig) -> Result<ClientConfig, String> {
    check_settings(config)?;
    let identity = match (&config.cert_file, &config.key_file) {
        (Some(cert_file), Some(key_file)) => Some((
            certificates(cert_file, "cert-file")?,
            private_key(key_file)?,
        )),
        _ => None,
    };
    let roots = if wanted(config) {
        trusted_roots(config.ca_file.as_deref())?
    } else {
        RootCertStore::empty()
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("[coordination] TLS setup: {error}"))?
        .with_root_certificates(roots);
    let Some((chain, key)) = identity else {
        return Ok(builder.with_no_client_auth());
    };
    builder.with_client_auth_cert(chain, key).map_err(|error| {
        format!(
            "keys `coordination.cert-file` and `coordination.key-file`: {error} \
             (is the key the one of that certificate?)"
        )
    })
}

/// Checks the TLS settings without reading files: certificate and key come together, and
/// certificate files go with `https://` endpoints only (with them, an `http://` endpoint
/// would send the credentials in the clear).
pub fn check_settings(config: &CoordinationConfig) -> Result<(), String> {
    if config.cert_file.is_some() != config.key_file.is_some() {
        return Err(
            "keys `coordination.cert-file` and `coordination.key-file`: set both or neither".into(),
        );
    }
    let has_files =
        config.ca_file.is_some() || config.cert_file.is_some() || config.key_file.is_some();
    let plain = config.endpoints.iter().find(|e| e.starts_with("http://"));
    match plain {
        Some(endpoint) if has_files => Err(format!(
            "key `coordination.endpoints`: \"{endpoint}\" is plain http:// but `ca-file`, \
             `cert-file` or `key-file` is set; use https:// for every endpoint (or remove the \
             certificate files)"
        )),
        _ => Ok(()),
    }
}

fn trusted_roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let Some(ca_file) = ca_file else {
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            return Err(
                "key `coordination.ca-file`: the system has no CA certificates to verify \
                 https:// endpoints with; set `ca-file` to the PEM file of etcd's CA"
                    .into(),
            );
        }
        return Ok(roots);
    };
    for certificate in certificates(ca_file, "ca-file")? {
        roots.add(certificate).map_err(|error| {
            format!(
                "key `coordination.ca-file`: {}: not a usable CA certificate: {error}",
                ca_file.display()
            )
        })?;
    }
    Ok(roots)
}

/// Every certificate in a PEM file; at least one.
fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let unreadable = |error: rustls::pki_types::pem::Error| {
        format!(
            "key `coordination.{key}`: cannot read certificates from {}: {error}",
            path.display()
        )
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(unreadable)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(unreadable)?;
    if chain.is_empty() {
        return Err(format!(
            "key `coordination.{key}`: {} holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")",
            path.display()
        ));
    }
    Ok(chain)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| {
        format!(
            "key `coordination.key-file`: cannot read a private key from {}: {error}",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parsed section (plain http, so parsing needs no files) with `endpoint` set after.
    fn section(endpoint: &str) -> CoordinationConfig {
        let mut config = crate::config::Config::parse(
            "[coordination]\nendpoints = [\"http://127.0.0.1:2379\"]\n",
        )
        .unwrap()
        .coordination
        .unwrap();
        config.endpoints = vec![endpoint.to_owned()];
        config
    }

    #[test]
    fn plain_http_needs_no_files() {
        assert!(client_config(&section("http://127.0.0.1:2379")).is_ok());
    }

    #[test]
    fn certificate_files_with_a_plain_endpoint_are_refused() {
        let mut config = section("http://127.0.0.1:2379");
        config.ca_file = Some("/nonexistent/ca.pem".into());
        let error = client_config(&config).unwrap_err();
        assert!(error.contains("use https://"), "{error}");
    }

    #[test]
    fn missing_and_empty_files_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no pem here\n").unwrap();
        let mut config = section("https://127.0.0.1:2379");
        config.ca_file = Some(dir.path().join("missing.pem"));
        let error = client_config(&config).unwrap_err();
        assert!(error.contains("coordination.ca-file"), "{error}");
        config.ca_file = Some(empty.clone());
        let error = client_config(&config).unwrap_err();
        assert!(error.contains("holds no PEM certificate"), "{error}");
        config.ca_file = None;
        config.cert_file = Some(empty.clone());
        config.key_file = Some(empty);
        let error = client_config(&config).unwrap_err();
        assert!(error.contains("coordination.cert-file"), "{error}");
    }

    #[test]
    fn a_certificate_without_its_key_is_refused() {
        let mut config = section("https://127.0.0.1:2379");
        config.cert_file = Some("/etc/forewarn/client.pem".into());
        let error = client_config(&config).unwrap_err();
        assert!(error.contains("set both or neither"), "{error}");
    }
}
