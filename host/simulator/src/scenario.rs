//! Scenarios as data: the TOML (or JSON) format a simulated run is written in, its
//! defaults, and the checks that turn a readable file into a runnable scenario.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::faults::FaultSpec;
use crate::identity::IdentitySpec;
use crate::ids::stable_event_id;
use crate::scale_set::ScaleSetSpec;
use crate::shape::SUPPORTED_API_VERSIONS;
use crate::vm_priority::{EvictionPolicy, VmPriority, default_eviction_policy, default_priority};

/// One simulated run: the VMs, the events that happen to them and the faults IMDS shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The scenario's name, shown in `/simulator/state` and the simulator's log.
    pub name: String,
    /// One line saying what the scenario shows (`forewarn simulate --list`).
    #[serde(default)]
    pub description: String,
    /// The VM names this simulator serves; the first answers unprefixed requests.
    #[serde(default = "default_vms")]
    pub vms: Vec<String>,
    /// `vmScaleSetName` in the compute metadata; empty for a standalone VM.
    #[serde(default)]
    pub vm_scale_set: String,
    /// The events, in the order they were written.
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// The faults injected into the scheduledevents endpoint.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// Idle time after the last event disappeared before the scenario counts as finished.
    #[serde(default, with = "humantime_serde")]
    pub end_after: Option<Duration>,
    /// The scenario never finishes on its own (`idle`: a blank canvas for the console, which
    /// adds events while it runs). Every other scenario finishes once its events are over.
    #[serde(default)]
    pub open_ended: bool,
    /// The api-version whose document shape is served (e.g. `"2017-08-01"`: no
    /// `EventSource`, `Description` or `DurationInSeconds`); a client asking for an older
    /// api-version gets the older shape. The newest (2020-07-01) when absent.
    #[serde(default)]
    pub shape: Option<String>,
    /// Fields left out of every event of the document served (e.g. `["ResourceType"]`), as
    /// a trimmed fake IMDS would send them: 7 500 events fit under the 1 MiB forewarn reads
    /// only without `ResourceType`. Only `ResourceType`, `Description`, `EventSource` and
    /// `DurationInSeconds` may be left out; none when absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omit_fields: Vec<String>,
    /// `priority` in the compute metadata; Spot when the scenario has a Preempt event,
    /// else Regular (filled in by [`Scenario::validate`]).
    #[serde(default)]
    pub priority: Option<VmPriority>,
    /// `evictionPolicy` in the compute metadata (empty when absent); Delete for a Spot or
    /// Low VM that names none (filled in by [`Scenario::validate`]).
    #[serde(default)]
    pub eviction_policy: Option<EvictionPolicy>,
    /// The Azure Dedicated Hosts the VMs are placed on, as `host.id` in the compute metadata
    /// names them: a VM is on the first, and each Redeploy of it that starts moves it to the
    /// next (the last one stays). Empty (the default): no `host.id`, as on a VM that is
    /// not on a dedicated host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dedicated_hosts: Vec<String>,
    /// The managed identity the token endpoint serves (assigned, 24 h tokens by default).
    #[serde(default)]
    pub identity: IdentitySpec,
    /// The scale set around the VMs: each instance's Application Health extension, the
    /// automatic repairs and a rolling upgrade (`scale_set.rs`); none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_set: Option<ScaleSetSpec>,
}

/// The fields `omit_fields` may name: those a client must do without anyway (older
/// api-versions lack the last three; `ResourceType` is always "VirtualMachine").
const OMITTABLE_FIELDS: [&str; 4] = [
    "ResourceType",
    "Description",
    "EventSource",
    "DurationInSeconds",
];

