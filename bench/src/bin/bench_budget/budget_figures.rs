//! bench-budget's figures from what one run observed (the simulator's state, the live watch,
//! etcd's own history, the daemons' log lines), and the tables it prints (Markdown, pasted
//! into BENCHMARKS.md).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use forewarn_bench::{percentile, sorted};
use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::etcd::KeyChange;

use crate::budget_watch::{Change, LoadWindow};

/// What one run observed, as [`RunFigures::from_observed`] reads it.
pub(crate) struct Observed<'a> {
    pub(crate) vms: usize,
    /// `disruption-budget` as configured; None: the run without one.
    pub(crate) budget: Option<String>,
    /// The slots the budget gives the fleet (the bench's own arithmetic).
    pub(crate) slots: Option<usize>,
    pub(crate) prefix: &'a str,
    /// VM → its event's id.
    pub(crate) events: &'a BTreeMap<String, String>,
    /// The simulator's state once every event was gone.
    pub(crate) state: &'a StateSnapshot,
    /// Every change under the prefix, as the live watch saw it.
    pub(crate) watch: &'a [Change],
    pub(crate) watch_problems: usize,
    /// etcd's history of `PREFIX/vms/`, replayed after the run.
    pub(crate) history: &'a [(String, KeyChange)],
    /// VM → when its daemon logged its slot given back (Unix ms).
    pub(crate) gave_back: &'a BTreeMap<String, u64>,
    /// How many different NotBefores the events carried.
    pub(crate) not_befores: usize,
    pub(crate) notice: Duration,
    /// The 1-minute load average before the events and after the fleet was through.
    pub(crate) load: (f64, f64),
    /// What the events cost etcd and the machine: from just before they were generated to
    /// every event gone (and, with a budget, every slot given back).
    pub(crate) cost: LoadWindow,
}

/// One run's figures.
pub(crate) struct RunFigures {
    pub(crate) vms: usize,
    pub(crate) budget: Option<String>,
    pub(crate) slots: Option<usize>,
    // (1) the most down at once
    /// The most slot keys live at any revision of etcd's history.
    pub(crate) most_held_history: usize,
    /// Slot keys created, and still held at the end, in etcd's history.
    pub(crate) taken_history: usize,
    pub(crate) left_held_history: usize,
    /// The same, from the live watch.
    pub(crate) most_held_watch: usize,
    pub(crate) taken_watch: usize,
    pub(crate) given_back_watch: usize,
    /// The most VMs approved and not yet gone at the simulator.
    pub(crate) most_down_simulator: usize,
    pub(crate) approvals_accepted: usize,
    pub(crate) approval_posts: usize,
    // (2) a slot given back → the next VM's approval
    pub(crate) release_to_approval: Vec<Duration>,
    pub(crate) release_to_take: Vec<Duration>,
    pub(crate) take_to_approval: Vec<Duration>,
    pub(crate) logged_release_to_approval: Vec<Duration>,
    /// The watch's stamp of a slot's delete minus the daemon's log line of it (ms).
    pub(crate) watch_minus_log_ms: Vec<i64>,
    // (3) the fleet's total
    pub(crate) appear_spread: Duration,
    pub(crate) appear_to_last_queued: Option<Duration>,
    pub(crate) appear_to_first_approval: Duration,
    pub(crate) appear_to_last_approval: Duration,
    pub(crate) appear_to_all_gone: Duration,
    /// First appearance + notice − the last approval: how long before NotBefore it came.
    pub(crate) last_approval_before_not_before: i64,
    // where a slot's time goes
    pub(crate) slot_held: Vec<Duration>,
    pub(crate) approval_to_gone: Vec<Duration>,
    pub(crate) gone_to_release: Vec<Duration>,
    pub(crate) not_befores: usize,
    /// How many different NotBefores the daemons' queue keys carried.
    pub(crate) queued_not_befores: usize,
    pub(crate) watch_problems: usize,
    pub(crate) load: (f64, f64),
    pub(crate) cost: LoadWindow,
    /// Anything that does not add up (a take without a release before it, a count that
    /// differs between the watch and etcd's history, …).
    pub(crate) problems: Vec<String>,
}

