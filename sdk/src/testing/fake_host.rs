//! `FakeHost`: what the test host knows (config, state, stubs, grants) and how it answers each
//! WIT host function, recording every call. `TestHost` builds one; `imports` calls it.

use std::collections::{BTreeMap, VecDeque};

use super::calls::HostCall;
use super::refusals;
use crate::{AccessToken, ActionOutput, DrainStatus, HostError, HttpRequest, HttpResponse, Level};

/// What answers an HTTP request no fixed stub answers.
pub(crate) type HttpHandler = Box<dyn FnMut(&HttpRequest) -> Result<HttpResponse, HostError>>;

/// The name a test host gives the plugin when the test does not (it appears in refusals).
pub(crate) const DEFAULT_PLUGIN_NAME: &str = "plugin-under-test";

/// The answers stubbed for one method and URL, given in order; the last one repeats.
struct HttpStub {
    method: String,
    url: String,
    answers: VecDeque<Result<HttpResponse, HostError>>,
}

/// The daemon as a plugin's test sees it.
pub(crate) struct FakeHost {
    pub(crate) plugin_name: String,
    pub(crate) config: BTreeMap<String, String>,
    pub(crate) state: BTreeMap<String, Vec<u8>>,
    pub(crate) readiness_granted: bool,
    pub(crate) ready: bool,
    /// What `drain_progress` answers, in order; the last one repeats.
    pub(crate) drain_answers: VecDeque<DrainStatus>,
    http_stubs: Vec<HttpStub>,
    pub(crate) http_handler: Option<HttpHandler>,
    pub(crate) actions: BTreeMap<String, Result<ActionOutput, HostError>>,
    pub(crate) tokens: Vec<(String, Result<AccessToken, HostError>)>,
    pub(crate) calls: Vec<HostCall>,
}

impl Default for FakeHost {
    fn default() -> Self {
        FakeHost {
            plugin_name: DEFAULT_PLUGIN_NAME.to_owned(),
            config: BTreeMap::new(),
            state: BTreeMap::new(),
            readiness_granted: false,
            ready: true,
            drain_answers: VecDeque::new(),
            http_stubs: Vec::new(),
            http_handler: None,
            actions: BTreeMap::new(),
            tokens: Vec::new(),
            calls: Vec::new(),
        }
    }
}

/// How an HTTP request is answered: by a stub, or by the handler (called by `imports`
/// without the host borrowed, so the handler may itself log).
pub(crate) enum HttpRoute {
    Answered(Result<HttpResponse, HostError>),
    ToHandler,
}

impl FakeHost {
    /// Adds `answer` to those of `method` and `url`.
    pub(crate) fn stub_http(
        &mut self,
        method: &str,
        url: &str,
        answer: Result<HttpResponse, HostError>,
    ) {
        let existing = self
            .http_stubs
            .iter_mut()
            .find(|stub| stub.method.eq_ignore_ascii_case(method) && stub.url == url);
        match existing {
            Some(stub) => stub.answers.push_back(answer),
            None => self.http_stubs.push(HttpStub {
                method: method.to_owned(),
                url: url.to_owned(),
                answers: VecDeque::from([answer]),
            }),
        }
    }

    pub(crate) fn log(&mut self, level: Level, message: &str) {
        // Captured by the test harness, shown when the test fails.
        eprintln!("[{}] {level:?} {message}", self.plugin_name);
        self.calls.push(HostCall::Log {
            level,
            message: message.to_owned(),
        });
    }

    pub(crate) fn config(&mut self, key: &str) -> Option<String> {
        self.calls.push(HostCall::Config {
            key: key.to_owned(),
        });
        self.config.get(key).cloned()
    }

    pub(crate) fn state_get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.calls.push(HostCall::StateGet {
            key: key.to_owned(),
        });
        self.state.get(key).cloned()
    }

    pub(crate) fn state_set(&mut self, key: &str, value: &[u8]) -> Result<(), HostError> {
        self.calls.push(HostCall::StateSet {
            key: key.to_owned(),
            value: value.to_vec(),
        });
        self.state.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    pub(crate) fn state_delete(&mut self, key: &str) -> Result<(), HostError> {
        self.calls.push(HostCall::StateDelete {
            key: key.to_owned(),
        });
        self.state.remove(key);
        Ok(())
    }

    pub(crate) fn set_ready(&mut self, ready: bool) -> Result<(), HostError> {
        self.calls.push(HostCall::SetReady { ready });
        if !self.readiness_granted {
            return Err(refusals::readiness(&self.plugin_name));
        }
        self.ready = ready;
        Ok(())
    }

    /// The next stubbed drain progress (the last one repeats); without a stub, what a VM
    /// no load balancer probes sees.
    pub(crate) fn drain_progress(
        &mut self,
        unhealthy_threshold: u32,
    ) -> Result<DrainStatus, HostError> {
        self.calls.push(HostCall::DrainProgress {
            unhealthy_threshold,
        });
        if !self.readiness_granted {
            return Err(refusals::readiness(&self.plugin_name));
        }
        if !(1..=16).contains(&unhealthy_threshold) {
            return Err(HostError::Invalid(format!(
                "unhealthy-threshold {unhealthy_threshold} is out of range: give the load \
                 balancer's own threshold, 1 to 16"
            )));
        }
        if self.drain_answers.len() > 1 {
            return Ok(self.drain_answers.pop_front().expect("more than one"));
        }
        Ok(self.drain_answers.front().copied().unwrap_or(DrainStatus {
            probers: 0,
            probers_drained: 0,
            drained_for_ms: None,
            not_ready_for_ms: (!self.ready).then_some(0),
        }))
    }

    /// Records `request` and finds its answer: the next stubbed one for its method and URL,
    /// else the handler's, else the daemon's refusal of a host not on the allow-list.
    pub(crate) fn route_http(&mut self, request: &HttpRequest) -> HttpRoute {
        self.calls.push(HostCall::Http(request.clone()));
        let stub = self.http_stubs.iter_mut().find(|stub| {
            stub.method.eq_ignore_ascii_case(&request.method) && stub.url == request.url
        });
        if let Some(stub) = stub {
            let answer = if stub.answers.len() > 1 {
                stub.answers.pop_front()
            } else {
                stub.answers.front().cloned()
            };
            if let Some(answer) = answer {
                return HttpRoute::Answered(answer);
            }
        }
        if self.http_handler.is_some() {
            return HttpRoute::ToHandler;
        }
        HttpRoute::Answered(Err(refusals::http(&self.plugin_name, &request.url)))
    }

    pub(crate) fn run_action(&mut self, name: &str) -> Result<ActionOutput, HostError> {
        self.calls.push(HostCall::RunAction {
            name: name.to_owned(),
        });
        match self.actions.get(name) {
            Some(result) => result.clone(),
            None => Err(refusals::action(&self.plugin_name, name)),
        }
    }

    /// The token stubbed for `resource`; resources compare as the daemon compares them,
    /// without regard to case or a trailing slash.
    pub(crate) fn access_token(&mut self, resource: &str) -> Result<AccessToken, HostError> {
        self.calls.push(HostCall::AccessToken {
            resource: resource.to_owned(),
        });
        let wanted = audience(resource);
        let stubbed = self.tokens.iter().find(|(granted, _)| {
            !wanted.is_empty() && audience(granted).eq_ignore_ascii_case(wanted)
        });
        match stubbed {
            Some((_, result)) => result.clone(),
            None => Err(refusals::identity(&self.plugin_name, resource)),
        }
    }
}

fn audience(resource: &str) -> &str {
    resource.trim().trim_end_matches('/')
}
