//! The raw bindings wit-bindgen generates from `wit/forewarn.wit` (world `event-handler`).
//! Plugin authors use the tidy re-exports at the crate root instead of this module.

wit_bindgen::generate!({
    path: "wit",
    world: "event-handler",
    // The generated code and the export macro name wit-bindgen through this crate, so a
    // plugin needs no direct dependency on wit-bindgen.
    runtime_path: "forewarn_sdk::__private::wit_bindgen::rt",
    default_bindings_module: "forewarn_sdk::bindings",
    pub_export_macro: true,
    export_macro_name: "__export_event_handler",
    additional_derives: [PartialEq, Eq, Hash, Clone],
    // Our own type, so it can carry a Display written for people rather than Debug output.
    with: {
        "forewarn:plugin/host@0.3.0/host-error": crate::error::HostError,
    },
});
