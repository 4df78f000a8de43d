//! What the simulator console (and any script) can do to a running simulation: start a
//! built-in scenario, generate an event, start/cancel/end one, inject a fault, and read it all.

use forewarn_imds::millis;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::builtin::{builtin_scenario, builtin_scenarios};
use crate::engine::{Engine, Inner};
use crate::faults::{FaultKind, FaultMethod, FaultSpec, MalformedBody};
use crate::ids::stable_event_id;
use crate::replay::served_document;
use crate::scenario::{EventSpec, InitialStatus, Source, event_problem};
use crate::simulation::{EventChange, EventChangeError};
use crate::snapshot::{FaultRecord, RequestRecord, WireDocument, WireEvent};

/// The most requests one console read returns (the newest; older ones are in
/// `/simulator/state`).
pub const CONSOLE_REQUESTS_MAX: usize = 200;
/// The longest notice a generated event may have: a week.
pub const GENERATED_NOTICE_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest a generated event may stay Started: a week.
pub const GENERATED_RUN_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most events the console may add to one run (each step of the simulation looks at all).
pub const GENERATED_EVENTS_MAX: usize = 1000;
/// The most faults the console may add to one run.
pub const INJECTED_FAULTS_MAX: usize = 1000;
/// The longest `Description` a generated event may have, in bytes.
const DESCRIPTION_MAX: usize = 1024;
/// The most `Resources` a generated event may name, and the longest name.
const RESOURCES_MAX: usize = 100;
const RESOURCE_NAME_MAX: usize = 128;
/// The longest window an injected fault may last (scenario time).
pub const FAULT_WINDOW_MAX: Duration = Duration::from_secs(600);
/// The api-version whose document the console shows.
const CONSOLE_API_VERSION: &str = "2020-07-01";

/// A bad console request: the field at fault and what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConsoleInputError {
    /// The JSON field (or URL part) at fault.
    pub field: String,
    /// What is wrong with it and what to send instead.
    pub problem: String,
}

fn bad(field: &str, problem: impl Into<String>) -> ConsoleInputError {
    ConsoleInputError {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// `POST /simulator/events`: one event that appears now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateEvent {
    /// `EventType`: Freeze, Reboot, Redeploy, Preempt, Terminate (any word passes through,
    /// as in scenarios).
    #[serde(rename = "type")]
    pub event_type: String,
    /// `Scheduled` (default) or `Started` (a hardware failure).
    #[serde(default)]
    pub status: InitialStatus,
    /// `Platform` (default) or `User`.
    #[serde(default)]
    pub source: Source,
    /// NotBefore, in seconds from now (scenario time); the type's minimum notice when absent.
    #[serde(default)]
    pub not_before_seconds: Option<u64>,
    /// `Resources`; every VM of the scenario when absent or empty.
    #[serde(default)]
    pub resources: Option<Vec<String>>,
    /// `DurationInSeconds`; -1 (unknown) when absent.
    #[serde(default)]
    pub duration_seconds: Option<i64>,
    /// `Description`.
    #[serde(default)]
    pub description: Option<String>,
    /// How long it stays Started before it disappears (seconds; 10 minutes when absent).
    #[serde(default)]
    pub runs_for_seconds: Option<u64>,
}

/// `POST /simulator/scenario`: play a built-in scenario from its start.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartScenario {
    /// A built-in scenario's name (`forewarn simulate --list`).
    pub name: String,
}

/// The faults the console injects, each a preset of the scenario format's faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsoleFault {
    /// 429 Too Many Requests to every GET (IMDS's rate limit).
    TooManyRequests,
    /// 410 Gone to every GET (IMDS while the VM's metadata is being set up).
    Gone,
    /// 500 Internal Server Error to every GET.
    ServerErrors,
    /// Every GET answered only after 3 seconds.
    Slow,
    /// Text that is not JSON instead of the document.
    Malformed,
    /// The document cut off halfway.
    Truncated,
    /// DocumentIncarnation drops back to 1 now.
    IncarnationReset,
    /// From now on the VM's clock is `offset_seconds` off Azure's (negative: behind): a step.
    VmClock,
}

