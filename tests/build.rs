//! Compiles the test guests (tests/guests/*) into wasm components and writes
//! `$OUT_DIR/guests.rs` with a path constant for each (`PROBE`, `OTHER_WORLD`, `NOOP`,
//! `NOTICE`).

use std::path::PathBuf;

/// The guest packages; each constant is the package name without `-guest`.
const GUESTS: &[&str] = &[
    "probe-guest",
    "other-world-guest",
    "noop-guest",
    "notice-guest",
];

fn main() {
    let mut built = forewarn_wasm_build::build_components(GUESTS);
    for component in &mut built {
        component.package = component.package.trim_end_matches("-guest").to_owned();
    }
    let out_dir =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    forewarn_wasm_build::write_constants(&out_dir.join("guests.rs"), &built);
}