/// One event's whole life, in scenario time (from the simulator's start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// `EventId`; when absent, a stable UUID-looking id derived from the scenario name
    /// and the event's position (filled in by [`Scenario::validate`]).
    #[serde(default)]
    pub id: Option<String>,
    /// `EventType`, passed through as written, so unknown types can be simulated.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Who started the maintenance (`EventSource`).
    #[serde(default)]
    pub source: Source,
    /// `Resources`; all of the scenario's VMs when absent.
    #[serde(default)]
    pub resources: Option<Vec<String>>,
    /// When the event first appears in the document (scenario time).
    #[serde(with = "humantime_serde")]
    pub appear_at: Duration,
    /// NotBefore = appear_at + notice; the docs' minimum notice for the type when absent.
    #[serde(default, with = "humantime_serde")]
    pub notice: Option<Duration>,
    /// `DurationInSeconds`; -1 means unknown.
    #[serde(default = "unknown_duration")]
    pub duration_seconds: i64,
    /// The `Description` IMDS shows.
    #[serde(default)]
    pub description: String,
    /// The status the event appears with: `Started` models a hardware failure.
    #[serde(default)]
    pub status: InitialStatus,
    /// How long the event stays Started before it disappears (10 minutes when absent,
    /// the docs' "Started to Completed" guideline).
    #[serde(default, with = "humantime_serde")]
    pub runs_for: Option<Duration>,
    /// Remove the event at this time if it is still Scheduled (canceled maintenance).
    #[serde(default, with = "humantime_serde")]
    pub cancel_at: Option<Duration>,
    /// Changes applied while the event is still Scheduled, in time order.
    #[serde(default)]
    pub reschedule: Vec<Reschedule>,
    /// How long after an approval the event starts (Azure may wait for the other tenants
    /// on the host); at once when absent. NotBefore passing still starts it.
    #[serde(default, with = "humantime_serde")]
    pub start_after_approval: Option<Duration>,
    /// How long the event stays Scheduled after NotBefore has passed before it starts on
    /// its own; it starts at NotBefore when absent.
    #[serde(default, with = "humantime_serde")]
    pub starts_late_by: Option<Duration>,
    /// The VM is gone once the event has started (Preempt, Terminate): a test should stop
    /// the daemon at Started and expect no recovery. The simulator serves on as before.
    #[serde(default)]
    pub vm_goes_away: bool,
    /// What the document shows as `NotBefore` instead of the real instant, verbatim
    /// (`"garbage"`, `"1649716018"`, `"2022-02-30T10:00:00Z"`): a NotBefore the daemon
    /// cannot read. The event still starts at `appear_at + notice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_text: Option<String>,
    /// The scale-set delete this event is part of (a scale-in of several instances, each
    /// told by its own Terminate with the same NotBefore): an approved event of the group
    /// stays Scheduled until every event of the group is approved (then all start at once)
    /// or NotBefore passes. None: an approval starts the event on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_group: Option<String>,
}

/// A change to a Scheduled event: NotBefore moves and/or the Resources change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reschedule {
    /// When the reschedule happens (scenario time).
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// New NotBefore = at + notice.
    #[serde(default, with = "humantime_serde")]
    pub notice: Option<Duration>,
    /// The VMs the event names from then on; unchanged when absent.
    #[serde(default)]
    pub resources: Option<Vec<String>>,
}

/// `EventSource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Source {
    /// The platform started it (`EventSource: Platform`).
    #[default]
    Platform,
    /// A user started it (`EventSource: User`).
    User,
}

/// The status an event appears with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum InitialStatus {
    /// Appears Scheduled, with a NotBefore.
    #[default]
    Scheduled,
    /// Appears already Started (as a hardware failure does).
    Started,
}

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The name is neither a built-in scenario nor a readable file.
    #[error(
        "there is no built-in scenario called \"{name}\" and no file at that path; built-in scenarios: {builtins}"
    )]
    NotFound {
        /// The name or path asked for.
        name: String,
        /// The built-in scenarios, comma-separated.
        builtins: String,
    },
    /// The scenario file could not be read.
    #[error("could not read scenario file {path}: {source}")]
    Read {
        /// The path that could not be read.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The scenario file is not valid TOML or JSON of a scenario.
    #[error("scenario {file}, line {line}, column {column}: {message}{snippet}")]
    Parse {
        /// The scenario file.
        file: String,
        /// The line of the problem (1-based).
        line: usize,
        /// The column of the problem (1-based).
        column: usize,
        /// What the parser said.
        message: String,
        /// The offending source line, so the key is visible; empty when unknown.
        snippet: String,
    },
    /// The scenario parses but says something impossible.
    #[error("scenario {file}: {key}: {problem}")]
    Invalid {
        /// The scenario file.
        file: String,
        /// The key that is wrong.
        key: String,
        /// What is wrong with it, worded for the author.
        problem: String,
    },
}

