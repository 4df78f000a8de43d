//! The plugins as the pipeline schedules them: names and manifests in dependency order
//! (`after`), with the files that failed to load and the plugins in quarantine. No wasm
//! here: tests build one from text.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use forewarn_imds::EventType;

use crate::plugins::manifest::{FailurePolicy, PluginManifest};

/// One plugin: its name and the operator's manifest for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    /// The plugin's name (its file stem).
    pub name: String,
    /// Subscriptions, `after`, budget, capabilities.
    pub manifest: PluginManifest,
    /// The sha256 of its component (empty in tests built from text): with the manifest, what
    /// tells a new version of the plugin from the one loaded before.
    pub content_hash: String,
}

/// The plugins live at one moment, in dependency order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Roster {
    ordered: Vec<Member>,
    /// Per plugin, the loaded plugins it runs after.
    predecessors: BTreeMap<String, Vec<String>>,
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
    quarantined: BTreeSet<String>,
}

impl Roster {
    /// Orders `plugins` (name, manifest) so that every plugin comes after those it names in
    /// `after`. Unknown names are ignored and a cycle is broken by name order, each with a
    /// warning, so one bad manifest line never leaves the VM without its other plugins.
    pub(crate) fn new(plugins: Vec<(String, PluginManifest)>) -> Roster {
        let mut warnings = Vec::new();
        let by_name: BTreeMap<String, PluginManifest> = plugins.into_iter().collect();
        let mut predecessors = BTreeMap::new();
        for (name, manifest) in &by_name {
            let mut known = Vec::new();
            for before in &manifest.after {
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
                let manifest = by_name.get(&name)?.clone();
                Some(Member {
                    name,
                    manifest,
                    content_hash: String::new(),
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

    /// Records each plugin's content hash (name → sha256 of its component).
    pub(crate) fn set_content_hashes(&mut self, hashes: &BTreeMap<String, String>) {
        for member in &mut self.ordered {
            if let Some(hash) = hashes.get(&member.name) {
                member.content_hash.clone_from(hash);
            }
        }
    }

    /// Records the plugin files that failed to load (file → reason).
    pub(crate) fn set_load_errors(&mut self, load_errors: BTreeMap<PathBuf, String>) {
        self.load_errors = load_errors;
    }

    /// Records which of the load errors are of advisory plugins (`on-failure = "approve"`).
    pub(crate) fn set_advisory_load_errors(&mut self, files: BTreeSet<PathBuf>) {
        self.advisory_load_errors = files;
    }

    /// Whether the file that failed to load holds approvals: unless its manifest was read and
    /// says `on-failure = "approve"`.
    pub(crate) fn load_error_holds(&self, file: &Path) -> bool {
        !self.advisory_load_errors.contains(file)
    }

    /// Replaces the set of quarantined plugins.
    pub(crate) fn set_quarantined(&mut self, names: BTreeSet<String>) {
        self.quarantined = names;
    }

    /// The plugins in quarantine.
    pub(crate) fn quarantined(&self) -> &BTreeSet<String> {
        &self.quarantined
    }

    /// Whether `name` is in quarantine: it is not called.
    pub(crate) fn is_quarantined(&self, name: &str) -> bool {
        self.quarantined.contains(name)
    }

    /// Whether `member` counts as approved whatever it answered: quarantined under
    /// `on-failure = "approve"` (an advisory plugin that cannot run is consent).
    pub(crate) fn excused(&self, member: &Member) -> bool {
        member.manifest.on_failure == FailurePolicy::Approve && self.is_quarantined(&member.name)
    }

    /// Every plugin, in dependency order.
    pub(crate) fn members(&self) -> &[Member] {
        &self.ordered
    }

    /// The plugin called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Member> {
        self.ordered.iter().find(|member| member.name == name)
    }

    /// The plugins subscribed to `event_type`, in dependency order.
    pub(crate) fn subscribers(&self, event_type: EventType) -> Vec<&Member> {
        self.ordered
            .iter()
            .filter(|member| member.manifest.subscribes_to(event_type))
            .collect()
    }

    /// The loaded plugins `name` must wait for.
    pub(crate) fn predecessors(&self, name: &str) -> &[String] {
        self.predecessors
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Plugin files that failed to load, with the reason.
    pub(crate) fn load_errors(&self) -> &BTreeMap<PathBuf, String> {
        &self.load_errors
    }

    /// Problems found while ordering the plugins.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// Kahn's algorithm with names in sorted order at each step, so the order is stable.
fn topological_order(
    predecessors: &BTreeMap<String, Vec<String>>,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut done: Vec<String> = Vec::new();
    let mut remaining: BTreeSet<&String> = predecessors.keys().collect();
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

    fn order(edges: &[(&str, &[&str])]) -> (Vec<String>, Vec<String>) {
        let predecessors = edges
            .iter()
            .map(|(name, after)| {
                (
                    name.to_string(),
                    after.iter().map(|s| s.to_string()).collect(),
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
        let manifest = |after: &str| {
            crate::plugins::manifest::PluginManifest::parse(&format!("after = [\"{after}\"]"))
                .unwrap()
        };
        let roster = Roster::new(vec![
            ("a".into(), manifest("b")),
            ("b".into(), manifest("a")),
        ]);
        let names: Vec<&str> = roster.members().iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(roster.predecessors("a").is_empty(), "a runs first");
        assert_eq!(roster.predecessors("b"), ["a"]);
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
