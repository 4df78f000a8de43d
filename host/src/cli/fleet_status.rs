//! `forewarn fleet status`: asks the local daemon's admin endpoint for `/status/fleet` (every
//! VM of the coordination group, from their records in etcd) and prints one row per VM —
//! publishing or gone, its scale-set health (state and reasons' codes), its last IMDS poll, its events with its stage on each, and what holds
//! it — or the JSON it answered with `--json`.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use crate::cli::status_command::{DaemonArgs, fetch_admin};
use crate::cli::status_table::{escaped_copy, render_budget, write_table};
use forewarn_daemon::coordination::fleet_reader::{FleetView, FleetVm, FleetVmState};
use forewarn_daemon::coordination::fleet_record::{FleetEvent, FleetRecord};
use forewarn_daemon::ops::status::format_time_left;

/// `forewarn fleet status`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Fetches `/status/fleet` and prints it; fails naming the URL when the daemon does not
/// answer, and with the daemon's words when it has no `[coordination]`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let url = args.daemon.url("/status/fleet")?;
    let (status, body) = fetch_admin(&url).await.with_context(|| {
        format!("cannot get the fleet from {url}: is forewarn running (`systemctl status forewarn`)? If its admin endpoint listens elsewhere, pass --admin ADDRESS:PORT")
    })?;
    if !status.is_success() {
        anyhow::bail!("{url} answered {status}: {}", daemon_error(&body));
    }
    if args.daemon.json {
        println!("{}", body.trim_end());
        return Ok(ExitCode::SUCCESS);
    }
    let view: FleetView = serde_json::from_str(&body).with_context(|| {
        format!("{url} did not answer with a forewarn fleet (is it a different forewarn version?)")
    })?;
    print!("{}", render_fleet(&view, SystemTime::now()));
    Ok(ExitCode::SUCCESS)
}

/// The `error` of the daemon's JSON error, or its body, escaped and cut.
fn daemon_error(body: &str) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|value| value["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned());
    forewarn_daemon::log_format::field_text(&message)
}

