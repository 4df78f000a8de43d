//! What bench-fleet reads while a fleet runs: the etcd members' `/metrics` and the first write
//! of each key under a prefix (an `etcdctl watch`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use forewarn_bench::proc_stats::{load_average, process_cpu, rss_kib};
use forewarn_test_support::etcd::EtcdCluster;
use forewarn_test_support::harness::{ChildGuard, Daemon, http_get, now_unix_ms};
use forewarn_test_support::pki::find_on_path;

use crate::{Sample, Window};

/// The counters read from one member's `/metrics`.
#[derive(Default)]
pub(crate) struct Metrics {
    pub(crate) started: BTreeMap<String, f64>,
    pub(crate) sent_bytes: f64,
    pub(crate) writes: f64,
}

/// The processes a sample reads.
pub(crate) struct Fleet<'a> {
    pub(crate) cluster: &'a EtcdCluster,
    pub(crate) daemons: &'a [Daemon],
    pub(crate) simulator_pid: u32,
    pub(crate) ticks: u64,
}

impl Fleet<'_> {
    pub(crate) fn sample(&self) -> anyhow::Result<Sample> {
        let at = Instant::now();
        let mut metrics = Vec::new();
        let mut member_cpu = Vec::new();
        for index in 0..3 {
            metrics.push(read_metrics(self.cluster.metrics_address(index))?);
            let pid = self.cluster.pid(index).context("an etcd member stopped")?;
            member_cpu.push(process_cpu(pid, self.ticks)?);
        }
        let mut daemons_cpu = Duration::ZERO;
        for daemon in self.daemons {
            daemons_cpu += process_cpu(daemon.pid(), self.ticks)
                .context("a daemon exited during the bench; its log says why")?;
        }
        Ok(Sample {
            at,
            metrics,
            member_cpu,
            daemons_cpu,
            simulator_cpu: process_cpu(self.simulator_pid, self.ticks)?,
            load: load_average()?,
        })
    }

    pub(crate) fn window(
        &self,
        start: &Sample,
        end: &Sample,
        leader: usize,
    ) -> anyhow::Result<Window> {
        let mut requests: BTreeMap<String, f64> = BTreeMap::new();
        let mut requests_per_member = Vec::new();
        let mut sent_bytes = 0.0;
        for (before, after) in start.metrics.iter().zip(&end.metrics) {
            let mut on_member = 0.0;
            for (method, count) in &after.started {
                let delta = count - before.started.get(method).copied().unwrap_or(0.0);
                *requests.entry(method.clone()).or_default() += delta;
                on_member += delta;
            }
            requests_per_member.push(on_member);
            sent_bytes += after.sent_bytes - before.sent_bytes;
        }
        let mut member_rss_kib = Vec::new();
        for index in 0..3 {
            let pid = self.cluster.pid(index).context("an etcd member stopped")?;
            member_rss_kib.push(rss_kib(pid)?);
        }
        Ok(Window {
            length: end.at - start.at,
            requests,
            requests_per_member,
            sent_bytes,
            leader_writes: end.metrics[leader].writes - start.metrics[leader].writes,
            member_cpu: end
                .member_cpu
                .iter()
                .zip(&start.member_cpu)
                .map(|(after, before)| after.saturating_sub(*before))
                .collect(),
            member_rss_kib,
            daemons_cpu: end.daemons_cpu.saturating_sub(start.daemons_cpu),
            simulator_cpu: end.simulator_cpu.saturating_sub(start.simulator_cpu),
            load: (start.load, end.load),
        })
    }
}

/// Reads a member's Prometheus text: gRPC requests started per method, bytes sent to
/// clients, and the writes its store applied.
pub(crate) fn read_metrics(address: &str) -> anyhow::Result<Metrics> {
    let text = http_get(address, "/metrics")
        .map_err(|error| anyhow::anyhow!("cannot read etcd's /metrics at {address}: {error}"))?;
    let mut metrics = Metrics::default();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        match name {
            "grpc_server_started_total" => {
                let method = label(series, "grpc_method").unwrap_or("?").to_owned();
                *metrics.started.entry(method).or_default() += value;
            }
            "etcd_network_client_grpc_sent_bytes_total" => metrics.sent_bytes += value,
            "etcd_debugging_mvcc_put_total"
            | "etcd_debugging_mvcc_delete_total"
            | "etcd_debugging_mvcc_txn_total" => metrics.writes += value,
            _ => {}
        }
    }
    Ok(metrics)
}

/// The value of `name="…"` in a series' labels.
pub(crate) fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let start = series.find(&format!("{name}=\""))? + name.len() + 2;
    let rest = &series[start..];
    Some(&rest[..rest.find('"')?])
}

/// The first time each key was written, as an `etcdctl watch` on a prefix saw it.
pub(crate) struct KeyWatch {
    _process: ChildGuard,
    first_put: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl KeyWatch {
    pub(crate) fn start(endpoints: &str, prefix: &str) -> anyhow::Result<KeyWatch> {
        let etcdctl = find_on_path("etcdctl").context("etcdctl is not installed")?;
        let mut child = Command::new(etcdctl)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoints}"))
            .args(["watch", "--prefix", prefix])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start etcdctl watch")?;
        let stdout = child.stdout.take().context("etcdctl's stdout is piped")?;
        let first_put = Arc::new(Mutex::new(BTreeMap::new()));
        let seen = first_put.clone();
        // `etcdctl watch` prints each change as three lines: PUT or DELETE, the key, the value.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            while let Some(line) = lines.next() {
                if line != "PUT" {
                    continue;
                }
                let at = now_unix_ms();
                let Some(key) = lines.next() else { break };
                let _value = lines.next();
                let mut seen = seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                seen.entry(key).or_insert(at);
            }
        });
        Ok(KeyWatch {
            _process: ChildGuard::new(child),
            first_put,
        })
    }

    pub(crate) fn first_puts(&self) -> BTreeMap<String, u64> {
        self.first_put
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
