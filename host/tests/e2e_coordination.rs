//! End-to-end tests of coordinated approval: three `forewarn run` daemons (vm-a, vm-b, vm-c)
//! against one `forewarn simulate` and a real etcd that each test starts on loopback.
//!
//! They assert at the simulator (how many approval POSTs, from which VM, when) and in the
//! daemons' JSON logs (when each VM's plugins approved and recorded ready, who led). The
//! figures the issue asks for (last VM ready → approval POST, leader failover) are printed,
//! not asserted. The tests run one at a time so that those figures are not skewed by
//! nine daemons sharing two cores. etcd must be installed (`apt-get install etcd-server`).
//!
//! The `cluster_*` tests share one three-member etcd cluster, started once for this file
//! (`forewarn_test_support::etcd::shared_cluster`): a member forewarn talks to killed mid-event,
//! one member down for a whole event, the quorum lost and back, a member restarted with its
//! data, and what etcd's JSON gateway does on a follower.

use std::time::Duration;

use forewarn_daemon::coordination::Connection;
use forewarn_daemon::log_messages::{
    COORDINATION_LEADS, COORDINATION_NO_QUORUM, COORDINATION_READY,
};
use forewarn_etcd::{Compare, EtcdClient, EtcdError, EtcdSettings, Write};
use forewarn_simulator::{FaultKind, Transition};
use forewarn_test_support::etcd::coordinated_set::{
    Auth, ClusterUse, LEASE_TTL, ROOT_PASSWORD, Set, Setup, Tls, UNREACHABLE_PREFIX, VMS, WAIT,
    approval_posts, enable_auth, lock, scenario_text,
};
use forewarn_test_support::etcd::{
    Etcd, EtcdCluster, KeyChange, KeyRevisions, key_history, shared_cluster,
};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{now_unix_ms, wait_for, wait_until};

#[test]
fn the_event_is_approved_once_after_the_slowest_vm_is_ready() {
    let _serial = lock();
    approved_once_after_the_slowest(&Setup {
        notice: "5m",
        slow_attempts: 16,
        coordination: &[],
        auth: Auth::Off,
        tls: Tls::Off,
        ..Setup::default()
    });
}

#[test]
fn etcd_with_authentication_is_used_with_the_configured_user() {
    let _serial = lock();
    approved_once_after_the_slowest(&Setup {
        notice: "5m",
        slow_attempts: 8,
        coordination: &[],
        auth: Auth::Root,
        tls: Tls::Off,
        ..Setup::default()
    });
}

/// Starts the set, waits for the approval, and checks it came once, from the leader,
/// after vm-c's plugins approved; prints the time from vm-c's ready record to the POST.
fn approved_once_after_the_slowest(setup: &Setup) {
    let set = Set::start(forewarn_binary!(), setup);
    let approval = &set.assert_approved_once_after_vm_c();
    assert_eq!(approval.event_id, set.event_id);
    let slowest_prepared = set.prepared_at("vm-c").expect("checked above");
    for fast in ["vm-a", "vm-b"] {
        let prepared = set.prepared_at(fast).expect("fast VM prepared");
        assert!(
            prepared < slowest_prepared,
            "{fast} should be faster than vm-c"
        );
    }
    assert_ne!(
        approval.vm, "vm-c",
        "vm-c was never ready early enough to lead"
    );

    let last_ready = set
        .first_line("vm-c", COORDINATION_READY)
        .expect("vm-c recorded ready")
        .at_unix_ms;
    println!(
        "FIGURE last VM ready -> approval POST at the simulator: {} ms (vm-c plugins approved -> POST: {} ms; leader {})",
        approval.at_unix_ms.saturating_sub(last_ready),
        approval.at_unix_ms.saturating_sub(slowest_prepared),
        approval.vm
    );
}

/// The leader is killed while vm-c is held preparing (it gets ready only when the test says
/// so, however long the rest takes): the surviving fast VM takes the lead in etcd once the
/// dead leader's lease ended, nothing is approved meanwhile, and once vm-c is ready the new
/// leader approves, once. The handover time is printed (a figure), not asserted.
#[test]
fn killing_the_leader_hands_over_within_the_lease_ttl_and_approves_once() {
    let _serial = lock();
    let mut set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "5m",
            hold_vm_c: true,
            coordination: &["dead-vm = \"counts-as-ready\""],
            ..Setup::default()
        },
    );
    let leader = set.wait_for_one_leader();
    assert!(
        set.prepared_at("vm-c").is_none(),
        "vm-c must still be preparing"
    );
    let killed_at = now_unix_ms();
    set.daemon_mut(&leader).kill();
    let survivor = if leader == "vm-a" { "vm-b" } else { "vm-a" };
    wait_until(
        WAIT,
        &format!("the surviving fast VM to take the lead in etcd (after {leader}'s lease ended)"),
        || set.leader_in_etcd().as_deref() == Some(survivor),
        || set.describe(),
    );
    // The figure only: when the survivor says it took the lead.
    let took_over_at = set
        .first_line(survivor, COORDINATION_LEADS)
        .map_or_else(now_unix_ms, |line| line.at_unix_ms);
    assert!(
        set.simulator.state().approvals.is_empty(),
        "nothing approved before vm-c is ready\n{}",
        set.describe()
    );
    set.release_vm_c();
    let approval = &set.the_one_approval(&[survivor, "vm-c"]);
    assert_eq!(approval.vm, survivor, "the new leader approves");
    let slowest_prepared = set.prepared_at("vm-c").expect("vm-c prepared");
    assert!(
        approval.at_unix_ms >= slowest_prepared,
        "{}",
        set.describe()
    );
    assert_eq!(
        set.leaders_in_etcd(),
        [leader.clone(), survivor.to_owned()],
        "etcd's history of the leader key: the killed leader, then the survivor\n{}",
        set.describe()
    );
    println!(
        "FIGURE leader failover: {} killed, {survivor} leads {} ms later (lease TTL {} ms); approval POST {} ms after vm-c's plugins approved",
        leader,
        took_over_at.saturating_sub(killed_at),
        LEASE_TTL.as_millis(),
        approval.at_unix_ms.saturating_sub(slowest_prepared)
    );
}

