//! Why IMDS JSON was rejected: a whole document, or one entry of its `Events` set aside.
//! It lives beside the document types: a document keeps the entries it set aside as these, and
//! the parser in `forewarn-imds` returns them.

/// Why a piece of IMDS JSON was rejected. A document that is not JSON, not an object or has
/// no `Events` array is rejected whole (the caller keeps its previous view and asks again);
/// an entry of `Events` without a usable `EventId` is set aside in [`Document::rejected`] and
/// the rest kept. (An event with an `EventId` is never set aside: a field it cannot read is
/// kept in [`ScheduledEvent::unreadable`](crate::ScheduledEvent::unreadable).)
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
}