/// The fleet as a table, one row per VM, as of `now`. Every text in it is escaped and cut
/// (log_format.rs): names and events come from other VMs' records.
pub fn render_fleet(view: &FleetView, now: SystemTime) -> String {
    let escaped = escaped_copy(view);
    let view = escaped.as_ref().unwrap_or(view);
    let gone = view
        .vms
        .iter()
        .filter(|vm| vm.state == FleetVmState::Gone)
        .count();
    let read = match view.read_at_unix_ms {
        Some(at) => format!(", read {} ago", age(at, now)),
        None => String::new(),
    };
    let mut out = format!(
        "FLEET as {} reads it from etcd ({}/fleet/): {} VM(s), {gone} gone{read}\n",
        view.vm,
        view.prefix.trim_end_matches('/'),
        view.vms.len(),
    );
    if let Some(error) = &view.error {
        out.push_str(&format!(
            "  cannot read etcd now: {error} (showing the last read)\n"
        ));
    }
    if view.truncated {
        out.push_str(&format!(
            "  more than {} VMs publish: those sorting after the last row are left out\n",
            view.vms_max
        ));
    }
    if let Some(budget) = &view.budget {
        render_budget(&mut out, budget, &view.vm);
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = view.vms.iter().map(|vm| fleet_row(vm, now)).collect();
    write_table(
        &mut out,
        &[
            "VM",
            "STATE",
            "SCALE SET",
            "LAST POLL",
            "EVENTS",
            "HELD BY",
            "LAST EVENTS",
        ],
        &rows,
    );
    if !view.impact_by_type.is_empty() {
        out.push_str("\nIMPACT BY TYPE (each VM's last events, measured inside the VM)\n");
        for line in &view.impact_by_type {
            out.push_str(&format!("  {}\n", line.describe()));
        }
    }
    out
}

fn fleet_row(vm: &FleetVm, now: SystemTime) -> Vec<String> {
    let state = match vm.gone_since_unix_ms {
        Some(since) => format!("gone {}", age(since, now)),
        None => vm.state.as_str().to_owned(),
    };
    let Some(record) = &vm.record else {
        let problem = vm.problem.clone().unwrap_or_default();
        return vec![
            vm.vm.clone(),
            state,
            "-".into(),
            "-".into(),
            problem,
            "-".into(),
            "-".into(),
        ];
    };
    vec![
        vm.vm.clone(),
        state,
        record.scale_set_health_summary(),
        last_poll(record, now),
        events_cell(record),
        held_by_cell(record),
        last_events_cell(record),
    ]
}

/// `Type impact` per finished event, the newest first: "Freeze paused 3.5 s, Reboot down
/// 6.9 s".
fn last_events_cell(record: &FleetRecord) -> String {
    if record.last_outcomes.is_empty() {
        return "-".into();
    }
    let cells: Vec<String> = record
        .last_outcomes
        .iter()
        .map(|outcome| format!("{} {}", outcome.event_type, outcome.impact.describe()))
        .collect();
    cells.join(", ")
}

fn last_poll(record: &FleetRecord, now: SystemTime) -> String {
    match (record.imds.last_poll_unix_ms, record.imds.answered) {
        (None, _) => "never".into(),
        (Some(at), true) => format!("{} ago", age(at, now)),
        (Some(at), false) => format!("{} ago, no answer", age(at, now)),
    }
}

/// `ID8 Type stage` per event, `; ` apart.
fn events_cell(record: &FleetRecord) -> String {
    if record.events.is_empty() {
        return "-".into();
    }
    let mut cells: Vec<String> = record.events.iter().map(event_cell).collect();
    if record.events_truncated > 0 {
        cells.push(format!("+{} more", record.events_truncated));
    }
    cells.join("; ")
}

fn event_cell(event: &FleetEvent) -> String {
    let short: String = event.id.chars().take(8).collect();
    format!("{short} {} {}", event.event_type, event.stage.as_str())
}

/// The plugins holding each event, and the readiness holds.
fn held_by_cell(record: &FleetRecord) -> String {
    let mut holds: Vec<String> = Vec::new();
    for event in &record.events {
        for holder in &event.holders {
            let hold = format!("{} ({})", holder.plugin, holder.hold.as_str());
            if !holds.contains(&hold) {
                holds.push(hold);
            }
        }
        if event.holders_truncated > 0 {
            holds.push(format!("+{} more", event.holders_truncated));
        }
    }
    for plugin in &record.readiness_holds {
        holds.push(format!("{plugin} (out of rotation)"));
    }
    if record.readiness_holds_truncated > 0 {
        holds.push(format!(
            "+{} more out of rotation",
            record.readiness_holds_truncated
        ));
    }
    match holds.is_empty() {
        true => "-".into(),
        false => holds.join(", "),
    }
}

/// How long before `now` the instant `at_ms` (ms since the epoch) was: "4s", "2m05s".
fn age(at_ms: u64, now: SystemTime) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(at_ms);
    let seconds = now.duration_since(at).map_or(0, |age| age.as_secs());
    format_time_left(i64::try_from(seconds).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};
    use forewarn_daemon::coordination::BudgetStatus;
    use forewarn_daemon::coordination::fleet_impact::ImpactByType;
    use forewarn_daemon::coordination::fleet_record::{
        FLEET_RECORD_SCHEMA, FleetHealthReason, FleetHold, FleetHolder, FleetImds, FleetImpact,
        FleetOutcome, FleetScaleSetHealth, FleetStage,
    };
    use forewarn_pipeline::outcome::verdict::PreparationOutcome;

    const NOW_MS: u64 = 1_800_000_000_000;

    fn record(vm: &str, plugin: &str) -> FleetRecord {
        FleetRecord {
            schema: FLEET_RECORD_SCHEMA,
            vm: vm.into(),
            version: "1".into(),
            imds: FleetImds {
                last_poll_unix_ms: Some(NOW_MS - 3_000),
                answered: true,
            },
            ready: true,
            readiness_holds: Vec::new(),
            readiness_holds_truncated: 0,
            events: vec![FleetEvent {
                id: "B5BF09B2-8E46-0AE2".into(),
                event_type: "Reboot".into(),
                status: "Scheduled".into(),
                not_before: None,
                not_before_raw: None,
                stage: FleetStage::Preparing,
                holders: vec![FleetHolder {
                    plugin: plugin.into(),
                    hold: FleetHold::Deferring,
                }],
                holders_truncated: 0,
            }],
            events_truncated: 0,
            scale_set_health: None,
            last_outcomes: Vec::new(),
            published_at_unix_ms: NOW_MS - 3_000,
        }
    }

    #[test]
    fn one_row_per_vm_with_its_stage_holders_and_gone_ones_marked() {
        assert_consistent::<Args>();
        assert!(parse::<Args>(&["--admin", "127.0.0.1:9555", "--json"]).is_ok());
        let view = FleetView {
            vm: "vm-a".into(),
            prefix: "/forewarn".into(),
            read_at_unix_ms: Some(NOW_MS - 1_000),
            error: None,
            vms: vec![
                FleetVm {
                    vm: "vm-a".into(),
                    state: FleetVmState::Publishing,
                    gone_since_unix_ms: None,
                    record: Some(FleetRecord {
                        scale_set_health: Some(FleetScaleSetHealth {
                            state: "Unhealthy".into(),
                            reasons: vec![FleetHealthReason {
                                code: "journal-not-durable".into(),
                                text: "the journal has not reached the disk for 40s".into(),
                            }],
                        }),
                        ..record("vm-a", "drain")
                    }),
                    problem: None,
                },
                FleetVm {
                    vm: "vm-b".into(),
                    state: FleetVmState::Gone,
                    gone_since_unix_ms: Some(NOW_MS - 12_000),
                    // A plugin name with a terminal escape: shown escaped.
                    record: Some(FleetRecord {
                        last_outcomes: vec![FleetOutcome {
                            id: "E9".into(),
                            event_type: "Freeze".into(),
                            ended_unix_ms: None,
                            preparation: PreparationOutcome::InTime { before_ms: None },
                            impact: FleetImpact::Pause {
                                milliseconds: 3_482,
                            },
                            verdict: String::new(),
                        }],
                        ..record("vm-b", "evil\u{1b}[2J")
                    }),
                    problem: None,
                },
            ],
            vms_max: 1000,
            truncated: false,
            budget: None,
            impact_by_type: Vec::new(),
        };
        let view = FleetView {
            impact_by_type: ImpactByType::of_fleet(&view.vms),
            ..view
        };
        let table = render_fleet(&view, UNIX_EPOCH + Duration::from_millis(NOW_MS));
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("2 VM(s), 1 gone"), "{table}");
        let row = |vm: &str| {
            *lines
                .iter()
                .find(|line| line.starts_with(vm))
                .unwrap_or_else(|| panic!("no row of {vm}: {table}"))
        };
        assert!(row("vm-a").contains("publishing"), "{table}");
        assert!(row("vm-a").contains("3s ago"), "{table}");
        assert!(row("vm-a").contains("B5BF09B2 Reboot preparing"), "{table}");
        assert!(row("vm-a").contains("drain (deferring)"), "{table}");
        assert!(row("vm-b").contains("gone 12s"), "{table}");
        assert!(
            row("vm-a").contains("Unhealthy: journal-not-durable"),
            "{table}"
        );
        // vm-b's record, from a forewarn before the scale-set health, has none.
        assert!(row("vm-b").contains("unknown"), "{table}");
        assert!(row("vm-b").contains("Freeze paused 3.5 s"), "{table}");
        assert!(row("vm-a").ends_with(" -"), "no last events: {table}");
        assert!(
            table.contains("IMPACT BY TYPE")
                && table.contains("  Freeze: 1 VM-event(s), impact median 3.5 s, max 3.5 s"),
            "{table}"
        );
        assert!(!table.contains('\u{1b}'), "{table}");
    }

    #[test]
    fn the_budget_shows_its_slots_holders_and_queue_in_order() {
        use forewarn_daemon::coordination::{QueuedEvent, SlotHolder};
        let budget = BudgetStatus {
            budget: "10%".into(),
            group: "web".into(),
            slots: 1,
            in_use: 1,
            known_vms: 12,
            holders: vec![SlotHolder {
                vm: "vm-c".into(),
                event_id: "E3".into(),
                forced: false,
                holder_alive: false,
            }],
            queue: vec![
                QueuedEvent {
                    vm: "vm-a".into(),
                    event_id: "E1".into(),
                    not_before_unix_ms: Some(1_796_000_000_000),
                },
                QueuedEvent {
                    vm: "vm-b".into(),
                    event_id: "E2".into(),
                    not_before_unix_ms: None,
                },
            ],
            ..BudgetStatus::default()
        };
        let mut out = String::new();
        render_budget(&mut out, &budget, "vm-a");
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].contains("10% of group \"web\" (12 VM(s) known): 1 of 1 slot(s) in use"),
            "{out}"
        );
        assert!(
            lines[1].contains("held by vm-c for E3 (its daemon is gone"),
            "{out}"
        );
        assert!(
            lines[2].contains("waiting 1: vm-a (this VM) for E1 (NotBefore 2026-"),
            "{out}"
        );
        assert!(
            lines[3].contains("waiting 2: vm-b for E2 (no NotBefore)"),
            "{out}"
        );
        assert!(!out.contains("APPROVING ALONE"), "{out}");
    }
}
