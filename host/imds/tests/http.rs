//! The client and the poller against a small scripted IMDS stand-in (axum on 127.0.0.1:0):
//! headers, URLs, bodies, every failure kind, recovery, and the rate limit at the server.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use forewarn_imds::{
    ApproveError, ClientConfig, Document, Documents, EventId, FetchError, IMDS_BODY_MAX_BYTES,
    ImdsClient, Poller, PollerConfig, parse_document,
};
use tokio_util::sync::CancellationToken;

const DOC_ONE: &str = include_str!("../testdata/seed-2020-07-01-incarnation-2.json");
const DOC_TWO: &str = include_str!("../testdata/seed-2020-07-01-incarnation-3.json");
const GIVE_UP: Duration = Duration::from_secs(20);

/// One scripted answer to a Scheduled Events GET.
#[derive(Clone, Debug)]
enum Reply {
    Ok(&'static str),
    Status(u16, &'static str),
    Slow(Duration, &'static str),
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    metadata: Option<String>,
    forwarded_for: bool,
    content_type: Option<String>,
    body: String,
    at: Instant,
}

/// The stand-in's state: the script for GETs, the answer once it runs out, what it saw.
struct Fake {
    script: Mutex<VecDeque<Reply>>,
    fallback: Reply,
    post_status: u16,
    seen: Mutex<Vec<Seen>>,
}

impl Fake {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn handle(
    State(fake): State<Arc<Fake>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .map(|value| value.to_str().unwrap().to_string())
    };
    fake.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        metadata: header("metadata"),
        forwarded_for: headers.contains_key("x-forwarded-for"),
        content_type: header("content-type"),
        body: body.clone(),
        at: Instant::now(),
    });
    if uri.path() == "/metadata/instance/compute" {
        return reply(
            200,
            r#"{"location":"westeurope","name":"myvmss_2","osType":"Linux"}"#,
        );
    }
    if method == Method::POST {
        return reply(fake.post_status, "");
    }
    let next = fake.script.lock().unwrap().pop_front();
    match next.unwrap_or_else(|| fake.fallback.clone()) {
        Reply::Ok(text) => reply(200, text),
        Reply::Status(status, text) => reply(status, text),
        Reply::Slow(delay, text) => {
            tokio::time::sleep(delay).await;
            reply(200, text)
        }
    }
}

fn reply(status: u16, body: &'static str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .body(Body::from(body))
        .unwrap()
}

/// Starts a stand-in answering GETs with `script`, then `fallback` forever.
async fn start_fake(script: Vec<Reply>, fallback: Reply, post_status: u16) -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake {
        script: Mutex::new(script.into()),
        fallback,
        post_status,
        seen: Mutex::new(Vec::new()),
    });
    let app = Router::new().fallback(handle).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, base_url)
}

/// A client for tests: no rate limit to speak of, and timeouts as long as the test waits
/// (an answer that takes long on a loaded machine is not a time-out; a test of time-outs
/// uses [`short_timeout_client`] against a request that hangs).
fn fast_client(base_url: &str) -> ImdsClient {
    patient_client(base_url)
}

/// A client whose every request times out after `timeout` (the first one too).
fn short_timeout_client(base_url: &str, timeout: Duration) -> ImdsClient {
    ImdsClient::new(ClientConfig {
        base_url: base_url.to_string(),
        request_timeout: timeout,
        first_request_timeout: timeout,
        max_requests_per_second: 1000,
        ..ClientConfig::default()
    })
    .unwrap()
}

/// An answer that comes after the test has given up: a request waiting for it can only
/// time out.
fn hang() -> Reply {
    Reply::Slow(GIVE_UP * 2, DOC_ONE)
}

fn fast_poller() -> PollerConfig {
    PollerConfig {
        interval: Duration::from_millis(20),
        gone_retry: Duration::from_millis(10),
        throttle_min: Duration::from_millis(10),
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
    }
}

