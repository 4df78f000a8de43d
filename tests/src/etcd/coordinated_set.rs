//! Three `forewarn run` daemons (vm-a, vm-b, vm-c) against one `forewarn simulate` and a
//! real etcd — one of their own, or members of the shared cluster — as the coordination tests
//! run them ([`Set`], configured by a [`Setup`]): vm-c's probe defers for a while (or until
//! the test releases it), the others approve at once. The oracles look at the simulator (its
//! approvals and requests), at etcd (with `etcdctl`) and at each daemon's `/status`.
//!
//! With [`Auth::PerVm`], etcd has authentication on and each daemon logs in as a user of its
//! own whose role may write its own subtree (`PREFIX/vms/VM/`) and the shared area, and
//! nothing of another VM's ([`grant_vm_roles`]), as docs/coordination.md sets it up.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use forewarn_daemon::coordination::{Connection, CoordinationStatus};
use forewarn_daemon::log_messages::{
    COORDINATION_LEADS, COORDINATION_NO_QUORUM, COORDINATION_READY,
};
use forewarn_daemon::ops::status::StatusSnapshot;
use forewarn_simulator::{ApprovalRecord, StateSnapshot, Transition, stable_event_id};
use tempfile::TempDir;

use crate::etcd::{Etcd, KeyChange, KeyRevisions, etcdctl, key_history, key_revisions};
use crate::guests;
use crate::harness::{
    Daemon, DaemonConfig, LogLine, ProbePlugin, Simulator, http_get, summarize_state, wait_for,
    wait_until, write_plugin_dir,
};
use crate::pki::Pki;

/// The VMs of the set, as the scenario names them.
pub const VMS: [&str; 3] = ["vm-a", "vm-b", "vm-c"];
/// The scenario's name (the event id is stable for it).
pub const SCENARIO: &str = "coordinated-reboot";
/// Generous bound for a single wait.
pub const WAIT: Duration = Duration::from_secs(60);
/// The lease TTL the tests configure (etcd's minimum is about 2 s).
pub const LEASE_TTL: Duration = Duration::from_secs(3);
/// How a daemon's warning that etcd cannot be reached begins.
pub const UNREACHABLE_PREFIX: &str = "etcd cannot be reached";
/// etcd's root password when authentication is on.
pub const ROOT_PASSWORD: &str = "forewarn-test-secret";
/// vm-c's prepare attempts with [`Setup::hold_vm_c`]: more than any test lasts (250 ms apart).
pub const VM_C_HELD_ATTEMPTS: u32 = 1_000_000;

/// One test at a time (see the module comment).
/// One test at a time: the figures the tests print are not skewed by nine daemons sharing
/// two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// How the daemons log in to etcd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// etcd without authentication.
    Off,
    /// Authentication on; every daemon logs in as root.
    Root,
    /// Authentication on; each daemon logs in as a user of its own, named after its VM
    /// ([`vm_password`]), with the role [`grant_vm_roles`] gives it.
    PerVm,
}

/// The etcd password of `vm`'s own user (with [`Auth::PerVm`]).
pub fn vm_password(vm: &str) -> String {
    format!("{vm}-secret")
}

/// Creates user root (and, with [`Auth::PerVm`], a user and role per VM of [`VMS`] under
/// `prefix`) and turns authentication on, with `etcdctl` (package etcd-client).
pub fn enable_auth(etcd: &Etcd, auth: Auth, prefix: &str) {
    let root = format!("root:{ROOT_PASSWORD}");
    let steps: [&[&str]; 2] = [
        &["user", "add", &root],
        &["user", "grant-role", "root", "root"],
    ];
    for step in steps {
        let output = etcd.etcdctl(step);
        assert!(output.status.success(), "etcdctl {step:?}: {output:?}");
    }
    if auth == Auth::PerVm {
        for vm in VMS {
            grant_vm_roles(&etcd.endpoint(), &[], prefix, vm, &vm_password(vm));
        }
    }
    let output = etcd.etcdctl(&["auth", "enable"]);
    assert!(output.status.success(), "etcdctl auth enable: {output:?}");
    let anonymous = etcd.etcdctl(&["get", prefix]);
    assert!(
        !anonymous.status.success(),
        "etcd must refuse requests without a user now"
    );
}

