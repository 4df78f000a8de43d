//! Fuzz target: the lenient IMDS Scheduled Events document parser must never panic, and a
//! document it accepts must render and parse back to the same document.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(document) = forewarn_imds::parse_document(text) else {
        return;
    };
    let rendered = forewarn_imds::render_document(&document);
    let again = forewarn_imds::parse_document(&rendered)
        .unwrap_or_else(|error| panic!("a rendered document did not parse: {error}\n{rendered}"));
    assert_eq!(again, document, "render + parse changed the document");
});
