//! The WIT host functions of a native build: each one asks the thread's current `FakeHost`
//! (the running `TestHost`'s, or an empty one that grants nothing when no test host runs).

use std::cell::RefCell;

use super::fake_host::{FakeHost, HttpRoute};
use crate::{AccessToken, ActionOutput, DrainStatus, HostError, HttpRequest, HttpResponse, Level};

thread_local! {
    static CURRENT: RefCell<FakeHost> = RefCell::new(FakeHost::default());
}

/// Exchanges `host` with the thread's current host.
pub(crate) fn swap_current(host: &mut FakeHost) {
    CURRENT.with_borrow_mut(|current| std::mem::swap(current, host));
}

fn with_current<T>(call: impl FnOnce(&mut FakeHost) -> T) -> T {
    CURRENT.with_borrow_mut(call)
}

pub(crate) fn log(level: Level, message: &str) {
    with_current(|host| host.log(level, message));
}

pub(crate) fn config(key: &str) -> Option<String> {
    with_current(|host| host.config(key))
}

pub(crate) fn state_get(key: &str) -> Option<Vec<u8>> {
    with_current(|host| host.state_get(key))
}

pub(crate) fn state_set(key: &str, value: &[u8]) -> Result<(), HostError> {
    with_current(|host| host.state_set(key, value))
}

pub(crate) fn state_delete(key: &str) -> Result<(), HostError> {
    with_current(|host| host.state_delete(key))
}

pub(crate) fn set_ready(ready: bool) -> Result<(), HostError> {
    with_current(|host| host.set_ready(ready))
}

pub(crate) fn drain_progress(unhealthy_threshold: u32) -> Result<DrainStatus, HostError> {
    with_current(|host| host.drain_progress(unhealthy_threshold))
}

pub(crate) fn http_send(request: &HttpRequest) -> Result<HttpResponse, HostError> {
    match with_current(|host| host.route_http(request)) {
        HttpRoute::Answered(answer) => answer,
        HttpRoute::ToHandler => call_handler(request),
    }
}

/// Runs the test's handler with the host released (so the handler may use host functions
/// too), then gives it back.
fn call_handler(request: &HttpRequest) -> Result<HttpResponse, HostError> {
    let Some(mut handler) = with_current(|host| host.http_handler.take()) else {
        return Err(HostError::Failed(
            "the HTTP handler is already running".to_owned(),
        ));
    };
    let answer = handler(request);
    with_current(|host| host.http_handler = Some(handler));
    answer
}

pub(crate) fn run_action(name: &str) -> Result<ActionOutput, HostError> {
    with_current(|host| host.run_action(name))
}

pub(crate) fn azure_access_token(resource: &str) -> Result<AccessToken, HostError> {
    with_current(|host| host.access_token(resource))
}
