//! checkpoint's Blob mode end to end: a Spot/Delete Preempt is approved only after the
//! checkpoint is in Azurite, and a new VM's daemon hands the same bytes back to the workload.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forewarn_host::log_messages::APPROVED_AT_IMDS;
use forewarn_test_support::azurite::{Azurite, identity_token};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, Simulator, accepted_approvals, install_bundled_plugin, read_request,
    wait_for,
};
use forewarn_test_support::https::HttpsClient;
use forewarn_test_support::pki::Pki;
use hyper::{Method, StatusCode};

/// A Preempt of vm-a (a Spot VM with the Delete policy, the simulator's default for a
/// scenario with a Preempt) 2 s in, with Azure's 30 s notice; it runs long after approval,
/// as an evicted VM does not come back.
const PREEMPT_SCENARIO: &str = r#"
name = "checkpoint-blob-preempt"
end_after = "1s"

[[events]]
type = "Preempt"
appear_at = "2s"
notice = "30s"
runs_for = "10m"
"#;

/// The checkpoint's size: more than one TLS record and HTTP read, well under the limit.
const CHECKPOINT_BYTES: usize = 200 * 1024;

/// How long one step of the test may take.
const STEP: Duration = Duration::from_secs(60);

/// `len` bytes from a xorshift generator: no runs or text for a bug to hide in.
fn pseudo_random_bytes(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[3]
        })
        .collect()
}

/// The workload: GET /checkpoint-data answers the checkpoint's bytes; PUT /restore-data is
/// recorded (bytes) and answered 200.
struct Workload {
    address: String,
    restored: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Workload {
    fn start(checkpoint: Vec<u8>) -> Workload {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the workload");
        let address = listener.local_addr().expect("its address").to_string();
        let restored = Arc::new(Mutex::new(Vec::new()));
        let record = restored.clone();
        let checkpoint = Arc::new(checkpoint);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ignored = serve(stream, &checkpoint, &record);
            }
        });
        Workload { address, restored }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    fn restored(&self) -> Vec<Vec<u8>> {
        self.restored.lock().expect("lock").clone()
    }
}

fn serve(
    stream: TcpStream,
    checkpoint: &[u8],
    restored: &Mutex<Vec<Vec<u8>>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let request = read_request(&mut BufReader::new(stream.try_clone()?))?;
    let answer: (&str, &[u8]) = match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/checkpoint-data") => ("200 OK", checkpoint),
        ("PUT", "/restore-data") => {
            restored.lock().expect("lock").push(request.body);
            ("200 OK", b"restored")
        }
        _ => ("404 Not Found", b"no such thing"),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {}\r\ncontent-length: {}\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n\r\n",
        answer.0,
        answer.1.len()
    )?;
    stream.write_all(answer.1)?;
    stream.flush()
}

/// checkpoint's manifest in Blob mode, for `workload` and the Azurite container.
fn manifest(workload: &Workload, container_url: &str, azurite_port: u16) -> String {
    format!(
        "subscribe = [\"Preempt\"]\nbudget = \"10s\"\n[config]\n\
         blob-container-url = \"{container_url}\"\n\
         checkpoint-data-url = \"{}\"\nrestore-data-url = \"{}\"\n\
         workload = \"app-1\"\nretry-seconds = 1\n\
         [capabilities]\nhttp = [\"{}\", \"127.0.0.1:{azurite_port}\"]\n\
         azure-identity = [\"https://storage.azure.com/\"]\n\
         http-ca-file = \"ca.pem\"\nhttp-response-limit = \"4MiB\"\n",
        workload.url("/checkpoint-data"),
        workload.url("/restore-data"),
        workload.address,
    )
}

/// Starts a daemon for vm-a with its state in `state_dir` (a fresh one: a new VM).
fn start_daemon(dir: &Path, state_dir: &str, simulator: &Simulator) -> Daemon {
    let config = DaemonConfig {
        state_dir: dir.join(state_dir),
        ..DaemonConfig::vm_a(dir, dir.join("plugins"), &simulator.base_url)
    };
    let path = dir.join(format!("{state_dir}.toml"));
    config.write(&path);
    Daemon::start(forewarn_binary!(), &path)
}

