//! The managed identity endpoint (`GET /metadata/identity/oauth2/token`): Azure's answers,
//! and an access token shaped like Entra ID's that Azurite's OAuth "basic" check accepts.

use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::ids::stable_event_id;

/// Azure's lifetime of a fresh managed identity token, in seconds (24 h less one second).
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(86_399);

/// The tenant every simulated token names (`tid`, and `iss` as `https://sts.windows.net/<tid>/`).
pub const SIMULATED_TENANT: &str = "f0e1d2c3-b4a5-4968-8776-655443322110";

/// The `[identity]` table of a scenario: whether the VM has a managed identity, and how
/// the tokens IMDS hands out look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentitySpec {
    /// Whether a managed identity is assigned; without one every token request is answered
    /// 400 "Identity not found", as Azure does.
    #[serde(default = "assigned_by_default")]
    pub assigned: bool,
    /// How long each token lives (wall time: `--speed` does not shorten it).
    #[serde(default = "default_lifetime", with = "humantime_serde")]
    pub expires_in: Duration,
    /// The identity's client id; derived from the VM name when absent. A request naming
    /// another `client_id` gets "Identity not found".
    #[serde(default)]
    pub client_id: Option<String>,
    /// Whether the identity may restart, redeploy and simulate the eviction of its VM (a
    /// role such as Virtual Machine Contributor on it); without, Resource Manager answers
    /// those calls 403 AuthorizationFailed, as Azure does.
    #[serde(default = "assigned_by_default")]
    pub manages_vm: bool,
}

impl Default for IdentitySpec {
    fn default() -> IdentitySpec {
        IdentitySpec {
            assigned: true,
            expires_in: DEFAULT_TOKEN_LIFETIME,
            client_id: None,
            manages_vm: true,
        }
    }
}

fn assigned_by_default() -> bool {
    true
}

fn default_lifetime() -> Duration {
    DEFAULT_TOKEN_LIFETIME
}

impl IdentitySpec {
    /// The key that is wrong and why, worded for the scenario's author.
    pub(crate) fn problem(&self) -> Option<(&'static str, String)> {
        if self.expires_in < Duration::from_secs(1) {
            return Some(("expires_in", "a token lives at least \"1s\"".into()));
        }
        match &self.client_id {
            Some(id) if id.trim().is_empty() => Some((
                "client_id",
                "leave it out for an id derived from the VM name, or give a non-empty one".into(),
            )),
            _ => None,
        }
    }

    /// The identity's object (principal) id on `vm`, as its tokens name it (`oid`).
    pub(crate) fn object_id_on(vm: &str) -> String {
        uuid_like(&format!("object/{vm}"))
    }

    /// The identity's client id on `vm`.
    pub(crate) fn client_id_on(&self, vm: &str) -> String {
        match &self.client_id {
            Some(id) => id.clone(),
            None => uuid_like(&format!("client/{vm}")),
        }
    }
}

/// The query of a token request, percent-decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TokenQuery {
    pub resource: Option<String>,
    pub client_id: Option<String>,
}

impl TokenQuery {
    /// Reads `resource` and `client_id` from a raw query string.
    pub(crate) fn parse(query: Option<&str>) -> TokenQuery {
        let mut parsed = TokenQuery::default();
        for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match key.as_ref() {
                "resource" => parsed.resource = Some(value.into_owned()),
                "client_id" => parsed.client_id = Some(value.into_owned()),
                _ => {}
            }
        }
        parsed
    }
}

/// How IMDS answers a well-formed token request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenAnswer {
    /// 200 with this JSON.
    Token(serde_json::Value),
    /// 400: no `resource` in the query.
    MissingResource,
    /// 400: no identity is assigned, or not the one `client_id` names.
    IdentityNotFound,
}

impl TokenAnswer {
    /// The HTTP status and JSON body Azure sends for this answer.
    pub(crate) fn status_and_body(self) -> (StatusCode, serde_json::Value) {
        match self {
            TokenAnswer::Token(body) => (StatusCode::OK, body),
            TokenAnswer::MissingResource => (
                StatusCode::BAD_REQUEST,
                oauth_error("Required query variable 'resource' is missing"),
            ),
            TokenAnswer::IdentityNotFound => {
                (StatusCode::BAD_REQUEST, oauth_error("Identity not found"))
            }
        }
    }
}

