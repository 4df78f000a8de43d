//! `http-response-limit = "16MiB"`: how much of a response body `http-send` hands over (a
//! longer body is cut); 1 MiB by default, at most
//! [`forewarn_runtime::HTTP_RESPONSE_LIMIT_MAX`] (64 MiB).

use bytesize::ByteSize;
use forewarn_pipeline::setting_error::SettingError;
use forewarn_runtime::HttpResponseLimit;

/// The dotted key errors name.
pub const KEY: &str = "capabilities.http-response-limit";

/// The limit is between 1 byte and the hard limit.
pub(crate) fn check(limit: Option<ByteSize>) -> Result<(), SettingError> {
    match limit {
        Some(limit) if HttpResponseLimit::new(limit.as_u64()).is_none() => Err(SettingError::new(
            KEY,
            format!(
                "{limit} is not between 1 byte and the hard limit of {} (64 MiB); use e.g. \
                 \"16MiB\"",
                ByteSize::b(forewarn_runtime::HTTP_RESPONSE_LIMIT_MAX as u64)
            ),
        )),
        _ => Ok(()),
    }
}

/// The limit the runtime applies: the manifest's, else the default.
pub(crate) fn granted(limit: Option<ByteSize>) -> HttpResponseLimit {
    limit
        .and_then(|limit| HttpResponseLimit::new(limit.as_u64()))
        .unwrap_or_default()
}

/// The limit as the consent and the lock file state it.
pub(crate) fn summary(limit: Option<ByteSize>) -> ByteSize {
    ByteSize::b(granted(limit).bytes() as u64)
}

/// The consent's line.
pub(crate) fn consent(limit: ByteSize) -> String {
    format!("  HTTP response bodies read up to: {limit}")
}

/// How `new` grants more than `old`, if it does.
pub(crate) fn wider(new: ByteSize, old: ByteSize) -> Option<String> {
    (new > old).then(|| format!("http-response-limit: {old} -> {new}"))
}

/// The upgrade's line, if it changed.
pub(crate) fn changes(new: ByteSize, old: ByteSize) -> Option<String> {
    (new != old).then(|| format!("~ http-response-limit: {old} -> {new}"))
}