/// `to − from` in ms as a Duration (zero when negative).
fn span(from: u64, to: u64) -> Duration {
    Duration::from_millis(to.saturating_sub(from))
}

/// `PREFIX/vms/VM/KIND/ID` → VM.
fn vm_of<'k>(prefix: &str, key: &'k str, kind: &str) -> Option<&'k str> {
    let rest = key.strip_prefix(prefix)?.strip_prefix("/vms/")?;
    let (vm, rest) = rest.split_once('/')?;
    rest.strip_prefix(kind)?.strip_prefix('/').map(|_| vm)
}

impl RunFigures {
    pub(crate) fn from_observed(seen: &Observed<'_>) -> RunFigures {
        let mut problems = Vec::new();
        let state = seen.state;
        let id_of = |vm: &str| seen.events.get(vm).map(String::as_str).unwrap_or("");
        let transition_at = |vm: &str, transition: Transition| {
            state
                .history
                .iter()
                .find(|change| {
                    change.transition == transition
                        && change.event_id.eq_ignore_ascii_case(id_of(vm))
                })
                .map(|change| change.at_unix_ms)
        };
        let ours = |id: &str| {
            seen.events
                .values()
                .any(|event| event.eq_ignore_ascii_case(id))
        };
        let approval_posts = state
            .approvals
            .iter()
            .filter(|approval| ours(&approval.event_id))
            .count();
        // VM → (appeared, approved, gone) at the simulator.
        let mut spans: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
        for vm in seen.events.keys() {
            let approved = state
                .approvals
                .iter()
                .find(|approval| {
                    approval.accepted && approval.event_id.eq_ignore_ascii_case(id_of(vm))
                })
                .map(|approval| approval.at_unix_ms);
            let appeared = transition_at(vm, Transition::Appeared);
            let gone = transition_at(vm, Transition::Removed);
            match (appeared, approved, gone) {
                (Some(appeared), Some(approved), Some(gone)) => {
                    spans.insert(vm, (appeared, approved, gone));
                }
                _ => problems.push(format!(
                    "{vm}: appeared {appeared:?}, approved {approved:?}, gone {gone:?} at the simulator"
                )),
            }
        }
        let approvals_accepted = spans.len();
        let first_appeared = spans.values().map(|span| span.0).min().unwrap_or(0);
        let last_appeared = spans.values().map(|span| span.0).max().unwrap_or(0);
        let first_approval = spans.values().map(|span| span.1).min().unwrap_or(0);
        let last_approval = spans.values().map(|span| span.1).max().unwrap_or(0);
        let last_gone = spans.values().map(|span| span.2).max().unwrap_or(0);
        let most_down_simulator = most_at_once(spans.values().map(|span| (span.1, span.2)));

        // (1) from etcd's own history: the slot keys live after each revision.
        let (most_held_history, taken_history, left_held_history) =
            slots_in_history(seen.prefix, seen.history);

        // The live watch: the same count, and each take and give-back with its stamp.
        let mut by_revision: BTreeMap<u64, Vec<&Change>> = BTreeMap::new();
        for change in seen.watch {
            if vm_of(seen.prefix, &change.key, "slots").is_some() {
                by_revision.entry(change.revision).or_default().push(change);
            }
        }
        let mut held: BTreeSet<&str> = BTreeSet::new();
        let (mut takes, mut releases) = (Vec::new(), Vec::new());
        let mut most_held_watch = 0;
        for changes in by_revision.values() {
            for change in changes {
                match change.deleted {
                    false if held.insert(&change.key) => takes.push(*change),
                    true if held.remove(change.key.as_str()) => releases.push(*change),
                    _ => {}
                }
            }
            most_held_watch = most_held_watch.max(held.len());
        }
        if seen.budget.is_some() && (takes.len() != taken_history) {
            problems.push(format!(
                "the live watch saw {} slots taken, etcd's history holds {taken_history}",
                takes.len()
            ));
        }

        // (2) the k-th take beyond the first `slots` was let in by the (k − slots)-th
        // give-back: while VMs wait, a slot is taken only when one was given back.
        let (mut release_to_approval, mut release_to_take, mut take_to_approval) =
            (Vec::new(), Vec::new(), Vec::new());
        let (mut logged_release_to_approval, mut watch_minus_log_ms) = (Vec::new(), Vec::new());
        let slots = seen.slots.unwrap_or(0);
        for (index, take) in takes.iter().enumerate().skip(slots) {
            let Some(release) = releases.get(index - slots) else {
                problems.push(format!(
                    "slot take {} ({}) has no give-back before it",
                    index + 1,
                    take.key
                ));
                continue;
            };
            if release.revision > take.revision {
                problems.push(format!(
                    "slot take {} ({} at revision {}) came before give-back {} ({} at {})",
                    index + 1,
                    take.key,
                    take.revision,
                    index - slots + 1,
                    release.key,
                    release.revision
                ));
            }
            let taker = vm_of(seen.prefix, &take.key, "slots").unwrap_or("");
            let Some(&(_, approved, _)) = spans.get(taker) else {
                problems.push(format!("{taker} took a slot and has no approval"));
                continue;
            };
            if approved < release.seen_unix_ms {
                problems.push(format!(
                    "{taker}'s approval POST ({approved}) before the watch saw the slot it took \
                     given back ({})",
                    release.seen_unix_ms
                ));
            }
            release_to_approval.push(span(release.seen_unix_ms, approved));
            release_to_take.push(span(release.seen_unix_ms, take.seen_unix_ms));
            take_to_approval.push(span(take.seen_unix_ms, approved));
            let giver = vm_of(seen.prefix, &release.key, "slots").unwrap_or("");
            if let Some(&logged) = seen.gave_back.get(giver) {
                logged_release_to_approval.push(span(logged, approved));
            }
        }
        for release in &releases {
            let giver = vm_of(seen.prefix, &release.key, "slots").unwrap_or("");
            if let Some(&logged) = seen.gave_back.get(giver) {
                watch_minus_log_ms.push(release.seen_unix_ms as i64 - logged as i64);
            }
        }
        watch_minus_log_ms.sort_unstable();

        // Where a slot's time goes: held (put → delete), the event running, gone → given back.
        let mut slot_held = Vec::new();
        let mut gone_to_release = Vec::new();
        for take in &takes {
            let Some(release) = releases.iter().find(|release| release.key == take.key) else {
                continue;
            };
            slot_held.push(span(take.seen_unix_ms, release.seen_unix_ms));
            let vm = vm_of(seen.prefix, &take.key, "slots").unwrap_or("");
            if let Some(&(_, _, gone)) = spans.get(vm) {
                gone_to_release.push(span(gone, release.seen_unix_ms));
            }
        }
        let approval_to_gone: Vec<Duration> = spans
            .values()
            .map(|&(_, approved, gone)| span(approved, gone))
            .collect();
        // The NotBefores the daemons queued with (`vms/VM/queue/ID`'s `not_before_unix_ms`).
        let queued_not_befores: BTreeSet<Option<u64>> = seen
            .watch
            .iter()
            .filter(|change| !change.deleted && vm_of(seen.prefix, &change.key, "queue").is_some())
            .map(|change| {
                serde_json::from_str::<serde_json::Value>(&change.value)
                    .ok()
                    .and_then(|record| record["not_before_unix_ms"].as_u64())
            })
            .collect();
        let last_queued = seen
            .watch
            .iter()
            .filter(|change| !change.deleted && vm_of(seen.prefix, &change.key, "queue").is_some())
            .map(|change| change.seen_unix_ms)
            .max();
        if let Some(slots) = seen.slots {
            if most_held_history != slots {
                problems.push(format!(
                    "etcd's history held {most_held_history} slots at once; the budget gives {slots}"
                ));
            }
            if most_down_simulator > slots {
                problems.push(format!(
                    "the simulator saw {most_down_simulator} VMs approved and not gone at once; \
                     the budget gives {slots}"
                ));
            }
            if left_held_history != 0 {
                problems.push(format!("{left_held_history} slots still held at the end"));
            }
        }
        if approval_posts != approvals_accepted {
            problems.push(format!(
                "{approval_posts} approval POSTs for {approvals_accepted} events approved"
            ));
        }
        if seen.not_befores != 1 {
            problems.push(format!(
                "the events carried {} NotBefores",
                seen.not_befores
            ));
        }
        let not_before = first_appeared + seen.notice.as_millis() as u64;
        RunFigures {
            vms: seen.vms,
            budget: seen.budget.clone(),
            slots: seen.slots,
            most_held_history,
            taken_history,
            left_held_history,
            most_held_watch,
            taken_watch: takes.len(),
            given_back_watch: releases.len(),
            most_down_simulator,
            approvals_accepted,
            approval_posts,
            release_to_approval: sorted(release_to_approval),
            release_to_take: sorted(release_to_take),
            take_to_approval: sorted(take_to_approval),
            logged_release_to_approval: sorted(logged_release_to_approval),
            watch_minus_log_ms,
            appear_spread: span(first_appeared, last_appeared),
            appear_to_last_queued: last_queued.map(|at| span(first_appeared, at)),
            appear_to_first_approval: span(first_appeared, first_approval),
            appear_to_last_approval: span(first_appeared, last_approval),
            appear_to_all_gone: span(first_appeared, last_gone),
            last_approval_before_not_before: not_before as i64 - last_approval as i64,
            slot_held: sorted(slot_held),
            approval_to_gone: sorted(approval_to_gone),
            gone_to_release: sorted(gone_to_release),
            not_befores: seen.not_befores,
            queued_not_befores: queued_not_befores.len(),
            watch_problems: seen.watch_problems,
            load: seen.load,
            cost: seen.cost.clone(),
            problems,
        }
    }

