//! What keeps an event whose subscribers all approved from being approved: a [`Hold`], a
//! value compared as a value (the stage says each hold once per event, and says it again only
//! when the hold itself changes, never because its wording did).

use std::fmt;

use forewarn_events::{EventId, PluginName};

use crate::log_messages;

/// Why an event this VM prepared is not approved (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Plugin files that failed to load: a plugin that cannot run has not approved.
    FailedToLoad {
        /// The files, as shown.
        files: Vec<String>,
    },
    /// No plugin subscribes to the event's type, and `policy.approve-unsubscribed` is off.
    Unsubscribed {
        /// The event's type as IMDS spelled it.
        event_type: String,
    },
    /// Quarantined plugins under `on-failure = "hold"` that have not prepared the event.
    Quarantined {
        /// The plugins.
        plugins: Vec<PluginName>,
    },
    /// The journal cannot be written, and an approval is sent only once it is journaled.
    JournalNotDurable,
}

impl Hold {
    /// The hold said for `event_id`, for the log and the timeline.
    pub fn describe(&self, event_id: &EventId) -> HoldText<'_> {
        HoldText {
            hold: self,
            event_id: event_id.clone(),
        }
    }
}

/// A [`Hold`] written out for one event (see [`Hold::describe`]).
pub struct HoldText<'a> {
    hold: &'a Hold,
    event_id: EventId,
}

impl fmt::Display for HoldText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = &self.event_id;
        match self.hold {
            Hold::FailedToLoad { files } => write!(
                f,
                "not approving event {id}: plugin file(s) {} failed to load, and a plugin that \
                 cannot run has not approved; fix or remove the file (`forewarn status` shows \
                 why it failed) and the approval goes ahead",
                files.join(", ")
            ),
            Hold::Unsubscribed { event_type } => write!(
                f,
                "not approving event {id}: no plugin subscribes to {event_type}, so nothing \
                 prepared this VM and the event starts at NotBefore; add a plugin that \
                 subscribes to it, or set `policy.approve-unsubscribed = true` to approve such \
                 events at once"
            ),
            Hold::Quarantined { plugins } => write!(
                f,
                "not approving event {id}: held by quarantined plugin {}: its calls failed \
                 again and again, it is no longer called, and its manifest says on-failure = \
                 \"hold\", so the event starts at NotBefore; replace the plugin's .wasm or .toml \
                 with a fixed one to lift the quarantine (`forewarn status` shows its last \
                 failure), or set on-failure = \"approve\" if the plugin is advisory",
                plugins.join(", ")
            ),
            Hold::JournalNotDurable => f.write_str(log_messages::APPROVAL_HELD_FOR_JOURNAL),
        }
    }
}
