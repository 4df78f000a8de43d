use super::*;

/// The manifest shown in the top-level README parses (it is what operators copy).
#[test]
fn the_readme_manifest_example_parses() {
    let readme = include_str!("../../../../README.md");
    let start = readme.find("```toml\n").expect("README has a TOML example") + 8;
    let length = readme[start..].find("```").expect("the TOML example ends");
    let manifest = PluginManifest::parse(&readme[start..start + length]).unwrap();
    assert_eq!(manifest.after, ["lb-drain", "checkpoint"]);
    assert_eq!(manifest.capabilities.actions, ["stop-app", "start-app"]);
}

#[test]
fn full_manifest_parses() {
    let manifest = PluginManifest::parse(
        r#"
            subscribe = ["Reboot", "Preempt"]
            after = ["lb-drain"]
            budget = "5s"
            memory = "32MiB"
            prepare-again-on-reschedule = true
            on-failure = "approve"
            [config]
            url = "http://127.0.0.1:8080/checkpoint"
            retries = 3
            [capabilities]
            readiness = true
            http = ["127.0.0.1:8080"]
            actions = ["stop-app"]
            "#,
    )
    .unwrap();
    assert!(manifest.terms().subscribes_to(EventType::Preempt));
    assert!(!manifest.terms().subscribes_to(EventType::Freeze));
    assert!(
        manifest.terms().subscribes_to(EventType::Unknown),
        "an unknown type could be as disruptive as any"
    );
    assert_eq!(manifest.budget, Duration::from_secs(5));
    assert!(manifest.prepare_again_on_reschedule);
    assert!(!PluginManifest::default().prepare_again_on_reschedule);
    assert_eq!(manifest.on_failure, FailurePolicy::Approve);
    let settings = manifest.runtime_settings();
    assert_eq!(settings.memory_limit_bytes, 32 * 1024 * 1024);
    assert_eq!(settings.config["retries"], "3");
    assert!(settings.grants.readiness);
}

#[test]
fn empty_manifest_means_everything_with_defaults() {
    let manifest = PluginManifest::parse("").unwrap();
    for event_type in EventType::KNOWN {
        assert!(manifest.terms().subscribes_to(event_type));
    }
    assert!(manifest.terms().subscribes_to(EventType::Unknown));
    assert_eq!(manifest.budget, DEFAULT_BUDGET);
}

#[test]
fn errors_name_the_line_and_the_key() {
    let error = PluginManifest::parse("budget = \"5s\"\nbudgett = \"1s\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("line 2:"), "{error}");
    assert!(error.contains("budgett"), "{error}");
    let error = PluginManifest::parse("subscribe = [\"Reboo\"]")
        .unwrap_err()
        .to_string();
    assert!(error.contains("Reboo"), "{error}");
    let error = PluginManifest::parse("budget = \"soon\"")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("line 1:"), "{error}");
}

#[test]
fn on_failure_holds_by_default_and_names_the_choices_when_wrong() {
    assert_eq!(PluginManifest::default().on_failure, FailurePolicy::Hold);
    assert_eq!(
        PluginManifest::parse("").unwrap().on_failure,
        FailurePolicy::Hold
    );
    let hold = PluginManifest::parse("on-failure = \"hold\"").unwrap();
    assert_eq!(hold.on_failure, FailurePolicy::Hold);
    let error = PluginManifest::parse("on-failure = \"open\"")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("line 1: key `on-failure`:"), "{error}");
    assert!(
        error.contains("`hold`") && error.contains("`approve`"),
        "{error}"
    );
}

#[test]
fn a_huge_budget_is_refused_naming_the_key_and_the_maximum() {
    let error = PluginManifest::parse("budget = \"18446744073709551615s\"")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("line 1: key `budget`:"), "{error}");
    assert!(error.contains("\"15m\""), "{error}");
    let manifest = PluginManifest::parse("budget = \"15m\"").unwrap();
    assert_eq!(manifest.budget, MAX_BUDGET);
}

#[test]
fn a_huge_memory_cap_is_refused_naming_the_key_the_maximum_and_the_fix() {
    for value in ["64GiB", "1025MiB"] {
        let error = PluginManifest::parse(&format!("memory = \"{value}\""))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("line 1: key `memory`:"), "{error}");
        assert!(error.contains("the maximum \"1GiB\""), "{error}");
        assert!(error.contains("use e.g. \"64MiB\""), "{error}");
    }
    let manifest = PluginManifest::parse("memory = \"1GiB\"").unwrap();
    assert_eq!(manifest.memory, MAX_MEMORY);
    assert_eq!(manifest.runtime_settings().memory_limit_bytes, 1 << 30);
}

