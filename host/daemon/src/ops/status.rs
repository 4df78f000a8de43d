//! What `GET /status` answers: a `StatusSnapshot` built from the daemon's state, the plugin
//! set, the poller and readiness (`forewarn status` prints it as a table:
//! `cli/status_table.rs`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use forewarn_imds::{ClockSkew, EventId, PluginName, PollStatus};
use serde::{Deserialize, Serialize};

use crate::coordination::CoordinationStatus;
use crate::log_fields::rfc3339;
use crate::ops::scale_set_health::ScaleSetHealthView;
use crate::pipeline::approval;
use crate::pipeline::quarantine::QuarantinedPlugin;
use crate::pipeline::roster::Roster;
use crate::pipeline::state::{
    AnswerOutcome, Approval, ApprovalKind, CallPhase, DaemonState, EventProgress, Handling,
    Lifecycle,
};
use crate::plugins::set::{PluginSet, PluginSource};
use crate::storage_health::StorageView;
use forewarn_manifest::FailurePolicy;

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
    /// Plugins in crash-loop quarantine: their calls failed `policy.quarantine-after-failures`
    /// times within `policy.quarantine-window`, so they are not called until a new version is
    /// loaded (or the daemon restarts). Empty when none is.
    #[serde(default)]
    pub quarantined_plugins: Vec<QuarantinedPlugin>,
    /// The IMDS poller's counters and its latest result.
    pub imds: PollView,
    /// The etcd approval barrier (`[coordination]`), when configured: its connection and the
    /// events it coordinates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<CoordinationStatus>,
    /// The state directory: whether the journal is durable (or on its reserve) and plugin
    /// state writable (docs/operations.md, "When the disk is full").
    #[serde(default)]
    pub storage: StorageView,
    /// What `/health/scale-set` answers the scale set's Application Health extension
    /// (Initializing, Healthy, Unhealthy with its reasons) and whether it keeps the VM out
    /// of the current rolling upgrade.
    #[serde(default)]
    pub scale_set_health: ScaleSetHealthView,
}

/// Whether the VM is in rotation, and who holds it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadinessView {
    /// True while no plugin holds the VM out of rotation (`/readyz` answers 200).
    pub ready: bool,
    /// The plugins holding the VM out of rotation, sorted by name; empty exactly when `ready`.
    pub held_by: Vec<String>,
    /// Load balancer probers (one per address) that asked `/readyz` in the last minute.
    #[serde(default)]
    pub probers: u32,
    /// Set while the VM is held out of rotation and no load balancer probes `/readyz`: the
    /// drain can only wait out its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// What `/status` says while the VM is drained and nothing probes `/readyz`.
pub(crate) const NO_PROBES_SEEN: &str = "no load balancer probe seen on /readyz: is the health \
     probe pointed at forewarn? (drains wait out their whole window)";

/// One scheduled event the daemon is handling: what IMDS says about it and how far the
/// daemon got (handling, lifecycle, approval, each plugin's latest answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    /// IMDS's EventId, unique per event.
    pub id: EventId,
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
    /// "coordinating with the other VMs (etcd: …)", "dry run: …" or "abandoned: REASON".
    pub approval: String,
    /// The approval's state without its details (`pending`, `due`, `sent`, `coordinating`,
    /// `withheld`, `dry-run`, `abandoned`): what scripts and the status page key on.
    #[serde(default)]
    pub approval_state: ApprovalKind,
    /// Each plugin's latest decision on this event.
    pub plugins: Vec<DecisionView>,
    /// Quarantined plugins under `on-failure = "hold"` that hold this event: it is not
    /// approved early and starts at NotBefore (unless they are reloaded in time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_by_quarantined: Vec<PluginName>,
    /// The fields IMDS sent that forewarn cannot read, each with the text sent and how it is
    /// read instead; absent for an ordinary event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableView>,
}