    fn label(&self) -> String {
        match (&self.budget, self.slots) {
            (Some(budget), Some(slots)) => format!("\"{budget}\" ({slots} slot(s))"),
            _ => "none".to_owned(),
        }
    }
}

/// The most intervals `[from, to)` open at once (one ending as another starts: not both).
fn most_at_once(spans: impl Iterator<Item = (u64, u64)>) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for (from, to) in spans {
        edges.push((from, 1));
        edges.push((to, -1));
    }
    // At the same instant an end before a start.
    edges.sort_unstable();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        open += step;
        most = most.max(open);
    }
    most.max(0) as usize
}

/// From etcd's history of `PREFIX/vms/`: the most slot keys live after any revision (every
/// write of one transaction shares its revision: counted after all of them), the slot keys
/// created, and those still live at the end.
fn slots_in_history(prefix: &str, history: &[(String, KeyChange)]) -> (usize, usize, usize) {
    let mut by_revision: BTreeMap<u64, Vec<(&str, bool)>> = BTreeMap::new();
    for (key, change) in history {
        if vm_of(prefix, key, "slots").is_none() {
            continue;
        }
        let (revision, deleted) = match change {
            KeyChange::Put { mod_revision, .. } => (*mod_revision, false),
            KeyChange::Delete { mod_revision } => (*mod_revision, true),
        };
        by_revision
            .entry(revision)
            .or_default()
            .push((key.as_str(), deleted));
    }
    let mut held: BTreeSet<&str> = BTreeSet::new();
    let (mut most, mut taken) = (0, 0);
    for changes in by_revision.values() {
        for &(key, deleted) in changes {
            match deleted {
                false => {
                    if held.insert(key) {
                        taken += 1;
                    }
                }
                true => {
                    held.remove(key);
                }
            }
        }
        most = most.max(held.len());
    }
    (most, taken, held.len())
}