impl ConsoleFault {
    /// Every preset, in the console's order.
    pub const ALL: [ConsoleFault; 8] = [
        ConsoleFault::TooManyRequests,
        ConsoleFault::Gone,
        ConsoleFault::ServerErrors,
        ConsoleFault::Slow,
        ConsoleFault::Malformed,
        ConsoleFault::Truncated,
        ConsoleFault::IncarnationReset,
        ConsoleFault::VmClock,
    ];

    /// The name in the API (`too-many-requests`, …).
    pub fn name(self) -> &'static str {
        match self {
            ConsoleFault::TooManyRequests => "too-many-requests",
            ConsoleFault::Gone => "gone",
            ConsoleFault::ServerErrors => "server-errors",
            ConsoleFault::Slow => "slow",
            ConsoleFault::Malformed => "malformed",
            ConsoleFault::Truncated => "truncated",
            ConsoleFault::IncarnationReset => "incarnation-reset",
            ConsoleFault::VmClock => "vm-clock",
        }
    }

    /// The fault of the scenario format this preset adds, for `from..until`.
    fn spec(self, from: Duration, until: Duration) -> FaultSpec {
        let mut spec = FaultSpec {
            kind: FaultKind::Status,
            from: Some(from),
            until: Some(until),
            status: None,
            delay: None,
            body: None,
            at: None,
            methods: vec![FaultMethod::Get],
            first_requests: None,
            after_approval: false,
            offset: None,
        };
        match self {
            ConsoleFault::TooManyRequests => spec.status = Some(429),
            ConsoleFault::Gone => spec.status = Some(410),
            ConsoleFault::ServerErrors => spec.status = Some(500),
            ConsoleFault::Slow => {
                spec.kind = FaultKind::Delay;
                spec.delay = Some(Duration::from_secs(3));
            }
            ConsoleFault::Malformed | ConsoleFault::Truncated => {
                spec.kind = FaultKind::Malformed;
                spec.body = Some(if self == ConsoleFault::Malformed {
                    MalformedBody::Garbage
                } else {
                    MalformedBody::Truncated
                });
            }
            ConsoleFault::IncarnationReset | ConsoleFault::VmClock => {
                spec.kind = match self {
                    ConsoleFault::VmClock => FaultKind::VmClock,
                    _ => FaultKind::IncarnationReset,
                };
                spec.at = Some(from);
                spec.from = None;
                spec.until = None;
            }
        }
        spec
    }
}

/// `POST /simulator/faults`: inject a fault from now for `seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectFault {
    /// Which preset.
    pub fault: ConsoleFault,
    /// How long it lasts, in scenario seconds (5 when absent; ignored by
    /// `incarnation-reset` and `vm-clock`, which happen once).
    #[serde(default)]
    pub seconds: Option<u64>,
    /// `vm-clock` only: how far the VM's clock is from Azure's from now on, in seconds
    /// (negative: behind; at most a day either way).
    #[serde(default)]
    pub offset_seconds: Option<i64>,
}

/// What an injected fault does and when, in scenario time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InjectedFault {
    /// The preset.
    pub fault: ConsoleFault,
    /// From, in scenario milliseconds.
    pub from_scenario_ms: u64,
    /// Until (exclusive), in scenario milliseconds.
    pub until_scenario_ms: u64,
}

/// What the console shows: `GET /simulator/console?after=SEQ`.
#[derive(Debug, Clone, Serialize)]
pub struct ConsoleView {
    /// The scenario playing.
    pub scenario: String,
    /// Its one-line description.
    pub description: String,
    /// Scenario time per wall time.
    pub speed: f64,
    /// Scenario time now, in milliseconds.
    pub now_scenario_ms: u64,
    /// Whether the scenario is over (it no longer is once the console changed it).
    pub finished: bool,
    /// The scenario's VMs; the first answers unprefixed requests.
    pub vms: Vec<String>,
    /// The events of the current document.
    pub events: Vec<WireEvent>,
    /// The document a GET with api-version 2020-07-01 gets now (faults aside).
    pub document: serde_json::Value,
    /// The requests recorded after `after`, oldest first, at most [`CONSOLE_REQUESTS_MAX`].
    pub requests: Vec<RequestRecord>,
    /// The last faults served (at most 20), oldest first.
    pub faults_served: Vec<FaultRecord>,
    /// The built-in scenarios the console can start: (name, description).
    pub scenarios: Vec<(String, String)>,
    /// The fault presets the console can inject.
    pub fault_presets: Vec<ConsoleFault>,
    /// The scale set, when the scenario has one: instances, repairs, the rolling upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_set: Option<crate::scale_set::ScaleSetSnapshot>,
}