/// A field of an event that forewarn cannot read, and how it reads it instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableView {
    /// The field, as IMDS names it: "NotBefore", "DurationInSeconds", "EventType",
    /// "EventStatus" or "Resources".
    pub field: String,
    /// What IMDS sent, cut to about 200 characters.
    pub value: String,
    /// How forewarn reads it instead ("may start at any moment: prepared at once", …).
    pub read_as: String,
}

/// How far IMDS's clock is from the VM's, from the `Date` headers of IMDS's answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockView {
    /// IMDS's clock minus the VM's, in milliseconds: positive when the VM's clock is behind.
    /// Every deadline is planned on IMDS's clock; 0 while the VM's clock agrees with it.
    pub offset_ms: i64,
    /// How far either way IMDS's clock may be from that, as its answers pin it.
    pub uncertainty_ms: u64,
    /// The answers the estimate rests on.
    pub samples: usize,
    /// The Date headers put IMDS more than an hour off: not believed (planned on the VM's
    /// clock).
    pub beyond_bound: bool,
    /// The same in words: "the VM's clock is 10.2 s behind IMDS's (± 0.4 s)".
    pub summary: String,
}

/// A plugin's latest answer on an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionView {
    /// The plugin's name.
    pub plugin: PluginName,
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
    /// Its manifest's `on-failure`: what a failed call means for the approval.
    #[serde(default)]
    pub on_failure: FailurePolicy,
    /// Where it was installed from, per `plugins.lock` (`forewarn plugin install`); none for a
    /// plugin copied in by hand or bundled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceView>,
    /// Bytes of the plugin's linear memories in RAM now: every resident page of its own
    /// instance pool (a call's instance, the one made ahead, the pages kept for the next
    /// call), as `/proc/self/smaps` counts them. None where unknown (instances allocated on
    /// demand).
    #[serde(default)]
    pub resident_bytes: Option<u64>,
}

/// What `plugins.lock` says of a loaded plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenanceView {
    /// The reference (with its digest) or layout it was installed from.
    pub source: String,
    /// The artifact's manifest digest (`sha256:…`).
    pub digest: String,
    /// Who signed it ("alice@example.com (SHA256:…)"), or "unsigned".
    pub signer: String,
    /// False when the component or its manifest is not the one installed (a file was
    /// replaced or widened by hand since): the digest and signer then describe what was
    /// installed, not what runs.
    pub verified: bool,
}

/// A plugin file that failed to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadErrorView {
    /// The file that failed, as a path.
    pub file: String,
    /// Why it failed, as a sentence an operator can act on.
    pub error: String,
    /// Its manifest was read and says `on-failure = "approve"`: the failure does not hold
    /// approvals. False: it holds every approval until the file is fixed or removed.
    #[serde(default)]
    pub advisory: bool,
}

/// The IMDS poller's latest attempt and its result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Documents byte for byte the same as the one before: not parsed again, nothing for
    /// the daemon to do.
    #[serde(default)]
    pub unchanged_documents: u64,
    /// Events listed with a field forewarn cannot read, by field (each event and field
    /// counted once), and entries without an `EventId` under "EventId".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unreadable_by_field: BTreeMap<String, u64>,
    /// Entries of the last document without a usable EventId (nothing to track them by).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable_entries: Vec<String>,
    /// IMDS's clock against the VM's; None until IMDS sent a Date header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockView>,
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
    /// Probers of `/readyz` in the last minute.
    pub readyz_probers: usize,
    pub coordination: Option<CoordinationStatus>,
    pub waiting_for: Option<String>,
    /// The plugins the pipeline has in quarantine.
    pub quarantined: Vec<QuarantinedPlugin>,
    /// The state directory's health.
    pub storage: StorageView,
    /// What `/health/scale-set` answers now.
    pub scale_set_health: ScaleSetHealthView,
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
    // Time left is counted on IMDS's clock, which NotBefore is on.
    let imds_now = on_imds_clock(now, inputs.poll);
    let mut events: Vec<EventView> = inputs
        .state
        .events
        .iter()
        .map(|(id, progress)| event_view(id, progress, imds_now))
        .collect();
    mark_quarantine_holds(&mut events, &inputs);
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
            probers: u32::try_from(inputs.readyz_probers).unwrap_or(u32::MAX),
            warning: (!inputs.ready && inputs.readyz_probers == 0)
                .then(|| NO_PROBES_SEEN.to_owned()),
        },
        events,
        plugins: plugin_views(inputs.plugins),
        load_errors: inputs
            .plugins
            .load_errors()
            .iter()
            .map(|(file, error)| LoadErrorView {
                file: file.display().to_string(),
                error: error.clone(),
                advisory: !inputs.plugins.load_error_holds(file),
            })
            .collect(),
        plugin_warnings: inputs.plugins.warnings().to_vec(),
        quarantined_plugins: inputs.quarantined,
        imds: poll_view(inputs.poll),
        coordination: inputs.coordination,
        storage: inputs.storage,
        scale_set_health: inputs.scale_set_health,
    }
}

