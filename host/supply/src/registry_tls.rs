//! How forewarn trusts a registry's certificate, and what it says when it does not.
//!
//! https:// is verified against the system's CAs and those of `--ca-file`. A certificate in
//! `--ca-file` that is the registry's own self-signed one is trusted as itself (its host
//! names still checked): webpki refuses such a certificate when it says `CA:TRUE`, as
//! `openssl req -x509` makes it by default, though `curl --cacert` takes it.
//!
//! A connection that fails is described with the fix that applies: `--plain-http` for a
//! registry that answers in plain HTTP, `--ca-file` when none was given, and, when one was,
//! what is wrong with it (not the CA of the registry's certificate, or a certificate for
//! another host).

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use url::Url;

use crate::error::SupplyError;

/// The TLS settings of a registry client: the system's CAs and those of `ca_file`, and the
/// certificates of `ca_file` trusted as themselves.
pub(crate) fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, SupplyError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let given = match ca_file {
        Some(ca_file) => read_ca_file(ca_file)?,
        None => Vec::new(),
    };
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    for certificate in &given {
        roots
            .add(certificate.clone())
            .map_err(|error| unreadable(ca_file, error.to_string()))?;
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|error| SupplyError::Usage(format!("cannot set up TLS: {error}")))?;
    let verifier = RegistryVerifier {
        webpki,
        given,
        provider: provider.clone(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| SupplyError::Usage(format!("cannot set up TLS: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

fn unreadable(ca_file: Option<&Path>, problem: String) -> SupplyError {
    SupplyError::Usage(format!(
        "--ca-file {}: {problem}; pass the PEM file of the CA that signed the registry's \
         certificate (or, for a self-signed registry, its certificate)",
        ca_file
            .map(Path::display)
            .map(|path| path.to_string())
            .unwrap_or_default()
    ))
}

/// The certificates of a `--ca-file` (at least one).
fn read_ca_file(ca_file: &Path) -> Result<Vec<CertificateDer<'static>>, SupplyError> {
    let certificates = CertificateDer::pem_file_iter(ca_file)
        .map_err(|error| unreadable(Some(ca_file), error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| unreadable(Some(ca_file), error.to_string()))?;
    if certificates.is_empty() {
        return Err(unreadable(
            Some(ca_file),
            "it holds no PEM certificate".into(),
        ));
    }
    Ok(certificates)
}

/// webpki's verification, and besides it: a certificate the operator gave in `--ca-file`,
/// byte for byte, is trusted as itself for the host names it has.
#[derive(Debug)]
struct RegistryVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    given: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for RegistryVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(refused) => refused,
        };
        // Only a refusal of where the certificate comes from: no CA issued it, or it is a
        // CA itself (webpki's CaUsedAsEndEntity, an `Other`). webpki checks the validity
        // period before either, so a certificate refused so is within its dates; one
        // refused for its dates, its encoding or its names stays refused.
        let anchoring = matches!(
            refused,
            rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer | CertificateError::Other(_)
            )
        );
        let given = self
            .given
            .iter()
            .any(|certificate| certificate.as_ref() == end_entity.as_ref());
        if !(anchoring && given) {
            return Err(refused);
        }
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Why a connection to `url` failed, and the fix: (problem, fix).
pub(crate) fn describe_client_error(
    error: &hyper_util::client::legacy::Error,
    url: &Url,
    ca_file: Option<&PathBuf>,
) -> (String, String) {
    let origin = url.origin().ascii_serialization();
    let mut causes = format!("cannot reach {origin}");
    let mut tls = None;
    let mut source: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(cause) = source {
        let message = cause.to_string();
        if !causes.contains(&message) {
            causes.push_str(": ");
            causes.push_str(&message);
        }
        tls = tls.or_else(|| rustls_error(cause));
        source = cause.source();
    }
    let reachable = "Check that the registry is reachable and try again".to_owned();
    let Some(tls) = tls else {
        return (causes, reachable);
    };
    let host = url.host_str().unwrap_or_default();
    let ca = ca_file.map(|path| path.display().to_string());
    match tls {
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => (
            format!("{origin} answered in plain HTTP, not TLS ({causes})"),
            "The registry speaks plain http://, not https://: pass --plain-http".to_owned(),
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => (
            format!("the registry's certificate is not for the host {host} ({causes})"),
            format!(
                "The certificate is trusted but names other hosts: name the registry by a \
                 host its certificate has, or have its certificate issued for {host}"
            ),
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => (
            format!("the registry's certificate is outside its validity period ({causes})"),
            "Check this machine's clock; if it is right, the registry's certificate must be \
             renewed (tell its operator)"
                .to_owned(),
        ),
        rustls::Error::InvalidCertificate(_) => match ca {
            None => (
                format!(
                    "the registry's certificate is not issued by a CA this machine trusts \
                     ({causes})"
                ),
                "For a registry with a private CA, pass --ca-file CA.pem (the CA's \
                 certificate); for a self-signed registry, pass its certificate itself"
                    .to_owned(),
            ),
            Some(ca) => (
                format!(
                    "the registry's certificate is issued by none of the CAs in --ca-file {ca} \
                     (nor the system's), and is not itself one of its certificates ({causes})"
                ),
                format!(
                    "--ca-file {ca} is not the CA of this registry: pass the certificate of \
                     the CA that issued the registry's, or, for a self-signed registry, the \
                     very certificate it presents (`openssl s_client -connect \
                     {host}:{port} -showcerts </dev/null` shows it)",
                    port = url.port_or_known_default().unwrap_or(443)
                ),
            ),
        },
        _ => (causes, reachable),
    }
}

/// The rustls error `cause` is, or carries: an I/O error wraps it (hyper-rustls wraps
/// tokio-rustls's I/O error in another), and an I/O error's `source` skips what it wraps.
fn rustls_error(cause: &(dyn StdError + 'static)) -> Option<rustls::Error> {
    if let Some(error) = cause.downcast_ref::<rustls::Error>() {
        return Some(error.clone());
    }
    let wrapped = cause.downcast_ref::<std::io::Error>()?.get_ref()?;
    rustls_error(wrapped)
}
