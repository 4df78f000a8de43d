//! End-to-end tests of the real daemon against IMDS as the docs describe it beyond the happy
//! path: a slow or failing first answer, approvals that start later, late starts, old shapes.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use forewarn_daemon::log_messages::IMDS_FIRST_DOCUMENT;
use forewarn_daemon::ops::status::{DaemonPhase, FIRST_CALL_PATIENCE, StatusSnapshot};
use forewarn_simulator::{StateSnapshot, Transition, load_scenario, stable_event_id};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, PluginDecision, ProbePlugin, TestEnv, accepted_approvals, assert_polite, http_get,
    now_unix_ms, same_id, transition_at, wait_for,
};

const WAIT: Duration = Duration::from_secs(60);
/// The safety margin the tests configure: small, since scenarios run sped up.
const SAFETY_MARGIN: &str = "safety-margin-ms = 300";
/// The built-in scenarios' events appear 5 s (scenario time) into the run.
const APPEAR_MS: u64 = 5_000;

/// One Reboot, 15 minutes' notice: something to see once IMDS answers.
const ONE_REBOOT: &str =
    "name = \"slow-first-answers\"\n\n[[events]]\ntype = \"Reboot\"\nappear_at = \"1s\"\n";
/// IMDS fails the first four GETs (503): with the poller's backoff (1 s, 2 s, 4 s) the
/// daemon waits about 7 s for its first document, however slowly it started.
const FIRST_ANSWERS_FAIL: &str = "kind = \"status\"\nstatus = 503\nfirst_requests = 4";
const FAILED_FIRST_ANSWERS: usize = 4;

fn forewarn() -> &'static Path {
    forewarn_binary!()
}

fn status(admin: &str) -> Result<StatusSnapshot, String> {
    let body = http_get(admin, "/status")?;
    serde_json::from_str(&body).map_err(|error| format!("bad /status ({error}): {body}"))
}

/// Arrival times (Unix ms) of the GETs of scheduledevents the simulator answered `status`.
fn document_gets(state: &StateSnapshot, status: u16) -> Vec<u64> {
    state
        .requests
        .iter()
        .filter(|request| {
            request.method == "GET"
                && request.path.ends_with("/metadata/scheduledevents")
                && request.status == status
        })
        .map(|request| request.at_unix_ms)
        .collect()
}

/// The phases `plugin` answered for `event_id`, repeated answers of a phase collapsed.
fn phases(decisions: &[PluginDecision], event_id: &str, plugin: &str) -> Vec<String> {
    let mut phases: Vec<String> = Vec::new();
    for decision in decisions {
        if same_id(&decision.event_id, event_id)
            && decision.plugin == plugin
            && phases.last() != Some(&decision.phase)
        {
            phases.push(decision.phase.clone());
        }
    }
    phases
}

/// The first `phase` answer of `plugin` for `event_id`.
fn first_answer<'a>(
    decisions: &'a [PluginDecision],
    event_id: &str,
    plugin: &str,
    phase: &str,
) -> Option<&'a PluginDecision> {
    decisions
        .iter()
        .find(|d| same_id(&d.event_id, event_id) && d.plugin == plugin && d.phase == phase)
}

/// The simulator on `scenario` (built-in) at `speed`, one probe plugin in `mode`, vm-a's
/// daemon started.
fn start_with_probe(scenario: &str, speed: f64, mode: &str) -> TestEnv {
    TestEnv::builder(forewarn())
        .scenario(scenario)
        .speed(speed)
        .plugins(&[ProbePlugin::new("probe", mode)])
        .policy(&[SAFETY_MARGIN])
        .wait(WAIT)
        .start_on_first_poll()
        .start()
}

/// The probe heard prepare, started and ended-after-start for `id`, in that order.
fn assert_prepared_started_recovered(decisions: &[PluginDecision], id: &str, context: &str) {
    assert_eq!(
        phases(decisions, id, "probe"),
        ["prepare", "started", "ended-after-start"],
        "{context}"
    );
}

// ---- the first answer (IMDS may take two minutes to answer the first call) ------------------

