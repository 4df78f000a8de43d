//! `forewarn status`'s table: a [`StatusSnapshot`] (the daemon's `GET /status`) as text a
//! person reads at a glance — events and each plugin's latest decision, plugins and their
//! load errors, the last IMDS poll, the etcd link.

use std::fmt::Write as _;
use std::time::Duration;

use forewarn_daemon::coordination::{BudgetStatus, CoordinationStatus};
use forewarn_daemon::ops::status::{EventView, PollView, StatusSnapshot, format_time_left};
use forewarn_manifest::FailurePolicy;
use forewarn_pipeline::log_fields::rfc3339;
use forewarn_pipeline::quarantine::QuarantinedPlugin;

/// The table `forewarn status` prints: events, each plugin's latest decision, plugins and
/// their load errors, and the last IMDS poll. Every text in it is escaped and cut
/// (log_format.rs), whoever answered the status.
pub fn render_table(snapshot: &StatusSnapshot) -> String {
    let escaped = escaped_copy(snapshot);
    let snapshot = escaped.as_ref().unwrap_or(snapshot);
    let mut out = String::new();
    let ready = if snapshot.readiness.ready {
        "ready".to_owned()
    } else {
        format!(
            "NOT READY (held by {})",
            snapshot.readiness.held_by.join(", ")
        )
    };
    let _ = writeln!(
        out,
        "forewarn {} on VM {} — {}, {}  (as of {})",
        snapshot.version,
        or_dash(&snapshot.vm_name),
        snapshot.phase,
        ready,
        snapshot.generated_at
    );
    if let Some(warning) = &snapshot.readiness.warning {
        let _ = writeln!(out, "warning: {warning}");
    }
    render_scale_set_health(&mut out, snapshot);
    if let Some(waiting_for) = &snapshot.waiting_for {
        let _ = writeln!(out, "\n{waiting_for}");
    }
    out.push('\n');
    render_events(&mut out, &snapshot.events);
    out.push('\n');
    render_plugins(&mut out, snapshot);
    out.push('\n');
    render_poll(&mut out, &snapshot.imds);
    if let Some(coordination) = &snapshot.coordination {
        render_coordination(&mut out, coordination);
    }
    render_storage(&mut out, &snapshot.storage);
    out
}

/// The scale set's view (`/health/scale-set`): one line, and a line per Unhealthy reason.
fn render_scale_set_health(out: &mut String, snapshot: &StatusSnapshot) {
    let health = &snapshot.scale_set_health;
    if health.state.is_empty() {
        return;
    }
    let skip = health
        .skip_upgrade
        .as_deref()
        .map(|cause| format!(", skips the rolling upgrade: {cause}"))
        .unwrap_or_default();
    let _ = writeln!(out, "scale set: {}{skip}", health.state);
    for reason in &health.reasons {
        let _ = writeln!(out, "  unhealthy ({}): {}", reason.code, reason.text);
    }
}

/// `answer` with every string escaped and cut; None if it does not survive the trip
/// through JSON (it always does: it is what the daemon answered).
pub(crate) fn escaped_copy<T>(answer: &T) -> Option<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut value = serde_json::to_value(answer).ok()?;
    forewarn_daemon::log_format::escape_json_strings(&mut value);
    serde_json::from_value(value).ok()
}

fn render_coordination(out: &mut String, coordination: &CoordinationStatus) {
    out.push_str(&format!(
        "\nCOORDINATION: etcd {} ({} event(s) coordinated)\n",
        coordination.connection.as_str(),
        coordination.events.len()
    ));
    if coordination.fallback {
        out.push_str(
            "  FALLBACK: events naming several VMs follow `policy.group-approval` until etcd \
             coordinates again\n",
        );
    }
    if let Some(error) = &coordination.last_error {
        out.push_str(&format!("  last error: {error}\n"));
    }
    if let Some(budget) = &coordination.budget {
        render_budget(out, budget, &coordination.vm_name);
    }
}

