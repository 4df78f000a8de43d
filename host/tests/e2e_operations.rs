//! End-to-end tests of operating forewarn: `/metrics` and `/readyz` during a simulated
//! scenario, `forewarn status`, decision logs, `config check`, the systemd unit and the .deb.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use forewarn_daemon::config::Config;
use forewarn_daemon::log_messages::{PLUGIN_CALL_FAILED, PLUGIN_DECISION, VM_NAME_MISMATCH};
use forewarn_daemon::ops::status::{DaemonPhase, StatusSnapshot};
use forewarn_daemon::pipeline::state::ApprovalKind;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Setup, Simulator, TestEnv, accepted_approvals, http_get,
    now_unix_ms, wait_for, write_plugin_dir,
};
use forewarn_test_support::{forewarn_binary, guests};

const WAIT: Duration = Duration::from_secs(60);

fn forewarn() -> &'static Path {
    forewarn_binary!()
}

/// A daemon with plugins against a fresh simulator.
struct Running {
    /// The temp dir, config and simulator.
    env: Setup,
    daemon: Daemon,
    /// `127.0.0.1:PORT` of the admin endpoint.
    admin: String,
}

/// Starts the simulator on `scenario` at `speed`, lets `write_plugins` fill the plugin
/// directory, and starts the daemon for vm-a.
fn start(scenario: &str, speed: f64, write_plugins: impl FnOnce(&Path)) -> Running {
    let env = TestEnv::builder(forewarn())
        .scenario(scenario)
        .speed(speed)
        .prepare();
    write_plugins(&env.dir.path().join("plugins"));
    let daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);
    Running { env, daemon, admin }
}

/// A user Reboot at 20x for two probes: `patient` defers twice then approves, `stuck-once`
/// loops past its 300 ms budget on its first call, then approves.
fn start_patient_and_stuck_once() -> Running {
    start("user-reboot", 20.0, |dir| {
        write_plugin_dir(
            dir,
            Path::new(guests::PROBE),
            &[
                ProbePlugin::new("patient", "defer-until-attempt")
                    .config("attempts", "3")
                    .config("retry-ms", "100"),
                ProbePlugin::new("stuck-once", "loop-first-attempt").budget("300ms"),
            ],
        );
    })
}

