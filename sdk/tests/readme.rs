//! Keeps the plugin example in the top-level README identical to `examples/notice.rs`,
//! which cargo compiles on every test run, so the README never shows code that does not build.

#[test]
fn readme_quotes_the_compiled_example_verbatim() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../examples/notice.rs");
    assert!(
        readme.contains(&format!("```rust\n{example}```")),
        "README.md's Rust example differs from sdk/examples/notice.rs: copy the file into the README"
    );
}
