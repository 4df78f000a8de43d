//! The messages of the daemon's log lines that operators' tools and forewarn's own tests key
//! on: one constant each, so a rewording changes both sides at once.
//!
//! Every such line is structured (`--log-format json` prints its fields); match on the
//! `message` field being equal to one of these, never on a substring of free text.

/// An event appeared, changed or ended (fields `event_id`, `transition`, `event_type`).
pub const EVENT_TRANSITION: &str = "event transition";
/// IMDS did not accept an approval POST (fields `event_ids`, `error`, `rejected`: IMDS
/// refused it with a 4xx, `one_by_one`: the events are retried one at a time).
pub const APPROVAL_FAILED: &str = "approval not accepted by IMDS; retrying";
/// A plugin answered (fields `event_id`, `plugin`, `phase`, `decision`, `reason`, `elapsed_ms`).
pub const PLUGIN_DECISION: &str = "plugin decision";
/// A plugin call trapped, ran out of budget or failed to start, and counts as a defer (fields
/// as [`PLUGIN_DECISION`] plus `failure`).
pub const PLUGIN_CALL_FAILED: &str = "plugin call failed; counted as a defer";
/// A prepare call of a plugin whose manifest says `on-failure = "approve"` trapped, ran out
/// of budget or failed to start, and counts as its approval (fields as
/// [`PLUGIN_CALL_FAILED`]).
pub const PLUGIN_CALL_FAILED_CONSENT: &str =
    "plugin call failed; counted as consent (on-failure = \"approve\")";
/// A plugin's calls failed `policy.quarantine-after-failures` times within
/// `policy.quarantine-window`: it is quarantined, not called again until a new version of it
/// is loaded or the daemon restarts (fields `plugin`, `failures`, `window_ms`, `on_failure`,
/// `last_failure`, `reason`).
pub const PLUGIN_QUARANTINED: &str = "plugin quarantined after repeated failures: it is no longer called until a new version of it is loaded or forewarn restarts";
/// A quarantined plugin was loaded in a new version or unloaded (fields `plugin`,
/// `on_failure`).
pub const PLUGIN_QUARANTINE_LIFTED: &str =
    "plugin quarantine lifted: a new version of it was loaded, or it was unloaded";
/// The journal could not be parsed and was moved aside (field `moved_to`).
pub const JOURNAL_QUARANTINED: &str = "the journal was unreadable and was moved aside; starting without it, so events already prepared may be prepared again";
/// The journal's change log was damaged before its end (field `moved_to`): the changes up
/// to the damage were used, the file was moved aside.
pub const CHANGE_LOG_QUARANTINED: &str = "the journal's change log was damaged and was moved aside; resuming from the changes before the damage";
/// A plugin was loaded for the first time from the plugin directory (field `plugin`).
pub const PLUGIN_LOADED: &str = "plugin loaded";
/// A loaded plugin was replaced by a new version of its files (field `plugin`).
pub const PLUGIN_RELOADED: &str = "plugin reloaded";
/// The admin endpoint is bound (field `address`).
pub const ADMIN_LISTENING: &str = "admin endpoint listening";
/// What `/health/scale-set` answers changed (fields `state`, `reasons`, `skip_upgrade`).
pub const SCALE_SET_HEALTH_CHANGED: &str = "scale-set health changed";
/// Coordinated approval: this VM's readiness for an event is recorded in etcd (`event_id`, `vm`).
pub const COORDINATION_READY: &str = "recorded in etcd: this VM is ready for the event";
/// The disruption budget: an event of this VM waits for a slot (fields `event_id`, `ahead`,
/// `in_use`, `slots`), said once per event.
pub const WAITING_FOR_DISRUPTION_SLOT: &str = "waiting for a slot of the disruption budget: the \
     plugins stay prepared, and the approval goes once a VM ahead gives its slot back; at \
     NotBefore Azure starts the event anyway, as without forewarn";
