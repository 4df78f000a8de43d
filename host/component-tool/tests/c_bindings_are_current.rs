//! The C SDK package carries the C bindings of the WIT contract (sdk/c/generated), so that a
//! plugin builds with clang and wasi-libc alone: they must be what this tool generates from
//! wit/ now. `sdk/sync-generated.sh` refreshes them.

use std::path::Path;

#[test]
fn the_c_sdks_generated_bindings_match_the_wit_contract() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fresh = tempfile::tempdir().expect("temp dir");
    forewarn_component_tool::bindings::write_c_bindings(
        &repo.join("wit"),
        "event-handler",
        fresh.path(),
    )
    .expect("generate");
    let committed = repo.join("sdk/c/generated");
    let mut names: Vec<_> = std::fs::read_dir(fresh.path())
        .expect("read")
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for name in names {
        let generated = std::fs::read(fresh.path().join(&name)).expect("read generated");
        let kept = std::fs::read(committed.join(&name)).unwrap_or_default();
        assert!(
            generated == kept,
            "sdk/c/generated/{} is not what wit/ generates now: run sdk/sync-generated.sh",
            name.to_string_lossy()
        );
    }
}
