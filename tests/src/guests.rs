//! Paths of the test guest components that build.rs compiled from tests/guests/*:
//! `PROBE` (behaviour chosen by `config("mode")`), `OTHER_WORLD` (wrong world), `NOOP`,
//! `NOTICE` (the README's example plugin, `sdk/examples/notice.rs`).

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    /// `\0asm`, version 0x0d, layer 1: a component, not a core module.
    const COMPONENT_HEADER: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn every_guest_is_a_built_component() {
        let names: Vec<&str> = ALL.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["probe", "other-world", "noop", "notice"]);
        for (name, path) in ALL {
            let bytes = std::fs::read(path)
                .unwrap_or_else(|error| panic!("{name}: cannot read {path}: {error}"));
            assert!(
                bytes.starts_with(COMPONENT_HEADER),
                "{name} ({path}) is not a component: {:02x?}",
                &bytes[..8.min(bytes.len())]
            );
        }
    }

    #[test]
    fn constants_name_distinct_absolute_paths() {
        for path in [PROBE, OTHER_WORLD, NOOP, NOTICE] {
            assert!(std::path::Path::new(path).is_absolute(), "{path}");
            assert!(path.ends_with(".wasm"), "{path}");
        }
        assert_ne!(PROBE, NOOP);
        assert_ne!(PROBE, OTHER_WORLD);
    }
}
