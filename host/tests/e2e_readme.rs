//! The README's commands and promises, run as written against the real binary: the example
//! plugin (`sdk/examples/notice.rs`, the code the README quotes) through `forewarn run` with
//! the README's flags, the flags overriding a config file, a plugin granted the daemon's own
//! `imds.url` refused, and the number of built-in scenarios the README states.
//!
//! Each asserts at the simulator (requests, approvals), the admin endpoint (`/status`,
//! `/status/history`) or the files, not on the daemon's word alone.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use forewarn_daemon::log_messages::PLUGIN_LOADED;
use forewarn_daemon::ops::status::StatusSnapshot;
use forewarn_simulator::{StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::harness::{
    Daemon, PREPARE_AT_ONCE, ProbePlugin, Simulator, accepted_approvals, http_get, summarize_state,
    transition_at_unix_ms, wait_for, write_plugin_dir,
};
use forewarn_test_support::{forewarn_binary, guests};

const WAIT: Duration = Duration::from_secs(60);

fn forewarn() -> &'static Path {
    forewarn_binary!()
}

fn status(admin: &str) -> Result<StatusSnapshot, String> {
    let body = http_get(admin, "/status")?;
    serde_json::from_str(&body).map_err(|error| format!("bad /status ({error}): {body}"))
}

/// A config file holding only `[admin] listen = "127.0.0.1:0"` (and `extra`): what the
/// README's `--config /dev/null` gives, except that the admin endpoint takes a free port
/// rather than 9555, which another daemon on a shared test machine may hold.
fn admin_only_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let path = dir.join("forewarn.toml");
    std::fs::write(
        &path,
        format!("{extra}\n[admin]\nlisten = \"127.0.0.1:0\"\n"),
    )
    .expect("write the config");
    path
}

/// The `plugin-answered` and `plugin-log` entries of `plugin` for `event_id` in
/// `/status/history`, and the time of the event's `approved` entry.
struct HistorySeen {
    /// (phase, outcome, reason, at_unix_ms) of each answer, oldest first.
    answers: Vec<(String, String, String, u64)>,
    /// The plugin's own log lines, oldest first.
    log_lines: Vec<String>,
    approved_at: Option<u64>,
}

