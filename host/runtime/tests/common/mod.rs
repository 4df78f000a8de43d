//! Helpers shared by the runtime's integration tests.
//! `wrap_core_module` turns a hand-built core module into a component of a WIT world.

/// The core module wrapped into a component of `world` from the WIT text `wit`.
pub(crate) fn wrap_core_module(wit: &str, world: &str, mut module: Vec<u8>) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str("forewarn.wit", wit)
        .expect("the WIT parses");
    let world = resolve
        .select_world(&[package], Some(world))
        .expect("the world exists");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("the core module is accepted")
        .validate(true)
        .encode()
        .expect("the component encodes")
}
