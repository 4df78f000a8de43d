//! The plugins as the pipeline schedules them: names and their terms (the part of each
//! manifest the pipeline reads) in dependency order (`after`), with the files that failed to
//! load and the plugins in quarantine. Plain data: no wasm and no manifest parsing here (the
//! plugin set builds the terms from each manifest; tests build them from text).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_events::{EventType, PluginName};
use serde::{Deserialize, Serialize};

/// Default time a plugin has to answer one call (a plugin without a manifest, or one that
/// gives no `budget`).
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);

/// What the pipeline reads of a plugin's manifest: which events it is called for, whom it
/// runs after, how long its calls and its whole preparation take, and what its failure
/// means. The manifest (`forewarn-manifest`) holds the rest (memory, config, capabilities).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginTerms {
    /// The event types the plugin is called for (`subscribe`).
    pub subscribe: Subscription,
    /// Plugins whose preparation must be approved before this one is asked (`after`).
    pub after: Vec<PluginName>,
    /// Longest time one call may take (`budget`); also capped by the event's deadline.
    pub budget: Duration,
    /// How long the whole preparation usually takes (`prepare-time`); None: the budget.
    pub prepare_time: Option<Duration>,
    /// What a failed call means for the approval (`on-failure`).
    pub on_failure: FailurePolicy,
    /// Whether the plugin prepares again when an event is rescheduled after its approval
    /// was sent (`prepare-again-on-reschedule`).
    pub prepare_again_on_reschedule: bool,
}

impl Default for PluginTerms {
    /// The terms of a plugin without a manifest: every event type, the default budget.
    fn default() -> Self {
        PluginTerms {
            subscribe: Subscription::Every,
            after: Vec::new(),
            budget: DEFAULT_BUDGET,
            prepare_time: None,
            on_failure: FailurePolicy::Hold,
            prepare_again_on_reschedule: false,
        }
    }
}

impl PluginTerms {
    /// Whether the plugin wants calls for events of this type. A type forewarn does not know
    /// could be the most disruptive: every plugin that prepares for any type is called for
    /// it (one listing only "Unknown" too). The operating system's own shutdown takes the VM
    /// down as a Reboot does: every plugin that prepares for a type that takes the VM down
    /// (all but Freeze) is called for it, and one listing "Shutdown".
    pub fn subscribes_to(&self, event_type: EventType) -> bool {
        match &self.subscribe {
            Subscription::Every => true,
            Subscription::Only(types) if event_type == EventType::Unknown => !types.is_empty(),
            Subscription::Only(types) if event_type == EventType::Shutdown => {
                types.iter().any(|listed| listed.takes_the_vm_down())
            }
            Subscription::Only(types) => types.contains(&event_type),
        }
    }

    /// How long the whole preparation takes, for planning: `prepare-time`, else the budget.
    pub fn preparation_need(&self) -> Duration {
        self.prepare_time.unwrap_or(self.budget)
    }
}

/// The event types a plugin is called for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    /// `"*"`: every type, one newer than forewarn included.
    Every,
    /// The types listed ("Unknown" for types newer than forewarn); none: never called.
    Only(Vec<EventType>),
}

impl Subscription {
    /// The subscription a manifest's `subscribe` list names: `"*"` anywhere means every type;
    /// a name that is not a known type (IMDS's, "Shutdown", or "Unknown") means
    /// [`EventType::Unknown`].
    pub fn of_names<S: AsRef<str>>(names: &[S]) -> Subscription {
        if names.iter().any(|name| name.as_ref() == "*") {
            return Subscription::Every;
        }
        let mut types: Vec<EventType> = names
            .iter()
            .map(|name| EventType::from_subscription_name(name.as_ref()))
            .collect();
        types.sort();
        types.dedup();
        Subscription::Only(types)
    }
}

/// What a plugin's failure means for the approval of the event it was preparing for, in
/// the manner of Envoy's `FailurePolicy` (`hold` is FAIL_CLOSED, `approve` FAIL_OPEN).
/// A defer is an answer, not a failure: it holds under both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// A failed call counts as a defer: the plugin is asked again, and the event is not
    /// approved without it (it starts at NotBefore). A plugin that cannot run never approves
    /// maintenance by accident.
    #[default]
    Hold,
    /// A failed call counts as consent: the plugin is advisory, and the event may be
    /// approved early without it.
    Approve,
}

