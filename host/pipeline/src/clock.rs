//! Time as the journal stores it: milliseconds since the Unix epoch. The pipeline never
//! reads the clock; the event loop passes `now` into every stage.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 before it, `u64::MAX` past year 584 million).
pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The instant `ms` milliseconds after the Unix epoch.
pub fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_clamps_before_the_epoch() {
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(from_unix_ms(unix_ms(at)), at);
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
