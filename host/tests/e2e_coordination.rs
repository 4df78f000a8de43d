//! End-to-end tests of coordinated approval: three `forewarn run` daemons (vm-a, vm-b, vm-c)
//! against one `forewarn simulate` and a real etcd that each test starts on loopback.
//!
//! They assert at the simulator (how many approval POSTs, from which VM, when) and in the
//! daemons' JSON logs (when each VM's plugins approved and recorded ready, who led). The
//! figures the issue asks for (last VM ready → approval POST, leader failover) are printed,
//! not asserted. The tests run one at a time so that those figures are not skewed by
//! nine daemons sharing two cores. etcd must be installed (`apt-get install etcd-server`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use forewarn_host::log_messages::{COORDINATION_LEADS, COORDINATION_READY};
use forewarn_simulator::{ApprovalRecord, StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::harness::{
    ChildGuard, Daemon, DaemonConfig, LogLine, ProbePlugin, Simulator, free_loopback_address,
    http_get, now_unix_ms, summarize_state, wait_for, wait_until, write_plugin_dir,
};
use forewarn_test_support::pki::{Pki, find_on_path};
use forewarn_test_support::{forewarn_binary, guests};
use tempfile::TempDir;

const VMS: [&str; 3] = ["vm-a", "vm-b", "vm-c"];
const SCENARIO: &str = "coordinated-reboot";
/// Generous bound for a single wait.
const WAIT: Duration = Duration::from_secs(60);
/// The lease TTL the tests configure (etcd's minimum is about 2 s).
const LEASE_TTL: Duration = Duration::from_secs(3);
const UNREACHABLE_PREFIX: &str = "etcd cannot be reached";
const ROOT_PASSWORD: &str = "forewarn-test-secret";

/// One test at a time (see the module comment).
static SERIAL: Mutex<()> = Mutex::new(());

/// A real etcd on free loopback ports with its data in a temp dir; over TLS with client
/// certificates when started with a [`Pki`].
struct Etcd {
    process: ChildGuard,
    address: String,
    tls: bool,
    _dir: TempDir,
}

impl Etcd {
    fn start(pki: Option<&Pki>) -> Etcd {
        let binary = find_on_path("etcd").unwrap_or_else(|| {
            panic!(
                "etcd is not installed: the coordination tests run a real etcd. Install it \
                 with `apt-get install -y etcd-server` (Debian/Ubuntu) so that `etcd` is on PATH"
            )
        });
        let dir = TempDir::new().expect("temp dir");
        let address = free_loopback_address();
        let peer = format!("http://{}", free_loopback_address());
        // /health on plain HTTP: the client port wants a client certificate under TLS.
        let metrics = free_loopback_address();
        let scheme = if pki.is_some() { "https" } else { "http" };
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("etcd log");
        let mut command = Command::new(binary);
        if let Some(pki) = pki {
            command
                .arg(format!("--cert-file={}", pki.file("server.pem")))
                .arg(format!("--key-file={}", pki.file("server.key")))
                .arg(format!("--trusted-ca-file={}", pki.file("ca.pem")))
                .arg("--client-cert-auth");
        }
        let child = command
            .arg("--name=forewarn-test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={scheme}://{address}"))
            .arg(format!("--advertise-client-urls={scheme}://{address}"))
            .arg(format!("--listen-metrics-urls=http://{metrics}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=forewarn-test={peer}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start etcd: {error}"));
        let etcd = Etcd {
            process: ChildGuard::new(child),
            address,
            tls: pki.is_some(),
            _dir: dir,
        };
        wait_for(WAIT, "etcd to report healthy", || {
            http_get(&metrics, "/health").and_then(|body| {
                if body.contains("\"health\":\"true\"") {
                    Ok(())
                } else {
                    Err(body)
                }
            })
        });
        etcd
    }

    /// Creates user root and turns authentication on, with `etcdctl` (package etcd-client).
    fn enable_auth(&self) {
        let steps: [&[&str]; 3] = [
            &["user", "add", &format!("root:{ROOT_PASSWORD}")],
            &["user", "grant-role", "root", "root"],
            &["auth", "enable"],
        ];
        for step in steps {
            let output = self.etcdctl(step);
            assert!(output.status.success(), "etcdctl {step:?}: {output:?}");
        }
        let anonymous = self.etcdctl(&["get", "/forewarn"]);
        assert!(
            !anonymous.status.success(),
            "etcd must refuse requests without a user now"
        );
    }

    fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        let binary = find_on_path("etcdctl").unwrap_or_else(|| {
            panic!(
                "etcdctl is not installed: the authentication test sets etcd up with it. \
                 Install it with `apt-get install -y etcd-client`"
            )
        });
        Command::new(binary)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint()))
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("cannot run etcdctl: {error}"))
    }

    fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.address)
    }

    fn stop(&mut self) {
        self.process.kill();
    }
}

