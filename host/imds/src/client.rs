//! `ImdsClient`: the HTTP client for IMDS — fetch the Scheduled Events document, approve
//! events, read this VM's compute metadata — every request through one shared rate limiter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use reqwest::{Method, RequestBuilder, StatusCode};

use crate::compute::{ComputeInfo, parse_compute};
use crate::identity_token::{
    IDENTITY_API_VERSION, IdentityToken, MalformedToken, TokenRefusal, parse_identity_refusal,
    parse_identity_token,
};
use crate::imds_clock::{ImdsClock, parse_date_header};
use crate::rate_limit::{Lane, RateLimiter};
use crate::wire::{self, excerpt, truncate};
use forewarn_events::ParseError;
use forewarn_events::{Document, EventId};

/// The largest IMDS answer read (a real Scheduled Events document is a few KiB); a longer
/// body is an error, not truncated, so a half document is never parsed.
pub const IMDS_BODY_MAX_BYTES: usize = 1024 * 1024;
/// How much of a malformed document a `FetchError::Malformed` keeps.
const RAW_KEEP_CHARS: usize = 2048;
/// The api-version of the instance metadata (compute) endpoint: 2021-11-15 or later names
/// the dedicated host (`host.id`).
const COMPUTE_API_VERSION: &str = "2021-12-13";
/// The rate limit's window: IMDS's second, counted from each answer's arrival (see
/// `rate_limit`), plus 50 ms for the two clocks' rates and IMDS's rounding.
const LIMIT_WINDOW: Duration = Duration::from_millis(1050);

/// Where and how politely to talk to IMDS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Scheme, host and port of IMDS, without a trailing path: "http://169.254.169.254".
    pub base_url: String,
    /// The Scheduled Events api-version to ask for: "2020-07-01".
    pub api_version: String,
    /// How long one request may take once IMDS has answered once: 10 s.
    pub request_timeout: Duration,
    /// How long a Scheduled Events GET may take until IMDS has answered once: 120 s, as the
    /// first call after the service is enabled may take up to two minutes.
    pub first_request_timeout: Duration,
    /// At most this many requests start in any sliding one-second window: 5 (0 means 1).
    pub max_requests_per_second: u32,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            base_url: "http://169.254.169.254".into(),
            api_version: "2020-07-01".into(),
            request_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(120),
            max_requests_per_second: 5,
        }
    }
}

/// A successfully parsed Scheduled Events document and the text it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The parsed document.
    pub document: Document,
    /// The response body as received.
    pub raw: String,
}

/// Why one GET from IMDS did not produce a document (or a VM name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// 410 Gone: IMDS is not ready yet; it answers within about 70 s. Retry soon.
    #[error("IMDS answered 410 Gone (not ready yet); retrying shortly")]
    Gone,
    /// 429 Too Many Requests: slow down.
    #[error("IMDS answered 429 Too Many Requests; slowing down")]
    Throttled,
    /// A 5xx status (the code): IMDS is failing or overloaded.
    #[error("IMDS answered {0} (a server error); retrying with backoff")]
    Server(u16),
    /// Any other non-200 status, with the start of the body.
    #[error("IMDS answered {0} with body \"{1}\"; check the base URL and api-version")]
    OtherStatus(u16, String),
    /// No connection could be made.
    #[error("cannot connect to IMDS ({0}); is this an Azure VM, and is 169.254.169.254 reachable?")]
    Connect(String),
    /// No complete answer within the timeout.
    #[error("IMDS did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection broke or the body could not be read.
    #[error("talking to IMDS failed: {0}")]
    Transport(String),
    /// A 3xx: never followed (it would carry the `Metadata` header and approvals elsewhere).
    #[error(
        "IMDS answered {0} redirecting to \"{1}\"; forewarn never follows redirects from IMDS: set `imds.url` to IMDS itself (http://169.254.169.254)"
    )]
    Redirected(u16, String),
    /// The body was longer than `IMDS_BODY_MAX_BYTES`.
    #[error(
        "IMDS sent an answer larger than {0} bytes, the most forewarn reads; check that `imds.url` points at IMDS"
    )]
    TooLarge(usize),
    /// 200 with a body forewarn cannot read; the raw body is kept, cut to ~2 KiB.
    #[error("IMDS sent a document forewarn cannot read: {0}")]
    Malformed(ParseError, String),
}

