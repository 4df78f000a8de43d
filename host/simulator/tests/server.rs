//! The simulator over real HTTP on 127.0.0.1: IMDS's checks and answers, approvals, the
//! per-VM prefix, fault windows and the /simulator control endpoints.

use std::time::{Duration, Instant};

use forewarn_simulator::{
    FaultKind, MalformedBody, Scenario, SimulatorConfig, SimulatorHandle, StateSnapshot, Transition,
};
use reqwest::StatusCode;

const API: &str = "api-version=2020-07-01";

/// One Reboot that appears at once, on three VMs, plus whatever `extra` adds.
fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "server-test"
vms = ["vm-a", "vm-b", "vm-c"]
[[events]]
id = "EV-1"
type = "Reboot"
appear_at = "0s"
notice = "15m"
runs_for = "10m"
{extra}
"#
    );
    Scenario::from_toml(&text, "server-test.toml").unwrap()
}

async fn start(scenario: Scenario, speed: f64) -> SimulatorHandle {
    let config = SimulatorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        scenario,
        speed,
    };
    forewarn_simulator::spawn(config).await.unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn get_events(base: &str) -> reqwest::Response {
    client()
        .get(format!("{base}/metadata/scheduledevents?{API}"))
        .header("Metadata", "true")
        .send()
        .await
        .unwrap()
}