/// The "Started to Completed" guideline from the docs.
pub(crate) const DEFAULT_RUNS_FOR: Duration = Duration::from_secs(10 * 60);

fn default_vms() -> Vec<String> {
    vec!["vm-a".to_string()]
}

fn unknown_duration() -> i64 {
    -1
}

/// The docs' minimum notice for an event type (15 minutes for types it does not list).
pub(crate) fn minimum_notice(event_type: &str) -> Duration {
    let minutes = |m: u64| Duration::from_secs(m * 60);
    match event_type.to_ascii_lowercase().as_str() {
        "redeploy" => minutes(10),
        "preempt" => Duration::from_secs(30),
        "terminate" => minutes(5),
        _ => minutes(15),
    }
}

impl EventSpec {
    /// `EventId` (always set after [`Scenario::validate`]).
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or_default()
    }

    /// The notice before NotBefore: the scenario's, or the minimum for the event type.
    pub fn notice_or_default(&self) -> Duration {
        self.notice
            .unwrap_or_else(|| minimum_notice(&self.event_type))
    }

    /// How long the event runs once started: the scenario's, or the default.
    pub fn runs_for_or_default(&self) -> Duration {
        self.runs_for.unwrap_or(DEFAULT_RUNS_FOR)
    }
}

impl Scenario {
    /// How long the scenario lasts at real time (speed 1) at most: until its last event has
    /// started, run and gone, plus `end_after`. Approvals and cancellations end it sooner.
    pub fn longest_run(&self) -> Duration {
        let last_gone = self
            .events
            .iter()
            .map(|event| {
                event.appear_at
                    + event.notice_or_default()
                    + event.starts_late_by.unwrap_or_default()
                    + event.runs_for_or_default()
            })
            .max()
            .unwrap_or_default();
        last_gone + self.end_after.unwrap_or_default()
    }