/// etcd is killed once a leader is elected, while vm-c is held preparing; then vm-c gets
/// ready. With the default `group-approval = "never"` nobody approves: not while every
/// daemon says it falls back and each has polled IMDS again, nor before the event starts
/// (started from the simulator's console once all that was seen, rather than at a
/// NotBefore a loaded machine could reach first).
#[test]
fn stopping_etcd_mid_event_never_approves_early() {
    let _serial = lock();
    let mut set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "5m",
            hold_vm_c: true,
            ..Setup::default()
        },
    );
    set.wait_for_one_leader();
    assert!(
        set.prepared_at("vm-c").is_none(),
        "vm-c must still be preparing"
    );
    set.etcd.as_mut().expect("an etcd of its own").stop();
    set.release_vm_c();
    wait_until(
        WAIT,
        "vm-c's plugins to approve and every daemon to say (in /status) that it falls back",
        || {
            set.prepared_at("vm-c").is_some()
                && VMS.iter().all(|vm| {
                    let status = set.coordination(vm);
                    status.fallback && status.connection == Connection::Unreachable
                })
        },
        || set.describe(),
    );
    set.wait_for_polls_after(now_unix_ms(), 8, &VMS);
    set.assert_nothing_approved("approved without coordination");
    let answer = set
        .simulator
        .console_post(&format!("/simulator/events/{}/start", set.event_id))
        .expect("start the event from the console");
    assert!(answer.contains(" 200"), "starting the event: {answer}");
    set.simulator
        .wait_for_transition(WAIT, &set.event_id, Transition::Started);
    set.assert_nothing_approved("approved without coordination");
    for vm in VMS {
        // Waited for: the log is read on a thread, and `/status` and the simulator said the
        // outage first.
        let warnings = wait_for(WAIT, &format!("{vm} to log the outage"), || {
            let count = set
                .daemon(vm)
                .lines()
                .into_iter()
                .filter(|line| line.message().starts_with(UNREACHABLE_PREFIX))
                .count();
            match count {
                0 => Err(set.describe()),
                count => Ok(count),
            }
        });
        assert_eq!(
            warnings,
            1,
            "{vm} logs the outage once per streak\n{}",
            set.describe()
        );
    }
}

#[test]
fn etcd_over_tls_with_client_certificates_approves_once() {
    let _serial = lock();
    approved_once_after_the_slowest(&Setup {
        notice: "5m",
        slow_attempts: 4,
        coordination: &[],
        auth: Auth::Off,
        tls: Tls::On,
        ..Setup::default()
    });
}

#[test]
fn a_daemon_that_cannot_verify_etcd_never_approves_early() {
    let _serial = lock();
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "5m",
            slow_attempts: 4,
            coordination: &[],
            auth: Auth::Off,
            tls: Tls::WrongCa,
            ..Setup::default()
        },
    );
    let unreachable = |vm: &str| {
        set.daemon(vm)
            .lines()
            .into_iter()
            .find(|line| line.message().starts_with(UNREACHABLE_PREFIX))
    };
    wait_until(
        WAIT,
        "every daemon to log etcd as unreachable, and vm-c's plugins to approve",
        || VMS.iter().all(|vm| unreachable(vm).is_some()) && set.prepared_at("vm-c").is_some(),
        || set.describe(),
    );
    let warning = unreachable("vm-a").expect("logged above");
    println!("wrong CA: vm-a logged {:?}", warning.text("error"));
    assert!(
        warning.text("error").contains("certificate"),
        "the warning names the certificate problem: {}",
        warning.text("error")
    );
    for vm in VMS {
        assert!(
            set.first_line(vm, COORDINATION_READY).is_none(),
            "{vm} cannot have written to etcd"
        );
    }
    set.assert_nothing_approved("approved although no VM could coordinate");
}