fn history_of(admin: &str, event_id: &str, plugin: &str) -> Result<HistorySeen, String> {
    let body = http_get(admin, "/status/history")?;
    let history: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    let event = history["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|event| {
            event["event_id"]
                .as_str()
                .is_some_and(|id| id.eq_ignore_ascii_case(event_id))
        })
        .ok_or_else(|| format!("no {event_id} in {body}"))?;
    let entries = event["entries"].as_array().cloned().unwrap_or_default();
    let text = |entry: &serde_json::Value, key: &str| entry[key].as_str().unwrap_or("").to_owned();
    let answers = entries
        .iter()
        .filter(|entry| entry["kind"] == "plugin-answered" && entry["plugin"] == plugin)
        .map(|entry| {
            (
                text(entry, "phase"),
                text(entry, "outcome"),
                text(entry, "reason"),
                entry["at_unix_ms"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let log_lines = entries
        .iter()
        .filter(|entry| entry["kind"] == "plugin-log" && entry["plugin"] == plugin)
        .map(|entry| text(entry, "message"))
        .collect();
    let approved_at = entries
        .iter()
        .find(|entry| entry["kind"] == "approved")
        .and_then(|entry| entry["at_unix_ms"].as_u64());
    Ok(HistorySeen {
        answers,
        log_lines,
        approved_at,
    })
}

fn unix_ms_of(state: &StateSnapshot, event_id: &str, transition: Transition) -> u64 {
    transition_at_unix_ms(state, event_id, transition).unwrap_or_else(|| {
        panic!(
            "no {transition:?} of {event_id}: {}",
            summarize_state(state)
        )
    })
}

/// `forewarn run --config CONFIG --imds-url URL --plugins DIR --state-dir DIR --vm-name vm-a`,
/// the README's flags.
fn run_with_flags(config: &Path, imds_url: &str, plugins: &Path, state_dir: &Path) -> Daemon {
    Daemon::start_with_args(
        forewarn(),
        config,
        &[
            "--imds-url",
            imds_url,
            "--plugins",
            plugins.to_str().expect("UTF-8 path"),
            "--state-dir",
            state_dir.to_str().expect("UTF-8 path"),
            "--vm-name",
            "vm-a",
        ],
    )
}

/// README, "Writing a plugin": the example dropped into a plugin directory, the simulator
/// playing `user-reboot` at 10x, `forewarn run --imds-url … --plugins ./plugins
/// --state-dir … --vm-name vm-a`. The README says: the daemon logs `plugin loaded`, the
/// Reboot's prepare is deferred twice ("finishing the current batch"), approved on the third
/// attempt, approved at IMDS, and the plugin hears `started` and, when the reboot is over,
/// `ended-after-start`. (The reboot runs 10 minutes of scenario time; the test ends it
/// through the simulator's console once the plugin heard `started`.)
#[test]
fn the_readme_example_plugin_runs_as_the_readme_says() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("mkdir plugins");
    std::fs::copy(guests::NOTICE, plugins.join("notice.wasm")).expect("cp notice.wasm plugins/");
    let simulator = Simulator::builder(forewarn())
        .scenario("user-reboot")
        .speed(10.0)
        .start();
    let config = admin_only_config(dir.path(), "");
    let state_dir = dir.path().join("forewarn-state");
    let daemon = run_with_flags(&config, &simulator.base_url, &plugins, &state_dir);
    let admin = daemon.admin_address(WAIT);
    let id = stable_event_id("user-reboot", 0);

    // Deferred twice, approved on the third attempt, then approved at IMDS.
    let state = simulator.wait_for_state(WAIT, "the Reboot approved at IMDS", |state| {
        !accepted_approvals(state, &id).is_empty()
    });
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "{}", summarize_state(&state));
    assert_eq!(approvals[0].vm, "vm-a");
    let seen = wait_for(WAIT, "the plugin to hear `started`", || {
        let seen = history_of(&admin, &id, "notice")?;
        match seen.answers.iter().any(|(phase, ..)| phase == "started") {
            true => Ok(seen),
            false => Err(format!("{:?}", seen.answers)),
        }
    });
    let prepares: Vec<(&str, &str)> = seen
        .answers
        .iter()
        .filter(|(phase, ..)| phase == "prepare")
        .map(|(_, outcome, reason, _)| (outcome.as_str(), reason.as_str()))
        .collect();
    assert_eq!(
        prepares,
        [
            ("defer", "finishing the current batch"),
            ("defer", "finishing the current batch"),
            ("approve", ""),
        ],
        "{:?}",
        seen.answers
    );
    // The order as the daemon's timeline tells it (one recorder stamps both entries as they
    // come, in the order they happened): the approval followed the third answer. The IMDS
    // stamp above cannot be compared with the recorder's, which is taken when the entry
    // reaches the history, after the POST may already have arrived.
    let third_prepare = seen.answers[2].3;
    let approved_at = seen
        .approved_at
        .expect("the status page shows the approval");
    assert!(
        approved_at >= third_prepare,
        "the daemon approved at {approved_at}, before the third prepare answered at \
         {third_prepare}: {:?}",
        seen.answers
    );

    // The reboot is over: the plugin recovers, after the event left the document.
    let started = simulator.wait_for_transition(WAIT, &id, Transition::Started);
    assert!(unix_ms_of(&started, &id, Transition::Started) >= approvals[0].at_unix_ms);
    simulator.end_event(&id);
    let removed = simulator.wait_for_transition(WAIT, &id, Transition::Removed);
    let removed_at = unix_ms_of(&removed, &id, Transition::Removed);
    let seen = wait_for(WAIT, "the plugin to hear `ended-after-start`", || {
        let seen = history_of(&admin, &id, "notice")?;
        match seen
            .answers
            .iter()
            .any(|(phase, ..)| phase == "ended-after-start")
        {
            true => Ok(seen),
            false => Err(format!("{:?}", seen.answers)),
        }
    });
    let phases: Vec<&str> = seen
        .answers
        .iter()
        .map(|(phase, ..)| phase.as_str())
        .filter(|phase| *phase != "prepare")
        .collect();
    assert_eq!(
        phases,
        ["started", "ended-after-start"],
        "{:?}",
        seen.answers
    );
    let recovered_at = seen.answers.last().expect("answers").3;
    assert!(
        recovered_at >= removed_at,
        "recovered before the reboot was over"
    );
    // The plugin's own lines, one per phase it heard: "reboot ID is in phase PHASE".
    for phase in ["prepare", "started", "ended-after-start"] {
        assert!(
            seen.log_lines
                .iter()
                .any(|line| line.to_ascii_lowercase().starts_with("reboot ")
                    && line.ends_with(&format!("is in phase {phase}"))),
            "no `{phase}` line of the plugin's own: {:?}",
            seen.log_lines
        );
    }
    let loaded = daemon.lines_with_message(PLUGIN_LOADED);
    assert!(
        loaded.iter().any(|line| line.text("plugin") == "notice"),
        "the daemon logs `plugin loaded`: {}",
        daemon.describe_for_failure()
    );
}

/// README, "Running forewarn on a VM": `forewarn run --config FILE` with `--imds-url
/// --plugins --state-dir --vm-name` overrides those keys of the file. The file names a
/// closed IMDS port, an empty plugin directory, another state directory and another VM; each
/// flag's effect is checked where it shows: the simulator was polled and approved the event
/// naming vm-a, `/status` names vm-a and lists the flag's plugin, and the journal is written
/// in the flag's state directory. Every check is made, then all failures are reported.
#[test]
fn the_run_flags_override_the_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let simulator = Simulator::builder(forewarn())
        .scenario_text(
            "name = \"flags\"\nend_after = \"1s\"\n\n[[events]]\ntype = \"Reboot\"\n\
             appear_at = \"2s\"\nnotice = \"15m\"\nruns_for = \"5s\"\n",
        )
        .speed(10.0)
        .start();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_url = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let (file_plugins, flag_plugins) = (
        dir.path().join("file-plugins"),
        dir.path().join("flag-plugins"),
    );
    let (file_state, flag_state) = (dir.path().join("file-state"), dir.path().join("flag-state"));
    write_plugin_dir(&file_plugins, Path::new(guests::PROBE), &[]);
    write_plugin_dir(
        &flag_plugins,
        Path::new(guests::PROBE),
        &[ProbePlugin::new("gate", "approve")],
    );
    let config = admin_only_config(
        dir.path(),
        &format!(
            "vm-name = \"vm-z\"\nstate-dir = \"{}\"\nplugin-dir = \"{}\"\n\n[imds]\nurl = \"{closed_url}\"\n\
             poll-interval = \"250ms\"\n\n[policy]\nprepare-lead-time = \"{PREPARE_AT_ONCE}\"\n",
            file_state.display(),
            file_plugins.display()
        ),
    );
    let daemon = run_with_flags(&config, &simulator.base_url, &flag_plugins, &flag_state);
    let admin = daemon.admin_address(WAIT);
    let id = stable_event_id("flags", 0);
    // No wait that panics: with a flag ignored the approval never comes, and every check
    // below should still be made and reported.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut state = simulator.state();
    while accepted_approvals(&state, &id).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        state = simulator.state();
    }
    let status = status(&admin).expect("/status answers");

    let mut failures = Vec::new();
    if state.requests.is_empty() {
        failures.push(format!(
            "--imds-url: the simulator got no request (polled {closed_url}?)"
        ));
    }
    if status.vm_name != "vm-a" {
        failures.push(format!("--vm-name: /status names {:?}", status.vm_name));
    }
    if accepted_approvals(&state, &id).is_empty() {
        failures.push("--vm-name/--imds-url: the Reboot naming vm-a was not approved".to_owned());
    }
    let plugins: Vec<(&str, &str)> = status
        .plugins
        .iter()
        .map(|plugin| (plugin.name.as_str(), plugin.source.as_str()))
        .collect();
    let gate = flag_plugins.join("gate.wasm").display().to_string();
    if plugins != [("gate", gate.as_str())] {
        failures.push(format!(
            "--plugins: /status lists {plugins:?}, not gate from {gate}"
        ));
    }
    if !flag_state.join("journal.log").is_file() {
        failures.push(format!(
            "--state-dir: no journal in {}",
            flag_state.display()
        ));
    }
    if file_state.exists() {
        failures.push(format!(
            "--state-dir: the config's {} was used",
            file_state.display()
        ));
    }
    assert!(
        failures.is_empty(),
        "{failures:#?}\n{}\n{}",
        summarize_state(&state),
        daemon.describe_for_failure()
    );
}