/// While IMDS fails its first answers, `/status` and `forewarn status` say the daemon waits
/// for IMDS's first document and for how long; once IMDS answers, the phase is running.
#[test]
fn status_says_it_waits_for_imds_until_the_first_document_then_running() {
    let env = TestEnv::builder(forewarn())
        .scenario_text(ONE_REBOOT)
        .fault(FIRST_ANSWERS_FAIL)
        .prepare();
    let daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);
    let waiting = wait_for(WAIT, "/status to say it waits for IMDS", || {
        let snapshot = status(&admin)?;
        match snapshot.phase {
            DaemonPhase::WaitingForImds => Ok(snapshot),
            other => Err(format!("phase {other}")),
        }
    });
    assert!(waiting.imds_wait_seconds.is_some(), "{waiting:?}");
    assert_eq!(waiting.imds.last_success, None, "{waiting:?}");
    let waiting_for = waiting.waiting_for.clone().unwrap_or_default();
    assert!(waiting_for.contains(FIRST_CALL_PATIENCE), "{waiting_for}");

    // The text output says so too (retried: each `forewarn status` is one look).
    let phase_text = DaemonPhase::WaitingForImds.to_string();
    wait_for(WAIT, "`forewarn status` to say it waits for IMDS", || {
        let output = Command::new(forewarn())
            .args(["status", "--admin", &admin])
            .output()
            .map_err(|error| error.to_string())?;
        let table = String::from_utf8_lossy(&output.stdout).into_owned();
        if table.contains(&phase_text) && table.contains(FIRST_CALL_PATIENCE) {
            Ok(())
        } else {
            Err(table)
        }
    });

    let running = wait_for(WAIT, "/status to say running", || {
        let snapshot = status(&admin)?;
        match snapshot.phase {
            DaemonPhase::Running => Ok(snapshot),
            other => Err(format!("phase {other}")),
        }
    });
    let state = env.simulator.state();
    assert_eq!(
        state.faults.len(),
        FAILED_FIRST_ANSWERS,
        "{:?}",
        state.faults
    );
    assert!(
        !document_gets(&state, 200).is_empty(),
        "running before IMDS served a document"
    );
    assert_eq!(running.imds_wait_seconds, None);
    assert_eq!(running.waiting_for, None);
    assert!(running.imds.last_success.is_some());
    let first = daemon.wait_for_message(WAIT, IMDS_FIRST_DOCUMENT);
    assert_eq!(first.len(), 1, "{}", daemon.describe_for_failure());
}

/// Under systemd (`NOTIFY_SOCKET`), `READY=1` arrives only after the simulator has served
/// the daemon its first document, after the failed first answers.
#[test]
fn systemd_hears_ready_only_after_imds_served_its_first_document() {
    let env = TestEnv::builder(forewarn())
        .scenario_text(ONE_REBOOT)
        .fault(FIRST_ANSWERS_FAIL)
        .prepare();
    let socket_path = env.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(WAIT))
        .expect("a read timeout on the notify socket");
    let notify_socket = socket_path.to_str().expect("a UTF-8 temp path");
    let daemon =
        Daemon::start_with_env(forewarn(), &env.config, &[("NOTIFY_SOCKET", notify_socket)]);
    let mut before_ready = Vec::new();
    let mut buffer = [0_u8; 4096];
    let ready_at = loop {
        let length = socket.recv(&mut buffer).unwrap_or_else(|error| {
            panic!(
                "no READY=1 within {WAIT:?} ({error}); got {before_ready:?}; {}",
                daemon.describe_for_failure()
            )
        });
        let arrived = now_unix_ms();
        let message = String::from_utf8_lossy(&buffer[..length]).into_owned();
        if message.lines().any(|line| line == "READY=1") {
            break arrived;
        }
        before_ready.push(message);
    };
    let state = env.simulator.state();
    let failures: Vec<u64> = state.faults.iter().map(|fault| fault.at_unix_ms).collect();
    assert_eq!(failures.len(), FAILED_FIRST_ANSWERS, "{:?}", state.faults);
    let first_document = document_gets(&state, 200)
        .into_iter()
        .min()
        .expect("the simulator served a document");
    assert!(
        failures.iter().all(|failed| *failed < first_document),
        "the first document came after the failed answers: {failures:?} vs {first_document}"
    );
    assert!(
        first_document <= ready_at,
        "READY=1 arrived at {ready_at}, before the first document was asked for at {first_document}"
    );
}