/// Gives `vm` an etcd user (`vm`:`password`) and a role of its own (`forewarn-VM`): read under
/// `prefix`, write its own subtree (`PREFIX/vms/VM/`) and the shared area — here every key
/// under `prefix` that sorts before `PREFIX/vms/` (`events/`, `fleet/`, and where versions
/// before the per-VM layout wrote: `members/`), one range. That is more than
/// docs/coordination.md grants (`events/` and the VM's own `fleet/VM`): the tests' forgers are
/// that much stronger, and the daemons of a version before the per-VM layout can run with it
/// too (what the tests were first run against). `flags` are etcdctl's (`--user=root:…` once
/// authentication is on).
pub fn grant_vm_roles(endpoints: &str, flags: &[String], prefix: &str, vm: &str, password: &str) {
    let role = format!("forewarn-{vm}");
    let everything = format!("{prefix}/");
    let shared_end = format!("{prefix}/vms/");
    let own = format!("{prefix}/vms/{vm}/");
    let user = format!("{vm}:{password}");
    let steps: [&[&str]; 6] = [
        &["role", "add", &role],
        &[
            "role",
            "grant-permission",
            &role,
            "--prefix=true",
            "read",
            &everything,
        ],
        &[
            "role",
            "grant-permission",
            &role,
            "readwrite",
            &everything,
            &shared_end,
        ],
        &[
            "role",
            "grant-permission",
            &role,
            "--prefix=true",
            "readwrite",
            &own,
        ],
        &["user", "add", &user],
        &["user", "grant-role", vm, &role],
    ];
    for step in steps {
        let mut args: Vec<&str> = step.to_vec();
        args.extend(flags.iter().map(String::as_str));
        let output = etcdctl(endpoints, &args);
        assert!(output.status.success(), "etcdctl {args:?}: {output:?}");
    }
}

/// How the set is configured for one test.
pub struct Setup {
    /// Scenario notice (NotBefore − appearance).
    pub notice: &'static str,
    /// vm-c's probe defers this many prepare attempts (250 ms apart) before approving.
    pub slow_attempts: u32,
    /// vm-c's probe defers until the test says so ([`Set::release_vm_c`]), however long the
    /// rest takes on a loaded machine; `slow_attempts` is then not used.
    pub hold_vm_c: bool,
    /// Extra `[coordination]` lines.
    pub coordination: &'static [&'static str],
    /// etcd authentication, and the users the daemons log in as.
    pub auth: Auth,
    /// etcd over TLS with client certificates, and what the daemons are given.
    pub tls: Tls,
    /// Extra `[policy]` lines.
    pub policy: &'static [&'static str],
    /// The daemons use these members of the shared cluster instead of an etcd of their own.
    pub cluster: Option<ClusterUse>,
    /// The VMs given other `coordination.endpoints` than the set's (a link the test cuts).
    pub endpoints_of: Vec<(&'static str, Vec<String>)>,
}

/// Which cluster members the daemons are given, in order, and a key prefix of the test's own
/// (the shared cluster keeps the keys of earlier tests, for the same event id).
pub struct ClusterUse {
    /// The members' client URLs, in the order the daemons are given them.
    pub endpoints: Vec<String>,
    /// `coordination.prefix`.
    pub prefix: &'static str,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            notice: "5m",
            slow_attempts: 8,
            hold_vm_c: false,
            coordination: &[],
            auth: Auth::Off,
            tls: Tls::Off,
            policy: &[],
            cluster: None,
            endpoints_of: Vec::new(),
        }
    }
}

/// etcd over TLS or not, and which CA the daemons trust.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// Plain HTTP.
    Off,
    /// The daemons trust etcd's CA and present a client certificate it issued.
    On,
    /// The daemons trust another CA: they cannot verify etcd's certificate.
    WrongCa,
}