/// A key `events/ID/approval = vm-a` written by someone else (no lease, not vm-a's daemon)
/// before any VM could claim: vm-a must not send an approval on the strength of it, and it
/// does not hold the event either (it is ignored: the leader claims over it once vm-c is
/// ready; `e2e_coordination_trust` has the forgeries under a lease).
#[test]
fn a_forged_approval_key_naming_this_vm_is_not_acted_on() {
    let _serial = lock();
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "20s",
            slow_attempts: 12,
            coordination: &[],
            auth: Auth::Off,
            tls: Tls::Off,
            ..Setup::default()
        },
    );
    let key = set.event_key("approval");
    let etcd = set.etcd.as_ref().expect("an etcd of its own");
    let forged = etcd.etcdctl(&["put", &key, "vm-a"]);
    assert!(forged.status.success(), "etcdctl put: {forged:?}");
    wait_for(WAIT, "vm-a to see the forged approval record", || {
        let approvals = set.simulator.state().approvals;
        assert!(
            approvals.is_empty(),
            "an approval was sent on the strength of the forged key: {}",
            set.describe()
        );
        set.first_line("vm-a", forewarn_daemon::coordination::IGNORED_KEY_MESSAGE)
            .ok_or_else(|| set.describe())
    });
    // Not obeyed, nor does it hold the event: the leader claims over it once vm-c is ready.
    set.assert_approved_once_after_vm_c();
}

// ---------------------------------------------------------------------------------------
// A three-member etcd cluster (started once for this file, shared by the tests below, each
// with a key prefix of its own; every member runs again, with its data, when a test begins).

/// `policy.group-approval = "always"`: a VM that falls back approves alone at once, so any
/// moment of fallback during a failover shows as an approval before vm-c is ready.
const APPROVE_ALONE_ON_FALLBACK: &str = "group-approval = \"always\"";

fn cluster_use(cluster: &EtcdCluster, members: &[usize], prefix: &'static str) -> ClusterUse {
    ClusterUse {
        endpoints: members
            .iter()
            .map(|&index| cluster.endpoint(index))
            .collect(),
        prefix,
    }
}

/// The member every daemon talks to — the cluster's raft leader too — is killed while vm-c
/// still prepares. The daemons go on through the next endpoint: a member that was down
/// earlier in the event and was restarted with its data. With `group-approval = "always"`,
/// any moment of fallback would let a fast VM approve alone, before vm-c is ready.
#[test]
fn cluster_the_member_forewarn_talks_to_is_killed_mid_event_and_a_restarted_member_takes_over() {
    let _serial = lock();
    let mut cluster = shared_cluster();
    let [talked_to, restarted, third] = cluster.leader_first()[..] else {
        panic!("three members");
    };
    cluster.kill(restarted);
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            slow_attempts: 40,
            policy: &[APPROVE_ALONE_ON_FALLBACK],
            cluster: Some(cluster_use(
                &cluster,
                &[talked_to, restarted, third],
                "/forewarn-failover",
            )),
            ..Setup::default()
        },
    );
    set.wait_for_fast_vms_ready_and_a_leader();
    cluster.restart(restarted);
    cluster.wait_healthy();
    assert!(
        set.prepared_at("vm-c").is_none(),
        "vm-c must still be preparing when the member is killed\n{}",
        set.describe()
    );
    let killed_at = now_unix_ms();
    cluster.kill(talked_to);
    let approval = set.assert_approved_once_after_vm_c();
    set.assert_never_fell_back(&cluster.endpoint(talked_to));

    // The restarted member holds, in its own copy (a serializable read of that member
    // alone), the ready records written while it was down.
    let vms_prefix = "/forewarn-failover/vms/";
    let read = cluster.etcdctl(
        restarted,
        &[
            "get",
            "--prefix",
            "--keys-only",
            "--consistency=s",
            vms_prefix,
        ],
    );
    assert!(read.status.success(), "{read:?}");
    let keys = String::from_utf8_lossy(&read.stdout);
    for vm in VMS {
        let ready = set.vm_event_key(vm, "ready");
        assert!(keys.contains(&ready), "{ready} missing: {keys}");
    }
    println!(
        "FIGURE cluster failover: the member talked to (raft leader) killed -> approval POST {} ms (after vm-c's plugins approved: {} ms)",
        approval.at_unix_ms.saturating_sub(killed_at),
        approval
            .at_unix_ms
            .saturating_sub(set.prepared_at("vm-c").unwrap_or(0))
    );
}

/// The first endpoint of every daemon is a member that is down for the whole event.
#[test]
fn cluster_one_member_down_for_the_whole_event_approves_once_after_the_slowest() {
    let _serial = lock();
    let mut cluster = shared_cluster();
    cluster.kill(0);
    cluster.wait_healthy();
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            slow_attempts: 8,
            policy: &[APPROVE_ALONE_ON_FALLBACK],
            cluster: Some(cluster_use(&cluster, &[0, 1, 2], "/forewarn-one-down")),
            ..Setup::default()
        },
    );
    set.assert_approved_once_after_vm_c();
    set.assert_never_fell_back(&cluster.endpoint(0));
}

