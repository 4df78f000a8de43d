//! What the load balancers probing `/readyz` have been told: per prober (one address), when
//! it last probed and the not-ready answers it got in a row. A pure unit: the caller gives
//! it the time.
//!
//! A drain has reached the load balancers when every prober that probed in the last minute
//! has been answered 503 `unhealthy-threshold` times in a row since the VM was marked not
//! ready: each has then taken the VM out of rotation by its own rule (HAProxy's `fall`,
//! Azure Load Balancer's `probeThreshold`, Application Gateway's unhealthy threshold).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A prober that has not probed for this long is forgotten: it no longer holds a drain up.
pub const PROBER_MEMORY: Duration = Duration::from_secs(60);
/// Probers remembered at once; past this many, the one that probed longest ago is
/// forgotten (the memory stays bounded whatever the number of addresses probing).
pub(crate) const PROBERS_REMEMBERED: usize = 256;
/// The highest `unhealthy-threshold` a plugin may ask about; the not-ready answers counted
/// per prober stop here.
pub const MAX_UNHEALTHY_THRESHOLD: u32 = 16;

/// Who probed: the peer's address (an IPv4-mapped IPv6 address as its IPv4 one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prober(IpAddr);

impl Prober {
    /// The prober at `address`.
    pub fn at(address: IpAddr) -> Prober {
        Prober(address.to_canonical())
    }
}

impl std::fmt::Display for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What a probe was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeAnswer {
    /// 200: the VM is in rotation.
    Ready,
    /// 503: the VM has been out of rotation since `since` (when it was marked not ready).
    NotReady { since: Instant },
}

/// One prober's record.
#[derive(Debug, Clone)]
struct ProberRecord {
    last_probe: Instant,
    /// When each of the not-ready answers in a row was given, the first
    /// [`MAX_UNHEALTHY_THRESHOLD`] of them; empty after a ready answer.
    not_ready_in_a_row: Vec<Instant>,
}

/// Where a drain stands at the probers, for a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeView {
    /// Probers that probed within [`PROBER_MEMORY`].
    pub probers: u32,
    /// Of those, the ones answered not ready `threshold` times in a row since the VM was
    /// marked not ready.
    pub drained: u32,
    /// When the last of them reached the threshold, once all have (and there is one).
    pub all_drained_at: Option<Instant>,
}

/// Every prober's record.
#[derive(Debug, Default)]
pub(crate) struct ProbeLedger {
    probers: HashMap<Prober, ProberRecord>,
}

impl ProbeLedger {
    /// Records that `prober` probed at `now` and was given `answer`.
    pub(crate) fn record(&mut self, prober: Prober, answer: ProbeAnswer, now: Instant) {
        if !self.probers.contains_key(&prober) && self.probers.len() >= PROBERS_REMEMBERED {
            self.forget_longest_silent();
        }
        let record = self.probers.entry(prober).or_insert(ProberRecord {
            last_probe: now,
            not_ready_in_a_row: Vec::new(),
        });
        record.last_probe = now;
        match answer {
            ProbeAnswer::Ready => record.not_ready_in_a_row.clear(),
            ProbeAnswer::NotReady { since } => {
                // Answers of an earlier not-ready spell (no probe came while the VM was
                // ready in between) do not count for this one.
                if record
                    .not_ready_in_a_row
                    .first()
                    .is_some_and(|at| *at < since)
                {
                    record.not_ready_in_a_row.clear();
                }
                if record.not_ready_in_a_row.len() < MAX_UNHEALTHY_THRESHOLD as usize {
                    record.not_ready_in_a_row.push(now);
                }
            }
        }
    }

    /// Where a drain begun at `since` stands at `now` for probers that take a VM out after
    /// `threshold` (1 to [`MAX_UNHEALTHY_THRESHOLD`]) failed probes in a row.
    pub(crate) fn view(&self, threshold: u32, since: Instant, now: Instant) -> ProbeView {
        let needed = threshold.clamp(1, MAX_UNHEALTHY_THRESHOLD) as usize;
        let mut probers = 0u32;
        let mut drained = 0u32;
        let mut last_drained_at: Option<Instant> = None;
        for record in self.recent(now) {
            probers += 1;
            let counted: Vec<&Instant> = record
                .not_ready_in_a_row
                .iter()
                .filter(|at| **at >= since)
                .collect();
            let Some(reached_at) = counted.get(needed - 1) else {
                continue;
            };
            drained += 1;
            last_drained_at = Some(last_drained_at.map_or(**reached_at, |at| at.max(**reached_at)));
        }
        let all_drained_at = last_drained_at.filter(|_| probers > 0 && drained == probers);
        ProbeView {
            probers,
            drained,
            all_drained_at,
        }
    }

    /// How many probers probed within [`PROBER_MEMORY`] of `now`.
    pub(crate) fn recent_probers(&self, now: Instant) -> usize {
        self.recent(now).count()
    }

    fn recent(&self, now: Instant) -> impl Iterator<Item = &ProberRecord> {
        self.probers
            .values()
            .filter(move |record| now.saturating_duration_since(record.last_probe) <= PROBER_MEMORY)
    }

