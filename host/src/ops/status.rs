//! What `GET /status` answers and `forewarn status` prints: a `StatusSnapshot` built from the
//! daemon's state, the plugin set, the poller and readiness, and its at-a-glance table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use forewarn_imds::PollStatus;
use serde::{Deserialize, Serialize};

use crate::coordination::CoordinationStatus;
use crate::log_fields::rfc3339;
use crate::pipeline::state::{
    AnswerOutcome, Approval, ApprovalKind, CallPhase, DaemonState, EventProgress, Handling,
    Lifecycle,
};
use crate::plugins::set::{PluginSet, PluginSource};

/// Whether the daemon loop runs yet, and whether IMDS has answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DaemonPhase {
    /// Waiting for something (the VM name, the plugin directory) before the loop starts.
    Starting,
    /// The loop runs and polls, but IMDS has not answered with a document yet: IMDS may
    /// take up to two minutes to answer the first call. systemd hears `READY=1` only after.
    WaitingForImds,
    /// The loop runs and IMDS has answered at least once.
    Running,
}

impl std::fmt::Display for DaemonPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DaemonPhase::Starting => "starting",
            DaemonPhase::WaitingForImds => "waiting for IMDS's first document",
            DaemonPhase::Running => "running",
        })
    }
}

/// Most VM names of an event `/status` lists (an event may name thousands).
pub const STATUS_RESOURCES_MAX: usize = 64;

/// What IMDS's docs say about the first call, for the operator waiting on it.
pub const FIRST_CALL_PATIENCE: &str = "IMDS may take up to two minutes to answer the first call, and events up to five minutes to appear";

/// Everything an operator wants to see at once. Times are RFC 3339 (UTC) strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    /// forewarn's version.
    pub version: String,
    /// Starting until the daemon loop runs, waiting-for-imds until IMDS first answers with
    /// a document, then running.
    pub phase: DaemonPhase,
    /// While starting or waiting for IMDS: what the daemon waits for, and what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// While waiting for IMDS's first document: whole seconds since the first poll started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imds_wait_seconds: Option<u64>,
    /// The VM name this daemon answers for (from the config or asked of IMDS); empty while
    /// the daemon is still starting and the name is not known yet.
    pub vm_name: String,
    /// When this snapshot was taken, RFC 3339 in UTC.
    pub generated_at: String,
    /// Whether `/readyz` reports the VM ready, and which plugins hold it out.
    pub readiness: ReadinessView,
    /// The scheduled events the daemon is handling, one entry per event it has not finished;
    /// empty when IMDS announces nothing.
    pub events: Vec<EventView>,
    /// The plugins currently loaded, in dispatch order (each after the plugins it names in `after`).
    pub plugins: Vec<PluginView>,
    /// Plugin files in the plugin directory that failed to load on the last scan; they are not
    /// called until fixed. Empty when every file loaded.
    pub load_errors: Vec<LoadErrorView>,
    /// Ordering problems in the plugin set (unknown `after` names, cycles).
    pub plugin_warnings: Vec<String>,
    /// The IMDS poller's counters and its latest result.
    pub imds: PollView,
    /// The etcd approval barrier (`[coordination]`), when configured: its connection and the
    /// events it coordinates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<CoordinationStatus>,
}

/// Whether the VM is in rotation, and who holds it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadinessView {
    /// True while no plugin holds the VM out of rotation (`/readyz` answers 200).
    pub ready: bool,
    /// The plugins holding the VM out of rotation, sorted by name; empty exactly when `ready`.
    pub held_by: Vec<String>,
}

