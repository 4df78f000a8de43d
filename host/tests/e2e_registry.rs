//! `forewarn plugin push` and `plugin install` against a real OCI registry — Debian's
//! `docker-registry` (the CNCF distribution server), started by the test on loopback with a
//! config of its own, over HTTPS with a test CA and with basic auth (htpasswd, bcrypt) — and
//! against a client nobody here wrote, `wkg` (bytecodealliance's wasm-pkg-tools).
//! tests/install-registry.sh installs the first two, tests/install-cargo-tools.sh wkg.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use forewarn_test_support::harness::{
    ChildGuard, Daemon, DaemonConfig, Simulator, free_loopback_address, http_get, wait_for,
};
use forewarn_test_support::pki::{Pki, find_on_path, self_signed};
use forewarn_test_support::{forewarn_binary, guests};

const USER: &str = "author";
const PASSWORD: &str = "s3cret-test-password";
/// Generous: debug builds on a busy 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(30);

fn require(program: &str) -> PathBuf {
    find_on_path(program).unwrap_or_else(|| {
        panic!(
            "{program} is not installed: run `bash tests/install-registry.sh` and `bash \
             tests/install-cargo-tools.sh` (tests/run.sh does)"
        )
    })
}

/// A `docker-registry` on a free loopback port, HTTPS with the test CA, basic auth.
struct Registry {
    _process: ChildGuard,
    address: String,
    pki: Pki,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        Registry::start_with(None)
    }

    /// With `certificate` (PEM files of a certificate and its key) in place of the one the
    /// test CA issues.
    fn start_with(certificate: Option<(&str, &str)>) -> Registry {
        let binary = require("docker-registry");
        let htpasswd = require("htpasswd");
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate();
        let line = Command::new(htpasswd)
            .args(["-Bbn", USER, PASSWORD])
            .output()
            .unwrap();
        assert!(line.status.success(), "htpasswd: {line:?}");
        std::fs::write(dir.path().join("htpasswd"), &line.stdout).unwrap();
        let address = free_loopback_address();
        // The test's own config: loopback only (the packaged one listens on every interface).
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {root}\nhttp:\n  addr: {address}\n  tls:\n    certificate: {cert}\n    key: {key}\nauth:\n  htpasswd:\n    realm: forewarn-test\n    path: {htpasswd}\n",
            root = dir.path().join("storage").display(),
            cert = certificate.map_or(pki.file("server.pem"), |(cert, _)| cert.to_owned()),
            key = certificate.map_or(pki.file("server.key"), |(_, key)| key.to_owned()),
            htpasswd = dir.path().join("htpasswd").display(),
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let process = ChildGuard::new(child);
        wait_for(TIMEOUT, "docker-registry to listen", || {
            std::net::TcpStream::connect(&address)
                .map(|_| ())
                .map_err(|error| error.to_string())
        });
        Registry {
            _process: process,
            address,
            pki,
            _dir: dir,
        }
    }

    fn reference(&self, path: &str) -> String {
        format!("{}/{path}", self.address)
    }
}

/// Runs `forewarn ARGS` with the registry's credentials; the output, asserted successful
/// when `expect_success`.
fn forewarn(args: &[&str], expect_success: bool) -> Output {
    let output = Command::new(forewarn_binary!())
        .args(args)
        .env("FOREWARN_REGISTRY_USER", USER)
        .env("FOREWARN_REGISTRY_PASSWORD", PASSWORD)
        .env_remove("DOCKER_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run forewarn");
    if expect_success {
        assert!(
            output.status.success(),
            "forewarn {args:?}: {}",
            describe(&output)
        );
    }
    output
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `wkg ARGS` against the registry (trusting the test CA through SSL_CERT_FILE).
fn wkg(registry: &Registry, args: &[&str]) -> Output {
    let output = Command::new(require("wkg"))
        .args(args)
        .env("SSL_CERT_FILE", registry.pki.file("ca.pem"))
        .env("WKG_OCI_USERNAME", USER)
        .env("WKG_OCI_PASSWORD", PASSWORD)
        .env("HOME", registry._dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run wkg");
    assert!(
        output.status.success(),
        "wkg {args:?}: {}",
        describe(&output)
    );
    output
}

fn keypair(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let status = Command::new(require("ssh-keygen"))
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            &format!("{name}@example.com"),
            "-f",
        ])
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    (
        path.clone(),
        std::fs::read_to_string(path.with_extension("pub"))
            .unwrap()
            .trim()
            .to_owned(),
    )
}

