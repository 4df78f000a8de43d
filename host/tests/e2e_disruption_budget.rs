//! End-to-end tests of the fleet's disruption budget (`coordination.disruption-budget`):
//! three `forewarn run` daemons (vm-a, vm-b, vm-c), each given a Reboot of its own with the
//! same NotBefore by one `forewarn simulate`, and a real etcd.
//!
//! The oracles are the simulator (when each VM's approval came, when its event was gone)
//! and etcd's own history of the slot keys (`etcdctl watch --rev=1 --prefix`, every put and
//! every delete, a lease's expiry included): how many slots were held at every revision,
//! not what the daemons logged.

use std::collections::{BTreeMap, BTreeSet};

use forewarn_daemon::coordination::Connection;
use forewarn_simulator::{StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::browser::status_page_seen;
use forewarn_test_support::cuttable_link::CuttableLink;
use forewarn_test_support::etcd::coordinated_set::{
    ClusterUse, SCENARIO, Set, Setup, VMS, WAIT, lock,
};
use forewarn_test_support::etcd::{Etcd, KeyChange, etcdctl, prefix_history, shared_cluster};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{http_get, now_unix_ms, wait_for, wait_until};

/// One Reboot per VM, each naming only its VM, all with the same NotBefore; each runs for
/// `runs_for` once approved, then is gone.
fn one_reboot_each(runs_for: &str) -> String {
    let mut text = format!(
        "name = \"{SCENARIO}\"\ndescription = \"A Reboot of its own for each of vm-a, vm-b and vm-c, \
         one NotBefore.\"\nvms = [\"vm-a\", \"vm-b\", \"vm-c\"]\nend_after = \"10s\"\n"
    );
    for vm in VMS {
        text.push_str(&format!(
            "\n[[events]]\ntype = \"Reboot\"\nresources = [\"{vm}\"]\nappear_at = \"2s\"\n\
             notice = \"5m\"\nruns_for = \"{runs_for}\"\n"
        ));
    }
    text
}

/// The event of `vm` in [`one_reboot_each`].
fn event_of(vm: &str) -> String {
    let index = VMS
        .iter()
        .position(|name| *name == vm)
        .expect("a VM of the set");
    stable_event_id(SCENARIO, index)
}

/// When each VM's approval was accepted at the simulator, and when its event was gone.
fn approved_and_gone(state: &StateSnapshot) -> BTreeMap<String, (u64, Option<u64>)> {
    let mut spans = BTreeMap::new();
    for vm in VMS {
        let event_id = event_of(vm);
        let approved = state
            .approvals
            .iter()
            .find(|approval| approval.accepted && approval.event_id == event_id)
            .map(|approval| approval.at_unix_ms);
        let gone = state
            .history
            .iter()
            .find(|change| change.event_id == event_id && change.transition == Transition::Removed)
            .map(|change| change.at_unix_ms);
        if let Some(approved) = approved {
            spans.insert(vm.to_owned(), (approved, gone));
        }
    }
    spans
}

/// What `tests/browser/pages.mjs` sees of the status page of `admin` once its fleet
/// section lists the three VMs (its screenshot: `disruption-budget.png`).
fn budget_on_the_page(admin: &str) -> serde_json::Value {
    let vms = VMS.len().to_string();
    status_page_seen(
        admin,
        &[
            ("FOREWARN_FLEET_VMS", vms.as_str()),
            ("FOREWARN_FLEET_SCREENSHOT", "disruption-budget.png"),
        ],
        WAIT,
    )
}

/// Whether `vm`'s plugins approved the preparation of its own event.
fn prepared(set: &Set, vm: &str) -> bool {
    let event_id = event_of(vm);
    set.daemon(vm).decisions().iter().any(|decision| {
        decision.event_id == event_id
            && decision.phase == "prepare"
            && decision.decision == "approve"
    })
}

/// The most events approved and not yet gone at any instant, at the simulator.
fn most_down_at_once(spans: &BTreeMap<String, (u64, Option<u64>)>) -> usize {
    spans
        .values()
        .map(|(approved, _)| {
            spans
                .values()
                .filter(|(other, gone)| {
                    other <= approved && gone.is_none_or(|gone| gone > *approved)
                })
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// What etcd's history says of the slot keys under `prefix`: the most held at any revision,
/// how many were taken, and each slot key's put and delete revisions.
struct SlotHistory {
    most_held: usize,
    taken: usize,
    /// Key → (put revision, delete revision).
    keys: BTreeMap<String, (u64, Option<u64>)>,
    /// The member keys' deletes (a lease's expiry): key → revision.
    member_gone: BTreeMap<String, u64>,
}

fn slot_history(endpoints: &str, prefix: &str) -> SlotHistory {
    let changes = prefix_history(endpoints, &[], &format!("{prefix}/vms/"), WAIT);
    let mut by_revision: BTreeMap<u64, Vec<(String, KeyChange)>> = BTreeMap::new();
    for (key, change) in changes {
        let revision = match &change {
            KeyChange::Put { mod_revision, .. } | KeyChange::Delete { mod_revision } => {
                *mod_revision
            }
        };
        by_revision.entry(revision).or_default().push((key, change));
    }
    let mut held: BTreeSet<String> = BTreeSet::new();
    let mut history = SlotHistory {
        most_held: 0,
        taken: 0,
        keys: BTreeMap::new(),
        member_gone: BTreeMap::new(),
    };
    for (revision, changes) in by_revision {
        for (key, change) in changes {
            if key.ends_with("/member") && matches!(change, KeyChange::Delete { .. }) {
                history.member_gone.insert(key.clone(), revision);
            }
            if !key.contains("/slots/") {
                continue;
            }
            match change {
                KeyChange::Put { .. } => {
                    if held.insert(key.clone()) {
                        history.taken += 1;
                        history.keys.insert(key, (revision, None));
                    }
                }
                KeyChange::Delete { .. } => {
                    held.remove(&key);
                    if let Some(span) = history.keys.get_mut(&key) {
                        span.1 = Some(revision);
                    }
                }
            }
        }
        // Every write of one transaction has its revision: counted after all of them.
        history.most_held = history.most_held.max(held.len());
    }
    history
}

/// Waits until every VM's event was approved and is gone, and every slot given back.
fn wait_for_the_fleet(set: &Set) -> StateSnapshot {
    wait_for(WAIT * 3, "every VM's Reboot approved and over", || {
        let state = set.simulator.state();
        let spans = approved_and_gone(&state);
        let over = spans.len() == VMS.len() && spans.values().all(|(_, gone)| gone.is_some());
        match over {
            true => Ok(state),
            false => Err(format!("{spans:?}\n{}", set.describe())),
        }
    })
}

/// The slot keys under `prefix` now.
fn slots_held(endpoints: &str, prefix: &str) -> Vec<String> {
    let output = etcdctl(
        endpoints,
        &["get", "--prefix", "--keys-only", &format!("{prefix}/vms/")],
    );
    assert!(output.status.success(), "etcdctl get: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|key| key.contains("/slots/"))
        .map(str::to_owned)
        .collect()
}

/// Waits until every slot is given back (each VM's plugins recovered after its event).
fn wait_for_slots_given_back(set: &Set, endpoints: &str) {
    wait_for(WAIT, "every slot given back", || {
        match slots_held(endpoints, &set.prefix).as_slice() {
            [] => Ok(()),
            held => Err(format!("still held: {held:?}\n{}", set.describe())),
        }
    });
}

fn budget_setup(coordination: &'static [&'static str]) -> Setup {
    Setup {
        notice: "5m",
        slow_attempts: 4,
        coordination,
        ..Setup::default()
    }
}

#[test]
fn a_budget_of_one_lets_one_vm_at_a_time_go_down_early() {
    let _serial = lock();
    let set = Set::start_playing(
        forewarn_binary!(),
        &budget_setup(&["disruption-budget = 1"]),
        &one_reboot_each("3s"),
    );
    let state = wait_for_the_fleet(&set);
    wait_for_slots_given_back(&set, &set.endpoints[0]);
    let spans = approved_and_gone(&state);
    assert_eq!(
        most_down_at_once(&spans),
        1,
        "at the simulator, more than one VM was approved and not back at once: {spans:?}\n{}",
        set.describe()
    );
    // The slowest VM to prepare (vm-c) is the last in the queue: same NotBefore, ready last.
    let last = spans
        .iter()
        .max_by_key(|(_, (approved, _))| *approved)
        .map(|(vm, _)| vm.clone());
    assert_eq!(last.as_deref(), Some("vm-c"), "{spans:?}");
    let history = slot_history(&set.endpoints[0], &set.prefix);
    assert_eq!(
        history.most_held, 1,
        "etcd held {} slots at once: {:?}",
        history.most_held, history.keys
    );
    assert_eq!(history.taken, 3, "one slot per VM: {:?}", history.keys);
    assert!(
        history.keys.values().all(|(_, deleted)| deleted.is_some()),
        "every slot given back once its VM recovered: {:?}",
        history.keys
    );
    // Every event approved well before NotBefore (5 minutes): the budget staggered them, it
    // did not make them late.
    let not_before = state.started_at_unix_ms + 2_000 + 300_000;
    assert!(spans.values().all(|(approved, _)| *approved < not_before));
}

#[test]
fn a_slot_outlives_a_killed_daemon_until_the_slot_timeout_then_the_next_vm_takes_it() {
    let _serial = lock();
    let mut set = Set::start_playing(
        forewarn_binary!(),
        &budget_setup(&["disruption-budget = 1", "slot-timeout = \"8s\""]),
        &one_reboot_each("60s"),
    );
    // The first VM to take the slot is approved; its daemon dies with the VM (SIGKILL).
    let first = wait_for(WAIT, "a first approval at the simulator", || {
        let state = set.simulator.state();
        let spans = approved_and_gone(&state);
        match spans.keys().next() {
            Some(vm) if spans.len() == 1 => Ok(vm.clone()),
            _ => Err(format!("{spans:?}\n{}", set.describe())),
        }
    });
    // Seen from a VM that waits: the budget, who holds the slot, the queue, in /status,
    // /metrics, /status/fleet and `forewarn fleet status`.
    let waiting = VMS.iter().find(|vm| **vm != first).expect("another VM");
    let budget = wait_for(
        WAIT,
        "the waiting VM's /status to show the slot held",
        || {
            let budget = set.coordination(waiting).budget;
            match &budget {
                Some(seen) if seen.in_use == 1 && seen.queue.len() == 2 => Ok(budget),
                _ => Err(format!("{budget:?}")),
            }
        },
    )
    .expect("a budget in /status");
    assert_eq!(budget.budget, "1");
    assert_eq!(budget.slots, 1);
    assert_eq!(budget.known_vms, 3);
    assert_eq!(budget.holders.len(), 1, "{budget:?}");
    assert_eq!(budget.holders[0].vm, first, "{budget:?}");
    assert!(budget.holders[0].holder_alive, "{budget:?}");
    assert!(
        budget.queue.iter().all(|queued| queued.vm != first),
        "{budget:?}"
    );
    let metrics = set.metrics(waiting);
    for line in [
        "forewarn_disruption_budget_slots 1",
        "forewarn_disruption_slots_in_use 1",
        "forewarn_disruption_waiting 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}: {metrics}");
    }
    let admin = set.daemon(waiting).admin_address(WAIT);
    let fleet: serde_json::Value =
        serde_json::from_str(&http_get(&admin, "/status/fleet").expect("/status/fleet"))
            .expect("JSON");
    assert_eq!(
        fleet["budget"]["holders"][0]["vm"],
        first.as_str(),
        "{fleet}"
    );
    let printed = std::process::Command::new(forewarn_binary!())
        .args(["fleet", "status", "--admin", &admin])
        .output()
        .expect("forewarn fleet status");
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(
        printed.contains(
            "DISRUPTION BUDGET 1 of group \"fleet\" (3 VM(s) known): 1 of 1 slot(s) in use"
        ),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("held by {first} for ")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("{waiting} (this VM)")),
        "{printed}"
    );

    // The status page's fleet section, in a browser: the budget's box.
    let page = budget_on_the_page(&admin);
    assert_eq!(page["budget"]["in_use"], 1, "{page}");
    assert_eq!(page["budget"]["slots"], 1, "{page}");
    assert_eq!(
        page["budget"]["holders"],
        serde_json::json!([first]),
        "{page}"
    );
    assert_eq!(
        page["budget"]["waiting"].as_array().map(Vec::len),
        Some(2),
        "{page}"
    );
    assert_eq!(page["page_errors"], serde_json::json!([]), "{page}");

    let killed_at = now_unix_ms();
    set.daemon_mut(&first).kill();
    wait_until(
        WAIT,
        "a second VM approved once the dead VM's slot timed out",
        || approved_and_gone(&set.simulator.state()).len() == 2,
        || set.describe(),
    );
    let spans = approved_and_gone(&set.simulator.state());
    let second_at = spans
        .iter()
        .filter(|(vm, _)| **vm != first)
        .map(|(_, (approved, _))| *approved)
        .min()
        .expect("a second approval");
    let history = slot_history(&set.endpoints[0], &set.prefix);
    let dead_slot = format!("{}/vms/{first}/slots/{}", set.prefix, event_of(&first));
    let (_, slot_gone) = history
        .keys
        .get(&dead_slot)
        .copied()
        .unwrap_or_else(|| panic!("no slot of {first} in etcd's history: {:?}", history.keys));
    let slot_gone = slot_gone.expect("the dead VM's slot expired");
    let member_gone = history
        .member_gone
        .get(&format!("{}/vms/{first}/member", set.prefix))
        .copied()
        .expect("the dead daemon's member key expired with its lease");
    assert!(
        member_gone < slot_gone,
        "the slot outlived the daemon (member gone at revision {member_gone}, slot at {slot_gone})"
    );
    assert_eq!(history.most_held, 1, "{:?}", history.keys);
    // The second slot was put after the dead one was gone.
    let second_put = history
        .keys
        .iter()
        .filter(|(key, _)| **key != dead_slot)
        .map(|(_, (put, _))| *put)
        .min()
        .expect("a second slot");
    assert!(second_put > slot_gone, "{:?}", history.keys);
    println!(
        "FIGURE killed holder -> next VM's approval: {} ms (slot-timeout 8 s)",
        second_at.saturating_sub(killed_at)
    );
}

#[test]
fn cluster_the_member_the_daemons_talk_to_killed_mid_fleet_keeps_the_budget() {
    let _serial = lock();
    let mut cluster = shared_cluster();
    let order = cluster.leader_first();
    let prefix = "/budget-member-killed";
    let set = Set::start_playing(
        forewarn_binary!(),
        &Setup {
            cluster: Some(ClusterUse {
                endpoints: order.iter().map(|index| cluster.endpoint(*index)).collect(),
                prefix,
            }),
            ..budget_setup(&["disruption-budget = 1"])
        },
        &one_reboot_each("4s"),
    );
    // Once the first VM holds its slot, the member every daemon talks to first (etcd's
    // leader) dies: a leader election mid-fleet.
    wait_until(
        WAIT,
        "a first approval",
        || !approved_and_gone(&set.simulator.state()).is_empty(),
        || set.describe(),
    );
    cluster.kill(order[0]);
    let state = wait_for_the_fleet(&set);
    wait_for_slots_given_back(&set, &cluster.endpoint(order[1]));
    let spans = approved_and_gone(&state);
    assert_eq!(
        most_down_at_once(&spans),
        1,
        "{spans:?}\n{}",
        set.describe()
    );
    let history = slot_history(&cluster.endpoint(order[1]), prefix);
    assert_eq!(history.most_held, 1, "{:?}", history.keys);
    assert_eq!(history.taken, 3, "{:?}", history.keys);
    assert!(
        history.keys.values().all(|(_, deleted)| deleted.is_some()),
        "{:?}",
        history.keys
    );
}

#[test]
fn without_a_budget_the_same_fleet_goes_down_at_once() {
    // The contrast that makes the tests above mean something: the same three Reboots with
    // no budget are all approved while the others are still down.
    let _serial = lock();
    let set = Set::start_playing(
        forewarn_binary!(),
        &budget_setup(&[]),
        &one_reboot_each("20s"),
    );
    let state = wait_for(WAIT, "three approvals", || {
        let state = set.simulator.state();
        match approved_and_gone(&state).len() {
            3 => Ok(state),
            _ => Err(set.describe()),
        }
    });
    assert_eq!(most_down_at_once(&approved_and_gone(&state)), 3);
}

#[test]
fn a_vm_cut_off_from_etcd_while_it_waits_never_approves_early_and_takes_its_turn_once_back() {
    let _serial = lock();
    let etcd = Etcd::start(None);
    let link = CuttableLink::start(etcd.endpoint().trim_start_matches("http://"));
    let prefix = "/budget-cut";
    let set = Set::start_playing(
        forewarn_binary!(),
        &Setup {
            cluster: Some(ClusterUse {
                endpoints: vec![etcd.endpoint()],
                prefix,
            }),
            // vm-c, the last to be ready, reaches etcd through the link the test cuts.
            endpoints_of: vec![("vm-c", vec![format!("http://{}", link.address)])],
            ..budget_setup(&["disruption-budget = 1"])
        },
        &one_reboot_each("3s"),
    );
    wait_until(
        WAIT,
        "a first approval",
        || !approved_and_gone(&set.simulator.state()).is_empty(),
        || set.describe(),
    );
    link.cut();
    wait_until(
        WAIT,
        "vm-c to see etcd unreachable",
        || set.coordination("vm-c").connection == Connection::Unreachable,
        || set.describe(),
    );
    // The two others go through the budget one after the other meanwhile.
    let others_done = wait_for(WAIT * 2, "vm-a and vm-b approved and over", || {
        let spans = approved_and_gone(&set.simulator.state());
        let done = ["vm-a", "vm-b"]
            .iter()
            .all(|vm| spans.get(*vm).is_some_and(|(_, gone)| gone.is_some()));
        match done {
            true => Ok(spans),
            false => Err(format!("{spans:?}\n{}", set.describe())),
        }
    });
    assert!(
        !others_done.contains_key("vm-c"),
        "vm-c approved while cut off from etcd: {others_done:?}"
    );
    // Still cut: it goes on polling IMDS and waiting (four more polls seen at the simulator).
    let polls = |state: &StateSnapshot| {
        state
            .requests
            .iter()
            .filter(|request| request.method == "GET" && request.path.starts_with("/vm/vm-c/"))
            .count()
    };
    let before = polls(&set.simulator.state());
    wait_until(
        WAIT,
        "vm-c to poll IMDS four more times while cut",
        || polls(&set.simulator.state()) >= before + 4,
        || set.describe(),
    );
    assert!(
        !approved_and_gone(&set.simulator.state()).contains_key("vm-c"),
        "vm-c approved while cut off from etcd"
    );
    let restored_at = now_unix_ms();
    link.restore();
    let state = wait_for_the_fleet(&set);
    let spans = approved_and_gone(&state);
    assert!(spans["vm-c"].0 > restored_at, "{spans:?}");
    assert_eq!(most_down_at_once(&spans), 1, "{spans:?}");
    wait_for_slots_given_back(&set, &etcd.endpoint());
    let history = slot_history(&etcd.endpoint(), prefix);
    assert_eq!(history.most_held, 1, "{:?}", history.keys);
    assert_eq!(history.taken, 3, "{:?}", history.keys);
}

/// Two of three members down: no quorum. By default a VM waiting for a slot waits (its
/// event would start at NotBefore, as without forewarn); with `budget-unreachable =
/// "approve-alone"` it approves without one, and `/status` says so.
#[test]
fn cluster_quorum_lost_holds_waiting_events_unless_the_operator_chose_approve_alone() {
    let _serial = lock();
    let mut cluster = shared_cluster();
    let order = cluster.leader_first();
    cluster.kill(order[0]);
    cluster.kill(order[1]);
    let endpoints: Vec<String> = order.iter().map(|index| cluster.endpoint(*index)).collect();
    let waits = Set::start_playing(
        forewarn_binary!(),
        &Setup {
            cluster: Some(ClusterUse {
                endpoints: endpoints.clone(),
                prefix: "/budget-no-quorum-wait",
            }),
            ..budget_setup(&["disruption-budget = 1"])
        },
        &one_reboot_each("3s"),
    );
    for vm in VMS {
        wait_until(
            WAIT,
            &format!("{vm} prepared and seeing no quorum"),
            || {
                // No quorum, or no answer at all within 2 s from the one member left.
                prepared(&waits, vm) && waits.coordination(vm).connection.falls_back()
            },
            || waits.describe(),
        );
    }
    let polls_then = waits.simulator.state().requests.len();
    wait_until(
        WAIT,
        "twelve more IMDS requests",
        || waits.simulator.state().requests.len() >= polls_then + 12,
        || waits.describe(),
    );
    assert!(
        waits.simulator.state().approvals.is_empty(),
        "approved without quorum although budget-unreachable is \"wait\"\n{}",
        waits.describe()
    );
    let budget = waits.coordination("vm-a").budget.expect("a budget");
    assert!(!budget.approving_alone, "{budget:?}");
    drop(waits);

    let alone = Set::start_playing(
        forewarn_binary!(),
        &Setup {
            cluster: Some(ClusterUse {
                endpoints,
                prefix: "/budget-no-quorum-alone",
            }),
            ..budget_setup(&[
                "disruption-budget = 1",
                "budget-unreachable = \"approve-alone\"",
            ])
        },
        &one_reboot_each("3s"),
    );
    wait_until(
        WAIT,
        "every VM approved alone",
        || approved_and_gone(&alone.simulator.state()).len() == 3,
        || alone.describe(),
    );
    let budget = alone.coordination("vm-a").budget.expect("a budget");
    assert!(budget.approving_alone, "/status says so: {budget:?}");
    let metrics = alone.metrics("vm-a");
    assert!(
        metrics
            .lines()
            .any(|l| l == "forewarn_disruption_approving_alone 1"),
        "{metrics}"
    );
}