impl Engine {
    /// The console's view; `after` is the last request sequence number already shown. Read
    /// under one lock, copying only what it returns (IMDS's requests wait meanwhile).
    pub(crate) fn console_view(&self, after: u64) -> ConsoleView {
        self.with_current(|inner| {
            let simulation = &inner.simulation;
            let rendered = forewarn_imds::render_document(&simulation.document(&inner.clock));
            let events = serde_json::from_str::<WireDocument>(&rendered)
                .map(|document| document.events)
                .unwrap_or_default();
            let served = served_document(
                simulation,
                &inner.clock,
                CONSOLE_API_VERSION,
                inner.scenario.shape.as_deref(),
                &inner.scenario.omit_fields,
            );
            let newer = inner.requests.iter().rev().take_while(|r| r.seq > after);
            let mut requests: Vec<RequestRecord> =
                newer.take(CONSOLE_REQUESTS_MAX).cloned().collect();
            requests.reverse();
            let mut faults_served: Vec<FaultRecord> =
                inner.faults.iter().rev().take(20).cloned().collect();
            faults_served.reverse();
            ConsoleView {
                scenario: inner.scenario.name.clone(),
                description: inner.scenario.description.clone(),
                speed: inner.clock.speed(),
                now_scenario_ms: millis(simulation.now()),
                finished: simulation.is_finished(),
                vms: inner.scenario.vms.clone(),
                events,
                document: serde_json::from_str(&served).unwrap_or(serde_json::Value::Null),
                requests,
                faults_served,
                scenarios: builtin_scenarios()
                    .into_iter()
                    .map(|(name, description)| (name.to_string(), description.to_string()))
                    .collect(),
                fault_presets: ConsoleFault::ALL.to_vec(),
                scale_set: inner.scale_set.as_ref().map(|model| model.snapshot()),
            }
        })
    }

    /// Plays the built-in scenario `name` from its start.
    pub(crate) fn start_builtin(&self, request: &StartScenario) -> Result<(), ConsoleInputError> {
        let mut scenario = builtin_scenario(&request.name).map_err(|_| {
            let names: Vec<&str> = builtin_scenarios().iter().map(|(name, _)| *name).collect();
            bad(
                "name",
                format!(
                    "\"{}\" is not a built-in scenario; use one of {}",
                    request.name,
                    names.join(", ")
                ),
            )
        })?;
        // The console will be watching: the simulator no longer finishes by itself.
        scenario.open_ended = true;
        self.restart_with(scenario);
        Ok(())
    }

    /// Adds an event that appears now; returns its EventId.
    pub(crate) fn generate(&self, request: &GenerateEvent) -> Result<String, ConsoleInputError> {
        let mut spec = event_spec(request)?;
        self.with_current(|inner| {
            if inner.simulation.event_count() >= GENERATED_EVENTS_MAX {
                return Err(bad(
                    "type",
                    format!(
                        "this run has {GENERATED_EVENTS_MAX} events already; start a scenario to begin a new run"
                    ),
                ));
            }
            let id = next_generated_id(inner);
            spec.id = Some(id.clone());
            if spec.resources.as_ref().is_none_or(Vec::is_empty) {
                spec.resources = Some(inner.scenario.vms.clone());
            }
            inner.simulation.add_event(spec);
            tracing::info!(event_id = %id, "console generated an event");
            Ok(id)
        })
    }

    /// Starts, cancels or ends an event of the current document now.
    pub(crate) fn change(
        &self,
        event_id: &str,
        change: EventChange,
    ) -> Result<(), EventChangeError> {
        self.with_current(|inner| inner.simulation.change_event(event_id, change))
    }

