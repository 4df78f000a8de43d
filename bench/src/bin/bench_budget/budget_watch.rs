//! What bench-budget reads while a fleet runs: every change under a prefix as an `etcdctl
//! watch -w json` sees it live (each stamped when it arrived: etcd keeps no wall time), the
//! keys etcd holds, the simulator's state, and what the fleet cost etcd and the machine
//! (etcd's request counters, the members' and the daemons' CPU).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use forewarn_bench::proc_stats::process_cpu;
use forewarn_simulator::StateSnapshot;
use forewarn_test_support::etcd::{EtcdCluster, etcdctl};
use forewarn_test_support::harness::{ChildGuard, Daemon, Simulator, http_get, now_unix_ms};
use forewarn_test_support::pki::find_on_path;

use crate::fleet_setup::wait;

/// One change of one key, as the live watch saw it.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    /// When the watch printed it (Unix ms, this machine's clock).
    pub(crate) seen_unix_ms: u64,
    /// The revision of the change.
    pub(crate) revision: u64,
    pub(crate) key: String,
    /// The value written ("" for a delete).
    pub(crate) value: String,
    pub(crate) deleted: bool,
}

/// `etcdctl watch --prefix PREFIX -w json`, read on a thread.
pub(crate) struct PrefixWatch {
    _process: ChildGuard,
    changes: Arc<Mutex<Vec<Change>>>,
    /// Lines the bench could not read (not JSON, a key not base64): counted, shown.
    problems: Arc<Mutex<Vec<String>>>,
}