/// One scheduled event the daemon is handling: what IMDS says about it and how far the
/// daemon got (handling, lifecycle, approval, each plugin's latest answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    /// IMDS's EventId, unique per event.
    pub id: String,
    /// IMDS's EventType as sent ("Reboot", "Redeploy", "Freeze", "Preempt", "Terminate", …).
    pub event_type: String,
    /// IMDS's EventStatus: "Scheduled" or "Started".
    pub status: String,
    /// IMDS's NotBefore as RFC 3339 (UTC): the earliest time Azure starts the maintenance on its
    /// own. None when IMDS sent none (an event already started has none).
    pub not_before: Option<String>,
    /// Seconds until NotBefore (negative once it passed); none without a NotBefore.
    pub time_left_seconds: Option<i64>,
    /// The VM names the event affects, as IMDS lists them: the first
    /// [`STATUS_RESOURCES_MAX`] (`resources_total` counts them all).
    pub resources: Vec<String>,
    /// How many VM names the event lists.
    #[serde(default)]
    pub resources_total: usize,
    /// How the policy decided to handle the event, in words: "prepare (this VM)",
    /// "prepare (other VMs)", "approve at once (RULE)" or "ignored: REASON".
    pub handling: String,
    /// Where the event is: "scheduled", "scheduled, waiting for the lead time" (announced
    /// further ahead than `policy.prepare-lead-time`: no plugin asked yet), "started",
    /// "ended (recovering)" or "ended without starting".
    pub lifecycle: String,
    /// When plugins were first asked to prepare (RFC 3339); none while the event waits for
    /// `policy.prepare-lead-time` or needs no preparation.
    #[serde(default)]
    pub preparing_since: Option<String>,
    /// Where the approval is: "pending", "due (sending)", "sent at TIME", "withheld: REASON",
    /// "coordinating with the other VMs (etcd)", "dry run: …" or "abandoned: REASON".
    pub approval: String,
    /// The approval's state without its details (`pending`, `due`, `sent`, `coordinating`,
    /// `withheld`, `dry-run`, `abandoned`): what scripts and the status page key on.
    #[serde(default)]
    pub approval_state: ApprovalKind,
    /// Each plugin's latest decision on this event.
    pub plugins: Vec<DecisionView>,
}

/// A plugin's latest answer on an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionView {
    /// The plugin's name.
    pub plugin: String,
    /// Whether the answer was to a prepare call (before the maintenance) or a recover call (after).
    pub phase: CallPhase,
    /// "approve", "defer", or the failure kind ("budget-exceeded", "trap", …).
    pub decision: AnswerOutcome,
    /// The plugin's own explanation; empty when it gave none.
    pub reason: String,
    /// When the answer arrived, RFC 3339 (UTC).
    pub at: String,
    /// How long the call took, in milliseconds.
    pub elapsed_ms: u64,
    /// How many prepare calls the plugin has had on this event for its current NotBefore (a
    /// reschedule starts again at 0); a plugin that deferred is asked again.
    pub prepare_attempts: u32,
}

/// A plugin in the live set, with the manifest settings that decide when and how long it
/// is called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginView {
    /// The plugin's name: its file name without `.wasm`, or the bundled plugin's name.
    pub name: String,
    /// sha256 of the component.
    pub content_hash: String,
    /// The .wasm file, or "bundled".
    pub source: String,
    /// The event types the plugin is called for (its X
    pub subscribe: Vec<String>,
    /// The plugins this one is called after (its manifest's `after`); empty when it has no order.
    pub after: Vec<String>,
    /// The time one call may take (its manifest's `budget`), in milliseconds.
    pub budget_ms: u64,
    /// Bytes of the plugin's linear memories in RAM now: every resident page of its own
    /// instance pool (a call's instance, the one made ahead, the pages kept for the next
    /// call), as `/proc/self/smaps` counts them. None where unknown (instances allocated on
    /// demand).
    #[serde(default)]
    pub resident_bytes: Option<u64>,
}

/// A plugin file that failed to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadErrorView {
    /// The file that failed, as a path.
    pub file: String,
    /// Why it failed, as a sentence an operator can act on.
    pub error: String,
}

/// The IMDS poller's latest attempt and its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollView {
    /// How many polls the poller has made since the daemon started, successful or not.
    pub polls: u64,
    /// When the last poll was made, RFC 3339 (UTC); None before the first one.
    pub last_attempt: Option<String>,
    /// When IMDS last answered with a document, RFC 3339 (UTC); None while it never has.
    pub last_success: Option<String>,
    /// The error of the last poll; None when it succeeded (or none was made yet).
    pub last_error: Option<String>,
    /// Polls that failed in a row since the last success; 0 after a success.
    pub consecutive_failures: u32,
    /// Failed polls since the start, by error kind ("timeout", "throttled", "server", "malformed", …); only
    /// kinds that happened appear.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Requests sent beside one that had not answered when the next poll was due (a
    /// connection to IMDS that hangs).
    #[serde(default)]
    pub requests_beside_unanswered: u64,
}

/// The inputs of a snapshot, borrowed from the live daemon.
pub(crate) struct StatusInputs<'a> {
    pub running: bool,
    /// When the poller started (None before the loop runs).
    pub polling_since: Option<SystemTime>,
    pub vm_name: &'a str,
    pub state: &'a DaemonState,
    pub poll: &'a PollStatus,
    pub plugins: &'a PluginSet,
    pub ready: bool,
    pub held_by: Vec<String>,
    pub coordination: Option<CoordinationStatus>,
    pub waiting_for: Option<String>,
}

