//! The polling loop the daemon runs as a task: fetch the document at an interval, publish
//! each new one on a watch (only the newest matters: a document is a whole snapshot), back
//! off politely on errors, and publish a `PollStatus`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{FetchError, ImdsClient, parse_fetched};
use crate::imds_clock::ClockSkew;
use forewarn_events::Document;

/// The longest wait after failures in a row (see [`PollerConfig::backoff_max`]).
pub(crate) const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// How many unreadable events (and fields) are remembered as already logged and counted.
const UNREADABLE_REMEMBERED: usize = 8192;

/// How many entries without an `EventId` [`PollStatus::unreadable_entries`] shows.
const ENTRIES_SHOWN: usize = 20;

/// The most requests of one poll in flight at once (see [`PollerConfig::interval`]).
pub(crate) const POLL_REQUESTS_IN_FLIGHT: usize = 3;

/// How the poller paces itself, for [`Poller::spawn_with`]. [`Poller::spawn`] uses the
/// production values given in each field's description; all durations are wall-clock time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollerConfig {
    /// Time between the starts of two successful polls (the docs recommend 1 s). Polls keep
    /// it even when IMDS does not answer: a request still waiting when the next poll is due
    /// gets another one beside it (at most [`POLL_REQUESTS_IN_FLIGHT`] at once), so one
    /// connection that hangs does not blind the daemon for the request time-out (10 s, a
    /// third of a Preempt's notice). Nor does a daemon that is busy: documents are handed
    /// over on a watch, which never waits for its reader.
    pub interval: Duration,
    /// Wait after 410 Gone (IMDS not ready yet; it answers within ~70 s): 1 s.
    pub gone_retry: Duration,
    /// The least wait after 429 Too Many Requests: 1 s (it grows like other backoff).
    pub throttle_min: Duration,
    /// First backoff after a server, transport or timeout failure: 1 s. A malformed answer
    /// is not a sign of overload: it is asked again after `interval`.
    pub backoff_min: Duration,
    /// Cap of the exponential backoff: 5 s, well below a Preempt's notice (30 s at most, often
    /// less), so that a few 5xx or 429 answers cannot make the daemon miss the eviction.
    pub backoff_max: Duration,
}

impl PollerConfig {
    /// Production pacing around `interval`.
    pub(crate) fn new(interval: Duration) -> PollerConfig {
        PollerConfig {
            interval,
            gone_retry: Duration::from_secs(1),
            throttle_min: Duration::from_secs(1),
            backoff_min: Duration::from_secs(1),
            backoff_max: BACKOFF_CAP,
        }
    }
}

/// What the poller has done so far; published on a watch channel after every attempt.
/// Serialises with serde's default for `SystemTime` (`{"secs_since_epoch", "nanos_since_epoch"}`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct PollStatus {
    /// When the last request was started.
    pub last_attempt: Option<SystemTime>,
    /// When a document was last fetched and parsed.
    pub last_success: Option<SystemTime>,
    /// The last failure, as text for a person; cleared by a success.
    pub last_error: Option<String>,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// Attempts made, successful or not.
    pub polls: u64,
    /// Failures by `FetchError::kind`: "gone", "throttled", "server", "transport",
    /// "timeout", "malformed", "status".
    pub errors_by_kind: BTreeMap<&'static str, u64>,
    /// Requests sent beside one that had not answered when the next poll was due.
    pub requests_beside_unanswered: u64,
    /// Documents byte for byte the same as the one before: not parsed nor handed over again.
    pub unchanged_documents: u64,
    /// Events IMDS listed with a field forewarn cannot read, by field ("NotBefore",
    /// "EventType", …): each event and field counted once (see `EventField`).
    pub unreadable_by_field: BTreeMap<&'static str, u64>,
    /// Entries of the last document without a usable `EventId` (nothing to track them by),
    /// as the error says them; at most 20.
    pub unreadable_entries: Vec<String>,
    /// How far IMDS's clock (its `Date` header) is from the VM's; None until IMDS sent one.
    pub clock: Option<ClockSkew>,
}

