//! Azure IMDS Scheduled Events as plain data: the [`Document`] one GET returns, its
//! [`ScheduledEvent`]s with typed fields (the raw text kept wherever a newer API could send
//! something new), why a piece of IMDS JSON was rejected ([`ParseError`]), and a point in
//! time on IMDS's clock ([`ImdsTime`]).
//!
//! No I/O, no clock and no async runtime: `forewarn-imds` parses, renders, fetches and
//! approves these (and re-exports every type, so `forewarn_imds::ScheduledEvent` is this
//! one); the daemon's pipeline works on them.
//!
//! ```
//! use forewarn_events::{EventType, ScheduledEvent};
//!
//! assert_eq!(EventType::from_wire("freeze"), EventType::Freeze);
//! assert_eq!(EventType::from_wire("Hibernate"), EventType::Unknown);
//! assert!(forewarn_events::is_vm_name("_vm-a", "vm-a"));
//! # let _: Option<ScheduledEvent> = None;
//! ```

mod event;
mod ids;
mod imds_time;
mod parse_error;
mod plugin_log_line;
mod text;

pub use event::{
    Document, EventField, EventSource, EventStatus, EventType, ScheduledEvent, UnreadableField,
    is_vm_name,
};
pub use ids::{EventId, PluginName};
pub use imds_time::{ImdsTime, millis, system_time_form, unix_ms};
pub use parse_error::ParseError;
pub use plugin_log_line::{LogLevel, PluginLogLine};
pub use text::{cut_to_bytes, cut_to_chars, log_safe, truncate};