/// How the set is configured for one test.
struct Setup {
    /// Scenario notice (NotBefore − appearance).
    notice: &'static str,
    /// vm-c's probe defers this many prepare attempts (250 ms apart) before approving.
    slow_attempts: u32,
    /// Extra `[coordination]` lines.
    coordination: &'static [&'static str],
    /// Turn on etcd authentication (user root) and give the daemons its password.
    auth: bool,
    /// etcd over TLS with client certificates, and what the daemons are given.
    tls: Tls,
}

/// etcd over TLS or not, and which CA the daemons trust.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tls {
    Off,
    /// The daemons trust etcd's CA and present a client certificate it issued.
    On,
    /// The daemons trust another CA: they cannot verify etcd's certificate.
    WrongCa,
}

/// Three daemons, one simulator, one etcd.
struct Set {
    dir: TempDir,
    etcd: Etcd,
    simulator: Simulator,
    daemons: Vec<(String, Daemon)>,
    event_id: String,
    pki: Option<Pki>,
    /// A CA that did not issue etcd's certificate (for [`Tls::WrongCa`]).
    other_pki: Option<Pki>,
}

impl Set {
    fn start(setup: &Setup) -> Set {
        Set::start_playing(setup, &scenario_text(setup.notice))
    }

    /// [`Set::start`] with the simulator playing `scenario` (named [`SCENARIO`]).
    fn start_playing(setup: &Setup, scenario: &str) -> Set {
        let dir = TempDir::new().expect("temp dir");
        let pki = (setup.tls != Tls::Off).then(Pki::generate);
        let other_pki = (setup.tls == Tls::WrongCa).then(Pki::generate);
        let etcd = Etcd::start(pki.as_ref());
        if setup.auth {
            etcd.enable_auth();
        }
        // The clock starts at the first daemon's first poll: the notices are not eaten by
        // three daemons starting on a loaded machine.
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(scenario)
            .start_on_first_poll()
            .start();
        let mut set = Set {
            dir,
            etcd,
            simulator,
            daemons: Vec::new(),
            event_id: stable_event_id(SCENARIO, 0),
            pki,
            other_pki,
        };
        for vm in VMS {
            let daemon = set.start_daemon(vm, setup);
            set.daemons.push((vm.to_owned(), daemon));
        }
        set
    }

