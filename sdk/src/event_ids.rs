//! `EventIds`: the set of events a plugin has acted on, kept in durable state as text,
//! e.g. "the events I drained for", so recovery waits until the last of them is over.

use std::collections::BTreeSet;

/// A set of event ids, stored in plugin state as one id per line (readable in the state file).
///
/// ```
/// use forewarn_sdk::EventIds;
///
/// let mut draining = EventIds::parse("");
/// assert!(draining.insert("event-1"));
/// let stored = draining.render();
/// let mut again = EventIds::parse(&stored);
/// assert!(again.remove("event-1"));
/// assert!(again.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventIds(BTreeSet<String>);

impl EventIds {
    /// Reads the stored form; blank lines are ignored.
    pub fn parse(text: &str) -> Self {
        EventIds(
            text.lines()
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// The stored form: one id per line, sorted.
    pub fn render(&self) -> String {
        self.0.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Adds `id`; true when it was new.
    pub fn insert(&mut self, id: &str) -> bool {
        self.0.insert(id.to_owned())
    }

    /// Removes `id`; true when it was there.
    pub fn remove(&mut self, id: &str) -> bool {
        self.0.remove(id)
    }

    /// Whether `id` is in the set (compared exactly, case included).
    pub fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// Whether the set holds no id: for a plugin, that no event it acted on is still pending,
    /// so it may undo what it did (mark the VM ready, start services again).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::EventIds;

    #[test]
    fn round_trips_through_text_and_ignores_blank_lines() {
        let ids = EventIds::parse(" b \n\na\n");
        assert_eq!(ids.render(), "a\nb");
        assert!(ids.contains("a") && !ids.contains("c"));
        assert_eq!(EventIds::parse(&ids.render()), ids);
    }

    #[test]
    fn tracks_membership() {
        let mut ids = EventIds::parse("A\nB");
        assert!(!ids.insert("A"));
        assert!(ids.insert("C"));
        assert!(ids.remove("A"));
        assert!(!ids.remove("A"));
        assert!(ids.remove("B") && ids.remove("C") && ids.is_empty());
    }
}
