//! Locking the crate's mutexes: a poisoned lock (a panic while it was held) is used as it
//! is, since every value behind these locks stays consistent between statements.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, ignoring poison.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