impl FailurePolicy {
    /// The manifest value: "hold" or "approve".
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Hold => "hold",
            FailurePolicy::Approve => "approve",
        }
    }

    /// What the policy means, in a few words (for `plugin check` and `forewarn status`).
    pub fn meaning(self) -> &'static str {
        match self {
            FailurePolicy::Hold => {
                "a failed call holds the approval (the event waits for the plugin, or for NotBefore)"
            }
            FailurePolicy::Approve => {
                "a failed call counts as consent (advisory: the event is approved without it)"
            }
        }
    }
}

impl std::fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One plugin: its name and the terms of its manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The plugin's name (its file stem).
    pub name: PluginName,
    /// Subscriptions, `after`, budget, failure policy.
    pub terms: PluginTerms,
    /// What tells a new version of the plugin from the one loaded before (with the terms):
    /// a digest of its component and its whole manifest (empty in tests built from text).
    pub version: String,
}

/// The plugins live at one moment, in dependency order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Roster {
    ordered: Vec<Member>,
    /// Per plugin, the loaded plugins it runs after.
    predecessors: BTreeMap<PluginName, Vec<PluginName>>,
    /// Problems found while ordering (unknown names in `after`, cycles), for the log and status.
    warnings: Vec<String>,
    /// Plugin files that failed to load, by file, with the reason (the previous version of
    /// that plugin, if any, stays loaded).
    load_errors: BTreeMap<PathBuf, String>,
    /// Those of `load_errors` whose manifest was read and says `on-failure = "approve"`:
    /// advisory plugins, whose load error does not hold approvals.
    advisory_load_errors: BTreeSet<PathBuf>,
    /// Plugins in crash-loop quarantine (set by the pipeline, `pipeline::quarantine`): never
    /// called; under `on-failure = "hold"` they hold the events they subscribe to.
    quarantined: BTreeSet<PluginName>,
}

impl Roster {
    /// Orders `plugins` (name, terms) so that every plugin comes after those it names in
    /// `after`. Unknown names are ignored and a cycle is broken by name order, each with a
    /// warning, so one bad manifest line never leaves the VM without its other plugins.
    pub fn new(plugins: Vec<(PluginName, PluginTerms)>) -> Roster {
        let mut warnings = Vec::new();
        let by_name: BTreeMap<PluginName, PluginTerms> = plugins.into_iter().collect();
        let mut predecessors = BTreeMap::new();
        for (name, terms) in &by_name {
            let mut known = Vec::new();
            for before in &terms.after {
                if by_name.contains_key(before) {
                    known.push(before.clone());
                } else {
                    warnings.push(format!(
                        "plugin `{name}` runs after `{before}`, which is not loaded; ignoring that constraint"
                    ));
                }
            }
            predecessors.insert(name.clone(), known);
        }
        let order = topological_order(&predecessors, &mut warnings);
        // A cycle was broken by name order: keep only the constraints that order honours, or
        // the plugins of the cycle would wait for each other for ever.
        for (name, before) in &mut predecessors {
            let position = order.iter().position(|other| other == name);
            before.retain(|earlier| order.iter().position(|other| other == earlier) < position);
        }
        let ordered = order
            .into_iter()
            .filter_map(|name| {
                let terms = by_name.get(&name)?.clone();
                Some(Member {
                    name,
                    terms,
                    version: String::new(),
                })
            })
            .collect();
        Roster {
            ordered,
            predecessors,
            warnings,
            load_errors: BTreeMap::new(),
            advisory_load_errors: BTreeSet::new(),
            quarantined: BTreeSet::new(),
        }
    }

    /// Records each plugin's version (name → digest of its component and manifest).
    pub fn set_versions(&mut self, versions: &BTreeMap<PluginName, String>) {
        for member in &mut self.ordered {
            if let Some(version) = versions.get(&member.name) {
                member.version.clone_from(version);
            }
        }
    }

    /// Records the plugin files that failed to load (file → reason).
    pub fn set_load_errors(&mut self, load_errors: BTreeMap<PathBuf, String>) {
        self.load_errors = load_errors;
    }

    /// Records which of the load errors are of advisory plugins (`on-failure = "approve"`).
    pub fn set_advisory_load_errors(&mut self, files: BTreeSet<PathBuf>) {
        self.advisory_load_errors = files;
    }

    /// Whether the file that failed to load holds approvals: unless its manifest was read and
    /// says `on-failure = "approve"`.
    pub fn load_error_holds(&self, file: &Path) -> bool {
        !self.advisory_load_errors.contains(file)
    }

