//! Stable, UUID-looking event ids for scenario events that do not name their own, so a
//! scenario replays with the same `EventId`s every run.

use sha2::{Digest, Sha256};

/// An uppercase 8-4-4-4-12 id derived from the scenario name and the event's position.
pub fn stable_event_id(scenario: &str, index: usize) -> String {
    let digest = Sha256::digest(format!("forewarn-simulator/{scenario}/{index}").as_bytes());
    let hex: String = digest[..16]
        .iter()
        .map(|byte| format!("{byte:02X}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_and_uuid_shaped() {
        let first = stable_event_id("demo", 0);
        assert_eq!(first, stable_event_id("demo", 0));
        assert_ne!(first, stable_event_id("demo", 1));
        assert_ne!(first, stable_event_id("other", 0));
        let groups: Vec<usize> = first.split('-').map(str::len).collect();
        assert_eq!(groups, vec![8, 4, 4, 4, 12]);
    }
}