/// The blob's bytes, read straight from Azurite.
async fn read_blob(pki: &Pki, imds: &str, url: &str) -> Vec<u8> {
    let token = identity_token(imds, "https://storage.azure.com/");
    let date = chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    let authorization = format!("Bearer {token}");
    let headers = [
        ("x-ms-version", "2021-08-06"),
        ("x-ms-date", date.as_str()),
        ("authorization", authorization.as_str()),
    ];
    let answer = HttpsClient::trusting(pki)
        .send(Method::GET, url, &headers, &b""[..])
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    answer.body.to_vec()
}

#[test]
fn a_preempted_checkpoint_goes_to_blob_storage_and_comes_back_on_a_new_vm() {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let checkpoint = pseudo_random_bytes(CHECKPOINT_BYTES);
    let workload = Workload::start(checkpoint.clone());
    let pki = Pki::generate();
    let azurite = Azurite::start(&pki);
    let container_url = format!("{}/checkpoints", azurite.blob_endpoint());
    let blob_url = format!("{container_url}/forewarn/checkpoints/app-1/latest");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).expect("create the plugin dir");
    std::fs::copy(pki.file("ca.pem"), plugins.join("ca.pem")).expect("copy the test CA");
    install_bundled_plugin(
        &plugins,
        "checkpoint",
        Some(&manifest(&workload, &container_url, azurite.port())),
    );
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario_text(PREEMPT_SCENARIO)
        .start();

    // The VM that is evicted: its on-start finds no container (nothing to restore), its
    // Prepare uploads (creating the container) and only then approves.
    let mut first = start_daemon(dir.path(), "state-1", &simulator);
    let approval = wait_for(STEP, "the Preempt's approval at the simulator", || {
        let state = simulator.state();
        let event_id = state
            .events
            .first()
            .map(|event| event.event_id.clone())
            .unwrap_or_default();
        accepted_approvals(&state, &event_id)
            .first()
            .map(|approval| (*approval).clone())
            .ok_or_else(|| first.describe_for_failure())
    });
    let uploaded_at = first
        .lines()
        .iter()
        .find(|line| line.message().contains("uploaded to"))
        .map(|line| line.at_unix_ms)
        .unwrap_or_else(|| panic!("no upload logged: {}", first.describe_for_failure()));
    assert!(
        uploaded_at <= approval.at_unix_ms,
        "approved at {} before the upload at {uploaded_at}",
        approval.at_unix_ms
    );
    assert!(!first.lines_with_message(APPROVED_AT_IMDS).is_empty());
    let stored = runtime.block_on(read_blob(&pki, &simulator.base_url, &blob_url));
    assert!(stored == checkpoint, "the blob differs from the checkpoint");
    assert!(
        workload.restored().is_empty(),
        "nothing to restore on the first VM"
    );
    first.kill();

    // The VM that replaces it: an empty state directory (no journal), the same plugin.
    let second = start_daemon(dir.path(), "state-2", &simulator);
    let restored = wait_for(STEP, "the restore on the new VM", || {
        match workload.restored().as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(second.describe_for_failure()),
            many => panic!("{} restores: {}", many.len(), second.describe_for_failure()),
        }
    });
    assert_eq!(restored.len(), checkpoint.len());
    assert!(
        restored == checkpoint,
        "the restored bytes differ from the checkpoint"
    );
}

#[test]
fn a_local_checkpoint_on_a_spot_vm_with_the_delete_policy_is_warned_of() {
    let workload = Workload::start(Vec::new());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).expect("create the plugin dir");
    let manifest = format!(
        "subscribe = [\"Preempt\"]\n[config]\ncheckpoint-url = \"{}\"\n\
         [capabilities]\nhttp = [\"{}\"]\n",
        workload.url("/checkpoint"),
        workload.address
    );
    install_bundled_plugin(&plugins, "checkpoint", Some(&manifest));
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario_text(PREEMPT_SCENARIO)
        .start();
    let daemon = start_daemon(dir.path(), "state", &simulator);
    wait_for(STEP, "the warning that names blob-container-url", || {
        daemon
            .lines()
            .iter()
            .find(|line| line.message().contains("set `blob-container-url`"))
            .map(|_| ())
            .ok_or_else(|| daemon.describe_for_failure())
    });
}
