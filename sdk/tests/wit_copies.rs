//! Each SDK package carries the WIT contract it binds (a registry package cannot reach the
//! repository's `wit/`): `sdk/wit` (this crate), `sdk/python/forewarn/wit`, `sdk/js/wit`. They
//! must stay byte-for-byte copies of `wit/`; `sdk/sync-generated.sh` refreshes them.

use std::path::Path;

const COPIES: [&str; 3] = ["wit", "python/forewarn/wit", "js/wit"];

#[test]
fn every_sdk_carries_an_exact_copy_of_the_wit_contract() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"));
    let contract = sdk.join("../wit");
    let mut names: Vec<_> = std::fs::read_dir(&contract)
        .expect("the repository's wit/")
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for copy in COPIES {
        let mut copied: Vec<_> = std::fs::read_dir(sdk.join(copy))
            .unwrap_or_else(|error| panic!("sdk/{copy}: {error}: run sdk/sync-generated.sh"))
            .flatten()
            .map(|entry| entry.file_name())
            .collect();
        copied.sort();
        assert_eq!(
            copied, names,
            "sdk/{copy} lists other files than wit/: run sdk/sync-generated.sh"
        );
        for name in &names {
            let original = std::fs::read(contract.join(name)).expect("read wit/");
            let copied = std::fs::read(sdk.join(copy).join(name)).expect("read the copy");
            assert!(
                original == copied,
                "sdk/{copy}/{} differs from wit/{}: run sdk/sync-generated.sh",
                name.to_string_lossy(),
                name.to_string_lossy()
            );
        }
    }
}
