//! The plugin's real `on_event` against the SDK's test host: one POST per transition to the
//! configured webhook, none repeated, retried on failure, and always an approval.

use std::time::Duration;

use forewarn_sdk::testing::{self, TestHost};
use forewarn_sdk::{Context, Decision, Event, EventType, HostError, Phase};

use super::Notify;

const SLACK_URL: &str = "https://hooks.slack.com/services/T000/B000/secret";
const WEBHOOK_URL: &str = "http://10.0.0.9:8080/events";

fn call(host: &mut TestHost, event: &Event, phase: Phase) -> Decision {
    host.on_event::<Notify>(event, phase, &testing::context_for(event))
}

fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).expect("a JSON body")
}

#[test]
fn prepare_posts_one_message_to_slack_and_approves() {
    let mut host = TestHost::new()
        .config("slack-webhook-url", SLACK_URL)
        .http_reply("POST", SLACK_URL, 200, "ok");
    let event = testing::event(EventType::Reboot);

    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());
    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());

    let sent = host.http_requests();
    assert_eq!(sent.len(), 1, "the retry of Prepare sends nothing new");
    assert_eq!(sent[0].method, "POST");
    let text = json(&sent[0].body)["text"].as_str().map(str::to_owned);
    assert!(
        text.as_deref().is_some_and(|text| text
            .starts_with(&format!("forewarn on {}: Reboot ", testing::VM_NAME))
            && text.contains("scheduled")),
        "{text:?}"
    );
    assert!(
        sent[0]
            .headers
            .contains(&("content-type".into(), "application/json".into()))
    );
}

#[test]
fn each_transition_is_sent_to_the_webhook_once_and_forgotten_at_the_end() {
    let mut host = TestHost::new()
        .config("webhook-url", WEBHOOK_URL)
        .http_reply("POST", WEBHOOK_URL, 204, "");
    let event = testing::event(EventType::Redeploy);

    for phase in [Phase::Prepare, Phase::Started, Phase::EndedAfterStart] {
        assert_eq!(call(&mut host, &event, phase), Decision::approve());
    }

    let transitions: Vec<serde_json::Value> = host
        .http_requests()
        .iter()
        .map(|request| json(&request.body)["transition"].clone())
        .collect();
    assert_eq!(transitions, ["scheduled", "started", "ended"]);
    assert!(host.state_now().is_empty(), "{:?}", host.state_now());
}

#[test]
fn a_failing_webhook_is_tried_again_within_the_deadline() {
    let mut host = TestHost::new()
        .config("webhook-url", WEBHOOK_URL)
        .http_error(
            "POST",
            WEBHOOK_URL,
            HostError::Failed("connection refused".into()),
        )
        .http_reply("POST", WEBHOOK_URL, 200, "");
    let event = testing::event(EventType::Reboot);

    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());

    assert_eq!(host.http_requests().len(), 2);
}

#[test]
fn a_webhook_not_granted_still_approves_and_gives_up_by_the_deadline() {
    let mut host = TestHost::new().config("webhook-url", WEBHOOK_URL);
    let event = testing::event(EventType::Reboot);
    let hurried = Context {
        deadline_unix_ms: testing::deadline_in(Duration::from_millis(1_500)),
        ..testing::context_for(&event)
    };

    let decision = host.on_event::<Notify>(&event, Phase::Prepare, &hurried);

    assert_eq!(decision, Decision::approve());
    assert_eq!(host.http_requests().len(), 2, "one retry fits in 1.5 s");
}

#[test]
fn without_a_target_nothing_is_sent() {
    let mut host = TestHost::new();
    let event = testing::event(EventType::Reboot);

    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());

    assert!(host.http_requests().is_empty());
    assert_eq!(host.state_text("unconfigured-noted"), Some("true"));
}

const OUTCOME_URL: &str = "http://127.0.0.1:9555/status/events";

/// With `outcome-url`, the ended notice says what the event cost: the outcome record's
/// verdict in the message, and the verdict and the measured impact as their own fields.
#[test]
fn the_ended_notice_carries_the_outcome_record_announced_against_measured() {
    let event = testing::event(EventType::Freeze);
    let view = format!(
        r#"{{"records":[{{"event_id":"{}","verdict":{{"text":"prepared 41 s before NotBefore; approved 12 min early; paused 3.2 s, announced ≤ 9 s"}},"happened":{{"impact":{{"kind":"pause","milliseconds":3200,"precision_ms":50}}}}}}]}}"#,
        event.id
    );
    let mut host = TestHost::new()
        .config("webhook-url", WEBHOOK_URL)
        .config("outcome-url", OUTCOME_URL)
        .http_reply("POST", WEBHOOK_URL, 204, "")
        .http_reply("GET", OUTCOME_URL, 200, view.as_str());

    for phase in [Phase::Prepare, Phase::Started, Phase::EndedAfterStart] {
        assert_eq!(call(&mut host, &event, phase), Decision::approve());
    }

    let requests = host.http_requests();
    let gets: Vec<_> = requests.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(
        gets.len(),
        1,
        "only the ended notice asks for the record: {requests:?}"
    );
    let ended = requests
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| json(&r.body))
        .find(|body| body["transition"] == "ended")
        .expect("the ended notice");
    assert_eq!(
        ended["verdict"],
        "prepared 41 s before NotBefore; approved 12 min early; paused 3.2 s, announced ≤ 9 s"
    );
    assert_eq!(ended["measured_impact"], "paused 3.2 s ± 50 ms");
    let message = ended["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ended — prepared 41 s before NotBefore"),
        "{message}"
    );
}

/// An outcome-url that cannot be read leaves the ended notice as it was: sent, approved.
#[test]
fn an_unreadable_outcome_url_still_sends_the_ended_notice() {
    let event = testing::event(EventType::Reboot);
    let mut host = TestHost::new()
        .config("webhook-url", WEBHOOK_URL)
        .config("outcome-url", OUTCOME_URL)
        .http_reply("POST", WEBHOOK_URL, 204, "");

    assert_eq!(
        call(&mut host, &event, Phase::EndedAfterStart),
        Decision::approve()
    );

    let ended = host
        .http_requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| json(&r.body))
        .next()
        .expect("the ended notice");
    assert_eq!(ended["transition"], "ended");
    assert_eq!(ended["verdict"], "");
}
