//! The simulator console's endpoints over real HTTP: generating events that live like
//! scenario events, starting/canceling/ending them, faults, scenarios, the request log, the page.

use std::time::{Duration, SystemTime};

use forewarn_simulator::{FaultKind, SimulatorConfig, SimulatorHandle, Transition, load_scenario};
use reqwest::StatusCode;
use serde_json::{Value, json};

const API: &str = "api-version=2020-07-01";

async fn start_idle() -> SimulatorHandle {
    let config = SimulatorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        scenario: load_scenario("idle").unwrap(),
        speed: 1.0,
    };
    forewarn_simulator::spawn(config).await.unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// POSTs `body` (JSON) to a console endpoint: (status, answer).
async fn post(sim: &SimulatorHandle, path: &str, body: Value) -> (StatusCode, Value) {
    let response = client()
        .post(format!("{}{path}", sim.base_url()))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

async fn generate(sim: &SimulatorHandle, body: Value) -> String {
    let (status, answer) = post(sim, "/simulator/events", body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    answer["event_id"].as_str().unwrap().to_string()
}

async fn imds_get(sim: &SimulatorHandle) -> reqwest::Response {
    client()
        .get(format!("{}/metadata/scheduledevents?{API}", sim.base_url()))
        .header("Metadata", "true")
        .send()
        .await
        .unwrap()
}

async fn document(sim: &SimulatorHandle) -> forewarn_imds::Document {
    let response = imds_get(sim).await;
    assert_eq!(response.status(), StatusCode::OK);
    forewarn_imds::parse_document(&response.text().await.unwrap()).unwrap()
}

async fn console_view(sim: &SimulatorHandle, after: u64) -> Value {
    let url = format!("{}/simulator/console?after={after}", sim.base_url());
    let response = client().get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

#[tokio::test]
async fn a_generated_reboot_is_served_approved_and_started_like_a_scenario_event() {
    let sim = start_idle().await;
    let asked = SystemTime::now();
    let id = generate(
        &sim,
        json!({"type": "Reboot", "not_before_seconds": 600, "resources": ["vm-a", "vm-x"]}),
    )
    .await;

    let served = document(&sim).await;
    let event = served.events.iter().find(|event| event.id == id).unwrap();
    assert_eq!(event.event_type_raw, "Reboot");
    assert_eq!(event.resources, ["vm-a", "vm-x"]);
    let notice = event.not_before.unwrap().duration_since(asked).unwrap();
    assert!(
        notice > Duration::from_secs(597) && notice <= Duration::from_secs(601),
        "NotBefore should be 600 s from now, was {notice:?}"
    );

    let approval = format!(r#"{{"StartRequests":[{{"EventId":"{id}"}}]}}"#);
    let response = client()
        .post(format!("{}/metadata/scheduledevents?{API}", sim.base_url()))
        .header("Metadata", "true")
        .body(approval.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        sim.snapshot().transitions_of(&id),
        [Transition::Appeared, Transition::Started]
    );

    // The console's request log has the POST with its body, after the GET.
    let view = console_view(&sim, 0).await;
    let requests = view["requests"].as_array().unwrap();
    let methods: Vec<&str> = requests
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["GET", "POST"]);
    assert_eq!(requests[1]["body"], approval);
    assert_eq!(requests[1]["status"], 200);
    let after_first = requests[0]["seq"].as_u64().unwrap();
    let newer = console_view(&sim, after_first).await;
    assert_eq!(newer["requests"].as_array().unwrap().len(), 1);
    assert_eq!(newer["events"][0]["EventStatus"], "Started");
    sim.shutdown().await;
}

#[tokio::test]
async fn events_are_started_canceled_and_ended_from_the_console() {
    let sim = start_idle().await;
    let canceled = generate(&sim, json!({"type": "Redeploy"})).await;
    let started = generate(&sim, json!({"type": "Freeze", "source": "User"})).await;
    let before = document(&sim).await.incarnation.unwrap();

    let (status, _) = post(
        &sim,
        &format!("/simulator/events/{canceled}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(
        &sim,
        &format!("/simulator/events/{started}/start"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let served = document(&sim).await;
    assert_eq!(served.incarnation, Some(before + 2));
    assert_eq!(served.events.len(), 1);
    assert_eq!(served.events[0].status, forewarn_imds::EventStatus::Started);

    // A Started event cannot be canceled, only ended; a gone one is unknown.
    let (status, answer) = post(
        &sim,
        &format!("/simulator/events/{started}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(
        (status, answer["field"].as_str()),
        (StatusCode::CONFLICT, Some("action"))
    );
    let (status, _) = post(&sim, &format!("/simulator/events/{started}/end"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = post(
        &sim,
        &format!("/simulator/events/{canceled}/start"),
        json!({}),
    )
    .await;
    assert_eq!(
        (status, answer["field"].as_str()),
        (StatusCode::NOT_FOUND, Some("event_id"))
    );

    let snapshot = sim.snapshot();
    assert_eq!(
        snapshot.transitions_of(&canceled),
        [Transition::Appeared, Transition::Canceled]
    );
    assert_eq!(
        snapshot.transitions_of(&started),
        [
            Transition::Appeared,
            Transition::Started,
            Transition::Removed
        ]
    );
    assert!(snapshot.events.is_empty());
    assert!(!snapshot.finished, "idle never finishes on its own");
    sim.shutdown().await;
}

#[tokio::test]
async fn injected_faults_are_served_and_recorded() {
    let sim = start_idle().await;
    let (status, answer) = post(
        &sim,
        "/simulator/faults",
        json!({"fault": "too-many-requests", "seconds": 30}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["fault"], "too-many-requests");
    assert_eq!(imds_get(&sim).await.status(), StatusCode::TOO_MANY_REQUESTS);
    let served = sim.snapshot().faults_of(FaultKind::Status).len();
    assert_eq!(served, 1);

    // An incarnation reset: the next document counts from 1 again.
    generate(&sim, json!({"type": "Reboot"})).await;
    generate(&sim, json!({"type": "Freeze"})).await;
    let (status, _) = post(
        &sim,
        "/simulator/faults",
        json!({"fault": "incarnation-reset"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let view = console_view(&sim, 0).await;
    assert_eq!(view["document"]["DocumentIncarnation"], 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_vm_clock_step_from_the_console_moves_the_date_header() {
    let sim = start_idle().await;
    let (status, answer) = post(&sim, "/simulator/faults", json!({"fault": "vm-clock"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["field"], "offset_seconds");
    let (status, answer) = post(
        &sim,
        "/simulator/faults",
        json!({"fault": "vm-clock", "offset_seconds": -10}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let response = imds_get(&sim).await;
    let date = response.headers()["date"].to_str().unwrap().to_owned();
    let date = SystemTime::from(
        chrono::DateTime::parse_from_rfc2822(&date)
            .unwrap()
            .to_utc(),
    );
    let ahead = date
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .as_secs_f64();
    assert!(
        (8.5..=10.5).contains(&ahead),
        "the VM's clock is 10 s behind: Date {ahead} s ahead"
    );
    let state = sim.snapshot();
    let served = state.faults_of(FaultKind::VmClock);
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].vm_clock_offset_ms, Some(-10_000));
    sim.shutdown().await;
}

#[tokio::test]
async fn the_console_starts_a_built_in_scenario_from_its_beginning() {
    let sim = start_idle().await;
    let (status, _) = post(&sim, "/simulator/scenario", json!({"name": "user-reboot"})).await;
    assert_eq!(status, StatusCode::OK);
    let view = console_view(&sim, 0).await;
    assert_eq!(view["scenario"], "user-reboot");
    assert!(view["now_scenario_ms"].as_u64().unwrap() < 5_000);
    let names: Vec<&str> = view["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| pair[0].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"idle") && names.contains(&"full-lifecycle"),
        "{names:?}"
    );
    assert_eq!(sim.scenario().name, "user-reboot");
    sim.shutdown().await;
}

#[tokio::test]
async fn every_bad_console_request_is_a_400_naming_the_field() {
    let sim = start_idle().await;
    let cases = [
        ("/simulator/events", json!({}), "body"),
        ("/simulator/events", json!({"type": "Re boot"}), "type"),
        (
            "/simulator/events",
            json!({"type": "Reboot", "not_before_seconds": 999_999_999}),
            "not_before_seconds",
        ),
        (
            "/simulator/events",
            json!({"type": "Reboot", "resources": [""]}),
            "resources",
        ),
        (
            "/simulator/events",
            json!({"type": "Reboot", "status": "Later"}),
            "body",
        ),
        (
            "/simulator/events",
            json!({"type": "Reboot", "colour": "red"}),
            "body",
        ),
        ("/simulator/faults", json!({"fault": "earthquake"}), "body"),
        (
            "/simulator/faults",
            json!({"fault": "gone", "seconds": 0}),
            "seconds",
        ),
        (
            "/simulator/faults",
            json!({"fault": "gone", "seconds": 100_000}),
            "seconds",
        ),
        ("/simulator/scenario", json!({"name": "no-such"}), "name"),
        ("/simulator/events/ABC/approve", json!({}), "action"),
    ];
    for (path, body, field) in cases {
        let (status, answer) = post(&sim, path, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}: {answer}");
        assert_eq!(answer["field"], field, "{path} {body}: {answer}");
        assert!(!answer["error"].as_str().unwrap().is_empty());
    }
    let bad_after = client()
        .get(format!("{}/simulator/console?after=x", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_after.status(), StatusCode::BAD_REQUEST);
    // Nothing was changed by the refused requests.
    assert!(sim.snapshot().events.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn the_page_is_one_self_contained_html_file_with_the_documented_ids() {
    let sim = start_idle().await;
    let response = client()
        .get(format!("{}/", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = response.text().await.unwrap();
    for id in [
        "scenario-name",
        "scenario-clock",
        "generate-form",
        "generate",
        "scenario-form",
        "start-scenario",
        "fault-form",
        "inject-fault",
        "document",
        "requests",
        "events",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    assert!(html.contains("name=\"viewport\""));
    for external in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(
            !html.contains(external),
            "the page loads something from outside: {external}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn restart_scenario_plays_a_finished_scenario_again_from_its_start() {
    let config = SimulatorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        scenario: load_scenario("user-reboot").unwrap(),
        // The scenario lasts about 25 minutes: 1.5 s at this speed.
        speed: 1_000.0,
    };
    let sim = forewarn_simulator::spawn(config).await.unwrap();
    sim.finished().await;
    let before = sim.snapshot();
    assert!(before.finished);
    sim.restart_scenario();
    let again = sim.snapshot();
    assert!(!again.finished, "replayed from its start");
    assert!(again.now_scenario_ms < before.now_scenario_ms);
    assert!(
        again.history.len() < before.history.len(),
        "{:?}",
        again.history
    );
    assert_eq!(again.scenario, "user-reboot");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_page_rebound_to_the_simulator_by_dns_can_neither_read_nor_change_it() {
    // A page at http://evil.example:PORT whose name now resolves to 127.0.0.1 is the same
    // origin as the simulator to the browser: its requests differ only by their Host.
    let sim = start_idle().await;
    let port = sim.base_url().rsplit(':').next().unwrap().to_owned();
    let rebound = format!("evil.example:{port}");
    let generate = client()
        .post(format!("{}/simulator/events", sim.base_url()))
        .header("Host", &rebound)
        .header("Origin", format!("http://{rebound}"))
        .header("Content-Type", "application/json")
        .body(json!({"type": "Reboot", "not_before_seconds": 600}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(generate.status(), StatusCode::MISDIRECTED_REQUEST);
    let answer: Value = generate.json().await.unwrap();
    assert!(
        answer["error"].as_str().unwrap().contains("evil.example"),
        "{answer}"
    );
    for path in ["/simulator/console", "/simulator/state", "/"] {
        let read = client()
            .get(format!("{}{path}", sim.base_url()))
            .header("Host", &rebound)
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), StatusCode::MISDIRECTED_REQUEST, "{path}");
    }
    // A browser saying the request comes from another site is refused with a JSON body too.
    let cross_site = client()
        .post(format!("{}/simulator/events", sim.base_url()))
        .header("Sec-Fetch-Site", "cross-site")
        .header("Content-Type", "application/json")
        .body(json!({"type": "Reboot", "not_before_seconds": 600}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    assert!(
        document(&sim).await.events.is_empty(),
        "no event was generated"
    );
    // The simulator still answers under its address and localhost.
    let by_name = client()
        .get(format!("http://localhost:{port}/simulator/console"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_name.status(), StatusCode::OK);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_page_elsewhere_cannot_change_the_simulator_through_a_browser() {
    let sim = start_idle().await;
    let url = format!("{}/simulator/faults", sim.base_url());
    let body = json!({"fault": "gone", "seconds": 600}).to_string();
    // What a form or a fetch without CORS sends: text/plain.
    let plain = client()
        .post(&url)
        .header("Content-Type", "text/plain")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let foreign = client()
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Origin", "http://evil.example")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    // The console's own page sends its own origin.
    let own = client()
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Origin", sim.base_url())
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    // Only the last one injected anything.
    assert_eq!(imds_get(&sim).await.status(), StatusCode::GONE);
    assert_eq!(sim.snapshot().faults_of(FaultKind::Status).len(), 1);
    sim.shutdown().await;
}
