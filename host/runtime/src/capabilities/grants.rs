//! What the manifest grants a plugin, one field (or group of fields) per capability: data
//! only; each unit checks its requests against its own fields.

use rustls::pki_types::CertificateDer;

use super::http::response_limit::HttpResponseLimit;

/// What one plugin may use: set by the operator in its manifest, denied by default. One
/// field (or group of fields) per capability; each unit checks requests against its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// May call `set-ready` (the `readiness` unit).
    pub readiness: bool,
    /// `host:port` pairs `http-send` may reach (the `http` unit).
    pub http: Vec<String>,
    /// Names of operator-defined actions `run-action` may run (the `actions` unit).
    pub actions: Vec<String>,
    /// Resources (token audiences) `azure-access-token` may ask a token for (the `identity` unit).
    pub azure_identity: Vec<String>,
    /// CAs `http-send` trusts for https:// besides the system's (`http-ca-file`).
    pub http_roots: Vec<CertificateDer<'static>>,
    /// How much of a response body `http-send` hands over (`http-response-limit`).
    pub http_response_limit: HttpResponseLimit,
}
