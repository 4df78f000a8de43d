//! The test host (`forewarn_sdk::testing`) as a plugin's tests use it: each stub reaches the
//! plugin, each call is recorded, and what is not stubbed gets the daemon's refusal.

use std::cell::Cell;
use std::rc::Rc;

use forewarn_sdk::host::{self, http, identity, log, state};
use forewarn_sdk::testing::{self, HostCall, TestHost};
use forewarn_sdk::{
    Context, Decision, Event, EventType, HostError, HttpResponse, Level, Phase, Plugin,
    StartContext,
};

/// Drains like a small lb-drain: config, readiness, state, an action and HTTP in one call.
struct Drainer;

impl Plugin for Drainer {
    fn on_event(event: &Event, phase: Phase, _ctx: &Context) -> Decision {
        if phase != Phase::Prepare {
            return Decision::approve();
        }
        let url = host::config_or("deregister-url", "http://lb.local/deregister");
        if let Err(error) = host::set_ready(false) {
            return Decision::defer(error.to_string(), Default::default());
        }
        let tries = state::get_u64("tries").unwrap_or(0) + 1;
        if let Err(error) = state::set_u64("tries", tries) {
            return Decision::defer(error.to_string(), Default::default());
        }
        match host::run_action("flush") {
            Ok(output) if output.succeeded() => {}
            Ok(output) => return Decision::defer(output.stderr, Default::default()),
            Err(error) => return Decision::defer(error.to_string(), Default::default()),
        }
        match http::post(&url, "text/plain", event.id.as_str()) {
            Ok(answer) if answer.is_success() => {
                log::info!("deregistered after {tries} tries");
                Decision::approve()
            }
            Ok(answer) => {
                Decision::defer(format!("answered {}", answer.status), Default::default())
            }
            Err(error) => Decision::defer(error.to_string(), Default::default()),
        }
    }

    fn on_start(ctx: &StartContext) {
        if ctx.first_run {
            let _ignored = state::set_bool("restored", true);
        }
    }
}

fn reason(decision: &Decision) -> &str {
    decision
        .deferral()
        .map_or("", |deferral| deferral.reason.as_str())
}

fn prepare(host: &mut TestHost) -> Decision {
    let event = testing::event(EventType::Reboot);
    host.on_event::<Drainer>(&event, Phase::Prepare, &testing::context_for(&event))
}

fn granted() -> TestHost {
    TestHost::new()
        .plugin_name("drainer")
        .config("deregister-url", "http://10.0.0.4:8080/out")
        .ready(true)
        .state("tries", "4")
        .action_result("flush", testing::exited(0))
        .http_reply("POST", "http://10.0.0.4:8080/out", 200, "")
}

#[test]
fn a_fully_granted_plugin_approves_and_every_call_is_recorded() {
    let mut host = granted();

    assert_eq!(prepare(&mut host), Decision::approve());

    assert!(!host.is_ready());
    assert_eq!(host.state_text("tries"), Some("5"));
    assert_eq!(host.actions_run(), ["flush"]);
    let sent = host.http_requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "POST");
    assert_eq!(sent[0].body, testing::EVENT_ID.as_bytes());
    assert_eq!(
        sent[0].headers,
        [("content-type".to_owned(), "text/plain".to_owned())]
    );
    assert_eq!(host.logs(), [(Level::Info, "deregistered after 5 tries")]);
    assert_eq!(
        host.effects(),
        [
            &HostCall::SetReady { ready: false },
            &HostCall::StateSet {
                key: "tries".into(),
                value: b"5".to_vec()
            },
            &HostCall::RunAction {
                name: "flush".into()
            },
            sent_call(&host),
        ]
    );
}

fn sent_call(host: &TestHost) -> &HostCall {
    host.calls()
        .iter()
        .find(|call| matches!(call, HostCall::Http(_)))
        .expect("an HTTP call")
}

#[test]
fn readiness_not_granted_gets_the_daemons_refusal() {
    let mut host = TestHost::new().plugin_name("drainer");

    let decision = prepare(&mut host);

    assert_eq!(
        reason(&decision),
        "not granted: plugin `drainer` may not change readiness: add `readiness = true` \
         under [capabilities] in its manifest"
    );
    assert!(host.is_ready());
    assert_eq!(host.effects(), [&HostCall::SetReady { ready: false }]);
}

#[test]
fn an_action_not_granted_or_failing_defers() {
    let mut host = TestHost::new().plugin_name("drainer").ready(true);
    let decision = prepare(&mut host);
    assert_eq!(
        reason(&decision),
        "not granted: plugin `drainer` may not run action `flush`: add \"flush\" to \
         [capabilities] actions in drainer.toml"
    );

    let failing = forewarn_sdk::ActionOutput {
        stderr: "disk full".into(),
        ..testing::exited(1)
    };
    let mut host = TestHost::new().ready(true).action_result("flush", failing);
    assert_eq!(reason(&prepare(&mut host)), "disk full");

    let mut host = TestHost::new()
        .ready(true)
        .action_error("flush", HostError::TimedOut);
    assert_eq!(
        reason(&prepare(&mut host)),
        "timed out: the plugin's deadline passed"
    );
}