/// Starts the polling loop, which runs as a tokio task (see [`Poller::spawn`]); this type
/// only names the constructors.
#[derive(Debug)]
pub struct Poller;

/// The newest document, on a watch: None until IMDS first answered with one.
pub type Documents = watch::Receiver<Option<Arc<Document>>>;

/// What [`Poller::spawn`] hands back: the task, the documents, and the live status.
pub type PollerParts = (JoinHandle<()>, Documents, watch::Receiver<PollStatus>);

impl Poller {
    /// Starts polling every `interval` with production backoff (the values in
    /// [`PollerConfig`]'s field descriptions). Returns the task, a watch of the newest
    /// successfully parsed document (a malformed answer changes nothing; a document byte for
    /// byte the same as the last is not handed over again), and the status. The watch never
    /// waits for its reader: a reader that is behind sees only the newest document, and the
    /// polls keep their pace. The task ends when `shutdown` is cancelled or the document
    /// receiver is dropped; never because of anything IMDS does.
    pub fn spawn(
        client: ImdsClient,
        interval: Duration,
        shutdown: CancellationToken,
    ) -> PollerParts {
        Poller::spawn_with(client, PollerConfig::new(interval), shutdown)
    }

    /// Like [`Poller::spawn`] with explicit pacing.
    pub fn spawn_with(
        client: ImdsClient,
        config: PollerConfig,
        shutdown: CancellationToken,
    ) -> PollerParts {
        let (documents_tx, documents_rx) = watch::channel(None);
        let (status_tx, status_rx) = watch::channel(PollStatus::default());
        let poll_loop = PollLoop {
            client,
            config,
            shutdown,
            documents: documents_tx,
            status_tx,
            status: PollStatus::default(),
            streak: None,
            last_body: None,
            unreadable_noted: BTreeSet::new(),
        };
        let task = tokio::spawn(poll_loop.run());
        (task, documents_rx, status_rx)
    }
}

/// The state of the running loop.
struct PollLoop {
    client: ImdsClient,
    config: PollerConfig,
    shutdown: CancellationToken,
    documents: watch::Sender<Option<Arc<Document>>>,
    status_tx: watch::Sender<PollStatus>,
    status: PollStatus,
    streak: Option<FailureStreak>,
    /// The body of the last document handed over (compared byte for byte: cheaper than a
    /// digest of a large document, and never wrong).
    last_body: Option<String>,
    /// Unreadable events and fields already logged and counted (id, field and text; an
    /// entry without an id by its error), so each is said once.
    unreadable_noted: BTreeSet<String>,
}

