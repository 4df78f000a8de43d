//! The hostile cases of `forewarn plugin install` (issue 36), each against a small registry
//! that misbehaves on purpose (`forewarn_test_support::fake_registry`): every one is refused
//! with a message that names the problem and the fix, and leaves the plugin directory exactly
//! as it was — the version installed before (if any) stays, byte for byte, lock included.
//!
//! In process: the library's push, fetch and install, no daemon (the daemon only ever sees
//! the files; `e2e_registry` covers it with a real registry).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use forewarn_manifest::GrantSummary;
use forewarn_manifest::PluginManifest;
use forewarn_supply::SupplyError;
use forewarn_supply::artifact::{self, PluginParts};
use forewarn_supply::fetch::FetchLimits;
use forewarn_supply::install::{self, InstallRequest, Mode, Operator};
use forewarn_supply::push::{PushRequest, push};
use forewarn_supply::reference::{Digest, Reference};
use forewarn_supply::registry::{RegistryClient, RegistryOptions};
use forewarn_supply::signature::TrustedKeys;
use forewarn_supply::source::{self, Source};
use forewarn_test_support::crafted::artifact as crafted_artifact;
use forewarn_test_support::fake_registry::{FakeRegistry, Faults};
use forewarn_test_support::guests;

const LIMITS: FetchLimits = FetchLimits {
    wasm: 64 << 20,
    manifest_toml: 1 << 20,
};

/// An operator who agrees, or who cannot be asked (no terminal, no --yes); records what it
/// was told and asked.
struct ScriptedOperator {
    agrees: bool,
    told: String,
    asked: Vec<String>,
}

impl ScriptedOperator {
    fn agreeing() -> ScriptedOperator {
        ScriptedOperator {
            agrees: true,
            told: String::new(),
            asked: Vec::new(),
        }
    }
    fn unreachable() -> ScriptedOperator {
        ScriptedOperator {
            agrees: false,
            ..ScriptedOperator::agreeing()
        }
    }
}

impl Operator for ScriptedOperator {
    fn say(&mut self, text: &str) {
        self.told.push_str(text);
    }
    fn consent(&mut self, question: &str) -> Result<bool, SupplyError> {
        self.asked.push(question.to_owned());
        match self.agrees {
            true => Ok(true),
            false => Err(SupplyError::NoConsent(format!(
                "{question} no terminal: pass --yes"
            ))),
        }
    }
}

/// A registry, a plugin directory, an author's key (alice, trusted) and another (mallory).
struct Fixture {
    temp: tempfile::TempDir,
    registry: FakeRegistry,
    alice: PathBuf,
    alice_public: String,
    mallory: PathBuf,
    trusted: TrustedKeys,
}

fn keypair(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let status = Command::new("ssh-keygen")
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
        .expect("ssh-keygen (Debian's openssh-client; tests/run.sh installs it)");
    assert!(status.success());
    let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    (path, public.trim().to_owned())
}

impl Fixture {
    fn new() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("plugins.d")).unwrap();
        let (alice, alice_public) = keypair(temp.path(), "alice");
        let (mallory, _) = keypair(temp.path(), "mallory");
        Fixture {
            registry: FakeRegistry::start(),
            trusted: TrustedKeys::parse(std::slice::from_ref(&alice_public)).unwrap(),
            temp,
            alice,
            alice_public,
            mallory,
        }
    }

    fn plugin_dir(&self) -> PathBuf {
        self.temp.path().join("plugins.d")
    }

    fn reference(&self, tag: &str) -> Reference {
        Reference::parse(&format!("{}/acme/probe:{tag}", self.registry.address())).unwrap()
    }

    fn options() -> RegistryOptions {
        RegistryOptions {
            plain_http: true,
            ..RegistryOptions::default()
        }
    }

    /// Pushes the probe with `manifest` as `tag`, signed by `key` if given.
    async fn push(&self, tag: &str, manifest: &str, key: Option<&Path>) -> Digest {
        let dir = self.temp.path().join(format!("src-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(guests::PROBE, dir.join("probe.wasm")).unwrap();
        std::fs::write(dir.join("probe.toml"), manifest).unwrap();
        let pushed = push(PushRequest {
            wasm: dir.join("probe.wasm"),
            manifest: Some(dir.join("probe.toml")),
            reference: self.reference(tag),
            sign: key.map(Path::to_path_buf),
            version: None,
            registry: Fixture::options(),
            max_wasm_bytes: LIMITS.wasm,
        })
        .await
        .unwrap();
        pushed.digest
    }

    async fn install(
        &self,
        tag: &str,
        mode: Mode,
        operator: &mut ScriptedOperator,
    ) -> Result<install::Installed, SupplyError> {
        self.install_with(tag, mode, operator, LIMITS).await
    }

    async fn install_with(
        &self,
        tag: &str,
        mode: Mode,
        operator: &mut ScriptedOperator,
        limits: FetchLimits,
    ) -> Result<install::Installed, SupplyError> {
        let source = Source::Registry(self.reference(tag));
        let fetched = source::fetch(&source, &Fixture::options(), limits).await?;
        install::install(
            &self.plugin_dir(),
            InstallRequest {
                fetched: fetched.fetched,
                source: fetched.source,
                name: None,
                fallback_name: source.fallback_name(),
                trusted: &self.trusted,
                allow_unsigned: false,
                mode,
                allow_downgrade: false,
            },
            operator,
        )
        .await
    }

    /// Every file under the plugin directory (hidden ones and `.previous/` too), with its bytes.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut stack = vec![self.plugin_dir()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    files.insert(path.clone(), std::fs::read(&path).unwrap());
                }
            }
        }
        files
    }

    /// Installs v1 (signed by alice, no capabilities) and returns the directory's snapshot.
    async fn installed_v1(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.push("1", V1, Some(&self.alice)).await;
        self.install("1", Mode::Install, &mut ScriptedOperator::agreeing())
            .await
            .unwrap();
        let snapshot = self.snapshot();
        assert!(snapshot.contains_key(&self.plugin_dir().join("probe.wasm")));
        assert!(snapshot.contains_key(&self.plugin_dir().join("plugins.lock")));
        snapshot
    }
}

