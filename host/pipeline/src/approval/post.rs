//! The POST queue: which approvals due go to IMDS next, and when. One POST is in flight at a
//! time; a batch IMDS did not accept goes again after [`APPROVAL_RETRY`]; a batch IMDS
//! refused (a 4xx: one id it no longer lists spoils the whole batch) is sent again one event
//! at a time, at once; an id no longer listed or no longer due is dropped. Nothing is sent
//! while the daemon stops or the journal cannot record what is sent.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use forewarn_events::ImdsTime;

use forewarn_events::EventId;

/// Wait before re-sending an approval IMDS did not accept.
pub const APPROVAL_RETRY: Duration = Duration::from_secs(1);

/// The approval POSTs: the one in flight, the retries, the events sent alone.
#[derive(Debug, Default)]
pub struct PostQueue {
    /// The approval POST in flight, if any.
    approving: Option<Vec<EventId>>,
    /// Events whose approval failed: not sent again before this instant.
    retry_at: BTreeMap<EventId, ImdsTime>,
    /// Events IMDS refused in a batch: each is sent alone, so one stale id does not block
    /// the others.
    singly: BTreeSet<EventId>,
}

impl PostQueue {
    /// The next POST at `now` among `listed_and_due` (approvals journaled as due, of events
    /// the latest document lists), unless one is in flight or `paused` (stopping, or the
    /// journal cannot be written). An approval that failed less than [`APPROVAL_RETRY`] ago
    /// waits; an event IMDS refused in a batch goes alone. Marks the batch in flight.
    pub fn next_batch(
        &mut self,
        listed_and_due: BTreeSet<EventId>,
        paused: bool,
        now: ImdsTime,
    ) -> Option<Vec<EventId>> {
        if paused || self.approving.is_some() {
            return None;
        }
        // Ids no longer listed (or no longer due) are not retried.
        self.retry_at.retain(|id, _| listed_and_due.contains(id));
        self.singly.retain(|id| listed_and_due.contains(id));
        let due: Vec<EventId> = listed_and_due
            .into_iter()
            .filter(|id| self.retry_at.get(id).is_none_or(|at| *at <= now))
            .collect();
        let batch = match due.iter().find(|id| self.singly.contains(*id)) {
            Some(alone) => vec![alone.clone()],
            None => due,
        };
        if batch.is_empty() {
            return None;
        }
        self.approving = Some(batch.clone());
        Some(batch)
    }

    /// IMDS accepted the POST of `event_ids`.
    pub fn sent(&mut self, event_ids: &[EventId]) {
        self.approving = None;
        for id in event_ids {
            self.retry_at.remove(id);
            self.singly.remove(id);
        }
    }

    /// IMDS did not accept the POST of `event_ids` at `now`. A refused batch of several
    /// events is sent again at once, one event at a time; anything else after
    /// [`APPROVAL_RETRY`]. Returns whether they go one by one.
    pub fn failed(&mut self, event_ids: &[EventId], rejected: bool, now: ImdsTime) -> bool {
        self.approving = None;
        let one_by_one = rejected && event_ids.len() > 1;
        for id in event_ids {
            if one_by_one {
                self.singly.insert(id.clone());
            } else {
                self.retry_at.insert(id.clone(), now + APPROVAL_RETRY);
            }
        }
        one_by_one
    }

    /// The POST queued was taken back before it was sent (the journal failed under it).
    pub fn taken_back(&mut self) {
        self.approving = None;
    }

    /// The event is handled to the end.
    pub fn forget(&mut self, id: &EventId) {
        self.retry_at.remove(id);
        self.singly.remove(id);
    }

    /// The next retry of an event `is_due` still says is due, unless a POST is in flight or
    /// `paused`.
    pub fn next_retry(&self, paused: bool, is_due: impl Fn(&EventId) -> bool) -> Option<ImdsTime> {
        if paused || self.approving.is_some() {
            return None;
        }
        self.retry_at
            .iter()
            .filter(|(id, _)| is_due(id))
            .map(|(_, at)| *at)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: u64) -> ImdsTime {
        ImdsTime::UNIX_EPOCH + Duration::from_millis(millis)
    }

    fn ids(list: &[&str]) -> Vec<EventId> {
        list.iter().map(|id| EventId::from(*id)).collect()
    }

