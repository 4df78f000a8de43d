//! checkpoint's Blob mode end to end: a Spot/Delete Preempt is approved only after the
//! checkpoint is in Azurite, and a new VM's daemon hands the same bytes back to the workload.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The checkpoint's blob in the container, for workload `app-1`.
const BLOB_NAME: &str = "forewarn/checkpoints/app-1/latest";

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

/// `DIR/plugins` with the test CA and the bundled checkpoint in Blob mode for `workload`.
fn checkpoint_plugin_dir(
    dir: &std::path::Path,
    pki: &Pki,
    workload: &Workload,
    container_url: &str,
    azurite: &Azurite,
) -> std::path::PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("create the plugin dir");
    std::fs::copy(pki.file("ca.pem"), plugins.join("ca.pem")).expect("copy the test CA");
    install_bundled_plugin(
        &plugins,
        "checkpoint",
        Some(&manifest(workload, container_url, azurite.port())),
    );
    plugins
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
    storage_get(pki, imds, url).await
}

/// The body of a GET of `url` at Azurite, with a token from the simulator's identity
/// endpoint; fails the test on anything but 200.
async fn storage_get(pki: &Pki, imds: &str, url: &str) -> Vec<u8> {
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

/// One blob's properties as Azurite lists them (List Blobs), with the times in ms since the
/// Unix epoch (Azure gives them to the second).
#[derive(Debug)]
struct BlobProperties {
    last_modified_unix_ms: u64,
    content_length: usize,
}

/// The properties of the blob `name` in the container at `container_url`, from Azurite's
/// own listing: when the storage wrote it, and how long it is.
async fn blob_properties(pki: &Pki, imds: &str, container_url: &str, name: &str) -> BlobProperties {
    let url = format!("{container_url}?restype=container&comp=list&prefix={name}");
    let listing = String::from_utf8(storage_get(pki, imds, &url).await).expect("XML is text");
    let element = |tag: &str| -> String {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let start = listing
            .find(&open)
            .unwrap_or_else(|| panic!("no <{tag}> in the listing: {listing}"))
            + open.len();
        let end = start
            + listing[start..]
                .find(&close)
                .unwrap_or_else(|| panic!("no </{tag}> in the listing: {listing}"));
        listing[start..end].to_owned()
    };
    assert_eq!(element("Name"), name, "{listing}");
    assert_eq!(
        listing.matches("<Blob>").count(),
        1,
        "one blob listed: {listing}"
    );
    let last_modified = chrono::DateTime::parse_from_rfc2822(&element("Last-Modified"))
        .unwrap_or_else(|error| panic!("Last-Modified in {listing}: {error}"));
    BlobProperties {
        last_modified_unix_ms: u64::try_from(last_modified.timestamp_millis()).expect("after 1970"),
        content_length: element("Content-Length")
            .parse()
            .unwrap_or_else(|error| panic!("Content-Length in {listing}: {error}")),
    }
}

#[test]
fn a_preempted_checkpoint_goes_to_blob_storage_and_comes_back_on_a_new_vm() {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let checkpoint = pseudo_random_bytes(CHECKPOINT_BYTES);
    let workload = Workload::start(checkpoint.clone());
    let pki = Pki::generate();
    let azurite = Azurite::start(&pki);
    let container_url = format!("{}/checkpoints", azurite.blob_endpoint());
    let blob_url = format!("{container_url}/{BLOB_NAME}");
    let dir = tempfile::tempdir().expect("a temporary directory");
    checkpoint_plugin_dir(dir.path(), &pki, &workload, &container_url, &azurite);
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
    // When the storage wrote the blob, by its own record (to the second: Azure's
    // Last-Modified has no finer grain), against when IMDS got the approval.
    let properties = runtime.block_on(blob_properties(
        &pki,
        &simulator.base_url,
        &container_url,
        BLOB_NAME,
    ));
    assert!(
        properties.last_modified_unix_ms <= approval.at_unix_ms,
        "approved at {} before the blob was written ({properties:?})",
        approval.at_unix_ms
    );
    assert_eq!(
        properties.content_length, CHECKPOINT_BYTES,
        "{properties:?}"
    );
    // Not asserted: the daemon's log line for the approval. IMDS (the simulator) records
    // the approval before the daemon has read its answer and logged it, so the line may not
    // be there yet; the accepted approval above is the proof.
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

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn managed_identity_tokens_are_never_logged_even_at_debug() {
    // The daemon at debug level runs a Blob checkpoint (its plugin asks the simulator's
    // identity endpoint for storage tokens and sends them to Azurite); no token may show in
    // what it writes: stderr (its log), stdout, or any file it keeps.
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let checkpoint = pseudo_random_bytes(CHECKPOINT_BYTES);
    let workload = Workload::start(checkpoint.clone());
    let pki = Pki::generate();
    let azurite = Azurite::start(&pki);
    let container_url = format!("{}/checkpoints", azurite.blob_endpoint());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plugins = checkpoint_plugin_dir(dir.path(), &pki, &workload, &container_url, &azurite);
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario_text(PREEMPT_SCENARIO)
        .start();
    let config = DaemonConfig {
        state_dir: dir.path().join("state"),
        ..DaemonConfig::vm_a(dir.path(), plugins.clone(), &simulator.base_url)
    };
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);
    let stdout_path = dir.path().join("stdout.log");
    // `sh` sets the log level (over the harness's `info`) and where stdout goes, then execs
    // the daemon with its arguments.
    let script = format!(
        "FOREWARN_LOG=debug exec \"$0\" \"$@\" > '{}'",
        stdout_path.display()
    );
    let mut daemon = Daemon::start_under(&["sh", "-c", &script], forewarn_binary!(), &config_path);

    wait_for(STEP, "the Preempt's approval at the simulator", || {
        let state = simulator.state();
        let event_id = state
            .events
            .first()
            .map(|event| event.event_id.clone())
            .unwrap_or_default();
        (!accepted_approvals(&state, &event_id).is_empty())
            .then_some(())
            .ok_or_else(|| daemon.describe_for_failure())
    });
    // Tokens were fetched and used: the simulator handed some out, and the blob is in
    // Azurite (which takes nothing without one).
    let handed_out = simulator.state().identity_requests().len();
    assert!(handed_out >= 1, "the daemon fetched no identity token");
    let stored = runtime.block_on(read_blob(
        &pki,
        &simulator.base_url,
        &format!("{container_url}/{BLOB_NAME}"),
    ));
    assert!(stored == checkpoint, "the blob differs from the checkpoint");
    daemon.kill();

    let lines = daemon.lines();
    assert!(
        lines
            .iter()
            .any(|line| line.text("level").eq_ignore_ascii_case("debug")),
        "the daemon did not log at debug level: {}",
        daemon.describe_for_failure()
    );
    // A token of this simulator (the one the test fetches now, and the first segment every
    // token it hands out shares: the JWT header naming its key).
    let token = identity_token(&simulator.base_url, "https://storage.azure.com/");
    let header = token.split('.').next().expect("a JWT").to_owned();
    assert!(header.len() > 20, "a JWT header: {token}");
    let needles = [format!("{header}."), token.clone()];
    let mut written: Vec<(String, Vec<u8>)> = vec![
        (
            "stderr (parsed lines)".into(),
            lines
                .iter()
                .map(|line| line.fields.to_string())
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes(),
        ),
        (
            "stderr (other lines)".into(),
            daemon.unparsed().join("\n").into_bytes(),
        ),
    ];
    for file in files_under(dir.path()) {
        let bytes = std::fs::read(&file).expect("read a file the daemon wrote");
        written.push((file.display().to_string(), bytes));
    }
    assert!(
        written.iter().any(|(name, _)| name.ends_with("stdout.log")),
        "no stdout file"
    );
    for (name, bytes) in &written {
        for needle in &needles {
            assert!(
                !contains(bytes, needle.as_bytes()),
                "an identity token is in {name} (the daemon ran at debug level, {handed_out} \
                 tokens handed out)"
            );
        }
    }
}