/// The author pushes a signed plugin through the registry; the operator installs it into a
/// running daemon's plugin directory, and the daemon serves it with its digest and signer.
#[test]
fn a_signed_plugin_goes_from_push_through_a_real_registry_into_a_running_daemon() {
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keypair(dir.path(), "alice");
    let author = dir.path().join("author");
    std::fs::create_dir(&author).unwrap();
    std::fs::copy(guests::PROBE, author.join("probe.wasm")).unwrap();
    std::fs::write(
        author.join("probe.toml"),
        "budget = \"5s\"\n[config]\nmode = \"approve\"\n",
    )
    .unwrap();
    let reference = registry.reference("acme/probe:1.0.0");
    let ca = registry.pki.file("ca.pem");
    let wasm = author.join("probe.wasm").display().to_string();
    let key_arg = key.display().to_string();
    let pushed = forewarn(
        &[
            "plugin",
            "push",
            &wasm,
            &reference,
            "--sign",
            &key_arg,
            "--ca-file",
            &ca,
        ],
        true,
    );
    let pushed = String::from_utf8_lossy(&pushed.stdout).into_owned();
    assert!(pushed.contains("signed:  yes"), "{pushed}");

    let simulator = Simulator::builder(forewarn_binary!())
        .scenario("idle")
        .start();
    let plugin_dir = dir.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    let mut config = DaemonConfig::vm_a(dir.path(), plugin_dir.clone(), &simulator.base_url);
    config.extra = format!("[plugins]\ntrusted-keys = [\"{public}\"]\n");
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);
    let daemon = Daemon::start(forewarn_binary!(), &config_path);
    let admin = daemon.admin_address(TIMEOUT);
    let config_arg = config_path.display().to_string();

    let installed = forewarn(
        &[
            "plugin",
            "install",
            &reference,
            "--config",
            &config_arg,
            "--yes",
            "--ca-file",
            &ca,
        ],
        true,
    );
    let installed_at = Instant::now();
    let told = String::from_utf8_lossy(&installed.stderr).into_owned();
    assert!(told.contains("signed by alice@example.com"), "{told}");
    assert!(
        told.contains("actions (run as the daemon's user): none"),
        "{told}"
    );
    let status = wait_for(
        TIMEOUT,
        "the installed plugin in /status with its signer",
        || {
            let body = http_get(&admin, "/status")?;
            let json: serde_json::Value =
                serde_json::from_str(&body).map_err(|error| error.to_string())?;
            let plugin = json["plugins"]
                .as_array()
                .and_then(|plugins| plugins.iter().find(|plugin| plugin["name"] == "probe"))
                .ok_or_else(|| format!("no probe yet: {body}"))?;
            match plugin["provenance"]["verified"].as_bool() {
                Some(true) => Ok(plugin.clone()),
                _ => Err(format!("probe without verified provenance: {plugin}")),
            }
        },
    );
    let live_after = installed_at.elapsed();
    println!(
        "the installed plugin was live in /status {} ms after `plugin install` returned",
        live_after.as_millis()
    );
    assert_eq!(
        status["provenance"]["signer"]
            .as_str()
            .map(|s| s.starts_with("alice@example.com (SHA256:")),
        Some(true),
        "{status}"
    );
    let digest = status["provenance"]["digest"].as_str().unwrap().to_owned();
    assert!(pushed.contains(&digest), "{pushed} / {digest}");
    let table = forewarn(&["status", "--admin", &admin], true);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        table.contains(&format!("probe installed from {reference}@{digest}")),
        "{table}"
    );
    let listed = forewarn(&["plugin", "list", "--config", &config_arg], true);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains(&digest) && listed.contains("alice@example.com"),
        "{listed}"
    );
    // Issue 45 (4): the manifest widened by hand after install (readiness, on-failure) is no
    // longer what was verified and consented to: /status (read by the status page and by
    // `forewarn status`) says so, as `plugin list` does.
    std::fs::write(
        plugin_dir.join("probe.toml"),
        "budget = \"5s\"\non-failure = \"approve\"\n[config]\nmode = \"approve\"\n[capabilities]\nreadiness = true\n",
    )
    .unwrap();
    wait_for(
        TIMEOUT,
        "/status to show the widened manifest as changed",
        || {
            let body = http_get(&admin, "/status")?;
            let json: serde_json::Value =
                serde_json::from_str(&body).map_err(|error| error.to_string())?;
            let verified = json["plugins"]
                .as_array()
                .and_then(|plugins| plugins.iter().find(|plugin| plugin["name"] == "probe"))
                .map(|plugin| plugin["provenance"]["verified"].clone());
            match verified {
                Some(serde_json::Value::Bool(false)) => Ok(()),
                other => Err(format!("probe's provenance verified: {other:?}")),
            }
        },
    );
    let table = forewarn(&["status", "--admin", &admin], true);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("CHANGED SINCE INSTALL"),
        "{}",
        describe(&table)
    );
    let listed = forewarn(&["plugin", "list", "--config", &config_arg], true);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("CHANGED SINCE INSTALL: probe.toml"),
        "{}",
        describe(&listed)
    );
    drop(daemon);
}