impl PrefixWatch {
    /// Starts the watch on `prefix` from the revision after etcd's current one (so that the
    /// time etcdctl takes to connect loses nothing), and waits until it sees a key the bench
    /// writes under it (`prefix` + `bench-watch-ready`, written again every second until
    /// seen): once this returns, every later change arrives as it happens.
    pub(crate) fn start(endpoints: &str, prefix: &str) -> anyhow::Result<PrefixWatch> {
        let from = current_revision(endpoints, prefix)? + 1;
        let etcdctl_path = find_on_path("etcdctl").context("etcdctl is not installed")?;
        let mut child = Command::new(etcdctl_path)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoints}"))
            .args(["watch", "--prefix", prefix, "-w", "json"])
            .arg(format!("--rev={from}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start etcdctl watch")?;
        let stdout = child.stdout.take().context("etcdctl's stdout is piped")?;
        let changes = Arc::new(Mutex::new(Vec::new()));
        let problems = Arc::new(Mutex::new(Vec::new()));
        let (seen, troubles) = (changes.clone(), problems.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let at = now_unix_ms();
                match parse_watch_line(&line, at) {
                    Ok(mut parsed) => seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .append(&mut parsed),
                    Err(error) => troubles
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("{error:#}: {line}")),
                }
            }
        });
        let watch = PrefixWatch {
            _process: ChildGuard::new(child),
            changes,
            problems,
        };
        let ready = format!("{prefix}bench-watch-ready");
        let mut last_put: Option<Instant> = None;
        wait(
            Duration::from_secs(60),
            "the etcd watch to see the bench's key",
            || {
                let changes = watch.changes();
                if changes.iter().any(|change| change.key == ready) {
                    return Ok(None);
                }
                if last_put.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                    let output = etcdctl(endpoints, &["put", &ready, "1"]);
                    if !output.status.success() {
                        bail!(
                            "etcdctl put {ready}: {}",
                            String::from_utf8_lossy(&output.stderr)
                        );
                    }
                    last_put = Some(Instant::now());
                }
                Ok(Some(format!("{} changes seen", changes.len())))
            },
        )?;
        Ok(watch)
    }

    /// Every change seen so far, in the order the watch printed them (revision order).
    pub(crate) fn changes(&self) -> Vec<Change> {
        self.changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The lines that could not be read.
    pub(crate) fn problems(&self) -> Vec<String> {
        self.problems
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One line of `etcdctl watch -w json`: `{"Header":…,"Events":[{"type":1,"kv":{…}}…]}`
/// (`type` absent for a put, 1 for a delete; key and value in base64).
fn parse_watch_line(line: &str, at: u64) -> anyhow::Result<Vec<Change>> {
    let answer: serde_json::Value = serde_json::from_str(line).context("not JSON")?;
    let mut changes = Vec::new();
    for event in answer["Events"].as_array().into_iter().flatten() {
        let kv = &event["kv"];
        let deleted = event["type"].as_u64() == Some(1);
        changes.push(Change {
            seen_unix_ms: at,
            revision: kv["mod_revision"]
                .as_u64()
                .context("an event without mod_revision")?,
            key: decode_base64(kv["key"].as_str().unwrap_or("")).context("the key")?,
            value: decode_base64(kv["value"].as_str().unwrap_or("")).context("the value")?,
            deleted,
        });
    }
    Ok(changes)
}

/// Standard base64 (etcdctl's JSON carries keys and values so) to text.
pub(crate) fn decode_base64(text: &str) -> anyhow::Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for symbol in text.bytes().filter(|&symbol| symbol != b'=') {
        let value = ALPHABET
            .iter()
            .position(|&letter| letter == symbol)
            .with_context(|| format!("not base64: {text:?}"))?;
        buffer = (buffer << 6) | value as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// etcd's revision now (the header of a one-key read under `prefix`).
fn current_revision(endpoints: &str, prefix: &str) -> anyhow::Result<u64> {
    let output = etcdctl(
        endpoints,
        &[
            "get",
            prefix,
            "--prefix",
            "--keys-only",
            "--limit=1",
            "-w",
            "json",
        ],
    );
    if !output.status.success() {
        bail!(
            "etcdctl get {prefix} --prefix: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("etcdctl -w json did not print JSON")?;
    answer["header"]["revision"]
        .as_u64()
        .with_context(|| format!("no header revision in {answer}"))
}

/// The keys etcd holds under `prefix` now.
pub(crate) fn keys_under(endpoints: &str, prefix: &str) -> anyhow::Result<Vec<String>> {
    let output = etcdctl(endpoints, &["get", prefix, "--prefix", "--keys-only"]);
    if !output.status.success() {
        bail!(
            "etcdctl get {prefix} --prefix: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

/// `GET /simulator/state`, parsed.
pub(crate) fn simulator_state(simulator: &Simulator) -> anyhow::Result<StateSnapshot> {
    let body = http_get(simulator.address(), "/simulator/state")
        .map_err(|error| anyhow::anyhow!("GET /simulator/state failed: {error}"))?;
    serde_json::from_str(&body).context("cannot parse /simulator/state")
}

/// etcd's counters and the processes' CPU at one instant.
pub(crate) struct LoadSample {
    at: Instant,
    /// gRPC requests started, by method, summed over the members.
    started: BTreeMap<String, f64>,
    /// Bytes etcd sent its clients, all members.
    sent_bytes: f64,
    member_cpu: Vec<Duration>,
    daemons_cpu: Duration,
}

/// What a window between two [`LoadSample`]s cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct LoadWindow {
    pub(crate) length: Duration,
    /// gRPC requests started, by method (Range, Txn, Put, LeaseKeepAlive, …).
    pub(crate) requests: BTreeMap<String, f64>,
    pub(crate) sent_bytes: f64,
    /// CPU of each member over the window.
    pub(crate) member_cpu: Vec<Duration>,
    /// CPU of all the daemons together.
    pub(crate) daemons_cpu: Duration,
}

impl LoadSample {
    pub(crate) fn take(
        cluster: &EtcdCluster,
        daemons: &[Daemon],
        ticks: u64,
    ) -> anyhow::Result<LoadSample> {
        let at = Instant::now();
        let mut started = BTreeMap::new();
        let mut sent_bytes = 0.0;
        let mut member_cpu = Vec::new();
        for index in 0..3 {
            let address = cluster.metrics_address(index);
            let text = http_get(address, "/metrics").map_err(|error| {
                anyhow::anyhow!("cannot read etcd's /metrics at {address}: {error}")
            })?;
            read_counters(&text, &mut started, &mut sent_bytes);
            let pid = cluster.pid(index).context("an etcd member stopped")?;
            member_cpu.push(process_cpu(pid, ticks)?);
        }
        let mut daemons_cpu = Duration::ZERO;
        for daemon in daemons {
            daemons_cpu += process_cpu(daemon.pid(), ticks)
                .context("a daemon exited during the bench; its log says why")?;
        }
        Ok(LoadSample {
            at,
            started,
            sent_bytes,
            member_cpu,
            daemons_cpu,
        })
    }

    /// From `self` to `end`.
    pub(crate) fn until(&self, end: &LoadSample) -> LoadWindow {
        let requests = end
            .started
            .iter()
            .map(|(method, count)| {
                let before = self.started.get(method).copied().unwrap_or(0.0);
                (method.clone(), count - before)
            })
            .filter(|(_, count)| *count > 0.0)
            .collect();
        LoadWindow {
            length: end.at - self.at,
            requests,
            sent_bytes: end.sent_bytes - self.sent_bytes,
            member_cpu: end
                .member_cpu
                .iter()
                .zip(&self.member_cpu)
                .map(|(after, before)| after.saturating_sub(*before))
                .collect(),
            daemons_cpu: end.daemons_cpu.saturating_sub(self.daemons_cpu),
        }
    }
}

/// Adds a member's `grpc_server_started_total` (by `grpc_method`) and
/// `etcd_network_client_grpc_sent_bytes_total` from its Prometheus text.
fn read_counters(text: &str, started: &mut BTreeMap<String, f64>, sent_bytes: &mut f64) {
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        match series.split('{').next().unwrap_or(series) {
            "grpc_server_started_total" => {
                let method = series
                    .split_once("grpc_method=\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map_or("?", |(method, _)| method);
                *started.entry(method.to_owned()).or_default() += value;
            }
            "etcd_network_client_grpc_sent_bytes_total" => *sent_bytes += value,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_line_reads_as_its_puts_and_deletes() {
        // `/forewarn/vms/vm-001/slots/E1` put at revision 7, then deleted at 9.
        let line = r#"{"Header":{"revision":9},"Events":[{"kv":{"key":"L2ZvcmV3YXJuL3Ztcy92bS0wMDEvc2xvdHMvRTE=","mod_revision":7,"value":"e30="}},{"type":1,"kv":{"key":"L2ZvcmV3YXJuL3Ztcy92bS0wMDEvc2xvdHMvRTE=","mod_revision":9}}]}"#;
        let changes = parse_watch_line(line, 42).expect("a watch line");
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].key, "/forewarn/vms/vm-001/slots/E1");
        assert_eq!(changes[0].value, "{}");
        assert!(!changes[0].deleted);
        assert_eq!(changes[0].revision, 7);
        assert!(changes[1].deleted);
        assert_eq!(changes[1].revision, 9);
        assert_eq!(changes[1].seen_unix_ms, 42);
        assert!(parse_watch_line("not json", 0).is_err());
    }

    #[test]
    fn counters_are_summed_by_method() {
        let text = "# HELP x\n\
            grpc_server_started_total{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 7\n\
            grpc_server_started_total{grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 2\n\
            etcd_network_client_grpc_sent_bytes_total 1024\n";
        let (mut started, mut sent) = (BTreeMap::new(), 0.0);
        read_counters(text, &mut started, &mut sent);
        read_counters(text, &mut started, &mut sent);
        assert_eq!(started.get("Range"), Some(&14.0));
        assert_eq!(started.get("Txn"), Some(&4.0));
        assert_eq!(sent, 2048.0);
    }
}