impl FetchError {
    /// A short stable name for counting and logging: "gone", "throttled", "server",
    /// "status", "transport" (connect errors included), "timeout", "malformed".
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Gone => "gone",
            FetchError::Throttled => "throttled",
            FetchError::Server(_) => "server",
            FetchError::OtherStatus(..) | FetchError::Redirected(..) => "status",
            FetchError::Connect(_) | FetchError::Transport(_) | FetchError::TooLarge(_) => {
                "transport"
            }
            FetchError::Timeout(_) => "timeout",
            FetchError::Malformed(..) => "malformed",
        }
    }
}

/// Why the identity endpoint gave no token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// IMDS answered with an OAuth error.
    #[error(transparent)]
    Refused(#[from] TokenRefusal),
    /// The request got no answer, or not an OAuth one.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A 200 without a usable token.
    #[error(transparent)]
    Malformed(#[from] MalformedToken),
}

/// Why an approval POST did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApproveError {
    /// IMDS answered something other than 200 (400: the body or header was malformed).
    #[error("IMDS refused the approval with {0}: \"{1}\"")]
    Status(u16, String),
    /// A 3xx, not followed: the approval went nowhere.
    #[error(
        "IMDS answered the approval with {0} redirecting to \"{1}\"; forewarn never follows redirects from IMDS: set `imds.url` to IMDS itself (http://169.254.169.254)"
    )]
    Redirected(u16, String),
    /// No connection could be made.
    #[error("cannot connect to IMDS to approve ({0})")]
    Connect(String),
    /// No answer within the timeout; the approval may or may not have arrived.
    #[error("IMDS did not answer the approval within {0:?}; it may or may not have arrived")]
    Timeout(Duration),
    /// The connection broke.
    #[error("sending the approval to IMDS failed: {0}")]
    Transport(String),
}

impl ApproveError {
    /// Whether IMDS refused the request itself (a 4xx, e.g. 400 naming an event it no
    /// longer lists): the same request would be refused again.
    pub fn is_rejection(&self) -> bool {
        matches!(self, ApproveError::Status(400..=499, _))
    }
}

/// The HTTP client could not be built (the system's TLS or resolver setup is broken).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the IMDS HTTP client: {0}")]
pub struct BuildError(pub String);

/// The IMDS client. Cheap to clone; clones share the connection pool and the rate limit.
#[derive(Debug, Clone)]
pub struct ImdsClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    config: ClientConfig,
    limiter: RateLimiter,
    /// Whether IMDS has answered a Scheduled Events GET (any status) at least once.
    answered_once: AtomicBool,
    /// IMDS's clock, from the `Date` header of every answer.
    clock: ImdsClock,
}

/// A transport failure, before it is sorted into `FetchError` or `ApproveError`.
enum Transport {
    Connect(String),
    Timeout(Duration),
    TooLarge(usize),
    Other(String),
}

/// One answer from IMDS: status, `Location` (for a 3xx), `Date` and the body.
struct Answer {
    status: StatusCode,
    location: String,
    /// The `Date` header, and when the answer's head arrived.
    date: Option<(SystemTime, Instant)>,
    body: String,
}

impl From<Transport> for FetchError {
    fn from(failure: Transport) -> FetchError {
        match failure {
            Transport::Connect(reason) => FetchError::Connect(reason),
            Transport::Timeout(limit) => FetchError::Timeout(limit),
            Transport::TooLarge(limit) => FetchError::TooLarge(limit),
            Transport::Other(reason) => FetchError::Transport(reason),
        }
    }
}

impl From<Transport> for ApproveError {
    fn from(failure: Transport) -> ApproveError {
        match failure {
            Transport::Connect(reason) => ApproveError::Connect(reason),
            Transport::Timeout(limit) => ApproveError::Timeout(limit),
            Transport::TooLarge(limit) => ApproveError::Transport(format!(
                "the answer was larger than {limit} bytes, the most forewarn reads; check that `imds.url` points at IMDS"
            )),
            Transport::Other(reason) => ApproveError::Transport(reason),
        }
    }
}

