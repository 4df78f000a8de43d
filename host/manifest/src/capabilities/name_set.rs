//! The wording shared by the keys that list names (`actions`, `http`, `azure-identity`):
//! compared and shown as a sorted set, each value escaped.

use std::collections::BTreeSet;

use crate::shown;

/// The list sorted, each value once.
pub(crate) fn sorted(list: &[String]) -> Vec<String> {
    set(list).into_iter().cloned().collect()
}

/// The list as a set.
fn set(list: &[String]) -> BTreeSet<&String> {
    list.iter().collect()
}

/// The values of `list`, sorted, each escaped and cut, joined by `separator`.
pub(crate) fn joined(list: &[String], separator: &str) -> String {
    set(list)
        .into_iter()
        .map(|value| shown::reference(value))
        .collect::<Vec<_>>()
        .join(separator)
}

/// The set as the consent lists it: "a, b", or "none".
pub(crate) fn listed_or_none(list: &[String]) -> String {
    match list.is_empty() {
        true => "none".to_owned(),
        false => joined(list, ", "),
    }
}

/// "KEY: + c, d" for the values `new` holds beyond `old`, if any.
pub(crate) fn added(key: &str, new: &[String], old: &[String]) -> Option<String> {
    let extra: Vec<String> = set(new)
        .difference(&set(old))
        .map(|value| shown::reference(value))
        .collect();
    (!extra.is_empty()).then(|| format!("{key}: + {}", extra.join(", ")))
}

/// "+ KEY: c" for each value added, then "- KEY: a" for each removed.
pub(crate) fn changes(key: &str, new: &[String], old: &[String]) -> Vec<String> {
    let (new, old) = (set(new), set(old));
    let added = new
        .difference(&old)
        .map(|value| format!("+ {key}: {}", shown::reference(value)));
    let removed = old
        .difference(&new)
        .map(|value| format!("- {key}: {}", shown::reference(value)));
    added.chain(removed).collect()
}

/// "LABEL: a,b" for `plugin list`, if the set is not empty.
pub(crate) fn one_line(label: &str, list: &[String]) -> Option<String> {
    (!list.is_empty()).then(|| format!("{label}: {}", joined(list, ",")))
}
