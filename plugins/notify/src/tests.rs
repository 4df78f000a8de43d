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
