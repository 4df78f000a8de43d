use std::collections::BTreeMap;

use forewarn_imds::ImdsTime;

use super::*;
use forewarn_daemon::coordination::{Connection, EventBarrier};
use forewarn_daemon::ops::status::{
    ClockView, DaemonPhase, DecisionView, FIRST_CALL_PATIENCE, LoadErrorView, PluginView,
    ProvenanceView, ReadinessView, UnreadableView,
};
use forewarn_daemon::storage_health::StorageView;
use forewarn_pipeline::state::{AnswerOutcome, ApprovalKind, CallPhase};

fn snapshot() -> StatusSnapshot {
    StatusSnapshot {
        version: "0.1.0".into(),
        phase: DaemonPhase::Running,
        waiting_for: None,
        imds_wait_seconds: None,
        vm_name: "vm-a".into(),
        generated_at: "2026-01-01T00:00:00Z".into(),
        readiness: ReadinessView {
            ready: false,
            held_by: vec!["lb-drain".into()],
            probers: 1,
            warning: None,
        },
        events: vec![EventView {
            id: "E1".into(),
            event_type: "Reboot".into(),
            status: "Scheduled".into(),
            not_before: Some("2026-01-01T00:04:05Z".into()),
            time_left_seconds: Some(245),
            resources: vec!["vm-a".into()],
            resources_total: 1,
            handling: "prepare (this VM)".into(),
            lifecycle: "scheduled".into(),
            preparing_since: Some("2026-01-01T00:00:00Z".into()),
            approval: "pending".into(),
            approval_state: ApprovalKind::Pending,
            plugins: vec![DecisionView {
                plugin: "lb-drain".into(),
                phase: CallPhase::Prepare,
                decision: AnswerOutcome::Defer,
                reason: "draining, 12 connections left".into(),
                at: "2026-01-01T00:00:00Z".into(),
                elapsed_ms: 3,
                prepare_attempts: 2,
            }],
            held_by_quarantined: vec![],
            unreadable: vec![UnreadableView {
                field: "DurationInSeconds".into(),
                value: "soon".into(),
                read_as: "impact unknown: no short-impact rule applies".into(),
            }],
        }],
        plugins: vec![PluginView {
            name: "lb-drain".into(),
            content_hash: "0123456789abcdef0123".into(),
            source: "/etc/forewarn/plugins.d/lb-drain.wasm".into(),
            subscribe: vec!["Reboot".into(), "Redeploy".into()],
            after: vec![],
            budget_ms: 10_000,
            resident_bytes: Some(320 * 1024),
            on_failure: FailurePolicy::Hold,
            provenance: None,
        }],
        load_errors: vec![LoadErrorView {
            file: "/etc/forewarn/plugins.d/bad.wasm".into(),
            error: "not a component".into(),
            advisory: false,
        }],
        plugin_warnings: vec![],
        quarantined_plugins: vec![],
        imds: PollView {
            polls: 42,
            last_attempt: Some("2026-01-01T00:00:00Z".into()),
            last_success: Some("2025-12-31T23:59:59Z".into()),
            last_error: Some("IMDS answered 500".into()),
            consecutive_failures: 1,
            errors_by_kind: BTreeMap::from([("server".into(), 3)]),
            requests_beside_unanswered: 2,
            clock: Some(ClockView {
                offset_ms: 10_240,
                uncertainty_ms: 400,
                samples: 12,
                beyond_bound: false,
                summary: "the VM's clock is 10.2 s behind IMDS's (± 0.4 s)".into(),
            }),
            ..PollView::default()
        },
        coordination: None,
        storage: StorageView::default(),
        scale_set_health: Default::default(),
    }
}

#[test]
fn table_shows_the_coordination_connection_and_its_last_error() {
    let mut out = String::new();
    render_coordination(
        &mut out,
        &CoordinationStatus {
            connection: Connection::Unreachable,
            last_error: Some("connection refused".into()),
            events: vec![EventBarrier {
                event_id: "e1".into(),
                ..EventBarrier::default()
            }],
            ..CoordinationStatus::default()
        },
    );
    assert!(
        out.contains("COORDINATION: etcd unreachable (1 event(s) coordinated)"),
        "{out}"
    );
    assert!(out.contains("last error: connection refused"), "{out}");
    assert!(!out.contains("FALLBACK"), "{out}");

    let mut out = String::new();
    render_coordination(
        &mut out,
        &CoordinationStatus {
            connection: Connection::NoQuorum,
            fallback: true,
            ..CoordinationStatus::default()
        },
    );
    assert!(out.contains("COORDINATION: etcd no-quorum"), "{out}");
    assert!(
        out.contains("FALLBACK: events naming several VMs follow `policy.group-approval`"),
        "{out}"
    );
}