/// Two of three members die while vm-c still prepares: the survivor answers but knows no
/// leader. Every daemon says so (status, metric), falls back to `policy.group-approval`
/// (the default, "never": nothing is approved, although vm-c becomes ready meanwhile), and
/// resumes the barrier when the two members come back with their data: one approval.
#[test]
fn cluster_quorum_lost_falls_back_says_so_and_resumes_the_barrier_when_it_returns() {
    let _serial = lock();
    let mut cluster = shared_cluster();
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            slow_attempts: 24,
            cluster: Some(cluster_use(&cluster, &[0, 1, 2], "/forewarn-quorum")),
            ..Setup::default()
        },
    );
    set.wait_for_fast_vms_ready_and_a_leader();
    // The fast VMs' ready keys as etcd holds them before the outage.
    let ready_before: Vec<Option<KeyRevisions>> = ["vm-a", "vm-b"]
        .iter()
        .map(|vm| set.revisions(&set.vm_event_key(vm, "ready")))
        .collect();
    assert!(
        ready_before.iter().all(Option::is_some),
        "{ready_before:?}\n{}",
        set.describe()
    );
    let lost_at = now_unix_ms();
    cluster.kill(0);
    cluster.kill(1);
    let fell_back = |vm: &str| {
        let status = set.coordination(vm);
        let metrics = set.metrics(vm);
        status.connection == Connection::NoQuorum
            && status.fallback
            && metrics
                .lines()
                .any(|l| l == "forewarn_coordination_fallback 1")
            && metrics
                .lines()
                .any(|l| l == "forewarn_coordination_connection{state=\"no-quorum\"} 1")
    };
    wait_until(
        WAIT,
        "every daemon to say, in /status and /metrics, that etcd lost its quorum",
        || VMS.iter().all(|vm| fell_back(vm)),
        || format!("{:?}\n{}", set.coordination("vm-a"), set.describe()),
    );
    let detected_at = now_unix_ms();
    wait_until(
        WAIT,
        "vm-c's plugins to approve during the outage",
        || set.prepared_at("vm-c").is_some(),
        || set.describe(),
    );
    set.assert_nothing_approved("approved without quorum");

    let restarted_at = now_unix_ms();
    cluster.restart(0);
    cluster.restart(1);
    let approval = set.assert_approved_once_after_vm_c();
    assert!(approval.at_unix_ms >= restarted_at, "{}", set.describe());
    wait_until(
        WAIT,
        "every daemon to say it coordinates again",
        || {
            VMS.iter().all(|vm| {
                let status = set.coordination(vm);
                status.connection == Connection::Connected
                    && !status.fallback
                    && set
                        .metrics(vm)
                        .lines()
                        .any(|l| l == "forewarn_coordination_fallback 0")
            })
        },
        || set.describe(),
    );
    // etcd extends every lease when a new leader takes over, so the leases (and the ready
    // records under them) outlived the outage, longer than their TTL: nobody recorded again
    // — each ready key was written once, before the outage (etcd's history of the key: it
    // is deleted 15 s after the event started, which a loaded machine may reach by now).
    for (vm, before) in ["vm-a", "vm-b"].iter().zip(&ready_before) {
        let key = set.vm_event_key(vm, "ready");
        let writes: Vec<u64> = key_history(&set.endpoints.join(","), &[], &key, WAIT)
            .into_iter()
            .filter_map(|change| match change {
                KeyChange::Put { mod_revision, .. } => Some(mod_revision),
                KeyChange::Delete { .. } => None,
            })
            .collect();
        let before = before.expect("checked above").mod_revision;
        assert_eq!(
            writes,
            [before],
            "{vm}'s ready key in etcd was written again after the outage\n{}",
            set.describe()
        );
    }
    for vm in VMS {
        let no_quorum = set.daemon(vm).lines_with_message(COORDINATION_NO_QUORUM);
        assert_eq!(no_quorum.len(), 1, "{vm} says it once\n{}", set.describe());
        assert!(
            no_quorum[0]
                .text("error")
                .contains("answer(s) but know(s) no leader"),
            "{}",
            no_quorum[0].text("error")
        );
    }
    println!(
        "FIGURE quorum lost -> every daemon says so: {} ms; members restarted with their data -> approval POST: {} ms",
        detected_at.saturating_sub(lost_at),
        approval.at_unix_ms.saturating_sub(restarted_at)
    );
}