/// The disruption budget's lines: slots and who holds them, then the queue in its order.
pub(crate) fn render_budget(out: &mut String, budget: &BudgetStatus, this_vm: &str) {
    out.push_str(&format!(
        "  DISRUPTION BUDGET {} of group \"{}\" ({} VM(s) known): {} of {} slot(s) in use\n",
        budget.budget, budget.group, budget.known_vms, budget.in_use, budget.slots
    ));
    for holder in &budget.holders {
        let mut notes = Vec::new();
        if holder.forced {
            notes.push("taken without waiting");
        }
        if !holder.holder_alive {
            notes.push("its daemon is gone: the VM is down");
        }
        let notes = match notes.is_empty() {
            true => String::new(),
            false => format!(" ({})", notes.join("; ")),
        };
        out.push_str(&format!(
            "    held by {} for {}{notes}\n",
            holder.vm, holder.event_id
        ));
    }
    for (place, queued) in budget.queue.iter().enumerate() {
        let not_before = queued.not_before_unix_ms.map_or_else(
            || "no NotBefore".to_owned(),
            |at| format!("NotBefore {}", rfc3339_ms(at)),
        );
        let mine = if queued.vm == this_vm {
            " (this VM)"
        } else {
            ""
        };
        out.push_str(&format!(
            "    waiting {}: {}{mine} for {} ({not_before})\n",
            place + 1,
            queued.vm,
            queued.event_id
        ));
    }
    if budget.approving_alone {
        out.push_str(
            "    APPROVING ALONE: etcd cannot be reached and `coordination.budget-unreachable` \
             is \"approve-alone\": waiting events are approved without a slot\n",
        );
    }
}

fn rfc3339_ms(unix_ms: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(unix_ms);
    humantime::format_rfc3339_seconds(time).to_string()
}

fn render_events(out: &mut String, events: &[EventView]) {
    if events.is_empty() {
        out.push_str("EVENTS: none\n");
        return;
    }
    out.push_str("EVENTS\n");
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|event| {
            vec![
                event.id.to_string(),
                event.event_type.clone(),
                event.status.clone(),
                event.not_before.clone().unwrap_or_else(|| "-".into()),
                event
                    .time_left_seconds
                    .map(format_time_left)
                    .unwrap_or_else(|| "-".into()),
                event.handling.clone(),
                event.approval.clone(),
            ]
        })
        .collect();
    let header = [
        "ID",
        "TYPE",
        "STATUS",
        "NOT BEFORE",
        "TIME LEFT",
        "HANDLING",
        "APPROVAL",
    ];
    write_table(out, &header, &rows);
    for event in events {
        for unreadable in &event.unreadable {
            let _ = writeln!(
                out,
                "  {} has a {} forewarn cannot read (\"{}\"): {}",
                event.id, unreadable.field, unreadable.value, unreadable.read_as
            );
        }
    }
    for event in events {
        if event.plugins.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  decisions on {}:", event.id);
        let rows: Vec<Vec<String>> = event
            .plugins
            .iter()
            .map(|decision| {
                vec![
                    format!("  {}", decision.plugin),
                    decision.phase.to_string(),
                    decision.decision.to_string(),
                    or_dash(&decision.reason).to_owned(),
                    decision.at.clone(),
                ]
            })
            .collect();
        write_table(
            out,
            &["  PLUGIN", "PHASE", "DECISION", "REASON", "AT"],
            &rows,
        );
    }
}

