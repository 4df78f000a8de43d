//! What a registry sends, read within bounds: every body under a size limit (the
//! `Content-Length` first, then while reading), each piece within a timeout, and a blob
//! handed over only when its size and sha256 match its descriptor.

use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Response, header};

use crate::artifact::Descriptor;
use crate::error::SupplyError;
use crate::reference::Digest;

/// How long the registry may stay silent while a request or a body is read.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A size limit, with what raises it (or why it is fixed).
#[derive(Debug, Clone)]
pub struct Limit {
    /// Largest size accepted.
    pub bytes: u64,
    /// Said when it is exceeded.
    pub fix: String,
}

impl Limit {
    /// Refuses `what`, of `size` bytes, for being over the limit.
    pub fn refuse(&self, what: &str, size: u64) -> SupplyError {
        SupplyError::TooLarge {
            what: what.to_owned(),
            size,
            limit: self.bytes,
            fix: self.fix.clone(),
        }
    }

    /// `what`, of `size` bytes (as declared or read), fits under the limit.
    pub fn check(&self, what: &str, size: u64) -> Result<(), SupplyError> {
        match size > self.bytes {
            true => Err(self.refuse(what, size)),
            false => Ok(()),
        }
    }
}

/// Checks a downloaded blob's size and digest against its descriptor.
pub fn check_blob(
    bytes: &[u8],
    descriptor: &Descriptor,
    digest: &Digest,
    what: &str,
) -> Result<(), SupplyError> {
    let actual = Digest::of(bytes);
    if actual != *digest || bytes.len() as u64 != descriptor.size {
        return Err(SupplyError::DigestMismatch {
            what: format!(
                "{what} ({} bytes, {} announced)",
                bytes.len(),
                descriptor.size
            ),
            expected: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    Ok(())
}

/// Reads the body of the blob `descriptor` names: refused as soon as it passes the size the
/// descriptor announces (the caller checked that size against its limit), not at the limit.
pub(crate) async fn read_blob(
    response: Response<Incoming>,
    descriptor: &Descriptor,
    what: &str,
) -> Result<Vec<u8>, SupplyError> {
    let announced = Limit {
        bytes: descriptor.size,
        fix: String::new(),
    };
    read_capped(response, &announced, what)
        .await
        .map_err(|error| match error {
            SupplyError::TooLarge { size, .. } => SupplyError::LargerThanAnnounced {
                what: what.to_owned(),
                announced: descriptor.size,
                read: size,
            },
            other => other,
        })
}

/// Reads the whole body, at most `limit` bytes, each piece within `READ_TIMEOUT`.
pub(crate) async fn read_capped(
    response: Response<Incoming>,
    limit: &Limit,
    what: &str,
) -> Result<Vec<u8>, SupplyError> {
    let too_large = |size: u64| limit.refuse(what, size);
    let announced = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if let Some(announced) = announced
        && announced > limit.bytes
    {
        return Err(too_large(announced));
    }
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    loop {
        let frame = match tokio::time::timeout(READ_TIMEOUT, body.frame()).await {
            Err(_) => {
                return Err(SupplyError::connection(
                    what,
                    format!(
                        "the registry sent nothing for {}s after {} bytes",
                        READ_TIMEOUT.as_secs(),
                        bytes.len()
                    ),
                ));
            }
            Ok(None) => return Ok(bytes),
            Ok(Some(Err(error))) => {
                return Err(SupplyError::connection(
                    what,
                    format!(
                        "the download broke off after {} bytes ({error})",
                        bytes.len()
                    ),
                ));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if (bytes.len() + data.len()) as u64 > limit.bytes {
            return Err(too_large((bytes.len() + data.len()) as u64));
        }
        bytes.extend_from_slice(&data);
    }
}