impl ImdsClient {
    /// Builds a client. Never uses a proxy (HTTP_PROXY and friends are ignored: IMDS must be
    /// reached directly), never follows a redirect, and sends no `X-Forwarded-For`.
    pub fn new(config: ClientConfig) -> Result<ImdsClient, BuildError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.request_timeout)
            .build()
            .map_err(|error| BuildError(error_chain(&error)))?;
        let limiter = RateLimiter::new(config.max_requests_per_second, LIMIT_WINDOW);
        Ok(ImdsClient {
            inner: Arc::new(Inner {
                http,
                config,
                limiter,
                answered_once: AtomicBool::new(false),
                clock: ImdsClock::new(),
            }),
        })
    }

    /// The Scheduled Events URL: `{base}/metadata/scheduledevents?api-version=V`.
    fn scheduled_events_url(&self) -> String {
        let config = &self.inner.config;
        format!(
            "{}/metadata/scheduledevents?api-version={}",
            config.base_url.trim_end_matches('/'),
            config.api_version
        )
    }

    /// The compute metadata URL: `{base}/metadata/instance/compute?api-version=2021-12-13`.
    fn compute_url(&self) -> String {
        format!(
            "{}/metadata/instance/compute?api-version={COMPUTE_API_VERSION}",
            self.inner.config.base_url.trim_end_matches('/')
        )
    }

    /// GETs the Scheduled Events document once (no retries) and parses it leniently (see
    /// [`parse_document`](crate::parse_document)). First waits for a slot in the shared rate
    /// limit; then the request may take `request_timeout`, or `first_request_timeout` until
    /// IMDS has answered once. Every failure, including a document that cannot be read, is a
    /// [`FetchError`]; the caller decides whether and when to ask again.
    pub async fn fetch_events(&self) -> Result<Fetched, FetchError> {
        parse_fetched(self.fetch_events_text().await?)
    }

    /// GETs the Scheduled Events document once, as [`ImdsClient::fetch_events`], without
    /// parsing it: the poller parses only a document that differs from the last one.
    pub(crate) async fn fetch_events_text(&self) -> Result<String, FetchError> {
        let timeout = if self.inner.answered_once.load(Ordering::Relaxed) {
            self.inner.config.request_timeout
        } else {
            self.inner.config.first_request_timeout
        };
        let request = self.request(Method::GET, self.scheduled_events_url());
        let answer = self.send(request, Lane::Routine, timeout).await?;
        self.inner.answered_once.store(true, Ordering::Relaxed);
        check_fetch_answer(&answer)?;
        Ok(answer.body)
    }

    /// POSTs `{"StartRequests":[…]}` for `event_ids`, telling IMDS the maintenance may start
    /// now. 200 is success, also when another VM approved first. An empty list sends nothing
    /// and succeeds at once; otherwise this waits for the rate limit, then at most
    /// `request_timeout`. After [`ApproveError::Timeout`] the approval may have arrived.
    pub async fn approve(&self, event_ids: &[EventId]) -> Result<(), ApproveError> {
        if event_ids.is_empty() {
            return Ok(());
        }
        let request = self
            .request(Method::POST, self.scheduled_events_url())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(wire::render_start_requests(event_ids));
        let answer = self
            .send(request, Lane::Approval, self.inner.config.request_timeout)
            .await?;
        if answer.status.is_redirection() {
            return Err(ApproveError::Redirected(
                answer.status.as_u16(),
                answer.location,
            ));
        }
        if answer.status != StatusCode::OK {
            return Err(ApproveError::Status(
                answer.status.as_u16(),
                excerpt(&answer.body),
            ));
        }
        Ok(())
    }

    /// Reads this VM's name (`name` of the compute metadata): the name IMDS puts in
    /// `Resources`, e.g. "myvmss_2" for a scale-set instance. Waits for the rate limit, then
    /// at most `request_timeout`; a missing or empty name is [`FetchError::Malformed`].
    pub async fn fetch_vm_name(&self) -> Result<String, FetchError> {
        Ok(self.fetch_compute().await?.name)
    }

    /// Reads this VM's compute metadata: its name, priority and eviction policy (see
    /// [`parse_compute`](crate::parse_compute)). Waits for the rate limit, then at most
    /// `request_timeout`; a missing or empty name is [`FetchError::Malformed`].
    pub async fn fetch_compute(&self) -> Result<ComputeInfo, FetchError> {
        let request = self.request(Method::GET, self.compute_url());
        let answer = self
            .send(request, Lane::Routine, self.inner.config.request_timeout)
            .await?;
        check_fetch_answer(&answer)?;
        let body = answer.body;
        parse_compute(&body)
            .map_err(|error| FetchError::Malformed(error, truncate(&body, RAW_KEEP_CHARS)))
    }

    /// Asks the identity endpoint for an access token for `resource`, of the user-assigned
    /// identity `client_id` when given (else the system-assigned one). Waits for the rate
    /// limit, then at most `request_timeout`.
    pub async fn fetch_identity_token(
        &self,
        resource: &str,
        client_id: Option<&str>,
    ) -> Result<IdentityToken, IdentityError> {
        let url = self.identity_url(resource, client_id)?;
        let request = self.request(Method::GET, url);
        let answer = self
            .send(request, Lane::Routine, self.inner.config.request_timeout)
            .await
            .map_err(FetchError::from)?;
        if answer.status != StatusCode::OK
            && let Some(refused) = parse_identity_refusal(answer.status.as_u16(), &answer.body)
        {
            return Err(refused.into());
        }
        check_fetch_answer(&answer)?;
        Ok(parse_identity_token(&answer.body, SystemTime::now())?)
    }

    /// `{base}/metadata/identity/oauth2/token?api-version=…&resource=…[&client_id=…]`; a
    /// base URL that cannot take the path is a [`FetchError::OtherStatus`] of status 0.
    fn identity_url(&self, resource: &str, client_id: Option<&str>) -> Result<String, FetchError> {
        let base = format!(
            "{}/metadata/identity/oauth2/token",
            self.inner.config.base_url.trim_end_matches('/')
        );
        let mut query = vec![
            ("api-version", IDENTITY_API_VERSION),
            ("resource", resource),
        ];
        if let Some(client_id) = client_id {
            query.push(("client_id", client_id));
        }
        reqwest::Url::parse_with_params(&base, &query)
            .map(String::from)
            .map_err(|error| {
                FetchError::OtherStatus(0, format!("cannot build the identity URL: {error}"))
            })
    }

    /// A request with the `Metadata: true` header every IMDS call needs.
    fn request(&self, method: Method, url: String) -> RequestBuilder {
        self.inner
            .http
            .request(method, url)
            .header("Metadata", "true")
    }

    /// IMDS's clock as this client's answers show it (shared by every clone).
    pub fn clock(&self) -> ImdsClock {
        self.inner.clock.clone()
    }

    /// Waits for the rate limit's `lane`, sends, and reads the body (at most
    /// `IMDS_BODY_MAX_BYTES`) within `timeout`, holding the permit until the answer is in
    /// (it counts a window after that). An answer's `Date` header goes to the clock.
    async fn send(
        &self,
        request: RequestBuilder,
        lane: Lane,
        timeout: Duration,
    ) -> Result<Answer, Transport> {
        let permit = self.inner.limiter.acquire(lane).await;
        let sent = Instant::now();
        let answer = match tokio::time::timeout(timeout, exchange(request, timeout)).await {
            Err(_) => Err(Transport::Timeout(timeout)),
            Ok(result) => result,
        };
        drop(permit);
        let answer = answer?;
        if let Some((date, received)) = answer.date {
            self.inner.clock.observe(sent, received, date);
        }
        Ok(answer)
    }
}

