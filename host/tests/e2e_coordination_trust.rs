//! Issue 45, part 1: a fleet that one VM cannot speak for. Three daemons (vm-a, vm-b, vm-c)
//! against one simulator and a real etcd with authentication on, each daemon logged in as a
//! user of its own whose role may write its own subtree (`PREFIX/vms/VM/`) and the shared
//! area (the event's `leader` and `approval` keys), and nothing of another VM's
//! (`forewarn_test_support::etcd::coordinated_set::grant_vm_roles`).
//!
//! vm-c's probe is held deferring (it approves only once the test releases it). One fast VM
//! — or, where the forgery needs more than a VM's own role, root, standing for a daemon that
//! still holds the old shared role — then forges what the hostile tester forged: a ready key,
//! a VM's membership (alive, or gone), a leader key, an approval key under a foreign lease or
//! under the lease of the VM it names. Each test asserts at the simulator (no approval while
//! vm-c's probe, by its own count of attempts, still defers; then exactly one approval POST,
//! after vm-c's probe approved) and, where the forger's role does not reach, that etcd
//! refuses the write. Forged shared keys are shown in `/status` and warned about once per
//! event and key, not every round.

use std::time::Duration;

use forewarn_etcd::{Credentials, EtcdClient, EtcdError, EtcdSettings};
use forewarn_simulator::ApprovalRecord;
use forewarn_test_support::etcd::coordinated_set::{
    Auth, ROOT_PASSWORD, Set, Setup, VMS, WAIT, lock, vm_password,
};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{http_get, wait_for, wait_until};

/// How many more times vm-c's probe must defer (250 ms apart) after a forgery before the
/// test concludes that it did not bring an approval: 3 s, three times the 0.9–1.1 s the
/// hostile tester's forgeries took to be approved, and 15 of the leader's rounds.
const ATTEMPTS_AFTER_FORGERY: u32 = 12;

/// A set whose vm-c prepares until released, the daemons each logged in as their own VM.
fn start(coordination: &'static [&'static str]) -> Set {
    Set::start(
        forewarn_binary!(),
        &Setup {
            notice: "5m",
            hold_vm_c: true,
            auth: Auth::PerVm,
            coordination,
            ..Setup::default()
        },
    )
}

/// An etcd client of the test's own, logged in as `user`, and a runtime to drive it.
struct Forger {
    user: String,
    client: EtcdClient,
    runtime: tokio::runtime::Runtime,
}

impl Forger {
    /// Logged in as `vm`'s own user: what that VM's daemon may do.
    fn as_vm(set: &Set, vm: &str) -> Forger {
        Forger::logged_in(set, vm, &vm_password(vm))
    }

    /// Logged in as root: what a daemon holding the old shared role (readwrite on the whole
    /// prefix) may do, and more.
    fn as_root(set: &Set) -> Forger {
        Forger::logged_in(set, "root", ROOT_PASSWORD)
    }

    fn logged_in(set: &Set, user: &str, password: &str) -> Forger {
        let client = EtcdClient::connect(&EtcdSettings {
            endpoints: set.endpoints.clone(),
            credentials: Some(Credentials {
                user: user.into(),
                password: password.into(),
            }),
            ..EtcdSettings::default()
        })
        .expect("an etcd client");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Forger {
            user: user.to_owned(),
            client,
            runtime,
        }
    }

    fn put(&self, key: &str, value: &str, lease: i64) -> Result<(), EtcdError> {
        self.runtime.block_on(self.client.put(key, value, lease))
    }

    fn delete(&self, key: &str) -> Result<(), EtcdError> {
        self.runtime.block_on(self.client.delete(key))
    }

    /// A lease of the forger's own (a minute: longer than any test).
    fn own_lease(&self) -> i64 {
        self.runtime
            .block_on(self.client.grant_lease(Duration::from_secs(60)))
            .unwrap_or_else(|error| panic!("{} grants a lease: {error}", self.user))
    }

    /// The value and lease of `key`, if it exists.
    fn read(&self, key: &str) -> Option<(String, i64)> {
        let read = self
            .runtime
            .block_on(self.client.list(key))
            .unwrap_or_else(|error| panic!("{} reads {key}: {error}", self.user));
        read.into_iter()
            .find(|kv| kv.key == key)
            .map(|kv| (kv.value, kv.lease))
    }