#[test]
fn table_shows_where_an_installed_plugin_came_from_and_who_signed_it() {
    let mut snapshot = snapshot();
    snapshot.plugins[0].provenance = Some(ProvenanceView {
        source: "registry.example.com/acme/lb-drain:1.2.0@sha256:ab".into(),
        digest: "sha256:ab".into(),
        signer: "alice@example.com (SHA256:xyz)".into(),
        verified: true,
    });
    let table = render_table(&snapshot);
    assert!(
            table.contains("lb-drain installed from registry.example.com/acme/lb-drain:1.2.0@sha256:ab (digest sha256:ab, signed by alice@example.com (SHA256:xyz))"),
            "{table}"
        );
    assert!(!table.contains("CHANGED SINCE INSTALL"), "{table}");
    if let Some(provenance) = snapshot.plugins[0].provenance.as_mut() {
        provenance.verified = false;
    }
    assert!(render_table(&snapshot).contains("CHANGED SINCE INSTALL"));
}

#[test]
fn the_table_prints_text_from_outside_escaped_on_one_line() {
    let mut forging = snapshot();
    forging.events[0].id = "E1\n2026-01-01T00:00:00Z FORGED\u{1b}[2K".into();
    forging.load_errors.push(LoadErrorView {
        file: "/etc/forewarn/plugins.d/x\rFORGED.wasm".into(),
        error: "not a component\nFORGED".into(),
        advisory: false,
    });
    let table = render_table(&forging);
    assert!(
        !table.lines().any(|line| line.starts_with("2026-01-01")),
        "{table}"
    );
    assert!(
        !table
            .lines()
            .any(|line| line.contains("FORGED") && !line.contains("\\"))
    );
    assert!(
        !table.chars().any(|c| c.is_control() && c != '\n'),
        "{table:?}"
    );
}

#[test]
fn table_shows_events_decisions_plugins_and_poll() {
    let table = render_table(&snapshot());
    assert!(table.contains("VM vm-a"), "{table}");
    assert!(table.contains("NOT READY (held by lb-drain)"), "{table}");
    let event_row = table.lines().find(|line| line.starts_with("E1")).unwrap();
    for cell in [
        "Reboot",
        "Scheduled",
        "2026-01-01T00:04:05Z",
        "4m05s",
        "pending",
    ] {
        assert!(event_row.contains(cell), "{cell} missing from {event_row}");
    }
    let decision = table
        .lines()
        .find(|line| line.trim_start().starts_with("lb-drain") && line.contains("defer"))
        .unwrap();
    assert!(
        decision.contains("draining, 12 connections left"),
        "{decision}"
    );
    let plugin = table
        .lines()
        .find(|line| line.contains("0123456789ab"))
        .unwrap();
    assert!(
        !plugin.contains("0123456789abc"),
        "hash shortened: {plugin}"
    );
    assert!(
        plugin.contains("Reboot,Redeploy") && plugin.contains("10s"),
        "{plugin}"
    );
    assert!(table.contains("LOAD ERROR /etc/forewarn/plugins.d/bad.wasm: not a component"));
    assert!(table.contains("IMDS: 42 polls"), "{table}");
    assert!(
        table.contains("FAILING (1 in a row): IMDS answered 500"),
        "{table}"
    );
    assert!(table.contains("server=3"), "{table}");
    assert!(
        table.contains("polls sent beside a request IMDS had not answered: 2"),
        "{table}"
    );
    assert!(
        table.contains("E1 has a DurationInSeconds forewarn cannot read (\"soon\")"),
        "{table}"
    );
    assert!(
        table.contains("clock: the VM's clock is 10.2 s behind IMDS's (± 0.4 s)"),
        "{table}"
    );
}

/// Every part of the table at once, from a fixed snapshot: the output `forewarn status`
/// prints, to the character.
fn full_snapshot() -> StatusSnapshot {
    let mut full = snapshot();
    full.events.push(EventView {
        id: "E2-unplanned".into(),
        event_type: "Freeze".into(),
        status: "Started".into(),
        not_before: None,
        time_left_seconds: None,
        resources: vec!["vm-b".into()],
        resources_total: 1,
        handling: "ignore (another VM)".into(),
        lifecycle: "started".into(),
        preparing_since: None,
        approval: "not needed".into(),
        approval_state: ApprovalKind::Pending,
        plugins: vec![],
        held_by_quarantined: vec![],
        unreadable: vec![],
    });
    full.plugins.push(PluginView {
        name: "notify".into(),
        content_hash: "fedcba9876543210".into(),
        source: "bundled".into(),
        subscribe: vec!["*".into()],
        after: vec![],
        budget_ms: 1_500,
        resident_bytes: None,
        on_failure: FailurePolicy::Approve,
        provenance: None,
    });
    full.load_errors.push(LoadErrorView {
        file: "/etc/forewarn/plugins.d/chatty.wasm".into(),
        error: "too large".into(),
        advisory: true,
    });
    full.quarantined_plugins.push(QuarantinedPlugin {
        plugin: "guard".into(),
        on_failure: FailurePolicy::Hold,
        since_unix_ms: ImdsTime::from_unix_ms(1_800_000_000_000),
        failures: 5,
        window_ms: 60_000,
        last_failure: AnswerOutcome::Trap,
        reason: String::new(),
    });
    full.plugin_warnings
        .push("lb-drain: `after` names missing plugin x".into());
    full.coordination = Some(CoordinationStatus {
        connection: Connection::Unreachable,
        last_error: Some("connection refused".into()),
        events: vec![EventBarrier {
            event_id: "E1".into(),
            ..EventBarrier::default()
        }],
        ..CoordinationStatus::default()
    });
    full
}

