//! Native unit tests of plugins that use host functions: a [`TestHost`] stands in for the
//! daemon (config, state, HTTP, actions, identity, readiness) and records every call.
//!
//! In a native build (`cargo test`) the wrappers of [`crate::host`] call the test host of the
//! current thread instead of the daemon; the wasm build is unchanged. Give the test host what
//! the plugin should find, run the plugin's real `on_event`, then assert on the decision and
//! on what it did:
//!
//! ```
//! use forewarn_sdk::testing::{self, HostCall, TestHost};
//! use forewarn_sdk::{Context, Decision, Event, EventType, Phase, Plugin, host, host::http};
//!
//! struct Announce;
//!
//! impl Plugin for Announce {
//!     fn on_event(event: &Event, phase: Phase, _ctx: &Context) -> Decision {
//!         let url = host::config_or("url", "http://127.0.0.1:9000/events");
//!         match http::post(&url, "text/plain", format!("{} {phase}", event.id)) {
//!             Ok(answer) if answer.is_success() => Decision::approve(),
//!             Ok(answer) => Decision::defer(format!("answered {}", answer.status), Default::default()),
//!             Err(error) => Decision::defer(error.to_string(), Default::default()),
//!         }
//!     }
//! }
//!
//! let mut host = TestHost::new().http_reply("POST", "http://127.0.0.1:9000/events", 204, "");
//! let event = testing::event(EventType::Reboot);
//! let decision = host.on_event::<Announce>(&event, Phase::Prepare, &testing::context());
//!
//! assert_eq!(decision, Decision::approve());
//! let sent = host.http_requests();
//! assert_eq!(sent.len(), 1);
//! assert_eq!(sent[0].body, b"test-event-1 prepare");
//! assert!(host.calls().contains(&HostCall::Config { key: "url".into() }));
//! ```
//!
//! What the test host answers what it was not given, as the daemon answers a plugin whose
//! manifest grants nothing (the texts are the daemon's, naming the manifest line to add):
//!
//! | call | not stubbed |
//! |------|-------------|
//! | `host::config` | `None` |
//! | `state::get` | `None` (state starts empty; `set` and `delete` always succeed) |
//! | `host::set_ready` | `HostError::NotGranted` unless [`TestHost::ready`] granted readiness |
//! | `host::drain_progress` | no prober (`probers: 0`); `HostError::NotGranted` without readiness |
//! | `http::send` | `HostError::NotGranted` (host not on the allow-list); `HostError::Invalid` for a URL that is not absolute http(s) |
//! | `host::run_action` | `HostError::NotGranted` (action not granted) |
//! | `identity::access_token` | `HostError::NotGranted` (resource not granted) |
//! | `log::*` | recorded, and printed to stderr (shown when a test fails) |
//!
//! Host calls made outside [`TestHost::run`] (a plain `#[test]` calling a plugin function)
//! go to an empty test host of the thread that grants nothing: they never panic.

mod calls;
mod fake_host;
pub(crate) mod imports;
mod inputs;
mod refusals;

use std::collections::BTreeMap;

pub use calls::HostCall;
pub use inputs::{
    BUDGET, EVENT_ID, NOTICE, VM_NAME, context, context_for, deadline_in, event, exited,
    start_context,
};

use fake_host::FakeHost;
use inputs::now_ms;

use crate::{
    AccessToken, ActionOutput, Context, Decision, DrainStatus, Event, HostError, HttpRequest,
    HttpResponse, Level, Phase, Plugin, StartContext,
};

/// The daemon, as a plugin's native test sets it up: build it with the methods that take
/// `self`, run the plugin with [`on_event`](TestHost::on_event) (or [`run`](TestHost::run)),
/// then inspect the calls the plugin made. Config, state and stubs carry over from one run
/// to the next, as the daemon's do from call to call.
#[derive(Default)]
pub struct TestHost {
    host: FakeHost,
}

impl TestHost {
    /// A host that grants nothing and holds no config or state; the plugin is named
    /// `plugin-under-test` in the host's error texts.
    pub fn new() -> Self {
        TestHost::default()
    }