/// Coordinated approval: this VM holds the event's election and will approve it (`event_id`, `vm`).
pub const COORDINATION_LEADS: &str = "this VM leads the approval of the event";
/// Coordinated approval: etcd members answer but know no leader (field `error`); events
/// naming several VMs follow `policy.group-approval` until the quorum is back.
pub const COORDINATION_NO_QUORUM: &str = "etcd has lost its quorum: events naming several VMs \
     fall back to the single-VM policy (`policy.group-approval`) until it is back; nothing is \
     approved early because of this";
/// The fleet view: this VM's status record could not be written to etcd (field `error`);
/// logged once per streak of failures, retried every 2 s, never touching the barrier.
pub const FLEET_RECORD_WRITE_FAILED: &str = "cannot write this VM's fleet record to etcd; \
     retrying (approvals are not affected; `forewarn fleet status` on other VMs shows this \
     one as stale once its record is 2 minutes old, and as gone if its lease expires)";
/// A plugin starts preparing before the plugins it runs after approved, so the chain fits
/// before NotBefore (fields `event_id`, `plugin`, `cut_short`, `needed_ms`, `left_ms`).
pub const TURN_SHORTENED: &str =
    "short notice: a plugin starts before those it runs after approved";
/// NotBefore minus the safety margin passed before every plugin approved; preparation goes
/// on while the event is Scheduled (fields `event_id`, `still_preparing`).
pub const PREPARING_LATE: &str =
    "past NotBefore minus the safety margin; plugins are still asked to prepare";
/// The event is further ahead than `policy.prepare-lead-time` (fields `event_id`,
/// `starts_at`).
pub const PREPARATION_WAITS: &str = "preparation starts at the lead time before NotBefore";
/// IMDS answered the daemon's polls with a document for the first time; systemd is told
/// `READY=1` now (field `waited_ms`: since the poller started).
pub const IMDS_FIRST_DOCUMENT: &str = "IMDS answered with its first document";
/// IMDS accepted the approval POST (field `event_ids`).
pub const APPROVED_AT_IMDS: &str = "approved at IMDS";
/// Every plugin approved, but no approval is sent: field `rule` says which policy rule
/// (`dry-run`, `observe-only`, `group-approval`, `not-this-vm`, `already-started`), `reason`
/// explains it in words.
pub const APPROVAL_HELD: &str = "approval held back by the policy";
/// A plugin's `on-start` returned (fields `plugin`, `first_run`, `elapsed_ms`).
pub const PLUGIN_STARTED: &str = "plugin on-start finished";
/// A plugin's `on-start` failed (fields `plugin`, `first_run`, `outcome`, `reason`); its
/// `on-event` calls go ahead.
pub const PLUGIN_START_FAILED: &str = "plugin on-start failed";
/// `vm-name` is set, but IMDS instance metadata names this VM otherwise, so events that list
/// this VM under the name IMDS uses are ignored (fields `configured`, `imds_name`).
pub const VM_NAME_MISMATCH: &str = "vm-name differs from the name IMDS gives this VM; events listing this VM by its IMDS name are ignored: set vm-name to the IMDS name, or leave it empty to ask IMDS";
/// The journal cannot be written (fields `error`, `at_start`, `retry_in_ms`,
/// `reserve_left_bytes`): one line per streak of failed writes. forewarn goes on polling and
/// calling plugins; early approvals wait until the journal is durable again.
pub const JOURNAL_NOT_DURABLE: &str = "the journal cannot be written: forewarn goes on polling and calling plugins, but approves nothing early until it can; retrying with backoff";
/// The journal can be written again after a streak of failures (fields `failed_writes`,
/// `not_durable_ms`): everything changed meanwhile is on disk.
pub const JOURNAL_DURABLE_AGAIN: &str =
    "the journal can be written again: every change since the last write is on disk";
/// The journal writes into the space set aside for a full disk: it could not compact or set
/// more space aside for want of room (fields `problem`, `reserve_left_bytes`). The other
/// causes have their own lines: [`JOURNAL_DIR_NOT_PERMITTED`], [`JOURNAL_DIR_READ_ONLY`],
/// [`JOURNAL_NO_PREALLOCATION`], [`JOURNAL_CANNOT_COMPACT`].
pub const JOURNAL_ON_RESERVE: &str =
    "the state directory is full: the journal writes into its reserve until there is room";
