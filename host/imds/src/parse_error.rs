//! Why IMDS JSON was rejected: a whole document, or one entry of its `Events` set aside.
//! A leaf module, so both the document types and the parser can name it.

/// Why a piece of IMDS JSON was rejected. A document that is not JSON, not an object or has
/// no `Events` array is rejected whole (the caller keeps its previous view and asks again);
/// an unreadable entry of `Events` is set aside in [`Document::rejected`] and the rest kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text is not JSON at all.
    #[error("IMDS sent text that is not JSON ({reason}): \"{excerpt}\"")]
    NotJson {
        /// What the JSON parser said.
        reason: String,
        /// The start of the text.
        excerpt: String,
    },
    /// The top level is JSON but not an object.
    #[error("IMDS sent JSON whose top level is {found}, not an object: \"{excerpt}\"")]
    NotAnObject {
        /// What it is instead ("an array", …).
        found: &'static str,
        /// The start of the text.
        excerpt: String,
    },
    /// A field the document cannot do without is absent (or null).
    #[error("IMDS sent JSON without the field \"{field}\": \"{excerpt}\"")]
    MissingField {
        /// The field's name.
        field: &'static str,
        /// The start of the text.
        excerpt: String,
    },
    /// A field has the wrong JSON type (e.g. `Events` is not an array).
    #[error("IMDS sent a \"{field}\" that is not {expected}: \"{excerpt}\"")]
    WrongType {
        /// The field's name.
        field: &'static str,
        /// What it should be ("an array").
        expected: &'static str,
        /// The start of the field's value.
        excerpt: String,
    },
    /// Entry number `index` (0-based) of `Events` or `StartRequests` has no usable `EventId`.
    #[error("IMDS sent entry #{index} without a usable EventId: \"{excerpt}\"")]
    MissingEventId {
        /// The entry's position, from 0.
        index: usize,
        /// The start of the entry.
        excerpt: String,
    },
    /// An event's `NotBefore` is in no format forewarn can read, so its deadline is unknown.
    #[error(
        "IMDS sent event {event_id} with a NotBefore forewarn cannot read: \"{text}\" \
         (expected e.g. \"Mon, 11 Apr 2022 22:26:58 GMT\")"
    )]
    BadNotBefore {
        /// The event's `EventId`.
        event_id: String,
        /// The start of the unreadable value.
        text: String,
    },
    /// An event's field has a value forewarn cannot use (e.g. `Resources` holds objects).
    #[error("IMDS sent event {event_id} with an unusable \"{field}\": \"{excerpt}\"")]
    BadEventField {
        /// The event's `EventId`.
        event_id: String,
        /// The field's name.
        field: &'static str,
        /// The start of the unusable value.
        excerpt: String,
    },
}

impl ParseError {
    /// The `EventId` of the event this error is about, where it could be read.
    pub fn event_id(&self) -> Option<&str> {
        match self {
            ParseError::BadNotBefore { event_id, .. }
            | ParseError::BadEventField { event_id, .. } => Some(event_id),
            _ => None,
        }
    }
}