    /// Writes that must succeed (the forger's role reaches there).
    fn forge(&self, key: &str, value: &str, lease: i64) {
        self.put(key, value, lease)
            .unwrap_or_else(|error| panic!("{} forges {key} = {value}: {error}", self.user));
    }

    /// A write that etcd must refuse: the key (or the lease) is another VM's.
    fn refused(&self, what: &str, result: Result<(), EtcdError>) {
        match result {
            Err(EtcdError::Refused { message, .. }) if message.contains("permission denied") => {}
            other => panic!(
                "etcd must refuse {}'s user {what} (\"permission denied\"), but answered {other:?}",
                self.user
            ),
        }
    }
}

/// The first of `keys` that exists, as `forger` reads it.
fn first_existing(forger: &Forger, keys: &[String]) -> (String, i64) {
    keys.iter()
        .find_map(|key| forger.read(key))
        .unwrap_or_else(|| panic!("none of {keys:?} exists"))
}

/// vm-b's user, and the NotBefore marker vm-b's ready key holds (where the daemons write it:
/// in vm-b's subtree, or in the layout before it).
fn vm_b_and_its_ready_marker(set: &Set) -> (Forger, String) {
    let vm_b = Forger::as_vm(set, "vm-b");
    let keys = [
        set.vm_event_key("vm-b", "ready"),
        set.event_key("ready/vm-b"),
    ];
    let (marker, _) = first_existing(&vm_b, &keys);
    (vm_b, marker)
}

/// The attempt numbers vm-c's probe gave for deferring the event's preparation ("attempt=N":
/// the probe's own count, the reason it defers with), in order.
fn vm_c_attempts(set: &Set) -> Vec<u32> {
    set.daemon("vm-c")
        .decisions()
        .into_iter()
        .filter(|d| d.event_id == set.event_id && d.phase == "prepare" && d.decision == "defer")
        .filter_map(|d| d.reason.strip_prefix("attempt=")?.parse().ok())
        .collect()
}

/// After a forgery: waits until vm-c's probe has deferred [`ATTEMPTS_AFTER_FORGERY`] more
/// times, failing as soon as the simulator holds an approval meanwhile; then checks that
/// vm-c's probe never approved.
fn no_approval_while_vm_c_prepares(set: &Set, forgery: &str) {
    let from = vm_c_attempts(set).last().copied().unwrap_or(0);
    wait_until(
        WAIT,
        &format!("vm-c's probe to defer {ATTEMPTS_AFTER_FORGERY} more times after {forgery}"),
        || {
            let state = set.simulator.state();
            let attempts = vm_c_attempts(set);
            let at = attempts.last().copied().unwrap_or(0);
            assert!(
                state.approvals.is_empty(),
                "after {forgery}: approved at the simulator while vm-c's probe was at attempt \
                 {at} (deferring since attempt {from}): {:?}\n{}",
                state.approvals,
                set.describe()
            );
            at >= from + ATTEMPTS_AFTER_FORGERY
        },
        || set.describe(),
    );
    assert_eq!(
        set.prepared_at("vm-c"),
        None,
        "vm-c's probe approved although it was held\n{}",
        set.describe()
    );
}

/// Releases vm-c and checks the one approval the set then sends: one POST, after vm-c's
/// probe approved.
fn one_approval_once_vm_c_is_ready(set: &Set) -> ApprovalRecord {
    set.release_vm_c();
    let approval = set.the_one_approval(&VMS);
    let prepared = set
        .prepared_at("vm-c")
        .unwrap_or_else(|| panic!("approved before vm-c's probe approved\n{}", set.describe()));
    assert!(
        approval.at_unix_ms >= prepared,
        "approved at {} before vm-c's probe approved at {prepared}\n{}",
        approval.at_unix_ms,
        set.describe()
    );
    assert!(approval.accepted, "{}", set.describe());
    approval
}

/// The other fast VM than `vm`.
fn other_fast(vm: &str) -> &'static str {
    if vm == "vm-a" { "vm-b" } else { "vm-a" }
}

