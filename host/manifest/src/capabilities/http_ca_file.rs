//! `http-ca-file = "ca.pem"`: a PEM file of CAs `http-send` trusts for https:// besides the
//! system's (private endpoints), read when the manifest is loaded under the manifest's own
//! rules (a regular file no one else may write); a relative path is relative to the
//! manifest's directory.

use forewarn_pipeline::setting_error::SettingError;
use std::path::Path;

use forewarn_platform::trust::{self, FileRules, Owners, TrustError};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::shown;

/// The dotted key errors name.
pub const KEY: &str = "capabilities.http-ca-file";
/// Largest `http-ca-file` read: far more than a bundle of every public CA.
const CA_FILE_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// Refuses a path that would rewrite the operator's terminal.
pub(crate) fn refuse_text_that_moves(file: Option<&Path>) -> Result<(), SettingError> {
    let shown_path = file.map(|path| path.to_string_lossy().into_owned());
    shown::refuse_text_that_moves(KEY, shown_path.as_slice(), "it is the path of a PEM file")
}

/// The certificates of `file` (none without it), read in `dir` if relative.
pub(crate) fn read(
    file: Option<&Path>,
    dir: &Path,
) -> Result<Vec<CertificateDer<'static>>, SettingError> {
    let Some(file) = file else {
        return Ok(Vec::new());
    };
    let path = dir.join(file);
    let fix = "set it to the PEM file of the CA that signed the server's certificate (a \
               relative path is relative to the manifest's directory)";
    let rules = FileRules {
        owners: Owners::DaemonOrRoot,
        max_bytes: CA_FILE_MAX_BYTES,
        max_setting: "http-ca-file",
    };
    let pem = trust::read_trusted_file(&path, rules).map_err(|error| {
        let problem = match error {
            TrustError::TooLarge { size, limit, .. } => format!(
                "{} is {size} bytes, more than the {limit} bytes a CA file may have; keep only \
                 the CAs the plugin needs",
                path.display()
            ),
            other => format!("{other}; {fix}"),
        };
        SettingError::new(KEY, problem)
    })?;
    ca_certificates(&pem)
        .map_err(|problem| SettingError::new(KEY, format!("{}: {problem}; {fix}", path.display())))
}

/// Why a PEM file meant for `http-ca-file` is refused (the caller names the key and path).
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    /// The PEM is malformed.
    #[error("it is not a valid PEM file: {0}")]
    NotPem(String),
    /// A valid PEM with no certificate in it.
    #[error("it holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")")]
    NoCertificate,
    /// A certificate rustls cannot use as a trust anchor.
    #[error("its certificate number {number} is not usable as a CA: {error}")]
    NotACa {
        /// Its place in the file, from 1.
        number: usize,
        /// What rustls said.
        error: String,
    },
}

/// The certificates of a PEM file meant for `http-ca-file`: at least one, each usable as a
/// trusted CA. The error says what is wrong with the file (the caller names key and path).
pub fn ca_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, CaFileError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| CaFileError::NotPem(error.to_string()))?;
    if certificates.is_empty() {
        return Err(CaFileError::NoCertificate);
    }
    let mut check = RootCertStore::empty();
    for (index, certificate) in certificates.iter().enumerate() {
        check
            .add(certificate.clone())
            .map_err(|error| CaFileError::NotACa {
                number: index + 1,
                error: error.to_string(),
            })?;
    }
    Ok(certificates)
}

/// The consent's line, when extra CAs are trusted.
pub(crate) fn consent(trusted: bool) -> Option<String> {
    trusted.then(|| "  extra CAs for https:// (http-ca-file): yes".to_owned())
}

/// How `new` grants more than `old`, if it does.
pub(crate) fn wider(new: bool, old: bool) -> Option<String> {
    (new && !old).then(|| "http-ca-file: extra CAs trusted for https://".to_owned())
}

/// The upgrade's line, if it changed.
pub(crate) fn changes(new: bool, old: bool) -> Option<String> {
    (new != old).then(|| format!("{} http-ca-file", if new { "+" } else { "-" }))
}