/// What etcd's JSON gateway does on a follower, checked rather than assumed (written down in
/// docs/coordination.md, "etcd clusters"): leases granted, written under and kept alive
/// through a follower; a write through one follower read at once (linearizably) through
/// another; an election transaction; a lease left to expire; a watch stream; and, with two
/// members down, every call failing as a lost quorum.
#[test]
fn cluster_the_json_gateway_on_a_follower_serves_leases_linearizable_reads_and_watches() {
    let _serial = lock();
    let mut cluster = shared_cluster();
    let [leader, follower, other] = cluster.leader_first()[..] else {
        panic!("three members");
    };
    let client = |index: usize| {
        EtcdClient::connect(&EtcdSettings {
            endpoints: vec![cluster.endpoint(index)],
            ..EtcdSettings::default()
        })
        .expect("an etcd client")
    };
    let (on_follower, on_other) = (client(follower), client(other));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let lease = on_follower
            .grant_lease(Duration::from_secs(2))
            .await
            .unwrap();
        on_follower.put(GATEWAY_KEY, "1", lease).await.unwrap();
        let read = on_other.list(GATEWAY_PREFIX).await.unwrap();
        let written: Vec<(&str, &str, i64)> = read
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str(), kv.lease))
            .collect();
        assert_eq!(
            written,
            [(GATEWAY_KEY, "1", lease)],
            "a follower reads another's write at once"
        );
        assert_eq!(
            on_follower.keep_alive(lease).await.unwrap(),
            Some(Duration::from_secs(2)),
            "the keep-alive through a follower renews the lease to its TTL"
        );
        let campaign = |client: &'static str| {
            (
                [Compare::Absent(format!("{GATEWAY_PREFIX}leader"))],
                [Write::Put {
                    key: format!("{GATEWAY_PREFIX}leader"),
                    value: client.into(),
                    lease,
                }],
            )
        };
        let (compares, writes) = campaign("follower");
        assert!(on_follower.transaction(&compares, &writes).await.unwrap());
        let (compares, writes) = campaign("other");
        assert!(!on_other.transaction(&compares, &writes).await.unwrap());
        let deadline = std::time::Instant::now() + WAIT;
        while !on_other.list(GATEWAY_PREFIX).await.unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the lease never expired"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    let put = || {
        let output = cluster.etcdctl(leader, &["put", GATEWAY_KEY, "watched"]);
        assert!(output.status.success(), "{output:?}");
    };
    let stream = watch_stream(&cluster.endpoint(follower), put);
    assert!(
        stream.contains(GATEWAY_KEY_BASE64),
        "the follower's watch stream carries the put: {stream}"
    );

    cluster.kill(leader);
    cluster.kill(other);
    runtime.block_on(async {
        let started = std::time::Instant::now();
        let error = on_follower.list(GATEWAY_PREFIX).await.unwrap_err();
        let took = started.elapsed();
        assert!(matches!(error, EtcdError::NoQuorum { .. }), "{error:?}");
        println!("FIGURE a read without quorum fails as NoQuorum after {took:?}: {error}");
        let error = on_follower.keep_alive(1).await.unwrap_err();
        assert!(matches!(error, EtcdError::NoQuorum { .. }), "{error:?}");
        let error = on_follower
            .grant_lease(Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(matches!(error, EtcdError::NoQuorum { .. }), "{error:?}");
    });
}

const GATEWAY_PREFIX: &str = "/gateway/";
const GATEWAY_KEY: &str = "/gateway/watched";
/// `GATEWAY_KEY` as the gateway writes it (base64).
const GATEWAY_KEY_BASE64: &str = "L2dhdGV3YXkvd2F0Y2hlZA==";

/// Opens a watch of `/gateway/…` on the member at `endpoint` (POST /v3/watch, a stream of
/// JSON lines), runs `put` once etcd confirmed the watch, and returns what the stream
/// carried until the put arrived (or WAIT passed).
fn watch_stream(endpoint: &str, put: impl FnOnce()) -> String {
    use std::io::{Read as _, Write as _};
    let address = endpoint.trim_start_matches("http://");
    // "/gateway/" to "/gateway0", in base64.
    let body = r#"{"create_request":{"key":"L2dhdGV3YXkv","range_end":"L2dhdGV3YXkw"}}"#;
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the member");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a read timeout");
    let request = format!(
        "POST /v3/watch HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("send the watch");
    let mut seen = String::new();
    let mut put = Some(put);
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline && !seen.contains(GATEWAY_KEY_BASE64) {
        let mut buffer = [0u8; 4096];
        if let Ok(read) = stream.read(&mut buffer) {
            seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
        if seen.contains("\"created\":true")
            && let Some(put) = put.take()
        {
            put();
        }
    }
    seen
}

// ---- the barrier's deadline, dead-vm = "hold", reschedules, etcd coming back -----------------

/// `deadline = "12s"`: vm-c never gets ready, so without the deadline nobody would approve;
/// with it the leader approves 12 s before NotBefore (no earlier), once, and the event
/// starts then rather than at NotBefore. NotBefore is what the fast VMs recorded in etcd.
#[test]
fn the_deadline_lets_the_leader_approve_without_a_vm_that_never_gets_ready() {
    let _serial = lock();
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "20s",
            slow_attempts: 100_000,
            coordination: &["deadline = \"12s\""],
            ..Setup::default()
        },
    );
    let leader = set.wait_for_one_leader();
    let not_before = set
        .ready_record(&leader)
        .expect("the leader recorded ready");
    let approval = set.the_one_approval(&VMS);
    assert!(approval.accepted, "{}", set.describe());
    assert_eq!(approval.vm, leader, "the leader approves");
    assert!(
        approval.at_unix_ms >= not_before - 12_000,
        "approved {} ms before NotBefore, earlier than the 12 s deadline\n{}",
        not_before.saturating_sub(approval.at_unix_ms),
        set.describe()
    );
    assert!(
        approval.at_unix_ms < not_before,
        "approved only at NotBefore\n{}",
        set.describe()
    );
    assert_eq!(set.ready_record("vm-c"), None, "vm-c never got ready");
    let state = set.simulator.state();
    let started = set
        .transition_ms(&state, Transition::Started)
        .expect("started");
    assert!(started < not_before, "{}", set.describe());
}