/// A plugin pushed by `wkg` (no manifest, no signature) is refused as unsigned, then installed
/// with --allow-unsigned: the bytes wkg pushed are the bytes in the plugin directory.
#[test]
fn a_plugin_pushed_by_wkg_installs_with_forewarn() {
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = dir.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    let reference = registry.reference("thirdparty/noop:0.1.0");
    wkg(&registry, &["oci", "push", &reference, guests::NOOP]);
    let ca = registry.pki.file("ca.pem");
    let plugins = plugin_dir.display().to_string();
    let refused = forewarn(
        &[
            "plugin",
            "install",
            &reference,
            "--plugins",
            &plugins,
            "--yes",
            "--ca-file",
            &ca,
            "--config",
            "/dev/null",
        ],
        false,
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not signed"),
        "{}",
        describe(&refused)
    );
    assert_eq!(std::fs::read_dir(&plugin_dir).unwrap().count(), 0);
    // No terminal to ask on (stdin is not one) and no --yes: nothing is installed.
    let unasked = forewarn(
        &[
            "plugin",
            "install",
            &reference,
            "--plugins",
            &plugins,
            "--allow-unsigned",
            "--ca-file",
            &ca,
            "--config",
            "/dev/null",
        ],
        false,
    );
    assert!(!unasked.status.success());
    assert!(
        String::from_utf8_lossy(&unasked.stderr).contains("There is no terminal to ask on"),
        "{}",
        describe(&unasked)
    );
    assert_eq!(std::fs::read_dir(&plugin_dir).unwrap().count(), 0);
    let installed = forewarn(
        &[
            "plugin",
            "install",
            &reference,
            "--plugins",
            &plugins,
            "--yes",
            "--allow-unsigned",
            "--ca-file",
            &ca,
            "--config",
            "/dev/null",
        ],
        true,
    );
    assert!(
        String::from_utf8_lossy(&installed.stderr).contains("WARNING: --allow-unsigned"),
        "{}",
        describe(&installed)
    );
    assert_eq!(
        std::fs::read(plugin_dir.join("noop.wasm")).unwrap(),
        std::fs::read(guests::NOOP).unwrap()
    );
}

/// What forewarn pushes is a Wasm OCI artifact `wkg` pulls; and `plugin pull --to DIR`
/// mirrors it (with its signature) for `plugin install DIR` on a machine without the registry.
#[test]
fn wkg_pulls_what_forewarn_pushed_and_a_mirrored_layout_installs_offline() {
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keypair(dir.path(), "alice");
    let reference = registry.reference("acme/probe:2.0.0");
    let ca = registry.pki.file("ca.pem");
    let key_arg = key.display().to_string();
    forewarn(
        &[
            "plugin",
            "push",
            guests::PROBE,
            &reference,
            "--sign",
            &key_arg,
            "--ca-file",
            &ca,
        ],
        true,
    );
    let pulled = dir.path().join("pulled.wasm");
    wkg(
        &registry,
        &[
            "oci",
            "pull",
            &reference,
            "-o",
            &pulled.display().to_string(),
        ],
    );
    assert_eq!(
        std::fs::read(&pulled).unwrap(),
        std::fs::read(guests::PROBE).unwrap()
    );

    let mirror = dir.path().join("mirror");
    let mirror_arg = mirror.display().to_string();
    forewarn(
        &[
            "plugin",
            "pull",
            &reference,
            "--to",
            &mirror_arg,
            "--ca-file",
            &ca,
            "--config",
            "/dev/null",
        ],
        true,
    );
    let config_path = dir.path().join("forewarn.toml");
    std::fs::write(
        &config_path,
        format!("[plugins]\ntrusted-keys = [\"{public}\"]\n"),
    )
    .unwrap();
    let plugin_dir = dir.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    let config_arg = config_path.display().to_string();
    let plugins = plugin_dir.display().to_string();
    // A tarball of the layout, as it would be carried to an air-gapped machine.
    let tarball = dir.path().join("probe.tar");
    let tar = Command::new("tar")
        .arg("-cf")
        .arg(&tarball)
        .arg("-C")
        .arg(&mirror)
        .arg(".")
        .status()
        .unwrap();
    assert!(tar.success());
    let installed = forewarn(
        &[
            "plugin",
            "install",
            &tarball.display().to_string(),
            "--as",
            "probe",
            "--plugins",
            &plugins,
            "--config",
            &config_arg,
            "--yes",
        ],
        true,
    );
    assert!(
        String::from_utf8_lossy(&installed.stderr).contains("signed by alice@example.com"),
        "{}",
        describe(&installed)
    );
    assert_eq!(
        std::fs::read(plugin_dir.join("probe.wasm")).unwrap(),
        std::fs::read(guests::PROBE).unwrap()
    );
}

