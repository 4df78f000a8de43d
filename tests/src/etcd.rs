//! Real etcd for the coordination tests, on loopback with its data in a temp dir: one member
//! ([`Etcd`], over TLS with client certificates when given a [`Pki`]) or a cluster of members
//! started by static bootstrap ([`EtcdCluster`]), whose members a test kills and restarts with
//! their data. [`shared_cluster`] starts one cluster per test binary, stopped when it exits.
//!
//! etcd and etcdctl come from Debian's `etcd-server` and `etcd-client` (tests/run.sh
//! installs them).
//!
//! [`coordinated_set`]: three daemons, a simulator and an etcd, as the coordination tests
//! (`e2e_coordination`, `e2e_coordination_trust`) run them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::Duration;

use tempfile::TempDir;

use crate::harness::{ChildGuard, free_loopback_address, http_get, wait_for};
use crate::pki::{Pki, find_on_path};

pub mod coordinated_set;

/// How long a member may take to report healthy.
const HEALTHY_WITHIN: Duration = Duration::from_secs(60);

fn etcd_binary() -> PathBuf {
    find_on_path("etcd").unwrap_or_else(|| {
        panic!(
            "etcd is not installed: the coordination tests run a real etcd. Install it with \
             `apt-get install -y etcd-server` (Debian/Ubuntu) so that `etcd` is on PATH"
        )
    })
}

/// Runs `etcdctl` (API v3) against `endpoints` (comma-separated URLs).
pub fn etcdctl(endpoints: &str, args: &[&str]) -> Output {
    let binary = find_on_path("etcdctl").unwrap_or_else(|| {
        panic!(
            "etcdctl is not installed: the coordination tests set etcd up and read it with it. \
             Install it with `apt-get install -y etcd-client`"
        )
    });
    Command::new(binary)
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run etcdctl: {error}"))
}

/// One etcd member: its addresses, data and log, and its process while it runs.
struct Member {
    name: String,
    /// `127.0.0.1:PORT` of the client URL.
    client: String,
    /// `http://127.0.0.1:PORT`, the peer URL.
    peer: String,
    /// `127.0.0.1:PORT` serving `/health` over plain HTTP (the client port wants a client
    /// certificate under TLS).
    health: String,
    data_dir: PathBuf,
    log: PathBuf,
    /// `name=peer,…`: every member of the cluster.
    initial_cluster: String,
    /// server.pem, server.key and ca.pem, for TLS with client certificates.
    tls: Option<[String; 3]>,
    /// Further etcd flags (e.g. `--auth-token-ttl=1`).
    extra_args: Vec<String>,
    process: Option<ChildGuard>,
}

impl Member {
    fn new(dir: &Path, name: &str, tls: Option<&Pki>) -> Member {
        Member {
            name: name.to_owned(),
            client: free_loopback_address(),
            peer: format!("http://{}", free_loopback_address()),
            health: free_loopback_address(),
            data_dir: dir.join(format!("{name}.data")),
            log: dir.join(format!("{name}.log")),
            initial_cluster: String::new(),
            tls: tls.map(|pki| {
                [
                    pki.file("server.pem"),
                    pki.file("server.key"),
                    pki.file("ca.pem"),
                ]
            }),
            extra_args: Vec::new(),
            process: None,
        }
    }

    fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.client)
    }

    /// Starts the member; with data from an earlier run it rejoins as itself.
    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("etcd log");
        let mut command = Command::new(etcd_binary());
        if let Some([cert, key, ca]) = &self.tls {
            command
                .arg(format!("--cert-file={cert}"))
                .arg(format!("--key-file={key}"))
                .arg(format!("--trusted-ca-file={ca}"))
                .arg("--client-cert-auth");
        }
        let endpoint = self.endpoint();
        let child = command
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.data_dir.display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-metrics-urls=http://{}", self.health))
            .arg(format!("--listen-peer-urls={}", self.peer))
            .arg(format!("--initial-advertise-peer-urls={}", self.peer))
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .arg("--initial-cluster-state=new")
            .arg("--initial-cluster-token=forewarn-test")
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start etcd: {error}"));
        self.process = Some(ChildGuard::new(child));
    }

    fn healthy(&self) -> Result<(), String> {
        let body = http_get(&self.health, "/health")?;
        if body.contains("\"health\":\"true\"") {
            Ok(())
        } else {
            Err(format!("{}: {body}", self.name))
        }
    }

    fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Panics, with the log's end, when the member's process has ended by itself.
    fn assert_still_running(&mut self) {
        let exited = self.process.as_mut().is_some_and(ChildGuard::has_exited);
        assert!(
            !exited,
            "etcd member {} ended by itself (client {}, peer {}); its log ends:\n{}",
            self.name,
            self.client,
            self.peer,
            self.log_tail()
        );
    }

    fn running(&self) -> bool {
        self.process.is_some()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
}