/// `vm`'s `/status` as JSON.
fn status_json(set: &Set, vm: &str) -> serde_json::Value {
    let admin = set.daemon(vm).admin_address(WAIT);
    let body = http_get(&admin, "/status").unwrap_or_else(|error| panic!("/status: {error}"));
    serde_json::from_str(&body).unwrap_or_else(|error| panic!("bad /status ({error}): {body}"))
}

/// What `vm`'s `/status` shows as ignored among the event's keys.
fn ignored_in_status(set: &Set, vm: &str) -> Vec<String> {
    let status = status_json(set, vm);
    let events = status["coordination"]["events"].as_array().cloned();
    events
        .unwrap_or_default()
        .iter()
        .filter(|event| event["event_id"].as_str() == Some(set.event_id.as_str()))
        .flat_map(|event| event["ignored"].as_array().cloned().unwrap_or_default())
        .filter_map(|line| line.as_str().map(str::to_owned))
        .collect()
}

/// Waits until `vm`'s `/status` shows an ignored key naming `names`.
fn shown_as_ignored(set: &Set, vm: &str, key: &str, names: &str) {
    wait_for(
        WAIT,
        &format!("{vm}'s /status to show {key} as ignored"),
        || {
            let ignored = ignored_in_status(set, vm);
            match ignored
                .iter()
                .any(|line| line.contains(key) && line.contains(&format!("names {names} ")))
            {
                true => Ok(()),
                false => Err(format!("ignored: {ignored:?}\n{}", set.describe())),
            }
        },
    );
}

/// Each daemon warned at most once per key about the event, however many rounds saw it.
fn warned_at_most_once_per_key(set: &Set) {
    for vm in VMS {
        let mut by_key = std::collections::BTreeMap::<String, usize>::new();
        for line in set.daemon(vm).lines() {
            if line.text("level") == "WARN" && line.text("event_id") == set.event_id {
                *by_key.entry(line.text("key").to_owned()).or_default() += 1;
            }
        }
        assert!(
            by_key.values().all(|&count| count <= 1),
            "{vm} warned about the event more than once per key: {by_key:?}\n{}",
            set.describe()
        );
    }
}

/// A VM's user cannot write another VM's keys, nor attach another VM's lease to a key: etcd
/// refuses. The set still approves once, after vm-c, with every daemon on its own user.
#[test]
fn a_vms_user_cannot_write_into_another_vms_subtree_nor_under_its_lease() {
    let _serial = lock();
    let set = start(&[]);
    set.wait_for_fast_vms_ready_and_a_leader();
    let vm_b = Forger::as_vm(&set, "vm-b");
    vm_b.refused(
        "vm-a's member key",
        vm_b.put(&set.member_key("vm-a"), "vm-a", 0),
    );
    vm_b.refused(
        "deleting vm-a's member key",
        vm_b.delete(&set.member_key("vm-a")),
    );
    vm_b.refused(
        "vm-c's ready key",
        vm_b.put(&set.vm_event_key("vm-c", "ready"), "0", 0),
    );
    vm_b.refused(
        "vm-c's was-ready key",
        vm_b.put(&set.vm_event_key("vm-c", "was-ready"), "vm-c", 0),
    );
    // Its own subtree it may write.
    vm_b.forge(&set.vm_event_key("vm-b", "note"), "mine", 0);
    let (_, vm_a_lease) = vm_b.read(&set.member_key("vm-a")).unwrap_or_else(|| {
        panic!(
            "no {}: vm-a's daemon keeps no member key in its own subtree\n{}",
            set.member_key("vm-a"),
            set.describe()
        )
    });
    assert_ne!(vm_a_lease, 0, "vm-a's member key is under its lease");
    vm_b.refused(
        "an approval key under vm-a's lease",
        vm_b.put(&set.event_key("approval"), "vm-a", vm_a_lease),
    );
    no_approval_while_vm_c_prepares(&set, "vm-b's refused writes");
    one_approval_once_vm_c_is_ready(&set);
}

