//! Constructors and accessors for a plugin's answer: `Decision::approve()` and
//! `Decision::defer(reason, retry_after)`.

use std::time::Duration;

use crate::{Decision, Deferral};

impl Decision {
    /// This plugin is ready: the maintenance may start as far as it cares.
    pub fn approve() -> Self {
        Decision::Approve
    }

    /// Not ready yet: log `reason` and ask again after `retry_after` (saturated at
    /// `u32::MAX` milliseconds, about 49 days; the daemon asks earlier if the event is near).
    pub fn defer(reason: impl Into<String>, retry_after: Duration) -> Self {
        Decision::Defer(Deferral {
            reason: reason.into(),
            retry_after_ms: saturating_millis(retry_after),
        })
    }

    /// Whether this is `approve`.
    pub fn is_approve(&self) -> bool {
        matches!(self, Decision::Approve)
    }

    /// Whether this is `defer`.
    pub fn is_defer(&self) -> bool {
        matches!(self, Decision::Defer(_))
    }

    /// The deferral, when this is `defer`.
    pub fn deferral(&self) -> Option<&Deferral> {
        match self {
            Decision::Approve => None,
            Decision::Defer(deferral) => Some(deferral),
        }
    }
}

impl Deferral {
    /// How long the daemon should wait before asking again.
    pub fn retry_after(&self) -> Duration {
        Duration::from_millis(u64::from(self.retry_after_ms))
    }
}

fn saturating_millis(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approve_is_approve() {
        let decision = Decision::approve();
        assert!(decision.is_approve());
        assert!(!decision.is_defer());
        assert_eq!(decision.deferral(), None);
    }

    #[test]
    fn defer_keeps_reason_and_millis() {
        let decision = Decision::defer("waiting for drain", Duration::from_secs(5));
        let deferral = decision.deferral().expect("a deferral");
        assert_eq!(deferral.reason, "waiting for drain");
        assert_eq!(deferral.retry_after_ms, 5_000);
        assert_eq!(deferral.retry_after(), Duration::from_secs(5));
    }

    #[test]
    fn defer_saturates_huge_durations() {
        let decision = Decision::defer("later", Duration::from_secs(u64::MAX));
        assert_eq!(
            decision.deferral().map(|d| d.retry_after_ms),
            Some(u32::MAX)
        );
    }

    #[test]
    fn defer_truncates_sub_millisecond_parts() {
        let decision = Decision::defer("soon", Duration::from_micros(1_999));
        assert_eq!(decision.deferral().map(|d| d.retry_after_ms), Some(1));
    }
}
