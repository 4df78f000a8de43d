//! End-to-end test of the fleet view: ten `forewarn run` daemons (vm-00 … vm-09) against one
//! `forewarn simulate` serving one Reboot that names all ten, and one real etcd on loopback.
//!
//! Each daemon publishes its status record at `PREFIX/fleet/VM` under its lease. The test
//! asserts what etcd holds, what `forewarn fleet status` (table and `--json`) and the
//! status page's fleet section show: all ten VMs with their stage, the plugin holding vm-00
//! (a probe that always defers) named as its holder, and a daemon killed shown as gone once
//! its lease expired. Nine daemons load the no-op guest, vm-00 the probe: the lightest
//! plugins there are. A second test gives two daemons an etcd user that may not write
//! `fleet/`: the record fails (logged once) and the event is still coordinated and approved.
//! A third gives one of three daemons an IMDS that refuses every poll: another VM's
//! `/status/fleet`, `forewarn fleet status` and page show it Unhealthy (imds-unreachable),
//! the others Healthy.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use forewarn_daemon::coordination::fleet_reader::{FleetView, FleetVmState};
use forewarn_daemon::coordination::fleet_record::FleetRecord;
use forewarn_daemon::log_messages::FLEET_RECORD_WRITE_FAILED;
use forewarn_test_support::browser::{assert_png, pages_command, screenshot_dir};
use forewarn_test_support::etcd::Etcd;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Simulator, http_get, wait_for, write_plugin_dir,
};
use forewarn_test_support::{forewarn_binary, guests};
use serde::Deserialize;
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

/// Daemons (ten, or two), one simulator, one etcd.
struct Fleet {
    dir: TempDir,
    etcd: Etcd,
    simulator: Simulator,
    daemons: Vec<(String, Daemon)>,
    /// The etcd user and password the daemons are given, when etcd has authentication on.
    credentials: Option<(&'static str, &'static str)>,
    /// The VM whose plugin defers for ever, if any.
    held: Option<&'static str>,
    /// Endpoints the daemons are given after etcd's.
    more_endpoints: Vec<String>,
}

impl Fleet {
    fn start() -> Fleet {
        Fleet::start_with(Etcd::start(None), VM_COUNT, None, Some(HELD_VM))
    }

    /// `count` daemons against `etcd`, logging in as `credentials` when given; `held`'s
    /// plugin defers for ever, the others' approve.
    fn start_with(
        etcd: Etcd,
        count: usize,
        credentials: Option<(&'static str, &'static str)>,
        held: Option<&'static str>,
    ) -> Fleet {
        Fleet::start_with_endpoints(etcd, count, credentials, held, Vec::new())
    }

    /// [`Fleet::start_with`], the daemons given `more_endpoints` after etcd's.
    fn start_with_endpoints(
        etcd: Etcd,
        count: usize,
        credentials: Option<(&'static str, &'static str)>,
        held: Option<&'static str>,
        more_endpoints: Vec<String>,
    ) -> Fleet {
        Fleet::start_playing(
            etcd,
            &scenario_text(count),
            count,
            credentials,
            held,
            more_endpoints,
        )
    }

    /// `count` daemons against `etcd` and a simulator playing `scenario`.
    fn start_playing(
        etcd: Etcd,
        scenario: &str,
        count: usize,
        credentials: Option<(&'static str, &'static str)>,
        held: Option<&'static str>,
        more_endpoints: Vec<String>,
    ) -> Fleet {
        let dir = TempDir::new().expect("temp dir");
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(scenario)
            .start_on_first_poll()
            .start();
        let mut fleet = Fleet {
            dir,
            etcd,
            simulator,
            daemons: Vec::new(),
            credentials,
            held,
            more_endpoints,
        };
        for index in 0..count {
            let name = vm(index);
            let daemon = fleet.start_daemon(&name);
            fleet.daemons.push((name, daemon));
        }
        fleet
    }

    fn start_daemon(&self, vm: &str) -> Daemon {
        let imds_url = format!("{}/vm/{vm}", self.simulator.base_url);
        self.start_daemon_with(vm, &imds_url, "")
    }