const V1: &str = "[config]\nmode = \"approve\"\n";

fn assert_names(error: &SupplyError, parts: &[&str]) {
    let text = error.to_string();
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
}

#[tokio::test]
async fn a_blob_that_does_not_match_its_digest_is_refused_and_the_old_version_stays() {
    let fixture = Fixture::new();
    let before = fixture.installed_v1().await;
    fixture
        .push(
            "2",
            "budget = \"5s\"\n[config]\nmode = \"approve\"\n",
            Some(&fixture.alice),
        )
        .await;
    let wasm_digest = Digest::of(&std::fs::read(guests::PROBE).unwrap()).to_string();
    fixture.registry.set_faults(Faults {
        alter_blob: Some(wasm_digest),
        ..Faults::default()
    });
    let error = fixture
        .install("2", Mode::Upgrade, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert!(
        matches!(error, SupplyError::DigestMismatch { .. }),
        "{error}"
    );
    assert_names(
        &error,
        &[
            "the component layer",
            "does not match its digest",
            "nothing was installed",
            "Try again",
        ],
    );
    assert_eq!(fixture.snapshot(), before);
}

#[tokio::test]
async fn a_signature_by_a_key_not_trusted_is_refused_naming_the_fix() {
    let fixture = Fixture::new();
    fixture.push("1", V1, Some(&fixture.mallory)).await;
    let error = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert!(matches!(error, SupplyError::Signature(_)), "{error}");
    assert_names(
        &error,
        &[
            "a key not in `[plugins] trusted-keys`",
            "add their public key",
            "--allow-unsigned",
        ],
    );
    assert!(
        fixture.snapshot().is_empty(),
        "{:?}",
        fixture.snapshot().keys()
    );
}

#[tokio::test]
async fn an_unsigned_plugin_is_refused_without_allow_unsigned() {
    let fixture = Fixture::new();
    fixture.push("1", V1, None).await;
    let error = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert_names(&error, &["is not signed", "--sign KEY", "--allow-unsigned"]);
    assert!(fixture.snapshot().is_empty());
}

#[tokio::test]
async fn a_valid_signature_over_another_digest_is_refused() {
    let fixture = Fixture::new();
    let signed = fixture.push("1", V1, Some(&fixture.alice)).await;
    let unsigned = fixture.push("2", "budget = \"5s\"\n", None).await;
    // Alice's real signature of artifact 1, presented as the signature of artifact 2.
    let signature = fixture
        .registry
        .manifest("acme/probe", &signed.signature_tag())
        .unwrap();
    fixture
        .registry
        .put_manifest("acme/probe", &unsigned.signature_tag(), signature);
    let error = fixture
        .install("2", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert!(matches!(error, SupplyError::Signature(_)), "{error}");
    assert_names(
        &error,
        &[
            "alice@example.com",
            &format!("does not verify for {unsigned}"),
            "made for another artifact",
        ],
    );
    assert!(fixture.snapshot().is_empty());
}

#[tokio::test]
async fn a_manifest_layer_granting_more_than_the_annotations_claim_is_refused() {
    let fixture = Fixture::new();
    let wasm = std::fs::read(guests::PROBE).unwrap();
    let honest = PluginManifest::parse(V1).unwrap();
    let granting = "[capabilities]\nactions = [\"reboot-now\"]\nreadiness = true\n";
    let built = artifact::build_plugin_artifact(&PluginParts {
        name: "probe",
        wasm: &wasm,
        manifest: Some(granting.as_bytes()),
        grants: &GrantSummary::of(&honest),
        world: "forewarn:plugin/event-handler@0.3.0",
        exports: vec![],
        imports: vec![],
        version: Some("1"),
        created: "2025-01-01T00:00:00Z".into(),
    });
    let client = RegistryClient::new(
        fixture.registry.address(),
        "acme/probe",
        &Fixture::options(),
    )
    .unwrap();
    for (_, bytes) in &built.blobs {
        client.push_blob(bytes, "test").await.unwrap();
    }
    client.push_manifest("1", &built.manifest).await.unwrap();
    let error = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert!(
        matches!(error, SupplyError::GrantsBeyondClaims { .. }),
        "{error}"
    );
    assert_names(
        &error,
        &[
            "actions: + reboot-now",
            "readiness: false -> true",
            "push it again",
        ],
    );
    assert!(fixture.snapshot().is_empty());
}

#[tokio::test]
async fn an_upgrade_that_widens_actions_asks_again_and_without_consent_changes_nothing() {
    let fixture = Fixture::new();
    let before = fixture.installed_v1().await;
    fixture
        .push(
            "2",
            "[config]\nmode = \"approve\"\n[capabilities]\nactions = [\"stop-app\"]\n",
            Some(&fixture.alice),
        )
        .await;
    let mut operator = ScriptedOperator::unreachable();
    let error = fixture
        .install("2", Mode::Upgrade, &mut operator)
        .await
        .unwrap_err();
    assert!(matches!(error, SupplyError::NoConsent(_)), "{error}");
    assert_eq!(operator.asked.len(), 1, "{:?}", operator.asked);
    assert!(
        operator.asked[0].contains("actions: + stop-app"),
        "{:?}",
        operator.asked
    );
    assert!(
        operator.told.contains("+ actions: stop-app"),
        "{}",
        operator.told
    );
    assert_names(&error, &["--yes"]);
    assert_eq!(fixture.snapshot(), before);
    // With consent it goes in, and the previous version is kept for rollback.
    let installed = fixture
        .install("2", Mode::Upgrade, &mut ScriptedOperator::agreeing())
        .await
        .unwrap();
    assert!(installed.changed);
    let lock = forewarn_supply::lock::Lockfile::read(&fixture.plugin_dir()).unwrap();
    assert!(
        lock.plugins["probe"]
            .grants
            .capabilities
            .actions
            .contains(&"stop-app".to_owned())
    );
    assert!(lock.plugins["probe"].previous.is_some());
    install::rollback(
        &fixture.plugin_dir(),
        "probe",
        &mut ScriptedOperator::agreeing(),
    )
    .unwrap();
    let after = fixture.snapshot();
    let live = |snapshot: &BTreeMap<PathBuf, Vec<u8>>, file: &str| {
        snapshot[&fixture.plugin_dir().join(file)].clone()
    };
    assert_eq!(
        live(&after, "probe.toml"),
        live(&before, "probe.toml"),
        "rollback restores v1's manifest"
    );
}

#[tokio::test]
async fn an_upgrade_that_narrows_the_grants_does_not_ask() {
    let fixture = Fixture::new();
    fixture
        .push(
            "1",
            "[capabilities]\nactions = [\"stop-app\"]\n[config]\nmode = \"approve\"\n",
            Some(&fixture.alice),
        )
        .await;
    fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap();
    fixture.push("2", V1, Some(&fixture.alice)).await;
    let mut operator = ScriptedOperator::unreachable();
    fixture
        .install("2", Mode::Upgrade, &mut operator)
        .await
        .unwrap();
    assert!(operator.asked.is_empty(), "{:?}", operator.asked);
    assert!(
        operator.told.contains("- actions: stop-app"),
        "{}",
        operator.told
    );
}

#[tokio::test]
async fn a_registry_that_dies_mid_download_leaves_the_old_version_in_place() {
    let fixture = Fixture::new();
    let before = fixture.installed_v1().await;
    fixture
        .push(
            "2",
            "budget = \"5s\"\n[config]\nmode = \"approve\"\n",
            Some(&fixture.alice),
        )
        .await;
    let wasm_digest = Digest::of(&std::fs::read(guests::PROBE).unwrap()).to_string();
    fixture.registry.set_faults(Faults {
        die_during_blob: Some(wasm_digest),
        ..Faults::default()
    });
    let error = fixture
        .install("2", Mode::Upgrade, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert!(matches!(error, SupplyError::Connection { .. }), "{error}");
    assert_names(
        &error,
        &[
            "the component layer",
            "broke off",
            "plugin directory is unchanged",
            "try again",
        ],
    );
    assert_eq!(fixture.snapshot(), before);
}

/// A second local server, on another port than the registry (another origin), that records
/// the request line of every request it gets and answers each 404: the target of a redirect
/// the installer must not follow.
struct Elsewhere {
    address: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Elsewhere {
    fn start() -> Elsewhere {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a second server");
        let address = listener.local_addr().expect("its address");
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = requests.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut line = String::new();
                let _ignored = BufReader::new(&stream).read_line(&mut line);
                // Recorded before the answer: a client that got one was recorded first.
                record
                    .lock()
                    .expect("lock")
                    .push(format!("connection: {}", line.trim_end()));
                let _ignored = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        Elsewhere { address, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

#[tokio::test]
async fn a_redirect_to_another_host_is_refused() {
    let fixture = Fixture::new();
    fixture.push("1", V1, Some(&fixture.alice)).await;
    let elsewhere = Elsewhere::start();
    let target = elsewhere.address.to_string();
    fixture.registry.set_faults(Faults {
        redirect_blobs_to: Some(format!("http://{target}/elsewhere")),
        ..Faults::default()
    });
    let error = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    // The redirect's target (listening, and watched) got nothing: not even a connection.
    assert_eq!(
        elsewhere.requests(),
        Vec::<String>::new(),
        "the redirect target got requests ({error})"
    );
    assert!(matches!(error, SupplyError::Redirect { .. }), "{error}");
    assert_names(
        &error,
        &["redirected", target.as_str(), "forewarn plugin", "pull"],
    );
    assert!(fixture.snapshot().is_empty());
    // The registry was asked for a blob (and redirected it): the refusal came from the
    // redirect, not from an earlier step.
    let requests = fixture.registry.state.lock().unwrap().requests.clone();
    assert!(
        requests
            .iter()
            .any(|request| request.starts_with("GET ") && request.contains("/blobs/")),
        "{requests:?}"
    );
}

#[tokio::test]
async fn an_oversized_manifest_or_layer_is_refused_before_it_is_read() {
    let fixture = Fixture::new();
    fixture.push("1", V1, Some(&fixture.alice)).await;
    let small = FetchLimits {
        wasm: 1024,
        manifest_toml: LIMITS.manifest_toml,
    };
    let error = fixture
        .install_with("1", Mode::Install, &mut ScriptedOperator::agreeing(), small)
        .await
        .unwrap_err();
    assert!(matches!(error, SupplyError::TooLarge { .. }), "{error}");
    assert_names(
        &error,
        &[
            "the component layer",
            "limit of 1024 bytes",
            "max-plugin-size",
        ],
    );
    fixture.registry.set_faults(Faults {
        pad_manifests_to: Some(2 << 20),
        ..Faults::default()
    });
    let error = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert!(matches!(error, SupplyError::TooLarge { .. }), "{error}");
    assert_names(&error, &["the manifest", "limit of 1048576 bytes"]);
    assert!(fixture.snapshot().is_empty());
}

#[tokio::test]
async fn a_signed_install_records_its_provenance_and_remove_clears_it() {
    let fixture = Fixture::new();
    let digest = fixture.push("1", V1, Some(&fixture.alice)).await;
    let mut operator = ScriptedOperator::agreeing();
    let installed = fixture
        .install("1", Mode::Install, &mut operator)
        .await
        .unwrap();
    assert_eq!(installed.digest, digest);
    assert!(
        operator.told.contains("signed by alice@example.com"),
        "{}",
        operator.told
    );
    assert!(
        operator
            .told
            .contains("actions (run as the daemon's user): none"),
        "{}",
        operator.told
    );
    let wasm = std::fs::read(fixture.plugin_dir().join("probe.wasm")).unwrap();
    assert_eq!(wasm, std::fs::read(guests::PROBE).unwrap());
    let lock = forewarn_supply::lock::Lockfile::read(&fixture.plugin_dir()).unwrap();
    let entry = &lock.plugins["probe"];
    assert_eq!(entry.digest, digest.to_string());
    assert_eq!(entry.signer.as_deref(), Some("alice@example.com"));
    assert!(
        entry.source.ends_with(&format!("acme/probe:1@{digest}")),
        "{}",
        entry.source
    );
    let again = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert_names(
        &again,
        &["installed already", "forewarn plugin upgrade probe"],
    );
    install::remove(&fixture.plugin_dir(), "probe").unwrap();
    let left: Vec<PathBuf> = fixture.snapshot().into_keys().collect();
    assert_eq!(left, [fixture.plugin_dir().join("plugins.lock")]);
}

// ---- Issue 45: consent that leaves nothing out, no silent downgrade, text from outside
// ---- escaped, bounded downloads, a `.previous` that is a link.

impl Fixture {
    /// Pushes `built` as `tag` (no check on what it holds: a hostile author's artifact),
    /// signed by alice.
    async fn push_built(&self, tag: &str, built: &artifact::BuiltArtifact) -> Digest {
        let client =
            RegistryClient::new(self.registry.address(), "acme/probe", &Fixture::options())
                .unwrap();
        forewarn_test_support::crafted::push_signed(&client, tag, built, &self.alice).await
    }

    /// Runs `forewarn plugin ARGS` (the real binary) on the fixture's plugin directory with a
    /// config that trusts alice.
    fn cli(&self, args: &[&str]) -> std::process::Output {
        let config = self.temp.path().join("forewarn.toml");
        std::fs::write(
            &config,
            format!("[plugins]\ntrusted-keys = [\"{}\"]\n", self.alice_public),
        )
        .unwrap();
        Command::new(forewarn_test_support::forewarn_binary!())
            .arg("plugin")
            .args(args)
            .arg("--config")
            .arg(&config)
            .arg("--plugins")
            .arg(self.plugin_dir())
            .env_remove("FOREWARN_REGISTRY_USER")
            .env_remove("FOREWARN_REGISTRY_PASSWORD")
            .env("DOCKER_CONFIG", self.temp.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run forewarn")
    }
}

fn describe_output(output: &std::process::Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Issue 45 (4): `on-failure = "approve"`, `prepare-time` and `http-response-limit` change
/// what a plugin does to the maintenance; the consent showed none of them.
#[tokio::test]
async fn the_install_consent_shows_on_failure_prepare_time_and_the_response_limit() {
    let fixture = Fixture::new();
    fixture
        .push(
            "1",
            "budget = \"20s\"\nprepare-time = \"40s\"\non-failure = \"approve\"\n[capabilities]\nhttp-response-limit = \"16MiB\"\n",
            Some(&fixture.alice),
        )
        .await;
    let mut operator = ScriptedOperator::agreeing();
    fixture
        .install("1", Mode::Install, &mut operator)
        .await
        .unwrap();
    for shown in [
        "on failure: approve (A FAILED CALL COUNTS AS READY",
        "prepare-time (planned before NotBefore): 40s",
        "HTTP response bodies read up to: 16.0 MiB",
        "memory: 64.0 MiB",
        "budget per call: 20s",
    ] {
        assert!(
            operator.told.contains(shown),
            "{shown:?} not in:\n{}",
            operator.told
        );
    }
    let lock = std::fs::read_to_string(fixture.plugin_dir().join("plugins.lock")).unwrap();
    assert!(
        lock.contains("on-failure = \"approve\""),
        "the lock does not record what was consented to:\n{lock}"
    );
}

/// Issue 45 (4): hold → approve (and a longer prepare-time, a larger response limit) is a
/// widening: the upgrade asks, and without consent nothing changes.
#[tokio::test]
async fn an_upgrade_from_hold_to_approve_asks_again_and_without_consent_changes_nothing() {
    let fixture = Fixture::new();
    let before = fixture.installed_v1().await;
    fixture
        .push(
            "2",
            "on-failure = \"approve\"\nprepare-time = \"5m\"\n[config]\nmode = \"approve\"\n[capabilities]\nhttp-response-limit = \"32MiB\"\n",
            Some(&fixture.alice),
        )
        .await;
    let mut operator = ScriptedOperator::unreachable();
    let outcome = fixture.install("2", Mode::Upgrade, &mut operator).await;
    assert!(
        matches!(outcome, Err(SupplyError::NoConsent(_))),
        "hold -> approve went in without being asked: {:?}; told:\n{}",
        outcome.map(|installed| installed.digest),
        operator.told
    );
    let asked = operator.asked.join("\n");
    for widening in [
        "on-failure: hold -> approve",
        "prepare-time: 10s -> 5m",
        "http-response-limit: 1.0 MiB -> 32.0 MiB",
    ] {
        assert!(asked.contains(widening), "{widening:?} not in: {asked}");
    }
    assert!(
        operator.told.contains("~ on-failure: hold -> approve"),
        "{}",
        operator.told
    );
    assert_eq!(fixture.snapshot(), before);
}

/// Issue 45 (4): a `NAME.toml` widened by hand after install (readiness, on-failure) still
/// showed "installed, verified": the lock's `manifest-sha256` was never compared.
#[tokio::test]
async fn a_manifest_widened_by_hand_after_install_shows_as_changed() {
    let fixture = Fixture::new();
    fixture.installed_v1().await;
    std::fs::write(
        fixture.plugin_dir().join("probe.toml"),
        "on-failure = \"approve\"\n[config]\nmode = \"approve\"\n[capabilities]\nreadiness = true\n",
    )
    .unwrap();
    let listed = forewarn_host::cli::plugin_list::render(&fixture.plugin_dir()).unwrap();
    assert!(
        listed.contains("CHANGED SINCE INSTALL") && listed.contains("probe.toml"),
        "plugin list does not show the hand-widened manifest:\n{listed}"
    );
    let wasm = fixture.plugin_dir().join("probe.wasm");
    let hash = Digest::of(&std::fs::read(&wasm).unwrap()).hex().to_owned();
    // What `/status` (and so the status page and `forewarn status`) reads.
    let provenance = forewarn_supply::lock::LockCache::default().provenance(&wasm, "probe", &hash);
    assert_eq!(
        provenance.map(|(_, verified)| verified),
        Some(false),
        "/status calls the hand-widened plugin verified"
    );
}

/// Issue 45 (3): tag 3.0.0 re-pointed at the signed 1.0.0 manifest, `plugin upgrade`
/// installed 1.0.0 and said "upgraded". Refused unless `--allow-downgrade`, and said.
#[tokio::test]
async fn an_upgrade_to_an_older_signed_version_is_refused_unless_allowed() {
    let fixture = Fixture::new();
    let old = fixture.push("1.0.0", V1, Some(&fixture.alice)).await;
    fixture
        .push(
            "3.0.0",
            "budget = \"5s\"\n[config]\nmode = \"approve\"\n",
            Some(&fixture.alice),
        )
        .await;
    fixture
        .install("3.0.0", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap();
    let before = fixture.snapshot();
    // The replay: the tag the plugin was installed from now names the old signed manifest.
    let replayed = fixture.registry.manifest("acme/probe", "1.0.0").unwrap();
    fixture
        .registry
        .put_manifest("acme/probe", "3.0.0", replayed);
    let same_tag = fixture.cli(&["upgrade", "probe", "--plain-http", "--yes"]);
    assert!(
        !same_tag.status.success(),
        "the replayed tag was installed: {}",
        describe_output(&same_tag)
    );
    let told = String::from_utf8_lossy(&same_tag.stderr).into_owned();
    for part in ["1.0.0", "older than", "3.0.0", "--allow-downgrade"] {
        assert!(told.contains(part), "{part:?} not in: {told}");
    }
    assert_eq!(
        fixture.snapshot(),
        before,
        "the refusal changed the directory"
    );
    let reference = fixture.reference("1.0.0").to_string();
    let named = fixture.cli(&["upgrade", "probe", &reference, "--plain-http", "--yes"]);
    assert!(!named.status.success(), "{}", describe_output(&named));
    assert_eq!(fixture.snapshot(), before);
    let allowed = fixture.cli(&[
        "upgrade",
        "probe",
        &reference,
        "--plain-http",
        "--yes",
        "--allow-downgrade",
    ]);
    assert!(allowed.status.success(), "{}", describe_output(&allowed));
    assert!(
        String::from_utf8_lossy(&allowed.stdout).contains("downgraded probe"),
        "{}",
        describe_output(&allowed)
    );
    let lock = forewarn_supply::lock::Lockfile::read(&fixture.plugin_dir()).unwrap();
    assert_eq!(lock.plugins["probe"].digest, old.to_string());
    assert_eq!(
        std::fs::read_to_string(fixture.plugin_dir().join("probe.toml")).unwrap(),
        V1
    );
}

/// Issue 45 (6): a registry dripping a byte at a time kept `plugin install` going (the
/// component would have taken days). The overall deadline stops it, naming its flag.
#[tokio::test]
async fn an_install_from_a_registry_that_drips_is_stopped_at_its_deadline() {
    let fixture = Fixture::new();
    fixture.push("1", V1, Some(&fixture.alice)).await;
    let wasm_digest = Digest::of(&std::fs::read(guests::PROBE).unwrap()).to_string();
    fixture.registry.set_faults(Faults {
        drip_blob: Some(forewarn_test_support::fake_registry::Drip {
            digest: wasm_digest,
            interval: std::time::Duration::from_millis(100),
        }),
        ..Faults::default()
    });
    let reference = fixture.reference("1").to_string();
    let started = std::time::Instant::now();
    let output = fixture.cli(&[
        "install",
        &reference,
        "--plain-http",
        "--yes",
        "--timeout",
        "2s",
    ]);
    let took = started.elapsed();
    println!("the dripped install ended after {} ms", took.as_millis());
    assert!(!output.status.success(), "{}", describe_output(&output));
    let told = String::from_utf8_lossy(&output.stderr).into_owned();
    for part in [
        "did not finish within 2s",
        "--timeout",
        "nothing was installed",
    ] {
        assert!(told.contains(part), "{part:?} not in: {told}");
    }
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    assert!(
        fixture.snapshot().is_empty(),
        "{:?}",
        fixture.snapshot().keys()
    );
}

/// Issue 45 (6): a blob larger than its descriptor was read up to `max-plugin-size` (60 MiB
/// for a layer of some 140 KB) before it was refused. Refused as soon as it passes the
/// size its descriptor announces: the registry here counts what the client took.
#[tokio::test]
async fn a_blob_larger_than_its_descriptor_is_refused_as_soon_as_it_passes_its_size() {
    let fixture = Fixture::new();
    fixture.push("1", V1, Some(&fixture.alice)).await;
    let wasm = std::fs::read(guests::PROBE).unwrap();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    fixture.registry.set_faults(Faults {
        oversize_blob: Some(forewarn_test_support::fake_registry::Oversize {
            digest: Digest::of(&wasm).to_string(),
            send: 60 << 20,
            sent: sent.clone(),
        }),
        ..Faults::default()
    });
    let error = fixture
        .install("1", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    let taken = sent.load(std::sync::atomic::Ordering::SeqCst);
    println!(
        "a {} -byte layer sent as 60 MiB: the client took {taken} bytes before refusing",
        wasm.len()
    );
    assert!(
        taken < 16 << 20,
        "the client read {taken} bytes of a {}-byte layer before refusing: {error}",
        wasm.len()
    );
    assert_names(
        &error,
        &["the component layer", "announces", "nothing was installed"],
    );
    assert!(fixture.snapshot().is_empty());
}

/// Issue 45 (6): `.previous` as a link to a directory outside was followed on upgrade (the
/// running version was written there).
#[tokio::test]
async fn a_previous_dir_that_is_a_link_elsewhere_is_not_written_through() {
    let fixture = Fixture::new();
    fixture.installed_v1().await;
    let outside = fixture.temp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, fixture.plugin_dir().join(".previous")).unwrap();
    #[cfg(windows)]
    std::os::windows::fs::symlink_dir(&outside, fixture.plugin_dir().join(".previous")).unwrap();
    let before = fixture.snapshot();
    fixture
        .push(
            "2",
            "budget = \"5s\"\n[config]\nmode = \"approve\"\n",
            Some(&fixture.alice),
        )
        .await;
    let outcome = fixture
        .install("2", Mode::Upgrade, &mut ScriptedOperator::agreeing())
        .await;
    let written: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(written.is_empty(), "written through the link: {written:?}");
    let error = outcome.map(|installed| installed.digest).unwrap_err();
    assert_names(&error, &[".previous", "link", "remove it"]);
    assert_eq!(fixture.snapshot(), before);
}

/// Issue 45 (2, 6): a plugin name, a source, a version or a grant from outside reaches the
/// operator's terminal escaped: the name in the refusal, the version in the consent, the
/// lock's source and grants in `plugin list`.
#[tokio::test]
async fn text_from_the_artifact_or_the_lock_reaches_the_terminal_escaped() {
    let fixture = Fixture::new();
    // A name no plugin may have, with a terminal escape: refused, and echoed escaped.
    fixture
        .push_built("bad", &crafted_artifact("\u{1b}[2Jevil", "1", V1))
        .await;
    let error = fixture
        .install("bad", Mode::Install, &mut ScriptedOperator::agreeing())
        .await
        .unwrap_err();
    assert_names(
        &error,
        &["cannot be a plugin name", "--as NAME", "\\u{1b}[2Jevil"],
    );
    assert!(!error.to_string().contains('\u{1b}'), "{error:?}");
    let error = install::remove(&fixture.plugin_dir(), "x\u{1b}]52;c;ZXZpbA==\u{7}").unwrap_err();
    assert!(!error.to_string().contains('\u{1b}'), "{error:?}");
    // A forged version: the consent shows it escaped and cut, and the real grants.
    let forged = format!(
        "1.0\u{1b}[2J\u{1b}[H{}\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[8m",
        "probe version 1.0 It will be granted: actions: none readiness: no ".repeat(4)
    );
    fixture
        .push_built(
            "1",
            &crafted_artifact(
                "probe",
                &forged,
                "[capabilities]\nreadiness = true\nactions = [\"stop-app\"]\n",
            ),
        )
        .await;
    let mut operator = ScriptedOperator::agreeing();
    fixture
        .install("1", Mode::Install, &mut operator)
        .await
        .unwrap();
    assert!(!operator.told.contains('\u{1b}'), "{:?}", operator.told);
    assert!(
        operator.told.contains("probe version 1.0\\u{1b}[2J"),
        "{}",
        operator.told
    );
    assert!(
        operator
            .told
            .contains("readiness (take the VM out of the load balancer): yes"),
        "{}",
        operator.told
    );
    // A lock edited by hand: its source and grants are listed escaped.
    let lock_path = fixture.plugin_dir().join("plugins.lock");
    let lock = std::fs::read_to_string(&lock_path).unwrap();
    let lock = lock
        .replacen(
            "source = \"",
            "source = \"\\u001b[2J\\u001b]52;c;ZXZpbA==\\u0007",
            1,
        )
        .replacen("http = []", "http = [\"evil\\u001b[8m:80\"]", 1);
    std::fs::write(&lock_path, lock).unwrap();
    let listed = forewarn_host::cli::plugin_list::render(&fixture.plugin_dir()).unwrap();
    assert!(!listed.contains('\u{1b}'), "{listed:?}");
    assert!(listed.contains("\\u{1b}[2J"), "{listed}");
    assert!(listed.contains("evil\\u{1b}[8m:80"), "{listed}");
}

// ---- Issue 51 (5): sharing in the author's path — the install line `push` prints, the
// ---- messages that name the fix, and rollback asking as upgrade does.

/// Runs `forewarn plugin ARGS` with no registry credentials but those in `env`.
fn plugin_command(args: &[&str], env: &[(&str, &str)], home: &Path) -> std::process::Output {
    let mut command = Command::new(forewarn_test_support::forewarn_binary!());
    command
        .arg("plugin")
        .args(args)
        .env_remove("FOREWARN_REGISTRY_USER")
        .env_remove("FOREWARN_REGISTRY_PASSWORD")
        .env("DOCKER_CONFIG", home)
        .stdin(std::process::Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run forewarn")
}

/// Asserts the command failed (exit 1) saying each of `parts`; what it said on stderr.
fn assert_refused(output: &std::process::Output, parts: &[&str]) -> String {
    assert_eq!(output.status.code(), Some(1), "{}", describe_output(output));
    let told = String::from_utf8_lossy(&output.stderr).into_owned();
    for part in parts {
        assert!(told.contains(part), "{part:?} not in: {told}");
    }
    told
}

/// Issue 51 (5): `plugin push --plain-http` printed an install line without `--plain-http`,
/// which failed when pasted. Pasted as printed, it installs.
#[tokio::test]
async fn the_install_line_push_prints_carries_plain_http_and_installs_when_pasted() {
    let fixture = Fixture::new();
    let dir = fixture.temp.path().join("author");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(guests::PROBE, dir.join("probe.wasm")).unwrap();
    std::fs::write(dir.join("probe.toml"), V1).unwrap();
    let reference = fixture.reference("1.0.0").to_string();
    let wasm = dir.join("probe.wasm").display().to_string();
    let key = fixture.alice.display().to_string();
    let pushed = plugin_command(
        &["push", &wasm, &reference, "--sign", &key, "--plain-http"],
        &[],
        fixture.temp.path(),
    );
    assert!(pushed.status.success(), "{}", describe_output(&pushed));
    let stdout = String::from_utf8_lossy(&pushed.stdout).into_owned();
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("install it with: "))
        .unwrap_or_else(|| panic!("no install line: {stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[..3], ["forewarn", "plugin", "install"], "{line}");
    assert!(words.contains(&"--plain-http"), "{line}");
    // The operator's part: their plugin directory, and --yes for the consent.
    let mut pasted: Vec<&str> = words[2..].to_vec();
    pasted.push("--yes");
    let installed = fixture.cli(&pasted);
    assert!(
        installed.status.success(),
        "{}",
        describe_output(&installed)
    );
    assert_eq!(
        std::fs::read(fixture.plugin_dir().join("probe.wasm")).unwrap(),
        std::fs::read(guests::PROBE).unwrap()
    );
    let lock = forewarn_supply::lock::Lockfile::read(&fixture.plugin_dir()).unwrap();
    assert!(
        line.contains(&lock.plugins["probe"].source),
        "{line} / {}",
        lock.plugins["probe"].source
    );
}

/// Issue 51 (5): https:// to a registry that speaks plain HTTP said only "received corrupt
/// message of type InvalidContentType". It says so, then the fix.
#[tokio::test]
async fn https_to_a_plain_http_registry_is_told_to_pass_plain_http() {
    let fixture = Fixture::new();
    fixture.push("1", V1, Some(&fixture.alice)).await;
    let reference = fixture.reference("1").to_string();
    let pulled = fixture.temp.path().join("pulled");
    let pulled_arg = pulled.display().to_string();
    for args in [
        vec!["install", reference.as_str(), "--yes"],
        vec!["upgrade", "probe", reference.as_str(), "--yes"],
    ] {
        let output = fixture.cli(&args);
        assert!(!output.status.success(), "{}", describe_output(&output));
        let told = String::from_utf8_lossy(&output.stderr).into_owned();
        let problem = told.find("answered in plain HTTP, not TLS");
        let fix = told.find("pass --plain-http");
        assert!(
            problem.is_some() && fix.is_some() && problem < fix,
            "the problem, then the fix: {told}"
        );
    }
    let output = plugin_command(
        &["pull", &reference, "--to", &pulled_arg],
        &[],
        fixture.temp.path(),
    );
    assert!(!output.status.success(), "{}", describe_output(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("pass --plain-http"),
        "{}",
        describe_output(&output)
    );
    assert!(!pulled.exists());
    assert!(fixture.snapshot().is_empty());
}

/// Issue 51 (5): the credential variables were named only by a 401. A 403 names them too,
/// with where the credentials sent came from, and `--help` of the registry commands does.
#[tokio::test]
async fn a_forbidden_push_and_the_help_name_the_credential_variables() {
    let fixture = Fixture::new();
    fixture.registry.set_faults(Faults {
        forbid_uploads: true,
        ..Faults::default()
    });
    let reference = fixture.reference("1").to_string();
    for env in [
        vec![
            ("FOREWARN_REGISTRY_USER", "reader"),
            ("FOREWARN_REGISTRY_PASSWORD", "not-a-writer"),
        ],
        vec![],
    ] {
        let pushed = plugin_command(
            &["push", guests::PROBE, &reference, "--plain-http"],
            &env,
            fixture.temp.path(),
        );
        let told = assert_refused(
            &pushed,
            &[
                "403",
                "FOREWARN_REGISTRY_USER",
                "FOREWARN_REGISTRY_PASSWORD",
                "docker login",
            ],
        );
        let from_variables = told.contains("credentials from FOREWARN_REGISTRY_USER");
        assert_eq!(from_variables, !env.is_empty(), "{told}");
    }
    assert!(fixture.registry.manifest("acme/probe", "1").is_none());
    for command in ["push", "install", "upgrade", "pull"] {
        let help = plugin_command(&[command, "--help"], &[], fixture.temp.path());
        assert!(help.status.success(), "{}", describe_output(&help));
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        for variable in ["FOREWARN_REGISTRY_USER", "FOREWARN_REGISTRY_PASSWORD"] {
            assert!(help.contains(variable), "{command} --help: {help}");
        }
    }
}

/// Issue 51 (5): a second `plugin rollback` rolls forward to the newer version, and it put
/// back that version's wider grants without asking. It asks as `plugin upgrade` does:
/// without a terminal and without --yes nothing changes.
#[tokio::test]
async fn a_rollback_that_widens_the_grants_asks_as_an_upgrade_does() {
    let fixture = Fixture::new();
    fixture.installed_v1().await;
    fixture
        .push(
            "2",
            "[config]\nmode = \"approve\"\n[capabilities]\nactions = [\"stop-app\"]\n",
            Some(&fixture.alice),
        )
        .await;
    fixture
        .install("2", Mode::Upgrade, &mut ScriptedOperator::agreeing())
        .await
        .unwrap();
    let granted = |fixture: &Fixture| {
        let lock = forewarn_supply::lock::Lockfile::read(&fixture.plugin_dir()).unwrap();
        lock.plugins["probe"]
            .grants
            .capabilities
            .actions
            .contains(&"stop-app".to_owned())
    };
    assert!(granted(&fixture));
    // Back to v1: narrower, so not asked (no terminal, no --yes).
    let back = fixture.cli(&["rollback", "probe"]);
    assert!(back.status.success(), "{}", describe_output(&back));
    assert!(!granted(&fixture));
    assert_eq!(
        std::fs::read_to_string(fixture.plugin_dir().join("probe.toml")).unwrap(),
        V1
    );
    // Forward to v2 again: wider, so asked; no terminal and no --yes: nothing changes.
    let before = fixture.snapshot();
    let forward = fixture.cli(&["rollback", "probe"]);
    assert_refused(
        &forward,
        &[
            "+ actions: stop-app",
            "more than you agreed to before",
            "--yes",
        ],
    );
    assert_eq!(
        fixture.snapshot(),
        before,
        "the refused rollback changed files"
    );
    assert!(!granted(&fixture));
    let agreed = fixture.cli(&["rollback", "probe", "--yes"]);
    assert!(agreed.status.success(), "{}", describe_output(&agreed));
    assert!(granted(&fixture));
    assert!(
        std::fs::read_to_string(fixture.plugin_dir().join("probe.toml"))
            .unwrap()
            .contains("stop-app")
    );
}