/// A single etcd member on free loopback ports.
pub struct Etcd {
    member: Member,
    _dir: TempDir,
}

impl Etcd {
    /// Starts it (over TLS with client certificates from `pki`) and waits until healthy.
    pub fn start(pki: Option<&Pki>) -> Etcd {
        Etcd::start_with_flags(pki, &[])
    }

    /// [`Etcd::start`] with further etcd flags, e.g. `["--logger=zap", "--auth-token-ttl=1"]`.
    pub fn start_with_flags(pki: Option<&Pki>, flags: &[&str]) -> Etcd {
        let dir = TempDir::new().expect("temp dir");
        let mut member = Member::new(dir.path(), "forewarn-test", pki);
        member.extra_args = flags.iter().map(|flag| (*flag).to_owned()).collect();
        member.initial_cluster = format!("{}={}", member.name, member.peer);
        member.spawn();
        wait_for(HEALTHY_WITHIN, "etcd to report healthy", || {
            member.assert_still_running();
            member.healthy()
        });
        Etcd { member, _dir: dir }
    }

    /// The client URL.
    pub fn endpoint(&self) -> String {
        self.member.endpoint()
    }

    /// Runs `etcdctl` against it (plain HTTP only).
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        etcdctl(&self.endpoint(), args)
    }

    /// Kills it (SIGKILL).
    pub fn stop(&mut self) {
        self.member.kill();
    }

    /// The value of `key`, or None when etcd has no such key.
    pub fn value(&self, key: &str) -> Option<String> {
        let output = self.etcdctl(&["get", "--print-value-only", key]);
        assert!(output.status.success(), "etcdctl get {key}: {output:?}");
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }

    /// Sends `signal` (`STOP`, `CONT`) to the etcd process.
    pub fn signal(&self, signal: &str) {
        let process = self.member.process.as_ref().expect("etcd is running");
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(process.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} etcd");
    }
}

/// A cluster of plain-HTTP members on loopback, bootstrapped statically.
pub struct EtcdCluster {
    members: Vec<Member>,
    _dir: TempDir,
}

impl EtcdCluster {
    /// Starts `size` members and waits until each reports healthy (a leader is elected).
    pub fn start(size: usize) -> EtcdCluster {
        let dir = TempDir::new().expect("temp dir");
        let mut members: Vec<Member> = (1..=size)
            .map(|n| Member::new(dir.path(), &format!("member-{n}"), None))
            .collect();
        let initial_cluster = members
            .iter()
            .map(|member| format!("{}={}", member.name, member.peer))
            .collect::<Vec<_>>()
            .join(",");
        for member in &mut members {
            member.initial_cluster = initial_cluster.clone();
            member.spawn();
        }
        let mut cluster = EtcdCluster { members, _dir: dir };
        cluster.wait_healthy();
        cluster
    }

    /// The client URL of member `index`.
    pub fn endpoint(&self, index: usize) -> String {
        self.members[index].endpoint()
    }

    /// Kills member `index` (SIGKILL); its data stays.
    pub fn kill(&mut self, index: usize) {
        self.members[index].kill();
    }

    /// Starts member `index` again with its data (it rejoins as itself); returns at once.
    pub fn restart(&mut self, index: usize) {
        assert!(!self.members[index].running(), "member {index} still runs");
        self.members[index].spawn();
    }

    /// Waits until every running member reports healthy (it has a leader). A member whose
    /// process has ended fails the wait at once, with its log's end (it names why: a port
    /// taken, a data dir it cannot use).
    pub fn wait_healthy(&mut self) {
        wait_for(
            HEALTHY_WITHIN,
            "every running etcd member to report healthy",
            || {
                for member in self.members.iter_mut().filter(|member| member.running()) {
                    member.assert_still_running();
                    member
                        .healthy()
                        .map_err(|error| format!("{error}\n{}", member.log_tail()))?;
                }
                Ok(())
            },
        );
    }

    /// Restarts every member that is down, with its data, and waits until all are healthy.
    pub fn heal(&mut self) {
        for index in 0..self.members.len() {
            if !self.members[index].running() {
                self.restart(index);
            }
        }
        self.wait_healthy();
    }

