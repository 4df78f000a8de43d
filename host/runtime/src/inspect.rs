//! Looking inside a component before trusting it: is it wasm at all, a component or a core
//! module, what does it import and export, and does it implement the plugin world.

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::LoadError;
use crate::wit::version::WitVersion;
use crate::wit::{self, HANDLER_INTERFACE};

/// What a component imports and exports, for `forewarn plugin check`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentReport {
    /// Hex SHA-256 of the component bytes.
    pub content_hash: String,
    /// Size of the component file.
    pub size_bytes: usize,
    /// The fully qualified names of the interfaces it imports.
    pub imports: Vec<String>,
    /// The fully qualified names of the interfaces it exports.
    pub exports: Vec<String>,
    /// The linear memory its modules define at start, in bytes.
    pub initial_memory_bytes: u64,
}

const WASM_MAGIC: &[u8; 4] = b"\0asm";
const CORE_MODULE_VERSION: [u8; 4] = [0x01, 0x00, 0x00, 0x00];

/// Rejects anything that is not a WebAssembly component, saying what it is instead.
pub(crate) fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.is_empty() {
        return Err(LoadError::NotWasm {
            details: "the file is empty (was it still being written?)".into(),
        });
    }
    if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
        return Err(LoadError::NotWasm {
            details: describe_non_wasm(bytes),
        });
    }
    if bytes[4..8] == CORE_MODULE_VERSION {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

fn describe_non_wasm(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(8)];
    let text = String::from_utf8_lossy(head);
    if text.trim_start().starts_with('(') {
        return "it looks like WebAssembly text (WAT); compile it to a binary component first"
            .into();
    }
    if bytes.len() < 8 && bytes.starts_with(&WASM_MAGIC[..bytes.len().min(4)]) {
        return format!(
            "it is only {} bytes long: the file is truncated (still being copied?)",
            bytes.len()
        );
    }
    format!(
        "it does not start with the WebAssembly magic bytes `\\0asm` (it starts with {})",
        hex::encode(head)
    )
}

/// Lists the component's imports and exports by name.
pub(crate) fn describe(engine: &Engine, component: &Component) -> ComponentReport {
    let component_type = component.component_type();
    ComponentReport {
        imports: component_type
            .imports(engine)
            .map(|(name, _)| name.to_owned())
            .collect(),
        exports: component_type
            .exports(engine)
            .map(|(name, _)| name.to_owned())
            .collect(),
        ..ComponentReport::default()
    }
}

/// The contract version of the handler interface the component exports, read from the export
/// name `forewarn:plugin/handler@x.y.z`. Err when it exports none, or an unreadable version.
pub(crate) fn handler_version(
    engine: &Engine,
    component: &Component,
) -> Result<WitVersion, LoadError> {
    let component_type = component.component_type();
    let exports: Vec<&str> = component_type
        .exports(engine)
        .map(|(name, _)| name)
        .collect();
    let prefix = format!("{HANDLER_INTERFACE}@");
    let Some(version) = exports.iter().find_map(|name| name.strip_prefix(&prefix)) else {
        return Err(not_a_handler(&exports));
    };
    WitVersion::parse(version).ok_or_else(|| wit::unsupported(version.to_owned()))
}

fn not_a_handler(exports: &[&str]) -> LoadError {
    let found = if exports.is_empty() {
        "it exports nothing".to_owned()
    } else {
        format!("it exports {}", quoted_list(exports))
    };
    LoadError::WrongWorld {
        details: format!(
            "it does not export {} ({found})",
            wit::supported_handler_exports()
        ),
    }
}

/// Turns the linker's "import not found" into a message naming the import.
pub(crate) fn explain_import_error(
    engine: &Engine,
    component: &Component,
    error: &wasmtime::Error,
) -> LoadError {
    let details = format!("{error:#}");
    let component_type = component.component_type();
    let unknown = component_type
        .imports(engine)
        .map(|(name, _)| name)
        .find(|name| details.contains(name));
    LoadError::UnknownImport {
        import: unknown
            .map(|name| format!("`{name}`"))
            .unwrap_or_else(|| "an interface".to_owned()),
        hint: import_hint(unknown.unwrap_or_default()).to_owned(),
        details,
    }
}

/// What to change in the build so that the plugin stops importing `import`.
fn import_hint(import: &str) -> &'static str {
    if import.starts_with("wasi:http/") {
        return "plugins make HTTP requests through forewarn's host (`http-send`; the Rust SDK's \
                `host::http`, granted by `http = [\"host:port\"]` in the manifest), not \
                wasi:http. Remove the dependency that imports wasi:http (`cargo tree -i wasi` \
                shows which), then rebuild.";
    }
    if import.starts_with("forewarn:plugin/") {
        return "its parts were built against different contract versions. Build every part \
                with one forewarn-sdk (one version in Cargo.lock), then rebuild.";
    }
    "remove the dependency or WIT world that imports it (build against wit/forewarn.wit, as \
     the SDKs do), then rebuild."
}

/// The bytes of linear memory the component's core modules define at start: the sum of
/// their memories' initial sizes (each module is instantiated once per call). 0 when the
/// bytes cannot be read (compiling them reports why).
pub(crate) fn initial_memory_bytes(bytes: &[u8]) -> u64 {
    let mut total: u64 = 0;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::MemorySection(memories)) = payload else {
            continue;
        };
        for memory in memories.into_iter().flatten() {
            let page = 1u64 << memory.page_size_log2.unwrap_or(16);
            total = total.saturating_add(memory.initial.saturating_mul(page));
        }
    }
    total
}

/// How many linear memories the component's core modules define (imported ones are
/// another module's): each keeps its own pool slot. 0 when the bytes cannot be read.
pub(crate) fn defined_memories(bytes: &[u8]) -> usize {
    wasmparser::Parser::new(0)
        .parse_all(bytes)
        .filter_map(|payload| match payload {
            Ok(wasmparser::Payload::MemorySection(memories)) => Some(memories.count()),
            _ => None,
        })
        .map(|count| usize::try_from(count).unwrap_or(usize::MAX))
        .fold(0, usize::saturating_add)
}

/// Refuses a component whose memory at start is beyond `cap_bytes`: no call could run.
pub(crate) fn check_initial_memory(
    plugin: &str,
    bytes: &[u8],
    cap_bytes: u64,
) -> Result<u64, LoadError> {
    let needed_bytes = initial_memory_bytes(bytes);
    if needed_bytes <= cap_bytes {
        return Ok(needed_bytes);
    }
    Err(LoadError::MemoryAtStart {
        plugin: plugin.to_owned(),
        needed_bytes,
        cap_bytes,
        suggested_mib: (needed_bytes * 2).div_ceil(1024 * 1024),
    })
}

fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_check_names_what_the_file_is() {
        let empty = check_header(b"").unwrap_err().to_string();
        assert!(empty.contains("empty"), "{empty}");
        let text = check_header(b"(component)").unwrap_err().to_string();
        assert!(text.contains("WAT"), "{text}");
        let core = check_header(b"\0asm\x01\0\0\0").unwrap_err();
        assert_eq!(core, LoadError::CoreModule);
        let truncated = check_header(b"\0asm").unwrap_err().to_string();
        assert!(truncated.contains("truncated"), "{truncated}");
        let elf = check_header(b"\x7fELF\x02\x01\x01\0")
            .unwrap_err()
            .to_string();
        assert!(elf.contains("7f454c46"), "{elf}");
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
