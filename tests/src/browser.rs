//! Running `tests/browser/pages.mjs` (puppeteer-core driving Debian's headless Chromium, both
//! installed by `tests/install-browser.sh`, which `tests/run.sh` calls).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::repository_root;

/// Debian's Chromium, which `tests/run.sh` installs.
pub fn chromium() -> PathBuf {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|candidate| candidate.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "headless Chromium is missing: run `bash tests/run.sh` (installs Debian's chromium) or `bash tests/install-browser.sh`"
        )
    })
}

/// The browser script, after checking its npm dependency is installed.
pub fn pages_script() -> PathBuf {
    let browser_dir = repository_root().join("tests/browser");
    let puppeteer = browser_dir.join("node_modules/puppeteer-core/package.json");
    assert!(
        puppeteer.is_file(),
        "puppeteer-core is missing from tests/browser/node_modules: run `bash tests/install-browser.sh` (tests/run.sh does)"
    );
    browser_dir.join("pages.mjs")
}

/// Where a run leaves its screenshots for a person to look at.
pub fn screenshot_dir() -> PathBuf {
    repository_root().join("tests/browser/screenshots")
}

/// `node pages.mjs` with the browser and the screenshot directory set; the caller adds the
/// rest of its environment.
pub fn pages_command() -> Command {
    let mut command = Command::new("node");
    command
        .arg(pages_script())
        .env("FOREWARN_CHROMIUM", chromium())
        .env("FOREWARN_SCREENSHOT_DIR", screenshot_dir());
    command
}

/// What `pages.mjs` saw of the status page at `admin` (`host:port`), run with `vars` (its
/// mode: `FOREWARN_OUTCOMES`, `FOREWARN_FLEET_VMS`, …) and waiting at most `wait`: the one
/// JSON object it prints. Panics with its stderr when the browser run fails.
pub fn status_page_seen(
    admin: &str,
    vars: &[(&str, &str)],
    wait: std::time::Duration,
) -> serde_json::Value {
    let output = pages_command()
        .env("FOREWARN_STATUS_URL", format!("http://{admin}/"))
        .env("FOREWARN_WAIT_MS", wait.as_millis().to_string())
        .envs(vars.iter().copied())
        .output()
        .expect("run node (tests/run.sh installs Node.js when missing)");
    assert!(
        output.status.success(),
        "the browser run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "pages.mjs printed no JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Checks that `path` is a PNG with content.
pub fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000,
        "{} is not a screenshot with content ({} bytes)",
        path.display(),
        bytes.len()
    );
}