    /// Injects a fault preset from now on.
    pub(crate) fn inject(&self, request: &InjectFault) -> Result<InjectedFault, ConsoleInputError> {
        if request.fault == ConsoleFault::VmClock {
            return self.step_vm_clock_now(request.offset_seconds);
        }
        let seconds = request.seconds.unwrap_or(5);
        let window = Duration::from_secs(seconds);
        if seconds == 0 || window > FAULT_WINDOW_MAX {
            return Err(bad(
                "seconds",
                format!(
                    "{seconds} is out of range; use 1 to {} scenario seconds",
                    FAULT_WINDOW_MAX.as_secs()
                ),
            ));
        }
        self.with_current(|inner| {
            if inner.scenario.faults.len() >= INJECTED_FAULTS_MAX {
                return Err(bad(
                    "fault",
                    format!(
                        "this run has {INJECTED_FAULTS_MAX} faults already; start a scenario to begin a new run"
                    ),
                ));
            }
            let from = inner.simulation.now();
            let until = from + window;
            Arc::make_mut(&mut inner.scenario)
                .faults
                .push(request.fault.spec(from, until));
            inner.simulation.keep_running();
            if request.fault == ConsoleFault::IncarnationReset {
                inner.simulation.reset_incarnation_now();
            }
            Ok(InjectedFault {
                fault: request.fault,
                from_scenario_ms: millis(from),
                until_scenario_ms: millis(until),
            })
        })
    }
}

impl Engine {
    /// `vm-clock`: the VM's clock is `offset_seconds` off Azure's from now on.
    fn step_vm_clock_now(
        &self,
        offset_seconds: Option<i64>,
    ) -> Result<InjectedFault, ConsoleInputError> {
        const DAY: i64 = 24 * 3600;
        let offset = offset_seconds.ok_or_else(|| {
            bad(
                "offset_seconds",
                "say how far the VM's clock is from Azure's, e.g. -10 (behind) or 30 (ahead)",
            )
        })?;
        if !(-DAY..=DAY).contains(&offset) {
            return Err(bad(
                "offset_seconds",
                format!("{offset} is out of range; use -{DAY} to {DAY} seconds"),
            ));
        }
        self.step_vm_clock(offset * 1000);
        let at = self.with_current(|inner| inner.simulation.now());
        Ok(InjectedFault {
            fault: ConsoleFault::VmClock,
            from_scenario_ms: millis(at),
            until_scenario_ms: millis(at),
        })
    }
}

/// The scenario-format event a generate request describes, checked.
fn event_spec(request: &GenerateEvent) -> Result<EventSpec, ConsoleInputError> {
    let event_type = request.event_type.trim();
    if event_type.is_empty()
        || event_type.len() > 32
        || !event_type.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(bad(
            "type",
            format!(
                "\"{}\" is not an event type; use Freeze, Reboot, Redeploy, Preempt or Terminate (one word, letters and digits)",
                request.event_type
            ),
        ));
    }
    let notice = request.not_before_seconds.map(Duration::from_secs);
    if notice.is_some_and(|notice| notice > GENERATED_NOTICE_MAX) {
        return Err(bad(
            "not_before_seconds",
            format!("at most {} (a week)", GENERATED_NOTICE_MAX.as_secs()),
        ));
    }
    if request
        .runs_for_seconds
        .is_some_and(|seconds| Duration::from_secs(seconds) > GENERATED_RUN_MAX)
    {
        return Err(bad(
            "runs_for_seconds",
            format!("at most {} (a week)", GENERATED_RUN_MAX.as_secs()),
        ));
    }
    if request
        .description
        .as_ref()
        .is_some_and(|text| text.len() > DESCRIPTION_MAX)
    {
        return Err(bad(
            "description",
            format!("at most {DESCRIPTION_MAX} bytes"),
        ));
    }
    if let Some(resources) = &request.resources
        && let Some(problem) = resources_problem(resources)
    {
        return Err(bad("resources", problem));
    }
    let spec = EventSpec {
        id: None,
        event_type: event_type.to_string(),
        source: request.source,
        resources: request.resources.clone(),
        appear_at: Duration::ZERO,
        notice,
        duration_seconds: request.duration_seconds.unwrap_or(-1),
        description: request.description.clone().unwrap_or_default(),
        status: request.status,
        runs_for: request.runs_for_seconds.map(Duration::from_secs),
        cancel_at: None,
        reschedule: Vec::new(),
        start_after_approval: None,
        starts_late_by: None,
        vm_goes_away: false,
        not_before_text: None,
        delete_group: None,
    };
    match event_problem(&spec) {
        Some(problem) => Err(bad("event", problem)),
        None => Ok(spec),
    }
}

