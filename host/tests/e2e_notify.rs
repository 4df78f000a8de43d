//! End-to-end tests of the bundled `notify` plugin in the real daemon: a Reboot's transitions
//! reach Slack-, Teams- and webhook-shaped receivers, exactly; a failing receiver holds nothing up.

use std::path::Path;
use std::time::Duration;

use forewarn_daemon::log_messages::EVENT_TRANSITION;
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    DEFAULT_WAIT, Daemon, PluginDecision, Setup, TestEnv, accepted_approvals,
    install_bundled_plugin, wait_for,
};
use forewarn_test_support::pki::Pki;
use forewarn_test_support::webhook_receiver::{NO_ANSWER, Received, Receiver, Scheme};

/// Scenario time runs this many times faster than the wall clock.
const SPEED: f64 = 10.0;

/// A platform Reboot for vm-a, appearing 6 s (wall) in, running 3 s (wall) once approved.
const REBOOT_SCENARIO: &str = r#"
name = "notify-reboot"
description = "A platform Reboot that starts when approved and ends 30 s (scenario) later."
end_after = "5s"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "60s"
notice = "15m"
description = "Host update"
runs_for = "30s"
"#;

/// The generic webhook's template in these tests.
const TEMPLATE: &str = r#"{"id":"{{EventId}}","what":"{{Transition}}","vm":"{{VmName}}","type":"{{EventType}}","status":"{{EventStatus}}","not_before":"{{NotBefore}}","source":"{{EventSource}}","description":"{{Description}}"}"#;

/// The receiver for `scheme`, with the PKI that signs its certificate for HTTPS.
fn receiver(scheme: Scheme) -> (Receiver, Option<Pki>) {
    match scheme {
        Scheme::Http => (Receiver::http(), None),
        Scheme::Https => {
            let pki = Pki::generate();
            let receiver = Receiver::https(
                Path::new(&pki.file("server.pem")),
                Path::new(&pki.file("server.key")),
            );
            (receiver, Some(pki))
        }
    }
}

/// Installs notify with `config` lines, allowed to reach `receiver`; with a PKI, its CA is
/// copied beside the manifest and named by `http-ca-file`.
fn install_notify(setup: &Setup, receiver: &Receiver, pki: Option<&Pki>, config: &str) {
    let plugin_dir = setup.dir.path().join("plugins");
    let mut capabilities = format!("http = [\"{}\"]\n", receiver.address());
    if let Some(pki) = pki {
        std::fs::copy(pki.file("ca.pem"), plugin_dir.join("ca.pem")).expect("copy the CA");
        capabilities.push_str("http-ca-file = \"ca.pem\"\n");
    }
    let manifest = format!(
        "subscribe = [\"*\"]\nbudget = \"5s\"\n[config]\n{config}\n[capabilities]\n{capabilities}"
    );
    install_bundled_plugin(&plugin_dir, "notify", Some(&manifest));
}

fn prepare() -> Setup {
    TestEnv::builder(forewarn_binary!())
        .scenario_text(REBOOT_SCENARIO)
        .speed(SPEED)
        .prepare()
}

/// The event's id and NotBefore (RFC 3339) from the daemon's `scheduled` transition line,
/// waited for: the log is read on a thread, and the callers waited on the simulator or the
/// receiver, not on the log.
fn scheduled_event(daemon: &Daemon) -> (String, String) {
    let line = wait_for(DEFAULT_WAIT, "the scheduled transition in the log", || {
        daemon
            .lines_with_message(EVENT_TRANSITION)
            .into_iter()
            .find(|line| line.text("transition") == "scheduled")
            .ok_or_else(|| format!("no scheduled event: {}", daemon.describe_for_failure()))
    });
    (
        line.text("event_id").to_owned(),
        line.text("not_before").to_owned(),
    )
}

