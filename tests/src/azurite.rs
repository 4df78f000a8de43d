//! Azurite, Microsoft's Azure Storage emulator, for tests: its Blob service over HTTPS with
//! OAuth "basic" (a bearer token's claims are checked, not its signature) on a free port.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::harness::{ChildGuard, http_get_with_headers};
use crate::pki::Pki;

/// Azurite's built-in storage account, the first path segment of every blob URL.
pub const ACCOUNT: &str = "devstoreaccount1";

/// How long Azurite may take to listen (node starting on a loaded 2-core machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A token for `resource` (e.g. `https://storage.azure.com/`) from the IMDS identity
/// endpoint at `imds_base_url` (the simulator's `http://127.0.0.1:PORT`).
pub fn identity_token(imds_base_url: &str, resource: &str) -> String {
    let address = imds_base_url.trim_start_matches("http://");
    let path = format!(
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource={}",
        resource.replace(':', "%3A").replace('/', "%2F")
    );
    let body = http_get_with_headers(address, &path, &[("Metadata", "true")])
        .unwrap_or_else(|error| panic!("no token from {imds_base_url}: {error}"));
    let answer: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|error| panic!("{error}: {body}"));
    answer["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no access_token in {body}"))
        .to_owned()
}

/// A running `azurite-blob`, killed when dropped.
pub struct Azurite {
    process: ChildGuard,
    port: u16,
    workspace: TempDir,
}

/// `tests/.tools/azurite/node_modules/.bin/azurite-blob`, where tests/install-azurite.sh
/// puts it.
pub fn azurite_binary() -> PathBuf {
    tools_dir().join("azurite/node_modules/.bin/azurite-blob")
}

fn tools_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools")
}

impl Azurite {
    /// Starts Azurite's Blob service on 127.0.0.1 with `server.pem`/`server.key` of `pki`,
    /// OAuth "basic", data in memory and no telemetry; returns once it accepts connections.
    pub fn start(pki: &Pki) -> Azurite {
        let binary = azurite_binary();
        assert!(
            binary.is_file(),
            "Azurite is not installed ({} is missing): run `bash tests/install-azurite.sh` \
             (tests/run.sh does it)",
            binary.display()
        );
        let workspace = TempDir::new().expect("temp dir for Azurite");
        let port = free_port();
        let log = |name: &str| {
            std::fs::File::create(workspace.path().join(name)).expect("Azurite's log file")
        };
        let child = Command::new(&binary)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .args([
                "--cert",
                &pki.file("server.pem"),
                "--key",
                &pki.file("server.key"),
            ])
            .args(["--oauth", "basic", "--skipApiVersionCheck", "--loose"])
            .args(["--inMemoryPersistence", "--disableTelemetry"])
            // No --location: Azurite refuses it with --inMemoryPersistence; what it still
            // writes (a debug log, if asked) lands in the working directory.
            .current_dir(workspace.path())
            .env("PATH", path_with_private_node())
            .stdin(Stdio::null())
            .stdout(log("stdout.log"))
            .stderr(log("stderr.log"))
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let mut azurite = Azurite {
            process: ChildGuard::new(child),
            port,
            workspace,
        };
        azurite.wait_until_listening();
        azurite
    }

    /// `https://127.0.0.1:PORT/devstoreaccount1`, the account's blob endpoint.
    pub fn blob_endpoint(&self) -> String {
        format!("https://127.0.0.1:{}/{ACCOUNT}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// What Azurite has printed so far (stdout, then stderr), for failure messages.
    pub fn output(&self) -> String {
        let read = |name: &str| {
            std::fs::read_to_string(self.workspace.path().join(name)).unwrap_or_default()
        };
        format!("{}{}", read("stdout.log"), read("stderr.log"))
    }

    fn wait_until_listening(&mut self) {
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            assert!(
                !self.process.has_exited(),
                "Azurite exited before listening on {address}:\n{}",
                self.output()
            );
            assert!(
                Instant::now() < deadline,
                "Azurite did not listen on {address} within {START_TIMEOUT:?}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A port nothing listens on now (the OS's pick for a listener dropped at once).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port on 127.0.0.1")
}

/// PATH with tests/.tools/node/bin first when install-language-toolchains.sh fetched a
/// Node.js there (azurite-blob runs under `#!/usr/bin/env node`).
fn path_with_private_node() -> std::ffi::OsString {
    let private = tools_dir().join("node/bin");
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&inherited).collect();
    if private.join("node").is_file() {
        dirs.insert(0, private);
    }
    std::env::join_paths(dirs).unwrap_or(inherited)
}
