//! The conversions every frozen contract version shares with the latest one: the types
//! that have not changed since 0.1.0 (the host's `level`, `host-error`, `http-request`,
//! `http-response`, `action-output`; the event, its type, status, source and phase; the
//! decision). Each frozen module expands them once, next to its own, with its bindings'
//! `host` and `types` modules and the `latest` ones in scope.

/// Expands the shared conversions in a frozen version's module.
macro_rules! unchanged_since_v0_1_0 {
    () => {
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
                    // Older contracts have no Shutdown: a type they do not know, whose
                    // `event-type-raw` ("Shutdown") says what it is.
                    latest::EventType::Shutdown | latest::EventType::Unknown => {
                        types::EventType::Unknown
                    }
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
                    latest::EventSource::OperatingSystem | latest::EventSource::Unknown => {
                        types::EventSource::Unknown
                    }
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
    };
}

pub(crate) use unchanged_since_v0_1_0;