#[test]
fn platform_addresses_in_capabilities_http_are_a_load_error_naming_the_entry() {
    for entry in [
        "169.254.169.254:80",
        "2852039166:80",
        "168.63.129.16:80",
        "[fe80::1]:80",
        "[::ffff:169.254.169.254]:80",
    ] {
        let text = format!("[capabilities]\nhttp = [\"127.0.0.1:8080\", \"{entry}\"]\n");
        let error = PluginManifest::parse(&text).unwrap_err().to_string();
        assert!(
            error.starts_with("line 2: key `capabilities.http`:"),
            "{entry}: {error}"
        );
        assert!(error.contains(&format!("\"{entry}\"")), "{entry}: {error}");
        assert!(error.contains("remove the entry"), "{entry}: {error}");
    }
}

#[test]
fn every_error_names_line_and_dotted_key() {
    let cases = [
        (
            "budget = \"5s\"\nbudgett = \"1s\"\n",
            "line 2: key `budgett`:",
        ),
        ("budget = \"soon\"", "line 1: key `budget`:"),
        ("\n\nsubscribe = [\"Reboo\"]", "line 3: key `subscribe`:"),
        ("budget = \"0s\"", "line 1: key `budget`:"),
        (
            "budget = \"18446744073709551615s\"",
            "line 1: key `budget`:",
        ),
        ("budget = \"16m\"", "line 1: key `budget`:"),
        ("prepare-time = \"0s\"", "line 1: key `prepare-time`:"),
        ("prepare-time = \"16m\"", "line 1: key `prepare-time`:"),
        ("memory = \"1KiB\"", "line 1: key `memory`:"),
        ("memory = \"64GiB\"", "line 1: key `memory`:"),
        (
            "[capabilities]\nreadiness = \"yes\"",
            "line 2: key `capabilities.readiness`:",
        ),
        (
            "[capabilities]\nhttp = [\"localhost\"]",
            "line 2: key `capabilities.http`:",
        ),
        (
            "[capabilities]\nroot = true",
            "line 2: key `capabilities.root`:",
        ),
        ("[config]\nlist = [1, 2]", "line 2: key `config.list`:"),
        ("\non-failure = \"ignore\"", "line 2: key `on-failure`:"),
    ];
    for (text, expected) in cases {
        let error = PluginManifest::parse(text).unwrap_err().to_string();
        assert!(error.starts_with(expected), "{text:?} gave {error}");
    }
}

#[test]
fn file_errors_name_the_file() {
    let path = Path::new("/etc/forewarn/plugins.d/lb-drain.toml");
    let error = PluginManifest::from_text(path, "budgett = \"1s\"").unwrap_err();
    let text = error.to_string();
    assert!(
            text.starts_with("invalid plugin manifest /etc/forewarn/plugins.d/lb-drain.toml: line 1: key `budgett`: unknown field `budgett`"),
            "{text}"
        );
    assert_eq!(error.path(), path);
}

/// Loads `text` as the manifest `p.toml` in `dir`.
fn load_in(dir: &Path, text: &str) -> Result<PluginManifest, String> {
    PluginManifest::from_text(&dir.join("p.toml"), text).map_err(|error| error.to_string())
}

/// A CA certificate made once with openssl and committed (supply/fixtures/README.md), so
/// the test needs no openssl when it runs (under Wine too).
const FIXTURE_CA: &str = include_str!("../../../supply/src/fixtures/ca.pem");

#[test]
fn http_ca_file_is_read_at_load_relative_to_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, FIXTURE_CA).unwrap();
    let relative = load_in(dir.path(), "[capabilities]\nhttp-ca-file = \"ca.pem\"\n");
    let grants = relative.unwrap().runtime_settings().grants;
    assert_eq!(grants.http_roots.len(), 1);
    // Quoted as TOML quotes it: a Windows path's backslashes escaped.
    let absolute = format!(
        "[capabilities]\nhttp-ca-file = {}\n",
        toml::Value::String(ca.display().to_string())
    );
    let grants = load_in(dir.path(), &absolute)
        .unwrap()
        .runtime_settings()
        .grants;
    assert_eq!(grants.http_roots.len(), 1);
    let none = PluginManifest::parse("").unwrap().runtime_settings().grants;
    assert!(none.http_roots.is_empty());
}

#[test]
fn a_missing_or_empty_http_ca_file_is_a_load_error_naming_key_path_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.pem"), "no certificate here\n").unwrap();
    for (file, problem) in [
        ("missing.pem", "cannot inspect"),
        ("empty.pem", "holds no PEM certificate"),
    ] {
        let text = format!("budget = \"5s\"\n[capabilities]\nhttp-ca-file = \"{file}\"\n");
        let error = load_in(dir.path(), &text).unwrap_err();
        let path = dir.path().join(file);
        assert!(
            error.contains("line 3: key `capabilities.http-ca-file`: "),
            "{error}"
        );
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains(problem), "{error}");
        assert!(
            error.contains("set it to the PEM file of the CA that signed"),
            "{error}"
        );
    }
}

