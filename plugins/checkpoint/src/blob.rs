//! checkpoint's Blob Storage mode as pure functions: its settings, the blob's name and URL,
//! and how to read the Blob service's answers; tested natively.

/// The Blob service REST version the requests name.
pub(crate) const STORAGE_VERSION: &str = "2021-08-06";

/// Where a checkpoint goes in Blob Storage and where its bytes come from and go back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobSettings {
    /// `https://ACCOUNT.blob.core.windows.net/CONTAINER`, without a trailing slash.
    pub(crate) container_url: String,
    /// The blob name's key; `None` means the VM name.
    pub(crate) workload: Option<String>,
    /// GET here returns the checkpoint's bytes once the checkpoint is done.
    pub(crate) data_url: String,
    /// PUT here hands the restored bytes back to the workload; `None`: nothing is restored.
    pub(crate) restore_data_url: Option<String>,
}

/// A Blob mode setting that cannot work, named with its fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BlobConfigError {
    #[error(
        "checkpoint config `blob-container-url` = \"{0}\" is not an https:// URL: write it as \"https://ACCOUNT.blob.core.windows.net/CONTAINER\" (managed identity tokens are only sent over HTTPS)"
    )]
    NotHttps(String),
    #[error(
        "checkpoint config `blob-container-url` = \"{0}\" names no container: add it after the host, as in \"https://ACCOUNT.blob.core.windows.net/CONTAINER\""
    )]
    NoContainer(String),
    #[error(
        "checkpoint config `blob-container-url` = \"{0}\" has a query or fragment: remove it (no SAS token is needed, the VM's managed identity signs in)"
    )]
    HasQuery(String),
    #[error(
        "checkpoint config `blob-container-url` = \"{url}\": the container name \"{name}\" is not valid in Azure: use 3 to 63 lower-case letters, digits and single hyphens"
    )]
    BadContainerName { url: String, name: String },
    #[error(
        "checkpoint config `blob-container-url` is set but `checkpoint-data-url` is not: set it to the workload URL that answers GET with the checkpoint's bytes"
    )]
    NoDataUrl,
    #[error(
        "checkpoint `workload` name \"{0}\" cannot be part of a blob name: set `workload` in [config] to letters, digits, '-', '_' and '.' (1 to 200)"
    )]
    BadWorkload(String),
}

impl BlobSettings {
    /// Reads `blob-container-url`, `checkpoint-data-url`, `restore-data-url` and `workload`
    /// through `value` (blank values already removed); `Ok(None)` when Blob mode is off.
    pub(crate) fn from_values(
        value: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, BlobConfigError> {
        let Some(url) = value("blob-container-url") else {
            return Ok(None);
        };
        let container_url = check_container_url(url.trim())?;
        let data_url = value("checkpoint-data-url").ok_or(BlobConfigError::NoDataUrl)?;
        let workload = value("workload").map(|name| name.trim().to_owned());
        if let Some(name) = &workload {
            check_workload(name)?;
        }
        Ok(Some(BlobSettings {
            container_url,
            workload,
            data_url,
            restore_data_url: value("restore-data-url"),
        }))
    }

    /// The checkpoint blob's URL for this VM (`vm_name` when `workload` is not set).
    pub(crate) fn blob_url(&self, vm_name: &str) -> Result<String, BlobConfigError> {
        let workload = self.workload.as_deref().unwrap_or(vm_name);
        check_workload(workload)?;
        Ok(format!("{}/{}", self.container_url, blob_name(workload)))
    }

    /// The URL that creates the container.
    pub(crate) fn create_container_url(&self) -> String {
        format!("{}?restype=container", self.container_url)
    }
}

/// The blob that holds the latest checkpoint of `workload`.
pub(crate) fn blob_name(workload: &str) -> String {
    format!("forewarn/checkpoints/{workload}/latest")
}

/// `url` without a trailing slash, if it is an https URL whose path ends in a valid container.
fn check_container_url(url: &str) -> Result<String, BlobConfigError> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(BlobConfigError::NotHttps(url.to_owned()));
    };
    if url.contains(['?', '#']) {
        return Err(BlobConfigError::HasQuery(url.to_owned()));
    }
    let trimmed = rest.trim_end_matches('/');
    let Some((_host, path)) = trimmed.split_once('/') else {
        return Err(BlobConfigError::NoContainer(url.to_owned()));
    };
    let name = path.rsplit('/').next().unwrap_or_default();
    if !is_container_name(name) {
        return Err(BlobConfigError::BadContainerName {
            url: url.to_owned(),
            name: name.to_owned(),
        });
    }
    Ok(format!("https://{trimmed}"))
}

