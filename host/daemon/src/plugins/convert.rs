//! Maps IMDS events onto the WIT types plugins receive; the one place where the daemon's
//! view of an event meets the plugin contract.

use forewarn_imds::PluginName;
use std::time::Duration;

use forewarn_imds as imds;
use forewarn_runtime::wit::latest as wit;
use forewarn_runtime::{CallFailure, CallOutcome};

use crate::pipeline::scheduler::CallReply;
use crate::pipeline::state::{AnswerOutcome, CallPhase};
use forewarn_imds::unix_ms;

/// The event as a plugin sees it.
pub(crate) fn to_wit_event(event: &imds::ScheduledEvent) -> wit::ScheduledEvent {
    wit::ScheduledEvent {
        id: event.id.to_string(),
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
            imds::EventSource::OperatingSystem => wit::EventSource::OperatingSystem,
            imds::EventSource::Unknown => wit::EventSource::Unknown,
        },
        duration_seconds: event.duration_seconds,
    }
}

/// This VM as a plugin sees it; an unexpected priority or policy text is `unknown`.
pub(crate) fn to_wit_vm(compute: &imds::ComputeInfo) -> wit::VmInfo {
    let priority = match compute.priority {
        imds::VmPriority::Regular => wit::VmPriority::Regular,
        imds::VmPriority::Spot => wit::VmPriority::Spot,
        imds::VmPriority::Low => wit::VmPriority::Low,
        imds::VmPriority::Other(_) => wit::VmPriority::Unknown,
    };
    let eviction_policy = compute.eviction_policy.as_ref().map(|policy| match policy {
        imds::EvictionPolicy::Deallocate => wit::EvictionPolicy::Deallocate,
        imds::EvictionPolicy::Delete => wit::EvictionPolicy::Delete,
        imds::EvictionPolicy::Other(_) => wit::EvictionPolicy::Unknown,
    });
    wit::VmInfo {
        priority,
        eviction_policy,
    }
}

fn to_wit_type(event_type: imds::EventType) -> wit::EventType {
    match event_type {
        imds::EventType::Freeze => wit::EventType::Freeze,
        imds::EventType::Reboot => wit::EventType::Reboot,
        imds::EventType::Redeploy => wit::EventType::Redeploy,
        imds::EventType::Preempt => wit::EventType::Preempt,
        imds::EventType::Terminate => wit::EventType::Terminate,
        imds::EventType::Shutdown => wit::EventType::Shutdown,
        imds::EventType::Unknown => wit::EventType::Unknown,
    }
}

/// The WIT phase for a pipeline phase.
pub(crate) fn to_wit_phase(phase: CallPhase) -> wit::Phase {
    match phase {
        CallPhase::Prepare => wit::Phase::Prepare,
        CallPhase::Started => wit::Phase::Started,
        CallPhase::EndedAfterStart => wit::Phase::EndedAfterStart,
        CallPhase::EndedWithoutStart => wit::Phase::EndedWithoutStart,
    }
}

/// A call's outcome as the pipeline records it.
pub(crate) fn reply_of(outcome: CallOutcome) -> CallReply {
    let (outcome_kind, reason, retry_after) = match &outcome.answer {
        Ok(wit::Decision::Approve) => (AnswerOutcome::Approve, String::new(), Duration::ZERO),
        Ok(wit::Decision::Defer(deferral)) => (
            AnswerOutcome::Defer,
            deferral.reason.clone(),
            Duration::from_millis(u64::from(deferral.retry_after_ms)),
        ),
        Err(failure) => (failure_outcome(failure), failure.reason(), Duration::ZERO),
    };
    CallReply {
        outcome: outcome_kind,
        reason,
        retry_after,
        elapsed: outcome.elapsed,
        logs: outcome.logs,
    }
}

/// The reply recorded for a call whose plugin was unloaded before it could start.
pub(crate) fn unloaded_reply(plugin: &PluginName) -> CallReply {
    CallReply {
        outcome: AnswerOutcome::Instantiation,
        reason: format!("plugin `{plugin}` was unloaded before the call could start"),
        retry_after: Duration::ZERO,
        elapsed: Duration::ZERO,
        logs: Vec::new(),
    }
}

fn failure_outcome(failure: &CallFailure) -> AnswerOutcome {
    match failure {
        CallFailure::BudgetExceeded { .. } => AnswerOutcome::BudgetExceeded,
        CallFailure::MemoryExceeded { .. } => AnswerOutcome::MemoryExceeded,
        CallFailure::Trapped { .. } => AnswerOutcome::Trap,
        CallFailure::Instantiation { .. } => AnswerOutcome::Instantiation,
    }
}