    /// The index of the member that leads the cluster, as the running members say.
    pub fn leader(&self) -> usize {
        let running: Vec<String> = self
            .members
            .iter()
            .filter(|member| member.running())
            .map(Member::endpoint)
            .collect();
        let output = etcdctl(&running.join(","), &["endpoint", "status", "-w", "json"]);
        assert!(
            output.status.success(),
            "etcdctl endpoint status: {output:?}"
        );
        let statuses: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("etcdctl's JSON");
        let statuses = statuses.as_array().cloned().unwrap_or_default();
        let leader_of = |status: &serde_json::Value| status["Status"]["leader"].as_u64();
        let member_of =
            |status: &serde_json::Value| status["Status"]["header"]["member_id"].as_u64();
        let leader = statuses
            .iter()
            .find_map(leader_of)
            .expect("a member that knows the leader");
        let endpoint = statuses
            .iter()
            .find(|status| member_of(status) == Some(leader))
            .and_then(|status| status["Endpoint"].as_str())
            .expect("the leader among the running members")
            .to_owned();
        self.members
            .iter()
            .position(|member| member.endpoint() == endpoint)
            .expect("the leader's endpoint")
    }

    /// The members' indexes, the leader first, then the others in order.
    pub fn leader_first(&self) -> Vec<usize> {
        let leader = self.leader();
        let mut order = vec![leader];
        order.extend((0..self.members.len()).filter(|&index| index != leader));
        order
    }

    /// Runs `etcdctl` against member `index` alone.
    pub fn etcdctl(&self, index: usize, args: &[&str]) -> Output {
        etcdctl(&self.endpoint(index), args)
    }

    /// Every member's client URL, comma-separated (etcdctl's `--endpoints`).
    pub fn endpoints(&self) -> String {
        let urls: Vec<String> = self.members.iter().map(Member::endpoint).collect();
        urls.join(",")
    }

    /// `127.0.0.1:PORT` where member `index` serves `/metrics` and `/health` over plain HTTP.
    pub fn metrics_address(&self, index: usize) -> &str {
        &self.members[index].health
    }

    /// The process id of member `index`, while it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.members[index].process.as_ref().map(ChildGuard::id)
    }
}

static SHARED: Mutex<Option<EtcdCluster>> = Mutex::new(None);
static STOP_AT_EXIT: Once = Once::new();

/// The three-member cluster shared by the tests of this test binary: started on first use,
/// healed (every member running, with its data) each time it is handed out, and stopped when
/// the binary exits. Holding it serialises the tests that use it.
pub fn shared_cluster() -> SharedCluster {
    let mut guard = SHARED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match guard.as_mut() {
        Some(cluster) => cluster.heal(),
        None => {
            *guard = Some(EtcdCluster::start(3));
            STOP_AT_EXIT.call_once(|| {
                // SAFETY: registers a plain function without arguments to run at exit.
                let registered = unsafe { libc::atexit(stop_shared_cluster) };
                assert_eq!(registered, 0, "atexit");
            });
        }
    }
    SharedCluster { guard }
}

/// Kills the shared cluster's members and removes their data when the test binary exits
/// (statics are never dropped).
extern "C" fn stop_shared_cluster() {
    let mut guard = match SHARED.try_lock() {
        Ok(guard) => guard,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    drop(guard.take());
}

/// The shared cluster, held: see [`shared_cluster`].
pub struct SharedCluster {
    guard: MutexGuard<'static, Option<EtcdCluster>>,
}

impl std::ops::Deref for SharedCluster {
    type Target = EtcdCluster;

    fn deref(&self) -> &EtcdCluster {
        self.guard.as_ref().expect("started by shared_cluster")
    }
}

impl std::ops::DerefMut for SharedCluster {
    fn deref_mut(&mut self) -> &mut EtcdCluster {
        self.guard.as_mut().expect("started by shared_cluster")
    }
}

impl Etcd {
    /// What etcd wrote to its log so far (JSON lines with `--logger=zap`): etcd's own record
    /// of what it did, e.g. `"msg":"deleted a simple token"` when an auth token expired.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.member.log).unwrap_or_default()
    }
}

/// The revisions of one key as etcd holds it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRevisions {
    /// The revision that created the key (a key deleted and written again has a later one).
    pub create_revision: u64,
    /// The revision of its last write.
    pub mod_revision: u64,
    /// How many times it was written since it was created.
    pub version: u64,
}