fn json(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The text notify sends for `what` ("scheduled, not before …", "started", "ended").
fn text(event_id: &str, what: &str) -> String {
    let short: String = event_id.chars().take(8).collect();
    format!("forewarn on vm-a: Reboot {short}… {what} (platform: Host update)")
}

/// The three bodies (Slack, Teams, webhook) for one transition, with their paths.
fn expected(
    event_id: &str,
    transition: &str,
    what: &str,
    status: &str,
    not_before: &str,
) -> Vec<(String, String)> {
    let text = json(&text(event_id, what));
    let slack = format!("{{\"text\":{text}}}");
    let teams = format!(
        "{{\"type\":\"message\",\"attachments\":[{{\"contentType\":\"application/vnd.microsoft.card.adaptive\",\"content\":{{\"type\":\"AdaptiveCard\",\"version\":\"1.4\",\"body\":[{{\"type\":\"TextBlock\",\"text\":{text},\"wrap\":true}}]}}}}]}}"
    );
    let hook = format!(
        "{{\"id\":\"{event_id}\",\"what\":\"{transition}\",\"vm\":\"vm-a\",\"type\":\"Reboot\",\"status\":\"{status}\",\"not_before\":\"{not_before}\",\"source\":\"Platform\",\"description\":\"Host update\"}}"
    );
    vec![
        ("/slack".to_owned(), slack),
        ("/teams".to_owned(), teams),
        ("/hook".to_owned(), hook),
    ]
}

/// A Reboot scheduled, started, ended: each transition reaches each target once, in order,
/// with exactly the expected body; the first request fails (500) and is retried; the event
/// is approved at the simulator.
fn notify_reports_each_transition_to_every_target(scheme: Scheme) {
    let (receiver, pki) = receiver(scheme);
    receiver.fail_next(1);
    let setup = prepare();
    let config = format!(
        "slack-webhook-url = \"{}\"\nteams-webhook-url = \"{}\"\nwebhook-url = \"{}\"\n\
         webhook-template = '{TEMPLATE}'\nwebhook-headers = \"X-Token: t0k3n\"\n",
        receiver.url("/slack"),
        receiver.url("/teams"),
        receiver.url("/hook"),
    );
    install_notify(&setup, &receiver, pki.as_ref(), &config);
    let mut daemon = setup.start_daemon();
    let received = receiver.wait_for_count(10, Duration::from_secs(60));
    let state = setup.wait_finished(&mut daemon, Duration::from_secs(30));
    let (event_id, not_before) = scheduled_event(&daemon);

    assert_eq!(received[0].path, "/slack");
    assert_eq!(
        received[0].status, 500,
        "the first request fails on purpose"
    );
    let delivered: Vec<&Received> = received.iter().filter(|r| r.status == 200).collect();
    let mut wanted = expected(
        &event_id,
        "scheduled",
        &format!("scheduled, not before {not_before}"),
        "Scheduled",
        &not_before,
    );
    wanted.extend(expected(&event_id, "started", "started", "Started", ""));
    wanted.extend(expected(&event_id, "ended", "ended", "Started", ""));
    let got: Vec<(String, String)> = delivered
        .iter()
        .map(|r| (r.path.clone(), r.body.clone()))
        .collect();
    assert_eq!(got, wanted, "{}", daemon.describe_for_failure());
    assert_eq!(
        received[0].body, wanted[0].1,
        "the retry sends the same body"
    );
    for request in &delivered {
        assert_eq!(request.method, "POST");
        assert_eq!(request.header("content-type"), Some("application/json"));
        let token = request.header("x-token");
        assert_eq!(token.is_some(), request.path == "/hook", "{request:?}");
    }
    assert!(
        !accepted_approvals(&state, &event_id).is_empty(),
        "the event was approved at the simulator"
    );
}

#[test]
fn notify_reports_each_transition_to_every_target_over_http() {
    notify_reports_each_transition_to_every_target(Scheme::Http);
}

#[test]
fn notify_reports_each_transition_to_every_target_over_https() {
    notify_reports_each_transition_to_every_target(Scheme::Https);
}

/// Runs the Reboot to its end with notify sending `scheduled` only, to Slack-style `/slack`
/// on `receiver`; checks the event was approved at the simulator and returns notify's
/// prepare decisions.
fn approved_despite(receiver: &Receiver) -> Vec<PluginDecision> {
    let setup = prepare();
    let config = format!(
        "slack-webhook-url = \"{}\"\ntransitions = \"scheduled\"\n",
        receiver.url("/slack")
    );
    install_notify(&setup, receiver, None, &config);
    let mut daemon = setup.start_daemon();
    let state = setup.wait_finished(&mut daemon, Duration::from_secs(60));
    let (event_id, _) = scheduled_event(&daemon);
    assert!(
        !accepted_approvals(&state, &event_id).is_empty(),
        "approved at the simulator: {}",
        daemon.describe_for_failure()
    );
    // notify's approval is its last prepare decision: waited for, as the log is read on a
    // thread and the simulator may have finished before the test read it.
    daemon
        .wait_for_decisions(DEFAULT_WAIT, "notify approving the prepare", |decisions| {
            decisions
                .iter()
                .any(|d| d.plugin == "notify" && d.phase == "prepare" && d.decision == "approve")
        })
        .into_iter()
        .filter(|d| d.plugin == "notify" && d.phase == "prepare")
        .collect()
}

/// Every request fails: notify retries within its budget, gives up, and approves; the event
/// is approved at the simulator all the same.
#[test]
fn a_failing_receiver_never_holds_the_event_up() {
    let (receiver, _) = receiver(Scheme::Http);
    receiver.fail_next(u64::MAX);
    let prepare = approved_despite(&receiver);
    assert_eq!(prepare.len(), 1, "{prepare:#?}");
    assert_eq!(prepare[0].decision, "approve", "{prepare:#?}");
    assert_eq!(prepare[0].failure, "", "{prepare:#?}");
    let tries = receiver.received();
    assert!(
        tries.len() >= 2 && tries.iter().all(|r| r.path == "/slack" && r.status == 500),
        "retried, then gave up: {tries:#?}"
    );
    assert!(tries.len() <= 4, "at most 4 tries: {tries:#?}");
}

/// The receiver reads the first request and never answers: that call runs out its budget
/// (the daemon counts it as a defer and calls again), and the second call, finding the
/// notice marked as sent, sends nothing and approves at once.
#[test]
fn a_receiver_that_never_answers_costs_one_budget_and_no_second_send() {
    let (receiver, _) = receiver(Scheme::Http);
    receiver.hang_next(1);
    let prepare = approved_despite(&receiver);
    assert_eq!(prepare.len(), 2, "{prepare:#?}");
    assert_eq!(prepare[0].failure, "budget-exceeded", "{prepare:#?}");
    assert_eq!(prepare[1].decision, "approve", "{prepare:#?}");
    assert_eq!(prepare[1].failure, "", "{prepare:#?}");
    let requests = receiver.received();
    assert_eq!(requests.len(), 1, "sent once: {requests:#?}");
    assert_eq!(requests[0].status, NO_ANSWER);
}

/// With `outcome-url` naming the daemon's own `/status/events`, the ended notice says what
/// the event cost: the message ends "ended — VERDICT", and the webhook's `{{Verdict}}` is the
/// outcome record's verdict line exactly as the daemon's `/status/events` has it.
#[test]
fn the_ended_notice_says_what_the_event_cost_from_its_outcome_record() {
    let receiver = Receiver::http();
    let setup = prepare();
    // The admin endpoint on a port known before the daemon starts: notify's config names it.
    let admin = forewarn_test_support::loopback_ports::free_loopback_address();
    let text = std::fs::read_to_string(&setup.config).expect("the daemon config");
    let text = text.replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{admin}\""));
    std::fs::write(&setup.config, text).expect("rewrite the daemon config");
    let config = format!(
        "webhook-url = \"{}\"\nwebhook-template = '{{\"what\":\"{{{{Transition}}}}\",\"verdict\":\"{{{{Verdict}}}}\",\"measured\":\"{{{{MeasuredImpact}}}}\",\"message\":\"{{{{Message}}}}\"}}'\noutcome-url = \"http://{admin}/status/events\"\n",
        receiver.url("/hook"),
    );
    let plugin_dir = setup.dir.path().join("plugins");
    let manifest = format!(
        "subscribe = [\"*\"]\nbudget = \"5s\"\n[config]\n{config}\n[capabilities]\nhttp = [\"{}\", \"{admin}\"]\n",
        receiver.address()
    );
    install_bundled_plugin(&plugin_dir, "notify", Some(&manifest));
    let mut daemon = setup.start_daemon();
    let received = receiver.wait_for_count(3, Duration::from_secs(60));
    setup.wait_finished(&mut daemon, Duration::from_secs(30));
    let bodies: Vec<serde_json::Value> = received
        .iter()
        .map(|request| serde_json::from_str(&request.body).expect("a JSON body"))
        .collect();
    let ended = bodies
        .iter()
        .find(|body| body["what"] == "ended")
        .unwrap_or_else(|| {
            panic!(
                "no ended notice: {bodies:?}\n{}",
                daemon.describe_for_failure()
            )
        });
    let events: serde_json::Value = serde_json::from_str(
        &forewarn_test_support::harness::http_get(&admin, "/status/events")
            .expect("GET /status/events"),
    )
    .expect("JSON");
    let verdict = events["records"][0]["verdict"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(verdict.starts_with("prepared "), "{events:#}");
    assert_eq!(ended["verdict"], verdict, "{bodies:?}");
    assert!(
        ended["message"]
            .as_str()
            .is_some_and(|message| message.contains(&format!("ended — {verdict}"))),
        "{bodies:?}"
    );
    assert!(
        ended["measured"]
            .as_str()
            .is_some_and(|measured| measured.starts_with("not measured: ")),
        "a Reboot the daemon did not restart across: {bodies:?}"
    );
    let scheduled = bodies
        .iter()
        .find(|body| body["what"] == "scheduled")
        .expect("the scheduled notice");
    assert_eq!(scheduled["verdict"], "", "only the ended notice carries it");
}
