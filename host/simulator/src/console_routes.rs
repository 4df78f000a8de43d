//! The simulator console over HTTP: the page at `/` (one embedded HTML file, no external
//! assets) and the JSON endpoints it uses, which scripts can drive as well.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::console_control::{
    ConsoleInputError, GenerateEvent, InjectFault, StartScenario, parse_change,
};
use crate::engine::Engine;
use crate::json_answer::json_text;
use crate::simulation::EventChangeError;

/// The console page: HTML, CSS and JavaScript in one file, served as is.
const CONSOLE_HTML: &str = include_str!("console.html");

type Shared = State<Arc<Engine>>;

/// The console's routes, merged into the simulator's router. Every POST must come from the
/// console itself or a script: see [`refuse_cross_site`].
pub(crate) fn console_routes() -> Router<Arc<Engine>> {
    let changes = Router::new()
        .route("/simulator/scenario", post(start_scenario))
        .route("/simulator/events", post(generate))
        .route("/simulator/events/{event_id}/{action}", post(change))
        .route("/simulator/faults", post(inject))
        .route_layer(axum::middleware::from_fn(refuse_cross_site));
    Router::new()
        .route("/", get(page))
        .route("/simulator/console", get(view))
        .merge(changes)
}

/// Refuses a change a web page elsewhere could make through the browser of someone running
/// the simulator (a form or `fetch` without CORS sends `text/plain` and its own Origin): a
/// change must be `Content-Type: application/json`, an `Origin`, if sent, must be this
/// simulator's own address (an IP address or localhost: a page rebound to it by DNS is
/// refused earlier for its `Host`, and its origin again here), and a browser must not say
/// it comes from another site (`Sec-Fetch-Site`).
async fn refuse_cross_site(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = request.headers();
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"));
    if !json {
        return json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type",
            "content-type: send the body as JSON with `Content-Type: application/json`",
        );
    }
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok());
    let foreign_origin = origin.is_some_and(|origin| {
        let authority = origin.strip_prefix("http://").unwrap_or(origin);
        host.is_none_or(|host| origin != format!("http://{host}"))
            || !forewarn_platform::host_check::is_served_host(Some(authority), &[])
    });
    let cross_site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|site| site.eq_ignore_ascii_case("cross-site"));
    if foreign_origin || cross_site {
        let origin = origin.unwrap_or("another site");
        return json_error(
            StatusCode::FORBIDDEN,
            "origin",
            &format!(
                "origin: a page at {origin} may not change this simulator; use its console at http://{}/ or a script",
                host.unwrap_or("ADDR")
            ),
        );
    }
    next.run(request).await
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // Nothing but this page's own inline code, and no framing by other pages.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
        ],
        CONSOLE_HTML,
    )
        .into_response()
}

async fn view(State(engine): Shared, RawQuery(query): RawQuery) -> Response {
    let after = match after_param(query.as_deref()) {
        Ok(after) => after,
        Err(error) => return input_error(&error),
    };
    json_response(StatusCode::OK, &engine.console_view(after))
}

async fn start_scenario(State(engine): Shared, body: Bytes) -> Response {
    let request: StartScenario = match parse_body(&body, "{\"name\": \"full-lifecycle\"}") {
        Ok(request) => request,
        Err(error) => return input_error(&error),
    };
    match engine.start_builtin(&request) {
        Ok(()) => json_response(StatusCode::OK, &json!({ "scenario": request.name })),
        Err(error) => input_error(&error),
    }
}

async fn generate(State(engine): Shared, body: Bytes) -> Response {
    let example = "{\"type\": \"Reboot\", \"not_before_seconds\": 600}";
    let request: GenerateEvent = match parse_body(&body, example) {
        Ok(request) => request,
        Err(error) => return input_error(&error),
    };
    match engine.generate(&request) {
        Ok(event_id) => json_response(StatusCode::CREATED, &json!({ "event_id": event_id })),
        Err(error) => input_error(&error),
    }
}

async fn change(
    State(engine): Shared,
    Path((event_id, action)): Path<(String, String)>,
) -> Response {
    let change = match parse_change(&action) {
        Ok(change) => change,
        Err(error) => return input_error(&error),
    };
    match engine.change(&event_id, change) {
        Ok(()) => json_response(
            StatusCode::OK,
            &json!({ "event_id": event_id, "action": action }),
        ),
        Err(error @ EventChangeError::Unknown(_)) => {
            json_error(StatusCode::NOT_FOUND, "event_id", &error.to_string())
        }
        Err(error @ EventChangeError::WrongStatus { .. }) => {
            json_error(StatusCode::CONFLICT, "action", &error.to_string())
        }
    }
}

async fn inject(State(engine): Shared, body: Bytes) -> Response {
    let request: InjectFault =
        match parse_body(&body, "{\"fault\": \"too-many-requests\", \"seconds\": 5}") {
            Ok(request) => request,
            Err(error) => return input_error(&error),
        };
    match engine.inject(&request) {
        Ok(injected) => json_response(StatusCode::OK, &injected),
        Err(error) => input_error(&error),
    }
}

/// A JSON body, or the error naming what serde found wrong and an example of a good one.
fn parse_body<T: DeserializeOwned>(body: &[u8], example: &str) -> Result<T, ConsoleInputError> {
    serde_json::from_slice(body).map_err(|error| ConsoleInputError {
        field: "body".into(),
        problem: format!("{error}; send JSON such as {example}"),
    })
}

/// `?after=N` (0 when absent).
fn after_param(query: Option<&str>) -> Result<u64, ConsoleInputError> {
    let Some(value) = query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("after="))
    else {
        return Ok(0);
    };
    value.parse().map_err(|_| ConsoleInputError {
        field: "after".into(),
        problem: format!("\"{value}\" is not a request number; use ?after=0 for every request"),
    })
}

fn input_error(error: &ConsoleInputError) -> Response {
    json_error(StatusCode::BAD_REQUEST, &error.field, &error.to_string())
}

/// `value` as JSON with `status`.
fn json_response<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(text) => json_text(status, text),
        Err(error) => json_text(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({ "error": format!("cannot serialize the answer: {error}") }).to_string(),
        ),
    }
}

fn json_error(status: StatusCode, field: &str, message: &str) -> Response {
    json_response(status, &json!({ "error": message, "field": field }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_defaults_to_zero_and_refuses_words() {
        assert_eq!(after_param(None).unwrap(), 0);
        assert_eq!(after_param(Some("after=42")).unwrap(), 42);
        assert_eq!(after_param(Some("after=x")).unwrap_err().field, "after");
    }

    #[test]
    fn bad_json_names_the_body_and_shows_an_example() {
        let error = parse_body::<StartScenario>(b"{\"nam\": 1}", "EXAMPLE").unwrap_err();
        assert_eq!(error.field, "body");
        assert!(error.problem.contains("EXAMPLE"), "{error}");
    }
}