/// The journal may not create or replace files in the state directory (EPERM or EACCES: an
/// immutable directory, or one the daemon's user may not write), so it appends to its
/// existing log, without compacting (fields `problem`, `reserve_left_bytes`).
pub const JOURNAL_DIR_NOT_PERMITTED: &str = "the journal may not create files in the state directory (permission denied, or the directory is immutable): it appends to its existing log without compacting; give the user forewarn runs as write access to the state directory, and if `lsattr -d` shows it immutable (`i`), run `chattr -i` on it";
/// The state directory's filesystem is read-only (EROFS): the journal cannot compact, and
/// cannot write at all unless its log was already open (fields `problem`,
/// `reserve_left_bytes`).
pub const JOURNAL_DIR_READ_ONLY: &str = "the state directory is on a read-only filesystem: the journal cannot compact or set space aside; remount it read-write (`mount -o remount,rw`), or point `state-dir` at a writable filesystem";
/// The state directory's filesystem cannot preallocate: the journal has no reserve for a
/// full disk (fields `problem`, `reserve_left_bytes`).
pub const JOURNAL_NO_PREALLOCATION: &str = "the state directory's filesystem cannot set space aside: the journal has no reserve for a full disk; put `state-dir` on a filesystem that preallocates (ext4, xfs, tmpfs) to keep one";
/// The journal cannot compact or set space aside for another reason (a disk I/O error, …;
/// field `problem` says what the system answered and what to do).
pub const JOURNAL_CANNOT_COMPACT: &str = "the journal cannot compact or set space aside in the state directory: it appends to its existing log meanwhile; field `problem` says why and what to do";
/// The journal can compact and set space aside again (field `reserve_left_bytes`).
pub const JOURNAL_RESERVE_RESTORED: &str =
    "the state directory takes the journal's writes again: its reserve is back in place";
/// A plugin's state could not be written (fields `plugin`, `error`): one line per streak of
/// failed state writes; the plugin's `state-set` fails with the error, `state-get` answers.
pub const PLUGIN_STATE_NOT_WRITABLE: &str =
    "plugin state cannot be written: plugins' state-set and state-delete fail until it can";
/// Plugin state can be written again (fields `plugin`, `failed_writes`).
pub const PLUGIN_STATE_WRITABLE_AGAIN: &str = "plugin state can be written again";
/// A plugin's state writes were refused over its disk write budget (fields `plugin`,
/// `refused`, `over_ms`): at most one line a minute per plugin.
pub const PLUGIN_STATE_OVER_BUDGET: &str =
    "plugin state writes refused: over the plugin's disk write budget";
/// Every plugin approved an event, but the journal cannot be written, so its approval waits
/// (field `event_id`): an approval is sent only once it is journaled. Said once per event.
pub const APPROVAL_HELD_FOR_JOURNAL: &str = "approval held: the journal cannot be written, and an approval is sent only once it is journaled (a restart must know it was sent); plugins are still called (docs/operations.md, \"When the disk is full\")";
/// The journal's snapshot has a schema version above this forewarn's (fields `version`,
/// `supported`, `kept`: where `journal.json` and `journal.log` were kept as written, before
/// this forewarn's first write replaced them). Said once, at start.
pub const JOURNAL_FROM_A_NEWER_FOREWARN: &str = "the journal was written by a newer forewarn: this one resumes from the parts it reads and writes its own journal from now on; the journal as written is kept beside it (field `kept`): run the forewarn that wrote it to resume from everything it recorded, or remove the copies once no event is in progress";
/// A journal from a newer forewarn could not be kept beside it (fields `version`, `path`,
/// `error`): this forewarn's first write replaces it.
pub const JOURNAL_FROM_A_NEWER_FOREWARN_NOT_KEPT: &str = "the journal was written by a newer forewarn and cannot be kept beside it: this forewarn's writes replace it, dropping what only the newer one reads; free space on the state directory's filesystem, or stop forewarn and copy the journal away, to keep it";
/// The operating system began to shut down or reboot (fields `budget`, `waits_for`: the
/// event whose preparation holds it back, forewarn's own Shutdown event or a Scheduled Event
/// already preparing this VM).
pub const HOST_SHUTDOWN_BEGAN: &str = "the operating system is shutting down with no Scheduled Event prepared: the plugins prepare within the shutdown budget (not from IMDS: nothing is approved)";
/// The shutdown is let go on (fields `outcome`, `prepared_ms`; the message ends with why).
pub const HOST_SHUTDOWN_RELEASED: &str = "the operating system's shutdown goes on";
/// The operating system's shutdown was called off.
pub const HOST_SHUTDOWN_CANCELLED: &str =
    "the operating system's shutdown was called off: the plugins undo their preparation";
