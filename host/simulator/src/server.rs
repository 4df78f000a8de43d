//! The HTTP face of the simulator (axum): IMDS's scheduledevents, compute and managed
//! identity endpoints, unprefixed for the default VM and under `/vm/{name}` for each VM,
//! plus `/simulator/*`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::console_routes::console_routes;
use crate::engine::Engine;
use crate::faults::{FaultMethod, FaultOutcome, malformed_text};
use crate::identity::{TokenQuery, TokenSubject, oauth_error};
use crate::json_answer::json_text;
use crate::resource_ids::{RESOURCE_GROUP, SUBSCRIPTION, vm_resource_id};
use crate::shape::SUPPORTED_API_VERSIONS;
use crate::snapshot::{REQUEST_BODY_KEPT, RequestRecord};

/// The longest a `/simulator/wait-finished` call may wait.
const MAX_WAIT: Duration = Duration::from_secs(600);

type Shared = State<Arc<Engine>>;

/// Every route the simulator serves.
pub(crate) fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/metadata/scheduledevents", get(events).post(events))
        .route("/metadata/instance/compute", get(compute_endpoint))
        .route("/metadata/instance/compute/name", get(compute_name))
        .route("/metadata/identity/oauth2/token", get(identity_token))
        .route(
            "/vm/{vm}/metadata/scheduledevents",
            get(events).post(events),
        )
        .route("/vm/{vm}/metadata/instance/compute", get(compute_endpoint))
        .route("/vm/{vm}/metadata/instance/compute/name", get(compute_name))
        .route(
            "/vm/{vm}/metadata/identity/oauth2/token",
            get(identity_token),
        )
        // Azure Resource Manager's VM actions (`forewarn drill`): arm.rs.
        .route(
            "/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{vm}/{action}",
            post(crate::arm::vm_action),
        )
        .route(
            "/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachineScaleSets/{set}/virtualMachines/{vm}/{action}",
            post(crate::arm::scale_set_vm_action),
        )
        .route("/simulator/state", get(state))
        .route("/simulator/wait-finished", get(wait_finished))
        .merge(console_routes())
        .fallback(not_found)
        .layer(axum::middleware::from_fn(refuse_other_hosts))
        .with_state(engine)
}

/// Answers only requests for this simulator's addresses or `localhost` (`forewarn_platform::host_check`): a
/// page whose name was made to resolve here gets 421, neither a document nor a change.
async fn refuse_other_hosts(request: Request, next: axum::middleware::Next) -> Response {
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .map(|value| value.to_str().unwrap_or("(not text)").to_owned());
    if forewarn_platform::host_check::is_served_host(host.as_deref(), &[]) {
        return next.run(request).await;
    }
    let message = forewarn_platform::host_check::refusal(
        host.as_deref().unwrap_or_default(),
        "reach the simulator at http://127.0.0.1:PORT/ (or localhost)",
    );
    error(StatusCode::MISDIRECTED_REQUEST, json!({ "error": message }))
}

/// One IMDS request: which VM (the `/vm/{vm}` prefix, if any), and what the caller sent.
struct Call {
    vm_prefix: Option<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    query: Option<String>,
    body: Bytes,
}

impl<S: Send + Sync> FromRequest<S> for Call {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Call, Response> {
        let (mut parts, body) = request.into_parts();
        let vm_prefix = Path::<String>::from_request_parts(&mut parts, state)
            .await
            .ok()
            .map(|Path(vm)| vm);
        let body = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Call {
            vm_prefix,
            method: parts.method,
            query: parts.uri.query().map(str::to_owned),
            uri: parts.uri,
            headers: parts.headers,
            body,
        })
    }
}

/// What an IMDS endpoint does once the VM is known and the request is well formed.
#[derive(Clone, Copy)]
enum Endpoint {
    Events,
    Compute,
    ComputeName,
    IdentityToken,
}

async fn events(State(engine): Shared, call: Call) -> Response {
    serve(&engine, call, Endpoint::Events).await
}

async fn compute_endpoint(State(engine): Shared, call: Call) -> Response {
    serve(&engine, call, Endpoint::Compute).await
}

async fn compute_name(State(engine): Shared, call: Call) -> Response {
    serve(&engine, call, Endpoint::ComputeName).await
}

async fn identity_token(State(engine): Shared, call: Call) -> Response {
    serve(&engine, call, Endpoint::IdentityToken).await
}