// ---- approvals that start the event later, and late starts ----------------------------------

/// `approval-waits-for-host`: the daemon approves, the event starts 20 s (scenario) later;
/// the plugins hear `started` only then, and recover after it ends.
#[test]
fn an_approval_that_starts_the_event_later_is_followed_by_started_then_recovery() {
    let scenario = "approval-waits-for-host";
    let speed = 10.0;
    let env = start_with_probe(scenario, speed, "approve");
    let id = stable_event_id(scenario, 0);
    let decisions = env.wait_for_phase(&id, "probe", "ended-after-start");
    let state = env.state();
    let context = env.context();
    let approvals = accepted_approvals(&state, &id);
    let first_approval = approvals.first().expect("an accepted approval");
    assert_eq!(first_approval.vm, "vm-a", "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert_eq!(
        started - first_approval.at_scenario_ms,
        20_000,
        "the event starts 20 s after the approval; {context}"
    );
    let heard_started = first_answer(&decisions, &id, "probe", "started").expect("started");
    let wall_delay_ms = (20_000.0 / speed) as u64;
    assert!(
        heard_started.at_unix_ms >= first_approval.at_unix_ms + wall_delay_ms,
        "the plugin heard `started` before the event started; {context}"
    );
    assert_prepared_started_recovered(&decisions, &id, &context);
    assert_polite(&state);
}

/// An event still Scheduled a minute after its NotBefore: the daemon keeps running and
/// polite meanwhile, and handles the Started when it comes (plugins hear `started`, then
/// recover). The plugin defers, so the daemon must never approve: no POST names the event,
/// and it starts a minute after NotBefore, as IMDS starts an unapproved one. Whether
/// prepare is called after NotBefore is not asserted here.
#[test]
fn an_event_still_scheduled_after_not_before_is_handled_when_it_starts() {
    let scenario = "name = \"late\"\nend_after = \"10s\"\n\n[[events]]\ntype = \"Reboot\"\nappear_at = \"5s\"\nnotice = \"1m\"\nstarts_late_by = \"1m\"\nruns_for = \"30s\"\n";
    let mut env = TestEnv::builder(forewarn())
        .scenario_text(scenario)
        .speed(10.0)
        .plugins(&[ProbePlugin::new("probe", "defer")])
        .policy(&[SAFETY_MARGIN])
        .wait(WAIT)
        .start();
    let id = stable_event_id("late", 0);
    let decisions = env.wait_for_phase(&id, "probe", "ended-after-start");
    let state = env.state();
    let context = env.context();
    assert!(!env.daemon.has_exited(), "{context}");
    let not_before_ms = APPEAR_MS + 60_000;
    let posted: Vec<_> = state
        .approvals
        .iter()
        .filter(|approval| same_id(&approval.event_id, &id))
        .collect();
    assert!(
        posted.is_empty(),
        "the plugin only deferred, yet the event was approved: {posted:?}; {context}"
    );
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert_eq!(
        started,
        not_before_ms + 60_000,
        "unapproved, it starts a minute after NotBefore; {context}"
    );
    let phases = phases(&decisions, &id, "probe");
    let started_at = phases.iter().position(|phase| phase == "started");
    let recovered_at = phases.iter().position(|phase| phase == "ended-after-start");
    assert!(
        started_at.is_some() && started_at < recovered_at,
        "started, then ended-after-start: {phases:?}; {context}"
    );
    assert_polite(&state);
}

// ---- old api-version shapes ---------------------------------------------------------------

/// `api-2017-03-01`: no EventSource, Description or DurationInSeconds, and `_vm-a` in
/// Resources; the daemon finds its VM, prepares, approves, and recovers.
#[test]
fn a_2017_03_01_document_with_underscored_names_is_prepared_and_approved() {
    let scenario = "api-2017-03-01";
    let shape = load_scenario(scenario).expect("built in").shape;
    assert_eq!(shape.as_deref(), Some("2017-03-01"));
    // Speed 10: the event's minute is 6 s (wall), long enough to hear `started` under load.
    let env = start_with_probe(scenario, 10.0, "approve");
    let id = stable_event_id(scenario, 0);
    let decisions = env.wait_for_phase(&id, "probe", "ended-after-start");
    let state = env.state();
    let context = env.context();
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "{context}");
    assert_eq!(approvals[0].vm, "vm-a", "{context}");
    assert!(
        approvals[0].at_scenario_ms < APPEAR_MS + 15 * 60_000,
        "{context}"
    );
    assert_prepared_started_recovered(&decisions, &id, &context);
    assert_polite(&state);
}