    /// A daemon named `vm` polling `imds_url`, `more_config` (TOML) after its config.
    fn start_daemon_with(&self, vm: &str, imds_url: &str, more_config: &str) -> Daemon {
        let root = self.dir.path().join(vm);
        let plugins = root.join("plugins");
        if self.held == Some(vm) {
            let drain = ProbePlugin::new(HOLDER, "defer");
            write_plugin_dir(&plugins, Path::new(guests::PROBE), &[drain]);
        } else {
            let noop = ProbePlugin::new("noop", "approve");
            write_plugin_dir(&plugins, Path::new(guests::NOOP), &[noop]);
        }
        let config = DaemonConfig {
            vm_name: vm.to_owned(),
            poll_interval: "1s".into(),
            ..DaemonConfig::vm_a(&root, plugins, imds_url)
        };
        let mut text = config.to_toml();
        let endpoints: Vec<String> = std::iter::once(self.etcd.endpoint())
            .chain(self.more_endpoints.iter().cloned())
            .map(|endpoint| format!("{endpoint:?}"))
            .collect();
        text.push_str(&format!(
            "\n[coordination]\nendpoints = [{}]\nprefix = {PREFIX:?}\nlease-ttl = \"{}s\"\n",
            endpoints.join(", "),
            LEASE_TTL.as_secs()
        ));
        if let Some((user, password)) = self.credentials {
            text.push_str(&format!(
                "username = {user:?}\npassword = {password:?}\nallow-plaintext-credentials = true\n"
            ));
        }
        text.push_str(more_config);
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

    /// `forewarn fleet status ARGS --admin ADMIN`: its stdout.
    fn fleet_status(&self, admin: &str, args: &[&str]) -> String {
        let output = Command::new(forewarn_binary!())
            .args(["fleet", "status", "--admin", admin])
            .args(args)
            .output()
            .expect("run forewarn fleet status");
        assert!(
            output.status.success(),
            "forewarn fleet status {args:?}: {}{}",
            String::from_utf8_lossy(&output.stderr),
            self.describe()
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// How many times `vm`'s record was written since its key was created (etcd's `version`).
    fn record_writes(&self, vm: &str) -> u64 {
        let key = format!("{PREFIX}/fleet/{vm}");
        let output = self.etcd.etcdctl(&["get", &key, "-w", "json"]);
        assert!(output.status.success(), "etcdctl get {key}: {output:?}");
        let answer: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("etcdctl prints JSON");
        answer["kvs"][0]["version"]
            .as_u64()
            .unwrap_or_else(|| panic!("no version of {key}: {answer}"))
    }

    fn describe(&self) -> String {
        let mut text = String::new();
        for (vm, daemon) in &self.daemons {
            text.push_str(&format!("\n--- {vm}: {}", daemon.describe_for_failure()));
        }
        text
    }
}

fn scenario_text(count: usize) -> String {
    let vms: Vec<String> = (0..count).map(|index| format!("{:?}", vm(index))).collect();
    format!(
        "name = \"fleet-reboot\"\n\
         description = \"One Platform Reboot naming every VM of the fleet.\"\n\
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
    let event_id = held.events[0].id.clone();
    assert!(held.imds.answered && held.imds.last_poll_unix_ms.is_some());
    // From here on vm-01's record changes only in its timestamps (it polls every second):
    // written again at most every 30 s, not on every poll.
    let writes_before = fleet.record_writes("vm-01");
    let steady_since = Instant::now();
    // Nothing approved: vm-00 holds the event.
    assert!(fleet.simulator.state().approvals.is_empty());

    // `forewarn fleet status --json` on vm-01 lists all ten, publishing, with their stage.
    let admin = fleet.daemons[1].1.admin_address(WAIT);
    let json = fleet.fleet_status(&admin, &["--json"]);
    let view: FleetView = serde_json::from_str(&json).expect("--json prints the fleet");
    assert_eq!(view.vm, "vm-01");
    let names: Vec<&str> = view.vms.iter().map(|vm| vm.vm.as_str()).collect();
    let expected: Vec<String> = (0..VM_COUNT).map(vm).collect();
    assert_eq!(names, expected, "{json}");
    for listed in &view.vms {
        assert_eq!(listed.state, FleetVmState::Publishing, "{json}");
        let stage = listed.record.as_ref().and_then(stage_of);
        let expected = if listed.vm == HELD_VM {
            "preparing"
        } else {
            "ready"
        };
        assert_eq!(stage, Some(expected), "{}: {json}", listed.vm);
    }
    // The table: a row per VM, vm-00's holder named.
    let table = fleet.fleet_status(&admin, &[]);
    for name in &expected {
        assert!(
            table.lines().any(|line| line.starts_with(name.as_str())),
            "no row of {name}: {table}"
        );
    }
    let held_row = table
        .lines()
        .find(|line| line.starts_with(HELD_VM))
        .expect("vm-00's row");
    assert!(
        held_row.contains(&format!("{HOLDER} (deferring)")),
        "{table}"
    );
    assert!(held_row.contains("preparing"), "{table}");
    // Preparing is Healthy for the scale set: vm-00's plugin defers, nothing is wrong.
    assert!(held_row.contains("Healthy"), "{table}");

    // A daemon killed: its record vanishes with its lease, and the fleet shows it gone.
    let killed = vm(VM_COUNT - 1);
    let killed_at = Instant::now();
    fleet.daemons.last_mut().expect("ten daemons").1.kill();
    wait_for(WAIT, "the killed VM shown gone on /status/fleet", || {
        let body = http_get(&admin, "/status/fleet")?;
        let view: FleetView = serde_json::from_str(&body).map_err(|error| error.to_string())?;
        let gone = view
            .vms
            .iter()
            .any(|listed| listed.vm == killed && listed.state == FleetVmState::Gone);
        match gone {
            true => Ok(()),
            false => Err(body),
        }
    });
    let gone_after = killed_at.elapsed();
    let rewrites = fleet.record_writes("vm-01") - writes_before;
    let refreshes = steady_since.elapsed().as_secs() / 30 + 1;
    assert!(
        rewrites <= refreshes,
        "vm-01's unchanged record was written {rewrites} times in {:?}",
        steady_since.elapsed()
    );
    assert!(
        fleet
            .records_in_etcd()
            .iter()
            .all(|record| record.vm != killed),
        "gone while its record is still in etcd"
    );
    let table = fleet.fleet_status(&admin, &[]);
    let killed_row = table
        .lines()
        .find(|line| line.starts_with(killed.as_str()))
        .unwrap_or_else(|| panic!("the gone VM keeps its row: {table}"));
    assert!(killed_row.contains("gone"), "{table}");

    // The status page's fleet section, in a browser: ten rows, the killed VM gone.
    let page = fleet_page(&admin, &killed);
    assert_eq!(page.rows.len(), VM_COUNT, "{page:?}");
    for row in &page.rows {
        let (state, stage) = match row.vm.as_str() {
            vm if vm == killed => ("gone", "ready"),
            HELD_VM => ("publishing", "preparing"),
            _ => ("publishing", "ready"),
        };
        assert_eq!(
            (row.state.as_str(), row.stage.as_str()),
            (state, stage),
            "{row:?}"
        );
        // Draining or preparing, every VM is Healthy for the scale set.
        assert_eq!(row.health, "Healthy", "{row:?}");
    }
    let held = page
        .rows
        .iter()
        .find(|row| row.vm == HELD_VM)
        .expect("vm-00's row");
    assert_eq!(held.holders, [HOLDER]);
    // The Coordination section: the event vm-01 is ready for, one row in words (it printed
    // the barrier's JSON before).
    let [barrier] = page.barrier.as_slice() else {
        panic!("one event on vm-01's barrier: {page:?}");
    };
    let [event, state, leader, _vms] = barrier.cells.as_slice() else {
        panic!("four cells: {barrier:?}");
    };
    assert_eq!(
        (event, &barrier.event),
        (&event_id, &event_id),
        "{barrier:?}"
    );
    assert!(!state.is_empty() && !state.contains('{'), "{barrier:?}");
    assert!(leader.starts_with("vm-"), "{barrier:?}");
    assert_eq!(page.outside_requests, Vec::<String>::new());
    assert_eq!(page.page_errors, Vec::<String>::new());
    assert_png(&screenshot_dir().join("fleet-gone.png"));
    eprintln!(
        "fleet view test: {:.1} s; killed VM shown gone {:.1} s after the kill (lease TTL {} s); \
         vm-01's unchanged record written {rewrites} time(s) in {:.1} s",
        started.elapsed().as_secs_f64(),
        gone_after.as_secs_f64(),
        LEASE_TTL.as_secs(),
        steady_since.elapsed().as_secs_f64()
    );
}

/// What `pages.mjs` saw of the fleet section.
#[derive(Debug, Deserialize)]
struct FleetPageSeen {
    rows: Vec<FleetRowSeen>,
    barrier: Vec<BarrierRowSeen>,
    outside_requests: Vec<String>,
    page_errors: Vec<String>,
}

/// One `[data-fleet-vm]` row.
#[derive(Debug, Deserialize)]
struct FleetRowSeen {
    vm: String,
    state: String,
    stage: String,
    /// The scale-set health's state ("Healthy", …; "unknown" for an older record).
    health: String,
    /// The codes of its reasons, while Unhealthy.
    health_reasons: Vec<String>,
    holders: Vec<String>,
}

/// One row of the Coordination section's barrier table: its event, then the cells (event,
/// barrier state, leader, VMs named).
#[derive(Debug, Deserialize)]
struct BarrierRowSeen {
    event: String,
    cells: Vec<String>,
}

/// The status page of `admin` in headless Chromium, once it shows ten VMs with `gone` gone.
fn fleet_page(admin: &str, gone: &str) -> FleetPageSeen {
    fleet_page_of(admin, VM_COUNT, Some(gone))
}

/// The status page of `admin` in headless Chromium, once it shows `count` VMs (and `gone`
/// gone, when given).
fn fleet_page_of(admin: &str, count: usize, gone: Option<&str>) -> FleetPageSeen {
    let mut command = pages_command();
    if let Some(gone) = gone {
        command.env("FOREWARN_FLEET_GONE", gone);
    }
    let output = command
        .env("FOREWARN_STATUS_URL", format!("http://{admin}/"))
        .env("FOREWARN_FLEET_VMS", count.to_string())
        .env("FOREWARN_WAIT_MS", WAIT.as_millis().to_string())
        .output()
        .expect("run node (tests/run.sh installs Node.js when missing)");
    assert!(
        output.status.success(),
        "the browser run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "pages.mjs printed no JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// The stage of the record's first event, as the JSON names it.
fn stage_of(record: &FleetRecord) -> Option<&'static str> {
    record.events.first().map(|event| event.stage.as_str())
}

/// etcd's root password, and the password of the user the daemons log in as.
const ROOT: &str = "root:fleet-test-root";
const BARRIER_USER: (&str, &str) = ("barrier", "fleet-test-barrier");

/// A daemon whose etcd user may write the barrier's keys but not its fleet record: every
/// write of the record fails, which it logs once, and the event is still coordinated and
/// approved (a failed record never touches the barrier).
#[test]
fn a_vm_that_cannot_write_its_record_still_coordinates_and_approves() {
    let started = Instant::now();
    let etcd = Etcd::start(None);
    let (user, password) = BARRIER_USER;
    let barrier_keys = [format!("{PREFIX}/vms/"), format!("{PREFIX}/events/")];
    let steps: Vec<Vec<String>> = vec![
        vec!["user".into(), "add".into(), ROOT.into()],
        vec![
            "user".into(),
            "grant-role".into(),
            "root".into(),
            "root".into(),
        ],
        vec!["role".into(), "add".into(), "barrier".into()],
        grant(&barrier_keys[0]),
        grant(&barrier_keys[1]),
        vec!["user".into(), "add".into(), format!("{user}:{password}")],
        vec![
            "user".into(),
            "grant-role".into(),
            user.into(),
            "barrier".into(),
        ],
        vec!["auth".into(), "enable".into()],
    ];
    for step in &steps {
        let args: Vec<&str> = step.iter().map(String::as_str).collect();
        let output = etcd.etcdctl(&args);
        assert!(output.status.success(), "etcdctl {step:?}: {output:?}");
    }
    let fleet = Fleet::start_with(etcd, 2, Some(BARRIER_USER), None);

    let state = wait_for(WAIT, "the coordinated approval at the simulator", || {
        let state = fleet.simulator.state();
        match state.approvals.is_empty() {
            false => Ok(state),
            true => Err(fleet.describe()),
        }
    });
    assert_eq!(state.approvals.len(), 1, "{}", fleet.describe());
    for (vm, daemon) in &fleet.daemons {
        // Waited for: the log is read on a thread, and the approval says nothing of it.
        let failures = daemon
            .wait_for_message(WAIT, FLEET_RECORD_WRITE_FAILED)
            .len();
        assert_eq!(
            failures,
            1,
            "{vm}: one line per streak of failures{}",
            fleet.describe()
        );
    }
    let records = etcd_as_root(&fleet.etcd, &format!("{PREFIX}/fleet/"));
    assert_eq!(records, "", "no record could be written");
    eprintln!(
        "fleet record write failure test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `role grant-permission barrier readwrite KEY --prefix=true`.
fn grant(prefix: &str) -> Vec<String> {
    [
        "role",
        "grant-permission",
        "barrier",
        "readwrite",
        prefix,
        "--prefix=true",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

/// The keys under `prefix`, read as root.
fn etcd_as_root(etcd: &Etcd, prefix: &str) -> String {
    let output = etcd.etcdctl(&["--user", ROOT, "get", "--prefix", "--keys-only", prefix]);
    assert!(output.status.success(), "etcdctl get: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// docs/operations.md, "Fleet view": "A request never waits on a slow etcd: it gets the last
/// read (`read_at_unix_ms` says how old) while one read runs in the background". etcd is
/// paused (SIGSTOP: connections are taken, nothing answers) and the daemons' two further
/// endpoints accept connections and never answer either, so one read of the fleet takes
/// about 12 s (2 s a request on each of three endpoints, then each member's status). Every
/// `/status/fleet` meanwhile answers at once (asserted well under 10 s: a request that
/// waited for the read would take 12 s or more) with the VMs of the last good read, and once
/// the read failed, the answer says that etcd cannot be reached.
#[test]
fn the_fleet_view_answers_at_once_while_etcd_does_not_and_says_it_cannot_be_reached() {
    // Listening, never accepting: a connection is taken by the kernel, nothing answers.
    let silent: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a silent endpoint"))
        .collect();
    let more_endpoints = silent
        .iter()
        .map(|listener| format!("http://{}", listener.local_addr().expect("its address")))
        .collect();
    let fleet = Fleet::start_with_endpoints(Etcd::start(None), 2, None, None, more_endpoints);
    let admin = fleet.daemons[0].1.admin_address(WAIT);
    let view = |admin: &str| -> Result<FleetView, String> {
        let body = http_get(admin, "/status/fleet")?;
        serde_json::from_str(&body).map_err(|error| format!("bad /status/fleet ({error}): {body}"))
    };
    let both_publishing = |view: &FleetView| {
        view.vms.len() == 2
            && view
                .vms
                .iter()
                .all(|vm| vm.state == FleetVmState::Publishing)
    };
    wait_for(WAIT, "both VMs publishing in /status/fleet", || {
        let view = view(&admin)?;
        match both_publishing(&view) && view.error.is_none() {
            true => Ok(()),
            false => Err(format!("{view:?}{}", fleet.describe())),
        }
    });
    let paused_at = forewarn_test_support::harness::now_unix_ms();
    fleet.etcd.signal("STOP");
    let mut slowest = Duration::ZERO;
    let mut answers = 0;
    let failed = wait_for(
        WAIT,
        "/status/fleet to say that etcd cannot be reached",
        || {
            let asked = Instant::now();
            let answer = view(&admin);
            let took = asked.elapsed();
            slowest = slowest.max(took);
            answers += 1;
            let view = answer.unwrap_or_else(|error| {
                panic!("/status/fleet did not answer ({took:?}) while etcd is paused: {error}")
            });
            assert!(
                took < Duration::from_secs(10),
                "/status/fleet took {took:?} while etcd is paused: it waited for etcd"
            );
            match &view.error {
                Some(_) => Ok(view),
                None => Err(format!("{view:?}")),
            }
        },
    );
    fleet.etcd.signal("CONT");
    let error = failed.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("cannot reach etcd"),
        "the answer names etcd as unreachable: {error}"
    );
    assert!(
        both_publishing(&failed),
        "the VMs of the last good read are shown: {failed:?}"
    );
    assert!(
        failed.read_at_unix_ms.is_some_and(|at| at <= paused_at),
        "read_at_unix_ms is the last good read's, before the pause: {failed:?}"
    );
    println!(
        "FIGURE /status/fleet while etcd is paused: {answers} answers, the slowest in {slowest:?}; error: {error}"
    );
}

/// How long a VM's IMDS may stay silent before it is Unhealthy (`[scale-set]`'s least).
const IMDS_UNREACHABLE_AFTER: Duration = Duration::from_secs(30);

/// A VM whose IMDS refuses every poll is Unhealthy for the scale set once `[scale-set]
/// imds-unreachable-after` passed, and another VM's `/status/fleet` and `forewarn fleet
/// status` say so with the reason's code and words, read from etcd; the two VMs whose IMDS
/// answers are Healthy.
#[test]
fn a_vm_whose_imds_does_not_answer_is_shown_unhealthy_with_its_reason_on_another_vm() {
    let started = Instant::now();
    let mut fleet = Fleet::start_with(Etcd::start(None), 2, None, None);
    // Bound, then closed: every connection to it is refused.
    let refused = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let cut_off = vm(2);
    let daemon = fleet.start_daemon_with(
        &cut_off,
        &format!("http://{refused}"),
        &format!(
            "\n[scale-set]\nimds-unreachable-after = \"{}s\"\n",
            IMDS_UNREACHABLE_AFTER.as_secs()
        ),
    );
    fleet.daemons.push((cut_off.clone(), daemon));
    let admin = fleet.daemons[0].1.admin_address(WAIT);

    let view = wait_for(
        WAIT + IMDS_UNREACHABLE_AFTER,
        "vm-02 Unhealthy (imds-unreachable) and the others Healthy in vm-00's /status/fleet",
        || {
            let body = http_get(&admin, "/status/fleet")?;
            let view: FleetView =
                serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
            let health_of = |name: &str| {
                view.vms
                    .iter()
                    .find(|listed| listed.vm == name)
                    .and_then(|listed| listed.record.as_ref())
                    .and_then(|record| record.scale_set_health.clone())
            };
            let cut_off_unhealthy = health_of(&cut_off).is_some_and(|health| {
                health.state == "Unhealthy"
                    && health
                        .reasons
                        .iter()
                        .map(|reason| reason.code.as_str())
                        .eq(["imds-unreachable"])
            });
            let others_healthy = [vm(0), vm(1)]
                .iter()
                .all(|name| health_of(name).is_some_and(|health| health.state == "Healthy"));
            match cut_off_unhealthy && others_healthy {
                true => Ok(view),
                false => Err(format!("{body}{}", fleet.describe())),
            }
        },
    );
    let reason = view
        .vms
        .iter()
        .find(|listed| listed.vm == cut_off)
        .and_then(|listed| listed.record.as_ref())
        .and_then(|record| record.scale_set_health.as_ref())
        .and_then(|health| health.reasons.first())
        .expect("vm-02's reason")
        .clone();
    assert!(
        reason.text.starts_with("IMDS has not answered"),
        "{reason:?}"
    );

    // The table on vm-00: vm-02's row names the state and the reason's code.
    let table = fleet.fleet_status(&admin, &[]);
    let row = |name: &str| -> String {
        table
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no row of {name}: {table}"))
            .to_owned()
    };
    assert!(
        row(&cut_off).contains("Unhealthy: imds-unreachable"),
        "{table}"
    );
    for name in [vm(0), vm(1)] {
        assert!(row(&name).contains("Healthy"), "{table}");
        assert!(!row(&name).contains("Unhealthy"), "{table}");
    }
    // The status page's fleet section on vm-00, in a browser: the same.
    let page = fleet_page_of(&admin, 3, None);
    for row in &page.rows {
        let (health, reasons): (&str, &[&str]) = match row.vm == cut_off {
            true => ("Unhealthy", &["imds-unreachable"]),
            false => ("Healthy", &[]),
        };
        assert_eq!(
            (row.health.as_str(), row.health_reasons.clone()),
            (
                health,
                reasons.iter().map(|code| code.to_string()).collect()
            ),
            "{row:?}"
        );
    }
    assert_eq!(page.page_errors, Vec::<String>::new());
    eprintln!(
        "fleet health test: {:.1} s; vm-02 shown Unhealthy on vm-00 ({})",
        started.elapsed().as_secs_f64(),
        reason.text
    );
}

/// A Freeze naming both VMs: 1 minute's notice, 9 s announced, over 3 s after it starts.
const FLEET_FREEZE: &str = "name = \"fleet-freeze\"\n\
     description = \"One Platform Freeze naming both VMs.\"\n\
     vms = [\"vm-00\", \"vm-01\"]\n\
     end_after = \"1h\"\n\n\
     [[events]]\n\
     type = \"Freeze\"\n\
     appear_at = \"1s\"\n\
     notice = \"1m\"\n\
     duration_seconds = 9\n\
     runs_for = \"3s\"\n";

/// Each VM's outcome record, once the event is over, reaches its fleet record: `forewarn fleet
/// status` and `/status/fleet` list each VM's last event with the impact its own record
/// measured, and sum the fleet up by event type.
#[test]
fn each_vms_last_events_and_the_impact_by_type_reach_the_fleet_view() {
    let fleet = Fleet::start_playing(Etcd::start(None), FLEET_FREEZE, 2, None, None, Vec::new());
    let admin = fleet.daemons[0].1.admin_address(WAIT);
    let view = wait_for(WAIT, "both VMs' finished Freeze in the fleet view", || {
        let body = http_get(&admin, "/status/fleet")?;
        let view: serde_json::Value =
            serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
        let finished = view["vms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|vm| vm["record"]["last_outcomes"][0]["event_type"] == "Freeze")
            .count();
        match finished {
            2 => Ok(view),
            _ => Err(format!("{view}{}", fleet.describe())),
        }
    });
    // Each VM's entry is its own record's figure, as its /status/events has it.
    let mut figures = Vec::new();
    for (vm, daemon) in &fleet.daemons {
        let own: serde_json::Value = serde_json::from_str(
            &http_get(&daemon.admin_address(WAIT), "/status/events").expect("GET /status/events"),
        )
        .expect("JSON");
        let record = &own["records"][0];
        let entry = view["vms"]
            .as_array()
            .and_then(|vms| vms.iter().find(|entry| entry["vm"] == vm.as_str()))
            .unwrap_or_else(|| panic!("{vm} missing: {view:#}"));
        let outcome = &entry["record"]["last_outcomes"][0];
        assert_eq!(outcome["id"], record["event_id"], "{view:#}");
        let verdict = outcome["verdict"].as_str().unwrap_or_default();
        let full = record["verdict"]["text"].as_str().unwrap_or_default();
        assert!(
            !verdict.is_empty() && full.starts_with(verdict.trim_end_matches('…')),
            "the fleet record's verdict is the VM's own (cut to 200 characters): {view:#}"
        );
        let kind = record["happened"]["impact"]["kind"]
            .as_str()
            .unwrap_or_default();
        assert!(matches!(kind, "pause" | "no-pause-seen"), "{record:#}");
        assert_eq!(outcome["impact"], kind, "{view:#}");
        figures.push(
            record["happened"]["impact"]["milliseconds"]
                .as_u64()
                .unwrap_or(0),
        );
    }
    figures.sort_unstable();
    let freeze = &view["impact_by_type"][0];
    assert_eq!(freeze["event_type"], "Freeze", "{view:#}");
    assert_eq!(freeze["vm_events"], 2, "{view:#}");
    assert_eq!(freeze["measured"], 2, "{view:#}");
    assert_eq!(
        freeze["max_ms"].as_u64(),
        figures.last().copied(),
        "{view:#}"
    );
    assert_eq!(freeze["prepared_in_time"], 2, "{view:#}");

    let table = fleet.fleet_status(&admin, &[]);
    assert!(table.contains("LAST EVENTS"), "{table}");
    for (vm, _) in &fleet.daemons {
        let row = table
            .lines()
            .find(|line| line.starts_with(vm.as_str()))
            .unwrap_or_else(|| panic!("no row of {vm}: {table}"));
        assert!(
            row.contains("Freeze paused ") || row.contains("Freeze no pause"),
            "{table}"
        );
    }
    assert!(
        table.contains("IMPACT BY TYPE") && table.contains("Freeze: 2 VM-event(s)"),
        "{table}"
    );
}
