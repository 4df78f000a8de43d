//! The two pages in a real browser: headless Chromium (Debian's package) generates a Reboot on
//! the simulator console and watches the daemon's status page show the decisions and approval.

use std::time::Duration;

use forewarn_simulator::Transition;
use forewarn_test_support::browser::{assert_png, pages_command, screenshot_dir};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    ProbePlugin, TestEnv, accepted_approvals, http_get, install_bundled_plugin,
};
use serde::Deserialize;

/// How long the browser waits for each thing a page should show.
const WAIT: Duration = Duration::from_secs(60);
/// The generated Reboot's notice: long enough that it is approved well before NotBefore.
const NOT_BEFORE_SECONDS: u32 = 600;
/// The probe's `attempts`: it defers on the calls before this one and approves on it, so
/// the page has defers to show as well as approvals.
const PROBE_ATTEMPTS: u32 = 3;

/// What `tests/browser/pages.mjs` saw on the pages.
#[derive(Debug, Deserialize)]
struct PagesSeen {
    event_id: String,
    calls: Vec<CallSeen>,
    plugins: Vec<String>,
    ready: Option<String>,
    time_left: String,
    waiting_event_id: String,
    approval_post: RequestSeen,
    document: String,
    phone_overflow_px: i64,
    fleet_hidden: bool,
    outside_requests: Vec<String>,
    page_errors: Vec<String>,
}

/// One `[data-call]` of the event's timeline on the status page.
#[derive(Debug, Deserialize)]
struct CallSeen {
    #[serde(rename = "data-plugin")]
    plugin: Option<String>,
    #[serde(rename = "data-phase")]
    phase: Option<String>,
    #[serde(rename = "data-decision")]
    decision: Option<String>,
}

/// The approval POST as the console listed it.
#[derive(Debug, Deserialize)]
struct RequestSeen {
    text: String,
    status: Option<String>,
}

#[test]
fn a_reboot_generated_on_the_console_shows_its_decisions_and_approval_on_the_status_page() {
    let env = TestEnv::builder(forewarn_binary!())
        .scenario("idle")
        .speed(1.0)
        .plugins(&[ProbePlugin::new("drain", "defer-until-attempt")
            .config("attempts", &PROBE_ATTEMPTS.to_string())
            .config("retry-ms", "100")])
        .prepare();
    install_bundled_plugin(&env.dir.path().join("plugins"), "notify", None);
    let daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);

    let screenshots = screenshot_dir();
    let output = pages_command()
        .env(
            "FOREWARN_CONSOLE_URL",
            format!("{}/", env.simulator.base_url),
        )
        .env("FOREWARN_STATUS_URL", format!("http://{admin}/"))
        .env(
            "FOREWARN_NOT_BEFORE_SECONDS",
            NOT_BEFORE_SECONDS.to_string(),
        )
        .env("FOREWARN_WAIT_MS", WAIT.as_millis().to_string())
        .output()
        .expect("run node (tests/run.sh installs Node.js when missing)");
    assert!(
        output.status.success(),
        "the browser run failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        daemon.describe_for_failure()
    );
    let seen: PagesSeen = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "pages.mjs printed no JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });

    // The endpoint's own record: IMDS accepted the approval of the event the console made.
    let state = env.simulator.state();
    assert!(
        !accepted_approvals(&state, &seen.event_id).is_empty(),
        "the status page showed {} approved but the simulator accepted no approval of it",
        seen.event_id
    );
    assert!(
        seen.document.contains(&seen.event_id),
        "the console's document lacks the event"
    );
    assert!(
        seen.approval_post.text.contains(&seen.event_id),
        "the console's approval POST does not show its body: {}",
        seen.approval_post.text
    );
    assert_eq!(seen.approval_post.status.as_deref(), Some("200"));

    // The status page's timeline: the probe's defers, then every plugin's approval.
    let decisions = |plugin: &str, decision: &str| {
        seen.calls
            .iter()
            .filter(|call| {
                call.plugin.as_deref() == Some(plugin) && call.decision.as_deref() == Some(decision)
            })
            .count()
    };
    assert_eq!(
        decisions("drain", "defer"),
        PROBE_ATTEMPTS as usize - 1,
        "{:?}",
        seen.calls
    );
    assert!(decisions("drain", "approve") >= 1, "{:?}", seen.calls);
    assert!(decisions("notify", "approve") >= 1, "{:?}", seen.calls);
    assert!(
        seen.calls.iter().all(|call| call.phase.is_some()),
        "every call names its phase: {:?}",
        seen.calls
    );
    let mut plugins = seen.plugins.clone();
    plugins.sort();
    assert_eq!(plugins, ["drain", "notify"]);
    assert_eq!(seen.ready.as_deref(), Some("true"), "#readiness");
    // The Redeploy two hours ahead (past the one-hour lead time) counted down, then was
    // canceled from the console.
    // The page rounds to whole seconds: read within half a second of the event's creation
    // it still shows 2h00m.
    let minutes_left = parse_hours_minutes(&seen.time_left);
    assert!(
        minutes_left.is_some_and(|minutes| (110..=120).contains(&minutes)),
        "time left to a NotBefore two hours ahead: {}",
        seen.time_left
    );
    assert_eq!(
        env.simulator.state().transitions_of(&seen.waiting_event_id),
        [Transition::Appeared, Transition::Canceled]
    );

    // No [coordination]: no fleet section, and /status/fleet says what to configure.
    assert!(
        seen.fleet_hidden,
        "the fleet section shows without [coordination]"
    );
    let refused = http_get(&admin, "/status/fleet").expect_err("404 without [coordination]");
    assert!(
        refused.contains("404") && refused.contains("[coordination]"),
        "{refused}"
    );

    // Offline, phone-sized, no script errors.
    assert_eq!(seen.outside_requests, Vec::<String>::new());
    assert_eq!(seen.page_errors, Vec::<String>::new());
    assert!(
        seen.phone_overflow_px <= 0,
        "the status page scrolls sideways on a phone by {} px",
        seen.phone_overflow_px
    );
    for name in [
        "status-page.png",
        "simulator-console.png",
        "status-page-phone.png",
    ] {
        assert_png(&screenshots.join(name));
    }
}

