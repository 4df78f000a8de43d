//! The `DISK` block of `forewarn status`, from the storage part of the daemon's `/status`.

use std::fmt::Write as _;

use forewarn_daemon::storage_health::{JournalState, NOT_DURABLE_REFUSES, StorageView};

/// The `DISK` block of `forewarn status`: printed only when something is wrong.
pub(crate) fn render_storage(out: &mut String, storage: &StorageView) {
    if !storage.needs_attention() {
        return;
    }
    out.push_str("\nDISK (docs/operations.md, \"When the disk is full\")\n");
    let journal = &storage.journal;
    match journal.state {
        JournalState::NotDurable => {
            let _ = writeln!(
                out,
                "  journal: NOT DURABLE since {} ({} failed writes; next try {})",
                journal.not_durable_since.as_deref().unwrap_or("-"),
                journal.write_failures,
                journal.next_retry.as_deref().unwrap_or("-"),
            );
            if let Some(error) = &journal.error {
                let _ = writeln!(out, "    {error}");
            }
            let _ = writeln!(out, "    refused: {NOT_DURABLE_REFUSES}");
        }
        JournalState::OnReserve => {
            let _ = writeln!(
                out,
                "  journal: durable, on its reserve ({} KiB left)",
                journal.reserve_left_bytes / 1024
            );
            if let Some(cause) = journal.space_problem_cause {
                let _ = writeln!(out, "    {}", cause.message());
            }
            if let Some(problem) = &journal.space_problem {
                let _ = writeln!(out, "    {problem}");
            }
        }
        JournalState::Durable => {}
    }
    let plugin_state = &storage.plugin_state;
    if !plugin_state.writable {
        let _ = writeln!(
            out,
            "  plugin state: NOT WRITABLE since {} ({} failed writes; reads still answer)",
            plugin_state.not_writable_since.as_deref().unwrap_or("-"),
            plugin_state.write_failures,
        );
        if let Some(error) = &plugin_state.error {
            let _ = writeln!(out, "    {error}");
        }
    }
    for (plugin, refused) in &plugin_state.refused_over_budget {
        let _ = writeln!(
            out,
            "  plugin state: {refused} writes of {plugin} refused over its disk write budget"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use forewarn_daemon::storage_health::StorageHealth;

    #[test]
    fn a_healthy_state_directory_prints_nothing() {
        let health = StorageHealth::default();
        let view = health.view();
        assert!(!view.needs_attention());
        let mut out = String::new();
        render_storage(&mut out, &view);
        assert_eq!(out, "");
    }

    #[test]
    fn a_journal_that_cannot_be_written_says_why_and_what_is_refused() {
        let health = StorageHealth::default();
        health.update_journal(|journal| {
            journal.durable = false;
            journal.not_durable_since = Some(SystemTime::UNIX_EPOCH);
            journal.last_error = Some("could not append to journal.log: disk full".into());
            journal.write_failures = 3;
        });
        let view = health.view();
        assert_eq!(view.journal.state, JournalState::NotDurable);
        assert!(view.journal.refused.is_some());
        let mut out = String::new();
        render_storage(&mut out, &view);
        assert!(out.contains("NOT DURABLE since 1970-01-01"), "{out}");
        assert!(out.contains("disk full"), "{out}");
        assert!(out.contains("early approvals"), "{out}");
    }
}
