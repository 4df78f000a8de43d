//! The load errors a plugin author meets, each with its exact message: a core module, a
//! component of another world, a contract version forewarn does not know, an import forewarn
//! does not provide, and a component whose memory at start exceeds the plugin's memory cap.
//!
//! The components are generated here (a small core module built with wasm-encoder, wrapped
//! by wit-component into a component of a WIT world edited for each case).

use forewarn_runtime::{HostServices, LoadError, PluginSettings, Runtime};
use forewarn_test_support::generated::{heap_global, memory_of, wrap_core_module};
use forewarn_test_support::guests::OTHER_WORLD;
use wasm_encoder::{
    CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection, ImportSection,
    MemorySection, Module, TypeSection, ValType,
};

const MIB: u64 = 1024 * 1024;
const WASM_PAGE: u64 = 64 * 1024;
/// forewarn's contract, as the SDKs build against it.
const WIT: &str = include_str!("../../../wit/forewarn.wit");
/// The contract version in `WIT`.
const LATEST: &str = "0.3.0";

/// What the generated plugin is like.
struct Shape<'a> {
    /// The contract version its package declares and its exports name.
    version: &'a str,
    /// Its linear memory at start, in 64 KiB pages.
    initial_pages: u64,
    /// An interface (and function) it imports besides forewarn's host.
    extra_import: Option<(&'a str, &'a str)>,
}

impl Default for Shape<'_> {
    fn default() -> Self {
        Shape {
            version: LATEST,
            initial_pages: 2,
            extra_import: None,
        }
    }
}

/// A core module exporting the handler of `shape.version` (it never runs here).
fn core_module(shape: &Shape<'_>) -> Vec<u8> {
    let i32 = ValType::I32;
    let mut types = TypeSection::new();
    types.ty().function([i32; 4], [i32]); // 0: cabi_realloc
    types.ty().function([i32], [i32]); // 1: on-event
    types
        .ty()
        .function([i32, i32, i32, i32, i32, i32, ValType::I64], []); // 2: on-start
    types.ty().function([], []); // 3: the extra import
    let mut imports = ImportSection::new();
    let mut first_own_function = 0;
    if let Some((interface, function)) = shape.extra_import {
        imports.import(interface, function, EntityType::Function(3));
        first_own_function = 1;
    }
    let mut functions = FunctionSection::new();
    for signature in 0..3 {
        functions.function(signature);
    }
    let mut memories = MemorySection::new();
    memories.memory(memory_of(shape.initial_pages));
    let globals = heap_global(1024);
    let handler = format!("forewarn:plugin/handler@{}", shape.version);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("cabi_realloc", ExportKind::Func, first_own_function);
    exports.export(
        &format!("{handler}#on-event"),
        ExportKind::Func,
        first_own_function + 1,
    );
    exports.export(
        &format!("{handler}#on-start"),
        ExportKind::Func,
        first_own_function + 2,
    );
    let mut code = CodeSection::new();
    for body in [returning(1024), returning(16)] {
        code.function(&body);
    }
    let mut on_start = Function::new([]);
    on_start.instructions().end();
    code.function(&on_start);
    let mut module = Module::new();
    module.section(&types);
    if shape.extra_import.is_some() {
        module.section(&imports);
    }
    module
        .section(&functions)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code);
    module.finish()
}

fn returning(value: i32) -> Function {
    let mut function = Function::new([]);
    function.instructions().i32_const(value).end();
    function
}

/// forewarn's WIT edited for `shape`: its version, and the extra import in the world.
fn wit_for(shape: &Shape<'_>) -> String {
    let mut wit = WIT.replace(
        &format!("package forewarn:plugin@{LATEST};"),
        &format!("package forewarn:plugin@{};", shape.version),
    );
    if let Some((interface, function)) = shape.extra_import {
        // `wasi:http/outgoing-handler@0.2.0`: package `wasi:http@0.2.0`, interface
        // `outgoing-handler`.
        let (package, rest) = interface.split_once('/').expect("package/interface");
        let (name, version) = rest
            .split_once('@')
            .map_or((rest, None), |(n, v)| (n, Some(v)));
        let package = match version {
            Some(version) => format!("{package}@{version}"),
            None => package.to_owned(),
        };
        wit = wit.replace(
            "world event-handler {",
            &format!("world event-handler {{\n    import {interface};"),
        );
        wit.push_str(&format!(
            "\npackage {package} {{\n    interface {name} {{\n        {function}: func();\n    }}\n}}\n"
        ));
    }
    wit
}

/// The component: the core module wrapped for the edited world.
fn component(shape: &Shape<'_>) -> Vec<u8> {
    wrap_core_module(&wit_for(shape), "event-handler", core_module(shape))
}

fn runtime() -> Runtime {
    Runtime::new(Default::default(), HostServices::default()).expect("a runtime")
}

fn load_error(bytes: &[u8], settings: PluginSettings) -> LoadError {
    match runtime().load("my-plugin", bytes, settings) {
        Ok(_) => panic!("the plugin loaded"),
        Err(error) => error,
    }
}

