//! What the simulator shows of itself (`GET /simulator/state`, `SimulatorHandle::snapshot`):
//! the current document, approvals, requests and history, typed for tests to read.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::faults::{FaultKind, MalformedBody};
use crate::simulation::Transition;

/// The simulator's whole visible state at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateSnapshot {
    /// The scenario's name.
    pub scenario: String,
    /// How many times faster than the wall scenario time runs.
    pub speed: f64,
    /// Scenario time 0 on the wall clock, Unix milliseconds.
    pub started_at_unix_ms: u64,
    /// Scenario time now, in milliseconds.
    pub now_scenario_ms: u64,
    /// How much of it was skipped as quiet stretches (see
    /// `SimulatorHandle::allow_skipping`; `forewarn plugin test` allows it), in milliseconds.
    #[serde(default)]
    pub skipped_scenario_ms: u64,
    /// Whether every event has appeared and gone (plus the scenario's `end_after`).
    pub finished: bool,
    /// DocumentIncarnation as clients see it now.
    pub incarnation: u64,
    /// The events of the current document, exactly as rendered on the wire.
    pub events: Vec<WireEvent>,
    /// Every EventId named in a POST (at most [`REQUEST_LOG_LIMIT`]), oldest first.
    pub approvals: Vec<ApprovalRecord>,
    /// The most recent requests (at most [`REQUEST_LOG_LIMIT`]), oldest first.
    pub requests: Vec<RequestRecord>,
    /// Every change of every event, oldest first.
    pub history: Vec<HistoryRecord>,
    /// Every fault the simulator actually served (at most [`REQUEST_LOG_LIMIT`]), oldest
    /// first: proof that a scenario's fault happened, not only that it was configured.
    #[serde(default)]
    pub faults: Vec<FaultRecord>,
    /// The scale set, when the scenario has one: each instance's extension state, the
    /// repairs made and the rolling upgrade's steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_set: Option<crate::scale_set::ScaleSetSnapshot>,
}

/// One event as the 2020-07-01 JSON has it (field names as on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct WireEvent {
    /// `EventId`.
    pub event_id: String,
    /// `EventType`, e.g. `Reboot`.
    pub event_type: String,
    /// `ResourceType`, `VirtualMachine`.
    pub resource_type: String,
    /// `Resources`: the VMs the event affects.
    pub resources: Vec<String>,
    /// `EventStatus`: `Scheduled` or `Started`.
    pub event_status: String,
    /// RFC 1123, or "" once Started.
    pub not_before: String,
    /// `Description`.
    pub description: String,
    /// `EventSource`: `Platform` or `User`.
    pub event_source: String,
    /// `DurationInSeconds` (-1 when unknown).
    pub duration_in_seconds: i64,
}

/// The rendered document, read back into typed form.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct WireDocument {
    pub events: Vec<WireEvent>,
}

/// One EventId named in an accepted or rejected POST.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The EventId as the POST named it.
    pub event_id: String,
    /// The VM whose URL the POST came to (the default VM for unprefixed URLs).
    pub vm: String,
    /// When the POST arrived, Unix milliseconds.
    pub at_unix_ms: u64,
    /// When the POST arrived, in scenario time.
    pub at_scenario_ms: u64,
    /// Whether the POST was answered 200 (the id named a current event).
    pub accepted: bool,
}

/// One HTTP request to the IMDS endpoints (not the /simulator ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The request's place in the log, from 1 (the console asks for the ones after the
    /// last it has seen).
    #[serde(default)]
    pub seq: u64,
    /// `GET` or `POST`.
    pub method: String,
    /// The URL path, e.g. `/metadata/scheduledevents`.
    pub path: String,
    /// The query string, e.g. `api-version=2020-07-01`, when there was one.
    #[serde(default)]
    pub query: Option<String>,
    /// A POST's body (an approval's `StartRequests`), cut at [`REQUEST_BODY_KEPT`] bytes.
    #[serde(default)]
    pub body: Option<String>,
    /// The VM the URL names (the default VM when unprefixed; "" when unknown).
    pub vm: String,
    /// The status answered.
    pub status: u16,
    /// When the request arrived (before any injected delay), Unix milliseconds.
    pub at_unix_ms: u64,
}