    fn start_daemon(&self, vm: &str, setup: &Setup) -> Daemon {
        let root = self.dir.path().join(vm);
        let probe = if vm == "vm-c" {
            ProbePlugin::new("probe", "defer-until-attempt")
                .config("attempts", &setup.slow_attempts.to_string())
                .config("retry-ms", "250")
        } else {
            ProbePlugin::new("probe", "approve")
        };
        write_plugin_dir(&root.join("plugins"), Path::new(guests::PROBE), &[probe]);
        let imds_url = format!("{}/vm/{vm}", self.simulator.base_url);
        let config = DaemonConfig {
            vm_name: vm.to_owned(),
            policy: vec!["safety-margin-ms = 300".into()],
            ..DaemonConfig::vm_a(&root, root.join("plugins"), &imds_url)
        };
        let mut text = config.to_toml();
        text.push_str(&format!(
            "\n[coordination]\nendpoints = [\"{}\"]\nlease-ttl = \"{}s\"\n",
            self.etcd.endpoint(),
            LEASE_TTL.as_secs()
        ));
        if setup.auth {
            text.push_str(&format!(
                "username = \"root\"\npassword = \"{ROOT_PASSWORD}\"\nallow-plaintext-credentials = true\n"
            ));
        }
        if let Some(pki) = &self.pki {
            let ca = self.other_pki.as_ref().unwrap_or(pki);
            text.push_str(&format!(
                "ca-file = \"{}\"\ncert-file = \"{}\"\nkey-file = \"{}\"\n",
                ca.file("ca.pem"),
                pki.file("client.pem"),
                pki.file("client.key")
            ));
        }
        for line in setup.coordination {
            text.push_str(line);
            text.push('\n');
        }
        let path = root.join("forewarn.toml");
        std::fs::write(&path, text).expect("write the daemon config");
        Daemon::start(forewarn_binary!(), &path)
    }

    fn daemon(&self, vm: &str) -> &Daemon {
        &self
            .daemons
            .iter()
            .find(|(name, _)| name == vm)
            .expect("a daemon of the set")
            .1
    }

    fn daemon_mut(&mut self, vm: &str) -> &mut Daemon {
        &mut self
            .daemons
            .iter_mut()
            .find(|(name, _)| name == vm)
            .expect("a daemon of the set")
            .1
    }

    /// The first log line with `message` of `vm` about this set's event.
    fn first_line(&self, vm: &str, message: &str) -> Option<LogLine> {
        self.daemon(vm)
            .lines_with_message(message)
            .into_iter()
            .find(|line| line.text("event_id") == self.event_id)
    }

    /// When `vm`'s probe first approved the event's preparation.
    fn prepared_at(&self, vm: &str) -> Option<u64> {
        self.daemon(vm)
            .decisions()
            .into_iter()
            .find(|d| {
                d.event_id == self.event_id && d.phase == "prepare" && d.decision == "approve"
            })
            .map(|d| d.at_unix_ms)
    }

    /// Every daemon's log, for failure messages.
    fn describe(&self) -> String {
        let mut text = summarize_state(&self.simulator.state());
        for (vm, daemon) in &self.daemons {
            text.push_str(&format!("\n--- {vm}: {}", daemon.describe_for_failure()));
            for line in daemon.lines() {
                let message = line.message();
                if message == COORDINATION_READY || message == COORDINATION_LEADS {
                    text.push_str(&format!("\n  {message} at {}", line.at_unix_ms));
                }
            }
        }
        text
    }

    fn wait_for_approval(&self) -> StateSnapshot {
        wait_for(WAIT, "the coordinated approval at the simulator", || {
            let state = self.simulator.state();
            if state.approvals.is_empty() {
                return Err(self.describe());
            }
            Ok(state)
        })
    }

    /// Waits for the approval, then until each of `vms` has seen the event start (a second,
    /// wrong approval would show by then), and asserts the simulator received exactly one
    /// approval POST; returns that approval.
    fn the_one_approval(&self, vms: &[&str]) -> ApprovalRecord {
        let state = self.wait_for_approval();
        // However long it takes on a loaded machine: each daemon must see the event Started.
        wait_until(
            WAIT,
            &format!("{vms:?} to see the event started"),
            || {
                vms.iter()
                    .all(|vm| !self.daemon(vm).transitions("started").is_empty())
            },
            || self.describe(),
        );
        let state_after = self.simulator.state();
        assert_eq!(state_after.approvals.len(), 1, "{}", self.describe());
        assert_eq!(approval_posts(&state_after), 1, "{}", self.describe());
        state.approvals[0].clone()
    }