/// Builds the snapshot as of `now`.
pub(crate) fn build_snapshot(inputs: StatusInputs<'_>, now: SystemTime) -> StatusSnapshot {
    let phase = match (inputs.running, inputs.poll.last_success) {
        (false, _) => DaemonPhase::Starting,
        (true, None) => DaemonPhase::WaitingForImds,
        (true, Some(_)) => DaemonPhase::Running,
    };
    let imds_wait_seconds = (phase == DaemonPhase::WaitingForImds).then(|| {
        inputs
            .polling_since
            .and_then(|since| now.duration_since(since).ok())
            .unwrap_or_default()
            .as_secs()
    });
    let waiting_for = match imds_wait_seconds {
        Some(waited) => Some(imds_waiting_for(waited, inputs.poll)),
        None => inputs.waiting_for.clone(),
    };
    StatusSnapshot {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        phase,
        waiting_for,
        imds_wait_seconds,
        vm_name: inputs.vm_name.to_owned(),
        generated_at: rfc3339(now),
        readiness: ReadinessView {
            ready: inputs.ready,
            held_by: inputs.held_by,
        },
        events: inputs
            .state
            .events
            .iter()
            .map(|(id, progress)| event_view(id, progress, now))
            .collect(),
        plugins: plugin_views(inputs.plugins),
        load_errors: inputs
            .plugins
            .load_errors()
            .iter()
            .map(|(file, error)| LoadErrorView {
                file: file.display().to_string(),
                error: error.clone(),
            })
            .collect(),
        plugin_warnings: inputs.plugins.warnings().to_vec(),
        imds: poll_view(inputs.poll),
        coordination: inputs.coordination,
    }
}

fn event_view(id: &str, progress: &EventProgress, now: SystemTime) -> EventView {
    let event = &progress.event;
    EventView {
        id: id.to_owned(),
        event_type: event.event_type_raw.clone(),
        status: event.status.to_string(),
        not_before: event.not_before.map(rfc3339),
        time_left_seconds: event.not_before.map(|at| seconds_between(now, at)),
        resources: event
            .resources
            .iter()
            .take(STATUS_RESOURCES_MAX)
            .cloned()
            .collect(),
        resources_total: event.resources.len(),
        handling: Handling::label(&progress.handling),
        lifecycle: describe_lifecycle(progress),
        preparing_since: progress
            .preparing_since_unix_ms
            .map(|at| rfc3339(UNIX_EPOCH + Duration::from_millis(at))),
        approval: describe_approval(&progress.approval),
        approval_state: progress.approval.kind(),
        plugins: progress
            .plugins
            .iter()
            .filter_map(|(plugin, done)| {
                let answer = done.last_answer.as_ref()?;
                Some(DecisionView {
                    plugin: plugin.clone(),
                    phase: answer.phase,
                    decision: answer.outcome,
                    reason: answer.reason.clone(),
                    at: rfc3339(UNIX_EPOCH + Duration::from_millis(answer.at_unix_ms)),
                    elapsed_ms: answer.elapsed_ms,
                    prepare_attempts: done.prepare_attempts,
                })
            })
            .collect(),
    }
}

/// Each loaded plugin, with what its memories hold resident now.
fn plugin_views(plugins: &PluginSet) -> Vec<PluginView> {
    let resident = forewarn_runtime::ResidentMemory::read().unwrap_or_default();
    plugins
        .all()
        .iter()
        .map(|plugin| plugin_view(plugin, &resident))
        .collect()
}

fn plugin_view(
    plugin: &crate::plugins::set::LoadedPlugin,
    resident: &forewarn_runtime::ResidentMemory,
) -> PluginView {
    PluginView {
        name: plugin.name().to_owned(),
        content_hash: plugin.plugin.content_hash().to_owned(),
        source: match &plugin.source {
            PluginSource::File(path) => path.display().to_string(),
            PluginSource::Bundled => "bundled".to_owned(),
        },
        subscribe: plugin.manifest.subscribe.clone(),
        after: plugin.manifest.after.clone(),
        budget_ms: plugin.manifest.budget.as_millis() as u64,
        resident_bytes: resident.of(&plugin.plugin),
    }
}