fn render_plugins(out: &mut String, snapshot: &StatusSnapshot) {
    if snapshot.plugins.is_empty() {
        out.push_str("PLUGINS: none loaded\n");
    } else {
        out.push_str("PLUGINS\n");
        let rows: Vec<Vec<String>> = snapshot
            .plugins
            .iter()
            .map(|plugin| {
                vec![
                    plugin.name.clone(),
                    plugin.content_hash.chars().take(12).collect(),
                    plugin.subscribe.join(","),
                    format_budget(plugin.budget_ms),
                    format_resident(plugin.resident_bytes),
                    plugin.on_failure.to_string(),
                    plugin.source.clone(),
                ]
            })
            .collect();
        write_table(
            out,
            &[
                "NAME",
                "HASH",
                "SUBSCRIBE",
                "BUDGET",
                "RESIDENT",
                "ON FAILURE",
                "SOURCE",
            ],
            &rows,
        );
    }
    for plugin in &snapshot.plugins {
        let Some(provenance) = &plugin.provenance else {
            continue;
        };
        let changed = match provenance.verified {
            true => "",
            false => " — CHANGED SINCE INSTALL: its component or manifest is not the one installed",
        };
        let _ = writeln!(
            out,
            "  {} installed from {} (digest {}, signed by {}){changed}",
            plugin.name, provenance.source, provenance.digest, provenance.signer
        );
    }
    for error in &snapshot.load_errors {
        let advisory = match error.advisory {
            true => " (on-failure = \"approve\": does not hold approvals)",
            false => "",
        };
        let _ = writeln!(
            out,
            "  LOAD ERROR {}: {}{advisory}",
            error.file, error.error
        );
    }
    for quarantined in &snapshot.quarantined_plugins {
        let _ = writeln!(out, "  {}", describe_quarantine(quarantined));
    }
    for warning in &snapshot.plugin_warnings {
        let _ = writeln!(out, "  WARNING {warning}");
    }
}

/// One line on a quarantined plugin: what it did, what that means, how to lift it.
fn describe_quarantine(quarantined: &QuarantinedPlugin) -> String {
    let effect = match quarantined.on_failure {
        FailurePolicy::Hold => {
            "not called; on-failure = \"hold\": it holds the events it subscribes to (they start at NotBefore)"
        }
        FailurePolicy::Approve => {
            "not called; on-failure = \"approve\": events are approved without it"
        }
    };
    format!(
        "QUARANTINED {} since {}: {} failed calls within {}, the last {}: {}; {effect}; replace \
         its .wasm or .toml (or restart forewarn) to lift the quarantine",
        quarantined.plugin,
        rfc3339(quarantined.since_unix_ms),
        quarantined.failures,
        humantime::format_duration(Duration::from_millis(quarantined.window_ms)),
        quarantined.last_failure,
        or_dash(&quarantined.reason),
    )
}

fn render_poll(out: &mut String, poll: &PollView) {
    let result = match (&poll.last_error, poll.consecutive_failures) {
        (Some(error), failures) => format!("FAILING ({failures} in a row): {error}"),
        (None, _) if poll.last_success.is_some() => "ok".to_owned(),
        (None, _) => "no answer yet".to_owned(),
    };
    let _ = writeln!(
        out,
        "IMDS: {} polls, last at {}, last success {}: {}",
        poll.polls,
        poll.last_attempt.as_deref().unwrap_or("never"),
        poll.last_success.as_deref().unwrap_or("never"),
        result
    );
    if !poll.errors_by_kind.is_empty() {
        let errors: Vec<String> = poll
            .errors_by_kind
            .iter()
            .map(|(kind, count)| format!("{kind}={count}"))
            .collect();
        let _ = writeln!(out, "  errors by kind: {}", errors.join(" "));
    }
    if poll.requests_beside_unanswered > 0 {
        let _ = writeln!(
            out,
            "  polls sent beside a request IMDS had not answered: {}",
            poll.requests_beside_unanswered
        );
    }
    if let Some(clock) = &poll.clock {
        let _ = writeln!(out, "  clock: {}", clock.summary);
    }
    for entry in &poll.unreadable_entries {
        let _ = writeln!(out, "  UNREADABLE ENTRY (not tracked): {entry}");
    }
}

/// `0.3 MiB`, or `-` when unknown.
fn format_resident(bytes: Option<u64>) -> String {
    match bytes {
        Some(bytes) => format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0)),
        None => "-".to_owned(),
    }
}

fn format_budget(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

/// Left-aligned columns, two spaces apart.
pub(crate) fn write_table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|title| title.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|title| (*title).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
}

mod disk_block;
use disk_block::render_storage;

#[cfg(test)]
mod tests;
