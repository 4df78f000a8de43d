//! lb-drain's decisions as pure functions: its settings from config, whether an event needs a
//! drain, where a drain stands, and the set of events drained for (tested natively).

use std::time::Duration;

use forewarn_sdk::{Context, Event, EventType};

/// Longest wait between two checks of a drain in progress, so the log shows it counting down.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// lb-drain's configuration (the `[config]` table of `lb-drain.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrainSettings {
    /// How long the VM stays not ready before approval.
    pub(crate) drain: Duration,
    /// A Freeze whose announced duration is shorter than this is approved without draining.
    pub(crate) freeze_threshold: Duration,
    /// POSTed once the drain window has passed, before approving.
    pub(crate) deregister_url: Option<String>,
    /// POSTed when the last drained event is over, before marking the VM ready.
    pub(crate) register_url: Option<String>,
}

impl DrainSettings {
    /// Reads the settings through `lookup` (the `config` host call). The drain window is
    /// `drain-seconds`, or else `probe-interval-seconds` × `unhealthy-threshold` +
    /// `connection-drain-seconds` (defaults 5, 2 and 5: 15 s).
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let number = |key: &str, default: u64| -> Result<u64, String> {
            match lookup(key) {
                None => Ok(default),
                Some(text) => text.trim().parse().map_err(|_| {
                    format!("lb-drain config `{key}` = \"{text}\" is not a whole number of seconds")
                }),
            }
        };
        let drain_seconds = match lookup("drain-seconds") {
            Some(_) => number("drain-seconds", 0)?,
            None => {
                number("probe-interval-seconds", 5)? * number("unhealthy-threshold", 2)?
                    + number("connection-drain-seconds", 5)?
            }
        };
        let url = |key: &str| lookup(key).filter(|url| !url.trim().is_empty());
        Ok(DrainSettings {
            drain: Duration::from_secs(drain_seconds),
            freeze_threshold: Duration::from_secs(number("freeze-threshold-seconds", 10)?),
            deregister_url: url("deregister-url"),
            register_url: url("register-url"),
        })
    }
}

/// Whether preparing for `event` means draining this VM: it must name this VM and take it
/// down. A Freeze counts only when it is announced to last at least the threshold (or its
/// length is unknown).
pub(crate) fn should_drain(event: &Event, ctx: &Context, settings: &DrainSettings) -> bool {
    if !ctx.affects_this_vm {
        return false;
    }
    if event.event_type != EventType::Freeze {
        return true;
    }
    match event.duration() {
        Some(length) => length >= settings.freeze_threshold,
        None => true,
    }
}

/// Where a drain that started at `started_ms` stands at `now_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainStep {
    /// Still draining: `left` to go; check again after `retry_after`.
    Wait {
        left: Duration,
        retry_after: Duration,
    },
    /// The window has passed.
    Done,
}

/// Whole seconds left, rounded up: "draining: 3 s left" until the last moment.
pub(crate) fn seconds_left(left: Duration) -> u64 {
    left.as_millis()
        .div_ceil(1000)
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The drain step for a window of `window` begun at `started_ms`.
pub(crate) fn drain_step(started_ms: u64, now_ms: u64, window: Duration) -> DrainStep {
    let elapsed = Duration::from_millis(now_ms.saturating_sub(started_ms));
    let left = window.saturating_sub(elapsed);
    if left.is_zero() {
        return DrainStep::Done;
    }
    DrainStep::Wait {
        left,
        retry_after: left.min(MAX_RETRY),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use forewarn_sdk::{EventSource, EventStatus};

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<DrainSettings, String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        DrainSettings::from_lookup(|key| map.get(key).cloned())
    }

    fn event(event_type: EventType, duration_seconds: Option<i64>) -> Event {
        Event {
            id: "E1".into(),
            event_type,
            event_type_raw: event_type.as_str().into(),
            resource_type: "VirtualMachine".into(),
            resources: vec!["vm-a".into()],
            status: EventStatus::Scheduled,
            not_before_unix_ms: Some(1_700_000_000_000),
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds,
        }
    }

    fn ctx(affects_this_vm: bool) -> Context {
        Context {
            vm_name: "vm-a".into(),
            affects_this_vm,
            deadline_unix_ms: 0,
            attempt: 1,
            until_not_before_ms: Some(60_000),
            vm: Default::default(),
        }
    }

    #[test]
    fn drain_window_defaults_to_probe_times_threshold_plus_drain() {
        let defaults = settings(&[]).unwrap();
        assert_eq!(defaults.drain, Duration::from_secs(15));
        assert_eq!(defaults.freeze_threshold, Duration::from_secs(10));
        assert_eq!(defaults.deregister_url, None);
        let parts = settings(&[
            ("probe-interval-seconds", "2"),
            ("unhealthy-threshold", "3"),
            ("connection-drain-seconds", "4"),
        ])
        .unwrap();
        assert_eq!(parts.drain, Duration::from_secs(10));
        let direct = settings(&[("drain-seconds", "7"), ("probe-interval-seconds", "100")]);
        assert_eq!(direct.unwrap().drain, Duration::from_secs(7));
    }

    #[test]
    fn bad_numbers_name_the_key() {
        let error = settings(&[("drain-seconds", "soon")]).unwrap_err();
        assert!(error.contains("drain-seconds"), "{error}");
    }

    #[test]
    fn empty_urls_count_as_unset() {
        let parsed = settings(&[("register-url", " "), ("deregister-url", "http://x/d")]);
        let parsed = parsed.unwrap();
        assert_eq!(parsed.register_url, None);
        assert_eq!(parsed.deregister_url.as_deref(), Some("http://x/d"));
    }

    #[test]
    fn drains_for_down_events_and_long_or_unknown_freezes_only() {
        let s = settings(&[]).unwrap();
        assert!(should_drain(
            &event(EventType::Reboot, None),
            &ctx(true),
            &s
        ));
        assert!(should_drain(
            &event(EventType::Unknown, None),
            &ctx(true),
            &s
        ));
        assert!(!should_drain(
            &event(EventType::Reboot, None),
            &ctx(false),
            &s
        ));
        assert!(!should_drain(
            &event(EventType::Freeze, Some(5)),
            &ctx(true),
            &s
        ));
        assert!(should_drain(
            &event(EventType::Freeze, Some(10)),
            &ctx(true),
            &s
        ));
        assert!(should_drain(
            &event(EventType::Freeze, Some(-1)),
            &ctx(true),
            &s
        ));
    }

    #[test]
    fn drain_counts_down_then_is_done() {
        let window = Duration::from_secs(12);
        assert_eq!(
            drain_step(1_000, 1_000, window),
            DrainStep::Wait {
                left: Duration::from_secs(12),
                retry_after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            drain_step(1_000, 11_500, window),
            DrainStep::Wait {
                left: Duration::from_millis(1_500),
                retry_after: Duration::from_millis(1_500)
            }
        );
        assert_eq!(drain_step(1_000, 13_000, window), DrainStep::Done);
        assert_eq!(drain_step(1_000, 0, Duration::ZERO), DrainStep::Done);
    }

    #[test]
    fn seconds_left_rounds_up() {
        assert_eq!(seconds_left(Duration::from_millis(2_001)), 3);
        assert_eq!(seconds_left(Duration::from_millis(3_000)), 3);
        assert_eq!(seconds_left(Duration::from_millis(1)), 1);
    }
}
