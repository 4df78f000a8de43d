//! What ships with forewarn for running a fleet, checked by the tools that consume it:
//! the Prometheus alert rules (`promtool check rules`, and their unit tests with
//! `promtool test rules`) and the fleet's scrape configuration (`promtool check config`),
//! the Grafana dashboard (every query evaluated by a real Prometheus
//! scraping a daemon that handled an event against the simulator), the `.rpm` (built from
//! the binary this run built, read with `rpm`), and the cloud-init example (`cloud-init
//! schema`). tests/run.sh installs prometheus, rpm and cloud-init from Debian's packages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use forewarn_simulator::stable_event_id;
use forewarn_test_support::etcd::Etcd;
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    ChildGuard, ProbePlugin, TestEnv, free_loopback_address, http_get, repository_root, wait_for,
};
use forewarn_test_support::pki::find_on_path;
use tempfile::TempDir;

const WAIT: Duration = Duration::from_secs(60);

fn prometheus_dir() -> PathBuf {
    repository_root().join("packaging/prometheus")
}

/// `program` from PATH, or a panic saying which Debian package has it.
fn tool(program: &str, package: &str) -> PathBuf {
    find_on_path(program).unwrap_or_else(|| {
        panic!(
            "{program} is not installed: install Debian's `{package}` package \
             (`apt-get install -y --no-install-recommends {package}`; tests/run.sh does)"
        )
    })
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn alert_rules_pass_their_unit_tests_and_the_fleet_config_is_valid() {
    let promtool = tool("promtool", "prometheus");
    let dir = prometheus_dir();
    let checked = run(Command::new(&promtool)
        .args(["check", "rules", "forewarn-alerts.yml"])
        .current_dir(&dir));
    assert!(checked.status.success(), "{}", text(&checked));
    let tested = run(Command::new(&promtool)
        .args(["test", "rules", "forewarn-alerts.test.yml"])
        .current_dir(&dir));
    assert!(tested.status.success(), "{}", text(&tested));
    let fleet = run(Command::new(&promtool)
        .args(["check", "config", "prometheus-fleet.yml"])
        .current_dir(&dir));
    assert!(fleet.status.success(), "{}", text(&fleet));
    // Every alert of the file has a unit test that makes it fire.
    let rules = std::fs::read_to_string(dir.join("forewarn-alerts.yml")).expect("the rules");
    let tests = std::fs::read_to_string(dir.join("forewarn-alerts.test.yml")).expect("tests");
    for line in rules.lines() {
        let Some(alert) = line.trim().strip_prefix("- alert: ") else {
            continue;
        };
        assert!(
            tests.contains(&format!(
                "alertname: {alert}\n        exp_alerts:\n          - "
            )),
            "{alert} has no unit test in which it fires"
        );
    }
}

/// A Prometheus (Debian's) on loopback with its own config and data, scraping every second.
struct Prometheus {
    address: String,
    _process: ChildGuard,
    _dir: TempDir,
}

impl Prometheus {
    /// Starts it scraping `target` as job "forewarn", with the shipped alert rules loaded.
    fn start(target: &str) -> Prometheus {
        let binary = tool("prometheus", "prometheus");
        let dir = TempDir::new().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        let rules = prometheus_dir().join("forewarn-alerts.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n\
                 scrape_configs:\n  - job_name: forewarn\n    static_configs:\n      - targets: [\"{target}\"]\n",
                rules.display()
            ),
        )
        .expect("write prometheus.yml");
        let address = free_loopback_address();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("its log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start prometheus: {error}"));
        let prometheus = Prometheus {
            address,
            _process: ChildGuard::new(child),
            _dir: dir,
        };
        wait_for(WAIT, "Prometheus to be ready", || {
            http_get(&prometheus.address, "/-/ready")
        });
        prometheus
    }

    /// An instant query; the samples of its result (`data.result`), or why there are none.
    fn query(&self, promql: &str) -> Result<Vec<serde_json::Value>, String> {
        let path = format!("/api/v1/query?query={}", percent_encode(promql));
        let body = http_get(&self.address, &path)?;
        let answer: serde_json::Value =
            serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
        if answer["status"] != "success" {
            return Err(format!("query failed: {body}"));
        }
        let result = answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if result.is_empty() {
            return Err(format!("no data: {body}"));
        }
        Ok(result)
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// Every PromQL expression of the dashboard: panel targets and `label_values` variables.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target's expr");
            let title = panel["title"].as_str().unwrap_or("?");
            queries.push((title.to_owned(), expr.to_owned()));
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(definition) = variable["definition"].as_str() else {
            continue;
        };
        // label_values(METRIC, LABEL): the metric must have the label.
        let inner = definition
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .expect("a label_values(METRIC, LABEL) variable");
        let (metric, label) = inner.split_once(',').expect("METRIC, LABEL");
        let name = variable["name"].as_str().unwrap_or("?");
        queries.push((
            format!("variable {name}"),
            format!("count by ({}) ({})", label.trim(), metric.trim()),
        ));
    }
    queries
}