async fn post_events(base: &str, body: &str) -> reqwest::Response {
    client()
        .post(format!("{base}/metadata/scheduledevents?{API}"))
        .header("Metadata", "true")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn json(response: reqwest::Response) -> serde_json::Value {
    serde_json::from_str(&response.text().await.unwrap()).unwrap()
}

#[tokio::test]
async fn get_serves_the_current_document_as_json() {
    let sim = start(scenario(""), 1.0).await;
    let response = get_events(&sim.base_url()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let document = forewarn_imds::parse_document(&response.text().await.unwrap()).unwrap();
    assert_eq!(document.incarnation, Some(2));
    let event = &document.events[0];
    assert_eq!(event.id, "EV-1");
    assert_eq!(event.resources, vec!["vm-a", "vm-b", "vm-c"]);
    let not_before = event.not_before.unwrap();
    let started = std::time::UNIX_EPOCH + Duration::from_millis(sim.snapshot().started_at_unix_ms);
    let notice = not_before.duration_since(started).unwrap();
    assert!(
        notice > Duration::from_secs(890) && notice <= Duration::from_secs(901),
        "NotBefore should be 15 minutes after the start, was {notice:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn missing_metadata_header_is_a_bad_request() {
    let sim = start(scenario(""), 1.0).await;
    let response = client()
        .get(format!("{}/metadata/scheduledevents?{API}", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body = json(response).await;
    assert_eq!(
        body["error"],
        "Bad request. Required metadata header not specified"
    );
    let post = client()
        .post(format!("{}/metadata/scheduledevents?{API}", sim.base_url()))
        .body(r#"{"StartRequests":[{"EventId":"EV-1"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), StatusCode::BAD_REQUEST);
    assert!(sim.snapshot().approvals.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn missing_or_unknown_api_version_is_a_bad_request() {
    let sim = start(scenario(""), 1.0).await;
    for query in ["", "?api-version=", "?api-version=2031-01-01"] {
        let response = client()
            .get(format!(
                "{}/metadata/scheduledevents{query}",
                sim.base_url()
            ))
            .header("Metadata", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::BAD_REQUEST,
            "query {query:?}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn malformed_post_bodies_are_bad_requests_and_change_nothing() {
    let sim = start(scenario(""), 1.0).await;
    for body in [
        "",
        "not json",
        r#"{"StartRequests":{"EventId":"EV-1"}}"#,
        r#"{"StartRequests":[{"Id":"EV-1"}]}"#,
    ] {
        let response = post_events(&sim.base_url(), body).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "body {body:?}");
    }
    let snapshot = sim.snapshot();
    assert_eq!(snapshot.events[0].event_status, "Scheduled");
    assert_eq!(snapshot.incarnation, 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn approval_is_recorded_and_starts_the_event() {
    let sim = start(scenario(""), 1.0).await;
    let base = sim.base_url();
    let response = post_events(&base, r#"{"StartRequests":[{"EventId":"EV-1"}]}"#).await;
    assert_eq!(response.status(), StatusCode::OK);

    let body = json(get_events(&base).await).await;
    assert_eq!(body["DocumentIncarnation"], 3);
    assert_eq!(body["Events"][0]["EventStatus"], "Started");
    assert_eq!(body["Events"][0]["NotBefore"], "");
    assert_eq!(body["Events"][0]["EventId"], "EV-1");

    let again = post_events(&base, r#"{"StartRequests":[{"EventId":"EV-1"}]}"#).await;
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "approving a started event is still 200"
    );

    let snapshot = sim.snapshot();
    assert_eq!(snapshot.approvals.len(), 2);
    assert_eq!(snapshot.approvals[0].event_id, "EV-1");
    assert_eq!(snapshot.approvals[0].vm, "vm-a");
    assert!(snapshot.approvals.iter().all(|approval| approval.accepted));
    assert_eq!(
        snapshot.transitions_of("EV-1"),
        vec![Transition::Appeared, Transition::Started]
    );
    assert_eq!(snapshot.incarnation, 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn unknown_event_id_is_a_bad_request_and_recorded_as_rejected() {
    let sim = start(scenario(""), 1.0).await;
    let response = post_events(&sim.base_url(), r#"{"StartRequests":[{"EventId":"NOPE"}]}"#).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let snapshot = sim.snapshot();
    assert_eq!(snapshot.approvals.len(), 1);
    assert!(!snapshot.approvals[0].accepted);
    assert_eq!(snapshot.events[0].event_status, "Scheduled");
    sim.shutdown().await;
}

#[tokio::test]
async fn per_vm_prefix_serves_the_same_document_and_that_vms_name() {
    let sim = start(scenario(""), 1.0).await;
    let vm_b = sim.vm_base_url("vm-b");
    let default_doc = json(get_events(&sim.base_url()).await).await;
    let vm_b_doc = json(get_events(&vm_b).await).await;
    assert_eq!(default_doc, vm_b_doc);

    for (base, name) in [(sim.base_url(), "vm-a"), (vm_b.clone(), "vm-b")] {
        let compute = client()
            .get(format!(
                "{base}/metadata/instance/compute?api-version=2021-12-13"
            ))
            .header("Metadata", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(compute.status(), StatusCode::OK);
        assert_eq!(json(compute).await["name"], name);
    }
    let no_header = client()
        .get(format!(
            "{vm_b}/metadata/instance/compute?api-version=2021-12-13"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(no_header.status(), StatusCode::BAD_REQUEST);

    let approve = post_events(&vm_b, r#"{"StartRequests":[{"EventId":"EV-1"}]}"#).await;
    assert_eq!(approve.status(), StatusCode::OK);
    let unknown_vm = get_events(&sim.vm_base_url("vm-z")).await;
    assert_eq!(unknown_vm.status(), StatusCode::NOT_FOUND);

    let snapshot = sim.snapshot();
    assert_eq!(snapshot.approvals[0].vm, "vm-b");
    let vms: Vec<&str> = snapshot.requests.iter().map(|r| r.vm.as_str()).collect();
    assert_eq!(
        vms,
        vec!["vm-a", "vm-b", "vm-a", "vm-b", "vm-b", "vm-b", ""]
    );
    assert_eq!(
        snapshot.requests[1].path,
        "/vm/vm-b/metadata/scheduledevents"
    );
    assert_eq!(snapshot.requests[4].status, 400);
    sim.shutdown().await;
}

/// Polls `check` until it passes or 20 s go by.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn status_fault_window_answers_429_then_recovers_without_losing_state() {
    let faults = r#"
[[faults]]
kind = "status"
status = 429
from = "0s"
until = "5s"
[[faults]]
kind = "status"
status = 503
methods = ["POST"]
from = "0s"
until = "5s"
"#;
    let sim = start(scenario(faults), 1.0).await;
    let base = sim.base_url();
    assert_eq!(
        get_events(&base).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let post = post_events(&base, r#"{"StartRequests":[{"EventId":"EV-1"}]}"#).await;
    assert_eq!(post.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        sim.snapshot().approvals.is_empty(),
        "a faulted POST approves nothing"
    );

    eventually("the 429 window to end", || async {
        get_events(&base).await.status() == StatusCode::OK
    })
    .await;
    let body = json(get_events(&base).await).await;
    assert_eq!(body["Events"][0]["EventId"], "EV-1");
    let statuses: Vec<u16> = sim.snapshot().requests.iter().map(|r| r.status).collect();
    assert_eq!(&statuses[..2], &[429, 503]);
    sim.shutdown().await;
}

#[tokio::test]
async fn gone_on_get_and_server_error_on_post() {
    let faults = r#"
[[faults]]
kind = "status"
status = 410
until = "1h"
[[faults]]
kind = "status"
status = 500
methods = ["POST"]
until = "1h"
"#;
    let sim = start(scenario(faults), 1.0).await;
    let base = sim.base_url();
    assert_eq!(get_events(&base).await.status(), StatusCode::GONE);
    let post = post_events(&base, r#"{"StartRequests":[{"EventId":"EV-1"}]}"#).await;
    assert_eq!(post.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(sim.snapshot().events[0].event_status, "Scheduled");
    sim.shutdown().await;
}

#[tokio::test]
async fn malformed_fault_serves_text_that_is_not_a_document() {
    let faults = r#"
[[faults]]
kind = "malformed"
body = "truncated"
"#;
    let sim = start(scenario(faults), 1.0).await;
    let response = get_events(&sim.base_url()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(text.starts_with("{\"DocumentIncarnation\""), "{text}");
    assert!(forewarn_imds::parse_document(&text).is_err(), "{text}");
    let state = sim.snapshot();
    let served = state.faults_of(FaultKind::Malformed);
    assert_eq!(served.len(), 1, "{:?}", state.faults);
    assert_eq!(served[0].body, Some(MalformedBody::Truncated));
    assert_eq!(served[0].method, "GET");
    sim.shutdown().await;
}

#[tokio::test]
async fn slow_first_call_still_answers_with_the_document() {
    let faults = r#"
[[faults]]
kind = "slow-first-call"
delay = "300ms"
"#;
    let sim = start(scenario(faults), 1.0).await;
    for _ in 0..2 {
        let response = get_events(&sim.base_url()).await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    let state = sim.snapshot();
    let served = state.faults_of(FaultKind::SlowFirstCall);
    assert_eq!(
        served.len(),
        1,
        "only the first call is slow: {:?}",
        state.faults
    );
    assert_eq!(served[0].delay_ms, Some(300));
    assert_eq!(served[0].vm, "vm-a");
    sim.shutdown().await;
}

#[tokio::test]
async fn an_incarnation_reset_is_recorded_once_a_document_shows_it() {
    let faults = r#"
[[faults]]
kind = "incarnation-reset"
at = "1s"
"#;
    let sim = start(scenario(faults), 2.0).await;
    // Scenario time starts at the first GET: that GET is at scenario time 0, before `at`,
    // however long this test took to send it.
    sim.hold_until_first_poll();
    assert_eq!(get_events(&sim.base_url()).await.status(), StatusCode::OK);
    assert!(sim.snapshot().faults.is_empty(), "no reset before `at`");
    // Wait (by the simulator's own clock) until scenario time is past `at`: no document
    // has shown the reset yet, so none is recorded.
    let give_up = Instant::now() + Duration::from_secs(30);
    while sim.snapshot().now_scenario_ms < 1_000 {
        assert!(
            Instant::now() < give_up,
            "scenario time did not reach 1 s in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        sim.snapshot().faults.is_empty(),
        "a reset recorded before a document showed it: {:?}",
        sim.snapshot().faults
    );
    for _ in 0..2 {
        assert_eq!(get_events(&sim.base_url()).await.status(), StatusCode::OK);
    }
    let state = sim.snapshot();
    let served = state.faults_of(FaultKind::IncarnationReset);
    assert_eq!(served.len(), 1, "{:?}", state.faults);
    assert_eq!(served[0].incarnation, Some(state.incarnation));
    assert!(served[0].at_scenario_ms >= 1_000, "{:?}", served[0]);
    sim.shutdown().await;
}

#[tokio::test]
async fn state_endpoint_parses_as_a_snapshot() {
    let sim = start(scenario(""), 1.0).await;
    let text = client()
        .get(format!("{}/simulator/state", sim.base_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let snapshot: StateSnapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(snapshot.scenario, "server-test");
    assert_eq!(snapshot.speed, 1.0);
    assert!(!snapshot.finished);
    assert_eq!(snapshot.event("ev-1").unwrap().event_type, "Reboot");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_fast_scenario_finishes_and_wait_finished_says_so() {
    let sim = start(
        forewarn_simulator::load_scenario("spot-preemption").unwrap(),
        2000.0,
    )
    .await;
    tokio::time::timeout(Duration::from_secs(30), sim.finished())
        .await
        .expect("spot-preemption at speed 2000 should finish in well under 30 s");
    let body = json(
        client()
            .get(format!(
                "{}/simulator/wait-finished?timeout_ms=5000",
                sim.base_url()
            ))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(body["finished"], true);
    let snapshot = sim.snapshot();
    assert!(snapshot.finished);
    assert!(snapshot.events.is_empty());
    let id = forewarn_simulator::load_scenario("spot-preemption")
        .unwrap()
        .events[0]
        .id()
        .to_string();
    assert_eq!(
        snapshot.transitions_of(&id),
        vec![
            Transition::Appeared,
            Transition::Started,
            Transition::Removed
        ]
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn the_api_version_asked_for_decides_the_shape_served() {
    let sim = start(scenario(""), 1.0).await;
    let get = |version: &'static str| {
        let url = format!(
            "{}/metadata/scheduledevents?api-version={version}",
            sim.base_url()
        );
        async move {
            let response = client()
                .get(url)
                .header("Metadata", "true")
                .send()
                .await
                .unwrap();
            json(response).await
        }
    };
    let newest = get("2020-07-01").await;
    assert_eq!(newest["Events"][0]["Resources"][0], "vm-a");
    assert!(newest["Events"][0].get("EventSource").is_some());
    let old = get("2017-03-01").await;
    assert_eq!(old["Events"][0]["Resources"][0], "_vm-a");
    assert!(old["Events"][0].get("EventSource").is_none(), "{old}");
    assert!(old["Events"][0].get("DurationInSeconds").is_none(), "{old}");
    sim.shutdown().await;
}

#[tokio::test]
async fn first_requests_fails_only_each_vms_first_gets() {
    let sim = start(
        scenario("[[faults]]\nkind = \"status\"\nstatus = 503\nfirst_requests = 2\n"),
        1.0,
    )
    .await;
    let base = sim.base_url();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(get_events(&base).await.status());
    }
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    assert_eq!(seen, vec![unavailable, unavailable, StatusCode::OK]);
    // Counted per VM: vm-b's first GET still fails.
    assert_eq!(
        get_events(&sim.vm_base_url("vm-b")).await.status(),
        unavailable
    );
    let faults = sim.snapshot().faults;
    assert_eq!(faults.len(), 3, "{faults:?}");
    assert!(faults.iter().all(|fault| fault.status == Some(503)));
    sim.shutdown().await;
}

async fn get_token(base: &str, query: &str, metadata: bool) -> reqwest::Response {
    let mut request = client().get(format!("{base}/metadata/identity/oauth2/token?{query}"));
    if metadata {
        request = request.header("Metadata", "true");
    }
    request.send().await.unwrap()
}

const STORAGE: &str = "api-version=2018-02-01&resource=https%3A%2F%2Fstorage.azure.com%2F";

#[tokio::test]
async fn identity_endpoint_serves_tokens_per_vm_and_logs_each_request() {
    let sim = start(scenario(""), 1.0).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let response = get_token(&sim.base_url(), STORAGE, true).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body = json(response).await;
    assert_eq!(body["resource"], "https://storage.azure.com/");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], "86399");
    let expires_on: u64 = body["expires_on"].as_str().unwrap().parse().unwrap();
    assert!(expires_on >= before + 86_399 && expires_on <= before + 86_401);
    assert_eq!(body["access_token"].as_str().unwrap().split('.').count(), 3);

    let vm_b = json(get_token(&sim.vm_base_url("vm-b"), STORAGE, true).await).await;
    assert_ne!(
        vm_b["client_id"], body["client_id"],
        "each VM has its own identity"
    );

    let snapshot = sim.snapshot();
    let fetches = snapshot.identity_requests();
    assert_eq!(fetches.len(), 2);
    assert_eq!((fetches[0].vm.as_str(), fetches[0].status), ("vm-a", 200));
    assert_eq!(fetches[1].path, "/vm/vm-b/metadata/identity/oauth2/token");
    sim.shutdown().await;
}

#[tokio::test]
async fn identity_endpoint_answers_azures_400s() {
    let sim = start(scenario(""), 1.0).await;
    let no_header = get_token(&sim.base_url(), STORAGE, false).await;
    assert_eq!(no_header.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json(no_header).await,
        serde_json::json!({"error": "invalid_request", "error_description": "Required metadata header not specified"})
    );
    let no_resource = get_token(&sim.base_url(), "api-version=2018-02-01", true).await;
    assert_eq!(no_resource.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json(no_resource).await["error_description"],
        "Required query variable 'resource' is missing"
    );
    let other_identity = format!("{STORAGE}&client_id=00000000-0000-0000-0000-00000000beef");
    let response = get_token(&sim.base_url(), &other_identity, true).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json(response).await["error_description"],
        "Identity not found"
    );
    assert_eq!(sim.snapshot().identity_requests().len(), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn identity_table_sets_lifetime_or_takes_the_identity_away() {
    let short = start(scenario("[identity]\nexpires_in = \"90s\"\n"), 1.0).await;
    let body = json(get_token(&short.base_url(), STORAGE, true).await).await;
    assert_eq!(body["expires_in"], "90");
    short.shutdown().await;

    let none = start(scenario("[identity]\nassigned = false\n"), 1.0).await;
    let response = get_token(&none.base_url(), STORAGE, true).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json(response).await["error_description"],
        "Identity not found"
    );
    none.shutdown().await;
}

async fn compute_at(base: &str) -> serde_json::Value {
    let response = client()
        .get(format!(
            "{base}/metadata/instance/compute?api-version=2021-12-13"
        ))
        .header("Metadata", "true")
        .send()
        .await
        .unwrap();
    json(response).await
}

#[tokio::test]
async fn a_redeploy_that_starts_moves_its_vm_to_the_next_dedicated_host() {
    let text = r#"
name = "dedicated"
vms = ["vm-a", "vm-b"]
dedicated_hosts = ["hg/hosts/h1", "hg/hosts/h2"]
[[events]]
id = "EV-D"
type = "Redeploy"
resources = ["vm-a"]
appear_at = "0s"
notice = "15m"
runs_for = "10m"
"#;
    let sim = start(Scenario::from_toml(text, "dedicated.toml").unwrap(), 1.0).await;
    let (vm_a, vm_b) = (sim.vm_base_url("vm-a"), sim.vm_base_url("vm-b"));
    assert_eq!(compute_at(&vm_a).await["host"]["id"], "hg/hosts/h1");
    let approve = post_events(&vm_a, r#"{"StartRequests":[{"EventId":"EV-D"}]}"#).await;
    assert_eq!(approve.status(), StatusCode::OK);
    assert_eq!(compute_at(&vm_a).await["host"]["id"], "hg/hosts/h2");
    assert_eq!(
        compute_at(&vm_b).await["host"]["id"],
        "hg/hosts/h1",
        "vm-b was not redeployed"
    );
    sim.shutdown().await;
    let plain = compute_of(scenario("")).await;
    assert_eq!(
        plain["host"]["id"], "",
        "no dedicated host: host.id is empty"
    );
}

async fn compute_of(scenario: Scenario) -> serde_json::Value {
    let sim = start(scenario, 1.0).await;
    let body = compute_at(&sim.base_url()).await;
    sim.shutdown().await;
    body
}

#[tokio::test]
async fn compute_shows_priority_and_eviction_policy() {
    let regular = compute_of(scenario("")).await;
    assert_eq!(
        (&regular["priority"], &regular["evictionPolicy"]),
        (&serde_json::json!("Regular"), &serde_json::json!(""))
    );
    let spot = compute_of(forewarn_simulator::load_scenario("spot-preemption").unwrap()).await;
    assert_eq!(
        (&spot["priority"], &spot["evictionPolicy"]),
        (&serde_json::json!("Spot"), &serde_json::json!("Delete"))
    );
    let text = "name = \"d\"\npriority = \"Spot\"\neviction_policy = \"Deallocate\"\n";
    let deallocated = compute_of(Scenario::from_toml(text, "d.toml").unwrap()).await;
    assert_eq!(deallocated["evictionPolicy"], "Deallocate");
    let unset =
        compute_of(Scenario::from_toml("name = \"u\"\npriority = \"\"\n", "u.toml").unwrap()).await;
    assert_eq!(unset["priority"], "");
}

#[tokio::test]
async fn the_imds_client_reads_priority_and_eviction_policy_from_the_simulator() {
    let sim = start(
        forewarn_simulator::load_scenario("spot-preemption").unwrap(),
        1.0,
    )
    .await;
    let config = forewarn_imds::ClientConfig {
        base_url: sim.base_url(),
        ..forewarn_imds::ClientConfig::default()
    };
    let imds = forewarn_imds::ImdsClient::new(config).unwrap();
    let compute = imds.fetch_compute().await.unwrap();
    assert_eq!(compute.name, "vm-a");
    assert_eq!(compute.priority, forewarn_imds::VmPriority::Spot);
    assert_eq!(
        compute.eviction_policy,
        Some(forewarn_imds::EvictionPolicy::Delete)
    );
    assert_eq!(imds.fetch_vm_name().await.unwrap(), "vm-a");
    sim.shutdown().await;
}

/// `hold_until_first_poll` (`forewarn simulate --start-on-first-poll`): scenario time stays
/// at 0 however much wall time passes, until the first GET of scheduledevents; from then it
/// runs, so the event canceled at 1 s is canceled 1 s (scenario) after that GET.
#[tokio::test]
async fn a_held_clock_starts_at_the_first_poll() {
    let sim = start(scenario("cancel_at = \"1s\""), 10.0).await;
    sim.hold_until_first_poll();
    // Wall time passes (3 s of scenario time at speed 10): the held clock does not move.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = sim.snapshot();
    assert_eq!(held.now_scenario_ms, 0);
    assert_eq!(held.transitions_of("EV-1"), [Transition::Appeared]);

    let polled_at = Instant::now();
    assert_eq!(get_events(&sim.base_url()).await.status(), StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sim
        .snapshot()
        .transitions_of("EV-1")
        .contains(&Transition::Canceled)
    {
        assert!(Instant::now() < deadline, "the clock never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        polled_at.elapsed() >= Duration::from_millis(100),
        "canceled {:?} after the first poll, before 1 s of scenario time",
        polled_at.elapsed()
    );
    sim.shutdown().await;
}

/// The instant an HTTP date names.
fn http_date(text: &str) -> std::time::SystemTime {
    chrono::DateTime::parse_from_rfc2822(text)
        .map(|time| std::time::SystemTime::from(time.to_utc()))
        .unwrap_or_else(|error| panic!("{text:?} is not an HTTP date: {error}"))
}

/// Seconds from `earlier` to `later` (negative when `later` is earlier).
fn seconds_between(earlier: std::time::SystemTime, later: std::time::SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

#[tokio::test]
async fn a_vm_clock_behind_puts_the_date_header_and_not_before_on_azures_clock() {
    // The VM's clock is 10 s behind Azure's: IMDS's Date header and the Reboot's NotBefore
    // (15 min after it appeared) are 10 s ahead of this machine's clock.
    let faults = "[[faults]]\nkind = \"vm-clock\"\noffset = \"-10s\"\n";
    let sim = start(scenario(faults), 1.0).await;
    let started = std::time::SystemTime::now();
    let response = get_events(&sim.base_url()).await;
    let date = http_date(response.headers()["date"].to_str().unwrap());
    let ahead = seconds_between(std::time::SystemTime::now(), date);
    assert!((8.5..=10.5).contains(&ahead), "Date is {ahead} s ahead");
    let document = json(response).await;
    let not_before = http_date(document["Events"][0]["NotBefore"].as_str().unwrap());
    let notice = seconds_between(started, not_before);
    assert!(
        (908.0..=911.0).contains(&notice),
        "NotBefore {notice} s ahead"
    );
    let state = sim.snapshot();
    let served = state.faults_of(FaultKind::VmClock);
    assert_eq!(served.len(), 1, "{:?}", state.faults);
    assert_eq!(served[0].vm_clock_offset_ms, Some(-10_000));
    // History stays on the machine's clock.
    let appeared = state.history[0].at_unix_ms;
    let machine_start = state.started_at_unix_ms;
    assert!(
        appeared.abs_diff(machine_start) < 1_000,
        "{appeared} vs {machine_start}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_step_of_the_vm_clock_moves_azures_clock_and_keeps_not_before() {
    // At 1 s the VM's clock steps 30 s behind: Azure's clock (its Date, the instant events
    // start) jumps 30 s ahead; the NotBefore already sent stays as it was.
    let faults = "[[faults]]\nkind = \"vm-clock\"\noffset = \"-30s\"\nat = \"1s\"\n";
    let sim = start(scenario(faults), 1.0).await;
    let before = json(get_events(&sim.base_url()).await).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let response = get_events(&sim.base_url()).await;
    let date = http_date(response.headers()["date"].to_str().unwrap());
    let ahead = seconds_between(std::time::SystemTime::now(), date);
    assert!((28.5..=30.5).contains(&ahead), "Date is {ahead} s ahead");
    let after = json(response).await;
    assert_eq!(
        before["Events"][0]["NotBefore"], after["Events"][0]["NotBefore"],
        "the step does not move NotBefore"
    );
    let state = sim.snapshot();
    assert!(state.now_scenario_ms >= 31_000, "{}", state.now_scenario_ms);
    assert_eq!(
        state.faults_of(FaultKind::VmClock)[0].vm_clock_offset_ms,
        Some(-30_000)
    );
    sim.shutdown().await;
}

/// A Reboot that runs for 10 minutes, then a Freeze announced 15 minutes ahead 20 minutes in.
fn run_then_notice() -> Scenario {
    Scenario::from_toml(
        r#"
name = "quiet-stretch"
end_after = "10s"
[[events]]
id = "EV-RUN"
type = "Reboot"
status = "Started"
appear_at = "0s"
runs_for = "10m"
[[events]]
id = "EV-NEXT"
type = "Freeze"
appear_at = "20m"
notice = "15m"
"#,
        "quiet-stretch.toml",
    )
    .unwrap()
}

/// The events a GET of scheduledevents lists: (EventId, EventStatus).
async fn listed(base: &str) -> Vec<(String, String)> {
    let document = json(get_events(base).await).await;
    document["Events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| {
            let text = |field: &str| event[field].as_str().unwrap_or_default().to_owned();
            (text("EventId"), text("EventStatus"))
        })
        .collect()
}

#[tokio::test]
async fn a_quiet_stretch_is_skipped_at_the_third_fetch_and_a_notice_after_it_stays_true() {
    let simulator = start(run_then_notice(), 1.0).await;
    let base = simulator.base_url();
    let running = vec![("EV-RUN".to_owned(), "Started".to_owned())];
    // Not allowed: fetched as often as anyone likes, the Reboot keeps running.
    for _ in 0..3 {
        assert_eq!(listed(&base).await, running);
    }
    simulator.allow_skipping(true);
    // Allowed, and the client has fetched the running Reboot: the 10 minutes it runs with
    // nothing Scheduled are skipped at the next fetch, which gets its end.
    assert_eq!(listed(&base).await, vec![]);
    assert!(simulator.snapshot().now_scenario_ms >= 600_000);
    // The empty document must be fetched twice too; then the next fetch gets the Freeze
    // that appears 20 minutes in.
    assert_eq!(listed(&base).await, vec![]);
    let document = json(get_events(&base).await).await;
    let events = document["Events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{document}");
    assert_eq!(events[0]["EventId"], "EV-NEXT");
    // Its NotBefore is 15 minutes from now on the wall clock, as announced: the 20 minutes
    // skipped moved neither clock.
    let not_before = http_date(events[0]["NotBefore"].as_str().unwrap());
    let ahead = seconds_between(std::time::SystemTime::now(), not_before);
    assert!((14.0 * 60.0..=15.0 * 60.0).contains(&ahead), "{ahead} s");
    // A Scheduled event is listed: nothing is skipped however often it is fetched.
    let scheduled = vec![("EV-NEXT".to_owned(), "Scheduled".to_owned())];
    for _ in 0..3 {
        assert_eq!(listed(&base).await, scheduled);
    }
    simulator.shutdown().await;
}

#[tokio::test]
async fn a_quiet_stretch_is_not_skipped_before_the_client_fetched_the_document_twice() {
    let simulator = start(run_then_notice(), 1.0).await;
    simulator.allow_skipping(true);
    let base = simulator.base_url();
    let running = vec![("EV-RUN".to_owned(), "Started".to_owned())];
    assert_eq!(listed(&base).await, running, "the first fetch");
    assert_eq!(listed(&base).await, running, "the second fetch");
    simulator.allow_skipping(false);
    assert_eq!(listed(&base).await, running, "allowed no longer");
    simulator.shutdown().await;
}

#[tokio::test]
async fn a_scenario_with_faults_is_never_skipped() {
    let mut scenario = run_then_notice();
    scenario.faults = scenario_with_a_fault().faults;
    let simulator = start(scenario, 1.0).await;
    simulator.allow_skipping(true);
    let base = simulator.base_url();
    for _ in 0..4 {
        assert_eq!(
            listed(&base).await,
            vec![("EV-RUN".to_owned(), "Started".to_owned())]
        );
    }
    simulator.shutdown().await;
}

fn scenario_with_a_fault() -> Scenario {
    scenario(
        r#"
[[faults]]
kind = "status"
status = 500
from = "30m"
until = "31m"
"#,
    )
}
