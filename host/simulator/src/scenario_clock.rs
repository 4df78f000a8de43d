//! Scenario time versus wall time: the simulator's clock runs `speed` times faster than
//! the wall, and every scenario instant has a real wall-clock instant (for NotBefore).
//!
//! With a VM clock offset (`vm-clock` faults), scenario time runs on Azure's clock: the
//! `Date` header, the NotBefore sent and the instant an event starts are Azure's, which is
//! `offset` away from the machine's clock (the daemon's, which the simulator cannot move). A
//! later offset is a step of Azure's clock against the daemon's: scenario time jumps ahead
//! (or, stepped back, stands still until the machine's clock has caught up). The records of
//! what happened when (history, approvals, requests) stay on the machine's clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use forewarn_imds::shift;

/// Maps scenario time (from the simulator's start) to wall time and back.
#[derive(Debug, Clone)]
pub(crate) struct ScenarioClock {
    started_wall: SystemTime,
    started_mono: Instant,
    speed: f64,
    /// Azure's clock minus the machine's at the start, in ms.
    ahead_at_start_ms: i64,
    /// Azure's clock minus the machine's now, in ms.
    ahead_ms: i64,
    /// Steps still to come: (scenario instant, how far Azure is ahead from then), in order.
    pending: VecDeque<(Duration, i64)>,
    /// Steps taken: (scenario instant, how far scenario time had moved off the machine's
    /// clock from then, in wall ms), in order.
    taken: Vec<(Duration, i64)>,
    /// Steps taken (and the start's offset) not yet reported: (scenario instant, ahead ms).
    unreported: Vec<(Duration, i64)>,
    /// The latest scenario time read: it never goes back.
    floor: Duration,
    /// Stretches of scenario time skipped ([`ScenarioClock::skip_to`]): (from, to), in order.
    /// Neither the machine's clock nor Azure's moved for them.
    skipped: Vec<(Duration, Duration)>,
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
            ahead_at_start_ms: 0,
            ahead_ms: 0,
            pending: VecDeque::new(),
            taken: Vec::new(),
            unreported: Vec::new(),
            floor: Duration::ZERO,
            skipped: Vec::new(),
        }
    }

    /// Azure's clock is `ahead_ms` ahead of the machine's from the start, and moves to each
    /// of `steps` (scenario instant, ahead ms, in order) when scenario time reaches it.
    pub(crate) fn with_vm_clock(mut self, ahead_ms: i64, steps: Vec<(Duration, i64)>) -> Self {
        self.ahead_at_start_ms = ahead_ms;
        self.ahead_ms = ahead_ms;
        self.pending = steps.into();
        if ahead_ms != 0 {
            self.unreported.push((Duration::ZERO, ahead_ms));
        }
        self
    }

    pub(crate) fn speed(&self) -> f64 {
        self.speed
    }

    /// Scenario time now, by the monotonic clock and the steps of Azure's clock so far;
    /// never earlier than the last reading.
    pub(crate) fn scenario_now(&mut self) -> Duration {
        while let Some((at, ahead)) = self.pending.front().copied()
            && self.reading() >= at
        {
            self.pending.pop_front();
            self.take_step(at, ahead);
        }
        let now = self.reading();
        self.floor = now;
        now
    }

    /// From now on Azure's clock is `ahead_ms` ahead of the machine's (a step of the VM's
    /// clock, seen from Azure).
    pub(crate) fn step_now(&mut self, ahead_ms: i64) {
        let now = self.scenario_now();
        self.take_step(now, ahead_ms);
        self.scenario_now();
    }

    /// Scenario time jumps from now to `to` at once, while neither the machine's clock nor
    /// Azure's moves: an instant after the skip is that much sooner on both (what NotBefore
    /// shows for it, and when it happened). Nothing when `to` is not ahead.
    pub(crate) fn skip_to(&mut self, to: Duration) {
        let now = self.scenario_now();
        if to <= now {
            return;
        }
        self.skipped.push((now, to));
        self.scenario_now();
    }

    /// How much scenario time was skipped up to scenario instant `at`.
    fn skipped_before(&self, at: Duration) -> Duration {
        self.skipped
            .iter()
            .map(|(from, to)| at.clamp(*from, *to) - *from)
            .sum()
    }

    /// How much scenario time was skipped in all.
    pub(crate) fn skipped_in_all(&self) -> Duration {
        self.skipped.iter().map(|(from, to)| *to - *from).sum()
    }

    /// The machine's wall-clock instant of scenario instant `at`, before VM clock steps.
    fn machine_wall_at(&self, at: Duration) -> SystemTime {
        self.started_wall + (at - self.skipped_before(at)).div_f64(self.speed)
    }

    /// The steps taken (and the start's offset) since the last call: (scenario instant,
    /// Azure's clock minus the machine's in ms).
    pub(crate) fn take_reports(&mut self) -> Vec<(Duration, i64)> {
        std::mem::take(&mut self.unreported)
    }

    /// Azure's clock now: what its `Date` header says.
    pub(crate) fn azure_now(&mut self) -> SystemTime {
        let now = self.scenario_now();
        self.wall_at(now)
    }

    /// The instant of a scenario instant on Azure's clock (what NotBefore shows for it);
    /// the machine's wall clock without an offset.
    pub(crate) fn wall_at(&self, scenario: Duration) -> SystemTime {
        shift(self.machine_wall_at(scenario), self.ahead_at_start_ms)
    }

    /// The instant of a scenario instant on the machine's clock, in Unix milliseconds (when
    /// it happened, for the records).
    pub(crate) fn unix_ms_at(&self, scenario: Duration) -> u64 {
        let moved = self
            .taken
            .iter()
            .rev()
            .find(|(at, _)| *at <= scenario)
            .map_or(0, |(_, moved)| *moved);
        unix_ms(shift(self.machine_wall_at(scenario), -moved))
    }

    pub(crate) fn started_unix_ms(&self) -> u64 {
        unix_ms(self.started_wall)
    }

    /// Scenario time by the monotonic clock and the steps taken, no earlier than the floor.
    fn reading(&self) -> Duration {
        let moved_ms = self.ahead_ms - self.ahead_at_start_ms;
        let seconds = self.started_mono.elapsed().as_secs_f64() + moved_ms as f64 / 1000.0;
        let played = Duration::from_secs_f64((seconds * self.speed).max(0.0));
        (played + self.skipped_in_all()).max(self.floor)
    }

    fn take_step(&mut self, at: Duration, ahead_ms: i64) {
        self.ahead_ms = ahead_ms;
        self.taken
            .push((at, self.ahead_ms - self.ahead_at_start_ms));
        self.unreported.push((at, ahead_ms));
    }
}