    fn forget_longest_silent(&mut self) {
        let longest_silent = self
            .probers
            .iter()
            .min_by_key(|(_, record)| record.last_probe)
            .map(|(prober, _)| *prober);
        if let Some(prober) = longest_silent {
            self.probers.remove(&prober);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn prober(last: u8) -> Prober {
        Prober::at(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    fn at(start: Instant, millis: u64) -> Instant {
        start + Duration::from_millis(millis)
    }

    #[test]
    fn a_drain_is_seen_once_every_prober_got_the_threshold_of_503s_in_a_row() {
        let start = Instant::now();
        let since = at(start, 1_000);
        let mut ledger = ProbeLedger::default();
        ledger.record(prober(1), ProbeAnswer::Ready, at(start, 500));
        ledger.record(prober(2), ProbeAnswer::Ready, at(start, 700));
        let not_ready = ProbeAnswer::NotReady { since };
        ledger.record(prober(1), not_ready, at(start, 1_500));
        ledger.record(prober(1), not_ready, at(start, 2_500));
        ledger.record(prober(2), not_ready, at(start, 1_700));
        assert_eq!(
            ledger.view(2, since, at(start, 2_600)),
            ProbeView {
                probers: 2,
                drained: 1,
                all_drained_at: None
            }
        );
        ledger.record(prober(2), not_ready, at(start, 2_700));
        assert_eq!(
            ledger.view(2, since, at(start, 2_800)),
            ProbeView {
                probers: 2,
                drained: 2,
                all_drained_at: Some(at(start, 2_700))
            }
        );
        let stricter = ledger.view(3, since, at(start, 2_800));
        assert_eq!((stricter.drained, stricter.all_drained_at), (0, None));
    }

    #[test]
    fn a_ready_answer_starts_the_count_again() {
        let start = Instant::now();
        let since = at(start, 0);
        let mut ledger = ProbeLedger::default();
        let not_ready = ProbeAnswer::NotReady { since };
        ledger.record(prober(1), not_ready, at(start, 100));
        ledger.record(prober(1), ProbeAnswer::Ready, at(start, 200));
        ledger.record(prober(1), not_ready, at(start, 300));
        assert_eq!(ledger.view(2, since, at(start, 400)).drained, 0);
        ledger.record(prober(1), not_ready, at(start, 400));
        assert_eq!(ledger.view(2, since, at(start, 500)).drained, 1);
    }

    #[test]
    fn answers_from_an_earlier_not_ready_spell_do_not_count() {
        let start = Instant::now();
        let mut ledger = ProbeLedger::default();
        let first = ProbeAnswer::NotReady { since: start };
        for millis in [100, 200, 300] {
            ledger.record(prober(1), first, at(start, millis));
        }
        // Ready again and not ready again with no probe in between.
        let since = at(start, 1_000);
        assert_eq!(ledger.view(2, since, at(start, 1_100)).drained, 0);
        ledger.record(prober(1), ProbeAnswer::NotReady { since }, at(start, 1_200));
        assert_eq!(ledger.view(2, since, at(start, 1_300)).drained, 0);
        ledger.record(prober(1), ProbeAnswer::NotReady { since }, at(start, 1_400));
        assert_eq!(
            ledger.view(2, since, at(start, 1_500)).all_drained_at,
            Some(at(start, 1_400))
        );
    }

    #[test]
    fn a_prober_silent_for_a_minute_no_longer_holds_the_drain() {
        let start = Instant::now();
        let since = at(start, 0);
        let mut ledger = ProbeLedger::default();
        ledger.record(prober(9), ProbeAnswer::Ready, at(start, 0));
        let not_ready = ProbeAnswer::NotReady { since };
        ledger.record(prober(1), not_ready, at(start, 1_000));
        ledger.record(prober(1), not_ready, at(start, 2_000));
        assert_eq!(
            ledger.view(2, since, at(start, 30_000)).all_drained_at,
            None
        );
        let later = at(start, 61_000);
        assert_eq!(ledger.recent_probers(later), 1);
        assert_eq!(
            ledger.view(2, since, later).all_drained_at,
            Some(at(start, 2_000))
        );
        assert_eq!(ledger.view(2, since, at(start, 62_001)).probers, 0);
    }

    #[test]
    fn no_prober_is_no_drain_seen_and_the_memory_is_bounded() {
        let start = Instant::now();
        let mut ledger = ProbeLedger::default();
        assert_eq!(
            ledger.view(2, start, start),
            ProbeView {
                probers: 0,
                drained: 0,
                all_drained_at: None
            }
        );
        for n in 0..(PROBERS_REMEMBERED as u32 + 10) {
            let address = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n));
            ledger.record(
                Prober::at(address),
                ProbeAnswer::Ready,
                at(start, u64::from(n)),
            );
        }
        assert_eq!(ledger.probers.len(), PROBERS_REMEMBERED);
        assert!(
            !ledger
                .probers
                .contains_key(&Prober::at(IpAddr::V4(Ipv4Addr::from(0x0a00_0000)))),
            "the longest silent prober is the one forgotten"
        );
    }

    #[test]
    fn a_mapped_address_is_the_same_prober_and_the_count_stops_at_the_maximum() {
        let start = Instant::now();
        let mut ledger = ProbeLedger::default();
        let not_ready = ProbeAnswer::NotReady { since: start };
        let mapped = Prober::at(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()));
        assert_eq!(mapped, prober(1));
        assert_ne!(Prober::at(IpAddr::V6(Ipv6Addr::LOCALHOST)), prober(1));
        for millis in 1..=40 {
            ledger.record(mapped, not_ready, at(start, millis));
        }
        let view = ledger.view(MAX_UNHEALTHY_THRESHOLD + 5, start, at(start, 50));
        assert_eq!(view.all_drained_at, Some(at(start, 16)));
    }
}