#[test]
fn http_response_limit_defaults_to_1_mib_and_may_not_pass_64_mib() {
    let limit = |text: &str| {
        let manifest = PluginManifest::parse(text).unwrap();
        manifest.runtime_settings().grants.response_limit().bytes()
    };
    assert_eq!(limit(""), 1024 * 1024);
    assert_eq!(
        limit("[capabilities]\nhttp-response-limit = \"16MiB\""),
        16 * 1024 * 1024
    );
    assert_eq!(
        limit("[capabilities]\nhttp-response-limit = \"64MiB\""),
        64 * 1024 * 1024
    );
    for value in ["65MiB", "1GiB", "0B"] {
        let text = format!("[capabilities]\nhttp-response-limit = \"{value}\"");
        let error = PluginManifest::parse(&text).unwrap_err().to_string();
        assert!(
            error.starts_with("line 2: key `capabilities.http-response-limit`: "),
            "{value}: {error}"
        );
        assert!(error.contains("hard limit of 64.0 MiB"), "{value}: {error}");
        assert!(error.contains("use e.g. \"16MiB\""), "{value}: {error}");
    }
    let error = PluginManifest::parse("[capabilities]\nhttp-response-limit = \"lots\"");
    assert!(
        error
            .unwrap_err()
            .to_string()
            .starts_with("line 2: key `capabilities.http-response-limit`:"),
    );
}

/// The parser reads text from the operator's plugin directory: whatever it holds, the
/// answer is a manifest or an error message, never a panic.
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Lines shaped like a manifest's (keys, tables, values, broken pieces, non-ASCII),
    /// so validation and error location see many near-valid inputs.
    fn manifest_like() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            Just("subscribe = [\"Reboot\", \"*\"]".to_owned()),
            Just("subscribe = [\"Rebooot\"]".to_owned()),
            Just("after = [\"lb-drain\"]".to_owned()),
            Just("budget = \"0s\"".to_owned()),
            Just("budget = \"10s\"".to_owned()),
            Just("memory = \"1KiB\"".to_owned()),
            Just("memory = \"64MiB\"".to_owned()),
            Just("on-failure = \"approve\"".to_owned()),
            Just("[config]".to_owned()),
            Just("[capabilities]".to_owned()),
            Just("http = [\"localhost\"]".to_owned()),
            Just("readiness = \"yes\"".to_owned()),
            Just("é = \"ü\"".to_owned()),
            "[a-z\\[\\]=\" .0-9é€\\\\]{0,16}",
        ];
        prop::collection::vec(line, 0..8).prop_map(|lines| lines.join("\n"))
    }

    proptest! {
        #[test]
        fn any_text_gives_a_manifest_or_an_error(text in any::<String>()) {
            let _ = PluginManifest::parse(&text);
        }

        #[test]
        fn manifest_shaped_text_gives_a_manifest_or_a_message(text in manifest_like()) {
            if let Err(message) = PluginManifest::parse(&text) {
                prop_assert!(!message.to_string().is_empty());
            }
        }
    }
}

/// Issue 45: a grant holding a terminal escape passed the manifest checks and was printed
/// raw by `plugin push`, the install's consent and `plugin list`. Refused at check, naming
/// the key, the entry (escaped) and the fix.
#[test]
fn a_control_character_in_a_grant_is_refused_naming_the_key_and_the_fix() {
    for (text, key) in [
        (
            "[capabilities]\nhttp = [\"127.0.0.1:80\", \"evil\\u001b[2J.example:80\"]\n",
            "line 2: key `capabilities.http`: entry 2",
        ),
        (
            "[capabilities]\nazure-identity = [\"https://vault.azure.net/\\u001b[8m\"]\n",
            "line 2: key `capabilities.azure-identity`: entry 1",
        ),
        (
            "[capabilities]\nactions = [\"stop-app\\u001b]52;c;ZXZpbA==\\u0007\"]\n",
            "line 2: key `capabilities.actions`: entry 1",
        ),
        (
            "after = [\"lb-drain\\n\"]\n",
            "line 1: key `after`: entry 1",
        ),
        (
            "subscribe = [\"Reboot\\u202e\"]\n",
            "line 1: key `subscribe`: entry 1",
        ),
    ] {
        let error = PluginManifest::parse(text).unwrap_err().to_string();
        assert!(error.starts_with(key), "{text}: {error}");
        assert!(error.contains("holds a control character"), "{error}");
        assert!(error.contains("remove it"), "{error}");
        assert!(
            !error.chars().any(char::is_control),
            "the error quotes the value raw: {error:?}"
        );
    }
}
