//! `http-ca-file = "ca.pem"`: a PEM file of CAs `http-send` trusts for https:// besides the
//! system's (private endpoints), read when the manifest is loaded under the manifest's own
//! rules (a regular file no one else may write); a relative path is relative to the
//! manifest's directory.

use forewarn_pipeline::setting_error::SettingError;
use std::path::Path;

use forewarn_runtime::CertificateDer;
use forewarn_runtime::trust::{self, FileRules, Owners, TrustError};

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
    forewarn_runtime::ca_certificates(&pem)
        .map_err(|problem| SettingError::new(KEY, format!("{}: {problem}; {fix}", path.display())))
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
