//! forewarn-pipeline and forewarn-events stay pure: what they depend on is within an
//! allow-list, and nothing those dependencies pull in (as Cargo.lock resolves them) does
//! I/O, runs an async runtime or embeds wasm. With tokio, reqwest, hyper, wasmtime or
//! notify out of the dependency graph, a `use` of them does not compile: the compiler is the
//! guard; clippy.toml beside Cargo.toml forbids what std itself offers (the clock, files,
//! processes, threads). Reads the manifests and the lock file only: no cargo invocation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What forewarn-pipeline may depend on (`toml` only under the `harness` feature).
const PIPELINE_ALLOWED: &[&str] = &[
    "forewarn-events",
    "serde",
    "thiserror",
    "tracing",
    "humantime",
    "humantime-serde",
    "chrono",
    "toml",
];

/// What forewarn-events may depend on.
const EVENTS_ALLOWED: &[&str] = &["serde", "thiserror"];

/// Crates that do I/O, run tasks, watch files or run wasm, and the daemon's crates built on
/// them: none may appear anywhere below the two pure crates.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "tokio-util",
    "mio",
    "socket2",
    "reqwest",
    "hyper",
    "hyper-util",
    "axum",
    "wasmtime",
    "wasmtime-wasi",
    "notify",
    "forewarn-imds",
    "forewarn-runtime",
    "forewarn-etcd",
    "forewarn-platform",
    "forewarn-simulator",
    "forewarn-host",
];

/// chrono features that read the clock or the time zone from the system.
const CHRONO_CLOCK_FEATURES: &[&str] = &["clock", "now", "default", "wasmbind"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test reads the manifests; the pipeline's own code reads no file"
)]
fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    text.parse()
        .unwrap_or_else(|error| panic!("{} is not TOML: {error}", path.display()))
}

/// A dependency as its manifest declares it: the package's name and its entry, with a
/// `workspace = true` entry completed from the root's `[workspace.dependencies]`.
#[derive(Debug)]
struct Declared {
    section: String,
    package: String,
    features: BTreeSet<String>,
    default_features: bool,
}