/// vm-b writes a ready key for vm-c where the layout before the per-VM subtrees had it
/// (`events/ID/ready/vm-c`, no lease, vm-b's own NotBefore marker), and tries vm-c's own
/// ready key (refused). vm-c is not counted ready: nothing is approved until it is.
#[test]
fn a_forged_ready_key_does_not_count_a_preparing_vm_ready() {
    let _serial = lock();
    let set = start(&[]);
    set.wait_for_fast_vms_ready_and_a_leader();
    let (vm_b, marker) = vm_b_and_its_ready_marker(&set);
    vm_b.forge(&set.event_key("ready/vm-c"), &marker, 0);
    vm_b.refused(
        "vm-c's ready key",
        vm_b.put(&set.vm_event_key("vm-c", "ready"), &marker, 0),
    );
    no_approval_while_vm_c_prepares(&set, "a lease-less ready key for vm-c copied from vm-b's");
    one_approval_once_vm_c_is_ready(&set);
}

/// vm-b makes vm-c look alive and ready under one lease — vm-b's own: a member key and a
/// ready key for vm-c where the earlier layout had them (`members/vm-c`,
/// `events/ID/ready/vm-c`), both under that lease, so that a check "the ready key carries the
/// member key's lease" alone would pass — and tries vm-c's own member key under it (refused).
/// With `dead-vm = "counts-as-ready"`.
#[test]
fn a_forged_membership_does_not_count_a_preparing_vm_alive_and_ready() {
    let _serial = lock();
    let set = start(&["dead-vm = \"counts-as-ready\""]);
    set.wait_for_fast_vms_ready_and_a_leader();
    let (vm_b, marker) = vm_b_and_its_ready_marker(&set);
    let lease = vm_b.own_lease();
    vm_b.forge(&format!("{}/members/vm-c-twin", set.prefix), "vm-c", lease);
    vm_b.forge(&set.event_key("ready/vm-c"), &marker, lease);
    vm_b.refused(
        "vm-c's member key under vm-b's lease",
        vm_b.put(&set.member_key("vm-c"), "vm-c", lease),
    );
    no_approval_while_vm_c_prepares(
        &set,
        "a member and a ready key for vm-c under one lease of vm-b's",
    );
    one_approval_once_vm_c_is_ready(&set);
}

/// vm-b makes vm-c look gone after being ready: it deletes vm-c's member key where the
/// earlier layout had it (`members/vm-c`) and writes `events/ID/was-ready/vm-c`; vm-c's own
/// keys it may neither delete nor write (refused). With `dead-vm = "counts-as-ready"`, a VM
/// counted gone-after-ready would release the event: vm-c is still preparing, so it must not.
#[test]
fn a_forged_departure_does_not_count_a_preparing_vm_gone_after_ready() {
    let _serial = lock();
    let set = start(&["dead-vm = \"counts-as-ready\""]);
    set.wait_for_fast_vms_ready_and_a_leader();
    let vm_b = Forger::as_vm(&set, "vm-b");
    vm_b.delete(&format!("{}/members/vm-c", set.prefix))
        .unwrap_or_else(|error| panic!("vm-b deletes members/vm-c: {error}"));
    vm_b.forge(&set.event_key("was-ready/vm-c"), "vm-c", 0);
    vm_b.refused(
        "deleting vm-c's member key",
        vm_b.delete(&set.member_key("vm-c")),
    );
    vm_b.refused(
        "vm-c's was-ready key",
        vm_b.put(&set.vm_event_key("vm-c", "was-ready"), "vm-c", 0),
    );
    no_approval_while_vm_c_prepares(&set, "vm-c's membership deleted and a was-ready forged");
    one_approval_once_vm_c_is_ready(&set);
}