/// Azure's container name rule: 3 to 63 of `a-z0-9-`, starting and ending with a letter or
/// digit, no two hyphens in a row.
fn is_container_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

fn check_workload(name: &str) -> Result<(), BlobConfigError> {
    let usable = (1..=200).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name != "."
        && name != "..";
    if usable {
        Ok(())
    } else {
        Err(BlobConfigError::BadWorkload(name.to_owned()))
    }
}

/// What a PUT of the blob came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Upload {
    Stored,
    /// 404 ContainerNotFound: create the container and try once more.
    NoContainer,
    Failed(String),
}

/// Reads the answer to `PUT blob`: 2xx stored; 404 `ContainerNotFound` no container; anything
/// else a failure naming the status, Azure's error code and, where known, the fix.
pub(crate) fn read_upload_answer(status: u16, error_code: Option<&str>) -> Upload {
    if (200..300).contains(&status) {
        return Upload::Stored;
    }
    if status == 404 && error_code == Some("ContainerNotFound") {
        return Upload::NoContainer;
    }
    Upload::Failed(service_failure("upload", status, error_code))
}

/// Reads the answer to `PUT container`: created, or already there (409), is fine.
pub(crate) fn read_create_container_answer(
    status: u16,
    error_code: Option<&str>,
) -> Result<(), String> {
    if (200..300).contains(&status) || error_code == Some("ContainerAlreadyExists") {
        return Ok(());
    }
    Err(service_failure("container creation", status, error_code))
}

/// What a GET of the blob came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Download {
    Found,
    /// 404: no checkpoint was ever uploaded for this workload (or the container is missing).
    Nothing,
    Failed(String),
}

/// Reads the answer to `GET blob`: 200 found, 404 nothing to restore, anything else a failure.
pub(crate) fn read_download_answer(status: u16, error_code: Option<&str>) -> Download {
    match status {
        200 => Download::Found,
        404 => Download::Nothing,
        _ => Download::Failed(service_failure("download", status, error_code)),
    }
}

/// "Blob Storage <what> answered 403 (AuthorizationPermissionMismatch): <fix>".
fn service_failure(what: &str, status: u16, error_code: Option<&str>) -> String {
    let code = error_code.unwrap_or("no x-ms-error-code");
    let fix = match error_code {
        Some(
            "AuthorizationPermissionMismatch"
            | "AuthorizationFailure"
            | "AuthenticationFailed"
            | "InvalidAuthenticationInfo",
        ) => {
            ": give the VM's managed identity the role \"Storage Blob Data Contributor\" on the container"
        }
        _ if status >= 500 || status == 408 => ": the service is busy; asking again",
        _ => "",
    };
    format!("Blob Storage {what} answered {status} ({code}){fix}")
}

