//! IMDS's politeness: at most `max` requests in any window of `window` **as IMDS counts
//! them**, on arrival, whatever happens between a grant here and the request reaching IMDS
//! (a loaded CPU, a new connection, a slow write). IMDS throttles each VM at 5 requests per
//! second and answers the sixth with 429.
//!
//! The rule that makes it so: a request holds its slot from its grant until `window` after
//! its answer arrived (or it failed, or was dropped). A request reaches IMDS after its grant
//! and before its answer, so when a request is granted, every earlier one that could still
//! arrive within `window` of it holds a slot: no `window` at IMDS ever sees more than `max`.
//! A request that has not been answered [`HOLD_CAP`] after its grant is taken as answered
//! then (it reached IMDS long ago, or never will), so one that hangs for the 10 s time-out
//! does not keep its slot: the guarantee holds for every request that reaches IMDS within
//! [`HOLD_CAP`] of its grant.
//!
//! One slot is kept for the approval POST ([`Lane::Approval`]): polls, metadata and token
//! requests ([`Lane::Routine`]) share `max - 1`, so an approval never waits behind them.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long an unanswered request keeps counting as if its answer were still to come.
pub(crate) const HOLD_CAP: Duration = Duration::from_secs(2);

/// Which requests a permit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Polls, compute metadata, identity tokens: all slots but the one kept for approvals.
    Routine,
    /// The approval POST: every slot, the kept one included.
    Approval,
}

/// Hands out permits so that at most `max` requests arrive at IMDS in any `window`, first
/// come first served within each lane.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    /// The slots an approval may use.
    max: usize,
    /// The slots the routine lane may use: `max - 1`, or `max` when `max` is 1.
    routine_max: usize,
    window: Duration,
    slots: Mutex<Slots>,
    /// Woken whenever a permit is given back.
    released: Notify,
    /// One waiter at a time per lane; tokio's mutex is fair, so a lane is served in arrival
    /// order.
    routine_queue: tokio::sync::Mutex<()>,
    approval_queue: tokio::sync::Mutex<()>,
}

/// The requests that still count, oldest grant first.
#[derive(Debug, Default)]
struct Slots {
    next_id: u64,
    held: VecDeque<Slot>,
}

#[derive(Debug)]
struct Slot {
    id: u64,
    granted: Instant,
    /// When the answer arrived, the request failed or the permit was dropped.
    released: Option<Instant>,
}

impl Slot {
    /// Until when this slot counts against the limit.
    fn counts_until(&self, window: Duration) -> Instant {
        let capped = self.granted + HOLD_CAP;
        self.released.map_or(capped, |at| at.min(capped)) + window
    }
}

/// A granted request's slot: give it back (drop it) once the answer has arrived or the
/// request failed. It keeps counting for the window after that.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    limiter: &'a RateLimiter,
    id: u64,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.limiter.release(self.id, Instant::now());
    }
}

impl RateLimiter {
    /// A limiter for `max` requests (0 is taken as 1) per `window`.
    pub(crate) fn new(max: u32, window: Duration) -> RateLimiter {
        let max = max.max(1) as usize;
        RateLimiter {
            max,
            routine_max: if max > 1 { max - 1 } else { max },
            window,
            slots: Mutex::new(Slots::default()),
            released: Notify::new(),
            routine_queue: tokio::sync::Mutex::new(()),
            approval_queue: tokio::sync::Mutex::new(()),
        }
    }

