//! Azure Resource Manager's actions on a VM, as `forewarn drill` calls them: `POST
//! {resourceId}/restart`, `/redeploy` and `/simulateEviction` with `api-version`, for a VM
//! (`…/virtualMachines/NAME`) or a scale-set instance (`…/virtualMachineScaleSets/SET/
//! virtualMachines/NAME`). Answered as Azure answers them (202, 202, 204) and turned into the
//! Scheduled Event Azure then announces on the VM: a User Reboot (the type's 15 minutes'
//! notice), a User Redeploy (10 minutes), a Preempt (30 seconds).
//!
//! Refused as Azure refuses: 401 without a bearer token this simulator's identity endpoint
//! issued for Resource Manager, 403 AuthorizationFailed when the scenario's identity may not
//! manage the VM (`[identity] manages_vm = false`), 404 for a VM the scenario does not have,
//! 409 for a `simulateEviction` of a VM that is not Spot, 400 without `api-version`.

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::console_control::GenerateEvent;
use crate::engine::Engine;
use crate::identity::{IdentitySpec, token_claims};
use crate::json_answer::json_text;
use crate::resource_ids::vm_resource_id;
use crate::scenario::Source;
use crate::snapshot::RequestRecord;

type Shared = State<std::sync::Arc<Engine>>;

/// How long the Reboot or Redeploy a drill causes stays Started before it is over.
const DRILL_RUNS_FOR_SECONDS: u64 = 20;

/// `POST /subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/virtualMachines/VM/ACTION`.
pub(crate) async fn vm_action(
    State(engine): Shared,
    Path((subscription, group, vm, action)): Path<(String, String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let path = format!(
        "/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{vm}"
    );
    act(&engine, &path, &vm, &action, query.as_deref(), &headers)
}

/// `POST …/virtualMachineScaleSets/SET/virtualMachines/VM/ACTION`.
pub(crate) async fn scale_set_vm_action(
    State(engine): Shared,
    Path((subscription, group, set, vm, action)): Path<(String, String, String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let path = format!(
        "/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachineScaleSets/{set}/virtualMachines/{vm}"
    );
    act(&engine, &path, &vm, &action, query.as_deref(), &headers)
}

/// An action Resource Manager knows, and the event it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Restart,
    Redeploy,
    SimulateEviction,
}

impl Action {
    fn parse(text: &str) -> Option<Action> {
        match text {
            "restart" => Some(Action::Restart),
            "redeploy" => Some(Action::Redeploy),
            "simulateEviction" => Some(Action::SimulateEviction),
            _ => None,
        }
    }

    fn path(self) -> &'static str {
        match self {
            Action::Restart => "restart",
            Action::Redeploy => "redeploy",
            Action::SimulateEviction => "simulateEviction",
        }
    }

    /// The status Azure accepts it with: 202 (a long-running operation) or 204.
    fn accepted(self) -> StatusCode {
        match self {
            Action::Restart | Action::Redeploy => StatusCode::ACCEPTED,
            Action::SimulateEviction => StatusCode::NO_CONTENT,
        }
    }

    /// The Scheduled Event Azure announces on `vm` for it.
    fn event(self, vm: &str) -> GenerateEvent {
        let (event_type, source, description) = match self {
            Action::Restart => (
                "Reboot",
                Source::User,
                "Virtual machine is going to be restarted as requested by authorized user.",
            ),
            Action::Redeploy => (
                "Redeploy",
                Source::User,
                "Virtual machine is going to be redeployed as requested by authorized user.",
            ),
            Action::SimulateEviction => (
                "Preempt",
                Source::Platform,
                "Virtual machine is being evicted because of a simulated eviction.",
            ),
        };
        GenerateEvent {
            event_type: event_type.into(),
            source,
            resources: Some(vec![vm.to_owned()]),
            description: Some(description.into()),
            runs_for_seconds: Some(DRILL_RUNS_FOR_SECONDS),
            ..GenerateEvent::default()
        }
    }
}

