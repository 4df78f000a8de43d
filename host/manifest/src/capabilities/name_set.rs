//! The wording shared by the keys that list names (`actions`, `http`, `azure-identity`): a
//! sorted set, each value shown escaped.

use std::collections::BTreeSet;

use crate::shown;

/// The values of `set`, each escaped and cut, joined by `separator`.
pub(crate) fn joined(set: &BTreeSet<String>, separator: &str) -> String {
    set.iter()
        .map(|value| shown::reference(value))
        .collect::<Vec<_>>()
        .join(separator)
}

/// The set as the consent lists it: "a, b", or "none".
pub(crate) fn listed_or_none(set: &BTreeSet<String>) -> String {
    match set.is_empty() {
        true => "none".to_owned(),
        false => joined(set, ", "),
    }
}

/// "KEY: + c, d" for the values `new` holds beyond `old`, if any.
pub(crate) fn added(key: &str, new: &BTreeSet<String>, old: &BTreeSet<String>) -> Option<String> {
    let extra: Vec<String> = new
        .difference(old)
        .map(|value| shown::reference(value))
        .collect();
    (!extra.is_empty()).then(|| format!("{key}: + {}", extra.join(", ")))
}

/// "+ KEY: c" for each value added, then "- KEY: a" for each removed.
pub(crate) fn changes(key: &str, new: &BTreeSet<String>, old: &BTreeSet<String>) -> Vec<String> {
    let added = new
        .difference(old)
        .map(|value| format!("+ {key}: {}", shown::reference(value)));
    let removed = old
        .difference(new)
        .map(|value| format!("- {key}: {}", shown::reference(value)));
    added.chain(removed).collect()
}

/// "LABEL: a,b" for `plugin list`, if the set is not empty.
pub(crate) fn one_line(label: &str, set: &BTreeSet<String>) -> Option<String> {
    (!set.is_empty()).then(|| format!("{label}: {}", joined(set, ",")))
}
