# bindings.sh — sourced by build.sh and test.sh: `c_bindings DIR` writes the C bindings of
# wit/forewarn.wit (event_handler.{h,c} and the component-type object) into DIR, with the
# component tool FOREWARN_COMPONENT_TOOL if set, else built by cargo (cached after the first
# build, which takes ~2.5 min on two cores). Needs $repo_dir.
c_bindings() {
    local tool="${FOREWARN_COMPONENT_TOOL:-}"
    if [[ -z "$tool" ]]; then
        cargo build --quiet --manifest-path "$repo_dir/Cargo.toml" -p forewarn-component-tool
        tool="$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo_dir/Cargo.toml" \
            | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/forewarn-component-tool"
    fi
    component_tool="$tool"
    "$tool" c-bindings --wit "$repo_dir/wit" --out-dir "$1"
}