/// The `waiting_for` line while IMDS has not answered with a document yet.
fn imds_waiting_for(waited_seconds: u64, poll: &PollStatus) -> String {
    let last_error = poll
        .last_error
        .as_deref()
        .map(|error| format!("; last error: {error}"))
        .unwrap_or_default();
    format!(
        "waiting for IMDS's first document for {} ({} polls{last_error}): {FIRST_CALL_PATIENCE}",
        format_time_left(i64::try_from(waited_seconds).unwrap_or(i64::MAX)),
        poll.polls,
    )
}

fn poll_view(poll: &PollStatus) -> PollView {
    PollView {
        polls: poll.polls,
        last_attempt: poll.last_attempt.map(rfc3339),
        last_success: poll.last_success.map(rfc3339),
        last_error: poll.last_error.clone(),
        consecutive_failures: poll.consecutive_failures,
        errors_by_kind: poll
            .errors_by_kind
            .iter()
            .map(|(kind, count)| ((*kind).to_owned(), *count))
            .collect(),
        requests_beside_unanswered: poll.requests_beside_unanswered,
    }
}

fn describe_lifecycle(progress: &EventProgress) -> String {
    let waiting = matches!(progress.handling, Handling::Prepare { .. })
        && progress.preparing_since_unix_ms.is_none();
    match progress.lifecycle {
        Lifecycle::Scheduled if waiting => "scheduled, waiting for the lead time",
        Lifecycle::Scheduled => "scheduled",
        Lifecycle::Started => "started",
        Lifecycle::Ended { after_start: true } => "ended (recovering)",
        Lifecycle::Ended { after_start: false } => "ended without starting",
    }
    .to_owned()
}

fn describe_approval(approval: &Approval) -> String {
    match approval {
        Approval::Pending => "pending".to_owned(),
        Approval::Due { .. } => "due (sending)".to_owned(),
        Approval::Sent { at_unix_ms } => format!(
            "sent at {}",
            rfc3339(UNIX_EPOCH + Duration::from_millis(*at_unix_ms))
        ),
        Approval::Withheld { reason, .. } => format!("withheld: {reason}"),
        Approval::Coordinating { .. } => "coordinating with the other VMs (etcd)".to_owned(),
        Approval::DryRun { would } => format!("dry run: {would}"),
        Approval::Abandoned { reason } => format!("abandoned: {reason}"),
    }
}

/// `to - from` in whole seconds, negative when `to` is in the past.
fn seconds_between(from: SystemTime, to: SystemTime) -> i64 {
    match to.duration_since(from) {
        Ok(ahead) => ahead.as_secs() as i64,
        Err(behind) => -(behind.duration().as_secs() as i64),
    }
}

/// "4m05s", "-12s", "1h02m": a duration a person reads at a glance.
pub(crate) fn format_time_left(seconds: i64) -> String {
    let sign = if seconds < 0 { "-" } else { "" };
    let total = seconds.unsigned_abs();
    let (hours, minutes, secs) = (total / 3600, (total % 3600) / 60, total % 60);
    if hours > 0 {
        return format!("{sign}{hours}h{minutes:02}m");
    }
    if minutes > 0 {
        return format!("{sign}{minutes}m{secs:02}s");
    }
    format!("{sign}{secs}s")
}

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
    out
}

/// `snapshot` with every string escaped and cut; None if it does not survive the trip
/// through JSON (it always does: the snapshot is what `/status` answers).
fn escaped_copy(snapshot: &StatusSnapshot) -> Option<StatusSnapshot> {
    let mut value = serde_json::to_value(snapshot).ok()?;
    crate::log_format::escape_json_strings(&mut value);
    serde_json::from_value(value).ok()
}

fn render_coordination(out: &mut String, coordination: &CoordinationStatus) {
    out.push_str(&format!(
        "\nCOORDINATION: etcd {} ({} event(s) coordinated)\n",
        coordination.connection.as_str(),
        coordination.events.len()
    ));
    if let Some(error) = &coordination.last_error {
        out.push_str(&format!("  last error: {error}\n"));
    }
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
                event.id.clone(),
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
                    plugin.source.clone(),
                ]
            })
            .collect();
        write_table(
            out,
            &["NAME", "HASH", "SUBSCRIBE", "BUDGET", "RESIDENT", "SOURCE"],
            &rows,
        );
    }
    for error in &snapshot.load_errors {
        let _ = writeln!(out, "  LOAD ERROR {}: {}", error.file, error.error);
    }
    for warning in &snapshot.plugin_warnings {
        let _ = writeln!(out, "  WARNING {warning}");
    }
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
}

