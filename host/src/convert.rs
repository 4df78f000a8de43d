//! Maps IMDS events onto the WIT types plugins receive; the one place where the daemon's
//! view of an event meets the plugin contract.

use std::time::{SystemTime, UNIX_EPOCH};

use forewarn_imds as imds;
use forewarn_runtime::wit::latest as wit;

/// The event as a plugin sees it.
pub fn to_wit_event(event: &imds::ScheduledEvent) -> wit::ScheduledEvent {
    wit::ScheduledEvent {
        id: event.id.clone(),
        event_type: to_wit_type(event.event_type),
        event_type_raw: event.event_type_raw.clone(),
        resource_type: event.resource_type.clone(),
        resources: event.resources.clone(),
        status: match event.status {
            imds::EventStatus::Scheduled => wit::EventStatus::Scheduled,
            imds::EventStatus::Started => wit::EventStatus::Started,
        },
        not_before_unix_ms: event.not_before.map(unix_ms),
        description: event.description.clone(),
        source: match event.source {
            imds::EventSource::Platform => wit::EventSource::Platform,
            imds::EventSource::User => wit::EventSource::User,
            imds::EventSource::Unknown => wit::EventSource::Unknown,
        },
        duration_seconds: event.duration_seconds,
    }
}

fn to_wit_type(event_type: imds::EventType) -> wit::EventType {
    match event_type {
        imds::EventType::Freeze => wit::EventType::Freeze,
        imds::EventType::Reboot => wit::EventType::Reboot,
        imds::EventType::Redeploy => wit::EventType::Redeploy,
        imds::EventType::Preempt => wit::EventType::Preempt,
        imds::EventType::Terminate => wit::EventType::Terminate,
        imds::EventType::Unknown => wit::EventType::Unknown,
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The instant `ms` milliseconds after the Unix epoch.
pub fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

/// The WIT name of a phase, for logs and the timeline.
pub fn phase_name(phase: wit::Phase) -> &'static str {
    match phase {
        wit::Phase::Prepare => "prepare",
        wit::Phase::Started => "started",
        wit::Phase::EndedAfterStart => "ended-after-start",
        wit::Phase::EndedWithoutStart => "ended-without-start",
    }
}
