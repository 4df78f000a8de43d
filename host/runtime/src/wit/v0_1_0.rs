//! The frozen WIT contract `forewarn:plugin@0.1.0` (`host/runtime/wit/since_v0.1.0`): its
//! bindings and the conversions between its types and the latest ones.
//!
//! `host_api/v0_1_0.rs` serves its host calls through the latest implementation; a 0.1.0
//! plugin simply does not see what later versions added (identity tokens, `vm`,
//! `until-not-before-ms`, `on-start`).

// The generated items carry the WIT's own documentation, where it has any.
#![allow(missing_docs)]

use crate::wit::v0_2_0 as latest;
use crate::wit::version::WitVersion;

wasmtime::component::bindgen!({
    path: "wit/since_v0.1.0",
    world: "event-handler",
    imports: {
        "forewarn:plugin/host.http-send": async,
        "forewarn:plugin/host.run-action": async,
        "forewarn:plugin/host.state-set": async,
        "forewarn:plugin/host.state-delete": async,
    },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub(crate) use forewarn::plugin::{host, types};

/// The oldest plugin contract version these bindings serve.
pub(crate) const MIN_VERSION: WitVersion = WitVersion::new(0, 1, 0);

impl From<host::Level> for latest::Level {
    fn from(level: host::Level) -> Self {
        match level {
            host::Level::Trace => latest::Level::Trace,
            host::Level::Debug => latest::Level::Debug,
            host::Level::Info => latest::Level::Info,
            host::Level::Warn => latest::Level::Warn,
            host::Level::Error => latest::Level::Error,
        }
    }
}

impl From<latest::HostError> for host::HostError {
    fn from(error: latest::HostError) -> Self {
        match error {
            latest::HostError::NotGranted(text) => host::HostError::NotGranted(text),
            latest::HostError::Invalid(text) => host::HostError::Invalid(text),
            latest::HostError::Failed(text) => host::HostError::Failed(text),
            latest::HostError::TimedOut => host::HostError::TimedOut,
        }
    }
}

impl From<host::HttpRequest> for latest::HttpRequest {
    fn from(request: host::HttpRequest) -> Self {
        latest::HttpRequest {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
        }
    }
}

impl From<latest::HttpResponse> for host::HttpResponse {
    fn from(response: latest::HttpResponse) -> Self {
        host::HttpResponse {
            status: response.status,
            headers: response.headers,
            body: response.body,
        }
    }
}

impl From<latest::ActionOutput> for host::ActionOutput {
    fn from(output: latest::ActionOutput) -> Self {
        host::ActionOutput {
            exit_code: output.exit_code,
            stdout: output.stdout,
            stderr: output.stderr,
        }
    }
}

impl From<&latest::ScheduledEvent> for types::ScheduledEvent {
    fn from(event: &latest::ScheduledEvent) -> Self {
        types::ScheduledEvent {
            id: event.id.clone(),
            event_type: event.event_type.into(),
            event_type_raw: event.event_type_raw.clone(),
            resource_type: event.resource_type.clone(),
            resources: event.resources.clone(),
            status: event.status.into(),
            not_before_unix_ms: event.not_before_unix_ms,
            description: event.description.clone(),
            source: event.source.into(),
            duration_seconds: event.duration_seconds,
        }
    }
}

impl From<latest::EventType> for types::EventType {
    fn from(event_type: latest::EventType) -> Self {
        match event_type {
            latest::EventType::Freeze => types::EventType::Freeze,
            latest::EventType::Reboot => types::EventType::Reboot,
            latest::EventType::Redeploy => types::EventType::Redeploy,
            latest::EventType::Preempt => types::EventType::Preempt,
            latest::EventType::Terminate => types::EventType::Terminate,
            latest::EventType::Unknown => types::EventType::Unknown,
        }
    }
}

impl From<latest::EventStatus> for types::EventStatus {
    fn from(status: latest::EventStatus) -> Self {
        match status {
            latest::EventStatus::Scheduled => types::EventStatus::Scheduled,
            latest::EventStatus::Started => types::EventStatus::Started,
        }
    }
}

impl From<latest::EventSource> for types::EventSource {
    fn from(source: latest::EventSource) -> Self {
        match source {
            latest::EventSource::Platform => types::EventSource::Platform,
            latest::EventSource::User => types::EventSource::User,
            latest::EventSource::Unknown => types::EventSource::Unknown,
        }
    }
}

impl From<latest::Phase> for types::Phase {
    fn from(phase: latest::Phase) -> Self {
        match phase {
            latest::Phase::Prepare => types::Phase::Prepare,
            latest::Phase::Started => types::Phase::Started,
            latest::Phase::EndedAfterStart => types::Phase::EndedAfterStart,
            latest::Phase::EndedWithoutStart => types::Phase::EndedWithoutStart,
        }
    }
}

/// The 0.1.0 context: the latest one without `until-not-before-ms` and `vm`.
impl From<&latest::Context> for types::Context {
    fn from(context: &latest::Context) -> Self {
        types::Context {
            vm_name: context.vm_name.clone(),
            affects_this_vm: context.affects_this_vm,
            deadline_unix_ms: context.deadline_unix_ms,
            attempt: context.attempt,
        }
    }
}

impl From<types::Decision> for latest::Decision {
    fn from(decision: types::Decision) -> Self {
        match decision {
            types::Decision::Approve => latest::Decision::Approve,
            types::Decision::Defer(deferral) => latest::Decision::Defer(latest::Deferral {
                reason: deferral.reason,
                retry_after_ms: deferral.retry_after_ms,
            }),
        }
    }
}