fn event_view(id: &EventId, progress: &EventProgress, now: SystemTime) -> EventView {
    let event = &progress.event;
    EventView {
        id: EventId::from(id),
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
        preparing_since: progress.preparing_since_unix_ms.map(rfc3339),
        approval: describe_approval_of(progress),
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
                    at: rfc3339(answer.at_unix_ms),
                    elapsed_ms: answer.elapsed_ms,
                    prepare_attempts: done.prepare_attempts,
                })
            })
            .collect(),
        held_by_quarantined: Vec::new(),
        unreadable: event
            .unreadable
            .iter()
            .map(|unreadable| UnreadableView {
                field: unreadable.field.as_wire().to_owned(),
                value: unreadable.raw.clone(),
                read_as: unreadable.field.read_as().to_owned(),
            })
            .collect(),
    }
}

/// `now` (the VM's clock) on IMDS's clock, as far as the poller's estimate goes.
fn on_imds_clock(now: SystemTime, poll: &PollStatus) -> SystemTime {
    forewarn_imds::shift(now, poll.clock.map_or(0, |clock| clock.offset_ms))
}

fn clock_view(skew: ClockSkew) -> ClockView {
    let seconds = skew.offset_ms.unsigned_abs() as f64 / 1000.0;
    let margin = skew.uncertainty_ms as f64 / 1000.0;
    let summary = match skew.offset_ms {
        _ if skew.beyond_bound => "IMDS's Date header is more than an hour off the VM's clock: not believed, deadlines are planned on the VM's clock".to_owned(),
        0 => format!("the VM's clock agrees with IMDS's (± {margin:.1} s)"),
        ahead if ahead > 0 => format!("the VM's clock is {seconds:.1} s behind IMDS's (± {margin:.1} s): deadlines are planned on IMDS's clock"),
        _ => format!("the VM's clock is {seconds:.1} s ahead of IMDS's (± {margin:.1} s): deadlines are planned on IMDS's clock"),
    };
    ClockView {
        offset_ms: skew.offset_ms,
        uncertainty_ms: skew.uncertainty_ms,
        samples: skew.samples,
        beyond_bound: skew.beyond_bound,
        summary,
    }
}

/// Each loaded plugin, with what its memories hold resident now.
fn plugin_views(plugins: &PluginSet) -> Vec<PluginView> {
    let resident = forewarn_runtime::ResidentMemory::read().unwrap_or_default();
    let mut locks = forewarn_supply::lock::LockCache::default();
    plugins
        .all()
        .iter()
        .map(|plugin| plugin_view(plugin, &mut locks, &resident))
        .collect()
}