/// What Grafana puts in place of the dashboard's variables: every VM, a five-minute window.
fn as_grafana_sends(expr: &str) -> String {
    let expr = expr
        .replace("$instance", ".*")
        .replace("$__rate_interval", "5m")
        .replace("$__range", "1h");
    assert!(
        !expr.contains('$'),
        "a variable the test does not know: {expr}"
    );
    expr
}

/// One Reboot for vm-a, with IMDS failing its first three polls and refusing approvals
/// until 20 s (the approval comes at about 15 s: stuck-once is retried 5 s after it ran out
/// of its budget), so that every panel has something to show.
const MONITORED_SCENARIO: &str = "name = \"monitored\"\n\
     description = \"One Reboot for vm-a; IMDS fails the first polls and the first approval.\"\n\
     end_after = \"40s\"\n\n\
     [[events]]\n\
     type = \"Reboot\"\n\
     appear_at = \"10s\"\n\
     notice = \"5m\"\n\
     runs_for = \"2s\"\n";

#[test]
fn every_dashboard_query_returns_data_from_prometheus_scraping_a_daemon() {
    let etcd = Etcd::start(None);
    let env = TestEnv::builder(forewarn_binary!())
        .scenario_text(MONITORED_SCENARIO)
        .fault("kind = \"status\"\nstatus = 500\nfirst_requests = 3")
        .fault("kind = \"status\"\nstatus = 500\nmethods = [\"POST\"]\nuntil = \"20s\"")
        .plugins(&[
            ProbePlugin::new("patient", "defer-until-attempt")
                .config("attempts", "3")
                .config("retry-ms", "100"),
            ProbePlugin::new("stuck-once", "loop-first-attempt").budget("300ms"),
        ])
        .prepare();
    // With an etcd, so that the coordination panels have a link to show.
    let mut config = std::fs::read_to_string(&env.config).expect("the daemon config");
    config.push_str(&format!(
        "\n[coordination]\nendpoints = [\"{}\"]\n",
        etcd.endpoint()
    ));
    std::fs::write(&env.config, config).expect("write the daemon config");
    let daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);
    let prometheus = Prometheus::start(&admin);

    let event_id = stable_event_id("monitored", 0);
    env.simulator
        .wait_for_state(WAIT, "the Reboot to be approved and to start", |state| {
            state.approvals.iter().any(|approval| approval.accepted)
                && state.history.iter().any(|record| {
                    record.event_id == event_id
                        && record.transition == forewarn_simulator::Transition::Started
                })
        });
    // Prometheus has scraped the daemon since, and evaluated the rules on it.
    wait_for(
        WAIT,
        "Prometheus to scrape the approval and the refused one",
        || {
            let scraped = |series: &str| prometheus.query(&format!("{series} > 0"));
            let metrics = http_get(&admin, "/metrics").unwrap_or_default();
            let approvals: Vec<&str> = metrics
                .lines()
                .filter(|line| line.starts_with("forewarn_approval"))
                .collect();
            scraped("forewarn_approvals_total")
                .and(scraped("forewarn_approval_failures_total"))
                .map_err(|error| {
                    format!(
                        "{error}; the daemon says {approvals:?}; {}",
                        forewarn_test_support::harness::summarize_state(&env.simulator.state())
                    )
                })
        },
    );
    let firing = wait_for(
        WAIT,
        "the shipped rule ForewarnPluginCallsFailing to fire",
        || {
            prometheus
                .query("ALERTS{alertname=\"ForewarnPluginCallsFailing\", alertstate=\"firing\"}")
        },
    );
    assert_eq!(firing[0]["metric"]["plugin"], "stuck-once", "{firing:?}");
    assert_eq!(
        firing[0]["metric"]["outcome"], "budget-exceeded",
        "{firing:?}"
    );

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prometheus_dir().join("forewarn-dashboard.json"))
            .expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "{queries:?}");
    let failures: Vec<String> = queries
        .iter()
        .filter_map(|(title, expr)| {
            let sent = as_grafana_sends(expr);
            match prometheus.query(&sent) {
                Ok(samples) if samples.iter().all(is_nan) => {
                    Some(format!("{title}: `{sent}` answers only NaN: {samples:?}"))
                }
                Ok(_) => None,
                Err(error) => Some(format!("{title}: `{sent}`: {error}")),
            }
        })
        .collect();
    assert!(
        failures.is_empty(),
        "dashboard queries without data:\n{}",
        failures.join("\n")
    );
    println!(
        "dashboard: {} queries, each answered with data by Prometheus",
        queries.len()
    );
}