/// Milliseconds since the Unix epoch (0 for instants before it).
pub(crate) use forewarn_imds::unix_ms;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn a_vm_clock_behind_puts_azure_ahead_and_a_step_moves_scenario_time() {
        let start = UNIX_EPOCH + Duration::from_secs(1_000);
        let mut clock = ScenarioClock::starting_at(start, 1.0)
            .with_vm_clock(10_000, vec![(Duration::ZERO, 40_000)]);
        // NotBefore (Azure's) of scenario instant 5 s is 10 s ahead of the machine's.
        assert_eq!(
            clock.wall_at(Duration::from_secs(5)),
            start + Duration::from_secs(15)
        );
        // The step at 0 is taken at the first reading: scenario time jumps 30 s.
        let now = clock.scenario_now();
        assert!(now >= Duration::from_secs(30), "{now:?}");
        assert_eq!(
            clock.take_reports().len(),
            2,
            "the start's offset and the step"
        );
        // When it happened, on the machine's clock: about the start.
        assert!(clock.unix_ms_at(now) < unix_ms(start) + 1_000);
        // Stepped back, scenario time stands still.
        clock.step_now(0);
        let held = clock.scenario_now();
        assert!(held >= now, "{held:?} < {now:?}");
        assert!(held < now + Duration::from_secs(1));
    }

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

    #[test]
    fn a_skip_moves_scenario_time_but_neither_wall_clock() {
        let start = UNIX_EPOCH + Duration::from_secs(1_000);
        let mut clock = ScenarioClock::starting_at(start, 10.0);
        clock.skip_to(Duration::from_secs(600));
        let now = clock.scenario_now();
        assert!(now >= Duration::from_secs(600), "{now:?}");
        assert!(now < Duration::from_secs(610), "{now:?}");
        // The skip starts at the wall time that passed since the clock was made (a little:
        // up to 1 s is allowed for a busy machine), which every figure below adds.
        let about = |ms: u64, wanted: u64| (wanted..wanted + 1_000).contains(&ms);
        // An instant after the skip is as far from now on the wall as its distance in
        // scenario time says: 100 s of scenario time at 10x is 10 s, from the start.
        let after = unix_ms(clock.wall_at(Duration::from_secs(700)));
        assert!(about(after, 1_010_000), "{after}");
        let happened = clock.unix_ms_at(Duration::from_secs(700));
        assert!(about(happened, 1_010_000), "{happened}");
        // An instant before the skip keeps its wall time; one inside it is its start.
        assert_eq!(clock.unix_ms_at(Duration::ZERO), 1_000_000);
        let inside = clock.unix_ms_at(Duration::from_secs(300));
        assert!(about(inside, 1_000_000), "{inside}");
        // A skip backwards is nothing.
        clock.skip_to(Duration::from_secs(5));
        assert!(clock.scenario_now() >= now);
        assert_eq!(unix_ms(clock.wall_at(Duration::from_secs(700))), after);
    }
}
