//! Test guest `notice-guest`: the plugin example the README shows, compiled from the very
//! file the README quotes (`sdk/tests/readme.rs` keeps the two identical), so that
//! `host/tests/e2e_readme.rs` runs the README's example end to end.

#[path = "../../../../sdk/examples/notice.rs"]
mod notice;
