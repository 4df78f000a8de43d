#!/usr/bin/env bash
# Refreshes what each SDK package carries from the repository's WIT contract (wit/): the copies
# in sdk/wit (Rust), sdk/python/forewarn/wit and sdk/js/wit, and the C bindings in
# sdk/c/generated (built by host/component-tool). sdk/tests/wit_copies.rs and
# host/component-tool's test fail when one is stale.
set -euo pipefail
repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for copy in sdk/wit sdk/python/forewarn/wit sdk/js/wit; do
    rm -rf "${repo_dir:?}/$copy"
    mkdir -p "$repo_dir/$copy"
    cp "$repo_dir"/wit/*.wit "$repo_dir/$copy/"
done
cargo run --quiet --manifest-path "$repo_dir/Cargo.toml" -p forewarn-component-tool -- \
    c-bindings --wit "$repo_dir/wit" --out-dir "$repo_dir/sdk/c/generated"
echo "refreshed sdk/wit, sdk/python/forewarn/wit, sdk/js/wit and sdk/c/generated from wit/"
