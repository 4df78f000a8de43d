//! Recognising a WebAssembly component (as opposed to a core module) by its header, for
//! tests that check what the build produced without wasm-tools.

/// The first eight bytes of every component: `\0asm`, then version 0x0d and layer 1.
pub const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// Whether `bytes` starts like a WebAssembly component.
pub fn is_component(bytes: &[u8]) -> bool {
    bytes.starts_with(&COMPONENT_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_component_header() {
        let mut bytes = COMPONENT_HEADER.to_vec();
        bytes.extend_from_slice(&[0x01, 0x02]);
        assert!(is_component(&bytes));
    }

    #[test]
    fn rejects_core_modules_and_garbage() {
        let core_module = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        assert!(!is_component(&core_module));
        assert!(!is_component(b"\0asm"));
        assert!(!is_component(b"not wasm at all"));
        assert!(!is_component(&[]));
    }
}