/// Sends `request` and reads the answer, the body in chunks up to `IMDS_BODY_MAX_BYTES`.
async fn exchange(request: RequestBuilder, timeout: Duration) -> Result<Answer, Transport> {
    let failed = |error| transport_error(error, timeout);
    let mut response = request.send().await.map_err(failed)?;
    let received = Instant::now();
    let status = response.status();
    let date = response
        .headers()
        .get(reqwest::header::DATE)
        .and_then(|value| value.to_str().ok())
        .and_then(parse_date_header)
        .map(|date| (date, received));
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .unwrap_or_default();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > IMDS_BODY_MAX_BYTES {
            return Err(Transport::TooLarge(IMDS_BODY_MAX_BYTES));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status,
        location,
        date,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Parses a Scheduled Events body leniently; a body that cannot be read is
/// [`FetchError::Malformed`], with the raw text kept (cut to ~2 KiB).
pub(crate) fn parse_fetched(body: String) -> Result<Fetched, FetchError> {
    match wire::parse_document(&body) {
        Ok(document) => Ok(Fetched {
            document,
            raw: body,
        }),
        Err(error) => Err(FetchError::Malformed(
            error,
            truncate(&body, RAW_KEEP_CHARS),
        )),
    }
}

/// Sorts a reqwest error into connect, timeout or other.
fn transport_error(error: reqwest::Error, timeout: Duration) -> Transport {
    if error.is_timeout() {
        return Transport::Timeout(timeout);
    }
    if error.is_connect() {
        return Transport::Connect(error_chain(&error));
    }
    Transport::Other(error_chain(&error))
}

/// Sorts an answer to a GET: a redirect, or its status.
fn check_fetch_answer(answer: &Answer) -> Result<(), FetchError> {
    if answer.status.is_redirection() {
        return Err(FetchError::Redirected(
            answer.status.as_u16(),
            answer.location.clone(),
        ));
    }
    check_fetch_status(answer.status, &answer.body)
}

/// Sorts a non-200 status of a GET into its `FetchError`.
fn check_fetch_status(status: StatusCode, body: &str) -> Result<(), FetchError> {
    match status.as_u16() {
        200 => Ok(()),
        410 => Err(FetchError::Gone),
        429 => Err(FetchError::Throttled),
        code @ 500..=599 => Err(FetchError::Server(code)),
        code => Err(FetchError::OtherStatus(code, excerpt(body))),
    }
}

/// An error and its sources, "outer: inner: innermost", as reqwest hides the useful part.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let causes: Vec<String> = anyhow::Chain::new(error).map(ToString::to_string).collect();
    causes.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_matches_the_docs() {
        let config = ClientConfig::default();
        assert_eq!(config.base_url, "http://169.254.169.254");
        assert_eq!(config.api_version, "2020-07-01");
        assert_eq!(config.request_timeout, Duration::from_secs(10));
        assert_eq!(config.first_request_timeout, Duration::from_secs(120));
        assert_eq!(config.max_requests_per_second, 5);
    }

    #[test]
    fn only_a_4xx_is_a_rejection() {
        let rows = [
            (ApproveError::Status(400, "unknown id".into()), true),
            (ApproveError::Status(404, String::new()), true),
            (ApproveError::Status(500, String::new()), false),
            (ApproveError::Status(302, String::new()), false),
            (ApproveError::Connect("refused".into()), false),
            (ApproveError::Timeout(Duration::from_secs(1)), false),
        ];
        for (error, rejected) in rows {
            assert_eq!(error.is_rejection(), rejected, "{error:?}");
        }
    }

    #[test]
    fn urls_follow_the_docs() {
        let client = ImdsClient::new(ClientConfig {
            base_url: "http://169.254.169.254/".into(),
            ..ClientConfig::default()
        })
        .unwrap();
        assert_eq!(
            client.scheduled_events_url(),
            "http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01"
        );
        assert_eq!(
            client.compute_url(),
            "http://169.254.169.254/metadata/instance/compute?api-version=2021-12-13"
        );
        assert_eq!(
            client
                .identity_url("https://storage.azure.com/", None)
                .unwrap(),
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01\
             &resource=https%3A%2F%2Fstorage.azure.com%2F"
        );
        assert_eq!(
            client
                .identity_url("https://vault.azure.net", Some("1b0e-a&b"))
                .unwrap(),
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01\
             &resource=https%3A%2F%2Fvault.azure.net&client_id=1b0e-a%26b"
        );
    }

    #[test]
    fn statuses_sort_into_kinds() {
        let kind = |code| {
            check_fetch_status(StatusCode::from_u16(code).unwrap(), "body")
                .err()
                .map(|error| error.kind())
        };
        assert_eq!(kind(200), None);
        assert_eq!(kind(410), Some("gone"));
        assert_eq!(kind(429), Some("throttled"));
        assert_eq!(kind(503), Some("server"));
        assert_eq!(kind(400), Some("status"));
    }

    #[test]
    fn client_is_send_sync_and_clone() {
        fn assert_traits<T: Send + Sync + Clone + 'static>() {}
        assert_traits::<ImdsClient>();
    }
}
