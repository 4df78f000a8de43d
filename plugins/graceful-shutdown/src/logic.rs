//! graceful-shutdown's decisions as pure functions: its settings from config, which events
//! stop the app, and the set of events it stopped the app for (tested natively).

use forewarn_sdk::Event;

/// Event types that stop the app unless `event-types` says otherwise.
/// Shutdown is forewarn's own: the operating system shutting down with no Scheduled Event.
const DEFAULT_EVENT_TYPES: &str = "Reboot, Redeploy, Preempt, Terminate, Shutdown";

/// graceful-shutdown's configuration (the `[config]` table of `graceful-shutdown.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShutdownSettings {
    /// `stop-action`: the operator action (`[actions.NAME]`) that stops the app before
    /// maintenance; `None` when not configured (the plugin then approves without stopping).
    pub(crate) stop_action: Option<String>,
    /// `start-action`: the action that starts the app again once the event is over; `None`
    /// when not configured.
    pub(crate) start_action: Option<String>,
    /// Lower-case event type names, or "*" for all.
    pub(crate) event_types: Vec<String>,
}

impl ShutdownSettings {
    /// Reads `stop-action`, `start-action` and `event-types` (comma-separated, default
    /// "Reboot, Redeploy, Preempt, Terminate, Shutdown") through `lookup`.
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let value = |key: &str| lookup(key).filter(|value| !value.trim().is_empty());
        let types = value("event-types").unwrap_or_else(|| DEFAULT_EVENT_TYPES.to_owned());
        ShutdownSettings {
            stop_action: value("stop-action"),
            start_action: value("start-action"),
            event_types: types
                .split(',')
                .map(|name| name.trim().to_ascii_lowercase())
                .filter(|name| !name.is_empty())
                .collect(),
        }
    }

    /// Whether `event`'s type is one that stops the app (by parsed or raw name).
    pub(crate) fn stops_for(&self, event: &Event) -> bool {
        self.event_types.iter().any(|name| {
            name == "*"
                || name == event.event_type.as_str()
                || name.eq_ignore_ascii_case(&event.event_type_raw)
        })
    }
}

/// Whether to run the start action when an event ends: after a started event always (the
/// VM went down), after a canceled one only if the app was stopped for it; and in both
/// cases only when no other event still holds the app stopped.
pub(crate) fn should_start(
    ended_after_start: bool,
    was_stopped_for_it: bool,
    others_left: bool,
) -> bool {
    if others_left {
        return false;
    }
    ended_after_start || was_stopped_for_it
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use forewarn_sdk::{EventSource, EventStatus, EventType};

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> ShutdownSettings {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ShutdownSettings::from_lookup(|key| map.get(key).cloned())
    }

    fn event(event_type: EventType, raw: &str) -> Event {
        Event {
            id: "E1".into(),
            event_type,
            event_type_raw: raw.into(),
            resource_type: "VirtualMachine".into(),
            resources: vec!["vm-a".into()],
            status: EventStatus::Scheduled,
            not_before_unix_ms: None,
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds: None,
        }
    }

    #[test]
    fn default_types_are_the_ones_that_take_the_vm_down() {
        let parsed = settings(&[("stop-action", "stop-app")]);
        assert_eq!(parsed.stop_action.as_deref(), Some("stop-app"));
        assert_eq!(parsed.start_action, None);
        assert!(parsed.stops_for(&event(EventType::Reboot, "Reboot")));
        assert!(parsed.stops_for(&event(EventType::Terminate, "Terminate")));
        assert!(parsed.stops_for(&event(EventType::Shutdown, "Shutdown")));
        assert!(!parsed.stops_for(&event(EventType::Freeze, "Freeze")));
        assert!(!parsed.stops_for(&event(EventType::Unknown, "Hibernate")));
    }

    #[test]
    fn event_types_are_configurable_by_name_or_star() {
        let parsed = settings(&[("event-types", "Preempt, hibernate")]);
        assert!(parsed.stops_for(&event(EventType::Preempt, "Preempt")));
        assert!(parsed.stops_for(&event(EventType::Unknown, "Hibernate")));
        assert!(!parsed.stops_for(&event(EventType::Reboot, "Reboot")));
        assert!(settings(&[("event-types", "*")]).stops_for(&event(EventType::Freeze, "Freeze")));
    }

    #[test]
    fn start_runs_after_a_started_event_or_an_undone_stop_when_nothing_else_holds() {
        assert!(should_start(true, false, false));
        assert!(should_start(false, true, false));
        assert!(!should_start(false, false, false));
        assert!(!should_start(true, true, true));
    }
}
