//! `bench-https`: what TLS costs one `http-send` — a request to a local HTTPS server against
//! the same request over plain http, cold (first call of a process) and warm, in one run.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_bench::{percentile, ratio, row, sorted};
use forewarn_manifest::Capabilities;
use forewarn_manifest::capabilities::http_ca_file::ca_certificates;
use forewarn_runtime::HttpClient;
use forewarn_runtime::wit::latest::{HostError, HttpRequest, HttpResponse};
use forewarn_test_support::https_server::{AnsweringServer, tls_acceptor};
use forewarn_test_support::pki::Pki;

const WARM_UP_CALLS: usize = 50;
const WARM_CALLS: usize = 1000;
const COLD_PROCESSES: usize = 10;
const DEADLINE: Duration = Duration::from_secs(10);
const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";

/// The two servers and the grants that reach them.
struct Setup {
    _pki: Pki,
    https: AnsweringServer,
    http: AnsweringServer,
    grants: Capabilities,
}

fn main() -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the tokio runtime")?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, scheme] = args.as_slice()
        && flag == "--cold-once"
    {
        return tokio.block_on(cold_once(scheme));
    }
    println!("# forewarn http-send over TLS\n");
    measure_cold()?;
    tokio.block_on(measure_warm())
}

async fn setup() -> anyhow::Result<Setup> {
    let pki = Pki::generate();
    let https = AnsweringServer::start(Some(tls_acceptor(&pki, "server")), ANSWER.into()).await;
    let http = AnsweringServer::start(None, ANSWER.into()).await;
    let pem = std::fs::read(pki.file("ca.pem")).context("could not read the test CA")?;
    let grants = Capabilities {
        http: vec![https.address.to_string(), http.address.to_string()],
        http_roots: ca_certificates(&pem).map_err(anyhow::Error::msg)?,
        ..Capabilities::default()
    };
    Ok(Setup {
        _pki: pki,
        https,
        http,
        grants,
    })
}

/// One GET of `scheme://address/`, timed, as `http-send` runs it for plugin `bench`.
async fn timed_call(client: &HttpClient, setup: &Setup, scheme: &str) -> anyhow::Result<Duration> {
    let server = if scheme == "https" {
        &setup.https
    } else {
        &setup.http
    };
    let request = HttpRequest {
        method: "GET".into(),
        url: format!("{scheme}://{}/", server.address),
        headers: vec![],
        body: vec![],
    };
    let started = Instant::now();
    let result = client
        .send("bench", &setup.grants, request, started + DEADLINE)
        .await;
    let elapsed = started.elapsed();
    check(result, scheme)?;
    Ok(elapsed)
}

fn check(result: Result<HttpResponse, HostError>, scheme: &str) -> anyhow::Result<()> {
    match result {
        Ok(response) if response.status == 200 && response.body == b"ok" => Ok(()),
        other => bail!("the {scheme} call did not answer 200 ok: {other:?}"),
    }
}

/// In a fresh process: the first call of `scheme` (for https: store load + configuration +
/// handshake + request), then loading the system's CA store again, alone. Prints both (ns)
/// and the store's size.
async fn cold_once(scheme: &str) -> anyhow::Result<()> {
    let setup = setup().await?;
    let first = timed_call(&HttpClient::default(), &setup, scheme).await?;
    let started = Instant::now();
    let native = rustls_native_certs::load_native_certs();
    let store_load = started.elapsed();
    let (first, store_load) = (first.as_nanos(), store_load.as_nanos());
    println!("{first} {store_load} {}", native.certs.len());
    Ok(())
}

/// The figures `--cold-once SCHEME` printed in `COLD_PROCESSES` fresh processes: the first
/// calls, the store loads, and the store's size.
fn cold_runs(scheme: &str) -> anyhow::Result<(Vec<Duration>, Vec<Duration>, String)> {
    let program = std::env::current_exe().context("cannot find this program")?;
    let (mut first, mut store, mut size) = (Vec::new(), Vec::new(), String::new());
    for _ in 0..COLD_PROCESSES {
        let output = Command::new(&program)
            .args(["--cold-once", scheme])
            .output()?;
        if !output.status.success() {
            bail!(
                "--cold-once failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let line = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let fields: Vec<&str> = line.split(' ').collect();
        let [call, load, certificates] = fields.as_slice() else {
            bail!("--cold-once printed `{line}`");
        };
        first.push(Duration::from_nanos(call.parse()?));
        store.push(Duration::from_nanos(load.parse()?));
        size = (*certificates).to_owned();
    }
    Ok((sorted(first), sorted(store), size))
}

/// The first call of a process, https and http, each in `COLD_PROCESSES` fresh processes.
fn measure_cold() -> anyhow::Result<()> {
    let (https, store, size) = cold_runs("https")?;
    let (http, _, _) = cold_runs("http")?;
    println!("## Cold: the first call of a process ({COLD_PROCESSES} processes each)\n");
    println!("| what | median | p99 | max |");
    println!("|---|---:|---:|---:|");
    println!("{}", row("first http:// call (baseline)", &http));
    let label = "first https:// call (CA store + config + handshake)";
    println!("{}", row(label, &https));
    println!("{}", row("loading the system's CA store alone", &store));
    println!("\nThe system's CA store holds {size} certificates.");
    println!(
        "https / http, first call: median {:.1}×\n",
        ratio(percentile(&https, 50), percentile(&http, 50))
    );
    Ok(())
}

/// `WARM_CALLS` calls of each kind, interleaved, each on a new connection (plugins' requests
/// share no connection), after `WARM_UP_CALLS` of each: plain http and https through one
/// client (as the daemon has: TLS sessions may resume), and https through a new client per call
/// (a full handshake, and the TLS configuration built again).
async fn measure_warm() -> anyhow::Result<()> {
    let setup = setup().await?;
    let client = HttpClient::default();
    for _ in 0..WARM_UP_CALLS {
        timed_call(&client, &setup, "https").await?;
        timed_call(&client, &setup, "http").await?;
        timed_call(&HttpClient::default(), &setup, "https").await?;
    }
    let (mut https, mut http, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..WARM_CALLS {
        https.push(timed_call(&client, &setup, "https").await?);
        http.push(timed_call(&client, &setup, "http").await?);
        fresh.push(timed_call(&HttpClient::default(), &setup, "https").await?);
    }
    let (https, http, fresh) = (sorted(https), sorted(http), sorted(fresh));
    println!(
        "## Warm: {WARM_CALLS} sequential calls each, interleaved, after {WARM_UP_CALLS} of each\n"
    );
    println!("| request (each on a new connection) | median | p99 | max |");
    println!("|---|---:|---:|---:|");
    println!("{}", row("http:// (baseline)", &http));
    let label = "https://, the daemon's one client (sessions may resume)";
    println!("{}", row(label, &https));
    let label = "https://, a new client per call (full handshake)";
    println!("{}", row(label, &fresh));
    println!();
    for (label, times) in [("resumed", &https), ("full handshake", &fresh)] {
        println!(
            "https ({label}) / http: median {:.1}×, p99 {:.1}×",
            ratio(percentile(times, 50), percentile(&http, 50)),
            ratio(percentile(times, 99), percentile(&http, 99))
        );
    }
    Ok(())
}