/// Checks the VM, the Metadata header and the api-version, answers, and records the request.
async fn serve(engine: &Engine, call: Call, endpoint: Endpoint) -> Response {
    let arrived = std::time::SystemTime::now();
    let Some(vm) = engine.resolve_vm(call.vm_prefix.as_deref()) else {
        let known = engine.scenario().vms.join(", ");
        let message = format!(
            "this simulator has no VM \"{}\"; its VMs are: {known}",
            call.vm_prefix.as_deref().unwrap_or_default()
        );
        let response = error(StatusCode::NOT_FOUND, json!({ "error": message }));
        record(engine, &call, "", &response, arrived);
        return response;
    };
    let mut response = match rejection(&call, endpoint) {
        Some(response) => response,
        None => match endpoint {
            Endpoint::Events if call.method == Method::POST => approve(engine, &vm, &call).await,
            Endpoint::Events => {
                engine.note_poll();
                let version = query_value(call.query.as_deref(), "api-version");
                document(engine, &vm, version.as_deref().unwrap_or_default()).await
            }
            Endpoint::Compute => compute(engine, &vm),
            Endpoint::ComputeName => vm.clone().into_response(),
            Endpoint::IdentityToken => token(engine, &vm, &call),
        },
    };
    record(engine, &call, &vm, &response, arrived);
    // IMDS's clock is Azure's: the VM's may be off it (`vm-clock` faults).
    let date = forewarn_imds::format_rfc1123(engine.azure_now());
    if let Ok(date) = HeaderValue::from_str(&date) {
        response.headers_mut().insert(header::DATE, date);
    }
    response
}

fn record(
    engine: &Engine,
    call: &Call,
    vm: &str,
    response: &Response,
    arrived: std::time::SystemTime,
) {
    let body = (!call.body.is_empty()).then(|| {
        let kept = &call.body[..call.body.len().min(REQUEST_BODY_KEPT)];
        String::from_utf8_lossy(kept).into_owned()
    });
    let request = RequestRecord {
        seq: 0,
        method: call.method.as_str().to_string(),
        path: call.uri.path().to_string(),
        query: call.query.clone(),
        body,
        vm: vm.to_string(),
        status: response.status().as_u16(),
        at_unix_ms: 0,
    };
    engine.record_request(request, arrived);
}

/// IMDS's checks (the `Metadata: true` header, then a usable api-version): the 400 to
/// answer if one fails (in OAuth's error shape on the identity endpoint, as Azure does).
fn rejection(call: &Call, endpoint: Endpoint) -> Option<Response> {
    let has_header = call
        .headers
        .get("metadata")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    let version = query_value(call.query.as_deref(), "api-version");
    let has_version = version.as_deref().is_some_and(|text| !text.is_empty());
    if matches!(endpoint, Endpoint::IdentityToken) {
        return identity_rejection(has_header, has_version);
    }
    if !has_header {
        return Some(bad_request(json!({
            "error": "Bad request. Required metadata header not specified"
        })));
    }
    let usable = match (endpoint, version.as_deref()) {
        (_, None | Some("")) => false,
        (Endpoint::Events, Some(version)) => SUPPORTED_API_VERSIONS.contains(&version),
        (_, Some(_)) => true,
    };
    if usable {
        return None;
    }
    Some(bad_request(json!({
        "error": "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds",
        "newest-versions": ["2020-07-01", "2019-08-01", "2019-04-01"],
    })))
}

/// The identity endpoint's checks, answered in OAuth's error shape.
fn identity_rejection(has_header: bool, has_version: bool) -> Option<Response> {
    if !has_header {
        return Some(bad_request(oauth_error(
            "Required metadata header not specified",
        )));
    }
    if !has_version {
        return Some(bad_request(oauth_error(
            "Required query variable 'api-version' is missing",
        )));
    }
    None
}

