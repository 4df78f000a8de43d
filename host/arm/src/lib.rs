//! forewarn-arm: the few Azure Resource Manager calls `forewarn drill` makes, each on the VM
//! itself with the token of its managed identity: `restart`, `redeploy` and
//! `simulateEviction` (a POST to `{resourceId}/{action}?api-version=…`, answered 200, 202 or
//! 204 with no body). Azure then announces the matching Scheduled Event, which the daemon
//! handles as it would the real thing.
//!
//! One request per drill: no retries, no polling of the long-running operation (the drill
//! follows the Scheduled Event instead).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode, header};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Resource Manager's public endpoint.
pub const ARM_ENDPOINT: &str = "https://management.azure.com";
/// The resource a managed identity token for Resource Manager is asked for.
pub const ARM_RESOURCE: &str = "https://management.azure.com/";
/// The Compute API version of the calls (virtualMachines and virtualMachineScaleSets VMs).
pub const COMPUTE_API_VERSION: &str = "2024-07-01";
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of an error answer kept.
const ERROR_BODY_MAX: usize = 16 * 1024;

/// What the drill asks Resource Manager to do to the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmAction {
    /// `restart`: the VM reboots (IMDS announces a User Reboot).
    Restart,
    /// `redeploy`: the VM moves to another host (IMDS announces a User Redeploy).
    Redeploy,
    /// `simulateEviction`: a Spot VM is evicted (IMDS announces a Preempt, 30 s notice).
    SimulateEviction,
}

impl VmAction {
    /// The action's path segment.
    pub fn path(self) -> &'static str {
        match self {
            VmAction::Restart => "restart",
            VmAction::Redeploy => "redeploy",
            VmAction::SimulateEviction => "simulateEviction",
        }
    }

    /// The Azure RBAC action the identity needs on the VM.
    pub fn permission(self, resource_id: &str) -> String {
        let kind = match resource_id.contains("/virtualMachineScaleSets/") {
            true => "virtualMachineScaleSets/virtualMachines",
            false => "virtualMachines",
        };
        format!("Microsoft.Compute/{kind}/{}/action", self.path())
    }
}

/// Why a call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    /// The URL or the TLS set-up could not be made.
    #[error("cannot call Azure Resource Manager: {0}")]
    Setup(String),
    /// No answer within the timeout, or the connection failed.
    #[error(
        "Azure Resource Manager at {endpoint} did not answer: {problem} (check the VM's outbound access to it, port 443)"
    )]
    Unreachable {
        /// The endpoint called.
        endpoint: String,
        /// What went wrong.
        problem: String,
    },
    /// Resource Manager refused: its status, `error.code` and `error.message`.
    #[error("Azure Resource Manager answered {status}{}: {message}", spaced(.code))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// `error.code` (e.g. "AuthorizationFailed"), or "" when the body had none.
        code: String,
        /// `error.message`, or the body's start.
        message: String,
    },
}

impl ArmError {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            ArmError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A client for one Resource Manager endpoint (`https://management.azure.com`, or a
/// simulator's `http://127.0.0.1:PORT`).
pub struct ArmClient {
    endpoint: String,
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl ArmClient {
    /// A client for `endpoint` (https:// verified against the system's CAs; http:// for a
    /// local simulator).
    pub fn new(endpoint: &str) -> Result<ArmClient, ArmError> {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ArmError::Setup(format!("TLS: {error}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(CALL_TIMEOUT));
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        Ok(ArmClient {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            http: HyperClient::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// The URL of `action` on the resource `resource_id`.
    pub fn action_url(&self, resource_id: &str, action: VmAction) -> String {
        format!(
            "{}{}/{}?api-version={COMPUTE_API_VERSION}",
            self.endpoint,
            resource_id.trim_end_matches('/'),
            action.path()
        )
    }

    /// POSTs `action` on `resource_id` with `token`; the status Resource Manager accepted
    /// it with (200, 202 or 204).
    pub async fn post_action(
        &self,
        resource_id: &str,
        action: VmAction,
        token: &str,
    ) -> Result<u16, ArmError> {
        let url = self.action_url(resource_id, action);
        let request = Request::builder()
            .method(Method::POST)
            .uri(&url)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_LENGTH, "0")
            .header(
                header::USER_AGENT,
                concat!("forewarn/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|error| ArmError::Setup(format!("{url}: {error}")))?;
        let unreachable = |problem: String| ArmError::Unreachable {
            endpoint: self.endpoint.clone(),
            problem,
        };
        let call = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|error| unreachable(describe(&error)))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|error| unreachable(error.to_string()))?
                .to_bytes();
            Ok::<_, ArmError>((status, body))
        };
        let (status, body) = tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| unreachable(format!("no answer within {} s", CALL_TIMEOUT.as_secs())))??;
        if matches!(
            status,
            StatusCode::OK | StatusCode::ACCEPTED | StatusCode::NO_CONTENT
        ) {
            return Ok(status.as_u16());
        }
        Err(refusal(status, &body))
    }
}

/// ` CODE`, or nothing for an empty code.
fn spaced(code: &str) -> String {
    match code.is_empty() {
        true => String::new(),
        false => format!(" {code}"),
    }
}

/// A connection error with its causes, on one line.
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Resource Manager's error body (`{"error": {"code", "message"}}`), or the body's start.
fn refusal(status: StatusCode, body: &[u8]) -> ArmError {
    let body = &body[..body.len().min(ERROR_BODY_MAX)];
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|value| value["error"][name].as_str())
            .map(str::to_owned)
    };
    let text: String = String::from_utf8_lossy(body).chars().take(300).collect();
    ArmError::Refused {
        status: status.as_u16(),
        code: field("code").unwrap_or_default(),
        message: field("message").unwrap_or(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str =
        "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/vm-a";
    const SCALE_SET_VM: &str = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/web/virtualMachines/3";

    #[test]
    fn each_action_has_its_documented_path_and_permission() {
        let client = ArmClient::new(ARM_ENDPOINT).expect("a client");
        assert_eq!(
            client.action_url(VM, VmAction::SimulateEviction),
            format!("https://management.azure.com{VM}/simulateEviction?api-version=2024-07-01")
        );
        assert_eq!(
            client.action_url(SCALE_SET_VM, VmAction::Restart),
            format!("https://management.azure.com{SCALE_SET_VM}/restart?api-version=2024-07-01")
        );
        assert_eq!(
            VmAction::Redeploy.permission(VM),
            "Microsoft.Compute/virtualMachines/redeploy/action"
        );
        assert_eq!(
            VmAction::SimulateEviction.permission(SCALE_SET_VM),
            "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/simulateEviction/action"
        );
    }

    #[test]
    fn a_refusal_keeps_the_code_and_message_of_the_error_body() {
        let error = refusal(
            StatusCode::FORBIDDEN,
            br#"{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization"}}"#,
        );
        assert_eq!(error.status(), Some(403));
        assert_eq!(
            error.to_string(),
            "Azure Resource Manager answered 403 AuthorizationFailed: The client 'x' does not have authorization"
        );
        let error = refusal(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert!(
            error.to_string().contains("502: <html>bad gateway</html>"),
            "{error}"
        );
    }
}