/// Three daemons, one simulator, one etcd (or the shared cluster).
pub struct Set {
    /// The daemons' directories (config, state, plugins).
    pub dir: TempDir,
    /// The test's own etcd; None with the shared cluster.
    pub etcd: Option<Etcd>,
    /// What the daemons are given as `coordination.endpoints`.
    pub endpoints: Vec<String>,
    /// `coordination.prefix`.
    pub prefix: String,
    /// The simulator playing the scenario.
    pub simulator: Simulator,
    /// Each VM's daemon.
    pub daemons: Vec<(String, Daemon)>,
    /// The scenario's event.
    pub event_id: String,
    /// etcd's CA and certificates, with TLS.
    pub pki: Option<Pki>,
    /// A CA that did not issue etcd's certificate (for [`Tls::WrongCa`]).
    pub other_pki: Option<Pki>,
    /// etcd authentication, and the users the daemons log in as (the test's etcdctl is root).
    pub auth: Auth,
    /// The `forewarn` binary (the daemons' and the simulator's).
    pub binary: &'static Path,
}

impl Set {
    /// Starts the set with `binary` (`forewarn_binary!()`), the simulator playing one Reboot
    /// naming the three VMs with `setup.notice`.
    pub fn start(binary: &'static Path, setup: &Setup) -> Set {
        Set::start_playing(binary, setup, &scenario_text(setup.notice))
    }

    /// [`Set::start`] with the simulator playing `scenario` (named [`SCENARIO`]).
    pub fn start_playing(binary: &'static Path, setup: &Setup, scenario: &str) -> Set {
        let dir = TempDir::new().expect("temp dir");
        let pki = (setup.tls != Tls::Off).then(Pki::generate);
        let other_pki = (setup.tls == Tls::WrongCa).then(Pki::generate);
        let etcd = setup.cluster.is_none().then(|| Etcd::start(pki.as_ref()));
        let own_prefix = setup.cluster.as_ref().map_or("/forewarn", |c| c.prefix);
        if let Some(etcd) = etcd.as_ref().filter(|_| setup.auth != Auth::Off) {
            enable_auth(etcd, setup.auth, own_prefix);
        }
        let (endpoints, prefix) = match (&setup.cluster, &etcd) {
            (Some(cluster), _) => (cluster.endpoints.clone(), cluster.prefix.to_owned()),
            (None, Some(etcd)) => (vec![etcd.endpoint()], "/forewarn".to_owned()),
            (None, None) => unreachable!("an etcd of its own without the cluster"),
        };
        // The clock starts at the first daemon's first poll: the notices are not eaten by
        // three daemons starting on a loaded machine.
        let simulator = Simulator::builder(binary)
            .scenario_text(scenario)
            .start_on_first_poll()
            .start();
        let mut set = Set {
            dir,
            etcd,
            endpoints,
            prefix,
            simulator,
            daemons: Vec::new(),
            event_id: stable_event_id(SCENARIO, 0),
            pki,
            other_pki,
            auth: setup.auth,
            binary,
        };
        for vm in VMS {
            let daemon = set.start_daemon(vm, setup);
            set.daemons.push((vm.to_owned(), daemon));
        }
        set
    }