fn is_nan(sample: &serde_json::Value) -> bool {
    sample["value"][1].as_str() == Some("NaN")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Writes the bundled plugins where the package metadata takes them from: beside the binary
/// this test run built (target/debug), as `bundled-plugins/`.
fn export_bundled_plugins_beside_the_binary() {
    let binary = forewarn_binary!();
    let dir = binary
        .parent()
        .expect("the profile dir")
        .join("bundled-plugins");
    let exported = run(Command::new(binary)
        .args(["plugin", "export-bundled"])
        .arg(&dir));
    assert!(exported.status.success(), "{}", text(&exported));
}

/// `rpm -qp` with `args` on `package`; its standard output.
fn rpm_query(package: &Path, args: &[&str]) -> String {
    let output = run(Command::new(tool("rpm", "rpm"))
        .arg("-qp")
        .args(args)
        .arg(package));
    assert!(
        output.status.success(),
        "rpm -qp {args:?}: {}",
        text(&output)
    );
    stdout(&output)
}

#[test]
fn rpm_installs_binary_unit_config_and_plugins_and_enables_nothing() {
    // Package the binary this test run built (target/debug), as the .deb test does: the
    // size-optimised, fat-LTO release build takes 7-8 minutes more. The package is built as
    // docs/operations.md says, by packaging/rpm/build.sh (rpmbuild, from Debian's `rpm`).
    tool("rpmbuild", "rpm");
    export_bundled_plugins_beside_the_binary();
    let out = TempDir::new().expect("temp dir");
    let binary_dir = forewarn_binary!().parent().expect("the profile dir");
    let built = run(Command::new("sh")
        .arg(repository_root().join("packaging/rpm/build.sh"))
        .arg(binary_dir)
        .arg(out.path()));
    assert!(
        built.status.success(),
        "packaging/rpm/build.sh failed: {}",
        text(&built)
    );
    let package = std::fs::read_dir(out.path())
        .expect("the output dir")
        .map(|entry| entry.expect("an entry").path())
        .find(|path| path.extension().is_some_and(|ext| ext == "rpm"))
        .expect("a .rpm in the output directory");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        package.file_name().and_then(|name| name.to_str()),
        Some(format!("forewarn-{version}-1.x86_64.rpm").as_str()),
        "the name docs/operations.md and the cloud-init example use"
    );

    let header = rpm_query(
        &package,
        &["--qf", "%{NAME} %{VERSION} %{RELEASE} %{LICENSE}"],
    );
    assert_eq!(header, format!("forewarn {version} 1 Apache-2.0"));
    let modes = rpm_query(
        &package,
        &[
            "--qf",
            "[%{FILEMODES:perms} %{FILEFLAGS:fflags} %{FILENAMES}\n]",
        ],
    );
    for (mode, flags, path) in [
        ("-rwxr-xr-x", "", "/usr/bin/forewarn"),
        ("-rw-r--r--", "", "/usr/lib/systemd/system/forewarn.service"),
        ("-rw-r-----", "cn", "/etc/forewarn/forewarn.toml"),
        ("-rw-r--r--", "", "/etc/forewarn/plugins.d/README"),
        (
            "-rw-r--r--",
            "",
            "/usr/share/forewarn/plugins/lb-drain.wasm",
        ),
        (
            "-rw-r--r--",
            "",
            "/usr/share/forewarn/plugins/lb-drain.toml",
        ),
        (
            "-rw-r--r--",
            "",
            "/usr/share/forewarn/plugins/checkpoint.wasm",
        ),
        (
            "-rw-r--r--",
            "",
            "/usr/share/forewarn/plugins/graceful-shutdown.wasm",
        ),
        ("-rw-r--r--", "", "/usr/share/forewarn/plugins/notify.wasm"),
        ("-rw-r--r--", "", "/usr/share/forewarn/plugins/notify.toml"),
        ("-rw-r--r--", "d", "/usr/share/doc/forewarn/operations.md"),
        ("drwxr-xr-x", "", "/etc/forewarn/plugins.d"),
        ("drwxr-xr-x", "", "/usr/share/forewarn/plugins"),
    ] {
        let line = format!("{mode} {flags} {path}");
        assert!(
            modes.lines().any(|listed| listed == line),
            "`{line}` missing from the .rpm:\n{modes}"
        );
    }
    assert_eq!(
        rpm_query(&package, &["--configfiles"]).trim(),
        "/etc/forewarn/forewarn.toml"
    );
    let requires = rpm_query(&package, &["--requires"]);
    assert!(requires.lines().any(|line| line == "/bin/sh"), "{requires}");
    assert!(requires.contains("libc.so.6"), "{requires}");

    // The scriptlets: systemd learns of the unit, nothing is enabled or started on install;
    // on removal the service is stopped and disabled; on an upgrade restarted if it runs.
    let scripts = rpm_query(&package, &["--scripts"]);
    let scriptlet = |name: &str| -> String {
        scriptlets(&scripts)
            .remove(name)
            .unwrap_or_else(|| panic!("no {name} scriptlet:\n{scripts}"))
    };
    let post = scriptlet("postinstall");
    assert!(post.contains("systemctl daemon-reload"), "{post}");
    let commands: Vec<&str> = post
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .collect();
    for verb in ["enable", "start", "preset"] {
        let call = format!("systemctl {verb}");
        assert!(!commands.iter().any(|line| line.contains(&call)), "{post}");
    }
    let preun = scriptlet("preuninstall");
    assert!(preun.contains("[ \"$1\" -eq 0 ]"), "{preun}");
    assert!(
        preun.contains("systemctl --no-reload disable --now forewarn.service"),
        "{preun}"
    );
    let postun = scriptlet("postuninstall");
    assert!(
        postun.contains("systemctl try-restart forewarn.service"),
        "{postun}"
    );

    // The files themselves, unpacked by rpm's own rpm2archive (into a tar).
    let tar = out.path().join("payload.tar");
    let archived = run(Command::new(tool("rpm2archive", "rpm"))
        .args(["--nocompression", "-"])
        .stdin(std::fs::File::open(&package).expect("the .rpm"))
        .stdout(std::fs::File::create(&tar).expect("payload.tar")));
    assert!(archived.status.success(), "{}", text(&archived));
    let root = TempDir::new().expect("temp dir");
    let untarred = run(Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(root.path()));
    assert!(untarred.status.success(), "{}", text(&untarred));
    let unit = std::fs::read(root.path().join("usr/lib/systemd/system/forewarn.service"))
        .expect("the unit in the .rpm");
    assert_eq!(
        unit,
        std::fs::read(repository_root().join("packaging/forewarn.service")).expect("the unit"),
        "the unit file inside the .rpm is packaging/forewarn.service"
    );
    let config = std::fs::read_to_string(root.path().join("etc/forewarn/forewarn.toml"))
        .expect("the config in the .rpm");
    let example = run(Command::new(forewarn_binary!()).args(["config", "example"]));
    assert_eq!(config, stdout(&example));
    let packaged = run(Command::new(root.path().join("usr/bin/forewarn")).arg("--version"));
    assert!(
        stdout(&packaged).starts_with("forewarn "),
        "{}",
        text(&packaged)
    );
}

