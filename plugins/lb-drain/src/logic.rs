//! lb-drain's decisions as pure functions: its settings from config, whether an event needs a
//! drain, where a drain stands (what the load balancers probing `/readyz` have seen, within the
//! drain window), and the set of events drained for (tested natively).

use std::time::Duration;

use forewarn_sdk::{Context, DrainStatus, Event, EventType};

/// Longest wait between two checks of a drain in progress, so the log shows it counting down.
const MAX_RETRY: Duration = Duration::from_secs(2);
/// How often a drain waiting for the probers looks again: well inside a probe interval, so
/// the approval follows the load balancer's own "down" closely.
const PROBE_RETRY: Duration = Duration::from_millis(200);
/// How often a drain no load balancer probes looks again for a prober.
const NO_PROBE_RETRY: Duration = Duration::from_secs(1);

/// lb-drain's configuration (the `[config]` table of `lb-drain.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrainSettings {
    /// The longest the VM stays not ready before approval: the whole drain when no load
    /// balancer probes `/readyz`, the upper bound when one does.
    pub(crate) drain: Duration,
    /// Failed probes in a row after which the load balancer takes a VM out (its own
    /// setting: HAProxy's `fall`, Azure Load Balancer's `probeThreshold`).
    pub(crate) unhealthy_threshold: u32,
    /// How long open connections get once every load balancer took the VM out.
    pub(crate) connection_drain: Duration,
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
    /// `connection-drain-seconds` (defaults 5, 3 and 2: 17 s); `unhealthy-threshold` is 1 to
    /// 16.
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let number = |key: &str, default: u64| -> Result<u64, String> {
            match lookup(key) {
                None => Ok(default),
                Some(text) => text.trim().parse().map_err(|_| {
                    format!("lb-drain config `{key}` = \"{text}\" is not a whole number of seconds")
                }),
            }
        };
        let threshold = number("unhealthy-threshold", DEFAULT_UNHEALTHY_THRESHOLD)?;
        let unhealthy_threshold = u32::try_from(threshold)
            .ok()
            .filter(|threshold| (1..=16).contains(threshold))
            .ok_or_else(|| {
                format!(
                    "lb-drain config `unhealthy-threshold` = {threshold} is out of range: give \
                     the load balancer's own threshold (HAProxy's `fall`, Azure Load Balancer's \
                     `probeThreshold`), 1 to 16"
                )
            })?;
        let connection_drain_seconds = number("connection-drain-seconds", 2)?;
        let drain_seconds = match lookup("drain-seconds") {
            Some(_) => number("drain-seconds", 0)?,
            None => number("probe-interval-seconds", 5)? * threshold + connection_drain_seconds,
        };
        let url = |key: &str| lookup(key).filter(|url| !url.trim().is_empty());
        Ok(DrainSettings {
            drain: Duration::from_secs(drain_seconds),
            unhealthy_threshold,
            connection_drain: Duration::from_secs(connection_drain_seconds),
            freeze_threshold: Duration::from_secs(number("freeze-threshold-seconds", 10)?),
            deregister_url: url("deregister-url"),
            register_url: url("register-url"),
        })
    }
}

/// `unhealthy-threshold` when the config does not say: HAProxy's and Application Gateway's
/// default, above Azure Load Balancer's.
pub(crate) const DEFAULT_UNHEALTHY_THRESHOLD: u64 = 3;

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

/// What the load balancers probing `/readyz` have seen, as `drain-progress` told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProbeReport {
    /// Probers that asked `/readyz` in the last minute.
    pub(crate) probers: u32,
    /// Of those, the ones that got the threshold of 503s in a row since the VM went not ready.
    pub(crate) drained: u32,
    /// How long all of them have (none until all have).
    pub(crate) drained_for: Option<Duration>,
}

impl From<DrainStatus> for ProbeReport {
    fn from(progress: DrainStatus) -> Self {
        ProbeReport {
            probers: progress.probers,
            drained: progress.probers_drained,
            drained_for: progress.drained_for_ms.map(Duration::from_millis),
        }
    }
}