#[test]
fn a_url_nothing_answers_is_not_granted_and_still_recorded() {
    let mut host = granted().config("deregister-url", "https://LB.example/v1/out");

    let decision = prepare(&mut host);

    assert_eq!(
        reason(&decision),
        "not granted: plugin `drainer` may not send HTTP requests to lb.example:443: add \
         \"lb.example:443\" to [capabilities] http in drainer.toml"
    );
    assert_eq!(host.http_requests()[0].url, "https://LB.example/v1/out");
}

#[test]
fn answers_stubbed_twice_come_in_order_and_the_last_repeats() {
    let url = "http://10.0.0.4:8080/out";
    let mut host = granted().http_reply("POST", url, 503, "busy").http_error(
        "POST",
        url,
        HostError::Failed("connection refused".into()),
    );

    // `granted()` queued the 200 first.
    assert_eq!(prepare(&mut host), Decision::approve());
    assert_eq!(reason(&prepare(&mut host)), "answered 503");
    assert_eq!(reason(&prepare(&mut host)), "failed: connection refused");
    assert_eq!(reason(&prepare(&mut host)), "failed: connection refused");
    assert_eq!(host.http_requests().len(), 4);
    assert_eq!(host.state_text("tries"), Some("8"));
}

#[test]
fn a_handler_answers_what_no_stub_does_and_may_log() {
    let seen = Rc::new(Cell::new(0));
    let counter = Rc::clone(&seen);
    let mut host = granted()
        .config("deregister-url", "http://10.0.0.5/any")
        .http_handler(move |request| {
            counter.set(counter.get() + 1);
            log::debug!("handler saw {}", request.url);
            Ok(HttpResponse {
                status: if request.url.ends_with("/any") {
                    202
                } else {
                    404
                },
                headers: Vec::new(),
                body: Vec::new(),
            })
        });

    assert_eq!(prepare(&mut host), Decision::approve());
    assert_eq!(seen.get(), 1);
    assert!(
        host.logs()
            .contains(&(Level::Debug, "handler saw http://10.0.0.5/any"))
    );
}

#[test]
fn tokens_are_granted_per_resource_like_the_daemon_compares_them() {
    let mut host = TestHost::new()
        .access_token("https://storage.azure.com/", "secret-token")
        .access_token_error(
            "https://vault.azure.net",
            HostError::Failed("no identity".into()),
        );

    let (storage, vault, graph) = host.run(|| {
        (
            identity::access_token("HTTPS://STORAGE.AZURE.COM"),
            identity::access_token("https://vault.azure.net/"),
            identity::access_token("https://graph.microsoft.com/"),
        )
    });

    assert_eq!(
        storage.map(|token| token.bearer()),
        Ok("Bearer secret-token".to_owned())
    );
    assert_eq!(vault, Err(HostError::Failed("no identity".into())));
    assert!(matches!(graph, Err(HostError::NotGranted(text)) if text.contains("azure-identity")));
    assert_eq!(host.calls().len(), 3);
}

#[test]
fn state_and_stubs_carry_over_between_runs_and_on_start_runs_too() {
    let mut host = granted();
    host.on_start::<Drainer>(&forewarn_sdk::StartContext {
        first_run: true,
        ..testing::start_context()
    });
    assert_eq!(host.state_text("restored"), Some("true"));

    let first = host.take_calls();
    assert_eq!(first.len(), 1);
    assert_eq!(prepare(&mut host), Decision::approve());
    assert_eq!(prepare(&mut host), Decision::approve());
    assert_eq!(host.state_text("tries"), Some("6"));
    assert_eq!(host.actions_run(), ["flush", "flush"]);
}

#[test]
fn host_calls_outside_a_test_host_get_an_empty_host_not_a_panic() {
    assert_eq!(host::config("anything"), None);
    assert_eq!(state::get("anything"), None);
    assert!(matches!(
        host::set_ready(false),
        Err(HostError::NotGranted(_))
    ));
    assert!(matches!(http::get("not a url"), Err(HostError::Invalid(_))));
    log::info("goes to stderr");
}

#[test]
fn the_running_host_is_the_tests_and_is_given_back_after_a_panic() {
    let mut host = TestHost::new().config("who", "inner");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        host.run(|| {
            let _ignored = state::set_string("written", "before the panic");
            panic!("the plugin panicked");
        })
    }));
    assert!(outcome.is_err());
    assert_eq!(host.state_text("written"), Some("before the panic"));
    assert_eq!(host::config("who"), None, "the test's host was given back");
    assert_eq!(host.run(|| host::config("who")).as_deref(), Some("inner"));
}