/// `dead-vm = "hold"`: the leader records ready and dies (its lease, and with it its ready
/// key, ends); vm-c gets ready later. The dead VM holds the event: nobody approves, and it
/// starts at NotBefore. (The same with `counts-as-ready` is approved by the survivor:
/// `killing_the_leader_hands_over_within_the_lease_ttl_and_approves_once`.)
#[test]
fn dead_vm_hold_keeps_a_vm_that_died_ready_holding_the_event() {
    let _serial = lock();
    let mut set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "25s",
            slow_attempts: 24,
            coordination: &["dead-vm = \"hold\""],
            ..Setup::default()
        },
    );
    let leader = set.wait_for_one_leader();
    assert_eq!(
        set.ready_record("vm-c"),
        None,
        "vm-c must still be preparing"
    );
    set.daemon_mut(&leader).kill();
    let survivor = if leader == "vm-a" { "vm-b" } else { "vm-a" };
    wait_until(
        WAIT,
        "vm-c ready and the dead leader's ready record gone with its lease",
        || set.ready_record("vm-c").is_some() && set.ready_record(&leader).is_none(),
        || set.describe(),
    );
    let was_ready = set.vm_event_key(&leader, "was-ready");
    assert_eq!(
        set.own_etcd().value(&was_ready).as_deref(),
        Some(leader.as_str())
    );
    let state = set.simulator.state();
    assert!(
        set.transition_ms(&state, Transition::Started).is_none(),
        "the event started before the barrier was tested\n{}",
        set.describe()
    );
    assert!(set.ready_record(survivor).is_some(), "{}", set.describe());

    let state = wait_for(WAIT, "the event to start at NotBefore", || {
        let state = set.simulator.state();
        match set.transition_ms(&state, Transition::Started) {
            Some(_) => Ok(state),
            None => Err(set.describe()),
        }
    });
    assert!(
        state.approvals.is_empty(),
        "approved although the dead VM holds the event:\n{}",
        set.describe()
    );
    assert_eq!(approval_posts(&state), 0, "{}", set.describe());
}

/// A reschedule while vm-c still prepares: each VM withdraws its ready record and prepares
/// again, so the records in etcd name the new NotBefore, and the one approval comes after
/// the reschedule, once all three recorded ready for the new NotBefore.
#[test]
fn a_rescheduled_event_is_approved_once_every_vm_is_ready_for_the_new_not_before() {
    let _serial = lock();
    let scenario = format!(
        "{}\n[[events.reschedule]]\nat = \"9s\"\nnotice = \"36s\"\n",
        scenario_text("30s")
    );
    let set = Set::start_playing(
        forewarn_binary!(),
        &Setup {
            notice: "30s",
            // 250 ms apart: vm-c prepares for ~15 s, past the reschedule at 9 s.
            slow_attempts: 60,
            ..Setup::default()
        },
        &scenario,
    );
    let leader = set.wait_for_one_leader();
    let before = set
        .ready_record(&leader)
        .expect("the leader recorded ready");
    // `before` names the first NotBefore only if read before the reschedule (7 s after the
    // event appeared: time for the fast VMs to prepare and elect a leader).
    assert_eq!(
        set.transition_ms(&set.simulator.state(), Transition::Rescheduled),
        None,
        "no leader yet when the event was rescheduled (a machine too slow for this test)\n{}",
        set.describe()
    );
    assert_eq!(
        set.ready_record("vm-c"),
        None,
        "vm-c must still be preparing"
    );
    let rescheduled =
        set.simulator
            .wait_for_transition(WAIT, &set.event_id, Transition::Rescheduled);
    assert!(
        rescheduled.approvals.is_empty(),
        "approved before the reschedule\n{}",
        set.describe()
    );
    // Until the approval, look at etcd after each look at the simulator: once an approval
    // is seen, every ready record must already name the new NotBefore.
    let records_at_approval = wait_for(WAIT, "the approval at the simulator", || {
        let approved = !set.simulator.state().approvals.is_empty();
        let records: Vec<Option<u64>> = VMS.iter().map(|vm| set.ready_record(vm)).collect();
        match approved {
            true => Ok(records),
            false => Err(format!("ready records {records:?}; {}", set.describe())),
        }
    });
    let after = records_at_approval[0].expect("vm-a ready for the new NotBefore");
    // From 2 s + 30 s to 9 s + 36 s: 13 s later (each NotBefore cut to whole seconds).
    assert!(
        (12_000..=14_000).contains(&(after - before)),
        "the records name the new NotBefore: moved {} ms, not 13 s",
        after - before
    );
    assert_eq!(
        records_at_approval,
        [Some(after); 3],
        "every VM was ready for the new NotBefore when the approval came\n{}",
        set.describe()
    );
    let approval = set.the_one_approval(&VMS);
    assert!(approval.accepted);
    let state = set.simulator.state();
    let moved_at = set
        .transition_ms(&state, Transition::Rescheduled)
        .expect("rescheduled");
    assert!(approval.at_unix_ms > moved_at, "{}", set.describe());
    assert!(
        approval.at_unix_ms < after,
        "approved before the new NotBefore"
    );
}