    /// Names the plugin (as its manifest file would), for the host's error texts.
    pub fn plugin_name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.host.plugin_name);
        self
    }

    /// Sets `key` of the manifest's `[config]` table (all values are text to the plugin).
    pub fn config(mut self, key: &str, value: impl Into<String>) -> Self {
        self.host.config.insert(key.to_owned(), value.into());
        self
    }

    /// Stores `value` under `key` in the plugin's state before it runs (text or bytes;
    /// `state::set_u64` stores decimal text, `set_bool` `true`/`false`).
    pub fn state(mut self, key: &str, value: impl Into<Vec<u8>>) -> Self {
        self.host.state.insert(key.to_owned(), value.into());
        self
    }

    /// Grants readiness (`[capabilities] readiness = true`); the VM starts ready or not.
    pub fn ready(mut self, ready: bool) -> Self {
        self.host.readiness_granted = true;
        self.host.ready = ready;
        self
    }

    /// Answers `host::drain_progress` with `progress` (needs [`TestHost::ready`]). Given
    /// again, answers queue: they are given in order, and the last one repeats. Without
    /// one, the plugin sees no load balancer probing `/readyz`.
    pub fn drain_progress(mut self, progress: DrainStatus) -> Self {
        self.host.drain_answers.push_back(progress);
        self
    }

    /// Answers `method url` with `status` and `body`, no headers. Stubbing the same method
    /// and URL again queues answers: they are given in order, and the last one repeats.
    pub fn http_reply(
        self,
        method: &str,
        url: &str,
        status: u16,
        body: impl Into<Vec<u8>>,
    ) -> Self {
        let response = HttpResponse {
            status,
            headers: Vec::new(),
            body: body.into(),
        };
        self.http_response(method, url, response)
    }

    /// Answers `method url` with `response` (queued like [`http_reply`](TestHost::http_reply)).
    pub fn http_response(mut self, method: &str, url: &str, response: HttpResponse) -> Self {
        self.host.stub_http(method, url, Ok(response));
        self
    }

    /// Fails `method url` with `error`, e.g. `HostError::Failed("connection refused".into())`
    /// or `HostError::TimedOut` (queued like [`http_reply`](TestHost::http_reply)).
    pub fn http_error(mut self, method: &str, url: &str, error: HostError) -> Self {
        self.host.stub_http(method, url, Err(error));
        self
    }

    /// Answers every request no `http_*` stub answers with `handler` (which may keep its own
    /// state, e.g. count calls, and may use host functions itself).
    pub fn http_handler(
        mut self,
        handler: impl FnMut(&HttpRequest) -> Result<HttpResponse, HostError> + 'static,
    ) -> Self {
        self.host.http_handler = Some(Box::new(handler));
        self
    }

    /// Grants the action `name` and makes it finish with `output` (see [`exited`]).
    pub fn action_result(mut self, name: &str, output: ActionOutput) -> Self {
        self.host.actions.insert(name.to_owned(), Ok(output));
        self
    }

    /// Grants the action `name` and makes it fail with `error` (`HostError::TimedOut` when
    /// it was killed at its timeout, `HostError::Failed` when it could not start).
    pub fn action_error(mut self, name: &str, error: HostError) -> Self {
        self.host.actions.insert(name.to_owned(), Err(error));
        self
    }

    /// Grants tokens for `resource` and answers `token`, valid for an hour.
    pub fn access_token(mut self, resource: &str, token: &str) -> Self {
        let token = AccessToken {
            token: token.to_owned(),
            expires_on_unix_ms: now_ms() + 3_600_000,
        };
        self.host.tokens.push((resource.to_owned(), Ok(token)));
        self
    }

    /// Grants tokens for `resource` but fails them with `error` (e.g. a VM without a
    /// managed identity: `HostError::Failed`).
    pub fn access_token_error(mut self, resource: &str, error: HostError) -> Self {
        self.host.tokens.push((resource.to_owned(), Err(error)));
        self
    }

    /// Runs `P::on_event` with this host as the daemon and returns its decision.
    pub fn on_event<P: Plugin>(&mut self, event: &Event, phase: Phase, ctx: &Context) -> Decision {
        self.run(|| P::on_event(event, phase, ctx))
    }

    /// Runs `P::on_start` with this host as the daemon.
    pub fn on_start<P: Plugin>(&mut self, ctx: &StartContext) {
        self.run(|| P::on_start(ctx));
    }

    /// Runs `code` (any plugin code) with this host as the daemon of the current thread.
    pub fn run<T>(&mut self, code: impl FnOnce() -> T) -> T {
        let _installed = Installed::new(&mut self.host);
        code()
    }

    /// Every host call made so far, in order.
    pub fn calls(&self) -> &[HostCall] {
        &self.host.calls
    }

    /// The calls that change something (state writes, readiness, HTTP, actions): see
    /// [`HostCall::is_effect`].
    pub fn effects(&self) -> Vec<&HostCall> {
        self.host
            .calls
            .iter()
            .filter(|call| call.is_effect())
            .collect()
    }

    /// Returns the calls made so far and forgets them (e.g. between two phases).
    pub fn take_calls(&mut self) -> Vec<HostCall> {
        std::mem::take(&mut self.host.calls)
    }

    /// The HTTP requests sent, answered or refused, in order.
    pub fn http_requests(&self) -> Vec<&HttpRequest> {
        self.host
            .calls
            .iter()
            .filter_map(|call| match call {
                HostCall::Http(request) => Some(request),
                _ => None,
            })
            .collect()
    }

    /// The names of the actions the plugin asked to run, granted or not, in order.
    pub fn actions_run(&self) -> Vec<&str> {
        self.host
            .calls
            .iter()
            .filter_map(|call| match call {
                HostCall::RunAction { name } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The lines logged, with their levels, in order.
    pub fn logs(&self) -> Vec<(Level, &str)> {
        self.host
            .calls
            .iter()
            .filter_map(|call| match call {
                HostCall::Log { level, message } => Some((*level, message.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The plugin's state now: what was pre-loaded, changed by the plugin's writes.
    pub fn state_now(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.host.state
    }

    /// The state under `key` now, as text (`None` when absent or not UTF-8).
    pub fn state_text(&self, key: &str) -> Option<&str> {
        std::str::from_utf8(self.host.state.get(key)?).ok()
    }

    /// Whether this plugin has the VM marked ready (true unless it set it not ready).
    pub fn is_ready(&self) -> bool {
        self.host.ready
    }
}

/// The test host made the thread's current host for as long as this lives (also when the
/// plugin panics), then given back.
struct Installed<'a> {
    host: &'a mut FakeHost,
}

impl<'a> Installed<'a> {
    fn new(host: &'a mut FakeHost) -> Self {
        imports::swap_current(host);
        Installed { host }
    }
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        imports::swap_current(self.host);
    }
}
