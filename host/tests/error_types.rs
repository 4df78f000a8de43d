//! Errors are types at the seams: no function of host/'s production code returns
//! `Result<_, String>` (`tests/crate_figures.py --string-errors` counts them; issue 46 took
//! them from 53 to 0). A new one fails here, naming the file.

use std::path::Path;
use std::process::Command;

#[test]
fn no_production_function_in_host_returns_a_string_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("python3")
        .arg("tests/crate_figures.py")
        .arg("--string-errors")
        .current_dir(&root)
        .output()
        .unwrap_or_else(|error| panic!("cannot run python3 tests/crate_figures.py: {error}"));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.trim_end().ends_with("host/: 0 Result<_, String>"),
        "a function returns Result<_, String>: give it a thiserror type naming the problem \
         and the fix (anyhow with context at an edge):\n{text}"
    );
}