fn strings(value: Option<&toml::Value>) -> BTreeSet<String> {
    value
        .and_then(toml::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn declared(section: &str, key: &str, entry: &toml::Value, root: &toml::Table) -> Declared {
    let table = entry.as_table();
    let inherits = table
        .and_then(|table| table.get("workspace"))
        .and_then(toml::Value::as_bool)
        == Some(true);
    let mut dependency = match inherits {
        true => {
            let inherited = root
                .get("workspace")
                .and_then(|workspace| workspace.get("dependencies"))
                .and_then(|dependencies| dependencies.get(key))
                .unwrap_or_else(|| panic!("{key} is not in [workspace.dependencies]"));
            declared(section, key, inherited, root)
        }
        false => Declared {
            section: section.to_owned(),
            package: key.to_owned(),
            features: BTreeSet::new(),
            default_features: true,
        },
    };
    let Some(table) = table else {
        return dependency; // `name = "1"`
    };
    if let Some(package) = table.get("package").and_then(toml::Value::as_str) {
        dependency.package = package.to_owned();
    }
    dependency.features.extend(strings(table.get("features")));
    if let Some(default) = table.get("default-features").and_then(toml::Value::as_bool) {
        dependency.default_features &= default;
    }
    dependency
}

/// Every dependency that reaches the built crate: `[dependencies]`, `[build-dependencies]`
/// and their `[target.'…'.…]` forms (dev-dependencies build only the crate's tests).
fn dependencies(manifest: &toml::Table, root: &toml::Table) -> Vec<Declared> {
    let mut tables: Vec<(String, &toml::Table)> = Vec::new();
    for section in ["dependencies", "build-dependencies"] {
        if let Some(table) = manifest.get(section).and_then(toml::Value::as_table) {
            tables.push((section.to_owned(), table));
        }
    }
    let targets = manifest.get("target").and_then(toml::Value::as_table);
    for (cfg, target) in targets.into_iter().flatten() {
        for section in ["dependencies", "build-dependencies"] {
            if let Some(table) = target.get(section).and_then(toml::Value::as_table) {
                tables.push((format!("target.{cfg}.{section}"), table));
            }
        }
    }
    tables
        .into_iter()
        .flat_map(|(section, table)| {
            table
                .iter()
                .map(move |(key, entry)| declared(&section, key, entry, root))
        })
        .collect()
}

/// The packages each registry package depends on, as Cargo.lock records them (the union
/// over every feature the workspace turns on: an over-approximation, the safe side here).
/// The workspace's own crates (no `source`) get no edges: the lock lists their
/// dev-dependencies too, and their [dependencies] are checked from their manifests (the
/// one on the allow-list, forewarn-events, by its own test below).
fn lock_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let lock = read_toml(&root.join("Cargo.lock"));
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let packages = lock.get("package").and_then(toml::Value::as_array);
    for package in packages.into_iter().flatten() {
        let Some(name) = package.get("name").and_then(toml::Value::as_str) else {
            continue;
        };
        let edges = graph.entry(name.to_owned()).or_default();
        if package.get("source").is_none() {
            continue;
        }
        for dependency in strings(package.get("dependencies")) {
            // "name" or "name version" when the lock holds two versions of it.
            let name = dependency.split(' ').next().unwrap_or_default();
            edges.insert(name.to_owned());
        }
    }
    graph
}

/// The forbidden packages reachable from `start`, each with the path that reaches it.
fn forbidden_below(start: &[String], graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    let mut queue: Vec<Vec<String>> = start.iter().map(|name| vec![name.clone()]).collect();
    while let Some(path) = queue.pop() {
        let name = path.last().cloned().unwrap_or_default();
        if !seen.insert(name.clone()) {
            continue;
        }
        if FORBIDDEN.contains(&name.as_str()) {
            found.push(path.join(" -> "));
            continue;
        }
        for next in graph.get(&name).into_iter().flatten() {
            let mut longer = path.clone();
            longer.push(next.clone());
            queue.push(longer);
        }
    }
    found
}

/// What is wrong with `crate_dir`'s dependencies, one line each.
fn violations(crate_dir: &str, allowed: &[&str]) -> Vec<String> {
    let root_dir = workspace_root();
    let root = read_toml(&root_dir.join("Cargo.toml"));
    let manifest = read_toml(&root_dir.join(crate_dir).join("Cargo.toml"));
    let declared = dependencies(&manifest, &root);
    let mut problems = Vec::new();
    for dependency in &declared {
        if !allowed.contains(&dependency.package.as_str()) {
            problems.push(format!(
                "{crate_dir}/Cargo.toml: [{}] {} is not on the allow-list {allowed:?}; the \
                 pipeline stays pure: do the I/O in forewarn-host and hand the pipeline plain data",
                dependency.section, dependency.package,
            ));
        }
        if dependency.package == "chrono" {
            let clock: Vec<&str> = CHRONO_CLOCK_FEATURES
                .iter()
                .copied()
                .filter(|feature| {
                    dependency.features.contains(*feature)
                        || (*feature == "default" && dependency.default_features)
                })
                .collect();
            if !clock.is_empty() {
                problems.push(format!(
                    "{crate_dir}/Cargo.toml: chrono with {clock:?} reads the system clock or \
                     time zone; declare it with default-features = false and features = [\"std\"]"
                ));
            }
        }
    }
    let names: Vec<String> = declared.iter().map(|d| d.package.clone()).collect();
    for path in forbidden_below(&names, &lock_graph(&root_dir)) {
        problems.push(format!(
            "{crate_dir} reaches {path} (Cargo.lock): that crate does I/O, runs tasks or wasm"
        ));
    }
    problems
}

#[test]
fn the_pipeline_depends_only_on_pure_crates() {
    let problems = violations("host/pipeline", PIPELINE_ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_event_types_depend_only_on_pure_crates() {
    let problems = violations("host/events", EVENTS_ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_sees_a_forbidden_dependency() {
    // The same check on a crate that does I/O finds it: it is not vacuous.
    let problems = violations("host/imds", PIPELINE_ALLOWED);
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains("] tokio is not on the allow-list")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains("reaches reqwest")),
        "{problems:#?}"
    );
}

#[test]
fn a_forbidden_crate_two_levels_down_is_found() {
    let graph = BTreeMap::from([
        (
            "tracing".to_owned(),
            BTreeSet::from(["pin-project-lite".to_owned()]),
        ),
        ("chatty".to_owned(), BTreeSet::from(["middle".to_owned()])),
        ("middle".to_owned(), BTreeSet::from(["tokio".to_owned()])),
    ]);
    let start = ["tracing".to_owned(), "chatty".to_owned()];
    assert_eq!(
        forbidden_below(&start, &graph),
        ["chatty -> middle -> tokio"]
    );
}
