//! Fuzz target: the plugin manifest parser (`NAME.toml` beside a plugin) must never panic on
//! any text; it answers a manifest or an error message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = forewarn_manifest::PluginManifest::parse(text);
});