    /// Starts `vm`'s daemon as `setup` says (its probe, policy and `[coordination]`).
    pub fn start_daemon(&self, vm: &str, setup: &Setup) -> Daemon {
        let root = self.dir.path().join(vm);
        let probe = if vm == "vm-c" {
            let attempts = match setup.hold_vm_c {
                true => VM_C_HELD_ATTEMPTS,
                false => setup.slow_attempts,
            };
            ProbePlugin::new("probe", "defer-until-attempt")
                .config("attempts", &attempts.to_string())
                .config("retry-ms", "250")
        } else {
            ProbePlugin::new("probe", "approve")
        };
        write_plugin_dir(&root.join("plugins"), Path::new(guests::PROBE), &[probe]);
        let imds_url = format!("{}/vm/{vm}", self.simulator.base_url);
        let mut policy = vec!["safety-margin-ms = 300".to_owned()];
        policy.extend(setup.policy.iter().map(|line| (*line).to_owned()));
        let config = DaemonConfig {
            vm_name: vm.to_owned(),
            policy,
            ..DaemonConfig::vm_a(&root, root.join("plugins"), &imds_url)
        };
        let mut text = config.to_toml();
        let given = setup
            .endpoints_of
            .iter()
            .find(|(name, _)| *name == vm)
            .map_or(&self.endpoints, |(_, endpoints)| endpoints);
        let endpoints: Vec<String> = given.iter().map(|e| format!("{e:?}")).collect();
        text.push_str(&format!(
            "\n[coordination]\nendpoints = [{}]\nprefix = {:?}\nlease-ttl = \"{}s\"\n",
            endpoints.join(", "),
            self.prefix,
            LEASE_TTL.as_secs()
        ));
        let login = match setup.auth {
            Auth::Off => None,
            Auth::Root => Some(("root".to_owned(), ROOT_PASSWORD.to_owned())),
            Auth::PerVm => Some((vm.to_owned(), vm_password(vm))),
        };
        if let Some((user, password)) = login {
            text.push_str(&format!(
                "username = \"{user}\"\npassword = \"{password}\"\nallow-plaintext-credentials = true\n"
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
        Daemon::start(self.binary, &path)
    }

    /// `vm`'s daemon.
    pub fn daemon(&self, vm: &str) -> &Daemon {
        &self
            .daemons
            .iter()
            .find(|(name, _)| name == vm)
            .expect("a daemon of the set")
            .1
    }

    /// `vm`'s daemon, to kill it.
    pub fn daemon_mut(&mut self, vm: &str) -> &mut Daemon {
        &mut self
            .daemons
            .iter_mut()
            .find(|(name, _)| name == vm)
            .expect("a daemon of the set")
            .1
    }

    /// The first log line with `message` of `vm` about this set's event.
    pub fn first_line(&self, vm: &str, message: &str) -> Option<LogLine> {
        self.daemon(vm)
            .lines_with_message(message)
            .into_iter()
            .find(|line| line.text("event_id") == self.event_id)
    }

    /// When `vm`'s probe first approved the event's preparation.
    pub fn prepared_at(&self, vm: &str) -> Option<u64> {
        self.daemon(vm)
            .decisions()
            .into_iter()
            .find(|d| {
                d.event_id == self.event_id && d.phase == "prepare" && d.decision == "approve"
            })
            .map(|d| d.at_unix_ms)
    }

    /// Every daemon's log, for failure messages.
    pub fn describe(&self) -> String {
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

    /// Checks that the simulator received no approval (nor any approval POST); `what`
    /// says what would have been wrong.
    pub fn assert_nothing_approved(&self, what: &str) {
        let state = self.simulator.state();
        assert!(state.approvals.is_empty(), "{what}\n{}", self.describe());
        assert_eq!(approval_posts(&state), 0, "{what}\n{}", self.describe());
    }

    /// Waits until the simulator holds an approval; its state then.
    pub fn wait_for_approval(&self) -> StateSnapshot {
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
    pub fn the_one_approval(&self, vms: &[&str]) -> ApprovalRecord {
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

    /// Waits until etcd's leader key of the event names a VM; that VM.
    pub fn wait_for_one_leader(&self) -> String {
        wait_for(WAIT, "a leader: the event's leader key in etcd", || {
            self.leader_in_etcd().ok_or_else(|| self.describe())
        })
    }

    /// `etcdctl`'s flags to reach this set's etcd as the daemons do (user, TLS files).
    pub fn etcdctl_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if self.auth != Auth::Off {
            flags.push(format!("--user=root:{ROOT_PASSWORD}"));
        }
        if let Some(pki) = &self.pki {
            flags.push(format!("--cacert={}", pki.file("ca.pem")));
            flags.push(format!("--cert={}", pki.file("client.pem")));
            flags.push(format!("--key={}", pki.file("client.key")));
        }
        flags
    }

    /// `{prefix}/events/{id}/{name}`: one of the event's shared keys (`leader`, `approval`).
    pub fn event_key(&self, name: &str) -> String {
        format!("{}/events/{}/{name}", self.prefix, self.event_id)
    }

    /// `{prefix}/vms/{vm}/events/{id}/{name}`: one of `vm`'s own keys about the event
    /// (`ready`, `was-ready`, `leads`, `claim`).
    pub fn vm_event_key(&self, vm: &str, name: &str) -> String {
        format!("{}/vms/{vm}/events/{}/{name}", self.prefix, self.event_id)
    }

    /// `{prefix}/vms/{vm}/member`: `vm`'s daemon is alive (under its lease).
    pub fn member_key(&self, vm: &str) -> String {
        format!("{}/vms/{vm}/member", self.prefix)
    }

    /// The value of `key` in etcd now (read as the test's etcdctl user), if there is one.
    pub fn value(&self, key: &str) -> Option<String> {
        let mut args = vec!["get", "--print-value-only", key];
        let flags = self.etcdctl_flags();
        args.extend(flags.iter().map(String::as_str));
        let output = etcdctl(&self.endpoints.join(","), &args);
        assert!(output.status.success(), "etcdctl get {key}: {output:?}");
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }

    /// The VM etcd's leader key of the event names now, if any.
    pub fn leader_in_etcd(&self) -> Option<String> {
        self.value(&self.event_key("leader"))
    }

    /// Every VM that led the event, in order, from etcd's history of its leader key (each
    /// one that created it: a campaign creates the key only where it does not exist).
    pub fn leaders_in_etcd(&self) -> Vec<String> {
        let key = self.event_key("leader");
        key_history(&self.endpoints.join(","), &self.etcdctl_flags(), &key, WAIT)
            .into_iter()
            .filter_map(|change| match change {
                KeyChange::Put { value, version, .. } => Some((value, version)),
                KeyChange::Delete { .. } => None,
            })
            .inspect(|(value, version)| {
                assert_eq!(
                    *version,
                    1,
                    "{key} rewritten (to {value}) instead of created by a campaign\n{}",
                    self.describe()
                )
            })
            .map(|(value, _)| value)
            .collect()
    }

    /// `key`'s revisions in etcd now (None: no such key).
    pub fn revisions(&self, key: &str) -> Option<KeyRevisions> {
        key_revisions(&self.endpoints.join(","), &self.etcdctl_flags(), key).1
    }

    /// Makes vm-c's probe approve from its next call on ([`Setup::hold_vm_c`]): its manifest
    /// rewritten, the daemon reloads it (docs/plugin-directory.md: the next call uses it).
    pub fn release_vm_c(&self) {
        let manifest = self.dir.path().join("vm-c/plugins/probe.toml");
        std::fs::write(&manifest, ProbePlugin::new("probe", "approve").manifest())
            .expect("rewrite vm-c's probe manifest");
    }

    /// Waits until the simulator received `polls` more polls (GETs of the scheduled events)
    /// from each VM of the set that still runs, after `after_ms`: each daemon went round its
    /// loop that many times since, with whatever it knew at `after_ms`.
    pub fn wait_for_polls_after(&self, after_ms: u64, polls: usize, vms: &[&str]) {
        wait_until(
            WAIT,
            &format!("{polls} polls from each of {vms:?} at the simulator"),
            || {
                let state = self.simulator.state();
                vms.iter().all(|vm| {
                    state
                        .requests
                        .iter()
                        .filter(|request| {
                            request.vm == *vm
                                && request.method == "GET"
                                && request.path.contains("scheduledevents")
                                && request.at_unix_ms > after_ms
                        })
                        .count()
                        >= polls
                })
            },
            || self.describe(),
        );
    }
}

/// The scenario: one Platform Reboot naming the three VMs, appearing 2 s in, `notice` ahead.
pub fn scenario_text(notice: &str) -> String {
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

/// How many approval POSTs the simulator received.
pub fn approval_posts(state: &StateSnapshot) -> usize {
    state
        .requests
        .iter()
        .filter(|request| request.method == "POST" && request.path.contains("scheduledevents"))
        .count()
}

/// Holds the one-test-at-a-time lock of the calling test binary.
pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Set {
    /// `vm`'s coordination status, as its `/status` shows it.
    pub fn coordination(&self, vm: &str) -> CoordinationStatus {
        let admin = self.daemon(vm).admin_address(WAIT);
        let body = http_get(&admin, "/status").unwrap_or_else(|error| panic!("/status: {error}"));
        let status: StatusSnapshot = serde_json::from_str(&body)
            .unwrap_or_else(|error| panic!("bad /status ({error}): {body}"));
        status.coordination.expect("a coordination section")
    }

    /// `vm`'s `/metrics` text.
    pub fn metrics(&self, vm: &str) -> String {
        let admin = self.daemon(vm).admin_address(WAIT);
        http_get(&admin, "/metrics").unwrap_or_else(|error| panic!("/metrics: {error}"))
    }

    /// How many times `vm` logged that it falls back (etcd unreachable, or no quorum).
    pub fn fallbacks_logged(&self, vm: &str) -> usize {
        self.daemon(vm)
            .lines()
            .into_iter()
            .filter(|line| {
                line.message().starts_with(UNREACHABLE_PREFIX)
                    || line.message() == COORDINATION_NO_QUORUM
            })
            .count()
    }

    /// Waits until both fast VMs recorded ready and one of them leads; the leader.
    pub fn wait_for_fast_vms_ready_and_a_leader(&self) -> String {
        wait_until(
            WAIT,
            "vm-a and vm-b to record ready",
            || {
                ["vm-a", "vm-b"]
                    .iter()
                    .all(|vm| self.first_line(vm, COORDINATION_READY).is_some())
            },
            || self.describe(),
        );
        let leader = self.wait_for_one_leader();
        assert!(
            self.prepared_at("vm-c").is_none(),
            "vm-c must still be preparing\n{}",
            self.describe()
        );
        leader
    }

    /// Checks the approval came once, from the leader, after vm-c's plugins approved.
    pub fn assert_approved_once_after_vm_c(&self) -> ApprovalRecord {
        let approval = self.the_one_approval(&VMS);
        assert!(approval.accepted);
        let slowest_prepared = self.prepared_at("vm-c").unwrap_or_else(|| {
            panic!(
                "approved before vm-c's plugins approved\n{}",
                self.describe()
            )
        });
        assert!(
            approval.at_unix_ms >= slowest_prepared,
            "approved at {} before vm-c's plugins approved at {slowest_prepared}\n{}",
            approval.at_unix_ms,
            self.describe()
        );
        // One VM led: the one that approved. It may have campaigned more than once, when its
        // lease expired while etcd was out of reach (the key vanished with the lease, and its
        // next campaign created it again): the quorum-loss test saw ["vm-b", "vm-b"].
        let mut leaders = self.leaders_in_etcd();
        leaders.dedup();
        assert_eq!(
            leaders,
            std::slice::from_ref(&approval.vm),
            "one leader, the VM that approved, as etcd's history of the leader key says\n{}",
            self.describe()
        );
        approval
    }

    /// Checks that no daemon fell back: each talks to a member other than `dead`, connected.
    pub fn assert_never_fell_back(&self, dead: &str) {
        for vm in VMS {
            let status = self.coordination(vm);
            assert_eq!(status.connection, Connection::Connected, "{vm}: {status:?}");
            assert!(!status.fallback, "{vm}: {status:?}");
            assert_ne!(status.endpoint.as_deref(), Some(dead), "{vm}: {status:?}");
            assert_eq!(
                self.fallbacks_logged(vm),
                0,
                "{vm} fell back\n{}",
                self.describe()
            );
        }
    }
}

impl Set {
    /// The test's own etcd (these tests do not use the shared cluster).
    pub fn own_etcd(&self) -> &Etcd {
        self.etcd.as_ref().expect("an etcd of its own")
    }

    /// `{prefix}/vms/{vm}/events/{id}/ready`: the NotBefore (Unix ms) `vm` recorded ready for.
    pub fn ready_record(&self, vm: &str) -> Option<u64> {
        let key = self.vm_event_key(vm, "ready");
        self.value(&key).map(|value| {
            value
                .parse()
                .unwrap_or_else(|error| panic!("{key} = {value:?}: {error}"))
        })
    }

    /// When the simulator recorded `transition` of the set's event (Unix ms), if it did.
    pub fn transition_ms(&self, state: &StateSnapshot, transition: Transition) -> Option<u64> {
        state
            .history
            .iter()
            .find(|record| record.event_id == self.event_id && record.transition == transition)
            .map(|record| record.at_unix_ms)
    }
}
