//! The timeline's broadcast: the pipeline emits `TimelineEntry`s as actions, the event loop
//! sends each here, and the metrics, the admin endpoint's history and the demo's printer
//! `subscribe()`.

use crate::pipeline::timeline::TimelineEntry;

/// Sender half: the daemon keeps it; anyone may `subscribe()`.
pub(crate) type Timeline = tokio::sync::broadcast::Sender<TimelineEntry>;

/// A timeline with room for bursts; slow readers miss entries rather than slowing the daemon.
pub fn new_timeline() -> Timeline {
    tokio::sync::broadcast::channel(1024).0
}
