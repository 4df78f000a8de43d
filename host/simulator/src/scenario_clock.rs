//! Scenario time versus wall time: the simulator's clock runs `speed` times faster than
//! the wall, and every scenario instant has a real wall-clock instant (for NotBefore).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Maps scenario time (from the simulator's start) to wall time and back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScenarioClock {
    started_wall: SystemTime,
    started_mono: Instant,
    speed: f64,
}

impl ScenarioClock {
    /// A clock starting now. `speed` must be finite and > 0 (checked by the caller).
    pub(crate) fn start_now(speed: f64) -> ScenarioClock {
        ScenarioClock::starting_at(SystemTime::now(), speed)
    }

    /// A clock whose scenario time 0 is `started_wall` (for tests).
    pub(crate) fn starting_at(started_wall: SystemTime, speed: f64) -> ScenarioClock {
        ScenarioClock {
            started_wall,
            started_mono: Instant::now(),
            speed,
        }
    }

    pub(crate) fn speed(&self) -> f64 {
        self.speed
    }

    /// Scenario time elapsed since the start, by the monotonic clock.
    pub(crate) fn scenario_now(&self) -> Duration {
        self.started_mono.elapsed().mul_f64(self.speed)
    }

    /// The wall-clock instant of a scenario instant.
    pub(crate) fn wall_at(&self, scenario: Duration) -> SystemTime {
        self.started_wall + scenario.div_f64(self.speed)
    }

    /// The wall-clock instant of a scenario instant, in Unix milliseconds.
    pub(crate) fn unix_ms_at(&self, scenario: Duration) -> u64 {
        unix_ms(self.wall_at(scenario))
    }

    pub(crate) fn started_unix_ms(&self) -> u64 {
        unix_ms(self.started_wall)
    }
}

/// Milliseconds since the Unix epoch (0 for instants before it).
pub(crate) fn unix_ms(at: SystemTime) -> u64 {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_compresses_notice_into_wall_time() {
        let start = UNIX_EPOCH + Duration::from_secs(1_000);
        let clock = ScenarioClock::starting_at(start, 30.0);
        let fifteen_minutes = Duration::from_secs(900);
        assert_eq!(
            clock.wall_at(fifteen_minutes),
            start + Duration::from_secs(30)
        );
        assert_eq!(clock.unix_ms_at(fifteen_minutes), 1_030_000);
    }
}