    /// Parses TOML text; `file` names the source in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario =
            toml::from_str(text).map_err(|error| toml_error(text, file, &error))?;
        scenario.validate(file)
    }

    /// Parses JSON text (same fields as the TOML format); `file` names the source in errors.
    pub fn from_json(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario =
            serde_json::from_str(text).map_err(|error| ScenarioError::Parse {
                file: file.to_string(),
                line: error.line(),
                column: error.column(),
                message: error.to_string(),
                snippet: snippet_at_line(text, error.line()),
            })?;
        scenario.validate(file)
    }

    /// Reads a scenario file, TOML unless its name ends in `.json`.
    pub fn from_path(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: file.clone(),
            source,
        })?;
        let is_json = path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
        if is_json {
            Scenario::from_json(&text, &file)
        } else {
            Scenario::from_toml(&text, &file)
        }
    }

    /// The VM that answers unprefixed requests.
    pub fn default_vm(&self) -> &str {
        self.vms.first().map(String::as_str).unwrap_or_default()
    }

    /// Checks what serde cannot and fills in ids and resources.
    pub fn validate(mut self, file: &str) -> Result<Scenario, ScenarioError> {
        let invalid = |key: String, problem: &str| ScenarioError::Invalid {
            file: file.to_string(),
            key,
            problem: problem.to_string(),
        };
        if self.vms.is_empty() || self.vms.iter().any(|vm| vm.trim().is_empty()) {
            return Err(invalid(
                "vms".into(),
                "list at least one VM name, and no empty names",
            ));
        }
        let name = self.name.clone();
        let vms = self.vms.clone();
        for (index, event) in self.events.iter_mut().enumerate() {
            let key = format!("events[{index}]");
            if let Some(problem) = event_problem(event) {
                return Err(invalid(key, &problem));
            }
            event
                .id
                .get_or_insert_with(|| stable_event_id(&name, index));
            event.resources.get_or_insert_with(|| vms.clone());
        }
        if let Some((key, problem)) = self
            .scale_set
            .as_ref()
            .and_then(|scale_set| scale_set.problem(&self.vms))
        {
            return Err(invalid(key, &problem));
        }
        if let Some(duplicate) = duplicate_id(&self.events) {
            return Err(invalid(
                "events".into(),
                &format!("two events have the id \"{duplicate}\"; ids must be unique"),
            ));
        }
        if let Some(shape) = &self.shape
            && !SUPPORTED_API_VERSIONS.contains(&shape.as_str())
        {
            return Err(invalid(
                "shape".into(),
                &format!(
                    "\"{shape}\" is not an api-version of Scheduled Events; use one of {}",
                    SUPPORTED_API_VERSIONS.join(", ")
                ),
            ));
        }
        if let Some(field) = self
            .omit_fields
            .iter()
            .find(|field| !OMITTABLE_FIELDS.contains(&field.as_str()))
        {
            return Err(invalid(
                "omit_fields".into(),
                &format!(
                    "\"{field}\" cannot be left out; leave out any of {}",
                    OMITTABLE_FIELDS.join(", ")
                ),
            ));
        }
        for (index, fault) in self.faults.iter().enumerate() {
            if let Err(problem) = fault.check() {
                return Err(invalid(format!("faults[{index}]"), &problem.to_string()));
            }
        }
        if let Some((key, problem)) = self.identity.problem() {
            return Err(invalid(format!("identity.{key}"), &problem));
        }
        self.fill_priority()
            .map_err(|problem| invalid(problem.0, &problem.1))?;
        Ok(self)
    }

    /// Fills in the priority and eviction policy, refusing an eviction policy on a VM that
    /// cannot be evicted: (key, problem) when wrong.
    fn fill_priority(&mut self) -> Result<(), (String, String)> {
        let priority = match self.priority {
            Some(priority) => priority,
            None => default_priority(self.events.iter().map(|event| event.event_type.as_str())),
        };
        self.priority = Some(priority);
        if !priority.is_evictable() {
            return match self.eviction_policy {
                Some(policy) => Err((
                    "eviction_policy".into(),
                    format!(
                        "\"{}\" needs priority = \"Spot\" or \"Low\": Azure evicts only those VMs (remove eviction_policy, or set the priority)",
                        policy.as_wire()
                    ),
                )),
                None => Ok(()),
            };
        }
        if self.eviction_policy.is_none() {
            self.eviction_policy = default_eviction_policy(priority);
        }
        Ok(())
    }

    /// The VM's priority (set after [`Scenario::validate`]).
    pub fn priority(&self) -> VmPriority {
        self.priority.unwrap_or(VmPriority::Regular)
    }
}

pub(crate) fn event_problem(event: &EventSpec) -> Option<String> {
    if event.event_type.trim().is_empty() {
        return Some("type: must not be empty (e.g. \"Reboot\")".into());
    }
    if event.duration_seconds < -1 {
        return Some("duration_seconds: use a number of seconds, or -1 for unknown".into());
    }
    if event.cancel_at.is_some_and(|at| at < event.appear_at) {
        return Some("cancel_at: must not be earlier than appear_at".into());
    }
    if event.status == InitialStatus::Started && event.cancel_at.is_some() {
        return Some("cancel_at: an event that appears Started cannot be canceled".into());
    }
    if event.status == InitialStatus::Started && !event.reschedule.is_empty() {
        return Some("reschedule: an event that appears Started cannot be rescheduled".into());
    }
    if event.status == InitialStatus::Started && event.start_after_approval.is_some() {
        return Some(
            "start_after_approval: an event that appears Started cannot be approved".into(),
        );
    }
    if event.status == InitialStatus::Started && event.starts_late_by.is_some() {
        return Some("starts_late_by: an event that appears Started has no NotBefore".into());
    }
    if event
        .not_before_text
        .as_deref()
        .is_some_and(|text| text.trim().is_empty())
    {
        return Some(
            "not_before_text: give the text to show (e.g. \"garbage\"); a blank NotBefore is what a Started event shows"
                .into(),
        );
    }
    reschedule_problem(event)
}

fn reschedule_problem(event: &EventSpec) -> Option<String> {
    let mut previous = event.appear_at;
    for (index, change) in event.reschedule.iter().enumerate() {
        if change.at < previous {
            return Some(format!(
                "reschedule[{index}].at: must not be earlier than appear_at or the previous reschedule"
            ));
        }
        if change.notice.is_none() && change.resources.is_none() {
            return Some(format!(
                "reschedule[{index}]: give a new notice, new resources, or both"
            ));
        }
        previous = change.at;
    }
    None
}