    /// Waits until a request of `lane` may be sent without more than the limit arriving at
    /// IMDS within one window, then grants it. Dropping the future while it waits takes no
    /// slot; the permit returned counts until its window after it is dropped.
    pub(crate) async fn acquire(&self, lane: Lane) -> Permit<'_> {
        let (queue, most) = match lane {
            Lane::Routine => (&self.routine_queue, self.routine_max),
            Lane::Approval => (&self.approval_queue, self.max),
        };
        let _turn = queue.lock().await;
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before looking, so a release between the look and the wait wakes it.
            released.as_mut().enable();
            let next_free = match self.try_grant(most, Instant::now()) {
                Ok(id) => return Permit { limiter: self, id },
                Err(next_free) => next_free,
            };
            tokio::select! {
                () = &mut released => {}
                () = tokio::time::sleep_until(next_free) => {}
            }
        }
    }

    /// Grants a slot at `now` if fewer than `most` count; else says when one stops counting.
    fn try_grant(&self, most: usize, now: Instant) -> Result<u64, Instant> {
        let mut slots = self.lock_slots();
        let window = self.window;
        slots.held.retain(|slot| slot.counts_until(window) > now);
        if slots.held.len() >= most {
            let next_free = slots
                .held
                .iter()
                .map(|slot| slot.counts_until(window))
                .min()
                .unwrap_or(now);
            return Err(next_free);
        }
        let id = slots.next_id;
        slots.next_id += 1;
        slots.held.push_back(Slot {
            id,
            granted: now,
            released: None,
        });
        Ok(id)
    }

    fn release(&self, id: u64, now: Instant) {
        let mut slots = self.lock_slots();
        if let Some(slot) = slots.held.iter_mut().find(|slot| slot.id == id) {
            slot.released = Some(now);
        }
        drop(slots);
        self.released.notify_waiters();
    }

    /// The slots; a panic elsewhere while they were held leaves them consistent (every
    /// change is one push, one retain or one field), so a poisoned lock is used as it is.
    fn lock_slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// The largest number of `instants` in any window of `window` length.
    fn most_in_window(instants: &[Instant], window: Duration) -> usize {
        let mut sorted = instants.to_vec();
        sorted.sort();
        (0..sorted.len())
            .map(|i| {
                sorted[i..]
                    .iter()
                    .take_while(|&&later| later.duration_since(sorted[i]) < window)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    /// A small deterministic generator (xorshift), so the delays are uneven but repeatable.
    struct Delays(u64);

    impl Delays {
        fn next_ms(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    /// One request as IMDS sees it: granted, then after `to_arrive` it arrives at IMDS, and
    /// after `to_answer` more its answer is back. Returns the arrival instant.
    async fn request(
        limiter: &RateLimiter,
        lane: Lane,
        to_arrive: Duration,
        to_answer: Duration,
    ) -> Instant {
        let _permit = limiter.acquire(lane).await;
        tokio::time::sleep(to_arrive).await;
        let arrived = Instant::now();
        tokio::time::sleep(to_answer).await;
        arrived
    }

    #[tokio::test(start_paused = true)]
    async fn routine_requests_leave_the_approval_its_slot() {
        let limiter = RateLimiter::new(5, SECOND);
        let begin = Instant::now();
        let mut permits = Vec::new();
        for _ in 0..4 {
            permits.push(limiter.acquire(Lane::Routine).await);
        }
        assert_eq!(Instant::now(), begin, "the first four need no wait");
        let approval = limiter.acquire(Lane::Approval).await;
        assert_eq!(
            Instant::now(),
            begin,
            "the approval takes the kept slot at once"
        );
        drop(permits);
        drop(approval);
        limiter.acquire(Lane::Routine).await;
        assert_eq!(
            Instant::now(),
            begin + SECOND,
            "a fifth routine request waits for a window after the first answers"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_counts_until_a_window_after_the_answer() {
        let limiter = RateLimiter::new(1, SECOND);
        let begin = Instant::now();
        let permit = limiter.acquire(Lane::Routine).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        drop(permit);
        limiter.acquire(Lane::Routine).await;
        assert_eq!(Instant::now(), begin + Duration::from_millis(1700));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_request_stops_counting_after_the_cap() {
        let limiter = RateLimiter::new(1, SECOND);
        let begin = Instant::now();
        let _hanging = limiter.acquire(Lane::Routine).await;
        limiter.acquire(Lane::Approval).await;
        assert_eq!(Instant::now(), begin + HOLD_CAP + SECOND);
    }

    /// The property IMDS needs: whatever the delay between a grant and the request's arrival
    /// (up to the cap), no window at IMDS holds more than five. The limiter of before (five
    /// grants per 1.05 s, counted from the grant) let 6 arrive within one second here.
    #[tokio::test(start_paused = true)]
    async fn no_window_at_imds_holds_more_than_five_whatever_the_delays() {
        let limiter = Arc::new(RateLimiter::new(5, SECOND));
        let mut tasks = Vec::new();
        for task in 0..6u64 {
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                let mut delays = Delays(0x9E37_79B9_7F4A_7C15 ^ ((task + 1) * 0x1234_5678));
                let lane = if task == 0 {
                    Lane::Approval
                } else {
                    Lane::Routine
                };
                let mut arrivals = Vec::new();
                for _ in 0..25 {
                    tokio::time::sleep(Duration::from_millis(delays.next_ms(300))).await;
                    // Arrival delays from nothing to the cap, answers from nothing to 3 s.
                    let to_arrive = Duration::from_millis(delays.next_ms(2000));
                    let to_answer = Duration::from_millis(delays.next_ms(3000));
                    arrivals.push(request(&limiter, lane, to_arrive, to_answer).await);
                }
                arrivals
            }));
        }
        let mut arrivals = Vec::new();
        for task in tasks {
            arrivals.extend(task.await.expect("no task panics"));
        }
        assert_eq!(arrivals.len(), 150);
        let most = most_in_window(&arrivals, SECOND);
        assert!(most <= 5, "{most} requests arrived within one second");
    }

    #[tokio::test(start_paused = true)]
    async fn an_approval_never_waits_behind_routine_requests() {
        let limiter = Arc::new(RateLimiter::new(5, SECOND));
        // Routine requests keep their four slots busy, answered after 100 ms each.
        let busy = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                for _ in 0..40 {
                    request(
                        &limiter,
                        Lane::Routine,
                        Duration::ZERO,
                        Duration::from_millis(100),
                    )
                    .await;
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let asked = Instant::now();
        limiter.acquire(Lane::Approval).await;
        assert_eq!(Instant::now(), asked, "the approval is granted at once");
        busy.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_spell_frees_the_window() {
        let limiter = RateLimiter::new(2, SECOND);
        drop(limiter.acquire(Lane::Approval).await);
        drop(limiter.acquire(Lane::Approval).await);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let before = Instant::now();
        drop(limiter.acquire(Lane::Approval).await);
        drop(limiter.acquire(Lane::Approval).await);
        assert_eq!(Instant::now(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_is_taken_as_one_and_one_has_no_kept_slot() {
        let limiter = RateLimiter::new(0, SECOND);
        let begin = Instant::now();
        drop(limiter.acquire(Lane::Routine).await);
        drop(limiter.acquire(Lane::Approval).await);
        assert_eq!(Instant::now(), begin + SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_wait_takes_no_slot() {
        let limiter = RateLimiter::new(1, SECOND);
        let begin = Instant::now();
        let held = limiter.acquire(Lane::Routine).await;
        let waiting =
            tokio::time::timeout(Duration::from_millis(10), limiter.acquire(Lane::Routine));
        assert!(waiting.await.is_err(), "the second waits");
        drop(held);
        limiter.acquire(Lane::Routine).await;
        assert_eq!(Instant::now(), begin + Duration::from_millis(10) + SECOND);
    }
}
