//! A strict sliding-window rate limiter: in any window of `window` length at most `max`
//! permits are handed out. IMDS throttles each VM at 5 requests per second.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// Hands out at most `max` permits in any sliding window of length `window`, first come
/// first served. Every instant a permit was granted is remembered until it leaves the window.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    max: usize,
    window: Duration,
    /// Grant instants still inside the window, oldest first. The tokio mutex is fair, so
    /// waiters are served in arrival order; it is held while waiting for a slot.
    granted: Mutex<VecDeque<Instant>>,
}

impl RateLimiter {
    /// A limiter granting at most `max` permits (0 is taken as 1) per `window`.
    pub(crate) fn new(max: u32, window: Duration) -> RateLimiter {
        let max = max.max(1) as usize;
        RateLimiter {
            max,
            window,
            granted: Mutex::new(VecDeque::with_capacity(max)),
        }
    }

    /// Waits until a permit may be granted without exceeding the limit, then records it.
    /// Dropping the future while it waits takes no permit.
    pub(crate) async fn acquire(&self) {
        let mut granted = self.granted.lock().await;
        if granted.len() >= self.max
            && let Some(&oldest) = granted.front()
        {
            tokio::time::sleep_until(oldest + self.window).await;
        }
        let now = Instant::now();
        while granted
            .front()
            .is_some_and(|&start| now.duration_since(start) >= self.window)
        {
            granted.pop_front();
        }
        granted.push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Asserts that no window of `window` length holds more than `max` of `instants`.
    fn assert_at_most(instants: &[Instant], max: usize, window: Duration) {
        let mut sorted = instants.to_vec();
        sorted.sort();
        for (i, start) in sorted.iter().enumerate() {
            let inside = sorted[i..]
                .iter()
                .take_while(|&&later| later.duration_since(*start) < window)
                .count();
            assert!(
                inside <= max,
                "{inside} permits within {window:?} of {start:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn first_permits_are_immediate_then_the_window_gates() {
        let limiter = RateLimiter::new(5, Duration::from_secs(1));
        let begin = Instant::now();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        assert_eq!(Instant::now(), begin, "the first five need no wait");
        limiter.acquire().await;
        assert_eq!(Instant::now(), begin + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn no_window_ever_holds_more_than_max() {
        let limiter = Arc::new(RateLimiter::new(5, Duration::from_secs(1)));
        let mut tasks = Vec::new();
        for task in 0..4u64 {
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                let mut instants = Vec::new();
                for step in 0..12u64 {
                    // Uneven pacing, so bursts and gaps both happen.
                    tokio::time::sleep(Duration::from_millis((task * 37 + step * 53) % 300)).await;
                    limiter.acquire().await;
                    instants.push(Instant::now());
                }
                instants
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        assert_eq!(all.len(), 48);
        assert_at_most(&all, 5, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_spell_frees_the_window() {
        let limiter = RateLimiter::new(2, Duration::from_secs(1));
        limiter.acquire().await;
        limiter.acquire().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let before = Instant::now();
        limiter.acquire().await;
        limiter.acquire().await;
        assert_eq!(Instant::now(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_is_taken_as_one() {
        let limiter = RateLimiter::new(0, Duration::from_secs(1));
        let begin = Instant::now();
        limiter.acquire().await;
        limiter.acquire().await;
        assert_eq!(Instant::now(), begin + Duration::from_secs(1));
    }
}