fn duplicate_id(events: &[EventSpec]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    events
        .iter()
        .map(|event| event.id().to_ascii_lowercase())
        .find(|id| !seen.insert(id.clone()))
}

fn toml_error(text: &str, file: &str, error: &toml::de::Error) -> ScenarioError {
    let (line, column) = error
        .span()
        .map(|span| line_and_column(text, span.start))
        .unwrap_or((0, 0));
    ScenarioError::Parse {
        file: file.to_string(),
        line,
        column,
        message: with_hint(error.message().trim()),
        snippet: snippet_at_line(text, line),
    }
}

/// Adds what a valid value looks like where the parser's message does not say.
fn with_hint(message: &str) -> String {
    if message.contains("expected a duration") {
        return format!("{message} such as \"500ms\", \"30s\", \"15m\" or \"1h 30m\"");
    }
    message.to_string()
}

/// 1-based line and column of a byte offset.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |tail| tail.chars().count())
        + 1;
    (line, column)
}

fn snippet_at_line(text: &str, line: usize) -> String {
    match line
        .checked_sub(1)
        .and_then(|index| text.lines().nth(index))
    {
        Some(source) => format!("\n  {line} | {source}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "t"
[[events]]
type = "Reboot"
appear_at = "5s"
"#;

    #[test]
    fn defaults_fill_id_resources_and_notice() {
        let scenario = Scenario::from_toml(MINIMAL, "t.toml").unwrap();
        let event = &scenario.events[0];
        assert_eq!(scenario.vms, vec!["vm-a"]);
        assert_eq!(event.resources.as_deref(), Some(&["vm-a".to_string()][..]));
        assert_eq!(event.notice_or_default(), Duration::from_secs(900));
        assert_eq!(event.duration_seconds, -1);
        assert_eq!(event.id(), stable_event_id("t", 0));
        assert_eq!(event.status, InitialStatus::Scheduled);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let text =
            "name = \"t\"\n[[events]]\ntype = \"Reboot\"\nappear_at = \"5s\"\nnotise = \"1m\"\n";
        let error = Scenario::from_toml(text, "mine.toml").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("mine.toml"), "{message}");
        assert!(message.contains("line 5"), "{message}");
        assert!(message.contains("notise"), "{message}");
    }

    #[test]
    fn bad_duration_names_line_and_key() {
        let text = "name = \"t\"\n\n[[events]]\ntype = \"Reboot\"\nappear_at = \"soon\"\n";
        let error = Scenario::from_toml(text, "d.toml").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("line 5"), "{message}");
        assert!(message.contains("appear_at"), "{message}");
        assert!(message.contains("\"30s\""), "{message}");
    }

    #[test]
    fn cancel_before_appearing_is_rejected() {
        let text =
            "name = \"t\"\n[[events]]\ntype = \"Reboot\"\nappear_at = \"5s\"\ncancel_at = \"1s\"\n";
        let error = Scenario::from_toml(text, "c.toml").unwrap_err();
        assert!(
            error.to_string().contains("events[0]: cancel_at"),
            "{error}"
        );
    }

    #[test]
    fn eviction_policy_on_a_regular_vm_is_refused_with_the_fix() {
        let text = "name = \"t\"\neviction_policy = \"Delete\"\n";
        let message = Scenario::from_toml(text, "e.toml").unwrap_err().to_string();
        assert!(message.contains("eviction_policy"), "{message}");
        assert!(message.contains("priority = \"Spot\""), "{message}");
    }

    #[test]
    fn identity_table_problems_name_the_key() {
        let text = "name = \"t\"\n[identity]\nexpires_in = \"0s\"\n";
        let message = Scenario::from_toml(text, "i.toml").unwrap_err().to_string();
        assert!(message.contains("identity.expires_in"), "{message}");
    }

    #[test]
    fn json_scenarios_parse_too() {
        let text = r#"{"name":"j","events":[{"type":"Preempt","appear_at":"1s","notice":"30s"}]}"#;
        let scenario = Scenario::from_json(text, "j.json").unwrap();
        assert_eq!(
            scenario.events[0].notice_or_default(),
            Duration::from_secs(30)
        );
    }
}
