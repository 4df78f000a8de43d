//! The tables bench-fleet prints (Markdown, pasted into BENCHMARKS.md): one per fleet size and
//! a summary over the sizes.

use std::time::Duration;

use crate::{EVENTS, Run, WAITING_WINDOW, Window};

pub(crate) fn seconds(duration: Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

pub(crate) fn millis(duration: Duration) -> String {
    format!("{} ms", duration.as_millis())
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub(crate) fn cores(cpu: Duration, window: Duration) -> String {
    format!("{:.2}", cpu.as_secs_f64() / window.as_secs_f64().max(1e-9))
}

/// One member other than the leader: the one the daemons talk to when that is a follower.
pub(crate) fn follower(leader: usize) -> usize {
    if leader == 0 { 1 } else { 0 }
}

pub(crate) fn print_window(name: &str, window: &Window, vms: usize) {
    println!(
        "- {name} window {}: {:.0} etcd requests ({:.2} per VM per second), by member {:?}; by method {}; \
         {:.1} KiB/s sent by etcd; {:.0} writes applied; member CPU {:?} s; member RSS {:?} MiB; \
         daemons {} cores; simulator {} cores; load {:.1} → {:.1}",
        seconds(window.length),
        window.total_requests(),
        window.per_vm_per_second(window.total_requests(), vms),
        window
            .requests_per_member
            .iter()
            .map(|n| *n as u64)
            .collect::<Vec<_>>(),
        window
            .requests
            .iter()
            .filter(|(_, count)| **count > 0.0)
            .map(|(method, count)| format!("{method} {count:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        window.sent_bytes / 1024.0 / window.length.as_secs_f64(),
        window.leader_writes,
        window
            .member_cpu
            .iter()
            .map(|cpu| (cpu.as_secs_f64() * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        window
            .member_rss_kib
            .iter()
            .map(|kib| (*kib as f64 / 1024.0 * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        cores(window.daemons_cpu, window.length),
        cores(window.simulator_cpu, window.length),
        window.load.0,
        window.load.1
    );
}

pub(crate) fn print_run(run: &Run) {
    println!("## N = {}\n", run.vms);
    println!(
        "- start-up: first daemon (compiles the 4 bundled plugins) {}; the other {} from the copied cache: all leases in etcd {} after the first of them started",
        seconds(run.cold_start),
        run.vms - 1,
        seconds(run.fleet_up)
    );
    println!(
        "- raft leader: member {} (the daemons talk to member 0, their first endpoint)",
        run.leader
    );
    print_window("idle", &run.idle, run.vms);
    for (index, event) in run.events.iter().enumerate() {
        let figures = &event.figures;
        println!(
            "- event {}: appears → first ready key {} → last ready key {} → approval POST {} (appears → approval {}); approval POSTs: {}{}",
            index + 1,
            millis(figures.appear_to_first_ready),
            millis(figures.appear_to_last_ready),
            millis(figures.last_ready_to_approval),
            millis(figures.barrier),
            figures.approval_posts,
            figures
                .last_ready_logged_to_approval
                .map(|logged| format!(
                    "; last \"recorded ready\" log line → approval POST {}",
                    millis(logged)
                ))
                .unwrap_or_default()
        );
        if !event.straggler_waited {
            println!(
                "  NOTE: the straggler was ready before the waiting window ended: that window is not all waiting"
            );
        }
        print_window("  waiting at the barrier", &event.waiting, run.vms);
        print_window("  whole event", &event.event, run.vms);
    }
    println!(
        "- daemon RSS: median {}, largest {}\n",
        mib(run.daemon_rss_median_kib),
        mib(run.daemon_rss_max_kib)
    );
}

/// `min–max (median)` of sorted durations, in ms.
pub(crate) fn spread(all: &[Duration]) -> String {
    let median = all[all.len() / 2];
    format!(
        "{}–{} ms (median {})",
        all[0].as_millis(),
        all[all.len() - 1].as_millis(),
        median.as_millis()
    )
}

pub(crate) fn print_tables(runs: &[Run], idle: Duration) {
    println!(
        "## Summary\n\n{EVENTS} events per N. Windows: idle ({} s, no event); waiting (N − 1 VMs ready, \
         waiting {} s at the barrier for the straggler; first event); event (first event: appears → \
         approval POST). Requests: gRPC requests started, summed over the 3 members, per VM of the \
         fleet per second.\n",
        idle.as_secs(),
        WAITING_WINDOW.as_secs()
    );
    println!(
        "| N | (a) last ready → approval POST | (d) event appears → approval POST | appears → last VM but the straggler ready | approval POSTs per event | (b) etcd req/VM/s idle | waiting | whole event | etcd KiB/s sent, waiting | load avg (1 min) idle / waiting |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for run in runs {
        let rate = |window: &Window| window.per_vm_per_second(window.total_requests(), run.vms);
        let load = |window: &Window| format!("{:.1}–{:.1}", window.load.0, window.load.1);
        let posts: Vec<String> = run
            .events
            .iter()
            .map(|event| event.figures.approval_posts.to_string())
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {} / {} |",
            run.vms,
            spread(&run.each(|figures| figures.last_ready_to_approval)),
            spread(&run.each(|figures| figures.barrier)),
            spread(&run.each(|figures| figures.appear_to_fast_ready)),
            posts.join(", "),
            rate(&run.idle),
            rate(&run.first().waiting),
            rate(&run.first().event),
            run.first().waiting.sent_bytes / 1024.0 / run.first().waiting.length.as_secs_f64(),
            load(&run.idle),
            load(&run.first().waiting),
        );
    }
    println!(
        "\n| N | (c) leader CPU idle / waiting / event (cores) | leader RSS | follower CPU idle / waiting / event | follower RSS | daemons CPU idle / waiting / event (cores, all N) | daemon RSS median | simulator CPU idle / event |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for run in runs {
        let other = follower(run.leader);
        let first = run.first();
        let three = |member: usize| {
            format!(
                "{} / {} / {}",
                cores(run.idle.member_cpu[member], run.idle.length),
                cores(first.waiting.member_cpu[member], first.waiting.length),
                cores(first.event.member_cpu[member], first.event.length)
            )
        };
        println!(
            "| {} | {} | {} | {} | {} | {} / {} / {} | {} | {} / {} |",
            run.vms,
            three(run.leader),
            mib(first.event.member_rss_kib[run.leader]),
            three(other),
            mib(first.event.member_rss_kib[other]),
            cores(run.idle.daemons_cpu, run.idle.length),
            cores(first.waiting.daemons_cpu, first.waiting.length),
            cores(first.event.daemons_cpu, first.event.length),
            mib(run.daemon_rss_median_kib),
            cores(run.idle.simulator_cpu, run.idle.length),
            cores(first.event.simulator_cpu, first.event.length),
        );
    }
}