/// One fault served: which kind, to which request, and what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// The kind of fault, as the scenario names it.
    pub kind: FaultKind,
    /// The request's method, `GET` or `POST`.
    pub method: String,
    /// The VM whose URL the request came to.
    pub vm: String,
    /// When the request arrived (before any injected delay), Unix milliseconds.
    pub at_unix_ms: u64,
    /// When the request arrived, in scenario time.
    pub at_scenario_ms: u64,
    /// `status`: the status answered.
    pub status: Option<u16>,
    /// `delay` and `slow-first-call`: how long the answer was held, in wall milliseconds.
    pub delay_ms: Option<u64>,
    /// `malformed`: what was served instead of the document.
    pub body: Option<MalformedBody>,
    /// `incarnation-reset`: the DocumentIncarnation of the first document served after it.
    pub incarnation: Option<u64>,
    /// `vm-clock`: the VM's clock minus Azure's from then on, in ms (recorded when scenario
    /// time reaches it; `method` and `vm` are empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_clock_offset_ms: Option<i64>,
}

/// One change of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// The event that changed.
    pub event_id: String,
    /// How it changed.
    pub transition: Transition,
    /// When, in scenario time.
    pub at_scenario_ms: u64,
    /// When, on the wall clock, Unix milliseconds.
    pub at_unix_ms: u64,
}

/// The path of IMDS's managed identity token endpoint (after any `/vm/{name}` prefix).
pub const IDENTITY_TOKEN_PATH: &str = "/metadata/identity/oauth2/token";

/// How much of a request's body the log keeps, in bytes.
pub const REQUEST_BODY_KEPT: usize = 4096;

/// How many requests the simulator remembers.
pub(crate) const REQUEST_LOG_LIMIT: usize = 10_000;

/// A log that forgets its oldest entries beyond a limit.
#[derive(Debug, Clone)]
pub(crate) struct BoundedLog<T> {
    entries: VecDeque<T>,
    limit: usize,
}

impl<T: Clone> BoundedLog<T> {
    pub(crate) fn new(limit: usize) -> BoundedLog<T> {
        BoundedLog {
            entries: VecDeque::new(),
            limit,
        }
    }

    pub(crate) fn push(&mut self, entry: T) {
        if self.entries.len() == self.limit {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// The entries, oldest first, without copying them.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.entries.iter()
    }

    pub(crate) fn to_vec(&self) -> Vec<T> {
        self.entries.iter().cloned().collect()
    }
}

impl StateSnapshot {
    /// The current event with this id, compared case-insensitively.
    pub fn event(&self, event_id: &str) -> Option<&WireEvent> {
        self.events
            .iter()
            .find(|event| event.event_id.eq_ignore_ascii_case(event_id))
    }

    /// The faults of one kind the simulator served, oldest first.
    pub fn faults_of(&self, kind: FaultKind) -> Vec<&FaultRecord> {
        self.faults
            .iter()
            .filter(|fault| fault.kind == kind)
            .collect()
    }

    /// The requests to the managed identity endpoint (any VM, any answer), oldest first:
    /// how many tokens a client fetched.
    pub fn identity_requests(&self) -> Vec<&RequestRecord> {
        self.requests
            .iter()
            .filter(|request| request.path.ends_with(IDENTITY_TOKEN_PATH))
            .collect()
    }

    /// The history of one event, oldest first.
    pub fn transitions_of(&self, event_id: &str) -> Vec<Transition> {
        self.history
            .iter()
            .filter(|record| record.event_id.eq_ignore_ascii_case(event_id))
            .map(|record| record.transition)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_log_forgets_the_oldest() {
        let mut log = BoundedLog::new(2);
        for entry in 1..=3 {
            log.push(entry);
        }
        assert_eq!(log.to_vec(), vec![2, 3]);
    }
}
