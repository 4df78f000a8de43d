//! What crosses the machine's edge: its settings, the [`Input`]s the event loop hands in and
//! the [`Action`]s it carries out.

use std::sync::Arc;
use std::time::Duration;

use forewarn_events::{Document, EventId};

use crate::approval::{BarrierRequest, BarrierVerdict};
use crate::host_shutdown::ShutdownRelease;
use crate::policy::PolicyConfig;
use crate::roster::Roster;
use crate::scheduler::{CallReply, PlannedCall};
use crate::state::DaemonState;
use crate::timeline::TimelineEntry;

/// What the pipeline needs to know besides its inputs.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// This VM's name, as IMDS lists it in `Resources`.
    pub vm_name: String,
    /// The `[policy]` section.
    pub policy: PolicyConfig,
}

/// Something that happened outside the pipeline.
#[derive(Debug, Clone)]
pub enum Input {
    /// IMDS listed this document (the newest: each is a whole snapshot).
    Document(Arc<Document>),
    /// A plugin call finished.
    Answer(Box<CallAnswer>),
    /// The plugin set changed (reload).
    Plugins(Arc<Roster>),
    /// IMDS accepted the approval of these events.
    ApprovalSent(Vec<EventId>),
    /// IMDS did not accept the approval of these events.
    ApprovalFailed {
        /// The events whose approval failed.
        event_ids: Vec<EventId>,
        /// IMDS refused the request itself (a 4xx, e.g. 400 for an id it no longer lists):
        /// sending the same batch again would fail the same way.
        rejected: bool,
        /// What went wrong, for the log and the timeline.
        error: String,
    },
    /// Something journaled beside the state changed (readiness holds): persist again.
    ReadinessHoldsChanged,
    /// Whether the journal's commits reach the disk. While they do not, approvals are
    /// neither decided nor sent (each needs its record first); plugins are still called.
    JournalDurable(bool),
    /// The etcd barrier's verdict on an event this VM joined ([`Action::Coordinate`]).
    BarrierVerdict {
        /// The event's `EventId`.
        event_id: EventId,
        /// What the barrier says now.
        verdict: BarrierVerdict,
    },
    /// The daemon is stopping: record answers still arriving, start nothing new.
    ShutdownStarted,
    /// The operating system began to shut down or reboot (systemd-logind's
    /// `PrepareForShutdown`, the Windows service's pre-shutdown): the plugins prepare within
    /// `budget`, for forewarn's own Shutdown event unless a Scheduled Event already prepares
    /// this VM; answered with [`Action::ReleaseShutdown`].
    HostShutdown {
        /// How long the service manager holds the shutdown back for forewarn.
        budget: Duration,
    },
    /// The operating system's shutdown was called off: plugins that prepared for the
    /// Shutdown event undo it (`ended-without-start`).
    HostShutdownCancelled,
}

/// A finished plugin call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallAnswer {
    /// The call this answers.
    pub call: PlannedCall,
    /// What the plugin replied.
    pub reply: CallReply,
}

/// Something the event loop must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Journal this state durably before the actions after it.
    Persist(Arc<DaemonState>),
    /// Journal this state soon (the loop may group it with later commits): only deferral
    /// bookkeeping changed — answers that decided nothing, and the attempt counts of calls
    /// asking again plugins that already deferred, whose first attempt is on disk.
    PersistGrouped(Arc<DaemonState>),
    /// Start this plugin call; answer with [`Input::Answer`].
    Call(PlannedCall),
    /// Hand this request to the etcd coordinator (`[coordination]`); it answers with
    /// [`Input::BarrierVerdict`]s whenever its verdict on a joined event changes.
    Coordinate(BarrierRequest),
    /// POST the approval of these events to IMDS; answer with [`Input::ApprovalSent`] or
    /// [`Input::ApprovalFailed`].
    Approve(Vec<EventId>),
    /// Report this step on the timeline (demo, metrics, tests).
    Emit(TimelineEntry),
    /// Let the operating system's shutdown go on (release systemd-logind's delay inhibitor,
    /// end the Windows service's pre-shutdown), for this reason.
    ReleaseShutdown(ShutdownRelease),
}