/// Azure's OAuth error body for the identity endpoint.
pub(crate) fn oauth_error(description: &str) -> serde_json::Value {
    json!({ "error": "invalid_request", "error_description": description })
}

/// The VM a token is issued on: its name and ARM resource id (`xms_mirid`).
pub(crate) struct TokenSubject<'a> {
    pub vm: &'a str,
    pub resource_id: &'a str,
}

/// The answer to a token request for `subject` at Unix second `now`.
pub(crate) fn answer(
    spec: &IdentitySpec,
    subject: &TokenSubject<'_>,
    query: &TokenQuery,
    now: u64,
) -> TokenAnswer {
    let Some(resource) = query.resource.as_deref().filter(|text| !text.is_empty()) else {
        return TokenAnswer::MissingResource;
    };
    let client_id = spec.client_id_on(subject.vm);
    let other_identity = query
        .client_id
        .as_deref()
        .is_some_and(|asked| !asked.eq_ignore_ascii_case(&client_id));
    if !spec.assigned || other_identity {
        return TokenAnswer::IdentityNotFound;
    }
    let lifetime = spec.expires_in.as_secs();
    let expires_on = now + lifetime;
    let claims = Claims {
        resource,
        client_id: &client_id,
        object_id: &IdentitySpec::object_id_on(subject.vm),
        resource_id: subject.resource_id,
        issued_at: now,
        expires_on,
    };
    TokenAnswer::Token(json!({
        "access_token": access_token(&claims),
        "client_id": client_id,
        "expires_in": lifetime.to_string(),
        "expires_on": expires_on.to_string(),
        "ext_expires_in": lifetime.to_string(),
        "not_before": now.to_string(),
        "resource": resource,
        "token_type": "Bearer",
    }))
}

/// What a token says about itself.
struct Claims<'a> {
    resource: &'a str,
    client_id: &'a str,
    object_id: &'a str,
    resource_id: &'a str,
    issued_at: u64,
    expires_on: u64,
}

/// A JWT shaped like a v1 managed identity token: RS256 header, Entra ID's claims, and a
/// signature that is only the right length (nothing checks it: Azurite's "basic" OAuth
/// reads the claims, and forewarn never looks inside).
fn access_token(claims: &Claims<'_>) -> String {
    let issuer = format!("https://sts.windows.net/{SIMULATED_TENANT}/");
    let kid = "forewarn-simulator-key";
    let header = json!({ "typ": "JWT", "alg": "RS256", "x5t": kid, "kid": kid });
    let payload = json!({
        "aud": claims.resource,
        "iss": issuer,
        "iat": claims.issued_at,
        "nbf": claims.issued_at,
        "exp": claims.expires_on,
        "aio": "simulated",
        "appid": claims.client_id,
        "appidacr": "2",
        "idp": issuer,
        "idtyp": "app",
        "oid": claims.object_id,
        "sub": claims.object_id,
        "tid": SIMULATED_TENANT,
        "uti": URL_SAFE_NO_PAD.encode(&digest(&format!("{}/{}", claims.resource, claims.issued_at))[..16]),
        "ver": "1.0",
        "xms_mirid": claims.resource_id,
    });
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string())
    );
    let signature: Vec<u8> = (0..8u8)
        .flat_map(|round| digest(&format!("{round}/{signed}")))
        .collect();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// The claims of a bearer token this simulator issued (`aud`, `oid`, …); None for anything
