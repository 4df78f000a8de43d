//! How much of a response body `http-send` hands to a plugin (`http-response-limit`).

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