impl PollLoop {
    async fn run(mut self) {
        loop {
            let started = Instant::now();
            self.status.last_attempt = Some(SystemTime::now());
            self.status.polls += 1;
            let shutdown = self.shutdown.clone();
            let result = tokio::select! {
                _ = shutdown.cancelled() => return,
                result = self.fetch_keeping_the_interval() => result,
            };
            let delay = match result.and_then(|body| self.read(body)) {
                Ok(document) => {
                    self.on_success();
                    if let Some(document) = document
                        && !self.deliver(document)
                    {
                        return;
                    }
                    self.config.interval.saturating_sub(started.elapsed())
                }
                Err(error) => self.on_failure(&error),
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// The document in `body`, parsed; None when the body is byte for byte the one handed
    /// over last (nothing to parse, nothing new for the daemon).
    fn read(&mut self, body: String) -> Result<Option<Document>, FetchError> {
        if self.last_body.as_ref() == Some(&body) {
            self.status.unchanged_documents += 1;
            return Ok(None);
        }
        let fetched = parse_fetched(body)?;
        self.note_unreadable(&fetched.document);
        self.last_body = Some(fetched.raw);
        Ok(Some(fetched.document))
    }

    /// One poll: a GET, and another each `interval` that none has answered, up to
    /// [`POLL_REQUESTS_IN_FLIGHT`] at once. The first answer from IMDS ends the poll (a
    /// document, or an error status that the backoff heeds); a request that got no answer
    /// (time-out, broken or refused connection) ends it only when no other is waiting.
    /// Requests still in flight when the poll ends are dropped.
    async fn fetch_keeping_the_interval(&mut self) -> Result<String, FetchError> {
        let mut requests = JoinSet::new();
        self.send_request(&mut requests);
        loop {
            let room = requests.len() < POLL_REQUESTS_IN_FLIGHT;
            tokio::select! {
                Some(joined) = requests.join_next() => {
                    let result = joined.unwrap_or_else(|error| {
                        Err(FetchError::Transport(format!("the request task failed: {error}")))
                    });
                    match result {
                        Err(error) if got_no_answer(&error) && !requests.is_empty() => {
                            tracing::debug!(%error, "an IMDS request got no answer; another is still waiting");
                        }
                        result => return result,
                    }
                }
                () = tokio::time::sleep(self.config.interval), if room => {
                    self.status.requests_beside_unanswered += 1;
                    tracing::debug!(
                        in_flight = requests.len(),
                        "IMDS has not answered by the next poll; asking again beside it"
                    );
                    self.send_request(&mut requests);
                }
            }
        }
    }

    fn send_request(&self, requests: &mut JoinSet<Result<String, FetchError>>) {
        let client = self.client.clone();
        requests.spawn(async move { client.fetch_events_text().await });
    }

    /// Publishes a document; false when the loop should end (nobody listening). Never
    /// waits: a reader that is behind finds only the newest document.
    fn deliver(&mut self, document: Document) -> bool {
        if self.documents.send(Some(Arc::new(document))).is_err() {
            tracing::info!("nobody receives IMDS documents any more; stopping the poller");
            return false;
        }
        true
    }

    fn on_success(&mut self) {
        if let Some(streak) = self.streak.take() {
            let over = Duration::from_millis(forewarn_events::millis(streak.started.elapsed()));
            tracing::info!(
                failures = streak.failures,
                over = %humantime::format_duration(over),
                "IMDS recovered"
            );
        }
        self.status.last_success = Some(SystemTime::now());
        self.status.last_error = None;
        self.status.consecutive_failures = 0;
        self.status.clock = self.client.clock().skew();
        self.status_tx.send_replace(self.status.clone());
    }

    /// Logs and counts, once each, the events IMDS listed with a field forewarn cannot read,
    /// and the entries it cannot track at all (no `EventId`).
    fn note_unreadable(&mut self, document: &Document) {
        if self.unreadable_noted.len() >= UNREADABLE_REMEMBERED {
            self.unreadable_noted.clear();
        }
        for event in &document.events {
            for unreadable in &event.unreadable {
                let key = format!("{}\n{}\n{}", event.id, unreadable.field, unreadable.raw);
                if !self.unreadable_noted.insert(key) {
                    continue;
                }
                *self
                    .status
                    .unreadable_by_field
                    .entry(unreadable.field.as_wire())
                    .or_insert(0) += 1;
                tracing::warn!(
                    event_id = %event.id,
                    field = %unreadable.field,
                    value = %unreadable.raw,
                    read_as = unreadable.field.read_as(),
                    "IMDS listed an event with a field forewarn cannot read; it is read the safe way"
                );
            }
        }
        self.status.unreadable_entries = document
            .rejected
            .iter()
            .take(ENTRIES_SHOWN)
            .map(ToString::to_string)
            .collect();
        for error in &document.rejected {
            if !self.unreadable_noted.insert(error.to_string()) {
                continue;
            }
            *self
                .status
                .unreadable_by_field
                .entry("EventId")
                .or_insert(0) += 1;
            tracing::warn!(%error, "IMDS listed an entry without an EventId, which forewarn cannot track; the other events are handled");
        }
    }

    /// Records and logs a failure; returns how long to wait before the next attempt.
    fn on_failure(&mut self, error: &FetchError) -> Duration {
        let streak = self.streak.get_or_insert_with(FailureStreak::new);
        streak.failures += 1;
        if streak.first_of_its_kind(error) {
            log_failure(error, streak.failures);
        } else {
            tracing::debug!(%error, failures = streak.failures, "IMDS poll failed again");
        }
        let failures = streak.failures;
        self.status.last_error = Some(error.to_string());
        self.status.consecutive_failures = failures;
        *self.status.errors_by_kind.entry(error.kind()).or_insert(0) += 1;
        self.status.clock = self.client.clock().skew();
        self.status_tx.send_replace(self.status.clone());
        retry_delay(error, failures, &self.config, rand::random::<f64>())
    }
}

/// Whether `error` means IMDS never answered (rather than answering with an error).
fn got_no_answer(error: &FetchError) -> bool {
    matches!(
        error,
        FetchError::Timeout(_) | FetchError::Connect(_) | FetchError::Transport(_)
    )
}

fn log_failure(error: &FetchError, failures: u32) {
    match error {
        FetchError::Malformed(_, raw) => {
            tracing::warn!(%error, failures, raw = %raw, "IMDS poll failed; keeping the last good document")
        }
        _ => tracing::warn!(%error, failures, "IMDS poll failed; keeping the last good document"),
    }
}

/// A run of failures since the last success.
struct FailureStreak {
    started: Instant,
    failures: u32,
    /// Distinct failures already logged in this streak.
    logged: BTreeSet<String>,
}

impl FailureStreak {
    fn new() -> FailureStreak {
        FailureStreak {
            started: Instant::now(),
            failures: 0,
            logged: BTreeSet::new(),
        }
    }

    /// Whether `error` is the first of its kind (and status) in this streak.
    fn first_of_its_kind(&mut self, error: &FetchError) -> bool {
        self.logged.insert(failure_signature(error))
    }
}

/// What makes two failures "the same" for logging: the kind, and the status where there is
/// one (bodies, excerpts and messages vary from poll to poll).
fn failure_signature(error: &FetchError) -> String {
    match error {
        FetchError::Server(status) | FetchError::OtherStatus(status, _) => {
            format!("{} {status}", error.kind())
        }
        FetchError::Connect(_) => "connect".to_string(),
        other => other.kind().to_string(),
    }
}

/// How long to wait after the `failures`-th failure in a row. `jitter` is in [0, 1).
/// 410: `gone_retry`. 429: exponential, at least `throttle_min`. A malformed document: the
/// normal `interval` (IMDS answered; nothing suggests it is overloaded). Anything else:
/// exponential from `backoff_min`, doubling, jittered to 50–150 %, within
/// [`backoff_min`, `backoff_max`].
pub(crate) fn retry_delay(
    error: &FetchError,
    failures: u32,
    config: &PollerConfig,
    jitter: f64,
) -> Duration {
    let backoff = exponential_backoff(failures, config.backoff_min, config.backoff_max, jitter);
    match error {
        FetchError::Gone => config.gone_retry,
        FetchError::Malformed(..) => config.interval,
        FetchError::Throttled => backoff.max(config.throttle_min),
        _ => backoff,
    }
}

/// `min · 2^(failures-1)`, scaled by `0.5 + jitter`, kept within [`min`, `max`].
fn exponential_backoff(failures: u32, min: Duration, max: Duration, jitter: f64) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    let base = min.saturating_mul(1 << doublings).min(max);
    let jitter = if jitter.is_finite() {
        jitter.clamp(0.0, 1.0)
    } else {
        0.5
    };
    base.mul_f64(0.5 + jitter).clamp(min, max.max(min))
}

#[cfg(test)]
mod tests {
    use super::*;
    use forewarn_events::ParseError;

    fn config() -> PollerConfig {
        PollerConfig::new(Duration::from_secs(1))
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn backoff_doubles_from_one_second_to_the_cap() {
        let server = FetchError::Server(500);
        let delays: Vec<_> = (1..=7)
            .map(|failures| retry_delay(&server, failures, &config(), 0.5))
            .collect();
        assert_eq!(
            delays,
            [
                secs(1),
                secs(2),
                secs(4),
                secs(5),
                secs(5),
                secs(5),
                secs(5)
            ]
        );
        assert_eq!(retry_delay(&server, u32::MAX, &config(), 0.5), secs(5));
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let timeout = FetchError::Timeout(secs(10));
        for failures in 1..12 {
            for jitter in [0.0, 0.25, 0.999, f64::NAN, -3.0, 7.0] {
                let delay = retry_delay(&timeout, failures, &config(), jitter);
                assert!(delay >= secs(1) && delay <= secs(5), "{delay:?}");
            }
        }
        assert_eq!(retry_delay(&timeout, 3, &config(), 0.0), secs(2));
        assert_eq!(
            retry_delay(&timeout, 2, &config(), 0.999),
            secs(2).mul_f64(1.499)
        );
        assert_eq!(retry_delay(&timeout, 3, &config(), 0.999), BACKOFF_CAP);
    }

    #[test]
    fn gone_retries_soon_and_throttled_waits_at_least_a_second() {
        assert_eq!(retry_delay(&FetchError::Gone, 9, &config(), 0.9), secs(1));
        let fast = PollerConfig {
            backoff_min: Duration::from_millis(10),
            ..config()
        };
        assert_eq!(
            retry_delay(&FetchError::Throttled, 1, &fast, 0.0),
            secs(1),
            "429 waits at least throttle_min even when backoff is shorter"
        );
        assert_eq!(
            retry_delay(&FetchError::Throttled, 3, &config(), 0.5),
            secs(4)
        );
        assert_eq!(
            retry_delay(&FetchError::Throttled, 9, &config(), 0.5),
            BACKOFF_CAP,
            "even a throttling IMDS is asked again well within a Preempt's notice"
        );
    }

    #[test]
    fn a_malformed_answer_is_asked_again_at_the_normal_interval() {
        let malformed = FetchError::Malformed(
            ParseError::MissingField {
                field: "Events",
                excerpt: "{}".into(),
            },
            "{}".into(),
        );
        for failures in [1, 2, 10, 100] {
            assert_eq!(retry_delay(&malformed, failures, &config(), 0.9), secs(1));
        }
        let fast = PollerConfig::new(Duration::from_millis(250));
        assert_eq!(
            retry_delay(&malformed, 7, &fast, 0.9),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn a_streak_logs_each_distinct_failure_once() {
        let mut streak = FailureStreak::new();
        let malformed = |text: &str| {
            FetchError::Malformed(
                ParseError::MissingField {
                    field: "Events",
                    excerpt: text.into(),
                },
                text.into(),
            )
        };
        assert!(streak.first_of_its_kind(&FetchError::Server(500)));
        assert!(!streak.first_of_its_kind(&FetchError::Server(500)));
        assert!(streak.first_of_its_kind(&FetchError::Server(503)));
        assert!(streak.first_of_its_kind(&malformed("a")));
        assert!(!streak.first_of_its_kind(&malformed("b")));
        assert!(streak.first_of_its_kind(&FetchError::Timeout(secs(1))));
        assert!(!streak.first_of_its_kind(&FetchError::Timeout(secs(2))));
        assert!(streak.first_of_its_kind(&FetchError::Connect("refused".into())));
        assert!(streak.first_of_its_kind(&FetchError::Transport("reset".into())));
    }

    #[test]
    fn status_serialises_for_the_status_command() {
        let mut status = PollStatus::default();
        status.errors_by_kind.insert("gone", 2);
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["errors_by_kind"]["gone"], 2);
        assert_eq!(json["polls"], 0);
    }
}
