//! Modes that exercise host calls: "state" (a durable counter), "ready" (readiness, which
//! needs a grant), "config" (a manifest value) and "http" (a request the config describes).

use forewarn_sdk::Decision;
use forewarn_sdk::host::{self, state};

use crate::defer_with;

/// Reads "counter" (0 if absent), stores it plus one, and reports the new value.
pub(crate) fn count_in_state() -> Decision {
    let count = state::get_u64("counter").unwrap_or(0) + 1;
    match state::set_u64("counter", count) {
        Ok(()) => defer_with(format!("count={count}")),
        Err(error) => defer_with(format!("state: {error}")),
    }
}

/// Marks the VM not ready and reports whether the host allowed it.
pub(crate) fn mark_not_ready() -> Decision {
    match host::set_ready(false) {
        Ok(()) => defer_with("ready: ok".to_owned()),
        Err(error) => defer_with(format!("ready: {error}")),
    }
}

/// Reports `config("greeting")`, or "none".
pub(crate) fn greeting() -> Decision {
    defer_with(host::config_or("greeting", "none"))
}

/// Writes 1000 keys of state, stopping at the first refusal; reports how many landed and
/// why the next was refused ("state-flood: N writes, then: ERROR").
pub(crate) fn flood_state() -> Decision {
    for index in 0..1000 {
        if let Err(error) = state::set(&format!("key-{index}"), b"value") {
            return defer_with(format!("state-flood: {index} writes, then: {error}"));
        }
    }
    defer_with("state-flood: all 1000 writes landed".to_owned())
}

/// Writes 32 KiB values under 24 rotating keys forever (a refused write is ignored): each
/// write rewrites most of the plugin's 1 MiB state quota. Never returns.
pub(crate) fn state_set_forever() -> Decision {
    let value = vec![b's'; 32 * 1024];
    let mut index = 0u64;
    loop {
        let _ignored = state::set(&format!("loop-{}", index % 24), &value);
        index = index.wrapping_add(1);
    }
}

/// Sends `config("method")` (default GET) to `config("url")` with the headers in
/// `config("headers")` ("Name: value" pairs separated by `|`); reports the status or error.
pub(crate) fn http() -> Decision {
    let url = host::config_or("url", "http://127.0.0.1/");
    let method = host::config_or("method", "GET");
    let mut request = forewarn_sdk::HttpRequest::new(&method, &url);
    let headers = host::config_or("headers", "");
    for pair in headers.split('|').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once(':').unwrap_or((pair, ""));
        request = request.header(name.trim(), value.trim());
    }
    match host::http::send(&request) {
        Ok(response) => defer_with(format!("http: status {}", response.status)),
        Err(error) => defer_with(format!("http: {error}")),
    }
}
