//! Compiles the bundled plugins (plugins/*) into wasm components and writes, in OUT_DIR,
//! `bundled.rs` (a path constant per plugin) and `bundled_wasm.rs` (its bytes, embedded).

use std::path::PathBuf;

/// The plugins shipped inside the forewarn binary.
const BUNDLED: &[&str] = &["lb-drain", "checkpoint", "graceful-shutdown", "notify"];

fn main() {
    let built = forewarn_wasm_build::build_components(BUNDLED);
    let out_dir =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    forewarn_wasm_build::write_constants(&out_dir.join("bundled.rs"), &built);
    forewarn_wasm_build::write_embedded(&out_dir.join("bundled_wasm.rs"), &built);
}