/// What a drain in progress waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitingFor {
    /// Probers still to see the threshold of 503s in a row.
    Probers { drained: u32, probers: u32 },
    /// Every prober took the VM out; open connections finish.
    Connections,
    /// Nothing probes `/readyz`: the window is all there is.
    Window,
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainEnd {
    /// Every load balancer probing `/readyz` took the VM out, and the connection drain passed.
    LoadBalancersNoticed,
    /// The window passed (no prober, or not every prober noticed in time).
    WindowPassed,
}

/// Where a drain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainStep {
    /// Still draining: at most `left` to go; check again after `retry_after`.
    Wait {
        left: Duration,
        retry_after: Duration,
        waiting_for: WaitingFor,
    },
    /// The drain is over.
    Done(DrainEnd),
}

/// Whole seconds left, rounded up: "draining: 3 s left" until the last moment.
pub(crate) fn seconds_left(left: Duration) -> u64 {
    left.as_millis()
        .div_ceil(1000)
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The drain step at `now_ms` for a drain begun at `started_ms`, given what the probers saw
/// (`None` when the host could not tell: the window alone decides).
pub(crate) fn drain_step(
    started_ms: u64,
    now_ms: u64,
    settings: &DrainSettings,
    probes: Option<ProbeReport>,
) -> DrainStep {
    let elapsed = Duration::from_millis(now_ms.saturating_sub(started_ms));
    let window_left = settings.drain.saturating_sub(elapsed);
    if window_left.is_zero() {
        return DrainStep::Done(DrainEnd::WindowPassed);
    }
    let wait = |left: Duration, retry: Duration, waiting_for| DrainStep::Wait {
        left,
        retry_after: left.min(retry),
        waiting_for,
    };
    let Some(probes) = probes.filter(|probes| probes.probers > 0) else {
        return wait(window_left, NO_PROBE_RETRY, WaitingFor::Window);
    };
    let Some(drained_for) = probes.drained_for else {
        let waiting_for = WaitingFor::Probers {
            drained: probes.drained,
            probers: probes.probers,
        };
        return wait(window_left, PROBE_RETRY, waiting_for);
    };
    let connections_left = settings.connection_drain.saturating_sub(drained_for);
    if connections_left.is_zero() {
        return DrainStep::Done(DrainEnd::LoadBalancersNoticed);
    }
    wait(
        connections_left.min(window_left),
        MAX_RETRY,
        WaitingFor::Connections,
    )
}

/// The deferral's reason for a drain waiting for `waiting_for`, with `left` to go at most.
pub(crate) fn waiting_reason(waiting_for: WaitingFor, left: Duration, threshold: u32) -> String {
    let seconds = seconds_left(left);
    match waiting_for {
        WaitingFor::Probers { drained, probers } => format!(
            "draining: {drained} of {probers} load balancer probers answered 503 {threshold} \
             times in a row so far; at most {seconds} s left"
        ),
        WaitingFor::Connections => format!(
            "draining: every load balancer took the VM out; {seconds} s left for open connections"
        ),
        WaitingFor::Window => {
            format!("draining: {NO_PROBES_SEEN}; {seconds} s left of the drain window")
        }
    }
}

/// Said (deferral, log) when a drain finds nothing probing `/readyz`.
pub(crate) const NO_PROBES_SEEN: &str =
    "no load balancer probe seen on /readyz: is the health probe pointed at forewarn?";

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
        assert_eq!(defaults.drain, Duration::from_secs(17));
        assert_eq!(defaults.unhealthy_threshold, 3);
        assert_eq!(defaults.connection_drain, Duration::from_secs(2));
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
        for threshold in ["0", "17"] {
            let error = settings(&[("unhealthy-threshold", threshold)]).unwrap_err();
            assert!(
                error.contains("`unhealthy-threshold`") && error.contains("1 to 16"),
                "{error}"
            );
        }
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

    fn window(seconds: u64) -> DrainSettings {
        DrainSettings {
            drain: Duration::from_secs(seconds),
            ..settings(&[]).unwrap()
        }
    }

    fn probes(probers: u32, drained: u32, drained_for_ms: Option<u64>) -> Option<ProbeReport> {
        Some(ProbeReport {
            probers,
            drained,
            drained_for: drained_for_ms.map(Duration::from_millis),
        })
    }

    #[test]
    fn without_a_prober_the_window_is_the_drain() {
        let twelve = window(12);
        for unprobed in [None, probes(0, 0, None)] {
            assert_eq!(
                drain_step(1_000, 1_000, &twelve, unprobed),
                DrainStep::Wait {
                    left: Duration::from_secs(12),
                    retry_after: Duration::from_secs(1),
                    waiting_for: WaitingFor::Window,
                }
            );
            assert_eq!(
                drain_step(1_000, 12_500, &twelve, unprobed),
                DrainStep::Wait {
                    left: Duration::from_millis(500),
                    retry_after: Duration::from_millis(500),
                    waiting_for: WaitingFor::Window,
                }
            );
            assert_eq!(
                drain_step(1_000, 13_000, &twelve, unprobed),
                DrainStep::Done(DrainEnd::WindowPassed)
            );
        }
        assert_eq!(
            drain_step(1_000, 0, &window(0), None),
            DrainStep::Done(DrainEnd::WindowPassed)
        );
    }

    #[test]
    fn with_probers_the_drain_ends_once_all_took_the_vm_out_and_connections_drained() {
        let fifteen = window(15);
        assert_eq!(
            drain_step(0, 1_000, &fifteen, probes(2, 1, None)),
            DrainStep::Wait {
                left: Duration::from_secs(14),
                retry_after: Duration::from_millis(200),
                waiting_for: WaitingFor::Probers {
                    drained: 1,
                    probers: 2
                },
            }
        );
        assert_eq!(
            drain_step(0, 3_000, &fifteen, probes(2, 2, Some(500))),
            DrainStep::Wait {
                left: Duration::from_millis(1_500),
                retry_after: Duration::from_millis(1_500),
                waiting_for: WaitingFor::Connections,
            }
        );
        assert_eq!(
            drain_step(0, 4_500, &fifteen, probes(2, 2, Some(2_000))),
            DrainStep::Done(DrainEnd::LoadBalancersNoticed),
            "3 s after the event, not 15"
        );
    }

    #[test]
    fn the_window_bounds_a_drain_the_probers_never_finish() {
        let five = window(5);
        assert_eq!(
            drain_step(0, 5_000, &five, probes(3, 2, None)),
            DrainStep::Done(DrainEnd::WindowPassed)
        );
        assert_eq!(
            drain_step(0, 4_000, &five, probes(1, 1, Some(100))),
            DrainStep::Wait {
                left: Duration::from_secs(1),
                retry_after: Duration::from_secs(1),
                waiting_for: WaitingFor::Connections,
            },
            "the connection drain is cut at the window's end"
        );
    }

    #[test]
    fn the_reasons_say_what_the_drain_waits_for() {
        let left = Duration::from_millis(2_500);
        let probers = waiting_reason(
            WaitingFor::Probers {
                drained: 1,
                probers: 2,
            },
            left,
            3,
        );
        assert_eq!(
            probers,
            "draining: 1 of 2 load balancer probers answered 503 3 times in a row so far; at \
             most 3 s left"
        );
        let unprobed = waiting_reason(WaitingFor::Window, left, 3);
        assert!(unprobed.contains(NO_PROBES_SEEN), "{unprobed}");
        let connections = waiting_reason(WaitingFor::Connections, left, 3);
        assert!(connections.contains("open connections"), "{connections}");
    }

    #[test]
    fn seconds_left_rounds_up() {
        assert_eq!(seconds_left(Duration::from_millis(2_001)), 3);
        assert_eq!(seconds_left(Duration::from_millis(3_000)), 3);
        assert_eq!(seconds_left(Duration::from_millis(1)), 1);
    }
}