/// What is wrong with a generated event's `Resources`, if anything.
fn resources_problem(resources: &[String]) -> Option<String> {
    if resources.len() > RESOURCES_MAX {
        return Some(format!("at most {RESOURCES_MAX} VM names"));
    }
    if resources.iter().any(|name| name.trim().is_empty()) {
        return Some(
            "a VM name is empty; list VM names, e.g. [\"vm-a\"], or leave it out for every VM"
                .into(),
        );
    }
    resources
        .iter()
        .any(|name| name.len() > RESOURCE_NAME_MAX)
        .then(|| format!("a VM name is longer than {RESOURCE_NAME_MAX} bytes"))
}

/// A UUID-looking id no event of this run has had.
fn next_generated_id(inner: &mut Inner) -> String {
    loop {
        // Seeded with when this simulator started, so a new run does not reuse the ids of
        // the last one (a daemon may still remember those).
        let id = stable_event_id(
            &format!("console/{}/{}", inner.scenario.name, inner.seed),
            inner.generated_events,
        );
        inner.generated_events += 1;
        if !inner.simulation.has_event(&id) {
            return id;
        }
    }
}

/// Parses a console action from the URL (`start`, `cancel`, `end`).
pub(crate) fn parse_change(action: &str) -> Result<EventChange, ConsoleInputError> {
    match action {
        "start" => Ok(EventChange::Start),
        "cancel" => Ok(EventChange::Cancel),
        "end" => Ok(EventChange::End),
        other => Err(bad(
            "action",
            format!("\"{other}\" is not an action; use start, cancel or end"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reboot() -> GenerateEvent {
        GenerateEvent {
            event_type: "Reboot".into(),
            ..GenerateEvent::default()
        }
    }

    #[test]
    fn a_generated_event_gets_the_types_notice_when_none_is_given() {
        let spec = event_spec(&reboot()).unwrap();
        assert_eq!(spec.notice, None);
        assert_eq!(spec.duration_seconds, -1);
        assert_eq!(spec.status, InitialStatus::Scheduled);
    }

    #[test]
    fn bad_generate_requests_name_the_field() {
        let cases = [
            (
                GenerateEvent {
                    event_type: "Re boot".into(),
                    ..reboot()
                },
                "type",
            ),
            (
                GenerateEvent {
                    not_before_seconds: Some(GENERATED_NOTICE_MAX.as_secs() + 1),
                    ..reboot()
                },
                "not_before_seconds",
            ),
            (
                GenerateEvent {
                    resources: Some(vec!["vm-a".into(), " ".into()]),
                    ..reboot()
                },
                "resources",
            ),
            (
                GenerateEvent {
                    duration_seconds: Some(-5),
                    ..reboot()
                },
                "event",
            ),
        ];
        for (request, field) in cases {
            assert_eq!(
                event_spec(&request).unwrap_err().field,
                field,
                "{request:?}"
            );
        }
    }

    #[test]
    fn fault_presets_are_scenario_faults_in_a_window() {
        let from = Duration::from_secs(10);
        let until = Duration::from_secs(15);
        let spec = ConsoleFault::TooManyRequests.spec(from, until);
        assert_eq!((spec.kind, spec.status), (FaultKind::Status, Some(429)));
        assert_eq!((spec.from, spec.until), (Some(from), Some(until)));
        let reset = ConsoleFault::IncarnationReset.spec(from, until);
        assert_eq!(
            (reset.kind, reset.at),
            (FaultKind::IncarnationReset, Some(from))
        );
        for fault in ConsoleFault::ALL {
            let json = serde_json::to_string(&fault).unwrap();
            assert_eq!(json, format!("\"{}\"", fault.name()));
        }
    }

    #[test]
    fn actions_parse_and_unknown_ones_are_refused() {
        assert_eq!(parse_change("start").unwrap(), EventChange::Start);
        assert_eq!(parse_change("end").unwrap(), EventChange::End);
        assert_eq!(parse_change("approve").unwrap_err().field, "action");
    }
}