/// `rpm -qp --scripts` split by scriptlet: "postinstall" → its text. Each starts with a
/// line `NAME scriptlet (using /bin/sh):`.
fn scriptlets(scripts: &str) -> std::collections::BTreeMap<String, String> {
    let mut found = std::collections::BTreeMap::new();
    let mut current: Option<String> = None;
    for line in scripts.lines() {
        if let Some((name, _)) = line.split_once(" scriptlet (using ") {
            current = Some(name.to_owned());
            continue;
        }
        if let Some(name) = &current {
            let text: &mut String = found.entry(name.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    found
}

/// The files the cloud-init example writes (`write_files`: path → content), read with the
/// YAML library cloud-init itself uses (python3-yaml, a dependency of Debian's cloud-init).
fn cloud_init_files(example: &Path) -> serde_json::Value {
    let output = run(Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sys, yaml\n\
             config = yaml.safe_load(open(sys.argv[1]))\n\
             print(json.dumps({f['path']: f['content'] for f in config['write_files']}))",
        )
        .arg(example));
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).expect("the files as JSON")
}

#[test]
fn cloud_init_example_is_valid_and_its_files_run_a_daemon_that_loads_lb_drain() {
    let example = repository_root().join("packaging/cloud-init/forewarn.yaml");
    let checked = run(Command::new(tool("cloud-init", "cloud-init"))
        .args(["schema", "--config-file"])
        .arg(&example));
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(
        stdout(&checked).contains("Valid cloud-config"),
        "{}",
        text(&checked)
    );

    // The packages it downloads are the ones the packaging builds, at this version.
    let version = env!("CARGO_PKG_VERSION");
    let source = std::fs::read_to_string(&example).expect("the example");
    for name in [
        format!("forewarn_{version}-1_amd64.deb"),
        format!("forewarn-{version}-1.x86_64.rpm"),
    ] {
        assert!(source.contains(&name), "{name} missing from the example");
    }

    // Its configuration and lb-drain's manifest, on a daemon against the simulator: only
    // the paths and the admin address (0.0.0.0:9555 on a VM) are the test's own.
    let files = cloud_init_files(&example);
    let file = |path: &str| {
        files[path]
            .as_str()
            .unwrap_or_else(|| panic!("{path} missing"))
            .to_owned()
    };
    let env = TestEnv::builder(forewarn_binary!())
        .scenario("idle")
        .prepare();
    let dir = env.dir.path();
    let plugins = dir.join("plugins");
    let config = file("/etc/forewarn/forewarn.toml");
    for line in [
        "state-dir = \"/var/lib/forewarn\"",
        "plugin-dir = \"/etc/forewarn/plugins.d\"",
        "listen = \"0.0.0.0:9555\"",
    ] {
        assert!(
            config.contains(line),
            "{line} missing from the example's config"
        );
    }
    let config = config
        .replace(
            "state-dir = \"/var/lib/forewarn\"",
            &format!(
                "vm-name = \"vm-a\"\nstate-dir = \"{}\"",
                dir.join("state").display()
            ),
        )
        .replace(
            "plugin-dir = \"/etc/forewarn/plugins.d\"",
            &format!("plugin-dir = \"{}\"", plugins.display()),
        )
        .replace("listen = \"0.0.0.0:9555\"", "listen = \"127.0.0.1:0\"")
        + &format!("\n[imds]\nurl = \"{}\"\n", env.simulator.base_url);
    std::fs::write(&env.config, config).expect("write the config");
    let checked = run(Command::new(forewarn_binary!())
        .args(["config", "check"])
        .arg(&env.config));
    assert!(checked.status.success(), "{}", text(&checked));
    let bundled = TempDir::new().expect("temp dir");
    let exported = run(Command::new(forewarn_binary!())
        .args(["plugin", "export-bundled"])
        .arg(bundled.path()));
    assert!(exported.status.success(), "{}", text(&exported));
    std::fs::copy(
        bundled.path().join("lb-drain.wasm"),
        plugins.join("lb-drain.wasm"),
    )
    .expect("install lb-drain.wasm as the runcmd does");
    std::fs::write(
        plugins.join("lb-drain.toml"),
        file("/etc/forewarn/plugins.d/lb-drain.toml"),
    )
    .expect("write lb-drain's manifest");

    let daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);
    wait_for(
        WAIT,
        "the daemon to load lb-drain with the example's manifest",
        || {
            let body = http_get(&admin, "/status")?;
            let status: serde_json::Value =
                serde_json::from_str(&body).map_err(|e| e.to_string())?;
            let loaded = status["plugins"]
                .as_array()
                .is_some_and(|plugins| plugins.iter().any(|plugin| plugin["name"] == "lb-drain"));
            let errors = status["load_errors"].as_array().map_or(0, Vec::len);
            if loaded && errors == 0 {
                Ok(())
            } else {
                Err(format!("{body}\n{}", daemon.describe_for_failure()))
            }
        },
    );
}