#[test]
fn a_well_formed_generated_plugin_loads() {
    // The baseline the cases below change one thing of: without the change, it loads.
    let loaded = runtime().load(
        "my-plugin",
        &component(&Shape::default()),
        PluginSettings::default(),
    );
    assert!(loaded.is_ok(), "{:?}", loaded.err());
}

#[test]
fn a_core_module_is_told_to_build_a_component() {
    let error = load_error(&core_module(&Shape::default()), PluginSettings::default());
    assert_eq!(
        error.to_string(),
        "this is a core WebAssembly module, not a component. Build the plugin for the \
         `wasm32-wasip2` target (`cargo build --target wasm32-wasip2 --release`), or wrap a \
         core module with `wasm-tools component new`"
    );
}

#[test]
fn a_component_of_another_world_names_what_it_exports_instead() {
    let bytes = std::fs::read(OTHER_WORLD).expect("the other-world guest is built");
    let error = load_error(&bytes, PluginSettings::default());
    assert_eq!(
        error.to_string(),
        "the component does not implement forewarn's plugin world \
         `forewarn:plugin/event-handler` (0.1.0, 0.2.0 or 0.3.0): it does not export \
         `forewarn:plugin/handler@0.1.0` or `forewarn:plugin/handler@0.2.0` or \
         `forewarn:plugin/handler@0.3.0` (it exports `run`). \
         Build it against wit/forewarn.wit (the Rust SDK forewarn-sdk does this for you)"
    );
}

#[test]
fn an_unknown_contract_version_names_it_and_the_supported_ones() {
    let bytes = component(&Shape {
        version: "0.9.0",
        ..Shape::default()
    });
    let error = load_error(&bytes, PluginSettings::default());
    assert_eq!(
        error.to_string(),
        "the plugin was built against forewarn:plugin@0.9.0, which this forewarn does not \
         support; it supports forewarn:plugin@0.1.0, forewarn:plugin@0.2.0, \
         forewarn:plugin@0.3.0. Rebuild the plugin with a forewarn-sdk for one of \
         those, or upgrade forewarn"
    );
}

#[test]
fn an_import_forewarn_does_not_provide_is_named_with_what_to_change() {
    let bytes = component(&Shape {
        extra_import: Some(("wasi:http/outgoing-handler@0.2.0", "handle")),
        ..Shape::default()
    });
    let error = load_error(&bytes, PluginSettings::default());
    let LoadError::UnknownImport { import, .. } = &error else {
        panic!("not an unknown import: {error}");
    };
    assert_eq!(import, "`wasi:http/outgoing-handler@0.2.0`");
    assert_eq!(
        error.to_string().split(" Details: ").next(),
        Some(
            "the component imports `wasi:http/outgoing-handler@0.2.0`, which forewarn does not \
             provide: plugins make HTTP requests through forewarn's host (`http-send`; the \
             Rust SDK's `host::http`, granted by `http = [\"host:port\"]` in the manifest), not \
             wasi:http. Remove the dependency that imports wasi:http (`cargo tree -i wasi` \
             shows which), then rebuild. Plugins may import only `forewarn:plugin/host` of \
             their contract version (0.1.0, 0.2.0 or 0.3.0) and WASI 0.2 interfaces (wasi:cli, \
             wasi:clocks, wasi:random, wasi:io, wasi:filesystem, wasi:sockets — all \
             sandboxed)."
        )
    );
}

#[test]
fn any_other_unknown_import_is_named_with_how_to_find_its_source() {
    let bytes = component(&Shape {
        extra_import: Some(("example:nope/thing", "ping")),
        ..Shape::default()
    });
    let error = load_error(&bytes, PluginSettings::default());
    assert_eq!(
        error.to_string().split(" Details: ").next(),
        Some(
            "the component imports `example:nope/thing`, which forewarn does not provide: \
             remove the dependency or WIT world that imports it (build against \
             wit/forewarn.wit, as the SDKs do), then rebuild. Plugins may import only \
             `forewarn:plugin/host` of their contract version (0.1.0, 0.2.0 or 0.3.0) and WASI 0.2 \
             interfaces (wasi:cli, wasi:clocks, wasi:random, wasi:io, wasi:filesystem, \
             wasi:sockets — all sandboxed)."
        )
    );
}

#[test]
fn memory_at_start_beyond_the_cap_names_both_and_the_manifest_key() {
    let pages = 96 * MIB / WASM_PAGE;
    let bytes = component(&Shape {
        initial_pages: pages,
        ..Shape::default()
    });
    let settings = PluginSettings {
        memory_limit_bytes: 64 * MIB,
        ..PluginSettings::default()
    };
    let error = load_error(&bytes, settings);
    assert_eq!(
        error.to_string(),
        "the component needs 96.0 MiB of linear memory as soon as it starts, more than its \
         memory cap of 64.0 MiB: raise `memory` in my-plugin.toml (e.g. `memory = \"192MiB\"`), \
         or build the plugin with less initial memory"
    );
    // Under a cap that fits, the same component loads.
    let roomy = PluginSettings {
        memory_limit_bytes: 128 * MIB,
        ..PluginSettings::default()
    };
    assert!(runtime().load("my-plugin", &bytes, roomy).is_ok());
}