/// At start, a Shutdown event from before (fields `event_id`, `shut_down_at`,
/// `prepared_ms`): the plugins recover.
pub const HOST_SHUTDOWN_RESUMED: &str =
    "the VM shut down with no Scheduled Event (not from IMDS); the plugins recover";
/// systemd-logind's delay inhibitor is taken (fields `budget_ms`, `limit_ms`: logind's InhibitDelayMaxUSec): a shutdown
/// with no Scheduled Event waits for the plugins' last preparation.
pub const SHUTDOWN_HELD: &str =
    "holding shutdowns back for the plugins' last preparation (a systemd-logind delay inhibitor)";
/// logind holds a shutdown for less than `[shutdown] budget` (fields `budget_ms`,
/// `wanted_ms`).
pub const SHUTDOWN_BUDGET_CUT_BY_LOGIND: &str = "logind holds a shutdown for less than `shutdown.budget`: the budget is cut to fit; raise InhibitDelayMaxSec in /etc/systemd/logind.conf.d/forewarn.conf ([Login] InhibitDelayMaxSec=35) and restart systemd-logind";
/// The Windows service holds a shutdown for less than `[shutdown] budget` (fields
/// `budget_ms`, `wanted_ms`).
pub const SHUTDOWN_BUDGET_CUT_BY_WINDOWS: &str = "Windows waits for the service at shutdown for less than `shutdown.budget` allows: the budget is cut to end 5 s before Windows stops waiting; raise the service's PreshutdownTimeout (`forewarn service install` sets 60 s; the registry value HKLM\\SYSTEM\\CurrentControlSet\\Services\\forewarn\\PreshutdownTimeout, in ms) or lower `shutdown.budget`";
/// The Windows service accepts the pre-shutdown notification (fields `budget_ms`,
/// `limit_ms`: the PreshutdownTimeout): a shutdown with no Scheduled Event waits for the plugins' last
/// preparation.
pub const PRESHUTDOWN_HELD: &str = "holding shutdowns back for the plugins' last preparation (the service's pre-shutdown notification)";
/// The pipeline released a Windows shutdown: the service stops and Windows goes on.
pub const PRESHUTDOWN_RELEASED: &str =
    "the plugins' last preparation is done: the service stops and Windows shuts down";
/// The daemon did not release a Windows shutdown within the budget and the margin (field
/// `budget_ms`).
pub const PRESHUTDOWN_NOT_RELEASED: &str = "the shutdown was not released within the budget: the service stops anyway so that Windows does not wait past its PreshutdownTimeout";
/// The delay inhibitor was closed: logind goes on with the shutdown.
pub const SHUTDOWN_LOCK_RELEASED: &str = "the shutdown inhibitor is released: the shutdown goes on";
/// No logind to hold shutdowns back (field `error`).
pub const LOGIND_UNREACHABLE: &str = "cannot hold shutdowns back through systemd-logind on the system bus: a shutdown with no Scheduled Event gets no preparation; check that systemd-logind runs and the system bus is reachable (`busctl status org.freedesktop.login1`), or set `shutdown.prepare = false` to say so";
/// `[shutdown] prepare = false`.
pub const SHUTDOWN_NOT_HELD: &str = "shutdowns are not held back for the plugins (`shutdown.prepare = false`): a shutdown with no Scheduled Event gets no preparation";
