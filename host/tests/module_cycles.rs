//! No module of a workspace crate imports a module that imports it back: runs
//! `module_cycles.py` (beside this file) over every crate's `src/`.

use std::path::Path;
use std::process::Command;

/// The crates whose modules are checked, relative to the workspace root.
const CRATES: &[&str] = &[
    "host/src",
    "host/coordination/src",
    "host/daemon/src",
    "host/etcd/src",
    "host/events/src",
    "host/imds/src",
    "host/manifest/src",
    "host/pipeline/src",
    "host/runtime/src",
    "host/service-manager/src",
    "host/simulator/src",
    "host/supply/src",
    "host/wasm-build/src",
    "sdk/src",
];

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/module_cycles.py");
    let mut failures = Vec::new();
    for krate in CRATES {
        let output = Command::new("python3")
            .arg(&script)
            .arg(root.join(krate))
            .arg("--quiet")
            .output()
            .unwrap_or_else(|error| panic!("cannot run python3 {}: {error}", script.display()));
        if !output.status.success() {
            failures.push(format!(
                "{krate}:{}",
                String::from_utf8_lossy(&output.stdout)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "import cycles:\n{}",
        failures.join("\n")
    );
}