    /// What happens to the queue before the asked batch.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// The next batch is taken (and stays in flight).
        Take(u64),
        /// The batch in flight failed at this instant: (rejected, at ms).
        Fail(bool, u64),
        /// The batch in flight was sent.
        Sent,
        /// The batch in flight was taken back (journal failure).
        TakenBack,
    }

    #[test]
    fn post_queue_rows() {
        use Step::{Fail, Sent, Take, TakenBack};
        // (what is due, steps, paused, ask at ms) → (batch, next retry ms afterwards)
        type Row = (
            &'static [&'static str],
            &'static [Step],
            bool,
            u64,
            Option<&'static [&'static str]>,
            Option<u64>,
        );
        let rows: &[Row] = &[
            // Everything due goes in one batch.
            (&["A", "B"], &[], false, 0, Some(&["A", "B"]), None),
            // Nothing while stopping or while the journal cannot be written.
            (&["A"], &[], true, 0, None, None),
            // No second batch while one is in flight.
            (&["A", "B"], &[Take(0)], false, 0, None, None),
            // 500 (not rejected): the same batch after 1 s, not before.
            (
                &["A", "B"],
                &[Take(0), Fail(false, 0)],
                false,
                999,
                None,
                Some(1_000),
            ),
            (
                &["A", "B"],
                &[Take(0), Fail(false, 0)],
                false,
                1_000,
                Some(&["A", "B"]),
                None,
            ),
            // While paused, no retry wakes the loop.
            (&["A"], &[Take(0), Fail(false, 0)], true, 0, None, None),
            // 400 on 3 ids: each alone, at once, in turn.
            (
                &["A", "B", "C"],
                &[Take(0), Fail(true, 0)],
                false,
                0,
                Some(&["A"]),
                None,
            ),
            (
                &["A", "B", "C"],
                &[Take(0), Fail(true, 0), Take(0), Sent],
                false,
                0,
                Some(&["B"]),
                None,
            ),
            // A single id refused waits the retry like a 500 (sending it alone is no help).
            (
                &["A"],
                &[Take(0), Fail(true, 0)],
                false,
                0,
                None,
                Some(1_000),
            ),
            // A batch taken back (the journal failed) is sent again once it can be.
            (&["A"], &[Take(0), TakenBack], false, 0, Some(&["A"]), None),
        ];
        for (index, (due, steps, paused, ask, batch, retry)) in rows.iter().enumerate() {
            let due: BTreeSet<EventId> = ids(due).into_iter().collect();
            let mut queue = PostQueue::default();
            let mut in_flight = Vec::new();
            for step in *steps {
                match *step {
                    Take(ms) => {
                        in_flight = queue
                            .next_batch(due.clone(), false, at(ms))
                            .unwrap_or_default()
                    }
                    Fail(rejected, ms) => {
                        queue.failed(&in_flight, rejected, at(ms));
                    }
                    Sent => queue.sent(&in_flight),
                    TakenBack => queue.taken_back(),
                }
            }
            let got = queue.next_batch(due.clone(), *paused, at(*ask));
            let next_retry = queue.next_retry(*paused, |id| due.contains(id));
            assert_eq!(got, batch.map(ids), "row {index}: batch");
            assert_eq!(next_retry, retry.map(at), "row {index}: next retry");
        }
    }

    #[test]
    fn ids_no_longer_listed_or_due_are_dropped() {
        let mut queue = PostQueue::default();
        let both: BTreeSet<EventId> = ids(&["A", "B"]).into_iter().collect();
        let batch = queue.next_batch(both, false, at(0)).unwrap_or_default();
        queue.failed(&batch, true, at(0));
        // B is no longer listed: A goes alone, then nothing is left to retry.
        let only_a: BTreeSet<EventId> = ids(&["A"]).into_iter().collect();
        assert_eq!(
            queue.next_batch(only_a.clone(), false, at(0)),
            Some(ids(&["A"]))
        );
        queue.sent(&ids(&["A"]));
        assert_eq!(queue.next_batch(BTreeSet::new(), false, at(5_000)), None);
        assert_eq!(queue.next_retry(false, |_| true), None);
        assert!(queue.singly.is_empty() && queue.retry_at.is_empty());
    }
}