/// The next document the poller hands over (None when it stopped).
async fn next_document(documents: &mut Documents) -> Option<Document> {
    documents.changed().await.ok()?;
    let newest = documents.borrow_and_update().clone();
    newest.map(|document| Document::clone(&document))
}

#[tokio::test]
async fn get_sends_metadata_header_and_api_version() {
    let (fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let fetched = fast_client(&base_url).fetch_events().await.unwrap();
    assert_eq!(fetched.document, parse_document(DOC_ONE).unwrap());
    assert_eq!(fetched.raw, DOC_ONE);
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::GET);
    assert_eq!(seen[0].path, "/metadata/scheduledevents");
    assert_eq!(seen[0].query, "api-version=2020-07-01");
    assert_eq!(seen[0].metadata.as_deref(), Some("true"));
    assert!(!seen[0].forwarded_for);
}

#[tokio::test]
async fn approve_posts_the_exact_body() {
    let (fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let ids = vec![
        EventId::from("C7061BAC-AFDC-4513-B24B-AA5F13A16123"),
        "b".into(),
    ];
    fast_client(&base_url).approve(&ids).await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    let post = &seen[0];
    assert_eq!(post.method, Method::POST);
    assert_eq!(post.path, "/metadata/scheduledevents");
    assert_eq!(post.query, "api-version=2020-07-01");
    assert_eq!(post.metadata.as_deref(), Some("true"));
    assert_eq!(post.content_type.as_deref(), Some("application/json"));
    assert!(!post.forwarded_for);
    assert_eq!(
        post.body,
        r#"{"StartRequests":[{"EventId":"C7061BAC-AFDC-4513-B24B-AA5F13A16123"},{"EventId":"b"}]}"#
    );
}

#[tokio::test]
async fn approve_reports_a_refusal_and_sends_nothing_for_no_ids() {
    let (fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 400).await;
    let client = fast_client(&base_url);
    let error = client.approve(&["a".into()]).await.unwrap_err();
    assert!(matches!(error, ApproveError::Status(400, _)), "{error}");
    assert!(
        error.is_rejection(),
        "a 400 is IMDS refusing the request itself"
    );
    client.approve(&[]).await.unwrap();
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn vm_name_is_read_from_compute_metadata() {
    let (fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let name = fast_client(&base_url).fetch_vm_name().await.unwrap();
    assert_eq!(name, "myvmss_2");
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/metadata/instance/compute");
    assert_eq!(seen[0].query, "api-version=2021-12-13");
    assert_eq!(seen[0].metadata.as_deref(), Some("true"));
}

#[tokio::test]
async fn every_failure_kind_is_told_apart() {
    let script = vec![
        Reply::Status(410, ""),
        Reply::Status(429, ""),
        Reply::Status(500, "oops"),
        Reply::Status(400, "Bad request. Required metadata header not specified"),
        Reply::Ok(r#"{"error": "not a document"}"#),
        hang(),
    ];
    let (_fake, base_url) = start_fake(script, Reply::Ok(DOC_ONE), 200).await;
    let client = fast_client(&base_url);
    let mut kinds = Vec::new();
    for _ in 0..5 {
        kinds.push(client.fetch_events().await.unwrap_err());
    }
    // The sixth request hangs: a client with a short time-out gives up on it.
    let impatient = short_timeout_client(&base_url, Duration::from_millis(300));
    kinds.push(impatient.fetch_events().await.unwrap_err());
    assert_eq!(kinds[0], FetchError::Gone);
    assert_eq!(kinds[1], FetchError::Throttled);
    assert_eq!(kinds[2], FetchError::Server(500));
    assert!(
        matches!(&kinds[3], FetchError::OtherStatus(400, body) if body.contains("metadata header")),
        "{}",
        kinds[3]
    );
    assert!(
        matches!(&kinds[4], FetchError::Malformed(_, raw) if raw.contains("not a document")),
        "{}",
        kinds[4]
    );
    assert_eq!(kinds[5], FetchError::Timeout(Duration::from_millis(300)));
    assert!(client.fetch_events().await.is_ok(), "recovers afterwards");
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let error = fast_client(&base_url).fetch_events().await.unwrap_err();
    assert!(matches!(error, FetchError::Connect(_)), "{error:?}");
    assert_eq!(error.kind(), "transport");
}

#[tokio::test]
async fn only_the_first_fetch_gets_the_long_timeout() {
    // Which time-out a request had is read from its error (it names the limit that
    // fired), not from how long it took: both hanging requests can only time out.
    let first = Duration::from_secs(2);
    let later = Duration::from_millis(150);
    let script = vec![hang(), Reply::Ok(DOC_ONE), hang()];
    let (_fake, base_url) = start_fake(script, Reply::Ok(DOC_ONE), 200).await;
    let client = ImdsClient::new(ClientConfig {
        base_url,
        request_timeout: later,
        first_request_timeout: first,
        max_requests_per_second: 1000,
        ..ClientConfig::default()
    })
    .unwrap();
    assert_eq!(
        client.fetch_events().await.unwrap_err(),
        FetchError::Timeout(first),
        "the first request waits the first request's time-out"
    );
    assert!(
        client.fetch_events().await.is_ok(),
        "IMDS answers (within the long time-out: it has not answered before)"
    );
    assert_eq!(
        client.fetch_events().await.unwrap_err(),
        FetchError::Timeout(later),
        "once IMDS has answered, a request gets the normal time-out"
    );
}

#[tokio::test]
async fn the_rate_limit_holds_across_get_and_post_at_the_server() {
    let (fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let client = ImdsClient::new(ClientConfig {
        base_url,
        ..ClientConfig::default()
    })
    .unwrap();
    // Open five pooled connections first, so that connection set-up of the measured
    // requests cannot delay some of them at the server more than others.
    let mut warm_up = tokio::task::JoinSet::new();
    for _ in 0..5 {
        let client = client.clone();
        warm_up.spawn(async move { client.fetch_events().await.is_ok() });
    }
    while let Some(succeeded) = warm_up.join_next().await {
        assert!(succeeded.unwrap());
    }
    fake.seen.lock().unwrap().clear();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..13 {
        let client = client.clone();
        tasks.spawn(async move {
            match i % 3 {
                0 => client.approve(&[format!("event-{i}").into()]).await.is_ok(),
                1 => client.fetch_vm_name().await.is_ok(),
                _ => client.fetch_events().await.is_ok(),
            }
        });
    }
    while let Some(succeeded) = tasks.join_next().await {
        assert!(succeeded.unwrap());
    }
    let mut arrivals: Vec<Instant> = fake.seen().iter().map(|seen| seen.at).collect();
    assert_eq!(arrivals.len(), 13);
    assert!(fake.seen().iter().any(|seen| seen.method == Method::POST));
    arrivals.sort();
    for six in arrivals.windows(6) {
        let span = six[5] - six[0];
        assert!(
            span >= Duration::from_secs(1),
            "6 requests arrived within {span:?}"
        );
    }
}

#[tokio::test]
async fn the_poller_recovers_from_every_failure_and_drops_malformed_documents() {
    let script = vec![
        Reply::Ok(DOC_ONE),
        Reply::Status(410, ""),
        Reply::Status(429, ""),
        Reply::Status(503, ""),
        Reply::Ok(r#"{"Events": null}"#),
        Reply::Ok("<html>gateway</html>"),
        hang(),
        Reply::Status(404, "no such api-version"),
    ];
    let (_fake, base_url) = start_fake(script, Reply::Ok(DOC_TWO), 200).await;
    let shutdown = CancellationToken::new();
    // Polls further apart than the client's time-out: the hanging request times out alone,
    // with no request beside it (that is the next test's subject). The time-out (1 s) is
    // far above what an answer takes, and the next poll (2 s) a second after it, so that
    // a loaded machine neither times out another request nor sends one beside it.
    let config = PollerConfig {
        interval: Duration::from_secs(2),
        ..fast_poller()
    };
    let client = short_timeout_client(&base_url, Duration::from_secs(1));
    let (task, mut documents, mut status) = Poller::spawn_with(client, config, shutdown.clone());

    let first = tokio::time::timeout(GIVE_UP, next_document(&mut documents))
        .await
        .unwrap();
    assert_eq!(first, Some(parse_document(DOC_ONE).unwrap()));
    let second = tokio::time::timeout(GIVE_UP, next_document(&mut documents))
        .await
        .unwrap();
    assert_eq!(
        second,
        Some(parse_document(DOC_TWO).unwrap()),
        "nothing may come of the malformed documents"
    );

    let settled = tokio::time::timeout(
        GIVE_UP,
        status.wait_for(|status| status.last_success.is_some() && status.polls >= 9),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert_eq!(settled.consecutive_failures, 0);
    assert_eq!(settled.last_error, None);
    assert_eq!(settled.requests_beside_unanswered, 0);
    let expected: Vec<(&str, u64)> = vec![
        ("gone", 1),
        ("malformed", 2),
        ("server", 1),
        ("status", 1),
        ("throttled", 1),
        ("timeout", 1),
    ];
    assert_eq!(
        settled.errors_by_kind.into_iter().collect::<Vec<_>>(),
        expected
    );

    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

/// A client whose requests may wait as long as the test does.
fn patient_client(base_url: &str) -> ImdsClient {
    ImdsClient::new(ClientConfig {
        base_url: base_url.to_string(),
        request_timeout: GIVE_UP,
        first_request_timeout: GIVE_UP,
        max_requests_per_second: 1000,
        ..ClientConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn a_request_that_hangs_does_not_hold_up_the_next_poll() {
    // The first GET hangs (longer than the test waits); the poll due after it is sent
    // beside it and its document is delivered.
    let script = vec![Reply::Slow(GIVE_UP * 2, DOC_ONE)];
    let (fake, base_url) = start_fake(script, Reply::Ok(DOC_TWO), 200).await;
    let shutdown = CancellationToken::new();
    let (task, mut documents, status) =
        Poller::spawn_with(patient_client(&base_url), fast_poller(), shutdown.clone());
    let first = tokio::time::timeout(GIVE_UP, next_document(&mut documents))
        .await
        .expect("a document while the first request still hangs");
    assert_eq!(first, Some(parse_document(DOC_TWO).unwrap()));
    assert!(status.borrow().requests_beside_unanswered >= 1);
    assert_eq!(status.borrow().consecutive_failures, 0);
    let gets = fake
        .seen()
        .iter()
        .filter(|seen| seen.method == Method::GET)
        .count();
    assert!(gets >= 2, "{gets} GETs");
    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn an_error_answer_beside_a_hanging_request_ends_the_poll_and_backs_off() {
    // IMDS answered 503 beside the request that hangs: that answer ends the poll (the
    // backoff heeds it) without waiting for the hanging one.
    let script = vec![Reply::Slow(GIVE_UP * 2, DOC_ONE)];
    let (fake, base_url) = start_fake(script, Reply::Status(503, "busy"), 200).await;
    let shutdown = CancellationToken::new();
    let (task, _documents, mut status) =
        Poller::spawn_with(patient_client(&base_url), fast_poller(), shutdown.clone());
    let failing = tokio::time::timeout(
        GIVE_UP,
        status.wait_for(|status| status.consecutive_failures >= 2),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert_eq!(
        failing.errors_by_kind.get("server").copied(),
        Some(u64::from(failing.consecutive_failures))
    );
    assert_eq!(failing.errors_by_kind.get("timeout"), None);
    assert!(failing.requests_beside_unanswered >= 1);
    assert_eq!(fake.seen()[0].method, Method::GET);
    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn an_event_with_an_unreadable_not_before_is_kept_and_counted() {
    let mixed = r#"{"DocumentIncarnation": 4, "Events": [
        {"EventId": "odd", "EventType": "Reboot", "NotBefore": "whenever"},
        {"EventId": "evict", "EventType": "Preempt", "EventStatus": "Scheduled", "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT"}
    ]}"#;
    let (_fake, base_url) = start_fake(vec![Reply::Ok(mixed)], Reply::Ok(mixed), 200).await;
    let shutdown = CancellationToken::new();
    let (task, mut documents, status) =
        Poller::spawn_with(fast_client(&base_url), fast_poller(), shutdown.clone());
    let document = tokio::time::timeout(GIVE_UP, next_document(&mut documents))
        .await
        .unwrap()
        .expect("a document");
    let ids: Vec<&str> = document
        .events
        .iter()
        .map(|event| event.id.as_str())
        .collect();
    assert_eq!(ids, ["odd", "evict"]);
    assert!(document.rejected.is_empty());
    assert_eq!(
        document.events[0].unreadable(forewarn_imds::EventField::NotBefore),
        Some("whenever")
    );
    let counted = tokio::time::timeout(
        GIVE_UP,
        status
            .clone()
            .wait_for(|status| !status.unreadable_by_field.is_empty()),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert_eq!(counted.unreadable_by_field.get("NotBefore"), Some(&1));
    assert_eq!(status.borrow().consecutive_failures, 0, "not a failed poll");
    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_poller_reports_a_failure_streak_while_it_lasts() {
    let (_fake, base_url) = start_fake(vec![], Reply::Status(500, "down"), 200).await;
    let shutdown = CancellationToken::new();
    let (task, _documents, mut status) =
        Poller::spawn_with(fast_client(&base_url), fast_poller(), shutdown.clone());
    let failing = tokio::time::timeout(
        GIVE_UP,
        status.wait_for(|status| status.consecutive_failures >= 3),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert!(failing.last_success.is_none());
    assert!(failing.last_error.unwrap().contains("500"));
    assert_eq!(
        failing.errors_by_kind.get("server").copied(),
        Some(failing.polls)
    );
    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_poller_stops_when_nobody_listens() {
    let (_fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let (task, documents, _status) = Poller::spawn_with(
        fast_client(&base_url),
        fast_poller(),
        CancellationToken::new(),
    );
    drop(documents);
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_repeated_document_is_handed_over_once() {
    let (_fake, base_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let shutdown = CancellationToken::new();
    let (task, mut documents, mut status) =
        Poller::spawn_with(fast_client(&base_url), fast_poller(), shutdown.clone());
    let expected: Document = parse_document(DOC_ONE).unwrap();
    let first = tokio::time::timeout(GIVE_UP, next_document(&mut documents))
        .await
        .unwrap();
    assert_eq!(first.as_ref(), Some(&expected));
    tokio::time::timeout(
        GIVE_UP,
        status.wait_for(|status| status.unchanged_documents >= 3),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        !documents.has_changed().unwrap(),
        "the same bytes are not handed over again"
    );
    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_reader_that_never_reads_does_not_stop_the_polls() {
    // Every answer differs (a new incarnation); the reader never takes one. The poller must
    // keep polling, and the watch hold the newest.
    let script: Vec<Reply> = (0..60)
        .map(|incarnation| {
            let text = format!(r#"{{"DocumentIncarnation": {incarnation}, "Events": []}}"#);
            Reply::Ok(Box::leak(text.into_boxed_str()))
        })
        .collect();
    let (_fake, base_url) = start_fake(script, Reply::Ok(DOC_TWO), 200).await;
    let shutdown = CancellationToken::new();
    let (task, documents, mut status) =
        Poller::spawn_with(fast_client(&base_url), fast_poller(), shutdown.clone());
    tokio::time::timeout(GIVE_UP, status.wait_for(|status| status.polls >= 40))
        .await
        .expect("the poller kept polling although nobody read a document")
        .unwrap();
    let newest = documents.borrow().clone().expect("a document");
    assert!(
        newest
            .incarnation
            .is_some_and(|incarnation| incarnation >= 30),
        "the watch holds the newest document: {:?}",
        newest.incarnation
    );
    shutdown.cancel();
    tokio::time::timeout(GIVE_UP, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_clock_reads_imds_time_from_the_date_header() {
    // A stand-in whose Date header runs 30 s ahead of this machine's clock.
    let app = Router::new().fallback(|| async {
        let ahead = std::time::SystemTime::now() + Duration::from_secs(30);
        Response::builder()
            .status(StatusCode::OK)
            .header("date", httpdate(ahead))
            .body(Body::from(DOC_ONE))
            .unwrap()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = fast_client(&base_url);
    assert_eq!(client.clock().skew(), None, "no answer yet");
    for _ in 0..5 {
        client.fetch_events().await.unwrap();
        tokio::time::sleep(Duration::from_millis(230)).await;
    }
    let skew = client.clock().skew().expect("a skew");
    assert!(
        (28_500..=30_000).contains(&skew.offset_ms),
        "IMDS is 30 s ahead: {skew:?}"
    );
    let ahead = client
        .clock()
        .now()
        .system_time()
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(ahead >= Duration::from_millis(28_500), "{ahead:?}");
}

/// An HTTP date ("Mon, 11 Apr 2022 22:26:58 GMT").
fn httpdate(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time)
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// A server answering every request with 302 to `location`.
async fn start_redirector(location: String) -> String {
    let app = Router::new().fallback(move || {
        let location = location.clone();
        async move {
            Response::builder()
                .status(StatusCode::FOUND)
                .header("location", location)
                .body(Body::empty())
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base_url
}

#[tokio::test]
async fn a_redirect_is_never_followed_and_the_target_gets_nothing() {
    let (target, target_url) = start_fake(vec![], Reply::Ok(DOC_ONE), 200).await;
    let location = format!("{target_url}/metadata/scheduledevents?api-version=2020-07-01");
    let redirector = start_redirector(location.clone()).await;
    let client = fast_client(&redirector);

    let fetched = client.fetch_events().await;
    assert_eq!(fetched, Err(FetchError::Redirected(302, location.clone())));
    let text = fetched.unwrap_err().to_string();
    assert!(
        text.contains("never follows redirects") && text.contains("imds.url"),
        "{text}"
    );

    let approved = client.approve(&["event-1".into()]).await;
    assert_eq!(approved, Err(ApproveError::Redirected(302, location)));
    assert!(client.fetch_vm_name().await.is_err());

    assert!(
        target.seen().is_empty(),
        "the redirect target got {:?}",
        target.seen()
    );
}

#[tokio::test]
async fn an_oversized_answer_is_refused_naming_the_cap() {
    let huge: &'static str = Box::leak(" ".repeat(IMDS_BODY_MAX_BYTES + 1).into_boxed_str());
    let (_fake, base_url) = start_fake(vec![], Reply::Ok(huge), 200).await;
    let client = ImdsClient::new(ClientConfig {
        base_url,
        request_timeout: Duration::from_secs(10),
        first_request_timeout: Duration::from_secs(10),
        max_requests_per_second: 1000,
        ..ClientConfig::default()
    })
    .unwrap();
    let fetched = client.fetch_events().await;
    assert_eq!(fetched, Err(FetchError::TooLarge(IMDS_BODY_MAX_BYTES)));
    let text = fetched.unwrap_err().to_string();
    assert!(text.contains(&IMDS_BODY_MAX_BYTES.to_string()), "{text}");
}
