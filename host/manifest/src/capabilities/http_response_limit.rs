//! `http-response-limit = "16MiB"`: how much of a response body `http-send` hands over (a
//! longer body is cut); 1 MiB by default, at most
//! [`HTTP_RESPONSE_LIMIT_MAX`] (64 MiB).

use bytesize::ByteSize;
use forewarn_pipeline::setting_error::SettingError;

/// The dotted key errors name.
pub const KEY: &str = "capabilities.http-response-limit";

/// The default cap on a response body handed to a plugin: 1 MiB; the rest is not read.
pub const DEFAULT_HTTP_RESPONSE_LIMIT: usize = 1024 * 1024;

/// The largest `http-response-limit` a manifest may set: 64 MiB. The body is held in the
/// daemon's memory and then copied into the plugin's, once per call.
pub const HTTP_RESPONSE_LIMIT_MAX: usize = 64 * 1024 * 1024;

/// How much of a response body `http-send` hands to a plugin; a longer body is cut at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpResponseLimit(usize);

impl Default for HttpResponseLimit {
    fn default() -> Self {
        HttpResponseLimit(DEFAULT_HTTP_RESPONSE_LIMIT)
    }
}

impl HttpResponseLimit {
    /// A limit of `bytes`, when it is more than zero and at most [`HTTP_RESPONSE_LIMIT_MAX`].
    pub fn new(bytes: u64) -> Option<HttpResponseLimit> {
        let bytes = usize::try_from(bytes).ok()?;
        (1..=HTTP_RESPONSE_LIMIT_MAX)
            .contains(&bytes)
            .then_some(HttpResponseLimit(bytes))
    }

    /// The limit in bytes.
    pub fn bytes(self) -> usize {
        self.0
    }
}

/// The limit is between 1 byte and the hard limit.
pub(crate) fn check(limit: Option<ByteSize>) -> Result<(), SettingError> {
    match limit {
        Some(limit) if HttpResponseLimit::new(limit.as_u64()).is_none() => Err(SettingError::new(
            KEY,
            format!(
                "{limit} is not between 1 byte and the hard limit of {} (64 MiB); use e.g. \
                 \"16MiB\"",
                ByteSize::b(HTTP_RESPONSE_LIMIT_MAX as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_response_limit_is_more_than_zero_and_at_most_64_mib() {
        assert_eq!(HttpResponseLimit::default().bytes(), 1024 * 1024);
        assert_eq!(
            HttpResponseLimit::new(64 * 1024 * 1024).unwrap().bytes(),
            64 << 20
        );
        assert_eq!(HttpResponseLimit::new(64 * 1024 * 1024 + 1), None);
        assert_eq!(HttpResponseLimit::new(0), None);
    }
}