    /// Replaces the set of quarantined plugins.
    pub fn set_quarantined(&mut self, names: BTreeSet<PluginName>) {
        self.quarantined = names;
    }

    /// The plugins in quarantine.
    pub fn quarantined(&self) -> &BTreeSet<PluginName> {
        &self.quarantined
    }

    /// Whether `name` is in quarantine: it is not called.
    pub fn is_quarantined(&self, name: &PluginName) -> bool {
        self.quarantined.contains(name)
    }

    /// Whether `member` counts as approved whatever it answered: quarantined under
    /// `on-failure = "approve"` (an advisory plugin that cannot run is consent).
    pub fn excused(&self, member: &Member) -> bool {
        member.terms.on_failure == FailurePolicy::Approve && self.is_quarantined(&member.name)
    }

    /// Every plugin, in dependency order.
    pub fn members(&self) -> &[Member] {
        &self.ordered
    }

    /// The plugin called `name`.
    pub fn get(&self, name: &PluginName) -> Option<&Member> {
        self.ordered.iter().find(|member| &member.name == name)
    }

    /// The plugins subscribed to `event_type`, in dependency order.
    pub fn subscribers(&self, event_type: EventType) -> Vec<&Member> {
        self.ordered
            .iter()
            .filter(|member| member.terms.subscribes_to(event_type))
            .collect()
    }

    /// The loaded plugins `name` must wait for.
    pub fn predecessors(&self, name: &PluginName) -> &[PluginName] {
        self.predecessors
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Plugin files that failed to load, with the reason.
    pub fn load_errors(&self) -> &BTreeMap<PathBuf, String> {
        &self.load_errors
    }

    /// Problems found while ordering the plugins.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// Kahn's algorithm with names in sorted order at each step, so the order is stable.
fn topological_order(
    predecessors: &BTreeMap<PluginName, Vec<PluginName>>,
    warnings: &mut Vec<String>,
) -> Vec<PluginName> {
    let mut done: Vec<PluginName> = Vec::new();
    let mut remaining: BTreeSet<&PluginName> = predecessors.keys().collect();
    while !remaining.is_empty() {
        let ready = remaining.iter().copied().find(|name| {
            predecessors[*name]
                .iter()
                .all(|before| done.contains(before))
        });
        let next = match ready {
            Some(name) => name,
            None => {
                // Every remaining plugin waits on another: a cycle. Break it by name order.
                let stuck: Vec<&str> = remaining.iter().map(|name| name.as_str()).collect();
                warnings.push(format!(
                    "plugins {} name each other in `after` (a cycle); running them in name order",
                    stuck.join(", ")
                ));
                remaining
                    .iter()
                    .copied()
                    .next()
                    .expect("remaining is not empty")
            }
        };
        remaining.remove(next);
        done.push(next.clone());
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(edges: &[(&str, &[&str])]) -> (Vec<PluginName>, Vec<String>) {
        let predecessors = edges
            .iter()
            .map(|(name, after)| {
                (
                    PluginName::from(*name),
                    after.iter().copied().map(PluginName::from).collect(),
                )
            })
            .collect();
        let mut warnings = Vec::new();
        (topological_order(&predecessors, &mut warnings), warnings)
    }

    #[test]
    fn orders_by_after_then_name() {
        let (order, warnings) = order(&[
            ("graceful-shutdown", &["lb-drain", "checkpoint"]),
            ("checkpoint", &["lb-drain"]),
            ("lb-drain", &[]),
            ("audit", &[]),
        ]);
        assert_eq!(
            order,
            ["audit", "lb-drain", "checkpoint", "graceful-shutdown"]
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn a_broken_cycle_leaves_no_plugin_waiting_for_a_later_one() {
        let after = |name: &str| PluginTerms {
            after: vec![name.into()],
            ..PluginTerms::default()
        };
        let roster = Roster::new(vec![("a".into(), after("b")), ("b".into(), after("a"))]);
        let names: Vec<&str> = roster.members().iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(
            roster.predecessors(&PluginName::from("a")).is_empty(),
            "a runs first"
        );
        assert_eq!(roster.predecessors(&PluginName::from("b")), ["a"]);
        assert_eq!(roster.warnings().len(), 1);
    }

    #[test]
    fn cycle_is_broken_with_a_warning() {
        let (order, warnings) = order(&[("a", &["b"]), ("b", &["a"]), ("c", &[])]);
        assert_eq!(order, ["c", "a", "b"]);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("cycle"));
    }
}