/// Issue 45 (2): what the artifact says — its version annotation, its manifest's grant
/// strings — is printed escaped and cut, so an operator at a real terminal sees the real
/// grants and the real question. Each crafted artifact is signed by a trusted key (its
/// author's), pushed to the real registry, and installed by the real `forewarn plugin
/// install` in a pseudo-terminal whose output a VT100 emulator renders.
// not on Windows: the pseudo-terminal is Unix's openpty (Windows' ConPTY is another API), and
// the registry is Debian's docker-registry; the escaping is the same code on every platform,
// checked in process by supply_hostile's text_from_the_artifact_or_the_lock_reaches_the_terminal_escaped
#[cfg(unix)]
#[test]
fn a_crafted_annotation_or_grant_cannot_forge_the_install_consent_on_a_terminal() {
    use forewarn_supply::registry::{RegistryClient, RegistryOptions};
    use forewarn_supply::registry_credentials::Credentials;
    use forewarn_test_support::crafted;
    use forewarn_test_support::terminal::Terminal;

    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keypair(dir.path(), "alice");
    let ca = registry.pki.file("ca.pem");
    let options = RegistryOptions {
        plain_http: false,
        ca_file: Some(PathBuf::from(&ca)),
        credentials: Some(Credentials {
            username: USER.into(),
            password: PASSWORD.into(),
        }),
    };
    let config_path = dir.path().join("forewarn.toml");
    std::fs::write(
        &config_path,
        format!("[plugins]\ntrusted-keys = [\"{public}\"]\n"),
    )
    .unwrap();
    let granting = "[capabilities]\nreadiness = true\nactions = [\"stop-app\"]\n";
    let fake_description = "probe version 1.0.0 from registry.example.com/acme/probe:1.0.0\n  \
        signed by alice@example.com\n\nIt will be granted:\n  actions (run as the daemon's \
        user): none\n  readiness (take the VM out of the load balancer): no\n  HTTP hosts: \
        none\nInstall probe with these grants? [y/N] ";
    enum Expect {
        /// The consent is asked: the real grants and the real question on screen.
        Consent,
        /// Refused before any consent, the message naming this.
        Refused(&'static str),
    }
    let cases: Vec<(&str, String, &str, Expect)> = vec![
        (
            "clear screen, a fake description, conceal",
            format!("1.0.0\u{1b}[2J\u{1b}[H{fake_description}\u{1b}[8m"),
            granting,
            Expect::Consent,
        ),
        (
            "OSC 52 clipboard write",
            "1.0.0\u{1b}]52;c;cm0gLXJmIH4K\u{7}".to_owned(),
            granting,
            Expect::Consent,
        ),
        (
            "a 900 KiB annotation",
            "9".repeat(900 * 1024),
            granting,
            Expect::Refused("org.opencontainers.image.version"),
        ),
        (
            "an http grant with a terminal escape",
            "1.0.0".to_owned(),
            "[capabilities]\nreadiness = true\nhttp = [\"evil\\u001b[2J.example:80\"]\n",
            Expect::Refused("capabilities.http"),
        ),
        (
            "an azure-identity grant with conceal",
            "1.0.0".to_owned(),
            "[capabilities]\nreadiness = true\nazure-identity = [\"https://vault.azure.net/\\u001b[8m\"]\n",
            Expect::Refused("capabilities.azure-identity"),
        ),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (index, (label, version, manifest, expect)) in cases.into_iter().enumerate() {
        let tag = format!("crafted-{index}");
        runtime.block_on(async {
            let client = RegistryClient::new(&registry.address, "acme/probe", &options).unwrap();
            let built = crafted::artifact("probe", &version, manifest);
            crafted::push_signed(&client, &tag, &built, &key).await;
        });
        let plugin_dir = dir.path().join(format!("plugins-{index}"));
        std::fs::create_dir(&plugin_dir).unwrap();
        let mut command = Command::new(forewarn_binary!());
        command
            .args([
                "plugin",
                "install",
                &registry.reference(&format!("acme/probe:{tag}")),
            ])
            .arg("--config")
            .arg(&config_path)
            .arg("--plugins")
            .arg(&plugin_dir)
            .args(["--ca-file", &ca])
            .env("FOREWARN_REGISTRY_USER", USER)
            .env("FOREWARN_REGISTRY_PASSWORD", PASSWORD)
            .env_remove("DOCKER_CONFIG")
            .env("TERM", "xterm-256color");
        let mut terminal = Terminal::spawn(command);
        let asked = terminal.read_until(TIMEOUT, |raw| raw.ends_with(b"[y/N] "));
        let screen = terminal.screen();
        let raw = String::from_utf8_lossy(&terminal.raw).into_owned();
        for escape in ["\u{1b}[2J", "\u{1b}[H", "\u{1b}[8m", "\u{1b}]52"] {
            assert!(
                !raw.contains(escape),
                "{label}: {escape:?} reached the terminal; the screen:\n{screen}"
            );
        }
        match expect {
            Expect::Consent => {
                assert!(
                    asked,
                    "{label}: no question was asked; the screen:\n{screen}"
                );
                for real in [
                    "actions (run as the daemon's user): stop-app",
                    "readiness (take the VM out of the load balancer): yes",
                ] {
                    assert!(
                        screen.contains(real),
                        "{label}: the real grant {real:?} is not on the screen:\n{screen}"
                    );
                }
                for forged in [
                    "actions (run as the daemon's user): none",
                    "readiness (take the VM out of the load balancer): no",
                ] {
                    assert!(
                        !screen.contains(forged),
                        "{label}: the forged {forged:?} is on the screen:\n{screen}"
                    );
                }
                assert!(
                    terminal
                        .cursor_row()
                        .starts_with("Install probe with these grants? [y/N]"),
                    "{label}: the prompt is not the real question: {:?}; the screen:\n{screen}",
                    terminal.cursor_row()
                );
                terminal.type_text("n\n");
                let status = terminal.read_to_end(TIMEOUT);
                assert!(!status.success(), "{label}: declined, yet {status}");
            }
            Expect::Refused(names) => {
                assert!(
                    !asked,
                    "{label}: asked for consent instead of refusing; the screen:\n{screen}"
                );
                let status = terminal.read_to_end(TIMEOUT);
                assert!(!status.success(), "{label}: {status}");
                // A long message wraps: read the screen as one text.
                let flat = terminal.screen().replace('\n', "");
                assert!(
                    flat.contains(names) && flat.contains("nothing was installed"),
                    "{label}: the refusal does not name {names:?}; the screen:\n{}",
                    terminal.screen()
                );
            }
        }
        println!("{label}: the screen showed\n{}", terminal.screen());
        assert_eq!(
            std::fs::read_dir(&plugin_dir).unwrap().count(),
            0,
            "{label}: something was installed"
        );
    }
}

/// Issue 51 (5): a registry with a self-signed certificate (`openssl req -x509`'s, CA:TRUE),
/// the certificate passed with `--ca-file`, was refused with advice to pass `--ca-file`. The
/// certificate given is trusted as itself; the install line `push` prints carries it and
/// installs when pasted. Given the wrong file, or for another host, the advice says what is
/// wrong instead; a 401 names the credential variables.
#[test]
fn a_self_signed_registry_certificate_given_with_ca_file_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path(), "registry", "IP:127.0.0.1,DNS:localhost");
    let registry = Registry::start_with(Some((&cert, &key)));
    let (signing_key, public) = keypair(dir.path(), "alice");
    let wasm = dir.path().join("probe.wasm");
    std::fs::copy(guests::PROBE, &wasm).unwrap();
    let wasm = wasm.display().to_string();
    let signing_key = signing_key.display().to_string();
    let reference = registry.reference("acme/probe:1.0.0");
    let push = |ca: &str| {
        forewarn(
            &[
                "plugin",
                "push",
                &wasm,
                &reference,
                "--sign",
                &signing_key,
                "--ca-file",
                ca,
            ],
            false,
        )
    };

    // The test CA's certificate: not what this registry presents.
    let wrong_ca = registry.pki.file("ca.pem");
    let refused = push(&wrong_ca);
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    let told = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        told.contains(&format!(
            "--ca-file {wrong_ca} is not the CA of this registry"
        )),
        "{told}"
    );
    assert!(!told.contains("pass --ca-file CA.pem"), "{told}");
    // A certificate for another host, given: trusted, but not for 127.0.0.1.
    let (elsewhere, elsewhere_key) = self_signed(dir.path(), "elsewhere", "DNS:registry.invalid");
    let other = Registry::start_with(Some((&elsewhere, &elsewhere_key)));
    let other_reference = other.reference("acme/probe:1.0.0");
    let misnamed = forewarn(
        &[
            "plugin",
            "push",
            &wasm,
            &other_reference,
            "--ca-file",
            &elsewhere,
        ],
        false,
    );
    assert_eq!(misnamed.status.code(), Some(1), "{}", describe(&misnamed));
    let told = String::from_utf8_lossy(&misnamed.stderr).into_owned();
    assert!(told.contains("not for the host 127.0.0.1"), "{told}");
    assert!(!told.contains("pass --ca-file"), "{told}");

    // The registry's 401, without credentials and with a wrong password: each names the
    // variables (and the second says the credentials came from them).
    for (password, said) in [
        (None, "none were found"),
        (
            Some("wrong"),
            "refused the credentials from FOREWARN_REGISTRY_USER",
        ),
    ] {
        let mut command = Command::new(forewarn_binary!());
        command
            .args(["plugin", "push", &wasm, &reference, "--ca-file", &cert])
            .env_remove("FOREWARN_REGISTRY_USER")
            .env_remove("FOREWARN_REGISTRY_PASSWORD")
            .env("DOCKER_CONFIG", dir.path())
            .stdin(Stdio::null());
        if let Some(password) = password {
            command
                .env("FOREWARN_REGISTRY_USER", USER)
                .env("FOREWARN_REGISTRY_PASSWORD", password);
        }
        let refused = command.output().unwrap();
        assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
        let told = String::from_utf8_lossy(&refused.stderr).into_owned();
        for part in [
            "401",
            said,
            "FOREWARN_REGISTRY_USER and FOREWARN_REGISTRY_PASSWORD",
        ] {
            assert!(told.contains(part), "{part:?} not in: {told}");
        }
    }

    // Its own certificate, given by a relative path from the directory it is in.
    let pushed = Command::new(forewarn_binary!())
        .current_dir(dir.path())
        .args(["plugin", "push", &wasm, &reference, "--sign", &signing_key])
        .args(["--ca-file", "registry.pem"])
        .env("FOREWARN_REGISTRY_USER", USER)
        .env("FOREWARN_REGISTRY_PASSWORD", PASSWORD)
        .env_remove("DOCKER_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{}", describe(&pushed));
    let stdout = String::from_utf8_lossy(&pushed.stdout).into_owned();
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("install it with: forewarn "))
        .unwrap_or_else(|| panic!("no install line: {stdout}"));
    assert!(line.ends_with(&format!(" --ca-file {cert}")), "{line}");
    // Pasted as printed (from another directory), with the operator's config and --yes.
    let plugin_dir = dir.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    let config = dir.path().join("forewarn.toml");
    std::fs::write(
        &config,
        format!(
            "plugin-dir = \"{}\"\n[plugins]\ntrusted-keys = [\"{public}\"]\n",
            plugin_dir.display()
        ),
    )
    .unwrap();
    let mut pasted: Vec<&str> = line.split_whitespace().collect();
    let config_arg = config.display().to_string();
    pasted.extend(["--config", &config_arg, "--yes"]);
    forewarn(&pasted, true);
    assert_eq!(
        std::fs::read(plugin_dir.join("probe.wasm")).unwrap(),
        std::fs::read(guests::PROBE).unwrap()
    );
}