/// README, the sandbox: a plugin's HTTP never reaches IMDS, "the daemon's own imds.url"
/// included. The daemon passes `imds.url` to the runtime's network rules: a plugin whose
/// manifest grants exactly that `host:port` is refused ("not granted", in `/status`), and the
/// simulator receives nothing from it. The same plugin granted another simulator (not
/// `imds.url`) reaches it, so the request would show if it were let through.
#[test]
fn a_plugin_granted_the_imds_address_is_refused_by_the_daemon() {
    let dir = tempfile::tempdir().expect("temp dir");
    let simulator = Simulator::builder(forewarn())
        .scenario_text(
            "name = \"imds-url\"\nend_after = \"1s\"\n\n[[events]]\ntype = \"Reboot\"\n\
             appear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"5s\"\n",
        )
        .speed(10.0)
        .start();
    let elsewhere = Simulator::builder(forewarn()).scenario("idle").start();
    let token_path = "/metadata/identity/oauth2/token?resource=https%3A%2F%2Fstorage.azure.com%2F";
    let asking = |name: &str, target: &Simulator| {
        ProbePlugin::new(name, "http")
            .config("url", &format!("\"{}{token_path}\"", target.base_url))
            .config("headers", "\"Metadata: true\"")
            .capability(&format!("http = [\"{}\"]", target.address()))
    };
    write_plugin_dir(
        &dir.path().join("plugins"),
        Path::new(guests::PROBE),
        &[
            asking("to-imds", &simulator),
            asking("elsewhere", &elsewhere),
        ],
    );
    let config = forewarn_test_support::harness::DaemonConfig::vm_a(
        dir.path(),
        dir.path().join("plugins"),
        &simulator.base_url,
    );
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);
    let daemon = Daemon::start(forewarn(), &config_path);
    let admin = daemon.admin_address(WAIT);

    let reasons = wait_for(WAIT, "both plugins' answers in /status", || {
        let status = status(&admin)?;
        let reason = |plugin: &str| {
            status
                .events
                .iter()
                .flat_map(|event| &event.plugins)
                .find(|decision| decision.plugin == plugin)
                .map(|decision| decision.reason.clone())
        };
        match (reason("to-imds"), reason("elsewhere")) {
            (Some(to_imds), Some(elsewhere)) => Ok((to_imds, elsewhere)),
            _ => Err(format!("{status:?}")),
        }
    });
    let (to_imds, reached) = reasons;
    assert!(
        to_imds.starts_with("http: not granted") && to_imds.contains("imds.url"),
        "the request to imds.url was not refused: {to_imds}"
    );
    assert!(
        to_imds.contains(simulator.address()),
        "the refusal names the address: {to_imds}"
    );
    assert!(
        reached.starts_with("http: status "),
        "the control plugin: {reached}"
    );
    assert!(
        !elsewhere.state().identity_requests().is_empty(),
        "the control plugin's request reached the other simulator"
    );
    let state = simulator.state();
    assert!(
        state.identity_requests().is_empty(),
        "a plugin reached imds.url: {:?}",
        state.identity_requests()
    );
}

