//! End-to-end test of the fleet view: ten `forewarn run` daemons (vm-00 … vm-09) against one
//! `forewarn simulate` serving one Reboot that names all ten, and one real etcd on loopback.
//!
//! Each daemon publishes its status record at `PREFIX/fleet/VM` under its lease. The test
//! asserts what etcd holds, what `forewarn fleet status` (table and `--json`) and the
//! status page's fleet section show: all ten VMs with their stage, the plugin holding vm-00
//! (a probe that always defers) named as its holder, and a daemon killed shown as gone once
//! its lease expired. Nine daemons load the no-op guest, vm-00 the probe: the lightest
//! plugins there are.

use std::path::Path;
use std::time::{Duration, Instant};

use forewarn_host::coordination::fleet_record::FleetRecord;
use forewarn_test_support::etcd::Etcd;
use forewarn_test_support::harness::write_plugin_dir;
use forewarn_test_support::harness::{Daemon, DaemonConfig, ProbePlugin, Simulator, wait_for};
use forewarn_test_support::{forewarn_binary, guests};
use tempfile::TempDir;

const VM_COUNT: usize = 10;
/// The VM whose plugin defers for ever: it holds the event.
const HELD_VM: &str = "vm-00";
/// Its plugin, named as the holder.
const HOLDER: &str = "drain";
/// Generous bound for a single wait.
const WAIT: Duration = Duration::from_secs(60);
/// The lease TTL the daemons are given (etcd's minimum is about 2 s).
const LEASE_TTL: Duration = Duration::from_secs(3);
const PREFIX: &str = "/fleet-test";

fn vm(index: usize) -> String {
    format!("vm-{index:02}")
}

/// Ten daemons, one simulator, one etcd.
struct Fleet {
    dir: TempDir,
    etcd: Etcd,
    simulator: Simulator,
    daemons: Vec<(String, Daemon)>,
}

impl Fleet {
    fn start() -> Fleet {
        let dir = TempDir::new().expect("temp dir");
        let etcd = Etcd::start(None);
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(&scenario_text())
            .start_on_first_poll()
            .start();
        let mut fleet = Fleet {
            dir,
            etcd,
            simulator,
            daemons: Vec::new(),
        };
        for index in 0..VM_COUNT {
            let name = vm(index);
            let daemon = fleet.start_daemon(&name);
            fleet.daemons.push((name, daemon));
        }
        fleet
    }

    fn start_daemon(&self, vm: &str) -> Daemon {
        let root = self.dir.path().join(vm);
        let plugins = root.join("plugins");
        if vm == HELD_VM {
            let drain = ProbePlugin::new(HOLDER, "defer");
            write_plugin_dir(&plugins, Path::new(guests::PROBE), &[drain]);
        } else {
            let noop = ProbePlugin::new("noop", "approve");
            write_plugin_dir(&plugins, Path::new(guests::NOOP), &[noop]);
        }
        let imds_url = format!("{}/vm/{vm}", self.simulator.base_url);
        let config = DaemonConfig {
            vm_name: vm.to_owned(),
            poll_interval: "1s".into(),
            ..DaemonConfig::vm_a(&root, plugins, &imds_url)
        };
        let mut text = config.to_toml();
        text.push_str(&format!(
            "\n[coordination]\nendpoints = [{:?}]\nprefix = {PREFIX:?}\nlease-ttl = \"{}s\"\n",
            self.etcd.endpoint(),
            LEASE_TTL.as_secs()
        ));
        let path = root.join("forewarn.toml");
        std::fs::write(&path, text).expect("write the daemon config");
        Daemon::start(forewarn_binary!(), &path)
    }

    /// Every record under `PREFIX/fleet/`, by key, as etcd holds them.
    fn records_in_etcd(&self) -> Vec<FleetRecord> {
        let output = self.etcd.etcdctl(&[
            "get",
            "--prefix",
            "--print-value-only",
            &format!("{PREFIX}/fleet/"),
        ]);
        assert!(output.status.success(), "etcdctl get: {output:?}");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|error| {
                    panic!("a record that is not a FleetRecord ({error}): {line}")
                })
            })
            .collect()
    }

    fn describe(&self) -> String {
        let mut text = String::new();
        for (vm, daemon) in &self.daemons {
            text.push_str(&format!("\n--- {vm}: {}", daemon.describe_for_failure()));
        }
        text
    }
}

fn scenario_text() -> String {
    let vms: Vec<String> = (0..VM_COUNT)
        .map(|index| format!("{:?}", vm(index)))
        .collect();
    format!(
        "name = \"fleet-reboot\"\n\
         description = \"One Platform Reboot naming ten VMs.\"\n\
         vms = [{}]\n\
         end_after = \"10s\"\n\n\
         [[events]]\n\
         type = \"Reboot\"\n\
         appear_at = \"1s\"\n\
         notice = \"10m\"\n\
         runs_for = \"30s\"\n",
        vms.join(", ")
    )
}

#[test]
fn ten_vms_publish_their_stage_and_holders_and_a_killed_one_is_gone() {
    let started = Instant::now();
    let mut fleet = Fleet::start();

    // etcd holds each VM's record: nine ready (waiting on the barrier for vm-00), vm-00
    // preparing, held by its deferring plugin.
    let records = wait_for(WAIT, "ten records, nine ready and vm-00 held", || {
        let records = fleet.records_in_etcd();
        let ready = records
            .iter()
            .filter(|record| stage_of(record) == Some("ready"))
            .count();
        let held = records.iter().any(|record| {
            record.vm == HELD_VM
                && record
                    .events
                    .iter()
                    .any(|event| event.holders.iter().any(|holder| holder.plugin == HOLDER))
        });
        match records.len() == VM_COUNT && ready == VM_COUNT - 1 && held {
            true => Ok(records),
            false => Err(format!("{records:#?}{}", fleet.describe())),
        }
    });
    let held = records
        .iter()
        .find(|record| record.vm == HELD_VM)
        .expect("vm-00");
    assert_eq!(stage_of(held), Some("preparing"));
    assert!(held.imds.answered && held.imds.last_poll_unix_ms.is_some());
    // Nothing approved: vm-00 holds the event.
    assert!(fleet.simulator.state().approvals.is_empty());

    // A daemon killed: its record vanishes with its lease.
    let killed = vm(VM_COUNT - 1);
    fleet.daemons.last_mut().expect("ten daemons").1.kill();
    wait_for(WAIT, "the killed VM's record to vanish", || {
        let records = fleet.records_in_etcd();
        match records.iter().any(|record| record.vm == killed) {
            false => Ok(()),
            true => Err(format!("{killed}'s record is still in etcd")),
        }
    });
    eprintln!("fleet view test: {:.1} s", started.elapsed().as_secs_f64());
}

/// The stage of the record's first event, as the JSON names it.
fn stage_of(record: &FleetRecord) -> Option<&'static str> {
    record.events.first().map(|event| event.stage.as_str())
}