/// The value of the series `series` (name with labels, exactly) in a Prometheus text body.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The sum of every series of `name` whose labels contain `label`.
fn metric_sum(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(&format!("{name}{{")) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn scrape(admin: &str) -> String {
    http_get(admin, "/metrics").unwrap_or_else(|error| panic!("GET /metrics: {error}"))
}

fn status_json(admin: &str) -> StatusSnapshot {
    let body = http_get(admin, "/status").unwrap_or_else(|error| panic!("GET /status: {error}"));
    serde_json::from_str(&body).unwrap_or_else(|error| panic!("bad /status ({error}): {body}"))
}

fn run(args: &[&str]) -> Output {
    Command::new(forewarn())
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run forewarn {args:?}: {error}"))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn status_history_tells_each_events_story_in_order_and_status_says_the_approval_was_sent() {
    let setup = start_patient_and_stuck_once();
    let approved = setup
        .env
        .simulator
        .wait_for_state(WAIT, "an accepted approval", |state| {
            state.approvals.iter().any(|approval| approval.accepted)
        });
    let event_id = approved.approvals[0].event_id.clone();
    let history = wait_for(WAIT, "the approval in /status/history", || {
        let body = http_get(&setup.admin, "/status/history")?;
        let history: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let has_approval = history["events"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|event| {
                event["event_id"] == event_id.as_str()
                    && event["entries"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|entry| entry["kind"] == "approved")
            });
        if has_approval { Ok(history) } else { Err(body) }
    });
    let event = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["event_id"] == event_id.as_str())
        .unwrap();
    assert_eq!(event["event_type"], "Reboot");
    let entries = event["entries"].as_array().unwrap();
    let first = &entries[0];
    assert_eq!(
        (first["kind"].as_str(), first["transition"].as_str()),
        (Some("transition"), Some("scheduled"))
    );
    let stamps: Vec<u64> = entries
        .iter()
        .map(|entry| entry["at_unix_ms"].as_u64().unwrap())
        .collect();
    assert!(
        stamps.windows(2).all(|pair| pair[0] <= pair[1]),
        "{stamps:?}"
    );
    let answers = |plugin: &str| -> Vec<(String, String)> {
        entries
            .iter()
            .filter(|entry| entry["kind"] == "plugin-answered" && entry["plugin"] == plugin)
            .map(|entry| {
                (
                    entry["phase"].as_str().unwrap().to_owned(),
                    entry["outcome"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let prepare = |outcome: &str| ("prepare".to_owned(), outcome.to_owned());
    assert_eq!(
        answers("patient")[..3],
        [prepare("defer"), prepare("defer"), prepare("approve")]
    );
    assert_eq!(answers("stuck-once")[0], prepare("budget-exceeded"));
    // The approval comes after every plugin's approving answer.
    let position =
        |wanted: &dyn Fn(&serde_json::Value) -> bool| entries.iter().position(wanted).unwrap();
    let approved_at = position(&|entry| entry["kind"] == "approved");
    for plugin in ["patient", "stuck-once"] {
        let approve = position(&|entry| {
            entry["kind"] == "plugin-answered"
                && entry["plugin"] == plugin
                && entry["outcome"] == "approve"
        });
        assert!(
            approve < approved_at,
            "{plugin} approved after the approval: {entries:?}"
        );
    }
    // The event runs for 30 s (10 min at 20x) after its approval: /status still has it, and
    // says the approval was sent once the daemon has IMDS's answer to the POST (the simulator
    // records the approval before it answers: on a loaded machine /status can still say
    // "due (sending)" in between, so this waits for the effect, far from its expected time).
    wait_for(WAIT, "/status to say the approval was sent", || {
        let snapshot = status_json(&setup.admin);
        let view = snapshot.events.iter().find(|view| view.id == event_id);
        match view.map(|view| view.approval_state) {
            Some(ApprovalKind::Sent) => Ok(()),
            _ => Err(format!("{snapshot:?}")),
        }
    });
}

#[test]
fn metrics_count_polls_plugin_outcomes_and_approvals_and_every_decision_is_logged() {
    let setup = start_patient_and_stuck_once();
    let healthz = http_get(&setup.admin, "/healthz").unwrap();
    assert_eq!(healthz.trim(), "ok");

    setup
        .env
        .simulator
        .wait_for_state(WAIT, "an accepted approval", |state| {
            state.approvals.iter().any(|approval| approval.accepted)
        });
    let text = wait_for(WAIT, "the approval in /metrics", || {
        let text = scrape(&setup.admin);
        if metric(&text, "forewarn_approvals_total") >= 1.0 {
            Ok(text)
        } else {
            Err(text)
        }
    });
    assert!(metric(&text, "forewarn_imds_polls_total") > 0.0, "{text}");
    assert!(
        metric(&text, "forewarn_imds_documents_total") > 0.0,
        "{text}"
    );
    assert!(
        metric_sum(
            &text,
            "forewarn_event_transitions_total",
            "event_type=\"Reboot\""
        ) >= 1.0,
        "{text}"
    );
    let calls = "forewarn_plugin_calls_total";
    assert!(
        metric_sum(
            &text,
            calls,
            "plugin=\"patient\",phase=\"prepare\",outcome=\"defer\""
        ) >= 2.0,
        "{text}"
    );
    assert!(
        metric_sum(
            &text,
            calls,
            "plugin=\"patient\",phase=\"prepare\",outcome=\"approve\""
        ) >= 1.0,
        "{text}"
    );
    assert!(
        metric_sum(
            &text,
            calls,
            "plugin=\"stuck-once\",phase=\"prepare\",outcome=\"budget-exceeded\""
        ) >= 1.0,
        "{text}"
    );
    assert!(
        metric(
            &text,
            "forewarn_plugin_call_duration_seconds_count{plugin=\"stuck-once\"}"
        ) >= 2.0,
        "{text}"
    );
    assert_eq!(metric(&text, "forewarn_plugins_loaded"), 2.0, "{text}");
    // Cardinality stays bounded: no event id ever becomes a label value.
    let event_ids: Vec<String> = setup
        .env
        .simulator
        .state()
        .history
        .iter()
        .map(|record| record.event_id.clone())
        .collect();
    assert!(!event_ids.is_empty());
    for id in &event_ids {
        assert!(
            !text.contains(id.as_str()),
            "event id {id} in /metrics:\n{text}"
        );
    }

    // The audit trail: one structured line per decision with event id, plugin, decision, reason.
    // The approval can reach IMDS before the test has read the approvals that led to it from
    // the daemon's output: wait for both plugins' (their earlier lines come before them).
    setup
        .daemon
        .wait_for_decisions(WAIT, "both plugins approving the prepare", |decisions| {
            ["patient", "stuck-once"].iter().all(|plugin| {
                decisions
                    .iter()
                    .any(|d| d.plugin == *plugin && d.phase == "prepare" && d.decision == "approve")
            })
        });
    let decisions: Vec<_> = setup
        .daemon
        .lines()
        .into_iter()
        .filter(|line| line.message() == PLUGIN_DECISION || line.message() == PLUGIN_CALL_FAILED)
        .collect();
    assert!(
        decisions.len() >= 4,
        "{}",
        setup.daemon.describe_for_failure()
    );
    for line in &decisions {
        for field in ["event_id", "plugin", "phase", "decision", "reason"] {
            assert!(
                line.fields.get(field).is_some(),
                "no {field} in {}",
                line.fields
            );
        }
        assert!(
            event_ids.iter().any(|id| id == line.text("event_id")),
            "{}",
            line.fields
        );
    }
    let failed = decisions
        .iter()
        .find(|line| line.text("plugin") == "stuck-once" && line.text("decision") != "approve")
        .unwrap_or_else(|| {
            panic!(
                "no failed call logged: {}",
                setup.daemon.describe_for_failure()
            )
        });
    assert!(!failed.text("reason").is_empty(), "{}", failed.fields);
}

#[test]
fn status_shows_the_event_its_decisions_plugins_and_polls_and_readyz_follows_plugins() {
    let setup = start("user-reboot", 1.0, |dir| {
        let probe = Path::new(guests::PROBE);
        std::fs::copy(probe, dir.join("holder.wasm")).unwrap();
        std::fs::write(
            dir.join("holder.toml"),
            "[config]\nmode = \"ready\"\n\n[capabilities]\nreadiness = true\n",
        )
        .unwrap();
        write_plugin_dir(dir, probe, &[ProbePlugin::new("waiter", "defer")]);
    });
    let snapshot = wait_for(WAIT, "both plugins' decisions in /status", || {
        let snapshot = status_json(&setup.admin);
        let decided = snapshot
            .events
            .first()
            .is_some_and(|event| event.plugins.len() == 2);
        if decided {
            Ok(snapshot)
        } else {
            Err(format!("{snapshot:?}"))
        }
    });
    let event = &snapshot.events[0];
    assert_eq!(snapshot.vm_name, "vm-a");
    assert_eq!(snapshot.phase, DaemonPhase::Running);
    assert_eq!(event.event_type, "Reboot");
    assert_eq!(event.status, "Scheduled");
    assert_eq!(event.approval, "pending");
    let time_left = event.time_left_seconds.expect("a NotBefore");
    assert!((1..=15 * 60).contains(&time_left), "{event:?}");
    let waiter = event
        .plugins
        .iter()
        .find(|decision| decision.plugin == "waiter")
        .unwrap();
    assert_eq!(
        (waiter.decision.as_str(), waiter.reason.as_str()),
        ("defer", "not yet")
    );
    assert_eq!(snapshot.plugins.len(), 2);
    assert!(
        snapshot
            .plugins
            .iter()
            .all(|plugin| plugin.content_hash.len() == 64)
    );
    assert!(snapshot.imds.polls > 0 && snapshot.imds.last_success.is_some());
    assert!(!snapshot.readiness.ready);
    assert_eq!(snapshot.readiness.held_by, ["holder"]);
    let readyz = http_get(&setup.admin, "/readyz").unwrap_err();
    assert!(readyz.contains("503"), "{readyz}");

    let url = format!("http://{}", setup.admin);
    let table = run(&["status", "--admin", &url]);
    assert!(table.status.success(), "{}", stderr(&table));
    let table = stdout(&table);
    let row = table
        .lines()
        .find(|line| line.starts_with(event.id.as_str()))
        .unwrap_or_else(|| panic!("no row for {}:\n{table}", event.id));
    for cell in ["Reboot", "Scheduled", "pending"] {
        assert!(row.contains(cell), "{cell} missing: {row}");
    }
    assert!(row.contains(event.not_before.as_deref().unwrap()), "{row}");
    assert!(
        row.split_whitespace()
            .any(|cell| cell.ends_with('s') && cell.contains('m')),
        "time left: {row}"
    );
    let waiter_line = table
        .lines()
        .find(|line| line.trim_start().starts_with("waiter") && line.contains("defer"))
        .unwrap_or_else(|| panic!("no decision line for waiter:\n{table}"));
    assert!(waiter_line.contains("not yet"), "{waiter_line}");
    let short_hash = &snapshot.plugins[0].content_hash[..12];
    assert!(table.contains(short_hash), "{table}");
    assert!(table.contains("NOT READY (held by holder)"), "{table}");
    let imds = table
        .lines()
        .find(|line| line.starts_with("IMDS: "))
        .unwrap_or_else(|| panic!("no IMDS line:\n{table}"));
    let polls: u64 = imds["IMDS: ".len()..]
        .split(' ')
        .next()
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no poll count: {imds}"));
    assert!(polls >= snapshot.imds.polls, "{imds}");
    assert!(!imds.contains("last success never"), "{imds}");
    assert!(imds.ends_with(": ok"), "the polls are healthy: {imds}");

    let json = run(&["status", "--admin", &url, "--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let parsed: StatusSnapshot = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(parsed.events.len(), 1);
    assert_eq!(parsed.events[0].id, event.id);

    // Without --admin, the address comes from the config file's `[admin] listen`.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!("[admin]\nlisten = \"{}\"\n", setup.admin),
    )
    .unwrap();
    let from_config = run(&["status", "--config", config.path().to_str().unwrap()]);
    assert!(from_config.status.success(), "{}", stderr(&from_config));
    assert!(stdout(&from_config).contains(event.id.as_str()));

    let unreachable = run(&["status", "--admin", "http://127.0.0.1:9"]);
    assert!(!unreachable.status.success());
    assert!(
        stderr(&unreachable).contains("--admin"),
        "{}",
        stderr(&unreachable)
    );
}

#[test]
fn config_example_is_valid_and_config_check_names_the_line_and_key() {
    let example = run(&["config", "example"]);
    assert!(example.status.success());
    let text = stdout(&example);
    assert_eq!(Config::parse(&text).unwrap(), Config::default());

    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, &text).unwrap();
    let checked = run(&["config", "check", good.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    assert_eq!(stdout(&checked), format!("{}: ok\n", good.display()));

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "vm-name = \"vm-a\"\n\n[policy]\nobserve = true\n").unwrap();
    let rejected = run(&["config", "check", bad.to_str().unwrap()]);
    assert!(!rejected.status.success());
    let message = stderr(&rejected);
    assert!(message.contains("line 4"), "{message}");
    assert!(message.contains("observe"), "{message}");

    let wrong_type = dir.path().join("wrong-type.toml");
    std::fs::write(&wrong_type, "[imds]\npoll-interval = 5\n").unwrap();
    let rejected = run(&["config", "check", wrong_type.to_str().unwrap()]);
    let message = stderr(&rejected);
    assert!(!rejected.status.success());
    assert!(
        message.contains("line 2") && message.contains("poll-interval"),
        "{message}"
    );
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn systemd_unit_passes_systemd_analyze_verify() {
    let unit =
        std::fs::read_to_string(repository_root().join("packaging/forewarn.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/forewarn run"));
    assert!(
        unit.contains("\nLimitNOFILE=4096\n"),
        "the unit must bound file descriptors"
    );
    // verify checks that ExecStart's binary exists: point it at the one just built.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("forewarn.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/bin/forewarn", &forewarn().to_string_lossy()),
    )
    .unwrap();
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run systemd-analyze ({error}): install Debian's `systemd` package (apt-get install systemd)")
        });
    let complaints = stderr(&output);
    assert!(
        output.status.success(),
        "systemd-analyze verify failed: {complaints}"
    );
    assert!(
        complaints.trim().is_empty(),
        "systemd-analyze verify warned: {complaints}"
    );
}

#[test]
fn deb_installs_binary_unit_config_and_plugin_directories() {
    // Package the binary this test run built (debug profile: the size-optimised, fat-LTO
    // release build takes 7-8 minutes more); release packaging is the same with --release paths.
    let profile_dir = forewarn().parent().unwrap();
    let exported = run(&[
        "plugin",
        "export-bundled",
        profile_dir.join("bundled-plugins").to_str().unwrap(),
    ]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let out = tempfile::tempdir().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .args([
            "deb",
            "-p",
            "forewarn-host",
            "--profile",
            "dev",
            "--no-build",
            "-o",
        ])
        .arg(out.path())
        .current_dir(repository_root())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cargo deb failed (install it with `cargo install cargo-deb --version 3.8.0 --locked`): {}",
        stderr(&built)
    );
    let deb = std::fs::read_dir(out.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .expect("a .deb in the output directory");
    let listing = Command::new("dpkg-deb")
        .arg("-c")
        .arg(&deb)
        .output()
        .unwrap();
    assert!(listing.status.success(), "{}", stderr(&listing));
    let listing = stdout(&listing);
    for path in [
        "./usr/bin/forewarn",
        "./usr/lib/systemd/system/forewarn.service",
        "./etc/forewarn/forewarn.toml",
        "./etc/forewarn/plugins.d/",
        "./usr/share/forewarn/plugins/lb-drain.wasm",
        "./usr/share/forewarn/plugins/lb-drain.toml",
        "./usr/share/forewarn/plugins/checkpoint.wasm",
        "./usr/share/forewarn/plugins/graceful-shutdown.wasm",
        "./usr/share/forewarn/plugins/notify.wasm",
        "./usr/share/forewarn/plugins/notify.toml",
        "./usr/share/doc/forewarn/operations.md",
    ] {
        assert!(
            listing.lines().any(|line| line.ends_with(path)),
            "{path} missing from the .deb:\n{listing}"
        );
    }
    let conffiles = Command::new("dpkg-deb")
        .arg("-I")
        .arg(&deb)
        .arg("conffiles")
        .output()
        .unwrap();
    assert!(
        stdout(&conffiles)
            .lines()
            .any(|line| line == "/etc/forewarn/forewarn.toml")
    );

    let root = tempfile::tempdir().unwrap();
    let extracted = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(root.path())
        .output()
        .unwrap();
    assert!(extracted.status.success(), "{}", stderr(&extracted));
    let config = std::fs::read_to_string(root.path().join("etc/forewarn/forewarn.toml")).unwrap();
    assert_eq!(config, stdout(&run(&["config", "example"])));
    let packaged = root.path().join("usr/bin/forewarn");
    let version = Command::new(&packaged).arg("--version").output().unwrap();
    assert!(
        stdout(&version).starts_with("forewarn "),
        "{}",
        stdout(&version)
    );
}

/// Reads datagrams from `socket` until one equals `wanted`; panics after `WAIT`.
fn wait_for_notification(
    socket: &std::os::unix::net::UnixDatagram,
    wanted: &str,
    seen: &mut Vec<String>,
) {
    let deadline = std::time::Instant::now() + WAIT;
    let mut buffer = [0u8; 4096];
    while std::time::Instant::now() < deadline {
        let Ok(length) = socket.recv(&mut buffer) else {
            continue;
        };
        let message = String::from_utf8_lossy(&buffer[..length]).into_owned();
        let found = message.lines().any(|line| line == wanted);
        seen.push(message);
        if found {
            return;
        }
    }
    panic!("no {wanted} from forewarn within {WAIT:?}; got {seen:?}");
}

#[test]
fn tells_systemd_ready_watchdog_and_stopping() {
    // READY=1 waits for IMDS's first document (e2e_imds_realism tests when it arrives).
    let env = TestEnv::builder(forewarn())
        .scenario("user-reboot")
        .prepare();
    let config = env.config.clone();
    let socket_path = env.dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let child = Command::new(forewarn())
        .args(["--log-format", "json", "run", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "300000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut daemon = forewarn_test_support::harness::ChildGuard::new(child);
    let mut seen = Vec::new();
    wait_for_notification(&socket, "READY=1", &mut seen);
    wait_for_notification(&socket, "WATCHDOG=1", &mut seen);
    wait_for_notification(&socket, "WATCHDOG=1", &mut seen);
    let terminated = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    wait_for_notification(&socket, "STOPPING=1", &mut seen);
    wait_for(WAIT, "forewarn to exit after SIGTERM", || {
        if daemon.has_exited() {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    });
}

/// Without `vm-name`, on an IMDS whose instance metadata never answers, the daemon says after
/// `vm-name-patience` what to set, in `/status` and in `forewarn status`, which also accepts
/// the admin address in the bare `host:port` form of `[admin] listen`.
#[test]
fn a_missing_vm_name_is_reported_in_status_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    // A port nothing listens on: every instance-metadata lookup fails at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let imds = closed.local_addr().unwrap();
    drop(closed);
    let config_path = dir.path().join("forewarn.toml");
    std::fs::write(
        &config_path,
        format!(
            "vm-name = \"\"\nstate-dir = \"{}\"\nplugin-dir = \"{}\"\n\n[imds]\nurl = \"http://{imds}\"\nvm-name-patience = \"1s\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
            dir.path().join("state").display(),
            plugin_dir.display(),
        ),
    )
    .unwrap();
    let daemon = Daemon::start(forewarn(), &config_path);
    let admin = daemon.admin_address(WAIT);
    let waiting_for = wait_for(WAIT, "status to say what the daemon waits for", || {
        let body = http_get(&admin, "/status")?;
        let snapshot: StatusSnapshot = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        match (snapshot.phase, snapshot.waiting_for) {
            (DaemonPhase::Starting, Some(waiting_for)) => Ok(waiting_for),
            (phase, other) => Err(format!("phase {phase}, waiting_for {other:?}")),
        }
    });
    assert!(waiting_for.contains("vm-name = \""), "{waiting_for}");
    assert!(waiting_for.contains(&imds.to_string()), "{waiting_for}");

    let output = Command::new(forewarn())
        .args(["status", "--admin", &admin])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "forewarn status --admin {admin}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(table.contains(&waiting_for), "{table}");
}

/// A configured `vm-name` that is not the name IMDS gives the VM is said at start, as an
/// error naming both: Azure lists the VM by its IMDS name, so its events would be ignored.
#[test]
fn a_vm_name_that_imds_does_not_know_is_reported_with_both_names() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    let simulator = Simulator::builder(forewarn()).scenario("idle").start();
    let config = DaemonConfig {
        vm_name: "vm-renamed".into(),
        ..DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url)
    };
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);
    let daemon = Daemon::start(forewarn(), &config_path);
    let line = wait_for(WAIT, "the vm-name mismatch to be logged", || {
        match daemon.lines_with_message(VM_NAME_MISMATCH).first() {
            Some(line) => Ok(line.clone()),
            None => Err(daemon.describe_for_failure()),
        }
    });
    assert_eq!(line.text("configured"), "vm-renamed");
    assert_eq!(line.text("imds_name"), "vm-a");
}

// ---- admin endpoint limits (docs/operations.md, "Admin endpoint limits") ----------------

/// Idle connections a hostile local client opens to the admin port.
const ADMIN_FLOOD_CONNECTIONS: usize = 2000;
/// The daemon's file-descriptor limit in the flood test: far below the flood.
const FLOOD_DAEMON_FD_LIMIT: u64 = 256;

/// The flood scenarios: no event until the test makes one (`flood_reboot`), once its flood
/// is open, however long the daemon's start and the connections took on a loaded machine.
fn flood_env() -> Setup {
    TestEnv::builder(forewarn())
        .scenario("idle")
        .plugins(&[ProbePlugin::new("ok", "approve")])
        .prepare()
}

/// A Reboot of vm-a appearing now (10 minutes of notice), approved by the flood's plugin.
fn flood_reboot(simulator: &Simulator) -> String {
    simulator.generate_event(
        "{\"type\": \"Reboot\", \"not_before_seconds\": 600, \"resources\": [\"vm-a\"], \
         \"runs_for_seconds\": 2}",
    )
}

/// GETs of the document the simulator answered 200 after `since` (Unix ms).
fn polls_answered_after(state: &forewarn_simulator::StateSnapshot, since: u64) -> usize {
    state
        .requests
        .iter()
        .filter(|request| request.at_unix_ms > since && request.method == "GET")
        .filter(|request| request.path.contains("scheduledevents") && request.status == 200)
        .count()
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit, so it can hold the flood.
fn raise_own_fd_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed in.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0, "getrlimit failed");
    if limit.rlim_cur >= wanted {
        return;
    }
    assert!(
        limit.rlim_max >= wanted,
        "this test needs {wanted} file descriptors; raise the hard limit (ulimit -Hn)"
    );
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: as above.
    let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(set, 0, "setrlimit failed");
}

#[test]
fn two_thousand_idle_admin_connections_stop_neither_polls_nor_approvals() {
    raise_own_fd_limit(ADMIN_FLOOD_CONNECTIONS as u64 + 256);
    let env = flood_env();
    let simulator = &env.simulator;
    let daemon = Daemon::start_with_fd_limit(forewarn(), &env.config, FLOOD_DAEMON_FD_LIMIT);
    let admin = daemon.admin_address(WAIT);

    // Open the flood and keep every connection open (and silent) to the end of the test.
    // Some connects may fail (a daemon out of descriptors stops accepting); the flood
    // must still be larger than everything the daemon could hold open.
    let idle: Vec<std::net::TcpStream> = (0..ADMIN_FLOOD_CONNECTIONS)
        .filter_map(|_| std::net::TcpStream::connect(&admin).ok())
        .collect();
    assert!(
        idle.len() as u64 > FLOOD_DAEMON_FD_LIMIT,
        "only {} connections opened, not more than the daemon's {FLOOD_DAEMON_FD_LIMIT} descriptors",
        idle.len()
    );
    let flooded_at = now_unix_ms();
    // The event appears only now, with the flood open: its approval is made under it.
    let reboot = flood_reboot(simulator);
    simulator.wait_for_state(
        WAIT,
        "an accepted approval and two answered polls during the flood",
        |state| {
            !accepted_approvals(state, &reboot).is_empty()
                && polls_answered_after(state, flooded_at) >= 2
        },
    );
    // The endpoint still answers once the idle connections are cut.
    let healthz = wait_for(WAIT, "/healthz during the flood", || {
        http_get(&admin, "/healthz")
    });
    assert_eq!(healthz.trim(), "ok");
    drop(idle);
}

// ---- /readyz under a starving peer (docs/operations.md, "Admin endpoint limits") --------

/// Idle connections the starving peer keeps trying to hold (reopening those closed).
const STARVING_CONNECTIONS: usize = 300;
/// Probes of `/readyz` from another address while it does. Each is given 30 s, far from
/// the milliseconds one takes: the test asserts that every probe is answered, not how fast
/// (`bench-admin readyz` measures that against an unstarved baseline, BENCHMARKS.md). A probe
/// the daemon turns away is closed unanswered at once, so a starved probe fails the test
/// whatever the bound.
const READYZ_PROBES: usize = 100;
const READYZ_PROBE_WITHIN: Duration = Duration::from_secs(30);
/// Probes of `/readyz` while a group of peers holds one connection each (issue 45 part 5
/// measured 2–20 of 60 answered against 64 peers), and how many must be answered.
const GROUP_READYZ_PROBES: usize = 60;
const GROUP_READYZ_ANSWERED: usize = 59;

/// Holds up to `per_source` idle connections to `admin` from each of `sources` (bound
/// before connecting) until `stop`, reopening each one the daemon closes; counts every
/// connection it opened.
fn starve(
    admin: std::net::SocketAddr,
    sources: &[std::net::IpAddr],
    per_source: usize,
    stop: &std::sync::atomic::AtomicBool,
    opened: &std::sync::atomic::AtomicUsize,
) {
    use std::io::Read;
    use std::sync::atomic::Ordering;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the starving peers");
    let mut held: Vec<(std::net::IpAddr, Option<std::net::TcpStream>)> = sources
        .iter()
        .flat_map(|source| std::iter::repeat_n(*source, per_source))
        .map(|source| (source, None))
        .collect();
    while !stop.load(Ordering::Relaxed) {
        for (source, slot) in &mut held {
            let closed = match slot {
                None => true,
                Some(stream) => match stream.read(&mut [0u8; 64]) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
                },
            };
            if closed {
                *slot = connect_from(&runtime, *source, admin);
                if slot.is_some() {
                    opened.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A non-blocking connection to `admin` from `source`, if one opens.
fn connect_from(
    runtime: &tokio::runtime::Runtime,
    source: std::net::IpAddr,
    admin: std::net::SocketAddr,
) -> Option<std::net::TcpStream> {
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().ok()?;
        socket.bind(std::net::SocketAddr::new(source, 0)).ok()?;
        let stream = socket.connect(admin).await.ok()?;
        let stream = stream.into_std().ok()?;
        stream.set_nonblocking(true).ok()?;
        Some(stream)
    })
}

/// `GET /readyz` from `source` (bound before connecting): how long the endpoint took to
/// answer (200 or 503), or why it did not within `within`.
fn readyz_answers_from(
    runtime: &tokio::runtime::Runtime,
    source: std::net::IpAddr,
    admin: std::net::SocketAddr,
    within: Duration,
) -> Result<Duration, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sent = std::time::Instant::now();
    let probe = async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::new(source, 0))?;
        let mut stream = socket.connect(admin).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<Vec<u8>, std::io::Error>(answer)
    };
    match runtime.block_on(async { tokio::time::timeout(within, probe).await }) {
        Ok(Ok(answer))
            if answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.1 503") =>
        {
            Ok(sent.elapsed())
        }
        Ok(Ok(answer)) => Err(format!(
            "answered {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(80)])
        )),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {within:?}")),
    }
}

/// What became of the probes while peers starved the admin endpoint.
struct Starved {
    /// Each probe's time to an answer, or why it got none.
    probes: Vec<Result<Duration, String>>,
    /// Connections the starving peers opened in all.
    opened: usize,
}

impl Starved {
    /// The probes not answered: their number, and why.
    fn unanswered(&self) -> Vec<(usize, &String)> {
        self.probes
            .iter()
            .enumerate()
            .filter_map(|(index, probe)| probe.as_ref().err().map(|why| (index, why)))
            .collect()
    }

    /// Says how it went (on stderr, with `--nocapture`).
    fn report(&self, who: &str) {
        let slowest = self
            .probes
            .iter()
            .filter_map(|probe| probe.as_ref().ok())
            .max();
        eprintln!(
            "/readyz answered {} of {} probes from 127.0.0.2 (the slowest in {slowest:?}) while \
             {who} ({} connections opened)",
            self.probes.len() - self.unanswered().len(),
            self.probes.len(),
            self.opened
        );
    }
}

/// Starts a daemon; lets `per_source` connections from each of `sources` starve its admin
/// endpoint (reopening those closed); sends `probes` `/readyz` probes, one at a time, from
/// 127.0.0.2 meanwhile; and checks that IMDS polls and the approval of an event appearing
/// under the starving peers go on.
fn probe_readyz_while_starved(
    sources: &[std::net::IpAddr],
    per_source: usize,
    probes: usize,
) -> Starved {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let connections = sources.len() * per_source;
    raise_own_fd_limit(connections as u64 + 256);
    let env = flood_env();
    let daemon = env.start_daemon();
    let admin: std::net::SocketAddr = daemon.admin_address(WAIT).parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let starving = {
        let (stop, opened, sources) = (stop.clone(), opened.clone(), sources.to_vec());
        std::thread::spawn(move || starve(admin, &sources, per_source, &stop, &opened))
    };
    wait_for(WAIT, "the starving peers' connections open", || {
        let count = opened.load(Ordering::Relaxed);
        (count >= connections)
            .then_some(())
            .ok_or(format!("{count} opened"))
    });
    let flooded_at = now_unix_ms();
    // The event appears only now, with the starving peers at work.
    let reboot = flood_reboot(&env.simulator);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let probe_source: std::net::IpAddr = "127.0.0.2".parse().unwrap();
    assert!(!sources.contains(&probe_source));
    let probes: Vec<Result<Duration, String>> = (0..probes)
        .map(|_| readyz_answers_from(&runtime, probe_source, admin, READYZ_PROBE_WITHIN))
        .collect();
    env.simulator.wait_for_state(
        WAIT,
        "an accepted approval and two answered polls under the starving peers",
        |state| {
            !accepted_approvals(state, &reboot).is_empty()
                && polls_answered_after(state, flooded_at) >= 2
        },
    );
    stop.store(true, Ordering::Relaxed);
    starving.join().unwrap();
    Starved {
        probes,
        opened: opened.load(Ordering::Relaxed),
    }
}

/// One peer (127.0.0.1) keeps 300 idle connections to the admin port, reopening those the
/// daemon closes; every one of 100 `/readyz` probes from another address (127.0.0.2), one at
/// a time, is answered, and IMDS polls and the approval of an event appearing meanwhile go
/// on.
#[test]
fn a_peer_holding_hundreds_of_idle_connections_cannot_starve_readyz() {
    let hog: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let starved = probe_readyz_while_starved(&[hog], STARVING_CONNECTIONS, READYZ_PROBES);
    starved.report(&format!(
        "127.0.0.1 held {STARVING_CONNECTIONS} idle connections"
    ));
    let unanswered = starved.unanswered();
    assert!(
        unanswered.is_empty(),
        "{} of {READYZ_PROBES} /readyz probes were not answered (probe number, why): {unanswered:?}",
        unanswered.len()
    );
}

/// `count` loopback addresses 127.1.0.1, 127.1.0.2, … (127.0.0.0/8 is all loopback).
fn group_of_peers(count: usize) -> Vec<std::net::IpAddr> {
    (0..count)
        .map(|index| {
            let high = u8::try_from(index / 250 + 1).expect("at most 63 750 peers");
            let low = u8::try_from(index % 250 + 1).expect("below 251");
            std::net::IpAddr::from([127, high, 0, low])
        })
        .collect()
}

/// A group of `peers` loopback addresses each keeps one idle connection to the admin port,
/// reopening it when the daemon closes it; at least 59 of 60 `/readyz` probes from
/// 127.0.0.2 are answered (issue 45 part 5: 64 peers left 2–20 of 60 answered).
fn a_group_of_peers_cannot_starve_readyz(peers: usize) {
    let group = group_of_peers(peers);
    let starved = probe_readyz_while_starved(&group, 1, GROUP_READYZ_PROBES);
    starved.report(&format!("{peers} peers held one idle connection each"));
    let unanswered = starved.unanswered();
    assert!(
        GROUP_READYZ_PROBES - unanswered.len() >= GROUP_READYZ_ANSWERED,
        "{} of {GROUP_READYZ_PROBES} /readyz probes were not answered while {peers} peers held \
         one connection each (probe number, why): {unanswered:?}",
        unanswered.len()
    );
}

/// As many peers as the endpoint has slots (64), one connection each.
#[test]
fn sixty_four_peers_holding_one_connection_each_cannot_starve_readyz() {
    a_group_of_peers_cannot_starve_readyz(64);
}

/// Three times as many peers as slots (200), one connection each: they take slots from
/// one another all the time.
#[test]
fn two_hundred_peers_holding_one_connection_each_cannot_starve_readyz() {
    a_group_of_peers_cannot_starve_readyz(200);
}

/// DNS rebinding: a page whose name was made to resolve to the admin address reads nothing
/// through a browser (its Host is refused with 421), while `/readyz` still answers whatever
/// the Host (a load balancer may probe by a name the daemon was not told of).
#[test]
fn a_page_rebound_to_the_admin_endpoint_by_dns_reads_nothing() {
    let running = start("idle", 1.0, |_| {});
    let admin = &running.admin;
    for path in ["/status", "/status/history", "/metrics", "/"] {
        let answer = raw_get_with_host(admin, path, "evil.example:9555");
        assert!(answer.starts_with("HTTP/1.1 421"), "{path}: {answer}");
        assert!(
            answer.contains("host-names"),
            "the refusal names the fix: {answer}"
        );
    }
    let readyz = raw_get_with_host(admin, "/readyz", "evil.example:9555");
    assert!(readyz.starts_with("HTTP/1.1 200"), "{readyz}");
    // The endpoint's own address and localhost are served.
    for host in [admin.as_str(), "localhost:9555", "[::1]:9555"] {
        let answer = raw_get_with_host(admin, "/status", host);
        assert!(answer.starts_with("HTTP/1.1 200"), "{host}: {answer}");
    }
}

/// `GET path` sending `Host: host`; the whole answer, status line first.
fn raw_get_with_host(admin: &str, path: &str, host: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(admin).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}