// ---- the VM goes away ----------------------------------------------------------------------

/// `spot-short-notice`: 5 s of notice. The daemon approves within it; at Started the VM is
/// gone (`vm_goes_away`), so the test stops the daemon there and expects nothing more.
#[test]
fn a_five_second_preempt_is_approved_before_not_before_and_the_vm_goes_away() {
    let scenario = "spot-short-notice";
    let spec = load_scenario(scenario).expect("built in").events[0].clone();
    assert!(spec.vm_goes_away);
    let notice_ms = u64::try_from(spec.notice_or_default().as_millis()).expect("small");
    let mut env = start_with_probe(scenario, 1.0, "approve");
    let id = stable_event_id(scenario, 0);
    let state = env.wait_for_transition(&id, Transition::Started);
    env.kill_daemon();
    let context = env.context();
    let approvals = accepted_approvals(&state, &id);
    let first = approvals.first().expect("approved");
    assert!(
        first.at_scenario_ms < APPEAR_MS + notice_ms,
        "approved at {} ms, NotBefore at {} ms; {context}",
        first.at_scenario_ms,
        APPEAR_MS + notice_ms
    );
    assert_polite(&state);
}

// ---- values forewarn cannot read (issue 32) --------------------------------------------

/// The NotBefore texts of the odd events: epoch seconds, -1, garbage, an impossible date.
const UNREADABLE_NOT_BEFORE: [(&str, &str); 4] = [
    ("epoch", "1649716018"),
    ("minus-one", "-1"),
    ("garbage", "garbage"),
    ("feb-30", "2022-02-30T10:00:00Z"),
];

/// Every event 3 days ahead, far beyond the lead time (1 h): a NotBefore that can be read
/// waits; one that cannot is prepared at once, as if the event may start at any moment.
/// A date without a zone is read as UTC (here long past: prepared at once too). IMDS keeps
/// the approved events Scheduled (with their odd NotBefore) while it waits for the host.
#[test]
fn events_whose_not_before_cannot_be_read_are_prepared_at_once_and_shown() {
    let mut scenario = String::from("name = \"unreadable\"\nopen_ended = true\n");
    let mut event = |id: &str, not_before_text: Option<&str>| {
        scenario.push_str(&format!(
            "\n[[events]]\nid = \"{id}\"\ntype = \"Reboot\"\nresources = [\"vm-a\"]\nappear_at = \"1s\"\nnotice = \"3d\"\nstart_after_approval = \"1h\"\n"
        ));
        if let Some(text) = not_before_text {
            scenario.push_str(&format!("not_before_text = \"{text}\"\n"));
        }
    };
    event("readable", None);
    event("no-zone", Some("Mon, 11 Apr 2022 22:26:58"));
    for (id, text) in UNREADABLE_NOT_BEFORE {
        event(id, Some(text));
    }
    let env = TestEnv::builder(forewarn())
        .scenario_text(&scenario)
        .plugins(&[ProbePlugin::new("probe", "approve").subscribe(&["Reboot"])])
        .wait(WAIT)
        .start();
    // Prepared and approved at IMDS at once, 3 days ahead.
    let odd: Vec<&str> = UNREADABLE_NOT_BEFORE
        .iter()
        .map(|(id, _)| *id)
        .chain(["no-zone"])
        .collect();
    env.simulator()
        .wait_for_state(WAIT, "the odd events approved", |state| {
            odd.iter()
                .all(|id| accepted_approvals(state, id).len() == 1)
        });
    let admin = env.daemon.admin_address(WAIT);
    let snapshot = wait_for(WAIT, "the odd events in /status", || {
        let snapshot = status(&admin)?;
        let shown = snapshot
            .events
            .iter()
            .filter(|event| !event.unreadable.is_empty())
            .count();
        match shown {
            4 => Ok(snapshot),
            _ => Err(format!("{shown} shown: {:?}", snapshot.events)),
        }
    });
    for (id, text) in UNREADABLE_NOT_BEFORE {
        let event = snapshot
            .events
            .iter()
            .find(|event| event.id == id)
            .unwrap_or_else(|| panic!("{id} not in /status"));
        assert_eq!(event.unreadable[0].field, "NotBefore", "{id}");
        assert_eq!(event.unreadable[0].value, text, "{id}");
    }
    let readable = snapshot
        .events
        .iter()
        .find(|event| event.id == "readable")
        .expect("the readable event in /status");
    assert_eq!(readable.lifecycle, "scheduled, waiting for the lead time");
    assert!(
        !env.daemon
            .decisions()
            .iter()
            .any(|decision| decision.event_id == "readable"),
        "the readable event 3 days ahead was prepared"
    );
    let metrics = http_get(&admin, "/metrics").expect("/metrics");
    assert!(
        metrics.contains("forewarn_events_unreadable_total{field=\"NotBefore\"} 4"),
        "{metrics}"
    );
}