/// etcd stops answering mid-event (SIGSTOP: requests hang until they time out, longer than
/// the lease TTL) and comes back (SIGCONT) before NotBefore: the daemons recover — new
/// leases, ready records, a leader — and the event is approved once, after etcd came back
/// and after vm-c got ready, and before NotBefore.
#[test]
fn etcd_coming_back_mid_event_lets_the_set_approve_once() {
    let _serial = lock();
    let set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "45s",
            slow_attempts: 24,
            ..Setup::default()
        },
    );
    let leader = set.wait_for_one_leader();
    let not_before = set
        .ready_record(&leader)
        .expect("the leader recorded ready");
    assert_eq!(
        set.ready_record("vm-c"),
        None,
        "vm-c must still be preparing"
    );
    set.own_etcd().signal("STOP");
    wait_until(
        WAIT,
        "every daemon to find etcd unreachable and vm-c's plugins to approve",
        || {
            set.prepared_at("vm-c").is_some()
                && VMS.iter().all(|vm| {
                    set.daemon(vm)
                        .lines()
                        .iter()
                        .any(|line| line.message().starts_with(UNREACHABLE_PREFIX))
                })
        },
        || set.describe(),
    );
    assert!(
        set.simulator.state().approvals.is_empty(),
        "approved while etcd was unreachable\n{}",
        set.describe()
    );
    let resumed_at = now_unix_ms();
    set.own_etcd().signal("CONT");
    let approval = set.the_one_approval(&VMS);
    assert!(approval.accepted, "{}", set.describe());
    assert!(
        approval.at_unix_ms >= resumed_at,
        "approved before etcd came back\n{}",
        set.describe()
    );
    assert!(
        approval.at_unix_ms < not_before,
        "the event was left to start at NotBefore\n{}",
        set.describe()
    );
    assert_eq!(
        set.ready_record("vm-c"),
        Some(not_before),
        "vm-c recorded ready once etcd answered"
    );
}

/// The leader's approval POST is held at the simulator (a 2 s delay fault) when the leader
/// is asked to stop (SIGTERM): the POST completes while the daemon stops, and the approval
/// is recorded in etcd before it exits — under a record lease, not the daemon's — so that
/// once the leader's lease has expired no new leader approves the event again.
#[test]
fn an_approval_sent_while_the_leader_stops_is_recorded_in_etcd() {
    let _serial = lock();
    let scenario = format!(
        "{}\n[[faults]]\nkind = \"delay\"\ndelay = \"2s\"\nmethods = [\"POST\"]\n",
        scenario_text("5m")
    );
    let mut set = Set::start_playing(forewarn_binary!(), &Setup::default(), &scenario);
    let held = wait_for(WAIT, "the approval POST held at the simulator", || {
        let state = set.simulator.state();
        let held = state
            .faults
            .iter()
            .find(|fault| fault.kind == FaultKind::Delay && fault.method == "POST")
            .map(|fault| fault.vm.clone());
        held.ok_or_else(|| set.describe())
    });
    let leader = held.as_str();
    let pid = set.daemon(leader).pid();
    let terminated = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(terminated.success(), "kill -TERM {pid}: {terminated}");
    wait_for(
        WAIT,
        &format!("{leader} to exit after SIGTERM"),
        || match set.daemon_mut(leader).has_exited() {
            true => Ok(()),
            false => Err(set.describe()),
        },
    );
    // The POST outlived the stop: IMDS has the approval.
    let state = set.wait_for_approval();
    assert_eq!(state.approvals.len(), 1, "{}", set.describe());
    let etcd = set.etcd.as_ref().expect("the set's own etcd");
    let get = |key: &str| {
        let output = etcd.etcdctl(&["get", key, "--print-value-only"]);
        assert!(output.status.success(), "etcdctl get {key}: {output:?}");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    // The leader's lease has expired once its member key is gone (LEASE_TTL after the exit).
    let member = set.member_key(leader);
    wait_until(
        WAIT,
        &format!("{leader}'s lease to expire"),
        || get(&member).is_empty(),
        || set.describe(),
    );
    let approval = set.event_key("approval");
    assert_eq!(
        get(&approval),
        leader,
        "the approval {leader} sent while stopping is not recorded in etcd beyond its lease\n{}",
        set.describe()
    );
}

// ---- promises of docs/coordination.md: the fallback when etcd is down, the auth token ------

/// docs/coordination.md, "When etcd cannot be reached": once etcd's rounds have failed for
/// 3 s, coordinated events are decided by `policy.group-approval` as if `[coordination]`
/// were absent. With `"first-listed"`, vm-a (listed first in the event's Resources) approves
/// alone — at IMDS, while vm-c is held preparing — and vm-b (ready too, listed second) does
/// not. While etcd answered, the barrier held the event for vm-c.
#[test]
fn etcd_down_falls_back_to_group_approval_and_the_first_listed_vm_approves_alone_at_imds() {
    let _serial = lock();
    let mut set = Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "5m",
            hold_vm_c: true,
            policy: &["group-approval = \"first-listed\""],
            ..Setup::default()
        },
    );
    wait_until(
        WAIT,
        "vm-a and vm-b ready in etcd, and a leader",
        || {
            set.ready_record("vm-a").is_some()
                && set.ready_record("vm-b").is_some()
                && set.leader_in_etcd().is_some()
        },
        || set.describe(),
    );
    // The barrier replaces the policy while etcd answers: vm-a waits for vm-c.
    set.wait_for_polls_after(now_unix_ms(), 8, &VMS);
    set.assert_nothing_approved(
        "vm-a approved alone although etcd answers (the barrier waits for vm-c)",
    );

    let stopped_at = now_unix_ms();
    set.etcd.as_mut().expect("an etcd of its own").stop();
    let state = set.wait_for_approval();
    let approval = &state.approvals[0];
    assert_eq!(
        approval.vm,
        "vm-a",
        "the first-listed VM approves\n{}",
        set.describe()
    );
    assert!(approval.accepted, "{}", set.describe());
    assert_eq!(approval.event_id, set.event_id);
    // Not before the 3 s of failed rounds (counted from a round that may have begun up to
    // 200 ms before the kill): a lower bound, which load can only make later.
    assert!(
        approval.at_unix_ms >= stopped_at + 2_500,
        "approved {} ms after etcd stopped: before its rounds had failed for 3 s\n{}",
        approval.at_unix_ms.saturating_sub(stopped_at),
        set.describe()
    );
    assert!(
        set.prepared_at("vm-c").is_none(),
        "vm-c was held preparing: the approval is the fallback's, not the barrier's"
    );
    let status = set.coordination("vm-a");
    assert!(
        status.fallback && status.connection == Connection::Unreachable,
        "vm-a says it falls back: {status:?}"
    );
    // However long it takes, vm-a and vm-b see the event start; vm-b (listed second) never
    // approved.
    let started = set
        .simulator
        .wait_for_transition(WAIT, &set.event_id, Transition::Started);
    assert_eq!(started.approvals.len(), 1, "{}", set.describe());
    assert_eq!(approval_posts(&started), 1, "{}", set.describe());
    wait_until(
        WAIT,
        "vm-a and vm-b to see the event started",
        || {
            ["vm-a", "vm-b"]
                .iter()
                .all(|vm| !set.daemon(vm).transitions("started").is_empty())
        },
        || set.describe(),
    );
    let state = set.simulator.state();
    assert_eq!(
        approval_posts(&state),
        1,
        "vm-b approved too\n{}",
        set.describe()
    );
    println!(
        "FIGURE etcd killed -> fallback approval POST by the first-listed VM: {} ms",
        approval.at_unix_ms.saturating_sub(stopped_at)
    );
}