/// else.
pub(crate) fn token_claims(token: &str) -> Option<serde_json::Value> {
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims["iss"]
        .as_str()
        .is_some_and(|issuer| issuer.contains(SIMULATED_TENANT))
        .then_some(claims)
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// A lowercase UUID-looking id, stable for `seed` (Azure writes identity ids in lowercase).
fn uuid_like(seed: &str) -> String {
    stable_event_id(&format!("identity/{seed}"), 0).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn subject() -> TokenSubject<'static> {
        TokenSubject {
            vm: "vm-a",
            resource_id: "/subscriptions/0/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm-a",
        }
    }

    fn query(resource: Option<&str>, client_id: Option<&str>) -> TokenQuery {
        TokenQuery {
            resource: resource.map(str::to_owned),
            client_id: client_id.map(str::to_owned),
        }
    }

    fn token_body(spec: &IdentitySpec, query: &TokenQuery) -> serde_json::Value {
        match answer(spec, &subject(), query, NOW) {
            TokenAnswer::Token(body) => body,
            other => panic!("expected a token, got {other:?}"),
        }
    }

    fn decode_part(part: &str) -> serde_json::Value {
        let bytes = URL_SAFE_NO_PAD
            .decode(part)
            .expect("base64url without padding");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn the_query_is_percent_decoded() {
        let parsed = TokenQuery::parse(Some(
            "api-version=2018-02-01&resource=https%3A%2F%2Fstorage.azure.com%2F&client_id=abc",
        ));
        assert_eq!(
            parsed,
            query(Some("https://storage.azure.com/"), Some("abc"))
        );
        assert_eq!(TokenQuery::parse(None), TokenQuery::default());
    }

    #[test]
    fn a_token_answer_has_azures_fields_as_strings() {
        let body = token_body(
            &IdentitySpec::default(),
            &query(Some("https://storage.azure.com/"), None),
        );
        assert_eq!(body["expires_in"], "86399");
        assert_eq!(body["ext_expires_in"], "86399");
        assert_eq!(body["expires_on"], (NOW + 86_399).to_string());
        assert_eq!(body["not_before"], NOW.to_string());
        assert_eq!(body["resource"], "https://storage.azure.com/");
        assert_eq!(body["token_type"], "Bearer");
        assert_eq!(
            body["client_id"],
            IdentitySpec::default().client_id_on("vm-a")
        );
    }

    #[test]
    fn the_access_token_carries_the_claims_azurite_checks() {
        let spec = IdentitySpec {
            expires_in: Duration::from_secs(60),
            ..IdentitySpec::default()
        };
        let body = token_body(&spec, &query(Some("https://storage.azure.com/"), None));
        let token = body["access_token"].as_str().unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        assert!(!token.contains('='), "no padding: {token}");
        let header = decode_part(parts[0]);
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["typ"], "JWT");
        let claims = decode_part(parts[1]);
        assert_eq!(claims["aud"], "https://storage.azure.com/");
        let issuer = claims["iss"].as_str().unwrap();
        assert!(issuer.starts_with("https://sts.windows.net/"), "{issuer}");
        assert_eq!(claims["tid"], SIMULATED_TENANT);
        assert_eq!(claims["iat"], NOW);
        assert_eq!(claims["nbf"], NOW);
        assert_eq!(claims["exp"], NOW + 60);
        assert_eq!(claims["appid"], body["client_id"]);
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 256);
    }

    #[test]
    fn missing_or_empty_resource_is_azures_400() {
        for resource in [None, Some("")] {
            let answer = answer(
                &IdentitySpec::default(),
                &subject(),
                &query(resource, None),
                NOW,
            );
            assert_eq!(answer, TokenAnswer::MissingResource);
            let (status, body) = answer.status_and_body();
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert_eq!(
                body,
                json!({"error": "invalid_request", "error_description": "Required query variable 'resource' is missing"})
            );
        }
    }

    #[test]
    fn no_identity_or_another_client_id_is_identity_not_found() {
        let unassigned = IdentitySpec {
            assigned: false,
            ..IdentitySpec::default()
        };
        let storage = Some("https://storage.azure.com/");
        assert_eq!(
            answer(&unassigned, &subject(), &query(storage, None), NOW),
            TokenAnswer::IdentityNotFound
        );
        let spec = IdentitySpec {
            client_id: Some("11111111-2222-3333-4444-555555555555".into()),
            ..IdentitySpec::default()
        };
        assert_eq!(
            answer(&spec, &subject(), &query(storage, Some("other")), NOW),
            TokenAnswer::IdentityNotFound
        );
        let named = query(storage, Some("11111111-2222-3333-4444-555555555555"));
        assert!(matches!(
            answer(&spec, &subject(), &named, NOW),
            TokenAnswer::Token(_)
        ));
        let (status, body) = TokenAnswer::IdentityNotFound.status_and_body();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error_description"], "Identity not found");
    }

    #[test]
    fn spec_problems_are_worded_for_the_author() {
        let zero = IdentitySpec {
            expires_in: Duration::ZERO,
            ..IdentitySpec::default()
        };
        assert_eq!(zero.problem().unwrap().0, "expires_in");
        let blank = IdentitySpec {
            client_id: Some(" ".into()),
            ..IdentitySpec::default()
        };
        assert_eq!(blank.problem().unwrap().0, "client_id");
        assert_eq!(IdentitySpec::default().problem(), None);
    }
}