fn format_budget(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// `0.3 MiB`, or `-` when unknown.
fn format_resident(bytes: Option<u64>) -> String {
    match bytes {
        Some(bytes) => format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0)),
        None => "-".to_owned(),
    }
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

/// Left-aligned columns, two spaces apart.
fn write_table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::{Connection, EventBarrier};

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
            }],
            plugins: vec![PluginView {
                name: "lb-drain".into(),
                content_hash: "0123456789abcdef0123".into(),
                source: "/etc/forewarn/plugins.d/lb-drain.wasm".into(),
                subscribe: vec!["Reboot".into(), "Redeploy".into()],
                after: vec![],
                budget_ms: 10_000,
                resident_bytes: Some(320 * 1024),
            }],
            load_errors: vec![LoadErrorView {
                file: "/etc/forewarn/plugins.d/bad.wasm".into(),
                error: "not a component".into(),
            }],
            plugin_warnings: vec![],
            imds: PollView {
                polls: 42,
                last_attempt: Some("2026-01-01T00:00:00Z".into()),
                last_success: Some("2025-12-31T23:59:59Z".into()),
                last_error: Some("IMDS answered 500".into()),
                consecutive_failures: 1,
                errors_by_kind: BTreeMap::from([("server".into(), 3)]),
                requests_beside_unanswered: 2,
            },
            coordination: None,
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
    }

    #[test]
    fn the_table_prints_text_from_outside_escaped_on_one_line() {
        let mut forging = snapshot();
        forging.events[0].id = "E1\n2026-01-01T00:00:00Z FORGED\u{1b}[2K".into();
        forging.load_errors.push(LoadErrorView {
            file: "/etc/forewarn/plugins.d/x\rFORGED.wasm".into(),
            error: "not a component\nFORGED".into(),
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
        };
        empty.imds = PollView {
            polls: 0,
            last_attempt: None,
            last_success: None,
            last_error: None,
            consecutive_failures: 0,
            errors_by_kind: BTreeMap::new(),
            requests_beside_unanswered: 0,
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
    fn time_left_reads_at_a_glance() {
        assert_eq!(format_time_left(0), "0s");
        assert_eq!(format_time_left(59), "59s");
        assert_eq!(format_time_left(245), "4m05s");
        assert_eq!(format_time_left(3720), "1h02m");
        assert_eq!(format_time_left(-12), "-12s");
    }

    /// The snapshot of a running vm-a with nothing loaded, polling since `polling_since`.
    fn running_snapshot(
        poll: &PollStatus,
        polling_since: SystemTime,
        now: SystemTime,
    ) -> StatusSnapshot {
        build_snapshot(
            StatusInputs {
                running: true,
                polling_since: Some(polling_since),
                vm_name: "vm-a",
                state: &DaemonState::default(),
                poll,
                plugins: &PluginSet::default(),
                ready: true,
                held_by: vec![],
                coordination: None,
                waiting_for: None,
            },
            now,
        )
    }

    #[test]
    fn snapshot_of_an_empty_daemon() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let poll = PollStatus {
            polls: 3,
            last_success: Some(now),
            ..PollStatus::default()
        };
        let snapshot = running_snapshot(&poll, now - Duration::from_secs(5), now);
        assert_eq!(snapshot.phase, DaemonPhase::Running);
        assert_eq!(snapshot.imds.polls, 3);
        assert_eq!(snapshot.generated_at, "2027-01-15T08:00:00Z");
        let json = serde_json::to_string(&snapshot).unwrap();
        let back: StatusSnapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(back, snapshot);
    }

    #[test]
    fn until_imds_answers_the_phase_says_so_and_how_long() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let poll = PollStatus {
            polls: 4,
            last_error: Some("IMDS answered 503".into()),
            consecutive_failures: 4,
            ..PollStatus::default()
        };
        let snapshot = running_snapshot(&poll, now - Duration::from_secs(75), now);
        assert_eq!(snapshot.phase, DaemonPhase::WaitingForImds);
        assert_eq!(snapshot.imds_wait_seconds, Some(75));
        let waiting_for = snapshot.waiting_for.clone().unwrap();
        assert!(waiting_for.contains("1m15s"), "{waiting_for}");
        assert!(waiting_for.contains("503"), "{waiting_for}");
        let table = render_table(&snapshot);
        assert!(
            table.contains("waiting for IMDS's first document"),
            "{table}"
        );
        assert!(table.contains(FIRST_CALL_PATIENCE), "{table}");
    }
}
