//! How times, durations and lists appear in the daemon's log fields: RFC 3339, human units,
//! comma-separated names — never Rust's `Debug` output (`Some(SystemTime { .. })`).

use std::time::{Duration, SystemTime};

/// `2026-11-23T01:50:37Z`, or `none` when there is no time (an event without NotBefore).
pub fn time(at: Option<impl Into<SystemTime>>) -> String {
    at.map_or_else(|| "none".to_owned(), rfc3339)
}

/// A span as whole milliseconds, the unit of the `*_ms` log fields (`u64::MAX` past it).
pub use forewarn_events::millis;

/// `1s 250ms`, `2m 5s`: whole milliseconds, in the largest units that fit.
pub fn duration(span: Duration) -> String {
    humantime::format_duration(Duration::from_millis(millis(span))).to_string()
}

/// `vm-a, vm-b`, or `none` for an empty list.
pub fn list<T: AsRef<str>>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    items
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Most names of a list from outside (an event's `Resources`, a batch of EventIds) one log
/// field carries: an event may name thousands of VMs.
pub const LOGGED_NAMES_MAX: usize = 16;

/// `vm-a, vm-b`, cut after [`LOGGED_NAMES_MAX`] names (`vm-a, …, vm-p, … (10001 in all)`),
/// or `none` for an empty list. Each name is escaped when the line is written
/// (log_format.rs).
pub fn names<T: AsRef<str>>(items: &[T]) -> String {
    if items.len() <= LOGGED_NAMES_MAX {
        return list(items);
    }
    format!(
        "{}, … ({} in all)",
        list(&items[..LOGGED_NAMES_MAX]),
        items.len()
    )
}

/// RFC 3339 in UTC, to the second ("2026-11-23T05:53:10Z"), for logs and `/status`: a
/// `SystemTime`, or an `ImdsTime` (shown as IMDS's clock reads it).
pub fn rfc3339(at: impl Into<SystemTime>) -> String {
    chrono::DateTime::<chrono::Utc>::from(at.into())
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn fields_read_like_a_person_wrote_them() {
        let at = UNIX_EPOCH + Duration::from_secs(1_795_391_148);
        assert_eq!(time(Some(at)), "2026-11-22T23:45:48Z");
        assert_eq!(time(None::<SystemTime>), "none");
        let imds = forewarn_events::ImdsTime::from_unix_ms(1_795_391_148_999);
        assert_eq!(rfc3339(imds), "2026-11-22T23:45:48Z");
        assert_eq!(duration(Duration::from_micros(1_250_400)), "1s 250ms");
        assert_eq!(duration(Duration::from_secs(125)), "2m 5s");
        assert_eq!(list(&["vm-a", "vm-b"]), "vm-a, vm-b");
        assert_eq!(list::<String>(&[]), "none");
    }

    #[test]
    fn a_long_list_of_names_is_cut_and_counted() {
        let many: Vec<String> = (0..10_001).map(|n| format!("vm-{n}")).collect();
        let logged = names(&many);
        assert!(logged.starts_with("vm-0, vm-1, "), "{logged}");
        assert!(logged.ends_with("vm-15, … (10001 in all)"), "{logged}");
        assert_eq!(names(&many[..2]), "vm-0, vm-1");
    }
}
