//! The plugin's real `on_event` against the SDK's test host: it asks the workload, defers
//! while the checkpoint runs, approves when it is done (uploaded, in Blob mode).

use forewarn_sdk::testing::{self, HostCall, TestHost};
use forewarn_sdk::{Decision, EventType, HttpResponse, Phase};

use super::Checkpoint;

const CHECKPOINT_URL: &str = "http://127.0.0.1:7000/checkpoint";
const STATUS_URL: &str = "http://127.0.0.1:7000/checkpoint/status";
const DATA_URL: &str = "http://127.0.0.1:7000/checkpoint/data";
const CONTAINER_URL: &str = "https://acct.blob.core.windows.net/ckpts";

fn progress_key() -> String {
    format!("checkpoint/{}", testing::EVENT_ID)
}

fn prepare(host: &mut TestHost) -> Decision {
    let event = testing::event(EventType::Reboot);
    host.on_event::<Checkpoint>(&event, Phase::Prepare, &testing::context_for(&event))
}

fn reason(decision: &Decision) -> Option<&str> {
    decision.deferral().map(|deferral| deferral.reason.as_str())
}

#[test]
fn it_asks_the_workload_once_defers_while_running_and_approves_when_done() {
    let mut host = TestHost::new()
        .plugin_name("checkpoint")
        .config("checkpoint-url", CHECKPOINT_URL)
        .config("status-url", STATUS_URL)
        .http_reply("POST", CHECKPOINT_URL, 202, "")
        .http_reply("GET", STATUS_URL, 200, "running")
        .http_reply("GET", STATUS_URL, 200, "done");

    let first = prepare(&mut host);
    assert_eq!(reason(&first), Some("checkpoint running (200: running)"));
    assert_eq!(host.state_text(&progress_key()), Some("requested"));

    assert_eq!(prepare(&mut host), Decision::approve());
    assert_eq!(host.state_text(&progress_key()), Some("done"));

    let asked: Vec<(&str, &str)> = host
        .http_requests()
        .iter()
        .map(|request| (request.method.as_str(), request.url.as_str()))
        .collect();
    assert_eq!(
        asked,
        [
            ("POST", CHECKPOINT_URL),
            ("GET", STATUS_URL),
            ("GET", STATUS_URL)
        ],
        "the checkpoint is requested once"
    );
}

#[test]
fn a_refused_checkpoint_request_defers_and_starts_over_next_time() {
    let mut host = TestHost::new()
        .config("checkpoint-url", CHECKPOINT_URL)
        .http_reply("POST", CHECKPOINT_URL, 500, "disk full");

    let decision = prepare(&mut host);

    assert_eq!(
        reason(&decision),
        Some("checkpoint not taken: checkpoint request answered 500: disk full")
    );
    assert!(host.state_now().is_empty());
}

#[test]
fn a_checkpoint_action_still_running_defers_then_approves() {
    let mut host = TestHost::new()
        .config("checkpoint-action", "save-app")
        .action_result("save-app", testing::exited(75));
    assert_eq!(
        reason(&prepare(&mut host)),
        Some("checkpoint action still running")
    );

    let mut host = host.action_result("save-app", testing::exited(0));
    assert_eq!(prepare(&mut host), Decision::approve());
    assert_eq!(host.actions_run(), ["save-app", "save-app"]);
}

#[test]
fn blob_mode_uploads_the_checkpoint_with_the_identity_token_before_approving() {
    let blob_url = format!(
        "{CONTAINER_URL}/forewarn/checkpoints/{}/latest",
        testing::VM_NAME
    );
    let data = HttpResponse {
        status: 200,
        headers: vec![("content-length".into(), "5".into())],
        body: b"state".to_vec(),
    };
    let mut host = TestHost::new()
        .config("blob-container-url", CONTAINER_URL)
        .config("checkpoint-data-url", DATA_URL)
        .access_token("https://storage.azure.com/", "storage-token")
        .http_response("GET", DATA_URL, data)
        .http_reply("PUT", &blob_url, 201, "");

    assert_eq!(prepare(&mut host), Decision::approve());

    assert_eq!(host.state_text(&progress_key()), Some("uploaded"));
    let put = host
        .http_requests()
        .into_iter()
        .find(|request| request.method == "PUT")
        .cloned()
        .expect("a PUT of the blob");
    assert_eq!(put.url, blob_url);
    assert_eq!(put.body, b"state");
    assert!(
        put.headers
            .contains(&("authorization".into(), "Bearer storage-token".into()))
    );
    assert!(host.calls().contains(&HostCall::AccessToken {
        resource: "https://storage.azure.com/".into()
    }));
}

#[test]
fn blob_mode_without_the_identity_grant_defers() {
    let mut host = TestHost::new()
        .plugin_name("checkpoint")
        .config("blob-container-url", CONTAINER_URL)
        .config("checkpoint-data-url", DATA_URL)
        .http_reply("GET", DATA_URL, 200, "state");

    let decision = prepare(&mut host);

    let reason = reason(&decision).unwrap_or_default();
    assert!(
        reason.starts_with("checkpoint not uploaded: no managed identity token")
            && reason.contains("azure-identity in checkpoint.toml"),
        "{reason}"
    );
    assert_eq!(host.state_text(&progress_key()), Some("done"));
}
