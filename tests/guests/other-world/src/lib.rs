//! Test guest `other-world-guest`: a component of a different world (`test:other/other`,
//! exporting `run`), so the host's check that a plugin implements `event-handler` can fail.

// The `Guest` trait wit-bindgen generates is public and undocumented, and nothing outside this
// test component could read docs on it: missing_docs makes no sense here.
#![allow(missing_docs)]

wit_bindgen::generate!({
    inline: "
        package test:other;

        world other {
            export run: func() -> u32;
        }
    ",
});

struct Other;

impl Guest for Other {
    fn run() -> u32 {
        42
    }
}

export!(Other);