/// Minutes in the status page's "1h59m" form of a time left; None for any other form.
fn parse_hours_minutes(text: &str) -> Option<u32> {
    let (hours, rest) = text.split_once('h')?;
    let minutes = rest.strip_suffix('m')?;
    Some(hours.parse::<u32>().ok()? * 60 + minutes.parse::<u32>().ok()?)
}

/// What `tests/browser/pages.mjs` saw with `FOREWARN_UNREACHABLE=1`.
#[derive(Debug, Deserialize)]
struct UnreachableSeen {
    before: String,
    banner: String,
    role: Option<String>,
    outside_requests: Vec<String>,
    page_errors: Vec<String>,
}

#[test]
fn the_status_page_shows_a_banner_once_the_daemon_stops_answering() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let env = TestEnv::builder(forewarn_binary!())
        .scenario("idle")
        .speed(1.0)
        .plugins(&[ProbePlugin::new("probe", "approve")])
        .prepare();
    let mut daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);

    let mut browser = pages_command()
        .env("FOREWARN_UNREACHABLE", "1")
        .env("FOREWARN_STATUS_URL", format!("http://{admin}/"))
        .env("FOREWARN_WAIT_MS", WAIT.as_millis().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node (tests/run.sh installs Node.js when missing)");
    let mut stdout = BufReader::new(browser.stdout.take().expect("piped stdout"));
    let mut drawn = String::new();
    stdout
        .read_line(&mut drawn)
        .expect("read the browser's first line");
    if !drawn.starts_with("drawn ") {
        let stderr = browser_stderr(&mut browser);
        let _ignored = browser.wait();
        panic!(
            "the status page was not drawn from the running daemon: {drawn}{stderr}\n{}",
            daemon.describe_for_failure()
        );
    }
    // The page has drawn the daemon's answer: now the daemon stops answering.
    daemon.kill();
    let mut rest = String::new();
    stdout
        .read_to_string(&mut rest)
        .expect("read the browser's output");
    let stderr = browser_stderr(&mut browser);
    let exit = browser.wait().expect("the browser run ends");
    assert!(exit.success(), "the browser run failed: {stderr}");
    let seen: UnreachableSeen = serde_json::from_str(rest.trim())
        .unwrap_or_else(|error| panic!("pages.mjs printed no JSON ({error}): {rest}\n{stderr}"));

    assert!(
        !seen.before.contains("does not answer"),
        "the banner showed while the daemon answered: {:?}",
        seen.before
    );
    assert!(
        seen.banner.contains("the daemon does not answer") && seen.banner.contains("retrying"),
        "{:?}",
        seen.banner
    );
    assert_eq!(
        seen.role.as_deref(),
        Some("status"),
        "read out to a screen reader"
    );
    assert_eq!(seen.outside_requests, Vec::<String>::new());
    assert_eq!(seen.page_errors, Vec::<String>::new());
    assert_png(&screenshot_dir().join("status-page-unreachable.png"));
}

/// What the browser run wrote to its (piped) stderr so far, for a failure message.
fn browser_stderr(browser: &mut std::process::Child) -> String {
    let mut stderr = String::new();
    if let Some(mut pipe) = browser.stderr.take() {
        let _ignored = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    stderr
}
