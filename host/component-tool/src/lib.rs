//! The two build steps a C plugin needs, as library calls: the C bindings of the WIT contract
//! (`wit-bindgen c`, feature `c-bindings`) and a core wasm module wrapped into a component
//! (`wasm-tools component new`). The forewarn binary links the second for
//! `forewarn sdk component-new`.
#[cfg(feature = "c-bindings")]
pub mod bindings;
pub mod component;
