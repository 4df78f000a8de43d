//! The outcome records as the admin endpoint answers them (`GET /status/events`) and
//! `forewarn events` reads them: the book the outcome keeper (`daemon/outcome_keeper.rs`)
//! fills, shared behind a lock.

use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::pipeline::outcome::record::OutcomeRecord;
use crate::pipeline::outcome::{OutcomeBook, OutcomeLimits};

/// What `GET /status/events` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsView {
    /// This VM's name, as the daemon resolved it ("" while it starts).
    pub vm_name: String,
    /// The records, the oldest first.
    pub records: Vec<OutcomeRecord>,
    /// `[outcomes] keep`.
    pub keep: usize,
    /// `[outcomes] max-size`, in bytes.
    pub max_bytes: u64,
    /// The bytes the records' files take.
    pub bytes: u64,
}

/// The outcome book, shared by its keeper (which writes it) and the admin endpoint.
#[derive(Debug)]
pub(crate) struct OutcomeShelf {
    book: Mutex<OutcomeBook>,
    limits: OutcomeLimits,
}

impl OutcomeShelf {
    /// A shelf holding `book`, bounded by `limits`.
    pub(crate) fn new(book: OutcomeBook, limits: OutcomeLimits) -> OutcomeShelf {
        OutcomeShelf {
            book: Mutex::new(book),
            limits,
        }
    }

    /// The book, locked (never held across an await or a file write).
    pub(crate) fn book(&self) -> MutexGuard<'_, OutcomeBook> {
        // A poisoned book still holds the records: the keeper goes on with them.
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of every record, for `/status/events`.
    pub(crate) fn view(&self) -> EventsView {
        let book = self.book();
        EventsView {
            vm_name: book.vm_name().to_owned(),
            records: book.records().cloned().collect(),
            keep: self.limits.keep,
            max_bytes: self.limits.max_total_bytes,
            bytes: book.total_bytes(),
        }
    }
}