fn plugin_view(
    plugin: &crate::plugins::set::LoadedPlugin,
    locks: &mut forewarn_supply::lock::LockCache,
    resident: &forewarn_runtime::ResidentMemory,
) -> PluginView {
    let provenance = match &plugin.source {
        PluginSource::File(path) => {
            locks.provenance(path, plugin.name(), plugin.plugin.content_hash())
        }
        PluginSource::Bundled => None,
    };
    PluginView {
        provenance: provenance.map(|(entry, verified)| ProvenanceView {
            signer: entry.signer_label(),
            source: entry.source,
            digest: entry.digest,
            verified,
        }),
        name: plugin.name().to_owned(),
        content_hash: plugin.plugin.content_hash().to_owned(),
        source: match &plugin.source {
            PluginSource::File(path) => path.display().to_string(),
            PluginSource::Bundled => "bundled".to_owned(),
        },
        subscribe: plugin.manifest.subscribe.clone(),
        after: plugin.manifest.after.clone(),
        budget_ms: plugin.manifest.budget.as_millis() as u64,
        on_failure: plugin.manifest.on_failure,
        resident_bytes: plugin.plugin.resident_bytes(resident),
    }
}

/// Says, on each event quarantined plugins hold, which ones: in `held_by_quarantined` and in
/// its approval line (the same rule as the pipeline's, `approval::held_by_quarantine`).
fn mark_quarantine_holds(events: &mut [EventView], inputs: &StatusInputs<'_>) {
    if inputs.quarantined.is_empty() {
        return;
    }
    let mut roster = Roster::clone(inputs.plugins.roster());
    roster.set_quarantined(
        inputs
            .quarantined
            .iter()
            .map(|quarantined| quarantined.plugin.clone())
            .collect(),
    );
    for view in events {
        let Some(progress) = inputs.state.events.get(&view.id) else {
            continue;
        };
        let held_by = approval::held_by_quarantine(progress, &roster);
        if held_by.is_empty() {
            continue;
        }
        view.approval = format!(
            "pending: held by quarantined plugin {} (on-failure = \"hold\"): the event \
             starts at NotBefore unless the plugin is reloaded",
            held_by.join(", ")
        );
        view.held_by_quarantined = held_by;
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
        unchanged_documents: poll.unchanged_documents,
        unreadable_by_field: poll
            .unreadable_by_field
            .iter()
            .map(|(field, count)| ((*field).to_owned(), *count))
            .collect(),
        unreadable_entries: poll.unreadable_entries.clone(),
        clock: poll.clock.map(clock_view),
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

/// What `/status` says of an event's approval: [`describe_approval`], and for a Terminate
/// approved at IMDS and still Scheduled, that Azure holds it for the rest of its delete.
fn describe_approval_of(progress: &EventProgress) -> String {
    let approved_and_waiting = matches!(progress.approval, Approval::Sent { .. })
        && progress.lifecycle == Lifecycle::Scheduled
        && progress.event.status == forewarn_imds::EventStatus::Scheduled
        && progress.event.event_type == forewarn_imds::EventType::Terminate;
    let described = describe_approval(&progress.approval);
    if approved_and_waiting {
        return format!("{APPROVED_WAITING_FOR_THE_DELETE} ({described})");
    }
    described
}

/// An approved Terminate Azure has not started: a scale set deletes the instances of one
/// scale-in together, once all are approved or at NotBefore.
pub const APPROVED_WAITING_FOR_THE_DELETE: &str = "approved, waiting for the rest of this delete (Azure deletes the instances of one \
     scale-in together, once every one is approved or at NotBefore)";

fn describe_approval(approval: &Approval) -> String {
    match approval {
        Approval::Pending => "pending".to_owned(),
        Approval::Due { .. } => "due (sending)".to_owned(),
        Approval::Sent { at_unix_ms } => format!("sent at {}", rfc3339(*at_unix_ms)),
        Approval::Withheld { reason, .. } => format!("withheld: {reason}"),
        Approval::Coordinating { .. } => {
            "coordinating with the other VMs (etcd: the barrier, or a slot of the disruption budget)"
                .to_owned()
        }
        Approval::DryRun { would } => format!("dry run: {would}"),
        Approval::Abandoned { reason } => format!("abandoned: {reason}"),
        Approval::NotAtImds {
            prepared_at_unix_ms,
        } => format!(
            "not from IMDS (the operating system's shutdown): nothing to approve; prepared at {}",
            rfc3339(*prepared_at_unix_ms)
        ),
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
pub fn format_time_left(seconds: i64) -> String {
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

#[cfg(test)]
mod tests;