fn millis(duration: Duration) -> String {
    format!("{} ms", duration.as_millis())
}

fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

/// "p50 / p99 / max (n)" of sorted `times`, or "—".
fn spread(times: &[Duration]) -> String {
    match times.last() {
        None => "—".to_owned(),
        Some(max) => format!(
            "{} / {} / {} ({})",
            millis(percentile(times, 50)),
            millis(percentile(times, 99)),
            millis(*max),
            times.len()
        ),
    }
}

/// "p50 / p99" of sorted `times`, or "—".
fn p50_p99(times: &[Duration]) -> String {
    match times.is_empty() {
        true => "—".to_owned(),
        false => format!(
            "{} / {}",
            millis(percentile(times, 50)),
            millis(percentile(times, 99))
        ),
    }
}

pub(crate) fn print_run(run: &RunFigures) {
    println!("## N = {}, budget {}\n", run.vms, run.label());
    println!(
        "- events: {} approved ({} approval POSTs), {} NotBefore(s) at the simulator, {} in the \
         queue keys, appeared within {}",
        run.approvals_accepted,
        run.approval_posts,
        run.not_befores,
        run.queued_not_befores,
        millis(run.appear_spread)
    );
    println!(
        "- (1) most slots held at any revision, etcd's history: {} (taken {}, still held at the \
         end {}); the live watch: {} (taken {}, given back {}); most approved and not gone at \
         the simulator: {}",
        run.most_held_history,
        run.taken_history,
        run.left_held_history,
        run.most_held_watch,
        run.taken_watch,
        run.given_back_watch,
        run.most_down_simulator
    );
    println!(
        "- (2) slot given back (watch) → next approval POST p50 / p99 / max (pairs): {}; given \
         back → slot taken {}; slot taken → POST {}; the daemon's \"gave back\" line → POST {}; \
         watch stamp − log line: {}",
        spread(&run.release_to_approval),
        spread(&run.release_to_take),
        spread(&run.take_to_approval),
        spread(&run.logged_release_to_approval),
        match (
            run.watch_minus_log_ms.first(),
            run.watch_minus_log_ms.get(run.watch_minus_log_ms.len() / 2),
            run.watch_minus_log_ms.last()
        ) {
            (Some(min), Some(median), Some(max)) => format!("median {median} ms ({min} to {max})"),
            _ => "—".to_owned(),
        }
    );
    println!(
        "- (3) appears → first approval {}, → every VM queued {}, → last approval {}, → last \
         event gone {}; the last approval {:.1} s before NotBefore",
        seconds(run.appear_to_first_approval),
        run.appear_to_last_queued.map_or("—".to_owned(), seconds),
        seconds(run.appear_to_last_approval),
        seconds(run.appear_to_all_gone),
        run.last_approval_before_not_before as f64 / 1000.0
    );
    println!(
        "- a slot: held {}; approval → event gone {}; gone → slot given back {}",
        spread(&run.slot_held),
        spread(&run.approval_to_gone),
        spread(&run.gone_to_release)
    );
    let cost = &run.cost;
    let per_second = |count: f64| count / cost.length.as_secs_f64().max(1e-9);
    println!(
        "- cost over {}: etcd requests {} ({:.0}/s), {:.0} KiB/s sent; members' CPU {:?} cores; \
         daemons {:.2} cores",
        seconds(cost.length),
        cost.requests
            .iter()
            .map(|(method, count)| format!("{method} {count:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        per_second(cost.requests.values().sum()),
        per_second(cost.sent_bytes) / 1024.0,
        cost.member_cpu
            .iter()
            .map(|cpu| (per_second(cpu.as_secs_f64()) * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        per_second(cost.daemons_cpu.as_secs_f64())
    );
    println!(
        "- load average {:.1} → {:.1}; watch lines unread: {}",
        run.load.0, run.load.1, run.watch_problems
    );
    match run.problems.is_empty() {
        true => println!("- problems: none\n"),
        false => {
            println!("- **problems**:");
            for problem in &run.problems {
                println!("  - {problem}");
            }
            println!();
        }
    }
}

pub(crate) fn print_tables(runs: &[RunFigures]) {
    println!("## Summary\n");
    println!(
        "| N | budget | (1) most slots held, etcd history | (1) most approved and not gone, \
         simulator | slots taken / given back | (2) slot given back → next approval POST p50 / \
         p99 / max (pairs) | (3) appears → last event gone | × without a budget | load avg |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for run in runs {
        let without = runs
            .iter()
            .find(|other| other.vms == run.vms && other.budget.is_none());
        let ratio = match (&run.budget, without) {
            (Some(_), Some(without)) => format!(
                "{:.1}×",
                run.appear_to_all_gone.as_secs_f64()
                    / without.appear_to_all_gone.as_secs_f64().max(1e-9)
            ),
            _ => "—".to_owned(),
        };
        let held = match run.budget {
            Some(_) => run.most_held_history.to_string(),
            None => "— (no slot keys)".to_owned(),
        };
        let taken = match run.budget {
            Some(_) => format!("{} / {}", run.taken_history, run.given_back_watch),
            None => "—".to_owned(),
        };
        println!(
            "| {} | {} | {held} | {} | {taken} | {} | {} | {ratio} | {:.1} → {:.1} |",
            run.vms,
            run.label(),
            run.most_down_simulator,
            spread(&run.release_to_approval),
            seconds(run.appear_to_all_gone),
            run.load.0,
            run.load.1
        );
    }
    println!("\nWith a budget, where the time goes:\n");
    println!(
        "| N | slots | given back → slot taken p50 / p99 | slot taken → approval POST p50 / p99 \
         | daemon's \"gave back\" line → POST p50 / p99 | slot held p50 / p99 | approval → event \
         gone p50 | event gone → slot given back p50 / p99 | appears → every VM queued | \
         appears → first approval |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for run in runs.iter().filter(|run| run.budget.is_some()) {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            run.vms,
            run.slots.unwrap_or(0),
            p50_p99(&run.release_to_take),
            p50_p99(&run.take_to_approval),
            p50_p99(&run.logged_release_to_approval),
            p50_p99(&run.slot_held),
            millis(percentile(&run.approval_to_gone, 50)),
            p50_p99(&run.gone_to_release),
            run.appear_to_last_queued.map_or("—".to_owned(), seconds),
            seconds(run.appear_to_first_approval),
        );
    }
    println!("\nWhat the events cost (generated → every event gone and every slot given back):\n");
    println!(
        "| N | budget | window | etcd Range/s | Txn (all) | Put | KiB/s sent by etcd | busiest \
         member, cores | daemons, cores | load avg |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for run in runs {
        let cost = &run.cost;
        let length = cost.length.as_secs_f64().max(1e-9);
        let count = |method: &str| cost.requests.get(method).copied().unwrap_or(0.0);
        let busiest = cost
            .member_cpu
            .iter()
            .map(Duration::as_secs_f64)
            .fold(0.0, f64::max);
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1} → {:.1} |",
            run.vms,
            run.label(),
            seconds(cost.length),
            count("Range") / length,
            count("Txn"),
            count("Put"),
            cost.sent_bytes / 1024.0 / length,
            busiest / length,
            cost.daemons_cpu.as_secs_f64() / length,
            run.load.0,
            run.load.1
        );
    }
    let troubled: Vec<&RunFigures> = runs.iter().filter(|run| !run.problems.is_empty()).collect();
    if !troubled.is_empty() {
        println!("\n**Problems** (see each run above):");
        for run in troubled {
            println!(
                "- N = {}, budget {}: {}",
                run.vms,
                run.label(),
                run.problems.join("; ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_that_touch_are_not_open_at_once() {
        assert_eq!(most_at_once([(0, 10), (10, 20), (20, 30)].into_iter()), 1);
        assert_eq!(most_at_once([(0, 10), (5, 20), (6, 7)].into_iter()), 3);
        assert_eq!(most_at_once(std::iter::empty()), 0);
    }

    #[test]
    fn a_slot_key_names_its_vm() {
        assert_eq!(
            vm_of("/forewarn", "/forewarn/vms/vm-001/slots/E1", "slots"),
            Some("vm-001")
        );
        assert_eq!(
            vm_of("/forewarn", "/forewarn/vms/vm-001/queue/E1", "slots"),
            None
        );
        assert_eq!(
            vm_of("/forewarn", "/forewarn/vms/vm-001/member", "slots"),
            None
        );
        assert_eq!(vm_of("/forewarn", "/forewarn/fleet/vm-001", "slots"), None);
    }

    #[test]
    fn the_history_counts_slots_after_each_revision() {
        let put = |revision| KeyChange::Put {
            value: String::new(),
            version: 1,
            mod_revision: revision,
        };
        let delete = |revision| KeyChange::Delete {
            mod_revision: revision,
        };
        let a = "/p/vms/a/slots/1".to_owned();
        let b = "/p/vms/b/slots/2".to_owned();
        let history = vec![
            (a.clone(), put(3)),
            ("/p/vms/a/member".to_owned(), put(4)),
            (a.clone(), delete(5)),
            (b.clone(), put(6)),
            (b.clone(), delete(8)),
        ];
        assert_eq!(slots_in_history("/p", &history), (1, 2, 0));
        let overlapping = vec![(a.clone(), put(3)), (b.clone(), put(4)), (a, delete(5))];
        assert_eq!(slots_in_history("/p", &overlapping), (2, 2, 1));
    }
}