#[test]
fn renders_a_fixed_snapshot_exactly() {
    let expected = r#"forewarn 0.1.0 on VM vm-a — running, NOT READY (held by lb-drain)  (as of 2026-01-01T00:00:00Z)

EVENTS
ID            TYPE    STATUS     NOT BEFORE            TIME LEFT  HANDLING             APPROVAL
E1            Reboot  Scheduled  2026-01-01T00:04:05Z  4m05s      prepare (this VM)    pending
E2-unplanned  Freeze  Started    -                     -          ignore (another VM)  not needed
  E1 has a DurationInSeconds forewarn cannot read ("soon"): impact unknown: no short-impact rule applies
  decisions on E1:
  PLUGIN    PHASE    DECISION  REASON                         AT
  lb-drain  prepare  defer     draining, 12 connections left  2026-01-01T00:00:00Z

PLUGINS
NAME      HASH          SUBSCRIBE        BUDGET  RESIDENT  ON FAILURE  SOURCE
lb-drain  0123456789ab  Reboot,Redeploy  10s     0.3 MiB   hold        /etc/forewarn/plugins.d/lb-drain.wasm
notify    fedcba987654  *                1500ms  -         approve     bundled
  LOAD ERROR /etc/forewarn/plugins.d/bad.wasm: not a component
  LOAD ERROR /etc/forewarn/plugins.d/chatty.wasm: too large (on-failure = "approve": does not hold approvals)
  QUARANTINED guard since 2027-01-15T08:00:00Z: 5 failed calls within 1m, the last trap: -; not called; on-failure = "hold": it holds the events it subscribes to (they start at NotBefore); replace its .wasm or .toml (or restart forewarn) to lift the quarantine
  WARNING lb-drain: `after` names missing plugin x

IMDS: 42 polls, last at 2026-01-01T00:00:00Z, last success 2025-12-31T23:59:59Z: FAILING (1 in a row): IMDS answered 500
  errors by kind: server=3
  polls sent beside a request IMDS had not answered: 2
  clock: the VM's clock is 10.2 s behind IMDS's (± 0.4 s)

COORDINATION: etcd unreachable (1 event(s) coordinated)
  last error: connection refused
"#;
    assert_eq!(render_table(&full_snapshot()), expected);
}

#[test]
fn columns_line_up() {
    let table = render_table(&snapshot());
    let header = table.lines().find(|line| line.starts_with("ID")).unwrap();
    let row = table.lines().find(|line| line.starts_with("E1")).unwrap();
    assert_eq!(header.find("TIME LEFT"), row.find("4m05s"));
}

#[test]
fn empty_daemon_says_so() {
    let mut empty = snapshot();
    empty.events.clear();
    empty.plugins.clear();
    empty.load_errors.clear();
    empty.readiness = ReadinessView {
        ready: true,
        held_by: vec![],
        probers: 0,
        warning: None,
    };
    empty.imds = PollView {
        polls: 0,
        last_attempt: None,
        last_success: None,
        last_error: None,
        consecutive_failures: 0,
        errors_by_kind: BTreeMap::new(),
        requests_beside_unanswered: 0,
        ..PollView::default()
    };
    let table = render_table(&empty);
    assert!(table.contains("EVENTS: none"), "{table}");
    assert!(table.contains("PLUGINS: none loaded"), "{table}");
    assert!(table.contains(", ready"), "{table}");
    assert!(
        table.contains("last at never, last success never: no answer yet"),
        "{table}"
    );
}

#[test]
fn a_quarantined_plugin_says_what_it_did_and_how_to_lift_it() {
    let mut snapshot = full_snapshot();
    let guard = &mut snapshot.quarantined_plugins[0];
    guard.reason = "wasm trap: unreachable".into();
    let notify = QuarantinedPlugin {
        plugin: "notify".into(),
        on_failure: FailurePolicy::Approve,
        ..guard.clone()
    };
    snapshot.quarantined_plugins.push(notify);
    let table = render_table(&snapshot);
    assert!(
            table.contains("QUARANTINED guard since 2027-01-15T08:00:00Z: 5 failed calls within 1m, the last trap: wasm trap: unreachable; not called; on-failure = \"hold\""),
            "{table}"
        );
    assert!(
        table.contains("QUARANTINED notify since")
            && table.contains("events are approved without it"),
        "{table}"
    );
}

#[test]
fn until_imds_answers_the_header_says_so_and_what_it_waits_for() {
    let mut waiting = snapshot();
    waiting.phase = DaemonPhase::WaitingForImds;
    waiting.waiting_for = Some(format!(
        "waiting for IMDS's first document for 1m15s (4 polls): {FIRST_CALL_PATIENCE}"
    ));
    let table = render_table(&waiting);
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(
        header.contains("— waiting for IMDS's first document, NOT READY"),
        "{header}"
    );
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), waiting.waiting_for.as_deref());
}