/// GET identity/oauth2/token: a token for the `resource` asked for, or Azure's 400.
fn token(engine: &Engine, vm: &str, call: &Call) -> Response {
    let query = TokenQuery::parse(call.query.as_deref());
    let resource_id = vm_resource_id(engine, vm);
    let subject = TokenSubject {
        vm,
        resource_id: &resource_id,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let answer = crate::identity::answer(&engine.scenario().identity, &subject, &query, now);
    let (status, body) = answer.status_and_body();
    json_text(status, body.to_string())
}

/// GET scheduledevents: the document, unless a fault says otherwise.
async fn document(engine: &Engine, vm: &str, api_version: &str) -> Response {
    let plan = engine.plan_fault(vm, FaultMethod::Get);
    tokio::time::sleep(plan.delay).await;
    match plan.outcome {
        FaultOutcome::Status(code) => fault_status(code),
        FaultOutcome::Malformed(body) => json_text(
            StatusCode::OK,
            malformed_text(body, &engine.document_json(api_version)),
        ),
        FaultOutcome::Normal => json_text(
            StatusCode::OK,
            engine.document_json(api_version).to_string(),
        ),
    }
}

/// POST scheduledevents: approve the named events (a status fault wins and approves nothing).
async fn approve(engine: &Engine, vm: &str, call: &Call) -> Response {
    let plan = engine.plan_fault(vm, FaultMethod::Post);
    tokio::time::sleep(plan.delay).await;
    if let FaultOutcome::Status(code) = plan.outcome {
        return fault_status(code);
    }
    let Ok(text) = std::str::from_utf8(&call.body) else {
        return bad_request(json!({ "error": "Bad request. The body is not UTF-8 text" }));
    };
    let event_ids = match forewarn_imds::parse_start_requests(text) {
        Ok(ids) => ids,
        Err(problem) => {
            return bad_request(json!({ "error": format!("Bad request. {problem}") }));
        }
    };
    match engine.approve(vm, &event_ids) {
        Ok(()) => StatusCode::OK.into_response(),
        Err(unknown) => bad_request(json!({ "error": format!("Bad request. {unknown}") })),
    }
}

/// The compute metadata the daemon reads its VM name, priority and eviction policy from.
fn compute(engine: &Engine, vm: &str) -> Response {
    let scenario = engine.scenario();
    let body = json!({
        "name": vm,
        "vmScaleSetName": scenario.vm_scale_set,
        "resourceId": vm_resource_id(engine, vm),
        "resourceGroupName": RESOURCE_GROUP,
        "subscriptionId": SUBSCRIPTION,
        "priority": scenario.priority().as_wire(),
        "evictionPolicy": scenario.eviction_policy.map_or("", |policy| policy.as_wire()),
        "host": { "id": engine.dedicated_host(vm).unwrap_or_default() },
        "vmId": crate::ids::stable_event_id(vm, usize::MAX),
        "location": "simulated",
        "osType": "Linux",
        "azEnvironment": "AzurePublicCloud",
    });
    json_text(StatusCode::OK, body.to_string())
}

async fn state(State(engine): Shared) -> Response {
    match serde_json::to_string(&engine.snapshot()) {
        Ok(text) => json_text(StatusCode::OK, text),
        Err(problem) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": problem.to_string() }),
        ),
    }
}

/// Long-poll: answers `{"finished": bool}` once the scenario finishes or `timeout_ms` passes.
async fn wait_finished(State(engine): Shared, RawQuery(query): RawQuery) -> Response {
    let timeout = query_value(query.as_deref(), "timeout_ms")
        .and_then(|text| text.parse::<u64>().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
        .min(MAX_WAIT);
    let mut finished = engine.subscribe_finished();
    let mut shutdown = engine.subscribe_shutdown();
    tokio::select! {
        _ = tokio::time::timeout(timeout, finished.wait_for(|done| *done)) => {}
        _ = shutdown.wait_for(|stop| *stop) => {}
    }
    engine.tick();
    let done = engine.snapshot().finished;
    json_text(StatusCode::OK, json!({ "finished": done }).to_string())
}

async fn not_found(uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        json!({ "error": format!("no such endpoint: {}", uri.path()) }),
    )
}

fn fault_status(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = status.canonical_reason().unwrap_or("Error");
    error(
        status,
        json!({ "error": format!("{reason} (simulated fault)") }),
    )
}

fn bad_request(body: serde_json::Value) -> Response {
    error(StatusCode::BAD_REQUEST, body)
}

fn error(status: StatusCode, body: serde_json::Value) -> Response {
    json_text(status, body.to_string())
}

/// The value of `key` in a query string (no percent-decoding: IMDS values are plain).
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(name, _)| *name == key)
        .map(|(_, value)| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_value_finds_the_key() {
        let query = Some("format=json&api-version=2020-07-01");
        assert_eq!(
            query_value(query, "api-version").as_deref(),
            Some("2020-07-01")
        );
        assert_eq!(query_value(query, "missing"), None);
        assert_eq!(
            query_value(Some("api-version"), "api-version").as_deref(),
            Some("")
        );
    }
}