/// An EventId that carries a whole forged log line of the text format, then a carriage
/// return and an escape sequence that would erase the real line on a terminal.
const FORGING_ID: &str = "E1\n2026-01-01T00:00:00.000000Z  INFO forewarn_daemon::daemon: approved at IMDS event_ids=FORGED\r\u{1b}[2K";

/// Two Reboots whose IMDS text forges log lines: the first by its EventId (it names only
/// vm-a, and no plugin subscribes: approved at once under `approve-unsubscribed`), the
/// second by its EventType and its resource names.
fn forging_scenario() -> String {
    let toml_string = |text: &str| serde_json::to_string(text).unwrap();
    format!(
        "name = \"forging\"\nend_after = \"10m\"\n\n\
         [[events]]\nid = {}\ntype = \"Reboot\"\nresources = [\"vm-a\"]\nappear_at = \"1s\"\nnotice = \"10m\"\n\n\
         [[events]]\nid = \"E2\"\ntype = {}\nresources = [\"vm-a\", {}, {}]\nappear_at = \"1s\"\nnotice = \"10m\"\n",
        toml_string(FORGING_ID),
        toml_string(
            "Reboot\n2026-01-01T00:00:00.000000Z  INFO forewarn_daemon::daemon: FORGED-TYPE"
        ),
        toml_string(
            "vm-b\n2026-01-01T00:00:00.000000Z ERROR forewarn_daemon::daemon: FORGED-RESOURCE"
        ),
        toml_string("\u{1b}]52;c;Zm9yZ2Vk\u{7}\u{1b}[31mred"),
    )
}

/// IMDS text cannot forge lines of the daemon's text log (issue 33: an EventId with a
/// newline made `… INFO forewarn_daemon::daemon: approved at IMDS event_ids=FORGED` lines).
/// The daemon still approves the forging event under its exact id at IMDS.
#[test]
fn imds_text_cannot_forge_lines_of_the_text_log() {
    let env = TestEnv::builder(forewarn())
        .scenario_text(&forging_scenario())
        .policy(&["approve-unsubscribed = true"])
        .prepare();
    let daemon = Daemon::start_with_text_log(forewarn(), &env.config);
    let state = env
        .simulator
        .wait_for_state(WAIT, "the forging event approved at IMDS", |state| {
            !accepted_approvals(state, FORGING_ID).is_empty()
        });
    assert!(accepted_approvals(&state, FORGING_ID)[0].event_id == FORGING_ID);
    // Both events' transitions are logged (the second's with its forging type and names).
    let log = wait_for(WAIT, "both events' transitions in the text log", || {
        let lines = daemon.unparsed();
        let transitions = lines
            .iter()
            .filter(|line| line.contains("event transition"))
            .count();
        (transitions >= 2)
            .then_some(lines.clone())
            .ok_or(lines.join("\n"))
    });
    let forged: Vec<&String> = log
        .iter()
        .filter(|line| line.starts_with("2026-01-01") || line.chars().any(char::is_control))
        .collect();
    assert!(
        forged.is_empty(),
        "forged or raw lines in the text log: {forged:#?}"
    );
    assert!(
        log.iter()
            .any(|line| line.contains("E1\\n2026-01-01T00:00:00")),
        "the EventId is logged escaped: {log:#?}"
    );
}