/// One change of a key, from etcd's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyChange {
    /// A write: its value, and the key's `version` after it (1: the key was created).
    Put {
        /// The value written.
        value: String,
        /// The key's version after the write.
        version: u64,
        /// The revision of the write.
        mod_revision: u64,
    },
    /// The key was deleted (or its lease ended).
    Delete {
        /// The revision of the delete.
        mod_revision: u64,
    },
}

/// etcd's current revision and `key`'s revisions (None when etcd has no such key), read with
/// `etcdctl get -w json`; `flags` are etcdctl's connection flags (`--user=…`, `--cacert=…`).
pub fn key_revisions(endpoints: &str, flags: &[String], key: &str) -> (u64, Option<KeyRevisions>) {
    let mut args: Vec<&str> = vec!["get", key, "-w", "json"];
    args.extend(flags.iter().map(String::as_str));
    let output = etcdctl(endpoints, &args);
    assert!(output.status.success(), "etcdctl get {key}: {output:?}");
    let answer: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("etcdctl get prints JSON");
    let revision = answer["header"]["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("no header revision in {answer}"));
    let kv = &answer["kvs"][0];
    let revisions = kv.is_object().then(|| KeyRevisions {
        create_revision: kv["create_revision"].as_u64().unwrap_or(0),
        mod_revision: kv["mod_revision"].as_u64().unwrap_or(0),
        version: kv["version"].as_u64().unwrap_or(0),
    });
    (revision, revisions)
}

/// Every change of `key` etcd keeps (nothing is compacted in these tests), oldest first:
/// `etcdctl watch --rev=1` replays them, up to the revision etcd had when this was called.
/// Panics after `within` without that replay.
pub fn key_history(
    endpoints: &str,
    flags: &[String],
    key: &str,
    within: Duration,
) -> Vec<KeyChange> {
    replay(endpoints, flags, key, false, within)
        .into_iter()
        .map(|(_, change)| change)
        .collect()
}

/// Every change of every key under `prefix` etcd keeps, oldest first, each with its key
/// (see [`key_history`]; a lease's expiry shows as a delete).
pub fn prefix_history(
    endpoints: &str,
    flags: &[String],
    prefix: &str,
    within: Duration,
) -> Vec<(String, KeyChange)> {
    replay(endpoints, flags, prefix, true, within)
}

fn replay(
    endpoints: &str,
    flags: &[String],
    key: &str,
    prefix: bool,
    within: Duration,
) -> Vec<(String, KeyChange)> {
    let (now, _) = key_revisions(endpoints, flags, key);
    let binary = find_on_path("etcdctl").expect("etcdctl (package etcd-client)");
    let mut child = Command::new(binary)
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoints}"))
        .args(["watch", "--rev=1", key, "-w", "json"])
        .args(prefix.then_some("--prefix"))
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run etcdctl watch: {error}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = std::time::Instant::now() + within;
    let mut changes = Vec::new();
    let mut replayed = false;
    while !replayed {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = receiver.recv_timeout(left) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "etcdctl watch --rev=1 {key} replayed no history up to revision {now} within {within:?}: {changes:?}"
            );
        };
        let Ok(answer) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        for event in answer["Events"].as_array().into_iter().flatten() {
            let kv = &event["kv"];
            let mod_revision = kv["mod_revision"].as_u64().unwrap_or(0);
            let changed = decode_base64(kv["key"].as_str().unwrap_or(""));
            changes.push((
                changed,
                match event["type"].as_u64() {
                    Some(1) => KeyChange::Delete { mod_revision },
                    _ => KeyChange::Put {
                        value: decode_base64(kv["value"].as_str().unwrap_or("")),
                        version: kv["version"].as_u64().unwrap_or(0),
                        mod_revision,
                    },
                },
            ));
        }
        replayed = answer["Header"]["revision"].as_u64().unwrap_or(0) >= now
            && answer["Events"]
                .as_array()
                .is_some_and(|events| !events.is_empty());
    }
    let _ = child.kill();
    let _ = child.wait();
    changes
}

/// Standard base64 (etcdctl's JSON carries keys and values so) to text.
fn decode_base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for symbol in text.bytes().filter(|&symbol| symbol != b'=') {
        let Some(value) = ALPHABET.iter().position(|&letter| letter == symbol) else {
            panic!("not base64: {text:?}");
        };
        buffer = (buffer << 6) | value as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