/// Before any VM campaigns, vm-b writes the event's leader key naming a VM that runs no
/// forewarn (`vm-z`), without a lease. It is not obeyed: the fast VMs campaign over it, it
/// is shown in `/status` and warned about once, and the set approves once after vm-c.
#[test]
fn a_forged_leader_key_is_ignored_shown_and_warned_about_once() {
    let _serial = lock();
    let set = start(&[]);
    let vm_b = Forger::as_vm(&set, "vm-b");
    vm_b.forge(&set.event_key("leader"), "vm-z", 0);
    assert!(
        VMS.iter().all(|vm| set
            .first_line(vm, forewarn_daemon::log_messages::COORDINATION_READY)
            .is_none()),
        "the forgery must come before any VM is ready (a machine too slow for this test)\n{}",
        set.describe()
    );
    wait_until(
        WAIT,
        "vm-a and vm-b to record ready",
        || {
            ["vm-a", "vm-b"].iter().all(|vm| {
                set.first_line(vm, forewarn_daemon::log_messages::COORDINATION_READY)
                    .is_some()
            })
        },
        || set.describe(),
    );
    no_approval_while_vm_c_prepares(&set, "a lease-less leader key naming vm-z");
    let leader = set.leader_in_etcd();
    assert!(
        matches!(leader.as_deref(), Some("vm-a" | "vm-b")),
        "a fast VM took the lead over the forged key: the leader key names {leader:?}\n{}",
        set.describe()
    );
    // Replaced within a round, the forged key is shown in the log: the VM that found it.
    // Waited for: the log is read on a thread, and etcd showed the new leader first.
    let key = set.event_key("leader");
    wait_until(
        WAIT,
        &format!("a fast VM to say it ignored {key}"),
        || {
            ["vm-a", "vm-b"].iter().any(|vm| {
                set.daemon(vm)
                    .lines()
                    .iter()
                    .any(|line| line.text("key") == key && line.text("names") == "vm-z")
            })
        },
        || format!("no fast VM said it ignored {key}\n{}", set.describe()),
    );
    warned_at_most_once_per_key(&set);
    let approval = one_approval_once_vm_c_is_ready(&set);
    assert_eq!(
        Some(approval.vm),
        leader,
        "the VM that took the lead approves"
    );
}

/// Once a leader is elected, the other fast VM writes the approval key naming the leader
/// under its own lease (a foreign lease for the leader). The leader does not send it; nobody
/// takes it for a claim that holds the event; it is shown in `/status`, warned about once per
/// daemon, and the leader claims over it once vm-c is ready: one approval, after vm-c.
#[test]
fn an_approval_key_under_a_foreign_lease_is_ignored_shown_and_warned_about_once() {
    let _serial = lock();
    let set = start(&[]);
    let leader = set.wait_for_fast_vms_ready_and_a_leader();
    let other = other_fast(&leader);
    let forger = Forger::as_vm(&set, other);
    let lease = forger.own_lease();
    forger.forge(&set.event_key("approval"), &leader, lease);
    no_approval_while_vm_c_prepares(
        &set,
        &format!("an approval key naming {leader} under {other}'s lease"),
    );
    warned_at_most_once_per_key(&set);
    shown_as_ignored(&set, &leader, "approval", &leader);
    shown_as_ignored(&set, other, "approval", &leader);
    let approval = one_approval_once_vm_c_is_ready(&set);
    assert_eq!(approval.vm, leader, "the leader approves");
    warned_at_most_once_per_key(&set);
}

/// Once a leader is elected, an approval key naming the other fast VM, under that VM's own
/// lease (its id is readable in its member key). The leader's user may not write it (etcd
/// refuses: the lease holds keys it may not write); root — standing for a daemon that still
/// holds the old shared role — may. The VM it names did not write it: it does not send it,
/// whatever the lease; the leader claims over it once vm-c is ready.
#[test]
fn an_approval_key_under_the_named_vms_own_lease_is_not_sent_by_it() {
    let _serial = lock();
    let set = start(&[]);
    let leader = set.wait_for_fast_vms_ready_and_a_leader();
    let target = other_fast(&leader);
    let root = Forger::as_root(&set);
    let (_, lease) = first_existing(
        &root,
        &[
            set.member_key(target),
            format!("{}/members/{target}", set.prefix),
        ],
    );
    assert_ne!(lease, 0, "{target}'s member key is under its lease");
    root.forge(&set.event_key("approval"), target, lease);
    no_approval_while_vm_c_prepares(
        &set,
        &format!("an approval key naming {target} under {target}'s own lease"),
    );
    shown_as_ignored(&set, target, "approval", target);
    let leader_user = Forger::as_vm(&set, &leader);
    leader_user.refused(
        &format!("an approval key under {target}'s lease"),
        leader_user.put(&set.event_key("approval"), target, lease),
    );
    let approval = one_approval_once_vm_c_is_ready(&set);
    assert_eq!(approval.vm, leader, "the leader approves");
    warned_at_most_once_per_key(&set);
}
