//! Managed-identity access tokens from IMDS (`/metadata/identity/oauth2/token`): the answer's
//! parser and the errors an operator can act on; the request itself is `ImdsClient`'s.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The api-version of the identity endpoint.
pub(crate) const IDENTITY_API_VERSION: &str = "2018-02-01";

/// A token the identity endpoint issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityToken {
    /// `access_token`: the bearer token.
    pub access_token: String,
    /// `expires_on` (or now + `expires_in` when only that is given).
    pub expires_on: SystemTime,
}

/// A 200 answer of the identity endpoint without a usable token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "IMDS sent a token answer forewarn cannot read: {problem} ({length} bytes; not quoted, it may hold a token)"
)]
pub struct MalformedToken {
    /// What is wrong with it.
    pub problem: &'static str,
    /// The answer's length.
    pub length: usize,
}

/// An OAuth error answer of the identity endpoint: no identity assigned, an unknown client
/// id, a bad resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "IMDS refused the token request with {status} {error}: \"{description}\" (assign a managed identity to the VM, check `identity.client-id` and the resource the plugin asks for)"
)]
pub struct TokenRefusal {
    /// The HTTP status.
    pub status: u16,
    /// The OAuth `error` code, e.g. "invalid_request".
    pub error: String,
    /// Its `error_description`, e.g. "Identity not found".
    pub description: String,
}

/// Reads a 200 answer of the identity endpoint; `now` resolves a relative `expires_in`.
pub fn parse_identity_token(body: &str, now: SystemTime) -> Result<IdentityToken, MalformedToken> {
    let malformed = |problem| MalformedToken {
        problem,
        length: body.len(),
    };
    let value: Value = serde_json::from_str(body).map_err(|_| malformed("not JSON"))?;
    let access_token = value
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| malformed("no access_token"))?
        .to_owned();
    let expires_on = seconds(value.get("expires_on"))
        .map(|seconds| UNIX_EPOCH + Duration::from_secs(seconds))
        .or_else(|| {
            seconds(value.get("expires_in")).map(|seconds| now + Duration::from_secs(seconds))
        })
        .ok_or_else(|| malformed("no expires_on or expires_in"))?;
    Ok(IdentityToken {
        access_token,
        expires_on,
    })
}

/// Reads an error answer (any non-200 with an OAuth error body) into `Refused`; None when the
/// body is not an OAuth error.
pub(crate) fn parse_identity_refusal(status: u16, body: &str) -> Option<TokenRefusal> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error").and_then(Value::as_str)?.to_owned();
    let description = value
        .get("error_description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(TokenRefusal {
        status,
        error,
        description,
    })
}

/// A number of seconds sent as a number or as a string of digits (IMDS sends strings).
fn seconds(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azures_answer_is_read_with_string_numbers() {
        let body = r#"{"access_token":"eyJ0.eyJ1.sig","client_id":"c","expires_in":"86399",
            "expires_on":"1700086399","ext_expires_in":"86399","not_before":"1700000000",
            "resource":"https://storage.azure.com/","token_type":"Bearer"}"#;
        let token = parse_identity_token(body, UNIX_EPOCH).unwrap();
        assert_eq!(token.access_token, "eyJ0.eyJ1.sig");
        assert_eq!(
            token.expires_on,
            UNIX_EPOCH + Duration::from_secs(1_700_086_399)
        );
    }

    #[test]
    fn expires_in_alone_counts_from_now() {
        let now = UNIX_EPOCH + Duration::from_secs(100);
        let token = parse_identity_token(r#"{"access_token":"t","expires_in":60}"#, now).unwrap();
        assert_eq!(token.expires_on, now + Duration::from_secs(60));
    }

    #[test]
    fn unusable_answers_name_what_is_missing() {
        let rows = [
            ("<html>", "not JSON"),
            (r#"{"expires_on":"1"}"#, "no access_token"),
            (r#"{"access_token":"","expires_on":"1"}"#, "no access_token"),
            (
                r#"{"access_token":"SECRET"}"#,
                "no expires_on or expires_in",
            ),
        ];
        for (body, problem) in rows {
            let error = parse_identity_token(body, UNIX_EPOCH).unwrap_err();
            assert_eq!(error.problem, problem, "{body}");
            assert!(
                !error.to_string().contains("SECRET"),
                "the answer is quoted: {error}"
            );
        }
    }

    #[test]
    fn an_oauth_error_becomes_refused_with_its_description() {
        let body = r#"{"error":"invalid_request","error_description":"Identity not found"}"#;
        let refused = parse_identity_refusal(400, body).unwrap();
        assert_eq!(
            refused,
            TokenRefusal {
                status: 400,
                error: "invalid_request".into(),
                description: "Identity not found".into()
            }
        );
        assert!(refused.to_string().contains("assign a managed identity"));
        assert_eq!(parse_identity_refusal(500, "oops"), None);
    }
}
