//! What the simulator shows of itself (`GET /simulator/state`, `SimulatorHandle::snapshot`):
//! the current document, approvals, requests and history, typed for tests to read.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::state::Transition;

/// The simulator's whole visible state at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateSnapshot {
    pub scenario: String,
    pub speed: f64,
    pub started_at_unix_ms: u64,
    pub now_scenario_ms: u64,
    pub finished: bool,
    /// DocumentIncarnation as clients see it now.
    pub incarnation: u64,
    /// The events of the current document, exactly as rendered on the wire.
    pub events: Vec<WireEvent>,
    pub approvals: Vec<ApprovalRecord>,
    /// The most recent requests (at most [`REQUEST_LOG_LIMIT`]), oldest first.
    pub requests: Vec<RequestRecord>,
    pub history: Vec<HistoryRecord>,
}

/// One event as the 2020-07-01 JSON has it (field names as on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct WireEvent {
    pub event_id: String,
    pub event_type: String,
    pub resource_type: String,
    pub resources: Vec<String>,
    pub event_status: String,
    /// RFC 1123, or "" once Started.
    pub not_before: String,
    pub description: String,
    pub event_source: String,
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
    pub event_id: String,
    /// The VM whose URL the POST came to (the default VM for unprefixed URLs).
    pub vm: String,
    pub at_unix_ms: u64,
    pub at_scenario_ms: u64,
    /// Whether the POST was answered 200 (the id named a current event).
    pub accepted: bool,
}

/// One HTTP request to the IMDS endpoints (not the /simulator ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub vm: String,
    pub status: u16,
    pub at_unix_ms: u64,
}

/// One change of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    pub event_id: String,
    pub transition: Transition,
    pub at_scenario_ms: u64,
    pub at_unix_ms: u64,
}

/// How many requests the simulator remembers.
pub const REQUEST_LOG_LIMIT: usize = 10_000;

/// A log that forgets its oldest entries beyond a limit.
#[derive(Debug, Clone)]
pub struct BoundedLog<T> {
    entries: VecDeque<T>,
    limit: usize,
}

impl<T: Clone> BoundedLog<T> {
    pub fn new(limit: usize) -> BoundedLog<T> {
        BoundedLog {
            entries: VecDeque::new(),
            limit,
        }
    }

    pub fn push(&mut self, entry: T) {
        if self.entries.len() == self.limit {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    pub fn to_vec(&self) -> Vec<T> {
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