/// docs/coordination.md, `username`/`password`: "the token is renewed when etcd says it
/// expired". etcd issues simple tokens that expire after `--auth-token-ttl` (1 s) unused:
/// the client's token expires (etcd logs that it deleted it), the next request is refused
/// with it (etcd logs the invalid token), and the client logs in again and succeeds.
#[test]
fn the_etcd_client_renews_its_auth_token_when_etcd_expired_it() {
    let _serial = lock();
    let etcd = Etcd::start_with_flags(None, &["--logger=zap", "--auth-token-ttl=1"]);
    enable_auth(&etcd, Auth::Root, "/forewarn");
    let client = EtcdClient::connect(&EtcdSettings {
        endpoints: vec![etcd.endpoint()],
        credentials: Some(forewarn_etcd::Credentials {
            user: "root".into(),
            password: ROOT_PASSWORD.into(),
        }),
        ..EtcdSettings::default()
    })
    .expect("an etcd client");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime
        .block_on(client.put("/renewal/first", "1", 0))
        .expect("the first put, with a fresh token");
    // Nobody but the client logged in since authentication was turned on: the one token
    // etcd deletes is the client's.
    let token = wait_for(
        WAIT,
        "etcd to delete the client's token (its TTL passed)",
        || {
            let log = etcd.log_text();
            let deleted: Vec<String> = log
                .lines()
                .filter(|line| line.contains("\"msg\":\"deleted a simple token\""))
                .map(token_of)
                .collect();
            match deleted.as_slice() {
                [token] => Ok(token.clone()),
                [] => Err("no token deleted yet".to_owned()),
                more => panic!("more tokens than the client's: {more:?}\n{log}"),
            }
        },
    );
    runtime
        .block_on(client.put("/renewal/second", "2", 0))
        .unwrap_or_else(|error| panic!("the put after the token expired: {error}"));
    let log = etcd.log_text();
    let refused: Vec<String> = log
        .lines()
        .filter(|line| line.contains("\"msg\":\"invalid auth token\""))
        .map(token_of)
        .collect();
    assert_eq!(
        refused,
        std::slice::from_ref(&token),
        "etcd refused the expired token once (the client then logged in again)\n{log}"
    );
    let read = etcd.etcdctl(&[
        "get",
        "/renewal/second",
        "--print-value-only",
        &format!("--user=root:{ROOT_PASSWORD}"),
    ]);
    assert!(read.status.success(), "{read:?}");
    assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "2");
}

/// The `"token"` field of one of etcd's JSON log lines.
fn token_of(line: &str) -> String {
    let value: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}"));
    value["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {line}"))
        .to_owned()
}