fn act(
    engine: &Engine,
    path: &str,
    vm: &str,
    action: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response {
    let arrived = std::time::SystemTime::now();
    let response = answer(engine, path, vm, action, query, headers);
    engine.record_request(
        RequestRecord {
            seq: 0,
            method: "POST".into(),
            path: format!("{path}/{action}"),
            query: query.map(str::to_owned),
            body: None,
            vm: vm.to_owned(),
            status: response.status().as_u16(),
            at_unix_ms: 0,
        },
        arrived,
    );
    response
}

fn answer(
    engine: &Engine,
    path: &str,
    vm: &str,
    action: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response {
    let Some(action) = Action::parse(action) else {
        return arm_error(
            StatusCode::NOT_FOUND,
            "InvalidResourceType",
            &format!("The resource type '{action}' could not be found."),
        );
    };
    if !has_api_version(query) {
        return arm_error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let claims = match bearer_claims(headers) {
        Ok(claims) => claims,
        Err((code, message)) => return arm_error(StatusCode::UNAUTHORIZED, code, &message),
    };
    let known = engine
        .resolve_vm(Some(vm))
        .is_some_and(|vm| vm_resource_id(engine, &vm).eq_ignore_ascii_case(path));
    if !known {
        return arm_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            &format!("The Resource '{path}' was not found."),
        );
    }
    let identity: &IdentitySpec = &engine.scenario().identity;
    if !identity.manages_vm {
        let object_id = claims["oid"].as_str().unwrap_or_default().to_owned();
        return arm_error(
            StatusCode::FORBIDDEN,
            "AuthorizationFailed",
            &format!(
                "The client '{object_id}' with object id '{object_id}' does not have authorization to perform action 'Microsoft.Compute/virtualMachines/{}/action' over scope '{path}' or the scope is invalid. If access was recently granted, please refresh your credentials.",
                action.path()
            ),
        );
    }
    if action == Action::SimulateEviction && !engine.scenario().priority().is_evictable() {
        return arm_error(
            StatusCode::CONFLICT,
            "OperationNotAllowed",
            "Simulate Eviction is only supported on Spot Virtual Machines.",
        );
    }
    match engine.generate(&action.event(vm)) {
        Ok(event_id) => {
            tracing::info!(%event_id, action = action.path(), vm, "Resource Manager call became an event");
            action.accepted().into_response()
        }
        Err(error) => arm_error(
            StatusCode::CONFLICT,
            "OperationNotAllowed",
            &error.to_string(),
        ),
    }
}

fn has_api_version(query: Option<&str>) -> bool {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .any(|(key, value)| key == "api-version" && !value.is_empty())
}

/// Why a token is refused: Azure's 401 code and message.
type TokenRefused = (&'static str, String);

/// The claims of the request's bearer token, or what Azure's 401 says.
fn bearer_claims(headers: &HeaderMap) -> Result<serde_json::Value, TokenRefused> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let Some(token) = token else {
        return Err((
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.".into(),
        ));
    };
    let Some(claims) = token_claims(token) else {
        return Err((
            "InvalidAuthenticationToken",
            "The access token is invalid.".into(),
        ));
    };
    let audience = claims["aud"].as_str().unwrap_or_default();
    if !audience.starts_with("https://management.azure.com")
        && !audience.starts_with("https://management.core.windows.net")
    {
        return Err((
            "InvalidAuthenticationTokenAudience",
            format!(
                "The access token has been obtained for wrong audience or resource '{audience}'. It should exactly match with one of the allowed audiences 'https://management.core.windows.net/','https://management.azure.com/'."
            ),
        ));
    }
    Ok(claims)
}

/// Resource Manager's error body.
fn arm_error(status: StatusCode, code: &str, message: &str) -> Response {
    json_text(
        status,
        json!({ "error": { "code": code, "message": message } }).to_string(),
    )
}