/// README, "The IMDS simulator": "Twenty-three scenarios are built in (`--list`…)", and
/// host/simulator/SCENARIOS.md: "Twenty-three are built in". The number in words must be
/// what `forewarn simulate --list` lists.
#[test]
fn the_docs_state_the_number_of_built_in_scenarios() {
    let output = Command::new(forewarn())
        .args(["simulate", "--list"])
        .output()
        .expect("forewarn simulate --list");
    assert!(output.status.success(), "{output:?}");
    let listed = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count();
    for (file, text, marker) in [
        (
            "README.md",
            include_str!("../../README.md"),
            " scenarios are built in",
        ),
        (
            "host/simulator/SCENARIOS.md",
            include_str!("../simulator/SCENARIOS.md"),
            " are built in;",
        ),
    ] {
        // One space between words, as Markdown renders it (the lines wrap anywhere).
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let before = text
            .split(marker)
            .next()
            .filter(|before| before.len() < text.len())
            .unwrap_or_else(|| panic!("{file} does not say how many scenarios{marker}"));
        let word = before.split_whitespace().last().unwrap_or_default();
        let stated = number_in_words(word)
            .unwrap_or_else(|| panic!("{file}: not a number in words: {word:?}"));
        assert_eq!(
            stated, listed,
            "{file} says {stated} scenarios are built in; `forewarn simulate --list` lists {listed}"
        );
    }
}

/// "Twenty-three" → 23 (one to ninety-nine, any case).
fn number_in_words(text: &str) -> Option<usize> {
    const UNITS: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = [
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    let text = text.to_ascii_lowercase();
    let value = |word: &str, table: &[&str]| table.iter().position(|entry| *entry == word);
    match text.split_once('-') {
        Some((tens, unit)) => {
            Some(value(tens, &TENS)? * 10 + value(unit, &UNITS).filter(|u| *u < 10)?)
        }
        None => value(&text, &UNITS).or_else(|| Some(value(&text, &TENS)? * 10)),
    }
}

#[test]
fn numbers_in_words_are_read() {
    assert_eq!(number_in_words("Twenty-three"), Some(23));
    assert_eq!(number_in_words("nineteen"), Some(19));
    assert_eq!(number_in_words("Thirty"), Some(30));
    assert_eq!(number_in_words("twenty-twelve"), None);
    assert_eq!(number_in_words("many"), None);
}