    /// Waits until exactly one daemon has logged that it leads; that leader and when.
    fn wait_for_one_leader(&self) -> (String, u64) {
        wait_until(
            WAIT,
            "a leader among the fast VMs",
            || self.leaders().len() == 1,
            || self.describe(),
        );
        self.leaders()[0].clone()
    }

    /// The leader named in the logs: the daemon that logged COORDINATION_LEADS.
    fn leaders(&self) -> Vec<(String, u64)> {
        VMS.iter()
            .filter_map(|vm| {
                self.first_line(vm, COORDINATION_LEADS)
                    .map(|line| ((*vm).to_owned(), line.at_unix_ms))
            })
            .collect()
    }
}

fn scenario_text(notice: &str) -> String {
    format!(
        "name = \"{SCENARIO}\"\n\
         description = \"One Platform Reboot naming vm-a, vm-b and vm-c.\"\n\
         vms = [\"vm-a\", \"vm-b\", \"vm-c\"]\n\
         end_after = \"10s\"\n\n\
         [[events]]\n\
         type = \"Reboot\"\n\
         appear_at = \"2s\"\n\
         notice = \"{notice}\"\n\
         runs_for = \"30s\"\n"
    )
}

fn approval_posts(state: &StateSnapshot) -> usize {
    state
        .requests
        .iter()
        .filter(|request| request.method == "POST" && request.path.contains("scheduledevents"))
        .count()
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn the_event_is_approved_once_after_the_slowest_vm_is_ready() {
    let _serial = lock();
    approved_once_after_the_slowest(&Setup {
        notice: "5m",
        slow_attempts: 16,
        coordination: &[],
        auth: false,
        tls: Tls::Off,
    });
}

#[test]
fn etcd_with_authentication_is_used_with_the_configured_user() {
    let _serial = lock();
    approved_once_after_the_slowest(&Setup {
        notice: "5m",
        slow_attempts: 8,
        coordination: &[],
        auth: true,
        tls: Tls::Off,
    });
}

/// Starts the set, waits for the approval, and checks it came once, from the leader,
/// after vm-c's plugins approved; prints the time from vm-c's ready record to the POST.
fn approved_once_after_the_slowest(setup: &Setup) {
    let set = Set::start(setup);
    let approval = &set.the_one_approval(&VMS);
    assert!(approval.accepted);
    assert_eq!(approval.event_id, set.event_id);

    let slowest_prepared = set.prepared_at("vm-c").unwrap_or_else(|| {
        panic!(
            "approved before vm-c's plugins approved\n{}",
            set.describe()
        )
    });
    for fast in ["vm-a", "vm-b"] {
        let prepared = set.prepared_at(fast).expect("fast VM prepared");
        assert!(
            prepared < slowest_prepared,
            "{fast} should be faster than vm-c"
        );
    }
    assert!(
        approval.at_unix_ms >= slowest_prepared,
        "approved at {} before vm-c's plugins approved at {slowest_prepared}\n{}",
        approval.at_unix_ms,
        set.describe()
    );
    let leaders = set.leaders();
    assert_eq!(leaders.len(), 1, "exactly one leader: {leaders:?}");
    assert_eq!(approval.vm, leaders[0].0, "the leader approves");
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

#[test]
fn killing_the_leader_hands_over_within_the_lease_ttl_and_approves_once() {
    let _serial = lock();
    let mut set = Set::start(&Setup {
        notice: "5m",
        slow_attempts: 60,
        coordination: &["dead-vm = \"counts-as-ready\""],
        auth: false,
        tls: Tls::Off,
    });
    let (leader, _) = set.wait_for_one_leader();
    assert!(
        set.prepared_at("vm-c").is_none(),
        "vm-c must still be preparing"
    );
    let killed_at = now_unix_ms();
    set.daemon_mut(&leader).kill();
    let survivor = if leader == "vm-a" { "vm-b" } else { "vm-a" };
    wait_until(
        LEASE_TTL + Duration::from_secs(10),
        "the surviving fast VM to take the lead",
        || set.first_line(survivor, COORDINATION_LEADS).is_some(),
        || set.describe(),
    );
    let took_over_at = set
        .first_line(survivor, COORDINATION_LEADS)
        .expect("survivor leads")
        .at_unix_ms;
    assert!(
        set.simulator.state().approvals.is_empty(),
        "nothing approved before vm-c is ready"
    );
    let approval = &set.the_one_approval(&[survivor, "vm-c"]);
    assert_eq!(approval.vm, survivor, "the new leader approves");
    let slowest_prepared = set.prepared_at("vm-c").expect("vm-c prepared");
    assert!(
        approval.at_unix_ms >= slowest_prepared,
        "{}",
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

#[test]
fn stopping_etcd_mid_event_never_approves_early() {
    let _serial = lock();
    let mut set = Set::start(&Setup {
        notice: "25s",
        slow_attempts: 16,
        coordination: &[],
        auth: false,
        tls: Tls::Off,
    });
    set.wait_for_one_leader();
    assert!(
        set.prepared_at("vm-c").is_none(),
        "vm-c must still be preparing"
    );
    set.etcd.stop();
    let started = wait_for(WAIT, "the event to start at NotBefore", || {
        let state = set.simulator.state();
        state
            .history
            .iter()
            .find(|record| {
                record.event_id == set.event_id && record.transition == Transition::Started
            })
            .map(|record| record.at_unix_ms)
            .ok_or_else(|| set.describe())
    });
    let state = set.simulator.state();
    assert!(
        state.approvals.is_empty(),
        "approved without coordination:\n{}",
        set.describe()
    );
    assert_eq!(approval_posts(&state), 0, "{}", set.describe());
    let slowest_prepared = set
        .prepared_at("vm-c")
        .expect("vm-c's plugins approved before NotBefore");
    assert!(
        slowest_prepared < started,
        "vm-c must have been ready before the start"
    );
    for vm in VMS {
        let warnings = set
            .daemon(vm)
            .lines()
            .into_iter()
            .filter(|line| line.message().starts_with(UNREACHABLE_PREFIX))
            .count();
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
        auth: false,
        tls: Tls::On,
    });
}

#[test]
fn a_daemon_that_cannot_verify_etcd_never_approves_early() {
    let _serial = lock();
    let set = Set::start(&Setup {
        notice: "5m",
        slow_attempts: 4,
        coordination: &[],
        auth: false,
        tls: Tls::WrongCa,
    });
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
    let state = set.simulator.state();
    assert!(
        state.approvals.is_empty(),
        "approved although no VM could coordinate:\n{}",
        set.describe()
    );
    assert_eq!(approval_posts(&state), 0, "{}", set.describe());
}

/// A key `events/ID/approval = vm-a` written by someone else (no lease, not vm-a's daemon)
/// before any VM could claim: vm-a must not send an approval on the strength of it.
#[test]
fn a_forged_approval_key_naming_this_vm_is_not_acted_on() {
    let _serial = lock();
    let set = Set::start(&Setup {
        notice: "20s",
        slow_attempts: 12,
        coordination: &[],
        auth: false,
        tls: Tls::Off,
    });
    let key = format!("/forewarn/events/{}/approval", set.event_id);
    let forged = set.etcd.etcdctl(&["put", &key, "vm-a"]);
    assert!(forged.status.success(), "etcdctl put: {forged:?}");
    wait_for(WAIT, "vm-a to see the forged approval record", || {
        let approvals = set.simulator.state().approvals;
        assert!(
            approvals.is_empty(),
            "an approval was sent on the strength of the forged key: {}",
            set.describe()
        );
        set.first_line(
            "vm-a",
            forewarn_host::coordination::NOT_OUR_APPROVAL_MESSAGE,
        )
        .ok_or_else(|| set.describe())
    });
    let started = set
        .simulator
        .wait_for_state(WAIT, "the event to start at NotBefore", |state| {
            state
                .history
                .iter()
                .any(|record| record.transition == Transition::Started)
        });
    assert_eq!(approval_posts(&started), 0, "{}", set.describe());
    assert!(started.approvals.is_empty(), "{}", set.describe());
}

// ---- the barrier's deadline, dead-vm = "hold", reschedules, etcd coming back -----------------

impl Etcd {
    /// The value of `key`, or None when etcd has no such key.
    fn value(&self, key: &str) -> Option<String> {
        let output = self.etcdctl(&["get", "--print-value-only", key]);
        assert!(output.status.success(), "etcdctl get {key}: {output:?}");
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }

    /// Sends `signal` (`STOP`, `CONT`) to the etcd process.
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.process.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} etcd");
    }
}

impl Set {
    /// `{prefix}/events/{id}/ready/{vm}`: the NotBefore (Unix ms) `vm` recorded ready for.
    fn ready_record(&self, vm: &str) -> Option<u64> {
        let key = format!("/forewarn/events/{}/ready/{vm}", self.event_id);
        self.etcd.value(&key).map(|value| {
            value
                .parse()
                .unwrap_or_else(|error| panic!("{key} = {value:?}: {error}"))
        })
    }

    /// When the simulator recorded `transition` of the set's event (Unix ms), if it did.
    fn transition_ms(&self, state: &StateSnapshot, transition: Transition) -> Option<u64> {
        state
            .history
            .iter()
            .find(|record| record.event_id == self.event_id && record.transition == transition)
            .map(|record| record.at_unix_ms)
    }
}

/// `deadline = "12s"`: vm-c never gets ready, so without the deadline nobody would approve;
/// with it the leader approves 12 s before NotBefore (no earlier), once, and the event
/// starts then rather than at NotBefore. NotBefore is what the fast VMs recorded in etcd.
#[test]
fn the_deadline_lets_the_leader_approve_without_a_vm_that_never_gets_ready() {
    let _serial = lock();
    let set = Set::start(&Setup {
        notice: "20s",
        slow_attempts: 100_000,
        coordination: &["deadline = \"12s\""],
        auth: false,
        tls: Tls::Off,
    });
    let (leader, _) = set.wait_for_one_leader();
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
    let mut set = Set::start(&Setup {
        notice: "25s",
        slow_attempts: 24,
        coordination: &["dead-vm = \"hold\""],
        auth: false,
        tls: Tls::Off,
    });
    let (leader, _) = set.wait_for_one_leader();
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
    let was_ready = format!("/forewarn/events/{}/was-ready/{leader}", set.event_id);
    assert_eq!(set.etcd.value(&was_ready).as_deref(), Some(leader.as_str()));
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
        "{}\n[[events.reschedule]]\nat = \"5s\"\nnotice = \"40s\"\n",
        scenario_text("30s")
    );
    let set = Set::start_playing(
        &Setup {
            notice: "30s",
            slow_attempts: 24,
            coordination: &[],
            auth: false,
            tls: Tls::Off,
        },
        &scenario,
    );
    let (leader, _) = set.wait_for_one_leader();
    let before = set
        .ready_record(&leader)
        .expect("the leader recorded ready");
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
    // From 2 s + 30 s to 5 s + 40 s: 13 s later (each NotBefore cut to whole seconds).
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
    let set = Set::start(&Setup {
        notice: "45s",
        slow_attempts: 24,
        coordination: &[],
        auth: false,
        tls: Tls::Off,
    });
    let (leader, _) = set.wait_for_one_leader();
    let not_before = set
        .ready_record(&leader)
        .expect("the leader recorded ready");
    assert_eq!(
        set.ready_record("vm-c"),
        None,
        "vm-c must still be preparing"
    );
    set.etcd.signal("STOP");
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
    set.etcd.signal("CONT");
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