/// Checks that a body was not cut at the plugin's `http-response-limit`: `Err` when the
/// `content-length` the server sent is more than the bytes received.
pub(crate) fn check_complete(content_length: Option<&str>, received: usize) -> Result<(), String> {
    let Some(expected) = content_length.and_then(|text| text.trim().parse::<usize>().ok()) else {
        return Ok(());
    };
    if expected > received {
        return Err(format!(
            "the answer was cut at {received} of {expected} bytes: raise `http-response-limit` in [capabilities] of checkpoint.toml (up to \"64MiB\")"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Option<BlobSettings>, BlobConfigError> {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        BlobSettings::from_values(|key| map.get(key).map(|v| (*v).to_owned()))
    }

    const DATA: (&str, &str) = ("checkpoint-data-url", "http://127.0.0.1:8080/data");

    #[test]
    fn blob_mode_is_off_without_a_container_url() {
        assert_eq!(settings(&[DATA]), Ok(None));
    }

    #[test]
    fn blob_urls_name_the_workload_or_the_vm() {
        let parsed = settings(&[
            (
                "blob-container-url",
                "https://acct.blob.core.windows.net/ckpts/",
            ),
            DATA,
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            parsed.blob_url("vm-a").unwrap(),
            "https://acct.blob.core.windows.net/ckpts/forewarn/checkpoints/vm-a/latest"
        );
        assert_eq!(
            parsed.create_container_url(),
            "https://acct.blob.core.windows.net/ckpts?restype=container"
        );
        let named = BlobSettings {
            workload: Some("db_1".into()),
            ..parsed.clone()
        };
        assert!(named.blob_url("vm-a").unwrap().ends_with("/db_1/latest"));
        assert_eq!(
            parsed.blob_url("a/b"),
            Err(BlobConfigError::BadWorkload("a/b".into()))
        );
        // Azurite's path-style endpoint: account, then container.
        let azurite = settings(&[
            (
                "blob-container-url",
                "https://127.0.0.1:10000/devstoreaccount1/checkpoints",
            ),
            DATA,
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            azurite.blob_url("vm-a").unwrap(),
            "https://127.0.0.1:10000/devstoreaccount1/checkpoints/forewarn/checkpoints/vm-a/latest"
        );
        assert_eq!(blob_name("w"), "forewarn/checkpoints/w/latest");
    }

    #[test]
    fn bad_blob_settings_name_the_fix() {
        let cases = [
            ("http://acct.blob.core.windows.net/c1c", "https://"),
            ("https://acct.blob.core.windows.net", "names no container"),
            ("https://acct.blob.core.windows.net/c1c?sv=x", "SAS"),
            ("https://acct.blob.core.windows.net/Big", "lower-case"),
            ("https://acct.blob.core.windows.net/a--b", "lower-case"),
        ];
        for (url, expected) in cases {
            let error = settings(&[("blob-container-url", url), DATA]).unwrap_err();
            assert!(error.to_string().contains(expected), "{url}: {error}");
        }
        let error = settings(&[("blob-container-url", "https://a.b/c1c")]).unwrap_err();
        assert_eq!(error, BlobConfigError::NoDataUrl);
        assert!(error.to_string().contains("checkpoint-data-url"));
        let error = settings(&[
            ("blob-container-url", "https://a.b/c1c"),
            DATA,
            ("workload", "x y"),
        ])
        .unwrap_err();
        assert!(error.to_string().contains("set `workload`"), "{error}");
    }

    #[test]
    fn upload_answers() {
        assert_eq!(read_upload_answer(201, None), Upload::Stored);
        assert_eq!(
            read_upload_answer(404, Some("ContainerNotFound")),
            Upload::NoContainer
        );
        assert_eq!(
            read_upload_answer(403, Some("AuthorizationPermissionMismatch")),
            Upload::Failed(
                "Blob Storage upload answered 403 (AuthorizationPermissionMismatch): give the VM's managed identity the role \"Storage Blob Data Contributor\" on the container".into()
            )
        );
        assert_eq!(
            read_upload_answer(503, Some("ServerBusy")),
            Upload::Failed(
                "Blob Storage upload answered 503 (ServerBusy): the service is busy; asking again"
                    .into()
            )
        );
        assert_eq!(
            read_upload_answer(400, None),
            Upload::Failed("Blob Storage upload answered 400 (no x-ms-error-code)".into())
        );
        assert_eq!(read_create_container_answer(201, None), Ok(()));
        assert_eq!(
            read_create_container_answer(409, Some("ContainerAlreadyExists")),
            Ok(())
        );
        assert!(read_create_container_answer(409, Some("ContainerBeingDeleted")).is_err());
    }

    #[test]
    fn download_answers() {
        assert_eq!(read_download_answer(200, None), Download::Found);
        assert_eq!(
            read_download_answer(404, Some("BlobNotFound")),
            Download::Nothing
        );
        assert!(matches!(
            read_download_answer(403, Some("AuthorizationFailure")),
            Download::Failed(reason) if reason.contains("Storage Blob Data Contributor")
        ));
    }

    #[test]
    fn a_cut_body_is_noticed() {
        assert_eq!(check_complete(None, 10), Ok(()));
        assert_eq!(check_complete(Some("10"), 10), Ok(()));
        let error = check_complete(Some("2000000"), 1_048_576).unwrap_err();
        assert!(error.contains("http-response-limit"), "{error}");
    }
}
